// elementwise.cu — CUDA twins of the CPU backend's row-wise ops: RMSNorm, SwiGLU, residual
// add, bias add (fp32 activations). Contracts: backend/backend.h.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <stdint.h>

// x, y: [n_rows][dim]; one block per row, fp32 sum of squares by a block reduction.
__global__ void rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w,
                               float *__restrict__ y, int64_t dim, float eps) {
    const int64_t row = blockIdx.x;
    const float  *xr  = x + row * dim;
    float        *yr  = y + row * dim;
    float         ss  = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        ss = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (threadIdx.x == 0) part[0] = ss;
    }
    __syncthreads();
    const float s = rsqrtf(part[0] / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * s * w[i];
}

__global__ void silu_mul_kernel(const float *g, const float *u, float *o, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float x = g[i];
        o[i]          = x / (1.0f + __expf(-x)) * u[i];
    }
}

__global__ void add_kernel(float *x, const float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

__global__ void add_bias_kernel(float *y, const float *b, int64_t n, int64_t dim) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += b[i % dim];
}

static unsigned grid_for(int64_t n) {
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 65535 ? (g > 0 ? g : 1) : 65535);
}

extern "C" int lc_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t n_rows,
                               int64_t dim, float eps) {
    if (n_rows <= 0) return LC_OK;
    rmsnorm_kernel<<<(unsigned)n_rows, 256, 0, lc_cuda_stream()>>>(x, w, y, dim, eps);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_silu_mul(const float *gate, const float *up, float *out, int64_t n) {
    if (n <= 0) return LC_OK;
    silu_mul_kernel<<<grid_for(n), 256, 0, lc_cuda_stream()>>>(gate, up, out, n);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_add(float *x, const float *y, int64_t n) {
    if (n <= 0) return LC_OK;
    add_kernel<<<grid_for(n), 256, 0, lc_cuda_stream()>>>(x, y, n);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim) {
    if (n_rows <= 0) return LC_OK;
    add_bias_kernel<<<grid_for(n_rows * dim), 256, 0, lc_cuda_stream()>>>(y, bias, n_rows * dim, dim);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_sync(void) {
    LC_CUDA_TRY(cudaDeviceSynchronize());
    return LC_OK;
}
