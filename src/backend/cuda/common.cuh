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

// Lets the kernel (the variadic argument: a template-id may hold commas) take smem bytes of
// dynamic shared memory, set on the first pass only (a static flag per expansion, so per
// template instance of the enclosing launcher; the attribute is per kernel).
#define LC_CUDA_SMEM_ONCE(smem, ...)                                                          \
    do {                                                                                      \
        static bool smem_set_ = false;                                                        \
        if (!smem_set_) {                                                                     \
            LC_CUDA_TRY(cudaFuncSetAttribute(__VA_ARGS__,                                     \
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem)); \
            smem_set_ = true;                                                                 \
        }                                                                                     \
    } while (0)

// The stream every op launches on: the backend's own stream once one exists (so a decode step
// can be captured into a CUDA graph), the legacy default stream before (standalone op tests).
cudaStream_t lc_cuda_stream(void);
void         lc_cuda_set_stream(cudaStream_t s);

// Multiprocessors of the current device (queried once; 132 if the query fails), for grid sizes.
int lc_cuda_sm_count(void);
// Shared memory of one multiprocessor in bytes (queried once; 228 KiB if the query fails), for
// how many CTAs of a kernel fit on one.
int lc_cuda_smem_per_sm(void);
// Compute capability major of the current device (queried once; 0 if the query fails).
int lc_cuda_cc_major(void);
// Compute capability as 10 x major + minor (89: Ada, 90: Hopper; queried once, 0 if it fails).
int lc_cuda_cc(void);
// Whether the warp-specialised wgmma kernels can run: a compute capability 9.x device and a
// build with sm_90a code (a build with only sm_90, e.g. CMAKE_CUDA_ARCHITECTURES=90, has empty
// wgmma kernels; a one-thread probe kernel asks the device code which variant it got, once: it
// depends on the device and the build only).
bool lc_cuda_have_wgmma(void);

typedef __nv_bfloat16 lc_bf16;
