/*
 * select_params.c — settings of the HiP (paper 004_b4c89dd3429c70a1.txt; digest
 * spec/infinitehip-and-hip.md §1.10) and TokenSelect (paper 001_823a2d0cdd44ac9c.txt; digest
 * spec/tokenselect-and-sparseserve.md A.7) attention methods: defaults and presets, knobs set by
 * name (--hip-NAME=VALUE with --attn hip, --ts-NAME=VALUE), and the checks that reject a bad
 * value with a message naming the option and its allowed range before any kernel sees it.
 */
#include "attn/params_parse.h"
#include "longctx.h"
#include "util/util.h"

#include <stdio.h>
#include <string.h>

#define SEL_MAX_TOKENS (1 << 30)

/* ---- HiP ---- */

/* k 512, b_q 32, b_k 2 (the paper's defaults); b_sq 2, b_sk 1 (the one setting it names, its
 * healing run); l_d 3 (its "3 if 7B"); r_m 8. Sink and window sizes are not given in the paper:
 * 128 + 512, the same as TokenSelect's, so the two spend the same budget at equal k. */
int lc_hipattn_preset(const char *name, lc_hipattn_params *out) {
    if (!name || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_hipattn_preset: NULL argument");
    lc_hipattn_params p;
    memset(&p, 0, sizeof p);
    p.block_q      = 32;
    p.block_k      = 2;
    p.q_stride     = 2;
    p.k_stride     = 1;
    p.n_sink       = 128;
    p.n_stream     = 512;
    p.dense_layers = 3;
    p.refresh      = 8;
    p.rope         = LC_HIP_ROPE_AUTO;
    p.per_group    = 1;
    if (name && !strcmp(name, "512")) p.k = 512;
    else if (name && !strcmp(name, "2k")) p.k = 2048;
    else if (name && !strcmp(name, "default")) {
        /* ours (lc_context_default_params): 2k whose prompt ends (the question) select in
         * 8-row blocks: Qwen2.5-Coder-1.5B at 64K, fact, 20 paired trials (H200,
         * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 14/20 against 11/20 without,
         * dense 15/20 */
        p.k          = 2048;
        p.tail_block = 8;
    } else
        return lc_fail(LC_ERR_NOT_FOUND, "unknown HiP preset \"%s\" (known: default, 512, 2k)",
                       name ? name : "(null)");
    *out = p;
    return LC_OK;
}

int lc_hipattn_set(lc_hipattn_params *p, const char *name, const char *v) {
    if (!p || !name || !v) return lc_fail(LC_ERR_INVALID_ARG, "lc_hipattn_set: NULL argument");
    if (lc_same_opt(name, "k")) return lc_opt_int("hip", name, v, 1, SEL_MAX_TOKENS, &p->k);
    if (lc_same_opt(name, "block-q")) return lc_opt_int("hip", name, v, 1, 512, &p->block_q);
    if (lc_same_opt(name, "block-k")) return lc_opt_int("hip", name, v, 1, 64, &p->block_k);
    if (lc_same_opt(name, "q-stride")) return lc_opt_int("hip", name, v, 1, 512, &p->q_stride);
    if (lc_same_opt(name, "k-stride")) return lc_opt_int("hip", name, v, 1, 64, &p->k_stride);
    if (lc_same_opt(name, "sink")) return lc_opt_int("hip", name, v, 0, SEL_MAX_TOKENS, &p->n_sink);
    if (lc_same_opt(name, "stream"))
        return lc_opt_int("hip", name, v, 1, SEL_MAX_TOKENS, &p->n_stream);
    if (lc_same_opt(name, "dense-layers"))
        return lc_opt_int("hip", name, v, 0, 1 << 16, &p->dense_layers);
    if (lc_same_opt(name, "refresh")) return lc_opt_int("hip", name, v, 1, 1 << 20, &p->refresh);
    if (lc_same_opt(name, "rope")) return lc_opt_rope("hip", v, true, &p->rope);
    if (lc_same_opt(name, "tail-block"))
        return lc_opt_int("hip", name, v, 0, 512, &p->tail_block);
    if (lc_same_opt(name, "heads")) {
        if (!strcmp(v, "all")) return p->per_group = 0, LC_OK;
        if (!strcmp(v, "group")) return p->per_group = 1, LC_OK;
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-heads=%s: expected all or group", v);
    }
    return lc_fail(LC_ERR_INVALID_ARG, "unknown HiP option --hip-%s (known with --attn hip: k, "
                   "block-q, block-k, q-stride, k-stride, sink, stream, dense-layers, refresh, "
                   "rope, heads, tail-block)", name);
}

int lc_hipattn_validate(const lc_hipattn_params *p) {
    if (!p) return lc_fail(LC_ERR_INVALID_ARG, "lc_hipattn_validate: NULL argument");
    if (p->block_k < 1 || p->block_k > 64)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-block-k=%d; allowed 1 .. 64", p->block_k);
    if (p->k < p->block_k || p->k > SEL_MAX_TOKENS || p->k % p->block_k || p->k / p->block_k > 4096)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-k=%d; allowed: a multiple of block-k %d, from "
                       "%d up to %d key blocks", p->k, p->block_k, p->block_k, 4096);
    if (p->block_q < 1 || p->block_q > 512)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-block-q=%d; allowed 1 .. 512", p->block_q);
    if (p->q_stride < 1 || p->q_stride > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-q-stride=%d; allowed 1 .. block-q (%d)",
                       p->q_stride, p->block_q);
    if (p->k_stride < 1 || p->k_stride > p->block_k)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-k-stride=%d; allowed 1 .. block-k (%d)",
                       p->k_stride, p->block_k);
    if (p->n_sink < 0 || p->n_sink > SEL_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-sink=%d; allowed 0 .. %d", p->n_sink, SEL_MAX_TOKENS);
    if (p->n_stream < 1 || p->n_stream > SEL_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-stream=%d; allowed 1 .. %d", p->n_stream,
                       SEL_MAX_TOKENS);
    if (p->dense_layers < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-dense-layers=%d; allowed >= 0", p->dense_layers);
    if (p->refresh < 1 || p->refresh > (1 << 20))
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-refresh=%d; allowed 1 .. 1048576", p->refresh);
    if (p->rope < LC_HIP_ROPE_AUTO || p->rope > LC_HIP_ROPE_STREAM)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-rope: mode %d; allowed auto, extend, plain, stream",
                       p->rope);
    if (p->per_group != 0 && p->per_group != 1)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-heads: %d; allowed all (0) or group (1)",
                       p->per_group);
    if (p->tail_block < 0 || p->tail_block > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "--hip-tail-block=%d; allowed 0 (off) .. block-q (%d)",
                       p->tail_block, p->block_q);
    return LC_OK;
}

int lc_hipattn_describe(const lc_hipattn_params *p, char *buf, size_t cap) {
    if (!p || !buf || !cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_hipattn_describe: NULL argument");
    const int n = snprintf(buf, cap, "k=%d block-q=%d block-k=%d q-stride=%d k-stride=%d sink=%d "
                           "stream=%d dense-layers=%d refresh=%d rope=%s heads=%s tail-block=%d", p->k,
                           p->block_q, p->block_k, p->q_stride, p->k_stride, p->n_sink,
                           p->n_stream, p->dense_layers, p->refresh, lc_rope_mode_name(p->rope),
                           p->per_group ? "group" : "all", p->tail_block);
    if (n < 0 || (size_t)n >= cap)
        return lc_fail(LC_ERR_INVALID_ARG, "describe: buffer of %zu bytes too small", cap);
    return LC_OK;
}

/* ---- TokenSelect ---- */

lc_tokenselect_params lc_tokenselect_default(void) {
    lc_tokenselect_params p;
    memset(&p, 0, sizeof p);
    p.k            = 2048;
    p.n_init       = 128;
    p.n_local      = 512;
    p.chunk        = 512;
    p.theta        = 0.9f;
    p.gqa_mod      = 0;
    p.rope         = LC_HIP_ROPE_AUTO;
    p.dense_layers = 0;
    /* ours: the prompt's last chunk (where the question is) selects in 16-row chunks;
     * Qwen2.5-Coder-1.5B at 64K, fact, 20 paired trials (H200,
     * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 20/20 against the paper's 9/20
     * (tail-block=0), dense 15/20 */
    p.tail_block = 16;
    return p;
}

int lc_tokenselect_set(lc_tokenselect_params *p, const char *name, const char *v) {
    if (!p || !name || !v) return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenselect_set: NULL argument");
    if (lc_same_opt(name, "k")) return lc_opt_int("ts", name, v, 1, SEL_MAX_TOKENS, &p->k);
    if (lc_same_opt(name, "init")) return lc_opt_int("ts", name, v, 0, SEL_MAX_TOKENS, &p->n_init);
    if (lc_same_opt(name, "local")) return lc_opt_int("ts", name, v, 1, SEL_MAX_TOKENS, &p->n_local);
    if (lc_same_opt(name, "chunk")) return lc_opt_int("ts", name, v, 1, 4096, &p->chunk);
    if (lc_same_opt(name, "theta")) return lc_opt_float("ts", name, v, -1.0, 2.0, &p->theta);
    if (lc_same_opt(name, "dense-layers"))
        return lc_opt_int("ts", name, v, 0, 1 << 16, &p->dense_layers);
    if (lc_same_opt(name, "rope")) return lc_opt_rope("ts", v, false, &p->rope);
    if (lc_same_opt(name, "tail-block"))
        return lc_opt_int("ts", name, v, 0, 4096, &p->tail_block);
    if (lc_same_opt(name, "gqa")) {
        if (!strcmp(v, "group")) return p->gqa_mod = 0, LC_OK;
        if (!strcmp(v, "mod")) return p->gqa_mod = 1, LC_OK;
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-gqa=%s: expected group (the model's mapping) or "
                       "mod (the paper's code: head h reads KV head h mod n_kv_head)", v);
    }
    return lc_fail(LC_ERR_INVALID_ARG, "unknown TokenSelect option --ts-%s (known: k, init, local, "
                   "chunk, theta, gqa, rope, dense-layers, tail-block)", name);
}

int lc_tokenselect_validate(const lc_tokenselect_params *p) {
    if (!p) return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenselect_validate: NULL argument");
    if (p->k < 1 || p->k > SEL_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-k=%d; allowed 1 .. %d", p->k, SEL_MAX_TOKENS);
    if (p->n_init < 0 || p->n_init > SEL_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-init=%d; allowed 0 .. %d", p->n_init, SEL_MAX_TOKENS);
    if (p->chunk < 1 || p->chunk > 4096)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-chunk=%d; allowed 1 .. 4096", p->chunk);
    if (p->n_local < p->chunk || p->n_local > SEL_MAX_TOKENS)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-local=%d; allowed chunk (%d) .. %d: a prefill "
                       "chunk's own rows are part of its local window", p->n_local, p->chunk,
                       SEL_MAX_TOKENS);
    if (!(p->theta >= -1.0f && p->theta <= 2.0f))
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-theta=%g; allowed -1 .. 1 (above 1: no selection "
                       "cache), at most 2", (double)p->theta);
    if (p->gqa_mod != 0 && p->gqa_mod != 1)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-gqa: %d; allowed group (0) or mod (1)", p->gqa_mod);
    if (p->rope != LC_HIP_ROPE_AUTO && p->rope != LC_HIP_ROPE_EXTEND && p->rope != LC_HIP_ROPE_PLAIN &&
        p->rope != LC_HIP_ROPE_STREAM)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-rope: mode %d; allowed auto, extend, plain", p->rope);
    if (p->dense_layers < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-dense-layers=%d; allowed >= 0", p->dense_layers);
    if (p->tail_block < 0 || p->tail_block > p->chunk)
        return lc_fail(LC_ERR_INVALID_ARG, "--ts-tail-block=%d; allowed 0 (off) .. chunk (%d)",
                       p->tail_block, p->chunk);
    return LC_OK;
}

int lc_tokenselect_describe(const lc_tokenselect_params *p, char *buf, size_t cap) {
    if (!p || !buf || !cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenselect_describe: NULL argument");
    const int n = snprintf(buf, cap, "k=%d init=%d local=%d chunk=%d theta=%g gqa=%s rope=%s "
                           "dense-layers=%d tail-block=%d", p->k, p->n_init, p->n_local, p->chunk,
                           (double)p->theta, p->gqa_mod ? "mod" : "group",
                           lc_rope_mode_name(p->rope), p->dense_layers, p->tail_block);
    if (n < 0 || (size_t)n >= cap)
        return lc_fail(LC_ERR_INVALID_ARG, "describe: buffer of %zu bytes too small", cap);
    return LC_OK;
}
