/*
 * test_model_hostile.c — hostile and broken model files (issue 20 items 1, 6 and 9), made
 * from the tiny llama fixture with tests/gguf_edit.h:
 *   - a rope_freqs.weight whose bytes are fewer than its first dimension says (shape [16, 0]
 *     at the end of the file), one with a NaN factor, one of the wrong length: refused with
 *     LC_ERR_FORMAT naming the tensor, before a byte of it is read;
 *   - block_count far beyond the tensor table (2^29, and one more than the table): refused
 *     with LC_ERR_FORMAT naming block_count, before per-layer arrays are sized by it;
 *   - NaN weights: a NaN row of the token embedding (one token) and a NaN feed-forward
 *     matrix in layer 1: the sequence that meets them finishes with LC_FINISH_ERROR and an
 *     error naming the layer and block, a sequence beside it in the same context is not
 *     harmed (same tokens as alone), with and without check_numerics; scoring fails with
 *     LC_ERR_NUMERIC.
 */
#include "gguf_edit.h"
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SRC LC_SOURCE_DIR "/tests/fixtures/tiny/llama-untied.gguf"
#define BAD_TOKEN 200

static char g_dir[64];

static int make(const char *name, const gguf_edit *e, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.gguf", g_dir, name);
    int st = gguf_edit_copy(SRC, path, e);
    CHECKF(st == LC_OK, "writing %s: %s", path, lc_last_error());
    return st;
}

static int load(const char *path, lc_model **m) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1;
    *m                 = NULL;
    return lc_model_load(path, &mp, m);
}

/* load must fail with FORMAT and a message containing `what` */
static void expect_refused(const char *name, const gguf_edit *e, const char *what) {
    char path[128];
    if (make(name, e, path, sizeof path) != LC_OK) return;
    lc_model *m  = NULL;
    int       st = load(path, &m);
    CHECKF(st == LC_ERR_FORMAT && strstr(lc_last_error(), what),
           "%s: status %d, message \"%s\" (want a format error naming %s)", name, st,
           lc_last_error(), what);
    lc_model_free(m);
    unlink(path);
}

typedef struct gen {
    int32_t   tokens[16];
    int32_t   n;
    lc_finish finish;
    char      error[512];
} gen;

/* Greedy generation of up to 6 tokens for each prompt, all in one context. */
static int run(lc_model *m, bool check, const int32_t *const *prompts, const size_t *lens,
               int n, gen *out) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 64;
    cp.n_seq_max         = n;
    cp.page_size         = 16;
    cp.check_numerics    = check;
    lc_context *c        = NULL;
    int         st       = lc_context_create(m, &cp, &c);
    CHECKF(st == LC_OK, "context: %s", lc_last_error());
    if (st != LC_OK) return st;
    int32_t ids[4];
    for (int i = 0; i < n; i++) {
        lc_request r = {0};
        r.prompt     = prompts[i];
        r.n_prompt   = lens[i];
        r.max_tokens = 6;
        r.sampling   = lc_sampling_default();
        r.sampling.temperature = 0.0f;
        r.ignore_eos           = true;
        CHECK(lc_context_add(c, &r, &ids[i]) == LC_OK);
        memset(&out[i], 0, sizeof out[i]);
    }
    for (int step = 0; step < 50; step++) {
        lc_event ev[4];
        size_t   ne = 0;
        st          = lc_context_step(c, ev, 4, &ne);
        CHECKF(st == LC_OK, "step: %s", lc_last_error());
        if (st != LC_OK || ne == 0) break;
        for (size_t k = 0; k < ne; k++) {
            int i = 0;
            while (i < n && ids[i] != ev[k].seq_id) i++;
            if (i == n) continue;
            if (ev[k].token >= 0 && out[i].n < 16) out[i].tokens[out[i].n++] = ev[k].token;
            if (ev[k].finish != LC_FINISH_NONE) {
                out[i].finish = ev[k].finish;
                CHECK((ev[k].finish == LC_FINISH_ERROR) == (ev[k].error != NULL));
                if (ev[k].error) snprintf(out[i].error, sizeof out[i].error, "%s", ev[k].error);
            }
        }
    }
    lc_context_free(c);
    return st;
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    snprintf(g_dir, sizeof g_dir, "/tmp/lc-hostile-XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }

    /* ---- rope_freqs ---- */
    {
        /* shape [16, 0] as the last tensor, at the very end of the file: written as [16, 1]
         * (the writer refuses empty dimensions), then ne[1] patched to 0 and its 64 data
         * bytes cut off */
        gguf_extra_tensor x = {"rope_freqs.weight", 2, {16, 1, 1, 1}, 0 /* f32 */, NULL};
        gguf_edit         e = {.extra = &x, .n_extra = 1, .fill_row = -1};
        char              path[128];
        if (make("rope_freqs_empty", &e, path, sizeof path) == LC_OK) {
            FILE *f   = fopen(path, "rb");
            long  len = 0;
            char *buf = NULL;
            if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 64 && !fseek(f, 0, SEEK_SET)) {
                buf = malloc((size_t)len);
                if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) len = 0;
            }
            if (f) fclose(f);
            const char *name = buf ? memmem(buf, (size_t)len, "rope_freqs.weight", 17) : NULL;
            CHECK(name != NULL);
            if (name) {
                char    *ne1  = (char *)name + 17 + 4 + 8; /* n_dims u32, ne[0] u64 */
                uint64_t one  = 0, zero = 0;
                memcpy(&one, ne1, 8);
                CHECK(one == 1);
                memcpy(ne1, &zero, 8);
                f = fopen(path, "wb");
                CHECK(f && fwrite(buf, 1, (size_t)len - 64, f) == (size_t)len - 64);
                if (f) fclose(f);
                lc_model *m  = NULL;
                int       st = load(path, &m);
                CHECKF(st == LC_ERR_FORMAT && strstr(lc_last_error(), "rope_freqs.weight"),
                       "rope_freqs [16, 0]: status %d, \"%s\"", st, lc_last_error());
                lc_model_free(m);
            }
            free(buf);
            unlink(path);
        }
        float f[16];
        for (int i = 0; i < 16; i++) f[i] = 1.0f + (float)i;
        f[5]           = NAN;
        gguf_extra_tensor xn = {"rope_freqs.weight", 1, {16, 1, 1, 1}, 0, f};
        e.extra              = &xn;
        expect_refused("rope_freqs_nan", &e, "rope_freqs.weight");
        gguf_extra_tensor xs = {"rope_freqs.weight", 1, {8, 1, 1, 1}, 0, NULL};
        e.extra              = &xs;
        expect_refused("rope_freqs_short", &e, "rope_freqs.weight");
        /* a good one loads */
        f[5]                 = 6.0f;
        gguf_extra_tensor xg = {"rope_freqs.weight", 1, {16, 1, 1, 1}, 0, f};
        e.extra              = &xg;
        if (make("rope_freqs_ok", &e, path, sizeof path) == LC_OK) {
            lc_model *m = NULL;
            CHECKF(load(path, &m) == LC_OK, "rope_freqs_ok: %s", lc_last_error());
            lc_model_free(m);
            unlink(path);
        }
    }

    /* ---- block_count beyond the tensor table ---- */
    {
        gguf_edit e = {.set_u32_key = "llama.block_count", .set_u32_value = 1u << 29,
                       .fill_row = -1};
        expect_refused("blocks_huge", &e, "block_count");
        e.set_u32_value = 3;
        expect_refused("blocks_plus1", &e, "block_count");
    }

    /* ---- NaN weights ---- */
    const int32_t pa[] = {5, 17, BAD_TOKEN, 23, 42}, pb[] = {11, 3, 99, 64};
    const int32_t *both[2] = {pa, pb}, *only_b[1] = {pb};
    const size_t   lens[2] = {5, 4}, len_b[1] = {4};
    gen            alone[1];
    {
        lc_model *m = NULL;
        CHECK(load(SRC, &m) == LC_OK);
        if (m) run(m, false, only_b, len_b, 1, alone);
        CHECK(alone[0].n == 6 && alone[0].finish == LC_FINISH_LENGTH);
        lc_model_free(m);
    }
    for (int check = 0; check < 2; check++) {
        /* one token's embedding row is NaN: only the sequence holding it fails */
        gguf_edit e = {.fill_tensor = "token_embd.weight", .fill_value = NAN,
                       .fill_row = BAD_TOKEN};
        char      path[128];
        lc_model *m = NULL;
        if (make("embd_nan", &e, path, sizeof path) == LC_OK &&
            load(path, &m) == LC_OK) {
            gen g[2];
            run(m, check, both, lens, 2, g);
            CHECKF(g[0].finish == LC_FINISH_ERROR && strstr(g[0].error, "token embeddings") &&
                       strstr(g[0].error, "NaN"),
                   "check %d: finish %d, error \"%s\"", check, g[0].finish, g[0].error);
            CHECKF(g[1].finish == LC_FINISH_LENGTH && g[1].n == 6 &&
                       memcmp(g[1].tokens, alone[0].tokens, sizeof(int32_t) * 6) == 0,
                   "check %d: the healthy sequence was harmed (finish %d, %d tokens, %s)",
                   check, g[1].finish, g[1].n, g[1].error);
        }
        lc_model_free(m);
        unlink(path);

        /* a whole feed-forward matrix of layer 1 is NaN: the error names layer 1 */
        gguf_edit e2 = {.fill_tensor = "blk.1.ffn_down.weight", .fill_value = NAN,
                        .fill_row = -1};
        m            = NULL;
        if (make("ffn_nan", &e2, path, sizeof path) == LC_OK && load(path, &m) == LC_OK) {
            gen g[1];
            run(m, check, only_b, len_b, 1, g);
            CHECKF(g[0].finish == LC_FINISH_ERROR && strstr(g[0].error, "layer 1") &&
                       strstr(g[0].error, "feed-forward"),
                   "check %d: finish %d, error \"%s\"", check, g[0].finish, g[0].error);
            CHECK(g[0].n == 0); /* no token was drawn from NaN logits */
            /* scoring reports it too */
            lc_context_params cp = lc_context_default_params();
            cp.n_ctx             = 64;
            cp.page_size         = 16;
            cp.check_numerics    = check;
            lc_context *c        = NULL;
            if (lc_context_create(m, &cp, &c) == LC_OK) {
                double         lp[4];
                lc_score_range r = {1, 4};
                CHECKF(lc_context_score(c, pb, 4, &r, 1, lp) == LC_ERR_NUMERIC, "score: %s",
                       lc_last_error());
                lc_context_free(c);
            }
        }
        lc_model_free(m);
        unlink(path);
    }
    rmdir(g_dir);
    TEST_END();
}
