/*
 * cpu_hip_sparse.c — block-sparse attention, CPU reference (placeholder until written).
 */
#include "backend/cpu/cpu.h"
#include "util/util.h"

int lc_cpu_attn_sparse(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                       const lc_hip_qblock *qb, int32_t n_qb, const float *q, int32_t n_head,
                       const lc_rope_table *rope, float scale, const lc_hip_sparse_args *a,
                       float *out) {
    (void)kv, (void)seqs, (void)n_seqs, (void)qb, (void)n_qb, (void)q, (void)n_head,
        (void)rope, (void)scale, (void)a, (void)out;
    return lc_fail(LC_ERR_UNSUPPORTED, "attn_sparse: not implemented yet");
}
