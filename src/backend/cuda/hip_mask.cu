// hip_mask.cu — placeholder until the CUDA twin of hip_mask lands (backend/backend.h).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

size_t lc_cuda_hip_mask_scratch_bytes(const lc_kv_layer_view *, int32_t, int32_t, const lc_hip_mask_args *) { return 0; }
int lc_cuda_hip_mask(const lc_kv_layer_view *, const lc_attn_seq *, const lc_hip_qblock *, int32_t,
                const float *, int32_t, const lc_rope_table *, const lc_hip_mask_args *, void *, size_t) {
    return lc_fail(LC_ERR_UNSUPPORTED, "hip_mask: not implemented yet");
}
