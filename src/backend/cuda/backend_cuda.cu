// backend_cuda.cu — the CUDA backend object: device selection, device memory, host<->device
// copies, and the op table filled with the ops written so far (elementwise.cu). The GEMMs
// (cuBLASLt), RoPE, KV writes and attention kernels arrive with the CUDA backend issue; until
// then the model refuses --device cuda with a clear message.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <stdlib.h>

static void *cuda_alloc(lc_backend *, size_t bytes, const char *what) {
    void       *p   = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        lc_fail(LC_ERR_NOMEM, "out of GPU memory allocating %zu bytes for %s (%s)", bytes, what,
                cudaGetErrorString(err));
        return nullptr;
    }
    return p;
}

static void cuda_dealloc(lc_backend *, void *p) {
    if (p) cudaFree(p);
}

static int cuda_upload(lc_backend *, void *dst, const void *src, size_t bytes) {
    LC_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return LC_OK;
}

static int cuda_download(lc_backend *, void *dst, const void *src, size_t bytes) {
    LC_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return LC_OK;
}

static int cuda_rmsnorm(lc_backend *, const float *x, const float *w, float *y, int64_t n,
                        int64_t dim, float eps) {
    return lc_cuda_rmsnorm(x, w, y, n, dim, eps);
}
static int cuda_silu_mul(lc_backend *, const float *g, const float *u, float *o, int64_t n) {
    return lc_cuda_silu_mul(g, u, o, n);
}
static int cuda_add(lc_backend *, float *x, const float *y, int64_t n) { return lc_cuda_add(x, y, n); }
static int cuda_add_bias(lc_backend *, float *y, const float *b, int64_t n, int64_t dim) {
    return lc_cuda_add_bias(y, b, n, dim);
}

static void cuda_free(lc_backend *b) { free(b); }

extern "C" int lc_backend_cuda_create(int device_index, lc_backend **out) {
    *out      = nullptr;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError(); // clear the sticky "no device" error
        return lc_fail(LC_ERR_UNSUPPORTED, "no CUDA device is available");
    }
    if (device_index < 0 || device_index >= count)
        return lc_fail(LC_ERR_INVALID_ARG, "CUDA device %d does not exist (%d present)",
                       device_index, count);
    LC_CUDA_TRY(cudaSetDevice(device_index));
    lc_backend *b = (lc_backend *)calloc(1, sizeof *b);
    if (!b) return lc_fail(LC_ERR_NOMEM, "out of memory for the CUDA backend");
    b->name     = "cuda";
    b->device   = LC_DEVICE_CUDA;
    b->free     = cuda_free;
    b->alloc    = cuda_alloc;
    b->dealloc  = cuda_dealloc;
    b->upload   = cuda_upload;
    b->download = cuda_download;
    b->rmsnorm  = cuda_rmsnorm;
    b->silu_mul = cuda_silu_mul;
    b->add      = cuda_add;
    b->add_bias = cuda_add_bias;
    *out        = b;
    return LC_OK;
}
