/* cpu_hip_mask.c — placeholder until the CPU twin of hip_mask lands (backend/backend.h). */
#include "backend/cpu/cpu.h"
#include "util/util.h"

int lc_cpu_hip_mask(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
               const lc_hip_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
               const lc_rope_table *rope, const lc_hip_mask_args *a) {
    (void)kv, (void)seqs, (void)n_seqs, (void)qb, (void)n_qb, (void)q_raw, (void)n_head, (void)rope, (void)a;
    return lc_fail(LC_ERR_UNSUPPORTED, "hip_mask: not implemented yet");
}
