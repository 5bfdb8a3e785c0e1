// hip_stage.cu — InfiniteHiP pruning stage on the GPU (placeholder until written).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "util/util.h"

extern "C" size_t lc_cuda_hip_stage_scratch_bytes(int32_t, int32_t, const lc_hip_stage_args *) {
    return 0;
}
extern "C" int lc_cuda_hip_stage(const lc_kv_layer_view *, const lc_attn_seq *,
                                 const lc_hip_qblock *, int32_t, const float *, int32_t,
                                 const lc_rope_table *, const lc_hip_stage_args *, void *, size_t) {
    return lc_fail(LC_ERR_UNSUPPORTED, "hip_stage: not implemented on CUDA yet");
}
