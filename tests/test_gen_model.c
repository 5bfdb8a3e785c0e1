/*
 * test_gen_model.c — the GGUF writer and lc_model_generate: a generated "tiny" model (bf16 and
 * q8_0) reads back with the expected metadata and tensor table, loads, runs a prompt with
 * finite logits; files are a function of the seed; the Q8_0 quantiser is within d/2 of the
 * input per block (checked through lc_dequantize); write failures are LC_ERR_IO naming the
 * path.
 */
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "format/quant.h"
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *tmp_path(const char *tag) {
    static int n = 0;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char *p = malloc(512);
    snprintf(p, 512, "%s/lc_test_gen_%d_%d_%s.gguf", dir, (int)getpid(), n++, tag);
    return p;
}

static bool files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool  eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static int64_t progress_last = 0, progress_total = 0;
static void on_progress(int64_t done, int64_t total, void *user) {
    (void)user;
    progress_last  = done;
    progress_total = total;
}

static void check_tiny_file(const char *path, uint32_t wtype) {
    lc_gguf *g = NULL;
    CHECK(lc_gguf_open(path, &g) == LC_OK);
    if (!g) return;
    CHECK(lc_gguf_version(g) == 3);
    CHECK(lc_gguf_alignment(g) == 32);
    const char *s;
    size_t      l;
    CHECK(lc_gguf_get_str(g, "general.architecture", &s, &l) == LC_OK && l == 5 &&
          memcmp(s, "llama", 5) == 0);
    uint32_t u;
    CHECK(lc_gguf_get_u32(g, "llama.block_count", &u) == LC_OK && u == 2);
    CHECK(lc_gguf_get_u32(g, "llama.embedding_length", &u) == LC_OK && u == 64);
    CHECK(lc_gguf_get_u32(g, "llama.attention.head_count_kv", &u) == LC_OK && u == 2);
    float f;
    CHECK(lc_gguf_get_f32(g, "llama.rope.freq_base", &f) == LC_OK && f == 10000.0f);
    lc_gguf_type et;
    uint64_t     n;
    CHECK(lc_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) == LC_OK &&
          et == LC_GGUF_TYPE_STRING && n == 512);
    CHECK(lc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 256, &s, &l) == LC_OK && l == 17 &&
          memcmp(s, "<|begin_of_text|>", 17) == 0);
    /* token_embd, 2 x 9 per layer, output_norm, output */
    CHECK(lc_gguf_n_tensors(g) == 1 + 18 + 2);
    const lc_gguf_tensor *t = lc_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->type == wtype);
    t = lc_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    CHECK(t && t->ne[0] == 128 && t->ne[1] == 64 && t->type == wtype && t->offset % 32 == 0);
    t = lc_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    CHECK(t && t->n_dims == 1 && t->type == LC_TYPE_F32 && t->ne[0] == 64);
    if (t) {
        float v;
        memcpy(&v, t->data, 4);
        CHECK(v == 1.0f);
    }
    t = lc_gguf_find_tensor(g, "blk.0.attn_k.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 32);
    if (t) { /* weights look like N(0, 0.02) */
        float *x = malloc(64 * 32 * sizeof(float));
        CHECK(lc_dequantize(t->type, t->data, x, 64 * 32) == LC_OK);
        double s2 = 0, s1 = 0;
        for (int i = 0; i < 64 * 32; i++) s1 += x[i], s2 += (double)x[i] * x[i];
        double sd = sqrt(s2 / (64 * 32) - (s1 / (64 * 32)) * (s1 / (64 * 32)));
        CHECKF(sd > 0.017 && sd < 0.023, "std %g", sd);
        free(x);
    }
    CHECK(lc_gguf_find_tensor(g, "output.weight") != NULL);
    lc_gguf_close(g);
}

static void run_model(const char *path, int32_t n_layer, int32_t n_vocab, int32_t head_dim,
                      bool bos) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 2;
    lc_model *m        = NULL;
    int       st       = lc_model_load(path, &mp, &m);
    CHECKF(st == LC_OK, "%s", lc_last_error());
    if (!m) return;
    lc_model_info info;
    CHECK(lc_model_get_info(m, &info) == LC_OK && info.n_layer == n_layer &&
          info.n_vocab == n_vocab && info.head_dim == head_dim);
    int32_t *ids = NULL;
    size_t   n   = 0;
    const char *text = "hello world, ab";
    CHECK(lc_tokenizer_encode(lc_model_tokenizer(m), text, strlen(text),
                              lc_tokenizer_add_bos(lc_model_tokenizer(m)), true, &ids, &n) == LC_OK);
    CHECK(n > 1 && (ids[0] == 256) == bos); /* bos */
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 256;
    lc_context *c        = NULL;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK);
    if (c && ids) {
        lc_request req = {.prompt = ids, .n_prompt = n, .max_tokens = 4,
                          .sampling = lc_sampling_default(), .ignore_eos = true};
        req.sampling.temperature = 0.0f;
        int32_t sid;
        CHECK(lc_context_add(c, &req, &sid) == LC_OK);
        int  n_gen = 0, steps = 0;
        bool done = false, finite = true;
        while (!done && steps++ < 64) {
            lc_event ev[4];
            size_t   ne = 0;
            if (lc_context_step(c, ev, 4, &ne) != LC_OK) break;
            const float *lg = lc_context_logits(c, sid);
            if (lg)
                for (int i = 0; i < n_vocab; i++)
                    if (!isfinite(lg[i])) finite = false;
            for (size_t k = 0; k < ne; k++) {
                if (ev[k].token >= 0) n_gen++;
                if (ev[k].finish != LC_FINISH_NONE) done = true;
            }
            if (ne == 0) done = true;
        }
        CHECK(done && n_gen == 4);
        CHECK(finite);
        lc_context_remove(c, sid);
    }
    lc_context_free(c);
    free(ids);
    lc_model_free(m);
}

static void run_tiny(const char *path, int32_t n_vocab, int32_t head_dim, bool bos) {
    run_model(path, 2, n_vocab, head_dim, bos);
}

/* Every block type through gen-model on tiny-k (rows of 256/512 values, 8 layers): each
 * matrix in the type asked for; q4_k_m's mix (q6_K for output.weight and for attn_v and
 * ffn_down of layers 0, 3, 6, 7: l < 8/8, l >= 7, (l - 1) % 3 == 2); the K types' fallback on
 * tiny (rows of 64 values); the model loads and generates. */
static void test_block_types(void) {
    char *path = tmp_path("k");
    static const struct {
        lc_gen_type t;
        uint32_t    type;
    } all[] = {{LC_GEN_Q4_0, LC_TYPE_Q4_0}, {LC_GEN_Q4_1, LC_TYPE_Q4_1},
               {LC_GEN_Q5_0, LC_TYPE_Q5_0}, {LC_GEN_Q5_1, LC_TYPE_Q5_1},
               {LC_GEN_Q4_K, LC_TYPE_Q4_K}, {LC_GEN_Q5_K, LC_TYPE_Q5_K},
               {LC_GEN_Q6_K, LC_TYPE_Q6_K}, {LC_GEN_Q4_K_M, LC_TYPE_Q4_K}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        lc_gen_params p = {.config = "tiny-k", .path = path, .type = all[i].t, .seed = 3};
        CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
        lc_gguf *g = NULL;
        CHECK(lc_gguf_open(path, &g) == LC_OK);
        if (!g) continue;
        const bool mix = all[i].t == LC_GEN_Q4_K_M;
        for (int l = 0; l < 8; l++) {
            char name[64];
            const bool more = l == 0 || l == 3 || l == 6 || l == 7;
            snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
            const lc_gguf_tensor *t = lc_gguf_find_tensor(g, name);
            CHECKF(t && t->type == (mix && more ? LC_TYPE_Q6_K : all[i].type), "%s %s",
                   lc_gen_type_name(all[i].t), name);
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
            t = lc_gguf_find_tensor(g, name);
            CHECKF(t && t->type == (mix && more ? LC_TYPE_Q6_K : all[i].type), "%s %s",
                   lc_gen_type_name(all[i].t), name);
            snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
            t = lc_gguf_find_tensor(g, name);
            CHECKF(t && t->type == all[i].type, "%s %s", lc_gen_type_name(all[i].t), name);
        }
        const lc_gguf_tensor *o = lc_gguf_find_tensor(g, "output.weight");
        CHECK(o && o->type == (mix ? LC_TYPE_Q6_K : all[i].type));
        o = lc_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        CHECK(o && o->type == LC_TYPE_F32);
        lc_gguf_close(g);
        if (all[i].t == LC_GEN_Q4_K_M || all[i].t == LC_GEN_Q4_0) run_model(path, 8, 512, 64, true);
    }
    /* rows of 64 values: the K types fall back as llama.cpp's quantiser does */
    static const struct {
        lc_gen_type t;
        uint32_t    type;
    } fb[] = {{LC_GEN_Q4_K, LC_TYPE_Q5_0}, {LC_GEN_Q5_K, LC_TYPE_Q5_1}, {LC_GEN_Q6_K, LC_TYPE_Q8_0}};
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++) {
        lc_gen_params p = {.config = "tiny", .path = path, .type = fb[i].t};
        CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
        check_tiny_file(path, fb[i].type);
    }
    lc_gen_type t;
    CHECK(lc_gen_type_parse("q4_k_m", &t) == LC_OK && t == LC_GEN_Q4_K_M);
    CHECK(lc_gen_type_parse("q3_k", &t) == LC_ERR_NOT_FOUND && strstr(lc_last_error(), "q6_k"));
    CHECK(lc_gen_type_name((lc_gen_type)99) == NULL);
    lc_gen_params bad = {.config = "tiny", .path = path, .type = (lc_gen_type)99};
    CHECK(lc_model_generate(&bad) == LC_ERR_INVALID_ARG);
    remove(path);
    free(path);
}

/* Q8_0 through the writer: quantise random data, read back, dequantise. */
static void test_q8_0(void) {
    const int64_t cols = 256, rows = 16, n = cols * rows;
    float        *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint64_t      s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s    = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * (i % 97 == 0 ? 40.0f : 2.0f);
    }
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f; /* an all-zero block */
    char           *path = tmp_path("q8");
    lc_gguf_writer *w    = NULL;
    CHECK(lc_gguf_writer_open(path, &w) == LC_OK);
    const uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows}, ne1 = 5;
    CHECK(lc_gguf_writer_add_str(w, "general.architecture", "test") == LC_OK);
    CHECK(lc_gguf_writer_add_u32(w, "general.architecture", 1) == LC_ERR_INVALID_ARG); /* dup */
    CHECK(lc_gguf_writer_add_tensor(w, "v", 1, &ne1, LC_TYPE_F32) == LC_OK);
    CHECK(lc_gguf_writer_add_tensor(w, "q", 2, ne, LC_TYPE_Q8_0) == LC_OK);
    CHECK(lc_gguf_writer_add_tensor(w, "bad", 1, &ne1, LC_TYPE_Q8_0) == LC_ERR_INVALID_ARG);
    CHECK(lc_gguf_writer_begin_data(w) == LC_OK);
    float v5[5] = {1, 2, 3, 4, 5};
    CHECK(lc_gguf_writer_write_f32(w, v5, 5) == LC_OK);
    CHECK(lc_gguf_writer_write_f32(w, x, (size_t)(n / 2)) == LC_OK);
    CHECK(lc_gguf_writer_write_f32(w, x + n / 2, (size_t)(n / 2)) == LC_OK);
    CHECK(lc_gguf_writer_write_f32(w, x, 32) == LC_ERR_INVALID_ARG); /* past the end */
    lc_gguf_writer_abort(w);
    CHECK(access(path, F_OK) != 0); /* aborted: removed */

    CHECK(lc_gguf_writer_open(path, &w) == LC_OK);
    CHECK(lc_gguf_writer_add_tensor(w, "v", 1, &ne1, LC_TYPE_F32) == LC_OK);
    CHECK(lc_gguf_writer_add_tensor(w, "q", 2, ne, LC_TYPE_Q8_0) == LC_OK);
    CHECK(lc_gguf_writer_begin_data(w) == LC_OK);
    CHECK(lc_gguf_writer_write_f32(w, v5, 5) == LC_OK);
    CHECK(lc_gguf_writer_write_f32(w, x, (size_t)n) == LC_OK);
    CHECK(lc_gguf_writer_close(w) == LC_OK);
    lc_gguf *g = NULL;
    CHECK(lc_gguf_open(path, &g) == LC_OK);
    const lc_gguf_tensor *tv = g ? lc_gguf_find_tensor(g, "v") : NULL;
    const lc_gguf_tensor *tq = g ? lc_gguf_find_tensor(g, "q") : NULL;
    CHECK(tv && tv->offset == 0 && memcmp(tv->data, v5, 20) == 0);
    CHECK(tq && tq->offset == 32 && tq->nbytes == (uint64_t)(n / 32 * 34));
    if (tq) {
        CHECK(lc_dequantize(LC_TYPE_Q8_0, tq->data, y, n) == LC_OK);
        int bad = 0;
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t dh;
            memcpy(&dh, (const uint8_t *)tq->data + b * 34, 2);
            const float d = lc_fp16_to_fp32(dh);
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            if (fabsf(d - amax / 127.0f) > amax / 127.0f * 1e-3f) bad++;
            for (int j = 0; j < 32; j++)
                if (fabsf(y[b * 32 + j] - x[b * 32 + j]) > d * 0.5f + 1e-7f) bad++;
        }
        CHECKF(bad == 0, "%d values/blocks off", bad);
        CHECK(y[64] == 0.0f && y[95] == 0.0f);
    }
    lc_gguf_close(g);
    remove(path);
    free(path);
    free(x);
    free(y);
}

static void test_io_errors(void) {
    lc_gen_params p = {.config = "tiny", .path = "/nonexistent-lc-dir/x.gguf", .type = LC_GEN_BF16};
    CHECK(lc_model_generate(&p) == LC_ERR_IO);
    CHECKF(strstr(lc_last_error(), "/nonexistent-lc-dir/x.gguf") != NULL, "%s", lc_last_error());
    /* a full disk */
    if (access("/dev/full", W_OK) == 0) {
        p.path = "/dev/full";
        CHECK(lc_model_generate(&p) == LC_ERR_IO);
        CHECKF(strstr(lc_last_error(), "/dev/full") != NULL, "%s", lc_last_error());
        CHECK(access("/dev/full", F_OK) == 0); /* not removed */
    }
    p.path   = "/tmp/never-written.gguf";
    p.config = "llama-9b";
    CHECK(lc_model_generate(&p) == LC_ERR_NOT_FOUND);
    CHECK(strstr(lc_last_error(), "smollm2-135m") != NULL);
    CHECK(lc_gen_config_arch("qwen2.5-7b") && strcmp(lc_gen_config_arch("qwen2.5-7b"), "qwen2") == 0);
    CHECK(lc_gen_config_arch("nope") == NULL);
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_ERROR);
    test_q8_0();
    test_io_errors();
    test_block_types();
    char *a = tmp_path("bf16"), *b = tmp_path("bf16b"), *q = tmp_path("q8"), *o = tmp_path("seed");
    lc_gen_params p = {.config = "tiny", .path = a, .type = LC_GEN_BF16, .seed = 7,
                       .progress = on_progress};
    CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
    CHECK(progress_total == 21 && progress_last == 21);
    check_tiny_file(a, LC_TYPE_BF16);
    run_tiny(a, 512, 16, true);
    p.path = b;
    CHECK(lc_model_generate(&p) == LC_OK);
    CHECK(files_equal(a, b));
    p.path = o;
    p.seed = 8;
    CHECK(lc_model_generate(&p) == LC_OK);
    CHECK(!files_equal(a, o));
    p.path = q;
    p.type = LC_GEN_Q8_0;
    p.seed = 7;
    CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
    check_tiny_file(q, LC_TYPE_Q8_0);
    run_tiny(q, 512, 16, true);
    /* the other code paths: qwen2 (q/k/v biases, no bos, tied) and llama3 rope factors */
    p.config = "tiny-qwen2";
    CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
    lc_gguf *g = NULL;
    CHECK(lc_gguf_open(q, &g) == LC_OK);
    CHECK(g && lc_gguf_find_tensor(g, "blk.1.attn_v.bias") && !lc_gguf_find_tensor(g, "output.weight"));
    lc_gguf_close(g);
    run_tiny(q, 1024, 16, false);
    p.config = "tiny-llama3";
    p.type   = LC_GEN_BF16;
    CHECKF(lc_model_generate(&p) == LC_OK, "%s", lc_last_error());
    CHECK(lc_gguf_open(q, &g) == LC_OK);
    const lc_gguf_tensor *rf = g ? lc_gguf_find_tensor(g, "rope_freqs.weight") : NULL;
    CHECK(rf && rf->type == LC_TYPE_F32 && rf->ne[0] == 16);
    if (rf) { /* the converter's rule: 1 at high frequencies, the factor at low ones */
        float f0, f15;
        memcpy(&f0, rf->data, 4);
        memcpy(&f15, (const float *)rf->data + 15, 4);
        CHECK(f0 == 1.0f && f15 == 8.0f);
    }
    lc_gguf_close(g);
    run_tiny(q, 512, 32, true);
    remove(a), remove(b), remove(q), remove(o);
    free(a), free(b), free(q), free(o);
    TEST_END();
}
