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

// Multiprocessors of the current device (queried once; 132 if the query fails), for grid sizes.
int lc_cuda_sm_count(void);

typedef __nv_bfloat16 lc_bf16;
