// weights_gemm.cu — weight matrices on the GPU: GGUF tensors dequantised to a 16-bit type (bf16
// or fp16) on the device at load (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 by kernels;
// K-quants on the host), and the projection y = x·Wᵀ through cuBLASLt (16-bit inputs, fp32
// accumulation and output). Activations stay fp32 between ops; the GEMM input is converted to
// the weight's type on the way in. Decode-sized products (1-4 rows) run through our own GEMV
// instead: it reads the fp32 activations directly and streams the weights at close to the
// copy bandwidth, which cuBLASLt's small-n kernels do not reach.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "format/quant.h"
}

// ---- dequantisation ------------------------------------------------------------------------

__device__ __forceinline__ float ld_half(const uint8_t *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ lc_bf16 from_f32<lc_bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

// src: n_blocks blocks of the type's layout (ggml-common.h); dst: 32 elements per block
template <typename T>
__global__ void dequant_block32_kernel(const uint8_t *__restrict__ src, int64_t n_blocks,
                                       uint32_t type, T *__restrict__ dst) {
    const int64_t blk = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int     j   = threadIdx.x & 31;
    if (blk >= n_blocks) return;
    float y;
    switch (type) {
    case LC_TYPE_Q8_0: {
        const uint8_t *b = src + blk * 34;
        y                = ld_half(b) * (float)(int8_t)b[2 + j];
        break;
    }
    case LC_TYPE_Q4_0: {
        const uint8_t *b = src + blk * 18;
        const int      q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
        y                = (float)(q - 8) * ld_half(b);
        break;
    }
    case LC_TYPE_Q4_1: {
        const uint8_t *b = src + blk * 20;
        const int      q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
        y                = (float)q * ld_half(b) + ld_half(b + 2);
        break;
    }
    case LC_TYPE_Q5_0:
    case LC_TYPE_Q5_1: {
        const bool     one = type == LC_TYPE_Q5_1;
        const uint8_t *b   = src + blk * (one ? 24 : 22);
        const uint8_t *qhp = b + (one ? 4 : 2), *qs = qhp + 4;
        const uint32_t qh  = qhp[0] | (qhp[1] << 8) | (qhp[2] << 16) | ((uint32_t)qhp[3] << 24);
        const int      q   = (j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4)) | (int)(((qh >> j) & 1u) << 4);
        y = one ? (float)q * ld_half(b) + ld_half(b + 2) : (float)(q - 16) * ld_half(b);
        break;
    }
    default: y = 0.0f;
    }
    dst[blk * 32 + j] = from_f32<T>(y);
}

template <typename T>
__global__ void dequant_plain_kernel(const uint8_t *__restrict__ src, int64_t n, uint32_t type,
                                     T *__restrict__ dst) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float y;
        if (type == LC_TYPE_F32) y = ((const float *)src)[i];
        else if (type == LC_TYPE_F16) y = __half2float(((const __half *)src)[i]);
        else y = __bfloat162float(((const lc_bf16 *)src)[i]);
        dst[i] = from_f32<T>(y);
    }
}

static bool gpu_dequantisable(uint32_t type) {
    switch (type) {
    case LC_TYPE_F32: case LC_TYPE_F16: case LC_TYPE_BF16: case LC_TYPE_Q8_0:
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q5_0: case LC_TYPE_Q5_1: return true;
    default: return false;
    }
}

static unsigned grid_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b > 65535 ? 65535 : (b < 1 ? 1 : b));
}

template <typename T> static int dequant_to(uint32_t type, const void *src_dev, int64_t n, void *dst_dev) {
    if (type == LC_TYPE_F32 || type == LC_TYPE_F16 || type == LC_TYPE_BF16) {
        dequant_plain_kernel<T><<<grid_for(n), 256, 0, lc_cuda_stream()>>>(
            (const uint8_t *)src_dev, n, type, (T *)dst_dev);
    } else {
        if (n % 32) return lc_fail(LC_ERR_INVALID_ARG, "dequant: %lld elements is not whole blocks", (long long)n);
        const int64_t nb = n / 32;
        dequant_block32_kernel<T><<<(unsigned)((nb + 7) / 8), 256, 0, lc_cuda_stream()>>>(
            (const uint8_t *)src_dev, nb, type, (T *)dst_dev);
    }
    return LC_OK;
}

extern "C" int lc_cuda_dequant16(uint32_t type, const void *src_dev, int64_t n, uint32_t out_type,
                                 void *dst_dev) {
    if (n <= 0) return LC_OK;
    if (out_type != LC_TYPE_BF16 && out_type != LC_TYPE_F16)
        return lc_fail(LC_ERR_INVALID_ARG, "dequant: output type %u is not bf16 or f16", out_type);
    if (gpu_dequantisable(type)) {
        int st = out_type == LC_TYPE_BF16 ? dequant_to<lc_bf16>(type, src_dev, n, dst_dev)
                                          : dequant_to<__half>(type, src_dev, n, dst_dev);
        if (st != LC_OK) return st;
    } else {
        return lc_fail(LC_ERR_UNSUPPORTED, "dequant: type %u has no GPU dequantiser", type);
    }
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

// Load a GGUF tensor into dst (device, rows*cols elements of out_type, bf16 or f16), through
// staging, a device buffer of staging_bytes.
extern "C" int lc_cuda_weight_upload16(const lc_gguf_tensor *t, int64_t rows, int64_t cols,
                                       uint32_t out_type, void *dst, void *staging,
                                       size_t staging_bytes) {
    uint64_t row_bytes;
    if (!lc_type_row_bytes(t->type, (uint64_t)cols, &row_bytes))
        return lc_fail(LC_ERR_FORMAT, "tensor \"%s\": row of %lld elements invalid for its type",
                       t->name, (long long)cols);
    const lc_type_traits *tr = lc_type_traits_get(t->type);
    if (!tr || !tr->to_float)
        return lc_fail(LC_ERR_UNSUPPORTED, "tensor \"%s\": type %s cannot be dequantised",
                       t->name, tr ? tr->name : "unknown");
    const bool gpu = gpu_dequantisable(t->type);
    // rows per chunk: raw bytes (GPU path) or bf16 bytes (host path) must fit the staging buffer
    const size_t per_row = gpu ? (size_t)row_bytes : (size_t)cols * 2;
    int64_t      chunk   = (int64_t)(staging_bytes / per_row);
    if (chunk < 1) return lc_fail(LC_ERR_INTERNAL, "weight staging buffer too small for %s", t->name);
    if (chunk > rows) chunk = rows;
    float    *frow = gpu ? nullptr : (float *)malloc(sizeof(float) * (size_t)cols);
    uint16_t *hb   = gpu ? nullptr : (uint16_t *)malloc(per_row * (size_t)chunk);
    if (!gpu && (!frow || !hb)) {
        free(frow), free(hb);
        return lc_fail(LC_ERR_NOMEM, "out of host memory dequantising %s", t->name);
    }
    int st = LC_OK;
    for (int64_t r0 = 0; r0 < rows && st == LC_OK; r0 += chunk) {
        const int64_t nr  = rows - r0 < chunk ? rows - r0 : chunk;
        uint16_t     *out = (uint16_t *)dst + r0 * cols;
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * row_bytes;
        if (gpu) {
            cudaError_t e = cudaMemcpyAsync(staging, src, (size_t)nr * row_bytes,
                                            cudaMemcpyHostToDevice, lc_cuda_stream());
            if (e != cudaSuccess) {
                st = lc_fail(LC_ERR_INTERNAL, "uploading %s: %s", t->name, cudaGetErrorString(e));
                break;
            }
            st = lc_cuda_dequant16(t->type, staging, nr * cols, out_type, out);
            // the next chunk reuses the staging buffer
            if (st == LC_OK && (e = cudaStreamSynchronize(lc_cuda_stream())) != cudaSuccess)
                st = lc_fail(LC_ERR_INTERNAL, "dequantising %s: %s", t->name, cudaGetErrorString(e));
        } else {
            for (int64_t r = 0; r < nr && st == LC_OK; r++) {
                st = lc_dequantize(t->type, src + (size_t)r * row_bytes, frow, cols);
                for (int64_t c = 0; c < cols; c++)
                    hb[r * cols + c] = out_type == LC_TYPE_BF16 ? lc_fp32_to_bf16(frow[c])
                                                                : lc_fp32_to_fp16(frow[c]);
            }
            if (st == LC_OK) {
                cudaError_t e = cudaMemcpy(out, hb, (size_t)nr * (size_t)cols * 2, cudaMemcpyHostToDevice);
                if (e != cudaSuccess)
                    st = lc_fail(LC_ERR_INTERNAL, "uploading %s: %s", t->name, cudaGetErrorString(e));
            }
        }
    }
    free(frow), free(hb);
    return st;
}

// ---- GEMM ------------------------------------------------------------------------------------

template <typename T>
__global__ void f32_to_16_kernel(const float *__restrict__ x, T *__restrict__ y, int64_t n) {
    // two elements per thread; n is even for every projection we run, the tail handles odd n
    for (int64_t i = 2 * (blockIdx.x * (int64_t)blockDim.x + threadIdx.x); i < n;
         i += 2 * (int64_t)gridDim.x * blockDim.x) {
        if (i + 1 < n) {
            const float2 v = *(const float2 *)(x + i);
            y[i]           = from_f32<T>(v.x);
            y[i + 1]       = from_f32<T>(v.y);
        } else {
            y[i] = from_f32<T>(x[i]);
        }
    }
}

extern "C" int lc_cuda_f32_to_16(const float *x, uint32_t type, void *y, int64_t n) {
    if (n <= 0) return LC_OK;
    if (type == LC_TYPE_BF16)
        f32_to_16_kernel<<<grid_for((n + 1) / 2), 256, 0, lc_cuda_stream()>>>(x, (lc_bf16 *)y, n);
    else if (type == LC_TYPE_F16)
        f32_to_16_kernel<<<grid_for((n + 1) / 2), 256, 0, lc_cuda_stream()>>>(x, (__half *)y, n);
    else
        return lc_fail(LC_ERR_INVALID_ARG, "convert: type %u is not bf16 or f16", type);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

#define LT_TRY(call)                                                                          \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return lc_fail(LC_ERR_INTERNAL, "cuBLASLt error %d at %s:%d (%s)", (int)s_,       \
                           __FILE__, __LINE__, #call);                                        \
    } while (0)

// One cached plan per GEMM shape (m = out features, n = rows, k = in features).
struct lt_plan {
    int64_t                m, n, k, ldy;
    uint32_t               type;
    cublasLtMatmulDesc_t   op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t   algo;
    bool                   used;
};

#define LT_PLANS 96
struct lc_cuda_gemm {
    cublasLtHandle_t lt;
    void            *workspace;
    size_t           workspace_bytes;
    lt_plan          plans[LT_PLANS];
    int              next_evict;
};

static void plan_destroy(lt_plan *p) {
    if (!p->used) return;
    cublasLtMatmulDescDestroy(p->op);
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    p->used = false;
}

extern "C" int lc_cuda_gemm_create(lc_cuda_gemm **out) {
    *out              = nullptr;
    lc_cuda_gemm *g   = (lc_cuda_gemm *)calloc(1, sizeof *g);
    if (!g) return lc_fail(LC_ERR_NOMEM, "out of memory for the GEMM context");
    g->workspace_bytes = 32u << 20;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        free(g);
        return lc_fail(LC_ERR_INTERNAL, "cuBLASLt could not be initialised");
    }
    if (cudaMalloc(&g->workspace, g->workspace_bytes) != cudaSuccess) {
        cublasLtDestroy(g->lt);
        free(g);
        return lc_fail(LC_ERR_NOMEM, "out of GPU memory for the GEMM workspace (32 MiB)");
    }
    *out = g;
    return LC_OK;
}

extern "C" void lc_cuda_gemm_free(lc_cuda_gemm *g) {
    if (!g) return;
    for (int i = 0; i < LT_PLANS; i++) plan_destroy(&g->plans[i]);
    cudaFree(g->workspace);
    cublasLtDestroy(g->lt);
    free(g);
}

static int plan_make(lc_cuda_gemm *g, lt_plan *p, uint32_t type, int64_t m, int64_t n, int64_t k,
                     int64_t ldy) {
    const cudaDataType_t in = type == LC_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    // Row-major y[n][m] = x[n][k] · W[m][k]ᵀ is, column-major, Y(m×n) = Wᵀ · X with W stored
    // k×m (ld k) and transposed, X stored k×n (ld k), Y m×n (ld ldy).
    memset(p, 0, sizeof *p);
    LT_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->a, in, (uint64_t)k, (uint64_t)m, k));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->b, in, (uint64_t)k, (uint64_t)n, k));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, (uint64_t)m, (uint64_t)n, ldy));
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &g->workspace_bytes, sizeof g->workspace_bytes);
    cublasLtMatmulHeuristicResult_t res;
    int                             found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->a, p->b, p->c, p->c, pref,
                                                      1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p->used = true;
    p->m = m, p->n = n, p->k = k, p->ldy = ldy, p->type = type;
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
        plan_destroy(p);
        return lc_fail(LC_ERR_INTERNAL, "cuBLASLt has no %s GEMM for %lld x %lld x %lld",
                       type == LC_TYPE_BF16 ? "bf16" : "f16", (long long)m, (long long)n, (long long)k);
    }
    p->algo = res.algo;
    return LC_OK;
}

// y[n][m] (fp32, row stride ldy) = x[n][k] · W[m][k]ᵀ, both of type (bf16 or f16)
extern "C" int lc_cuda_gemm16(lc_cuda_gemm *g, uint32_t type, const void *w, int64_t m, int64_t k,
                              const void *x, int64_t n, float *y, int64_t ldy) {
    if (n <= 0) return LC_OK;
    if (ldy < m) return lc_fail(LC_ERR_INVALID_ARG, "gemm: output rows %lld apart for %lld outputs",
                                (long long)ldy, (long long)m);
    if (type != LC_TYPE_BF16 && type != LC_TYPE_F16)
        return lc_fail(LC_ERR_INVALID_ARG, "gemm: type %u is not bf16 or f16", type);
    lt_plan *p = nullptr;
    for (int i = 0; i < LT_PLANS; i++)
        if (g->plans[i].used && g->plans[i].m == m && g->plans[i].n == n && g->plans[i].k == k &&
            g->plans[i].ldy == ldy && g->plans[i].type == type) {
            p = &g->plans[i];
            break;
        }
    if (!p) {
        for (int i = 0; i < LT_PLANS && !p; i++)
            if (!g->plans[i].used) p = &g->plans[i];
        if (!p) {
            p = &g->plans[g->next_evict];
            g->next_evict = (g->next_evict + 1) % LT_PLANS;
            plan_destroy(p);
        }
        int st = plan_make(g, p, type, m, n, k, ldy);
        if (st != LC_OK) return st;
    }
    const float alpha = 1.0f, beta = 0.0f;
    LT_TRY(cublasLtMatmul(g->lt, p->op, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c,
                          &p->algo, g->workspace, g->workspace_bytes, lc_cuda_stream()));
    return LC_OK;
}

// ---- decode GEMV ---------------------------------------------------------------------------

__device__ __forceinline__ uint4 ld_stream16(const void *p) { // read once: keep it out of L1
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ float2 two16(uint32_t r, const lc_bf16 *) {
    return make_float2(__uint_as_float(r << 16), __uint_as_float(r & 0xffff0000u));
}
__device__ __forceinline__ float2 two16(uint32_t r, const __half *) {
    return __half22float2(*(const __half2 *)&r);
}

// y[xi][m] = x[xi][k] · W[m][k]ᵀ for NX rows of x: a block owns GEMV_ROWS output rows and its
// threads split k in 8-element (16-byte) chunks, so a warp reads 512 contiguous bytes of each
// row per step and every thread keeps GEMV_ROWS 16-byte loads in flight; partial sums are
// reduced by shuffles, then across warps in shared memory. fp32 activations, fp32 sums.
#define GEMV_ROWS 8
template <typename T, int NX>
__global__ void __launch_bounds__(256) gemv16_kernel(const T *__restrict__ w, int64_t m, int k,
                                                     const float *__restrict__ x, float *__restrict__ y) {
    const int64_t row0 = (int64_t)blockIdx.x * GEMV_ROWS;
    const int     n_chunks = k / 8, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float         acc[NX][GEMV_ROWS];
#pragma unroll
    for (int i = 0; i < NX; i++)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++) acc[i][r] = 0.f;
#pragma unroll 2
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
        uint4 wv[GEMV_ROWS];
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            wv[r] = row0 + r < m ? ld_stream16(w + (row0 + r) * k + 8 * c) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < NX; i++) {
            const float4 xa = __ldg((const float4 *)(x + (int64_t)i * k + 8 * c));
            const float4 xb = __ldg((const float4 *)(x + (int64_t)i * k + 8 * c + 4));
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) {
                const float2 w0 = two16(wv[r].x, w), w1 = two16(wv[r].y, w);
                const float2 w2 = two16(wv[r].z, w), w3 = two16(wv[r].w, w);
                float        v  = acc[i][r];
                v = fmaf(w0.x, xa.x, v), v = fmaf(w0.y, xa.y, v), v = fmaf(w1.x, xa.z, v), v = fmaf(w1.y, xa.w, v);
                v = fmaf(w2.x, xb.x, v), v = fmaf(w2.y, xb.y, v), v = fmaf(w3.x, xb.z, v), v = fmaf(w3.y, xb.w, v);
                acc[i][r] = v;
            }
        }
    }
    __shared__ float part[NX * GEMV_ROWS][8];
#pragma unroll
    for (int i = 0; i < NX; i++)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++) {
            float v = acc[i][r];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) part[i * GEMV_ROWS + r][warp] = v;
        }
    __syncthreads();
    const int n_warps = blockDim.x >> 5;
    if (threadIdx.x < NX * GEMV_ROWS) {
        const int i = threadIdx.x / GEMV_ROWS, r = threadIdx.x % GEMV_ROWS;
        float     v = 0.f;
        for (int j = 0; j < n_warps; j++) v += part[threadIdx.x][j];
        if (row0 + r < m) y[(int64_t)i * m + row0 + r] = v;
    }
}

template <typename T> static void gemv_launch(const T *w, int64_t m, int k, const float *x, int n, float *y) {
    // one thread per 16-byte chunk of a row, at most 256, whole warps
    const int  threads = min(256, max(32, ((k / 8 + 31) / 32) * 32));
    const dim3 grid((unsigned)((m + GEMV_ROWS - 1) / GEMV_ROWS));
    switch (n) {
    case 1: gemv16_kernel<T, 1><<<grid, threads, 0, lc_cuda_stream()>>>(w, m, k, x, y); break;
    case 2: gemv16_kernel<T, 2><<<grid, threads, 0, lc_cuda_stream()>>>(w, m, k, x, y); break;
    case 3: gemv16_kernel<T, 3><<<grid, threads, 0, lc_cuda_stream()>>>(w, m, k, x, y); break;
    default: gemv16_kernel<T, 4><<<grid, threads, 0, lc_cuda_stream()>>>(w, m, k, x, y); break;
    }
}

// (the backend's matmul sends every product to cuBLASLt with tuning.no_gemv, for comparisons)
extern "C" bool lc_cuda_gemv_fits(int64_t k, int64_t n, const void *w, const float *x) {
    return n >= 1 && n <= LC_CUDA_GEMV_MAX_ROWS && k % 8 == 0 && k <= INT32_MAX &&
           ((uintptr_t)w & 15) == 0 && ((uintptr_t)x & 15) == 0;
}

extern "C" int lc_cuda_gemv16(uint32_t type, const void *w, int64_t m, int64_t k, const float *x, int64_t n,
                              float *y) {
    if (n <= 0) return LC_OK;
    if (!lc_cuda_gemv_fits(k, n, w, x))
        return lc_fail(LC_ERR_INVALID_ARG, "gemv: %lld rows of %lld inputs (1..%d rows, inputs a multiple "
                       "of 8, 16-byte aligned operands)", (long long)n, (long long)k, LC_CUDA_GEMV_MAX_ROWS);
    if (type == LC_TYPE_BF16)
        gemv_launch((const lc_bf16 *)w, m, (int)k, x, (int)n, y);
    else if (type == LC_TYPE_F16)
        gemv_launch((const __half *)w, m, (int)k, x, (int)n, y);
    else
        return lc_fail(LC_ERR_INVALID_ARG, "gemv: type %u is not bf16 or f16", type);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
