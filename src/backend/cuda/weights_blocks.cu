// weights_blocks.cu — weight matrices kept on the GPU in their GGUF block type (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; issue 23 item 1), the bytes of the file as they are:
//   - decode products (1..LC_CUDA_GEMV_BLOCKS_MAX_ROWS = 4 input rows) read the blocks directly:
//     Q4_K on tensor cores (the inputs split into two f16 values, the weights' exact values,
//     fp32 sums; below), the other types on CUDA cores (a warp owns 4 output rows, its lanes
//     split the row into units, block_units.h; fp32 inputs and sums); no 8-bit activations;
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

// ---- tensor-core decode GEMV (Q4_K) ----------------------------------------------------------
// The fp32-input GEMV above spends about 4 instructions a weight (NOTES §62) and so runs at a
// third of the bandwidth. Here the products run on mma.sync m16n8k16 (f16 operands, fp32
// sums) without giving up the exact weights or fp32-grade inputs:
//   - A (16 weight rows x 16 k): a nibble becomes 1024 + q (or 1024 + 16q) in f16 with one LOP3,
//     and one HFMA2 turns it into q * sc, the 4-bit value times its sub-block's 6-bit scale: an
//     integer below 2048, exact in f16. The super-block's d multiplies the fp32 sums; the mins
//     term, dmin * sum_j m_j * (sum of sub-block j's inputs), is one m16n8k8 mma on the mins;
//   - B (16 k x 8 columns): the inputs split x = hi + lo into two f16 values (22 bits), column c
//     < 4 the hi part of input row c, column c + 4 its lo part, so one mma computes both and
//     y = C[., c] + C[., c + 4] (1..4 input rows);
//   - the split is made once a product (split_x_kernel) in the order the fragments read: every
//     group of 4 inputs stored as 0, 2, 1, 3, since a thread's A registers hold the nibble pairs
//     (0, 2) and (1, 3) of a 4-byte word; with it the 32-input sums, split the same way.
// A CUDA block owns 16 rows; its 4 warps take the row's super-blocks in turn and add their sums
// in shared memory at the end. Lane (g, t): rows g and g + 8, the 64 inputs of group t of each
// super-block (sub-blocks 2t and 2t + 1: qs bytes 32t..32t+31, low and high nibbles).
#define MMA_ROWS 16
#define MMA_WARPS 4

__global__ void split_x_kernel(const float *__restrict__ x, int64_t nk, __half *__restrict__ xp,
                               __half *__restrict__ xs) {
    const int64_t i4 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; // 4 inputs a thread
    const bool    in = 4 * i4 < nk;
    float4        v  = in ? ((const float4 *)x)[i4] : make_float4(0.f, 0.f, 0.f, 0.f);
    if (in) {
        const __half2 h02 = __floats2half2_rn(v.x, v.z), h13 = __floats2half2_rn(v.y, v.w);
        const __half2 l02 = __floats2half2_rn(v.x - __low2float(h02), v.z - __high2float(h02));
        const __half2 l13 = __floats2half2_rn(v.y - __low2float(h13), v.w - __high2float(h13));
        ((__half2 *)xp)[2 * i4]          = h02;
        ((__half2 *)xp)[2 * i4 + 1]      = h13;
        ((__half2 *)(xp + nk))[2 * i4]     = l02;
        ((__half2 *)(xp + nk))[2 * i4 + 1] = l13;
    }
    float s = (v.x + v.y) + (v.z + v.w); // the 32-input sum: 8 lanes
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (in && (threadIdx.x & 7) == 0) {
        const __half hi = __float2half_rn(s);
        xs[i4 / 8]          = hi;
        xs[nk / 32 + i4 / 8] = __float2half_rn(s - __half2float(hi));
    }
}

__device__ __forceinline__ void mma_16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_1688(float c[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}
// (w & mask) | 0x64006400: two 16-bit lanes of 1024 + (the masked bits)
__device__ __forceinline__ uint32_t nib_f16x2(uint32_t w, uint32_t mask) {
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(w), "r"(mask), "r"(0x64006400u));
    return r;
}
__device__ __forceinline__ uint32_t h2u(__half2 h) { return *reinterpret_cast<uint32_t *>(&h); }
__device__ __forceinline__ __half2 u2h(uint32_t u) { return *reinterpret_cast<__half2 *>(&u); }
__device__ __forceinline__ uint32_t hfma2u(uint32_t a, __half2 m, __half2 c) { return h2u(__hfma2(u2h(a), m, c)); }
// two bytes (bits 0-7, 8-15) as an f16 pair, exactly (values below 256)
__device__ __forceinline__ __half2 bytes_f16x2(uint32_t b2) {
    return __hsub2(u2h((b2 & 0xffu) | ((b2 & 0xff00u) << 8) | 0x64006400u), __float2half2_rn(1024.f));
}

// one row's constants for lane group t of a Q4_K super-block (header h: d, dmin, scales[12])
struct q4k_lane {
    __half2  mul_lo, add_lo, mul_hi, add_hi; // nibble (as 1024 + q, 1024 + 16q) -> q * sc
    uint32_t mins;                           // (m_2t, m_2t+1) in f16: the mins mma's A
    float    d, dmin;
};
__device__ __forceinline__ q4k_lane q4k_lane_of(uint4 h, int t) {
    const int      sh  = (t & 1) * 16;
    const uint32_t y16 = (h.y >> sh) & 0xffffu, z16 = (h.z >> sh) & 0xffffu, w16 = (h.w >> sh) & 0xffffu;
    const uint32_t sc = t < 2 ? y16 & 0x3f3fu : (w16 & 0x0f0fu) | ((y16 >> 2) & 0x3030u);
    const uint32_t mn = t < 2 ? z16 & 0x3f3fu : ((w16 >> 4) & 0x0f0fu) | ((z16 >> 2) & 0x3030u);
    const __half2  s  = bytes_f16x2(sc);
    q4k_lane       L;
    L.mul_lo = __low2half2(s);
    L.add_lo = __hmul2(L.mul_lo, __float2half2_rn(-1024.f));
    L.mul_hi = __hmul2(__high2half2(s), __float2half2_rn(0.0625f));
    L.add_hi = __hmul2(__high2half2(s), __float2half2_rn(-64.f));
    L.mins   = h2u(bytes_f16x2(mn));
    const __half2 dd = u2h(h.x);
    L.d              = __low2float(dd);
    L.dmin           = __high2float(dd);
    return L;
}

__global__ void __launch_bounds__(32 * MMA_WARPS, 4)
    gemv_q4k_mma_kernel(const uint8_t *__restrict__ w, int64_t row_bytes, int64_t m, int64_t nsb,
                        const __half *__restrict__ xp, const __half *__restrict__ xs, int64_t k, int n,
                        float *__restrict__ y) {
    __shared__ float red[MMA_WARPS - 1][32][4];
    const int     warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t row0 = (int64_t)blockIdx.x * MMA_ROWS;
    const int64_t ra = row0 + g < m ? row0 + g : m - 1, rb = row0 + g + 8 < m ? row0 + g + 8 : m - 1;
    const uint8_t *pa = w + ra * row_bytes, *pb = w + rb * row_bytes;
    // this lane's B column: g < 4 the hi part of input row g, g >= 4 the lo part of row g - 4
    const bool     live = (g & 3) < n;
    const int64_t  col  = (int64_t)(g >> 2) * n + (g & 3);
    const __half  *xc = xp + (live ? col : 0) * k + 64 * t, *sc = xs + (live ? col : 0) * (k / 32) + 2 * t;
    const uint32_t MLO = 0x000f000fu, MHI = 0x00f000f0u;
    float          acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t sb = warp; sb < nsb; sb += MMA_WARPS) {
        const uint8_t *ba = pa + sb * 144, *bb = pb + sb * 144;
        const uint4    ha = __ldg((const uint4 *)ba), hb = __ldg((const uint4 *)bb);
        uint4          qa[2], qb[2], xl[4], xh[4];
        qa[0] = __ldg((const uint4 *)(ba + 16 + 32 * t));
        qa[1] = __ldg((const uint4 *)(ba + 32 + 32 * t));
        qb[0] = __ldg((const uint4 *)(bb + 16 + 32 * t));
        qb[1] = __ldg((const uint4 *)(bb + 32 + 32 * t));
        uint32_t xsum = 0;
        if (live) {
            const uint4 *xv = (const uint4 *)(xc + sb * 256);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                xl[i] = __ldg(xv + i);
                xh[i] = __ldg(xv + 4 + i);
            }
            xsum = __ldg((const uint32_t *)(sc + sb * 8));
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) xl[i] = xh[i] = make_uint4(0u, 0u, 0u, 0u);
        }
        const q4k_lane A = q4k_lane_of(ha, t), B = q4k_lane_of(hb, t);
        float          cs[4] = {0.f, 0.f, 0.f, 0.f}, cm[4] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t *wa = (const uint32_t *)qa, *wb = (const uint32_t *)qb;
        const uint32_t *bl = (const uint32_t *)xl, *bh = (const uint32_t *)xh;
#pragma unroll
        for (int i = 0; i < 8; i++) { // word i: inputs 4i..4i+3 of sub-blocks 2t (low) and 2t+1 (high)
            const uint32_t a = wa[i], b = wb[i], a8 = a >> 8, b8 = b >> 8;
            mma_16816(cs, hfma2u(nib_f16x2(a, MLO), A.mul_lo, A.add_lo), hfma2u(nib_f16x2(b, MLO), B.mul_lo, B.add_lo),
                      hfma2u(nib_f16x2(a8, MLO), A.mul_lo, A.add_lo), hfma2u(nib_f16x2(b8, MLO), B.mul_lo, B.add_lo),
                      bl[2 * i], bl[2 * i + 1]);
            mma_16816(cs, hfma2u(nib_f16x2(a, MHI), A.mul_hi, A.add_hi), hfma2u(nib_f16x2(b, MHI), B.mul_hi, B.add_hi),
                      hfma2u(nib_f16x2(a8, MHI), A.mul_hi, A.add_hi), hfma2u(nib_f16x2(b8, MHI), B.mul_hi, B.add_hi),
                      bh[2 * i], bh[2 * i + 1]);
        }
        mma_1688(cm, A.mins, B.mins, xsum);
        acc[0] += A.d * cs[0] - A.dmin * cm[0];
        acc[1] += A.d * cs[1] - A.dmin * cm[1];
        acc[2] += B.d * cs[2] - B.dmin * cm[2];
        acc[3] += B.d * cs[3] - B.dmin * cm[3];
    }
    if (warp > 0)
#pragma unroll
        for (int i = 0; i < 4; i++) red[warp - 1][lane][i] = acc[i];
    __syncthreads();
    if (warp > 0) return;
#pragma unroll
    for (int v = 0; v < MMA_WARPS - 1; v++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i] += red[v][lane][i];
    // C[row][c] + C[row][c + 4]: columns 2t, 2t+1 of lane t < 2 and 2t + 4, 2t + 5 of lane t + 2
    float o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) o[i] = acc[i] + __shfl_down_sync(0xffffffffu, acc[i], 2);
    if (t >= 2) return;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int     c = 2 * t + (i & 1);
        const int64_t r = row0 + g + (i >= 2 ? 8 : 0);
        if (c < n && r < m) y[(int64_t)c * m + r] = o[i];
    }
}

extern "C" size_t lc_cuda_gemv_blocks_scratch_bytes(uint32_t type, int64_t n, int64_t k) {
    return type == LC_TYPE_Q4_K && n > 0 && k > 0 ? (size_t)(2 * n * k + 2 * n * (k / 32)) * sizeof(__half) : 0;
}

static void gemv_q4k_mma_launch(const uint8_t *w, int64_t row_bytes, int64_t m, int64_t k, const float *x, int n,
                                float *y, void *scratch) {
    cudaStream_t  s  = lc_cuda_stream();
    const int64_t nk = (int64_t)n * k;
    __half       *xp = (__half *)scratch, *xs = xp + 2 * nk;
    split_x_kernel<<<(unsigned)((nk / 4 + 255) / 256), 256, 0, s>>>(x, nk, xp, xs);
    gemv_q4k_mma_kernel<<<(unsigned)((m + MMA_ROWS - 1) / MMA_ROWS), 32 * MMA_WARPS, 0, s>>>(
        w, row_bytes, m, k / 256, xp, xs, k, n, y);
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
                                   int64_t n, float *y, void *scratch, size_t scratch_bytes) {
    if (n <= 0 || m <= 0) return LC_OK;
    int st = check_blocks(type, w, k, "gemv");
    if (st != LC_OK) return st;
    if (n > LC_CUDA_GEMV_BLOCKS_MAX_ROWS || ((uintptr_t)x & 15))
        return lc_fail(LC_ERR_INVALID_ARG, "gemv: %lld input rows at %p (1..%d rows, 16-byte aligned)",
                       (long long)n, (const void *)x, LC_CUDA_GEMV_BLOCKS_MAX_ROWS);
    const int64_t  rb = lc_cuda_blocks_row_bytes(type, k);
    const uint8_t *wb = (const uint8_t *)w;
    const size_t   need = lc_cuda_gemv_blocks_scratch_bytes(type, n, k);
    if (need > 0) {
        if (scratch_bytes < need || ((uintptr_t)scratch & 15))
            return lc_fail(LC_ERR_INVALID_ARG, "gemv: scratch of %zu bytes at %p (%zu, 16-byte aligned)",
                           scratch_bytes, scratch, need);
        gemv_q4k_mma_launch(wb, rb, m, k, x, (int)n, y, scratch);
        LC_CUDA_LAUNCHED();
        return LC_OK;
    }
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
