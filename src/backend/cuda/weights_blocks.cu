// weights_blocks.cu — weight matrices kept on the GPU in their GGUF block type (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; issue 23 item 1), the bytes of the file as they are:
//   - decode products (1..LC_CUDA_GEMV_BLOCKS_MAX_ROWS = 4 input rows) read the blocks directly:
//     a CUDA block owns 4 output rows, its threads split the row into units (block_units.h) and
//     each unit's inputs are read once for the 4 rows; fp32 inputs and sums, the weights' exact
//     values (no 8-bit activations);
//   - larger products dequantise the matrix, a bounded slice of rows at a time, into an f16
//     scratch and run cuBLASLt on it (lc_cuda_dequant_blocks + lc_cuda_gemm16);
//   - the token table is looked up by dequantising the rows asked for.
// The unit arithmetic is block_units.h, shared with its CPU test.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <cuda_fp16.h>

extern "C" {
#include "backend/block_units.h"
}

// ---- decode GEMV -----------------------------------------------------------------------------

// A warp owns BGEMV_ROWS output rows and its lanes take the row's units in turn (neighbouring
// lanes read neighbouring bytes of every row); each unit's inputs are loaded once for the rows;
// the sums are reduced by shuffles, no shared memory. 4 warps a CUDA block.
#define BGEMV_ROWS 4
#define BGEMV_WARPS 4

template <uint32_t TYPE, int NX>
// (one input row: at most 80 registers, so that 6 CUDA blocks, 24 warps, hide an SM's latency;
// Q5_K, which needs more, 4; Q6_K as many as its registers allow)
__global__ void __launch_bounds__(32 * BGEMV_WARPS, NX > 1 || TYPE == LC_TYPE_Q6_K ? 1 : TYPE == LC_TYPE_Q5_K ? 4 : 6) gemv_blocks_kernel(const uint8_t *__restrict__ w, int64_t row_bytes,
                                                          int64_t m, int64_t units,
                                                          const float *__restrict__ x, int64_t k, int n,
                                                          float *__restrict__ y) {
    constexpr int  UE = TYPE == LC_TYPE_Q6_K ? 64 : 32, RUNS = UE / 16;
    const int      lane = threadIdx.x & 31;
    const int64_t  row0 = ((int64_t)blockIdx.x * BGEMV_WARPS + (threadIdx.x >> 5)) * BGEMV_ROWS;
    if (row0 >= m) return;
    const uint8_t *rows[BGEMV_ROWS];
#pragma unroll
    for (int r = 0; r < BGEMV_ROWS; r++) rows[r] = w + (row0 + r < m ? row0 + r : m - 1) * row_bytes;
    float acc[NX][BGEMV_ROWS];
#pragma unroll
    for (int i = 0; i < NX; i++)
#pragma unroll
        for (int r = 0; r < BGEMV_ROWS; r++) acc[i][r] = 0.f;
#pragma unroll(TYPE == LC_TYPE_Q6_K || NX > 1 ? 1 : 2)
    for (int64_t u = lane; u < units; u += 32) {
#pragma unroll
        for (int i = 0; i < NX; i++) {
            if (i >= n) break;
            float xv[UE], xs[RUNS];
            bu_load_x(TYPE, x + (int64_t)i * k, u, xv, xs);
#pragma unroll
            for (int r = 0; r < BGEMV_ROWS; r++) acc[i][r] += bu_dot(TYPE, rows[r], u, xv, xs);
        }
    }
#pragma unroll
    for (int i = 0; i < NX; i++)
#pragma unroll
        for (int r = 0; r < BGEMV_ROWS; r++) {
            float v = acc[i][r];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && i < n && row0 + r < m) y[(int64_t)i * m + row0 + r] = v;
        }
}

template <uint32_t TYPE>
static void gemv_blocks_launch(const uint8_t *w, int64_t row_bytes, int64_t m, int64_t k, const float *x,
                               int n, float *y) {
    const int64_t units = k / bu_unit_elems(TYPE);
    const int64_t per   = BGEMV_ROWS * BGEMV_WARPS;
    const dim3    grid((unsigned)((m + per - 1) / per)), block(32 * BGEMV_WARPS);
    cudaStream_t  s = lc_cuda_stream();
    switch (n) {
    case 1: gemv_blocks_kernel<TYPE, 1><<<grid, block, 0, s>>>(w, row_bytes, m, units, x, k, n, y); break;
    case 2: gemv_blocks_kernel<TYPE, 2><<<grid, block, 0, s>>>(w, row_bytes, m, units, x, k, n, y); break;
    case 3: gemv_blocks_kernel<TYPE, 3><<<grid, block, 0, s>>>(w, row_bytes, m, units, x, k, n, y); break;
    default: gemv_blocks_kernel<TYPE, 4><<<grid, block, 0, s>>>(w, row_bytes, m, units, x, k, n, y); break;
    }
}

extern "C" bool lc_cuda_blocks_type(uint32_t type) { return bu_type_ok(type); }

extern "C" int64_t lc_cuda_blocks_row_bytes(uint32_t type, int64_t cols) {
    uint64_t rb;
    return bu_type_ok(type) && cols > 0 && lc_type_row_bytes(type, (uint64_t)cols, &rb) ? (int64_t)rb : 0;
}

// the weights' rows must start at the alignment the unit loads need; x at 16 bytes
static int check_blocks(uint32_t type, const void *w, int64_t cols, const char *what) {
    const int64_t rb = lc_cuda_blocks_row_bytes(type, cols);
    if (rb == 0)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: type %u with rows of %lld elements is not a block type "
                       "the GPU computes with", what, type, (long long)cols);
    if (((uintptr_t)w | (uintptr_t)rb) % (uintptr_t)bu_row_align(type))
        return lc_fail(LC_ERR_INVALID_ARG, "%s: rows of %lld bytes at %p are not %d-byte aligned", what,
                       (long long)rb, w, bu_row_align(type));
    return LC_OK;
}

extern "C" int lc_cuda_gemv_blocks(uint32_t type, const void *w, int64_t m, int64_t k, const float *x,
                                   int64_t n, float *y) {
    if (n <= 0 || m <= 0) return LC_OK;
    int st = check_blocks(type, w, k, "gemv");
    if (st != LC_OK) return st;
    if (n > LC_CUDA_GEMV_BLOCKS_MAX_ROWS || ((uintptr_t)x & 15))
        return lc_fail(LC_ERR_INVALID_ARG, "gemv: %lld input rows at %p (1..%d rows, 16-byte aligned)",
                       (long long)n, (const void *)x, LC_CUDA_GEMV_BLOCKS_MAX_ROWS);
    const int64_t  rb = lc_cuda_blocks_row_bytes(type, k);
    const uint8_t *wb = (const uint8_t *)w;
    switch (type) {
    case LC_TYPE_Q4_0: gemv_blocks_launch<LC_TYPE_Q4_0>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q4_1: gemv_blocks_launch<LC_TYPE_Q4_1>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q5_0: gemv_blocks_launch<LC_TYPE_Q5_0>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q5_1: gemv_blocks_launch<LC_TYPE_Q5_1>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q8_0: gemv_blocks_launch<LC_TYPE_Q8_0>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q4_K: gemv_blocks_launch<LC_TYPE_Q4_K>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q5_K: gemv_blocks_launch<LC_TYPE_Q5_K>(wb, rb, m, k, x, (int)n, y); break;
    case LC_TYPE_Q6_K: gemv_blocks_launch<LC_TYPE_Q6_K>(wb, rb, m, k, x, (int)n, y); break;
    default: return LC_ERR_INTERNAL;
    }
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

// ---- dequantisation to 16 bits (the GEMM path) and the token table ---------------------------

template <typename T> __device__ __forceinline__ T to16(float v);
template <> __device__ __forceinline__ __half to16<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ lc_bf16 to16<lc_bf16>(float v) { return __float2bfloat16_rn(v); }
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b) {
    const T lo = to16<T>(a), hi = to16<T>(b);
    return (uint32_t)*(const unsigned short *)&lo | ((uint32_t)*(const unsigned short *)&hi << 16);
}
// 16 values to o (16-bit: 32 bytes; fp32: 64 bytes), o 16-byte aligned (runs start at multiples
// of 16 elements, rows are whole units)
template <typename T> __device__ __forceinline__ void store16(T *o, const float *v) {
#pragma unroll
    for (int h = 0; h < 2; h++)
        ((uint4 *)o)[h] = make_uint4(pack2<T>(v[8 * h], v[8 * h + 1]), pack2<T>(v[8 * h + 2], v[8 * h + 3]),
                                     pack2<T>(v[8 * h + 4], v[8 * h + 5]), pack2<T>(v[8 * h + 6], v[8 * h + 7]));
}
template <> __device__ __forceinline__ void store16<float>(float *o, const float *v) {
#pragma unroll
    for (int q = 0; q < 4; q++) ((float4 *)o)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
}

// dst[r][cols] (T) = the rows' values; one thread per unit
template <uint32_t TYPE, typename T>
__global__ void dequant_blocks_kernel(const uint8_t *__restrict__ w, int64_t row_bytes, int64_t units_per_row,
                                      int64_t n_units, int64_t cols, T *__restrict__ dst) {
    constexpr int UE = TYPE == LC_TYPE_Q6_K ? 64 : 32;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n_units;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / units_per_row, u = t % units_per_row;
        float         v[UE];
        bu_dequant(TYPE, w + r * row_bytes, u, v);
#pragma unroll
        for (int j = 0; j < UE / 16; j++) // a run: 16 values, 16-byte stores
            store16<T>(dst + r * cols + bu_run_pos(TYPE, u, j), v + 16 * j);
    }
}

// out[i][cols] (fp32) = row ids[i] of the table (zeros for an id outside it); a CUDA block per id
template <uint32_t TYPE>
__global__ void embed_blocks_kernel(const uint8_t *__restrict__ w, int64_t row_bytes, int64_t rows,
                                    int64_t units, int64_t cols, const int32_t *__restrict__ ids,
                                    float *__restrict__ out) {
    constexpr int  UE = TYPE == LC_TYPE_Q6_K ? 64 : 32;
    const int32_t  id = ids[blockIdx.x];
    float         *o  = out + (int64_t)blockIdx.x * cols;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
        float v[UE];
        if (id >= 0 && id < rows) bu_dequant(TYPE, w + (int64_t)id * row_bytes, u, v);
        else
            for (int i = 0; i < UE; i++) v[i] = 0.f;
#pragma unroll
        for (int j = 0; j < UE / 16; j++)
#pragma unroll
            for (int i = 0; i < 16; i++) o[bu_run_pos(TYPE, u, j) + i] = v[16 * j + i];
    }
}

#define BU_DISPATCH(type, CALL)                                                               \
    switch (type) {                                                                           \
    case LC_TYPE_Q4_0: { constexpr uint32_t TY = LC_TYPE_Q4_0; CALL; } break;                 \
    case LC_TYPE_Q4_1: { constexpr uint32_t TY = LC_TYPE_Q4_1; CALL; } break;                 \
    case LC_TYPE_Q5_0: { constexpr uint32_t TY = LC_TYPE_Q5_0; CALL; } break;                 \
    case LC_TYPE_Q5_1: { constexpr uint32_t TY = LC_TYPE_Q5_1; CALL; } break;                 \
    case LC_TYPE_Q8_0: { constexpr uint32_t TY = LC_TYPE_Q8_0; CALL; } break;                 \
    case LC_TYPE_Q4_K: { constexpr uint32_t TY = LC_TYPE_Q4_K; CALL; } break;                 \
    case LC_TYPE_Q5_K: { constexpr uint32_t TY = LC_TYPE_Q5_K; CALL; } break;                 \
    case LC_TYPE_Q6_K: { constexpr uint32_t TY = LC_TYPE_Q6_K; CALL; } break;                 \
    default: return LC_ERR_INTERNAL;                                                          \
    }

extern "C" int lc_cuda_dequant_blocks(uint32_t type, const void *w, int64_t rows, int64_t cols,
                                      uint32_t out_type, void *dst) {
    if (rows <= 0) return LC_OK;
    int st = check_blocks(type, w, cols, "dequant");
    if (st != LC_OK) return st;
    if (out_type != LC_TYPE_F16 && out_type != LC_TYPE_BF16 && out_type != LC_TYPE_F32)
        return lc_fail(LC_ERR_INVALID_ARG, "dequant: output type %u (f16, bf16 or f32)", out_type);
    const int64_t  rb = lc_cuda_blocks_row_bytes(type, cols), upr = cols / bu_unit_elems(type);
    const int64_t  n_units = rows * upr;
    const int64_t  b       = (n_units + 127) / 128;
    const unsigned grid    = (unsigned)(b > 65535 * 4 ? 65535 * 4 : b);
    const uint8_t *wb      = (const uint8_t *)w;
    cudaStream_t   s       = lc_cuda_stream();
    if (out_type == LC_TYPE_F16)
        BU_DISPATCH(type, (dequant_blocks_kernel<TY, __half><<<grid, 128, 0, s>>>(wb, rb, upr, n_units, cols, (__half *)dst)))
    else if (out_type == LC_TYPE_BF16)
        BU_DISPATCH(type, (dequant_blocks_kernel<TY, lc_bf16><<<grid, 128, 0, s>>>(wb, rb, upr, n_units, cols, (lc_bf16 *)dst)))
    else
        BU_DISPATCH(type, (dequant_blocks_kernel<TY, float><<<grid, 128, 0, s>>>(wb, rb, upr, n_units, cols, (float *)dst)))
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_embed_blocks(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out) {
    if (n_rows <= 0) return LC_OK;
    int st = check_blocks(table->type, table->data, table->cols, "embed");
    if (st != LC_OK) return st;
    if (n_rows > INT32_MAX) return lc_fail(LC_ERR_INVALID_ARG, "embed: %lld rows", (long long)n_rows);
    const int64_t  rb = lc_cuda_blocks_row_bytes(table->type, table->cols);
    const int64_t  units = table->cols / bu_unit_elems(table->type);
    const uint8_t *wb = (const uint8_t *)table->data;
    cudaStream_t   s  = lc_cuda_stream();
    BU_DISPATCH(table->type, (embed_blocks_kernel<TY><<<(unsigned)n_rows, 64, 0, s>>>(wb, rb, table->rows, units,
                                                                                   table->cols, ids, out)))
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
