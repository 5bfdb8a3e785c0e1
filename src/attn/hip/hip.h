/*
 * hip.h — HiP's settings struct (spec/infinitehip-and-hip.md §1.10; paper 004 Alg. 1–2),
 * private to the library and its tests: the table and presets are in hip/settings.c, the
 * method in hip/hip.c.
 */
#ifndef LC_ATTN_HIP_H
#define LC_ATTN_HIP_H

#include "attn/attn.h"

/* Each query block of block_q rows keeps k tokens as k / block_k key blocks found by the
 * iterative hierarchical top-k, besides the n_sink first and the n_stream most recent tokens;
 * rows are sampled every q_stride, keys every k_stride; decode recomputes the mask every
 * refresh steps. */
typedef struct lc_hipattn_params {
    int32_t k;            /* tokens kept: a multiple of block_k (512 or 2048 in the paper) */
    int32_t block_q;      /* b_q: rows per query block in prefill, 1 .. 512 */
    int32_t block_k;      /* b_k: tokens per key block, 1 .. 64 */
    int32_t q_stride;     /* b_sq: every q_stride-th row of a block scores, 1 .. block_q */
    int32_t k_stride;     /* b_sk: every k_stride-th key of a key block scores, 1 .. block_k */
    int32_t n_sink;       /* first tokens always attended */
    int32_t n_stream;     /* most recent tokens always attended, >= 1 */
    int32_t dense_layers; /* l_d: layers [0, dense_layers) run dense attention */
    int32_t refresh;      /* r_m: decode steps between mask estimations, >= 1 */
    int32_t rope;         /* lc_hip_rope_mode, as InfiniteHiP: past the trained window (auto)
                             the mask scores at relative positions and the attention
                             re-indexes StreamingLLM-style (our addition; HiP has none) */
    int32_t per_group;    /* 1: one mask per KV head (max over its query heads; HiP's masks are
                             per head), 0: one for all heads */
    int32_t tail_block;   /* ours: the prompt's last block_q rows select in blocks of this many
                             rows, 1 .. block_q (0: blocks of block_q throughout) */
} lc_hipattn_params;

extern const lc_attn_desc lc_attn_desc_hip; /* its registry entry */

/* An instance (hip/hip.c); p is validated here. */
int lc_attn_hipattn_create(lc_backend *b, const lc_attn_shape *shape, const lc_hipattn_params *p,
                           const lc_attn_diag *diag, lc_attn_method **out);

#endif
