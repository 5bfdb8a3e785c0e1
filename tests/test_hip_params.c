/*
 * test_hip_params.c — InfiniteHiP settings (spec/infinitehip-and-hip.md §3.6): the named
 * presets carry the paper's values; knobs set by name; every invalid value is rejected with a
 * message naming the option; and a context refuses invalid settings before any kernel runs.
 */
#include "attn/hip/hip.h"
#include "attn/infinitehip/infinitehip.h"
#include "attn/select/query_blocks.h"
#include "attn/tokenselect/tokenselect.h"
#include "longctx.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool msg_has(const char *needle) {
    const char *e = lc_last_error();
    return e && strstr(e, needle) != NULL;
}

/* the generic settings functions on each method's table (attn/settings.h) */
#define IH (&lc_attn_desc_infinitehip.settings)
#define HP (&lc_attn_desc_hip.settings)
#define TS (&lc_attn_desc_tokenselect.settings)
static int ih_preset(const char *n, lc_infinitehip_params *p) {
    return lc_settings_preset_apply(IH, n, p);
}
static int ih_set(lc_infinitehip_params *p, const char *k, const char *v) {
    return lc_settings_set(IH, p, k, v);
}
static int ih_validate(const lc_infinitehip_params *p) {
    return lc_attn_settings_validate(&lc_attn_desc_infinitehip, p);
}
static int ih_describe(const lc_infinitehip_params *p, char *d, size_t cap) {
    return lc_settings_describe(IH, p, d, cap);
}
static int hp_preset(const char *n, lc_hipattn_params *p) { return lc_settings_preset_apply(HP, n, p); }
static int hp_set(lc_hipattn_params *p, const char *k, const char *v) {
    return lc_settings_set(HP, p, k, v);
}
static int hp_validate(const lc_hipattn_params *p) {
    return lc_attn_settings_validate(&lc_attn_desc_hip, p);
}
static int hp_describe(const lc_hipattn_params *p, char *d, size_t cap) {
    return lc_settings_describe(HP, p, d, cap);
}
static lc_tokenselect_params ts_default(void) {
    lc_tokenselect_params p;
    CHECK(lc_settings_preset_apply(TS, "default", &p) == LC_OK);
    return p;
}
static int ts_set(lc_tokenselect_params *p, const char *k, const char *v) {
    return lc_settings_set(TS, p, k, v);
}
static int ts_validate(const lc_tokenselect_params *p) {
    return lc_attn_settings_validate(&lc_attn_desc_tokenselect, p);
}
static int ts_describe(const lc_tokenselect_params *p, char *d, size_t cap) {
    return lc_settings_describe(TS, p, d, cap);
}

static void check_presets(void) {
    lc_infinitehip_params p;
    CHECK(ih_preset("3k", &p) == LC_OK);
    CHECK(p.n_stages == 3 && p.chunk[0] == 256 && p.chunk[1] == 32 && p.chunk[2] == 8);
    CHECK(p.k[0] == 32768 && p.k[1] == 8192 && p.k[2] == 2048);
    CHECK(p.refresh[0] == 16 && p.refresh[1] == 8 && p.refresh[2] == 4);
    CHECK(p.n_sink == 256 && p.n_stream == 1024 && p.block_q == 64);
    CHECK(p.first_layers == 3 && p.first_k == 4096 && p.per_group == 0);
    CHECK(ih_validate(&p) == LC_OK);
    CHECK(ih_preset("fast", &p) == LC_OK);
    CHECK(p.refresh[0] == 32 && p.refresh[1] == 16 && p.refresh[2] == 8);
    CHECK(ih_preset("flash", &p) == LC_OK);
    CHECK(p.refresh[0] == 96 && p.refresh[1] == 24 && p.refresh[2] == 8);
    CHECK(ih_preset("5k", &p) == LC_OK);
    CHECK(p.chunk[0] == 64 && p.chunk[1] == 32 && p.chunk[2] == 16);
    CHECK(p.k[0] == 32768 && p.k[1] == 16384 && p.k[2] == 4096);
    CHECK(ih_validate(&p) == LC_OK);
    CHECK(ih_preset("3k-fine", &p) == LC_OK);
    CHECK(p.chunk[2] == 1 && p.k[2] == 2048 && p.refresh[0] == 16);
    CHECK(ih_validate(&p) == LC_OK);
    CHECK(ih_preset("3k-fine64", &p) == LC_OK);
    CHECK(p.chunk[0] == 64 && p.chunk[1] == 16 && p.chunk[2] == 1 && p.k[0] == 32768);
    CHECK(ih_validate(&p) == LC_OK);
    CHECK(ih_preset("4k", &p) == LC_ERR_NOT_FOUND && msg_has("3k, fast, flash, 5k"));
    CHECK(ih_preset(NULL, &p) == LC_ERR_INVALID_ARG); /* NULL is a caller bug */
    char d[512];
    CHECK(ih_preset("3k", &p) == LC_OK);
    CHECK(ih_describe(&p, d, sizeof d) == LC_OK);
    CHECK(strstr(d, "chunks=256,32,8") && strstr(d, "k=32768,8192,2048") &&
          strstr(d, "refresh=16,8,4"));
    CHECK(ih_describe(&p, d, 8) == LC_ERR_INVALID_ARG);
}

static void check_set(void) {
    lc_infinitehip_params p;
    ih_preset("3k", &p);
    CHECK(ih_set(&p, "chunks", "128,16") == LC_OK && p.n_stages == 2);
    CHECK(ih_set(&p, "k", "4096,1024") == LC_OK && p.k[1] == 1024);
    CHECK(ih_set(&p, "refresh", "8,2") == LC_OK && p.refresh[1] == 2 && p.n_stages == 2);
    CHECK(ih_set(&p, "q_stride", "2,1") == LC_OK && p.q_stride[0] == 2);
    CHECK(ih_set(&p, "block-q", "32") == LC_OK && p.block_q == 32);
    CHECK(ih_set(&p, "sink", "0") == LC_OK && p.n_sink == 0);
    CHECK(ih_set(&p, "stream", "512") == LC_OK && p.n_stream == 512);
    CHECK(ih_set(&p, "first-layers", "0") == LC_OK);
    CHECK(ih_set(&p, "rope", "extend") == LC_OK && p.rope == LC_HIP_ROPE_EXTEND);
    CHECK(ih_set(&p, "heads", "group") == LC_OK && p.per_group == 1);
    CHECK(ih_validate(&p) == LC_OK);
    /* bad values name the option */
    CHECK(ih_set(&p, "k", "12x") == LC_ERR_INVALID_ARG && msg_has("infinitehip: k"));
    CHECK(ih_set(&p, "k", "") == LC_ERR_INVALID_ARG);
    CHECK(ih_set(&p, "k", "1,2,3,4,5") == LC_ERR_INVALID_ARG && msg_has("1..4"));
    CHECK(ih_set(&p, "block-q", "65") == LC_ERR_INVALID_ARG && msg_has("infinitehip: block-q"));
    CHECK(ih_set(&p, "stream", "0") == LC_ERR_INVALID_ARG && msg_has("infinitehip: stream"));
    CHECK(ih_set(&p, "rope", "stream") == LC_OK && p.rope == LC_HIP_ROPE_STREAM);
    CHECK(ih_set(&p, "rope", "yarn") == LC_ERR_INVALID_ARG && msg_has("auto, extend"));
    CHECK(ih_set(&p, "heads", "some") == LC_ERR_INVALID_ARG);
    CHECK(ih_set(&p, "stagger", "1") == LC_OK && p.stagger == 1);
    CHECK(ih_set(&p, "stagger", "2") == LC_ERR_INVALID_ARG && msg_has("infinitehip: stagger"));
    {
        lc_infinitehip_params f;
        ih_preset("3k-fine", &f);
        f.stagger = 1;
        CHECK(ih_validate(&f) == LC_OK);
        CHECK(ih_set(&f, "chunks", "1") == LC_OK && ih_set(&f, "k", "2048") == LC_OK &&
              ih_set(&f, "first-k", "2048") == LC_OK);
        CHECK(ih_validate(&f) == LC_ERR_INVALID_ARG && msg_has("infinitehip: stagger"));
        f.stagger = 0;
        CHECK(ih_set(&f, "overlap", "1") == LC_OK && f.overlap == 1);
        CHECK(ih_validate(&f) == LC_ERR_INVALID_ARG && msg_has("infinitehip: overlap"));
        CHECK(ih_set(&f, "overlap", "3") == LC_ERR_INVALID_ARG && msg_has("infinitehip: overlap"));
        ih_preset("3k-fine64", &f);
        CHECK(f.overlap == 1 && ih_validate(&f) == LC_OK); /* the preset overlaps */
        ih_preset("3k", &f);
        CHECK(f.overlap == 0 && f.stagger == 0); /* the paper's presets do not */
        /* one descent per KV head, per stage: 0 or 1 */
        CHECK(f.kv_descent[0] == 0 && f.kv_descent[1] == 0 && f.kv_descent[2] == 0);
        lc_infinitehip_params g; /* ours: 3k-kv is 3k with every stage's descent per KV head */
        CHECK(ih_preset("3k-kv", &g) == LC_OK && g.kv_descent[0] == 1 &&
              g.kv_descent[1] == 1 && g.kv_descent[2] == 1 && g.chunk[0] == 256 && g.k[2] == 2048 &&
              g.refresh[0] == 16 && ih_validate(&g) == LC_OK);
        CHECK(ih_preset("3k-fine64", &g) == LC_OK && g.kv_descent[0] == 0);
        CHECK(ih_set(&f, "kv-descent", "1,1,0") == LC_OK && f.kv_descent[0] == 1 &&
              f.kv_descent[1] == 1 && f.kv_descent[2] == 0 && f.n_stages == 3);
        CHECK(ih_validate(&f) == LC_OK);
        char d[512];
        CHECK(ih_describe(&f, d, sizeof d) == LC_OK && strstr(d, "kv-descent=1,1,0"));
        CHECK(ih_set(&f, "kv-descent", "1,2") == LC_ERR_INVALID_ARG &&
              msg_has("infinitehip: kv-descent"));
        f.kv_descent[2] = 5;
        CHECK(ih_validate(&f) == LC_ERR_INVALID_ARG && msg_has("infinitehip: kv-descent"));
    }
    CHECK(ih_set(&p, "bogus", "1") == LC_ERR_INVALID_ARG &&
          msg_has("infinitehip has no setting \"bogus\" (settings: chunks, k, refresh"));
    CHECK(ih_set(&p, "sink", "-1") == LC_ERR_INVALID_ARG && msg_has("infinitehip: sink"));
}

static void check_validate(void) {
    lc_infinitehip_params p;
    /* k not a multiple of the chunk */
    ih_preset("3k", &p);
    p.k[1] = 8190;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: k") &&
          msg_has("multiple of its chunk 32"));
    /* chunk larger than k */
    ih_preset("3k", &p);
    p.k[2] = 4;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: k"));
    /* chunk not a power of two, not dividing the previous one, growing */
    ih_preset("3k", &p);
    p.chunk[1] = 48;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: chunks") &&
          msg_has("power of two"));
    ih_preset("3k", &p);
    p.chunk[1] = 512, p.k[1] = 8192;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("divide"));
    /* k growing from one stage to the next */
    ih_preset("3k", &p);
    p.k[2] = 16384;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("more than"));
    /* refresh 0, q-stride past the block */
    ih_preset("3k", &p);
    p.refresh[0] = 0;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: refresh"));
    ih_preset("3k", &p);
    p.q_stride[0] = 128;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: q-stride"));
    /* stage count */
    ih_preset("3k", &p);
    p.n_stages = 0;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: chunks has 0 values; allowed 1..4"));
    p.n_stages = 5;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG);
    /* first-k off the last chunk grid, or past the first stage's k */
    ih_preset("3k", &p);
    p.first_k = 4100;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: first-k"));
    p.first_k = 65536;
    CHECK(ih_validate(&p) == LC_ERR_INVALID_ARG && msg_has("infinitehip: first-k"));
    /* zero sink is allowed (our kernels do not need one) */
    ih_preset("3k", &p);
    p.n_sink = 0;
    CHECK(ih_validate(&p) == LC_OK);
    CHECK(ih_validate(NULL) == LC_ERR_INVALID_ARG);
    /* names of the methods */
    CHECK(lc_attn_check("infinitehip", NULL, NULL, 0) == LC_OK);
    CHECK(lc_attn_check("dense", NULL, NULL, 0) == LC_OK);
    CHECK(lc_attn_check("hip2", NULL, NULL, 0) == LC_ERR_NOT_FOUND && msg_has("dense, infinitehip"));
    CHECK(strcmp(lc_attn_methods(), "dense, infinitehip, hip, tokenselect, streaming") == 0);
}

/* The lengths sel_block_len gives a prefill slice [pos0, end) of a prompt ending at pe. */
static int cut(int32_t pos0, int32_t end, int32_t B, int32_t pe, int32_t tb, int32_t *len,
               int cap) {
    int n = 0;
    for (int32_t p = pos0; p < end && n < cap; p += len[n++]) {
        len[n] = sel_block_len(p, end, B, pe, tb);
        if (len[n] < 1) return -1;
    }
    return n;
}

static bool same(const int32_t *a, int n, const int32_t *b, int m) {
    return n == m && memcmp(a, b, sizeof(int32_t) * (size_t)n) == 0;
}

/* tail-block: the prompt's last block of rows is cut finer; the other blocks keep their
 * position-aligned cut; no block straddles the tail's start (issue 21 part 4) */
static void check_tail_blocks(void) {
    int32_t len[256];
    int     n = cut(0, 100, 32, 100, 0, len, 256);
    CHECK(same(len, n, (int32_t[]){32, 32, 32, 4}, 4)); /* off: aligned blocks */
    n = cut(0, 100, 32, 100, 8, len, 256);              /* tail [68, 100) in 8s */
    CHECK(same(len, n, (int32_t[]){32, 32, 4, 8, 8, 8, 8}, 7));
    n = cut(0, 80, 32, 100, 8, len, 256); /* a forward that stops inside the tail */
    CHECK(same(len, n, (int32_t[]){32, 32, 4, 8, 4}, 5));
    n = cut(80, 100, 32, 100, 8, len, 256); /* and the next one resumes the same cut */
    CHECK(same(len, n, (int32_t[]){4, 8, 8}, 3));
    n = cut(0, 20, 32, 20, 8, len, 256); /* a prompt shorter than a block: all tail */
    CHECK(same(len, n, (int32_t[]){8, 8, 4}, 3));
    n = cut(0, 100, 32, 0, 8, len, 256); /* no prompt end known (a scored text): off */
    CHECK(same(len, n, (int32_t[]){32, 32, 32, 4}, 4));
    /* random slices: lengths positive, no block crosses a multiple of B before the tail, nor
     * the tail's start, nor a tail block's border */
    srand(7);
    bool ok = true;
    for (int it = 0; it < 2000 && ok; it++) {
        const int32_t B = 1 + rand() % 64, tb = rand() % (B + 1), pe = 1 + rand() % 300;
        const int32_t pos0 = rand() % pe, end = pos0 + 1 + rand() % (pe - pos0);
        const int32_t t0 = pe - B > 0 ? pe - B : 0;
        n = cut(pos0, end, B, pe, tb, len, 256);
        int32_t p = pos0, sum = 0;
        for (int i = 0; i < n && ok; p += len[i], sum += len[i], i++) {
            const int32_t e = p + len[i];
            if (tb == 0 || p < t0) ok = ok && (e <= t0 || tb == 0) && (p / B == (e - 1) / B);
            else ok = ok && len[i] <= tb && (p - t0) / tb == (e - 1 - t0) / tb;
        }
        ok = ok && n > 0 && sum == end - pos0;
        if (!ok) fprintf(stderr, "cut B %d tb %d pe %d [%d, %d)\n", B, tb, pe, pos0, end);
    }
    CHECK(ok);
    /* the knob, per method: range, message, description */
    lc_infinitehip_params ih;
    ih_preset("3k-fine64", &ih);
    CHECK(ih.tail_block == 0);
    CHECK(ih_set(&ih, "tail-block", "16") == LC_OK && ih.tail_block == 16);
    CHECK(ih_validate(&ih) == LC_OK);
    char d[512];
    CHECK(ih_describe(&ih, d, sizeof d) == LC_OK && strstr(d, "tail-block=16"));
    ih.block_q = 8;
    CHECK(ih_validate(&ih) == LC_ERR_INVALID_ARG && msg_has("infinitehip: tail-block=16"));
    CHECK(ih_set(&ih, "tail-block", "65") == LC_ERR_INVALID_ARG);
    lc_hipattn_params hp;
    hp_preset("2k", &hp);
    CHECK(hp.tail_block == 0 && hp_set(&hp, "tail-block", "8") == LC_OK);
    CHECK(hp_validate(&hp) == LC_OK);
    CHECK(hp_describe(&hp, d, sizeof d) == LC_OK && strstr(d, "tail-block=8"));
    hp.tail_block = 33;
    CHECK(hp_validate(&hp) == LC_ERR_INVALID_ARG && msg_has("hip: tail-block=33"));
    /* the defaults (measured, bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): presets
     * "default" and TokenSelect's default settings; the papers' presets keep 0 */
    lc_infinitehip_params dih;
    CHECK(ih_preset("default", &dih) == LC_OK && dih.tail_block == 16);
    dih.tail_block = 0;
    lc_infinitehip_params f64;
    CHECK(ih_preset("3k-fine64", &f64) == LC_OK && f64.tail_block == 0);
    CHECK(memcmp(&dih, &f64, sizeof dih) == 0); /* default = 3k-fine64 + tail-block 16 */
    lc_hipattn_params dhp;
    CHECK(hp_preset("default", &dhp) == LC_OK && dhp.tail_block == 8 && dhp.k == 2048);
    CHECK(hp_preset("512", &dhp) == LC_OK && dhp.tail_block == 0);
    const lc_context_params cp = lc_context_default_params();
    CHECK(cp.attn == NULL && cp.attn_settings == NULL); /* dense; each method's default preset */
    CHECK(lc_attn_check("infinitehip", cp.attn_settings, d, sizeof d) == LC_OK &&
          strstr(d, "tail-block=16"));
    CHECK(lc_attn_check("hip", cp.attn_settings, d, sizeof d) == LC_OK && strstr(d, "tail-block=8"));
    CHECK(lc_attn_check("tokenselect", cp.attn_settings, d, sizeof d) == LC_OK &&
          strstr(d, "tail-block=16"));
    lc_tokenselect_params ts = ts_default();
    CHECK(ts.tail_block == 16);
    ts.tail_block = 0; /* the paper's */
    CHECK(ts_set(&ts, "tail-block", "16") == LC_OK);
    CHECK(ts_validate(&ts) == LC_OK);
    CHECK(ts_describe(&ts, d, sizeof d) == LC_OK && strstr(d, "tail-block=16"));
    ts.chunk = 8;
    ts.n_local = 512;
    CHECK(ts_validate(&ts) == LC_ERR_INVALID_ARG && msg_has("tokenselect: tail-block=16"));
}

int main(void) {
    check_presets();
    check_set();
    check_validate();
    check_tail_blocks();
    TEST_END();
}
