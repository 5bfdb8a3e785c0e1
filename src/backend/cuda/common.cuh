// common.cuh — shared by the CUDA backend's .cu files: error checking (every CUDA call goes
// through LC_CUDA_TRY, which records the failing call, file and line with lc_fail and returns
// its status) and the stream all of the backend's kernels run on.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" {
#include "util/util.h"
}

#define LC_CUDA_TRY(call)                                                                     \
    do {                                                                                      \
        cudaError_t err_ = (call);                                                            \
        if (err_ != cudaSuccess)                                                              \
            return lc_fail(LC_ERR_INTERNAL, "CUDA error %s at %s:%d (%s)",                    \
                           cudaGetErrorString(err_), __FILE__, __LINE__, #call);              \
    } while (0)

#define LC_CUDA_LAUNCHED() LC_CUDA_TRY(cudaGetLastError())

// The stream every op launches on: the backend's own stream once one exists (so a decode step
// can be captured into a CUDA graph), the legacy default stream before (standalone op tests).
cudaStream_t lc_cuda_stream(void);
void         lc_cuda_set_stream(cudaStream_t s);

typedef __nv_bfloat16 lc_bf16;

// Kernel launch on lc_cuda_stream(); with pdl (and a GPU of compute capability 9 or more, and
// LONGCTX_PDL not 0) as a programmatic dependent of the stream's previous kernel: its CTAs may
// become resident while that kernel finishes, hiding the launch latency of a chain of small
// kernels (a decode step's stages). The kernel must then call pdl_wait() (device_prims.cuh)
// before it touches memory that earlier work of the stream writes or reads.
bool lc_cuda_pdl_on(void);
template <typename... KArgs, typename... Args>
cudaError_t lc_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, bool pdl,
                      Args... args) {
    cudaLaunchConfig_t  cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim          = grid;
    cfg.blockDim         = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream           = lc_cuda_stream();
    if (pdl && lc_cuda_pdl_on()) {
        at[0].id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at, cfg.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
}
