/*
 * cuda.h — plain C declarations of the CUDA backend's ops (twins of backend/cpu/cpu.h, same
 * contracts, device pointers). Nothing outside backend/cuda includes a CUDA header.
 * The full forward on the GPU arrives with the CUDA backend issue; this file holds the ops
 * built so far.
 */
#ifndef LC_CUDA_H
#define LC_CUDA_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int lc_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim,
                    float eps);
int lc_cuda_silu_mul(const float *gate, const float *up, float *out, int64_t n);
int lc_cuda_add(float *x, const float *y, int64_t n);
int lc_cuda_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim);
/* Wait for the device and report the first error (for tests). */
int lc_cuda_sync(void);

#ifdef __cplusplus
}
#endif
#endif
