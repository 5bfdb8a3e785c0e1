/*
 * infinitehip_params.c — InfiniteHiP settings: the named presets of the paper (App. F and E.2;
 * spec/infinitehip-and-hip.md §3.6), knobs set by name (--hip-NAME=VALUE), and the checks
 * that turn a bad value into a message naming the option and its allowed range before any
 * kernel sees it. Also the attention-method names of the public API.
 */
#include "longctx.h"
#include "attn/params_parse.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lc_attn_kind_from_name(const char *name, lc_attn_kind *out) {
    if (!name || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_attn_kind_from_name: NULL argument");
    if (name && strcmp(name, "dense") == 0) return *out = LC_ATTN_DENSE, LC_OK;
    if (name && strcmp(name, "infinitehip") == 0) return *out = LC_ATTN_INFINITEHIP, LC_OK;
    if (name && strcmp(name, "hip") == 0) return *out = LC_ATTN_HIP, LC_OK;
    if (name && strcmp(name, "tokenselect") == 0) return *out = LC_ATTN_TOKENSELECT, LC_OK;
    return lc_fail(LC_ERR_NOT_FOUND, "unknown attention method \"%s\" (known: dense, "
                   "infinitehip, hip, tokenselect)",
                   name ? name : "(null)");
}

const char *lc_attn_kind_name(lc_attn_kind k) {
    switch (k) {
    case LC_ATTN_DENSE: return "dense";
    case LC_ATTN_INFINITEHIP: return "infinitehip";
    case LC_ATTN_HIP: return "hip";
    case LC_ATTN_TOKENSELECT: return "tokenselect";
    }
    return "unknown";
}

/* The shared defaults (256 sink, 1024 streaming, b_q 64, three stages, 4096 tokens kept in
 * the first three layers which also use chunk-indexed RoPE; stages 1-2 pool 4 query rows, as
 * the reference's ScanStage(64, 4, ...)), then the preset's chunks, budgets and refreshes. */
static lc_infinitehip_params base(void) {
    lc_infinitehip_params p;
    memset(&p, 0, sizeof p);
    p.n_stages     = 3;
    p.block_q      = 64;
    p.n_sink       = 256;
    p.n_stream     = 1024;
    p.first_layers = 3;
    p.first_k      = 4096;
    p.dense_layers = 0;
    p.rope         = LC_HIP_ROPE_AUTO;
    p.per_group    = 0;
    const int32_t qs[3] = {4, 4, 1};
    memcpy(p.q_stride, qs, sizeof qs);
    return p;
}

static void set3(int32_t *dst, int32_t a, int32_t b, int32_t c) {
    dst[0] = a, dst[1] = b, dst[2] = c;
}

int lc_infinitehip_preset(const char *name, lc_infinitehip_params *out) {
    if (!name || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_infinitehip_preset: NULL argument");
    lc_infinitehip_params p = base();
    if (!name) name = "(null)";
    if (strcmp(name, "3k") == 0 || strcmp(name, "fast") == 0 || strcmp(name, "flash") == 0 ||
        strcmp(name, "3k-fine") == 0 || strcmp(name, "3k-kv") == 0) {
        /* 3k-fine (ours, not the paper's): the last stage picks single tokens instead of
         * 8-token chunks; the same budgets and refreshes as 3k. Small models (SmolLM2-135M)
         * lose retrieval with 8-token chunks at budgets where token-level selection keeps it
         * (bench/NOTES.md) */
        set3(p.chunk, 256, 32, strcmp(name, "3k-fine") == 0 ? 1 : 8);
        set3(p.k, 32768, 8192, 2048);
        if (strcmp(name, "3k") == 0 || strcmp(name, "3k-fine") == 0 || strcmp(name, "3k-kv") == 0)
            set3(p.refresh, 16, 8, 4);
        else if (strcmp(name, "fast") == 0) set3(p.refresh, 32, 16, 8);
        else set3(p.refresh, 96, 24, 8);
        /* 3k-kv (ours): 3k with one SelectRep descent per KV head in every stage (the branch
         * by the max over the KV head's query heads): 4x fewer probes at the same tensor-core
         * work; H100, 8B shape, 32K rows: prefill 26.4 -> 19.3 ms at 128K, 71.6 -> 46.8 ms at
         * 1M; niah on SmolLM2 as 3k's (bench/NOTES.md 29) */
        if (strcmp(name, "3k-kv") == 0) set3(p.kv_descent, 1, 1, 1);
    } else if (strcmp(name, "3k-fine64") == 0 || strcmp(name, "default") == 0) {
        /* 3k-fine64 (ours): 3k-fine with 64-token chunks in the first stage (as the paper's
         * 5k) and 16 in the second: SmolLM2-135M keeps a RULER needle at 128K with it (9/10
         * against 5/10 with 256-token chunks, bench/NOTES.md 18) at ~3x the stage-1 work; and
         * overlapping first-stage chunks, so a needle across a chunk border is not lost
         * (niah 47/48 against 42/48 at 4K-1M, +20% prefill at 128K, bench/NOTES.md 27) */
        set3(p.chunk, 64, 16, 1);
        set3(p.k, 32768, 8192, 2048);
        set3(p.refresh, 16, 8, 4);
        p.overlap = 1;
        /* default (ours; lc_context_default_params): 3k-fine64 whose prompt ends (the question)
         * select in 16-row blocks: Qwen2.5-Coder-1.5B, fact, 20 paired trials (H200,
         * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 11/20 at 256K against 9/20
         * without, 20/20 at 64K as without */
        if (strcmp(name, "default") == 0) p.tail_block = 16;
        /* (one descent per KV head, --hip-kv-descent=1,1,1, halves its cost — 62.0 -> 37.4 ms
         * at 128K, 311 -> 169 ms at 1M — but found 9/10 needles at 1M against 12/13 per head:
         * left off in this retrieval preset, bench/NOTES.md 29) */
    } else if (strcmp(name, "5k") == 0) {
        set3(p.chunk, 64, 32, 16);
        set3(p.k, 32768, 16384, 4096);
        set3(p.refresh, 16, 8, 4);
        p.first_k = 4096;
    } else {
        return lc_fail(LC_ERR_NOT_FOUND, "unknown InfiniteHiP preset \"%s\" (known: %s)", name,
                       lc_infinitehip_preset_names());
    }
    *out = p;
    return LC_OK;
}

const char *lc_infinitehip_preset_names(void) {
    return "default, 3k, fast, flash, 5k, 3k-fine, 3k-fine64, 3k-kv";
}

static int parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int32_t *out) {
    return lc_opt_int("hip", opt, v, lo, hi, out);
}

/* "a,b,c" into dst (1 .. LC_HIP_MAX_STAGES values); *n = how many */
static int parse_list(const char *opt, const char *v, int64_t lo, int64_t hi, int32_t *dst,
                      int32_t *n) {
    int32_t     vals[LC_HIP_MAX_STAGES];
    int32_t     cnt = 0;
    const char *s   = v;
    while (1) {
        const char *comma = strchr(s, ',');
        size_t      len   = comma ? (size_t)(comma - s) : strlen(s);
        char        buf[32];
        if (cnt == LC_HIP_MAX_STAGES || len == 0 || len >= sizeof buf)
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-%s=%s: expected 1 .. %d comma-separated "
                           "integers in %lld .. %lld", opt, v, LC_HIP_MAX_STAGES, (long long)lo,
                           (long long)hi);
        memcpy(buf, s, len);
        buf[len] = 0;
        int st   = parse_int(opt, buf, lo, hi, &vals[cnt]);
        if (st != LC_OK) return st;
        cnt++;
        if (!comma) break;
        s = comma + 1;
    }
    memcpy(dst, vals, sizeof(int32_t) * (size_t)cnt);
    *n = cnt;
    return LC_OK;
}

#define same_opt lc_same_opt

#define HIP_MAX_TOKENS (1 << 30)

int lc_infinitehip_set(lc_infinitehip_params *p, const char *name, const char *value) {
    if (!p || !name || !value)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_infinitehip_set: NULL argument");
    int32_t n = 0;
    int     st;
    /* a list option: the stage count follows the list given last */
    int32_t *list = NULL;
    int64_t  lo = 1, hi = HIP_MAX_TOKENS;
    if (same_opt(name, "chunks") || same_opt(name, "chunk")) list = p->chunk, hi = 1 << 20;
    else if (same_opt(name, "k")) list = p->k;
    else if (same_opt(name, "refresh")) list = p->refresh, hi = 1 << 20;
    else if (same_opt(name, "q-stride")) list = p->q_stride, hi = 64;
    else if (same_opt(name, "kv-descent")) list = p->kv_descent, lo = 0, hi = 1;
    if (list) {
        if ((st = parse_list(name, value, lo, hi, list, &n)) != LC_OK) return st;
        /* the chunk and k lists set the stage count; refresh, q-stride and kv-descent lists are
         * per stage */
        if (list == p->chunk || list == p->k) p->n_stages = n;
        return LC_OK;
    }
    if (same_opt(name, "block-q")) return parse_int(name, value, 1, 64, &p->block_q);
    if (same_opt(name, "sink")) return parse_int(name, value, 0, HIP_MAX_TOKENS, &p->n_sink);
    if (same_opt(name, "stream")) return parse_int(name, value, 1, HIP_MAX_TOKENS, &p->n_stream);
    if (same_opt(name, "first-layers")) return parse_int(name, value, 0, 1 << 16, &p->first_layers);
    if (same_opt(name, "first-k")) return parse_int(name, value, 1, HIP_MAX_TOKENS, &p->first_k);
    if (same_opt(name, "dense-layers")) return parse_int(name, value, 0, 1 << 16, &p->dense_layers);
    if (same_opt(name, "rope")) return lc_opt_rope("hip", value, true, &p->rope);
    if (same_opt(name, "stagger")) return parse_int(name, value, 0, 1, &p->stagger);
    if (same_opt(name, "overlap")) return parse_int(name, value, 0, 1, &p->overlap);
    if (same_opt(name, "tail-block")) return parse_int(name, value, 0, 64, &p->tail_block);
    if (same_opt(name, "heads")) {
        if (strcmp(value, "all") == 0) return p->per_group = 0, LC_OK;
        if (strcmp(value, "group") == 0) return p->per_group = 1, LC_OK;
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-heads=%s: expected all or group", value);
    }
    return lc_fail(LC_ERR_INVALID_ARG, "unknown InfiniteHiP option --hip-%s (known: chunks, k, "
                   "refresh, q-stride, block-q, sink, stream, first-layers, first-k, "
                   "dense-layers, rope, heads, stagger, overlap, kv-descent, tail-block)", name);
}

int lc_infinitehip_validate(const lc_infinitehip_params *p) {
    if (!p) return lc_fail(LC_ERR_INVALID_ARG, "lc_infinitehip_validate: NULL argument");
    const int32_t N = p->n_stages;
    if (N < 1 || N > LC_HIP_MAX_STAGES)
        return lc_fail(LC_ERR_INVALID_ARG, "InfiniteHiP: %d stages; allowed 1 .. %d", N,
                       LC_HIP_MAX_STAGES);
    for (int32_t i = 0; i < N; i++) {
        const int32_t c = p->chunk[i], k = p->k[i];
        if (c < 1 || c > (1 << 20) || (c & (c - 1)))
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-chunks: stage %d chunk %d must be a power "
                           "of two in 1 .. 1048576", i + 1, c);
        if (i > 0 && (c > p->chunk[i - 1] || p->chunk[i - 1] % c))
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-chunks: stage %d chunk %d must divide the "
                           "previous stage's chunk %d", i + 1, c, p->chunk[i - 1]);
        if (k < c || k > HIP_MAX_TOKENS || k % c)
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-k: stage %d keeps %d tokens; allowed: a "
                           "multiple of its chunk %d, from %d up to %d", i + 1, k, c, c,
                           HIP_MAX_TOKENS);
        if (i > 0 && k > p->k[i - 1])
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-k: stage %d keeps %d tokens, more than the "
                           "%d of stage %d (allowed: at most that)", i + 1, k, p->k[i - 1], i);
        if (k / c > 65536)
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-k: stage %d keeps %d chunks of %d; allowed "
                           "at most 65536 chunks", i + 1, k / c, c);
        if (p->refresh[i] < 1 || p->refresh[i] > (1 << 20))
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-refresh: stage %d interval %d; allowed 1 .. "
                           "1048576", i + 1, p->refresh[i]);
        if (p->kv_descent[i] != 0 && p->kv_descent[i] != 1)
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-kv-descent: stage %d value %d; allowed 0 "
                           "or 1", i + 1, p->kv_descent[i]);
        if (p->q_stride[i] < 1 || p->q_stride[i] > p->block_q)
            return lc_fail(LC_ERR_INVALID_ARG, "--hip-q-stride: stage %d stride %d; allowed 1 .. "
                           "block-q (%d)", i + 1, p->q_stride[i], p->block_q);
    }
    if (p->block_q < 1 || p->block_q > 64)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-block-q=%d; allowed 1 .. 64", p->block_q);
    if (p->n_sink < 0 || p->n_sink > HIP_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-sink=%d; allowed 0 .. %d", p->n_sink,
                       HIP_MAX_TOKENS);
    if (p->n_stream < 1 || p->n_stream > HIP_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-stream=%d; allowed 1 .. %d", p->n_stream,
                       HIP_MAX_TOKENS);
    if (p->first_layers < 0 || p->dense_layers < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-%s: negative layer count",
                       p->first_layers < 0 ? "first-layers" : "dense-layers");
    const int32_t cl = p->chunk[N - 1];
    if (p->first_layers > 0 &&
        (p->first_k < cl || p->first_k % cl || p->first_k > p->k[0] || p->first_k / cl > 65536))
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-first-k=%d; allowed: a multiple of the last "
                       "chunk %d, from %d up to the first stage's k %d", p->first_k, cl, cl,
                       p->k[0]);
    if (p->rope < LC_HIP_ROPE_AUTO || p->rope > LC_HIP_ROPE_STREAM)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-rope: mode %d; allowed auto, extend, plain, stream",
                       p->rope);
    if (p->per_group != 0 && p->per_group != 1)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-heads: %d; allowed all (0) or group (1)",
                       p->per_group);
    if (p->stagger != 0 && p->stagger != 1)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-stagger: %d; allowed 0 or 1", p->stagger);
    if (p->stagger && p->chunk[0] < 2)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-stagger=1 needs a first-stage chunk of at "
                       "least 2 (--hip-chunks starts with %d)", p->chunk[0]);
    if (p->overlap != 0 && p->overlap != 1)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-overlap: %d; allowed 0 or 1", p->overlap);
    if (p->overlap && (p->chunk[0] < 2 || N < 2))
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-overlap=1 needs a first-stage chunk of at least "
                       "2 and a later stage (chunks %d, %d stages)", p->chunk[0], N);
    if (p->tail_block < 0 || p->tail_block > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-tail-block=%d; allowed 0 (off) .. block-q (%d)",
                       p->tail_block, p->block_q);
    return LC_OK;
}

int lc_infinitehip_describe(const lc_infinitehip_params *p, char *buf, size_t cap) {
    if (!p || !buf || !cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_infinitehip_describe: NULL argument");
    size_t at = 0;
#define PUT(...)                                                                              \
    do {                                                                                      \
        int n_ = snprintf(buf + at, at < cap ? cap - at : 0, __VA_ARGS__);                   \
        if (n_ > 0) at += (size_t)n_;                                                         \
    } while (0)
    const char *names[3] = {"chunks", "k", "refresh"};
    const int32_t *vals[3] = {p->chunk, p->k, p->refresh};
    for (int j = 0; j < 3; j++) {
        PUT("%s%s=", j ? " " : "", names[j]);
        for (int32_t i = 0; i < p->n_stages && i < LC_HIP_MAX_STAGES; i++)
            PUT("%s%d", i ? "," : "", vals[j][i]);
    }
    PUT(" q-stride=");
    for (int32_t i = 0; i < p->n_stages && i < LC_HIP_MAX_STAGES; i++)
        PUT("%s%d", i ? "," : "", p->q_stride[i]);
    PUT(" kv-descent=");
    for (int32_t i = 0; i < p->n_stages && i < LC_HIP_MAX_STAGES; i++)
        PUT("%s%d", i ? "," : "", p->kv_descent[i]);
    PUT(" block-q=%d sink=%d stream=%d first-layers=%d first-k=%d dense-layers=%d rope=%s "
        "heads=%s stagger=%d overlap=%d tail-block=%d",
        p->block_q, p->n_sink, p->n_stream, p->first_layers, p->first_k, p->dense_layers,
        lc_rope_mode_name(p->rope),
        p->per_group ? "group" : "all", p->stagger, p->overlap, p->tail_block);
#undef PUT
    if (at >= cap) return lc_fail(LC_ERR_INVALID_ARG, "describe: buffer of %zu bytes too small", cap);
    return LC_OK;
}
