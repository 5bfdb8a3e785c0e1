// common.cuh — error checking for the CUDA backend: every CUDA call goes through LC_CUDA_TRY,
// which records the failing call, file and line with lc_fail and returns its status.
#pragma once
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
