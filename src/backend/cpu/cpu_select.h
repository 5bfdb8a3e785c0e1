/*
 * cpu_select.h — what the CPU twins of the sparse ops (prune_chunks, select_blocks, select_tokens,
 * attn_segments; backend.h) share: the checks they make beyond the shared lc_*_check functions
 * (the head dims the CPU code has buffers for, each query block against its sequence: the CUDA
 * kernels read the blocks as device data and do not check them), one function each so the
 * twins refuse the same calls with the same messages; and the order-preserving score key the
 * selections rank by.
 */
#ifndef LC_CPU_SELECT_H
#define LC_CPU_SELECT_H

#include "backend/backend.h"

#include <math.h>
#include <string.h>

/* Order-preserving map of a score to an unsigned key (NaN counts as -inf); the CUDA twins rank
 * with the same map, so both break ties between equal floats the same way. */
static inline uint32_t lc_cpu_score_key(float s) {
    if (isnan(s)) s = -INFINITY;
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* LC_ERR_INVALID_ARG "<op>: head dim D on the CPU (at most max_d)" for head_dim > max_d. */
int lc_cpu_check_head_dim(const char *op, int32_t head_dim, int32_t max_d);

/* LC_ERR_INVALID_ARG "<op>: block b: sequence s of n_seqs" unless block b's sequence exists. */
int lc_cpu_check_block_seq(const char *op, const lc_qblock *qb, int32_t b, int32_t n_seqs);

/* Every block of a selection op's batch, in order: its sequence exists; its 1..max_rows rows lie
 * inside that sequence at the sequence's positions, and 0 <= win0 <= pos0 + n_rows; with
 * max_cand >= 0, at most max_cand candidates [n_sink, win0); with rope (scoring at the true
 * positions), its positions inside the table. */
int lc_cpu_check_blocks(const char *op, const lc_attn_seq *seqs, int32_t n_seqs,
                        const lc_qblock *qb, int32_t n_qb, int32_t max_rows, int32_t n_sink,
                        int32_t max_cand, const lc_rope_table *rope);

#endif
