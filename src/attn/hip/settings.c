/*
 * settings.c — HiP's settings table (paper 004_b4c89dd3429c70a1.txt; digest
 * spec/infinitehip-and-hip.md §1.10): every key with its range and help, the presets, and the
 * checks across keys that reject a bad combination with a message naming the key and its
 * allowed range before any kernel sees it.
 */
#include "attn/hip/hip.h"

#include "util/util.h"

#include <stddef.h>

#define SEL_MAX_TOKENS (1 << 30)
#define OFF(f) offsetof(lc_hipattn_params, f)


static const lc_setting keys[] = {
    {"k", LC_SETTING_INT, OFF(k), 0, 0, 1, SEL_MAX_TOKENS, NULL,
     "tokens kept: a multiple of block-k, at most 4096 key blocks", NULL},
    {"block-q", LC_SETTING_INT, OFF(block_q), 0, 0, 1, 512, NULL,
     "b_q: rows per query block in prefill", NULL},
    {"block-k", LC_SETTING_INT, OFF(block_k), 0, 0, 1, 64, NULL, "b_k: tokens per key block",
     NULL},
    {"q-stride", LC_SETTING_INT, OFF(q_stride), 0, 0, 1, 512, NULL,
     "b_sq: every q-stride-th row of a block scores (at most block-q)", NULL},
    {"k-stride", LC_SETTING_INT, OFF(k_stride), 0, 0, 1, 64, NULL,
     "b_sk: every k-stride-th key of a key block scores (at most block-k)", NULL},
    {"sink", LC_SETTING_INT, OFF(n_sink), 0, 0, 0, SEL_MAX_TOKENS, NULL,
     "first tokens always attended", NULL},
    {"stream", LC_SETTING_INT, OFF(n_stream), 0, 0, 1, SEL_MAX_TOKENS, NULL,
     "most recent tokens always attended", NULL},
    LC_SETTING_DENSE_LAYERS(lc_hipattn_params), /* the paper's l_d */
    {"refresh", LC_SETTING_INT, OFF(refresh), 0, 0, 1, 1 << 20, NULL,
     "r_m: decode steps between mask estimations", NULL},
    {"rope", LC_SETTING_ENUM, OFF(rope), 0, 0, 0, 0, lc_rope_names_stream,
     "RoPE past the trained window (ours; HiP has none): auto, extend, plain, stream", NULL},
    LC_SETTING_HEADS(lc_hipattn_params, "mask"),
    LC_SETTING_TAIL_BLOCK(lc_hipattn_params, 512, "block"),
};

/* b_q 32, b_k 2 (the paper's defaults); b_sq 2, b_sk 1 (the one setting it names, its healing
 * run); l_d 3 (its "3 if 7B"); r_m 8. Sink and window sizes are not given in the paper: 128 +
 * 512, the same as TokenSelect's, so the two spend the same budget at equal k. Every preset
 * sets k. */
static const lc_hipattn_params base = {
    .block_q      = 32,
    .block_k      = 2,
    .q_stride     = 2,
    .k_stride     = 1,
    .n_sink       = 128,
    .n_stream     = 512,
    .dense_layers = 3,
    .refresh      = 8,
    .rope         = LC_HIP_ROPE_AUTO,
    .per_group    = 1,
};

static const lc_settings_preset presets[] = {
    /* ours (lc_context_default_params): 2k whose prompt ends (the question) select in 8-row
     * blocks: Qwen2.5-Coder-1.5B at 64K, fact, 20 paired trials (H200,
     * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 14/20 against 11/20 without,
     * dense 15/20 */
    {"default", "k=2048 tail-block=8", "2k with tail-block=8 (the default)"},
    {"512", "k=512", "the paper's k 512"},
    {"2k", "k=2048", "the paper's k 2048"},
};

static int validate(const void *settings) {
    const lc_hipattn_params *p = settings;
    if (p->k % p->block_k || p->k < p->block_k || p->k / p->block_k > 4096)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: k=%d; allowed: a multiple of block-k %d, from "
                       "%d up to %d key blocks", p->k, p->block_k, p->block_k, 4096);
    if (p->q_stride > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: q-stride=%d; allowed 1..block-q (%d)",
                       p->q_stride, p->block_q);
    if (p->k_stride > p->block_k)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: k-stride=%d; allowed 1..block-k (%d)",
                       p->k_stride, p->block_k);
    if (p->tail_block > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: tail-block=%d; allowed 0 (off)..block-q (%d)",
                       p->tail_block, p->block_q);
    return LC_OK;
}

LC_ATTN_ROPE_ROWS_PAST_STREAM(fixed_rope_rows, lc_hipattn_params)
LC_ATTN_TYPED_CREATE(create, lc_attn_hipattn_create, lc_hipattn_params)

const lc_attn_desc lc_attn_desc_hip = {
    .name     = "hip",
    .summary  = "HiP: iterative hierarchical top-k of key blocks per query block, the mask "
                "refreshed every few decode steps",
    .settings = LC_SETTINGS_TABLE("hip", lc_hipattn_params, base, keys, presets),
    .validate        = validate,
    .create          = create,
    .fixed_rope_rows = fixed_rope_rows,
};
