// rope_embed_kv.cu — CUDA twins of the CPU backend's embedding gather, RoPE (both pairings;
// the table already holds any scaling), KV page write and KV read-back (kv_read: stored rows
// gathered out of the pages to f32, for probes and tests). Contracts: backend/backend.h, with
// every pointer (including the lc_attn_seq array and its page tables) in device memory. The
// CUDA KV pools hold fp16 (lc_kv16, device_prims.cuh: the attention kernels' tensor-core input,
// saturated at +-65504), or the fp8 layout (backend.h LC_KV_E4M3: e4m3 codes and a scale per
// token and head, keys centred on the layer's key bias; issue 23); embedding tables are
// bf16 or f16 (weights) or fp32 (a gather of activation rows).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh"

extern "C" {
#include "format/quant.h"
}

#include <cuda_fp8.h>
#include <stdint.h>

// out[r][:] = table[ids[r]][:]; ids outside [0, rows) give zeros (the CPU twin rejects them
// before launching; the kernel must not read out of bounds either way)
template <typename T> __device__ __forceinline__ float to_f32(T x);
template <> __device__ __forceinline__ float to_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f32<lc_bf16>(lc_bf16 x) {
    return __bfloat162float(x);
}
template <> __device__ __forceinline__ float to_f32<__half>(__half x) { return __half2float(x); }

template <typename T>
__global__ void embed_kernel(const T *__restrict__ table, int64_t rows, int64_t cols,
                             const int32_t *__restrict__ ids, float *__restrict__ out) {
    const int64_t r  = blockIdx.x;
    const int32_t id = ids[r];
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        out[r * cols + i] = (id >= 0 && id < rows) ? to_f32(table[(int64_t)id * cols + i]) : 0.0f;
}

// x: [n_rows][n_heads][head_dim]; one thread per rotated pair
__global__ void rope_kernel(float *__restrict__ x, const int32_t *__restrict__ pos,
                            int64_t n_rows, int32_t n_heads, int32_t head_dim,
                            const float *__restrict__ cs, const float *__restrict__ sn,
                            int32_t n_pos, int32_t n_rot, int32_t neox) {
    const int     half  = n_rot / 2;
    const int64_t total = n_rows * n_heads * half;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int     i   = (int)(t % half);
        const int64_t rh  = t / half; // row * n_heads + head
        const int64_t row = rh / n_heads;
        const int32_t p   = pos[row];
        if (p < 0 || p >= n_pos) continue;
        float        *v = x + rh * head_dim;
        const float   c = cs[(int64_t)p * half + i], s = sn[(int64_t)p * half + i];
        const int     a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float   x0 = v[a], x1 = v[b];
        v[a]             = x0 * c - x1 * s;
        v[b]             = x0 * s + x1 * c;
    }
}

// one block per (sequence row, kv head); k, v: [n_rows][n_kv_head][head_dim]
__global__ void kv_write_kernel(lc_kv16 *__restrict__ kpool, lc_kv16 *__restrict__ vpool,
                                int32_t page_size, int32_t n_kv_head, int32_t head_dim,
                                const lc_attn_seq *__restrict__ seqs,
                                const float *__restrict__ k, const float *__restrict__ v) {
    const lc_attn_seq sq = seqs[blockIdx.y];
    const int32_t     r  = blockIdx.x / n_kv_head, h = blockIdx.x % n_kv_head;
    if (r >= sq.n_rows) return;
    const int32_t pos  = sq.pos0 + r;
    const int64_t page = sq.page_table[pos / page_size];
    const int64_t dst  = ((page * n_kv_head + h) * page_size + pos % page_size) * head_dim;
    const int64_t src  = ((int64_t)(sq.row0 + r) * n_kv_head + h) * head_dim;
    for (int32_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
        kpool[dst + d] = kv_from_f32(k[src + d]);
        vpool[dst + d] = kv_from_f32(v[src + d]);
    }
}

// The fp8 layout's write: one block of 128 threads per (sequence row, kv head), thread d takes
// element d (head_dim <= 128). A row is centred (keys: on fp16(centre), the reader adds the
// same back), clamped to +-LC_KV_E4M3_MAX (backend.h), scaled by 448 / its largest |x|
// and rounded to e4m3 by CUDA's conversion (nearest even, saturating); the scale amax / 448 is
// stored after the page's codes. The host's twin: lc_kv_e4m3_quantize.
__device__ __forceinline__ float kv8_block_amax(float x, float *red) {
    float m = fabsf(x);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    __syncthreads();
    return m;
}
__device__ __forceinline__ float kv8_clamp(float x) { // NaN stays NaN
    return x > LC_KV_E4M3_MAX ? LC_KV_E4M3_MAX : x < -LC_KV_E4M3_MAX ? -LC_KV_E4M3_MAX : x;
}
__global__ void __launch_bounds__(128)
    kv_write_e4m3_kernel(unsigned char *__restrict__ kpool, unsigned char *__restrict__ vpool,
                         int32_t page_size, int32_t n_kv_head, int32_t head_dim,
                         const lc_attn_seq *__restrict__ seqs, const float *__restrict__ k,
                         const float *__restrict__ v, const float *__restrict__ centre) {
    __shared__ float  red[4];
    const lc_attn_seq sq = seqs[blockIdx.y];
    const int32_t     r  = blockIdx.x / n_kv_head, h = blockIdx.x % n_kv_head;
    if (r >= sq.n_rows) return; // the whole block: no barrier is left waiting
    const int32_t pos  = sq.pos0 + r, d = threadIdx.x;
    const int64_t page = sq.page_table[pos / page_size];
    const int64_t src  = ((int64_t)(sq.row0 + r) * n_kv_head + h) * head_dim;
    float         xk = 0.0f, xv = 0.0f;
    if (d < head_dim) {
        const float c = centre ? __half2float(__float2half_rn(centre[h * head_dim + d])) : 0.0f;
        xk            = kv8_clamp(k[src + d] - c);
        xv            = kv8_clamp(v[src + d]);
    }
    const float ak = kv8_block_amax(xk, red), av = kv8_block_amax(xv, red);
    const int64_t slab = (page * n_kv_head + h) * (int64_t)kv8_slab_bytes(page_size, head_dim);
    const int32_t slot = pos % page_size;
    if (d < head_dim) {
        const float ik = ak > 0.0f ? 448.0f / ak : 0.0f, iv = av > 0.0f ? 448.0f / av : 0.0f;
        kpool[slab + (int64_t)slot * head_dim + d] =
            (unsigned char)__nv_cvt_float_to_fp8(xk * ik, __NV_SATFINITE, __NV_E4M3);
        vpool[slab + (int64_t)slot * head_dim + d] =
            (unsigned char)__nv_cvt_float_to_fp8(xv * iv, __NV_SATFINITE, __NV_E4M3);
    }
    if (d == 0) {
        float *ks = (float *)(kpool + slab + (int64_t)page_size * head_dim);
        float *vs = (float *)(vpool + slab + (int64_t)page_size * head_dim);
        ks[slot]  = ak / 448.0f;
        vs[slot]  = av / 448.0f;
    }
}

// out[t] = the fp8 layout's element t ([n_rows][n_kv_head][head_dim] of positions pos0 ..),
// as the attention kernels dequantise it; one thread per element
__global__ void kv_read_e4m3_kernel(const unsigned char *__restrict__ pool,
                                    const int32_t *__restrict__ page_table, int32_t page_size,
                                    int32_t n_kv_head, int32_t head_dim, int64_t pos0,
                                    int64_t n_rows, const float *__restrict__ centre,
                                    float *__restrict__ out) {
    const int64_t total = n_rows * n_kv_head * head_dim;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d    = t % head_dim;
        const int64_t rh   = t / head_dim;
        const int64_t h    = rh % n_kv_head;
        const int64_t pos  = pos0 + rh / n_kv_head;
        const int64_t page = page_table[pos / page_size];
        const unsigned char *slab = pool + (page * n_kv_head + h) * (int64_t)kv8_slab_bytes(page_size, head_dim);
        const float   s    = ((const float *)(slab + (int64_t)page_size * head_dim))[pos % page_size];
        const __half  c    = __float2half_rn(centre ? centre[h * head_dim + d] : 0.0f);
        out[t] = __half2float(__hfma(kv8_one(slab[(pos % page_size) * head_dim + d]),
                                     __float2half_rn(s * 256.0f), c));
    }
}

// out[r][h][:] = pool row of position pos0 + r, KV head h, widened to f32; one thread per
// element. pool: [n_pages][n_kv_head][page_size][head_dim]; out: [n_rows][n_kv_head][head_dim]
template <typename T>
__global__ void kv_read_kernel(const T *__restrict__ pool, const int32_t *__restrict__ page_table,
                               int32_t page_size, int32_t n_kv_head, int32_t head_dim,
                               int64_t pos0, int64_t n_rows, float *__restrict__ out) {
    const int64_t total = n_rows * n_kv_head * head_dim;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d   = t % head_dim;
        const int64_t rh  = t / head_dim; // row * n_kv_head + head
        const int64_t h   = rh % n_kv_head;
        const int64_t pos = pos0 + rh / n_kv_head;
        const int64_t page = page_table[pos / page_size];
        out[t] = to_f32(pool[((page * n_kv_head + h) * page_size + pos % page_size) * head_dim + d]);
    }
}

extern "C" int lc_cuda_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows,
                             float *out) {
    if (n_rows <= 0) return LC_OK;
    if (table->type == LC_TYPE_F32)
        embed_kernel<<<(unsigned)n_rows, 256, 0, lc_cuda_stream()>>>(
            (const float *)table->data, table->rows, table->cols, ids, out);
    else if (table->type == LC_TYPE_BF16)
        embed_kernel<<<(unsigned)n_rows, 256, 0, lc_cuda_stream()>>>(
            (const lc_bf16 *)table->data, table->rows, table->cols, ids, out);
    else if (table->type == LC_TYPE_F16)
        embed_kernel<<<(unsigned)n_rows, 256, 0, lc_cuda_stream()>>>(
            (const __half *)table->data, table->rows, table->cols, ids, out);
    else
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda embed: table type %u (f32, f16 and bf16 only)",
                       table->type);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_rope(float *x, const int32_t *pos, int64_t n_rows, int32_t n_heads,
                            int32_t head_dim, const lc_rope_table *rope) {
    const int64_t total = n_rows * n_heads * (rope->n_rot / 2);
    if (total <= 0) return LC_OK;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    rope_kernel<<<(unsigned)blocks, 256, 0, lc_cuda_stream()>>>(x, pos, n_rows, n_heads, head_dim, rope->cos,
                                           rope->sin, rope->n_pos, rope->n_rot,
                                           rope->pairing == LC_ROPE_NEOX);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_kv_write(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                int32_t n_seqs, int32_t max_rows, const float *k,
                                const float *v) {
    if (n_seqs <= 0 || max_rows <= 0) return LC_OK;
    dim3 grid((unsigned)(max_rows * kv->n_kv_head), (unsigned)n_seqs);
    if (kv->e4m3) {
        if (kv->head_dim > 128 || kv->head_dim % 16 != 0)
            return lc_fail(LC_ERR_UNSUPPORTED, "cuda kv_write: the fp8 KV layout with head dim "
                           "%d (a multiple of 16 up to 128)", kv->head_dim);
        kv_write_e4m3_kernel<<<grid, 128, 0, lc_cuda_stream()>>>(
            (unsigned char *)kv->k, (unsigned char *)kv->v, kv->page_size, kv->n_kv_head,
            kv->head_dim, seqs, k, v, kv->k_centre);
        LC_CUDA_LAUNCHED();
        return LC_OK;
    }
    kv_write_kernel<<<grid, 128, 0, lc_cuda_stream()>>>((lc_kv16 *)kv->k, (lc_kv16 *)kv->v, kv->page_size, kv->n_kv_head, kv->head_dim,
                                   seqs, k, v);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

extern "C" int lc_cuda_kv_read(const lc_kv_layer_view *kv, uint32_t kv_type,
                               const int32_t *page_table, int64_t pos0, int64_t n_rows,
                               int32_t part, float *out) {
    const int st = lc_kv_read_check(kv, page_table, pos0, n_rows, part, out);
    if (st != LC_OK) return st;
    const int64_t total = n_rows * kv->n_kv_head * kv->head_dim;
    if (total == 0) return LC_OK;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    const void  *pool = part == LC_KV_KEYS ? kv->k : kv->v;
    cudaStream_t s    = lc_cuda_stream();
    if (kv->e4m3)
        kv_read_e4m3_kernel<<<(unsigned)blocks, 256, 0, s>>>(
            (const unsigned char *)pool, page_table, kv->page_size, kv->n_kv_head, kv->head_dim,
            pos0, n_rows, part == LC_KV_KEYS ? kv->k_centre : NULL, out);
    else if (kv_type == LC_TYPE_F32)
        kv_read_kernel<<<(unsigned)blocks, 256, 0, s>>>((const float *)pool, page_table,
                                                        kv->page_size, kv->n_kv_head,
                                                        kv->head_dim, pos0, n_rows, out);
    else if (kv_type == LC_TYPE_F16)
        kv_read_kernel<<<(unsigned)blocks, 256, 0, s>>>((const __half *)pool, page_table,
                                                        kv->page_size, kv->n_kv_head,
                                                        kv->head_dim, pos0, n_rows, out);
    else if (kv_type == LC_TYPE_BF16)
        kv_read_kernel<<<(unsigned)blocks, 256, 0, s>>>((const lc_bf16 *)pool, page_table,
                                                        kv->page_size, kv->n_kv_head,
                                                        kv->head_dim, pos0, n_rows, out);
    else
        return lc_fail(LC_ERR_UNSUPPORTED, "kv_read: KV element type %u (f32, f16 or bf16)",
                       kv_type);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
