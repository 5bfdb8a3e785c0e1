// hip_stage.cu — one InfiniteHiP pruning stage on the GPU, the twin of lc_cpu_hip_stage
// (backend/cpu/cpu_hip_stage.c; contract in backend.h, "InfiniteHiP selection and block-sparse
// attention"). Paper: InfiniteHiP (seeds/000_ced830aa0d9eb0ea.txt) §3.1–3.2, Alg. 2–3; digest
// spec/infinitehip-and-hip.md §3.2 and §4.1.
//
// Four kernels on the backend's stream:
//  1. chunks:  per (block, group) the chunk list [start, len) in rank order — the input
//     segments cut into l_c pieces (an exclusive scan of the per-segment counts), or the one
//     segment [n_sink, win0) in the first stage — and the chunk scores cleared.
//  2. queries: per (block, head, m-tile of 16) the pooled queries (rows rotated at the mode's
//     query position, then averaged over q_stride), written in bf16 as ready-made mma.sync A
//     fragments. With RELATIVE RoPE the key rotation is folded into the query:
//     q·R(a)k = (R(a)ᵀq)·k, so two versions (a = 0 for the left slot, 1 for the right) are
//     stored and the probe keys go to the tensor cores exactly as the pages hold them.
//  3. score:   a CTA owns (nb query blocks, up to 16/n_mt query heads of one KV head, a tile of
//     chunk ranks); one warp per (block, head, m-tile), its A fragments in registers. All warps
//     walk the same chunk ranks, so the probes they share (the first stage has one chunk grid
//     for every block, nb > 1 there) come from L1. A warp takes 8 chunks at a time: each lane
//     quad gathers one chunk's two probe keys straight from the pages into B-fragment
//     registers (the head dimension is permuted so a lane's share of a key is one contiguous
//     run; the A fragments carry the same permutation), PLAIN / CHUNK rotate them in registers,
//     and one m16n8k16 per k-step scores 16 pooled queries × 8 chunks; the max over queries is
//     a shuffle reduction, across the m-tiles of a (block, head) a shared-memory exchange
//     under a named barrier, the descent step a compare per quad. The chunk score (max over
//     the group's heads) is an atomicMax on an order-preserving integer key.
//  4. select:  per (block, group) the n_keep best keys by a 3-pass radix select (11/11/10
//     bits) over the scores, equal scores taken from the highest rank down, then the kept
//     chunks written in rank (= position) order with a block scan.
//
// Limits: head_dim 64 or 128; at most 256 pooled queries per block; page size a power of two;
// with NEOX pairing in PLAIN/CHUNK mode n_rot must be head_dim or head_dim/2 (a lane's
// rotation partner is then in its own quad).
// Launch sizes (max_rows, max_chunks, in_cap) are trusted: rows and chunks past them are
// ignored here, where the CPU twin fails; positions outside the RoPE table are clamped.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace {

constexpr unsigned kFull      = 0xffffffffu;
constexpr int      kSelThreads = 256; // select and chunk kernels
constexpr int      kPrepThreads = 256;

struct stage_params {
    const lc_attn_seq   *seqs;
    const lc_hip_qblock *qb;
    const float         *q_raw;    // [rows][n_head][D]
    const uint16_t      *k;        // [n_pages][H][P][D] bf16
    const float         *cs, *sn;  // [n_pos][n_rot/2]
    int32_t              n_qb, n_head, hpk, H, P, p_shift, n_pos, n_rot, neox;
    int32_t              chunk, n_keep, q_stride, n_sink, n_stream, mode, n_groups;
    int32_t              max_chunks, in_cap, n_mt, chunks_per_cta, hpc, nb, n_hsub;
    const lc_hip_seg    *in;
    const int32_t       *in_n;
    lc_hip_seg          *out;
    int32_t             *out_n;
    int32_t             *n_ch;   // [n_pairs]
    int2                *chunks; // [n_pairs][max_chunks]
    uint32_t            *scores; // [n_pairs][max_chunks]
    uint32_t            *qfrag;  // [n_qb][n_head][2][n_mt][32 lanes][D/4] (bf16 pairs)
};

__device__ __forceinline__ uint32_t score_key(float s) {
    if (isnan(s)) s = -INFINITY;
    const uint32_t u = __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
__device__ __forceinline__ float bf16_lo(uint32_t r) { return __uint_as_float(r << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t r) { return __uint_as_float(r & 0xffff0000u); }

__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int clamp_pos(int pos, int n_pos) {
    return pos < 0 ? 0 : (pos >= n_pos ? n_pos - 1 : pos);
}

// Exclusive prefix sum over the block (blockDim.x a multiple of 32, at most 1024); *total gets
// the sum. smem: 32 ints. Every thread must call it.
__device__ int block_excl_scan(int v, int *total, int *smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int       x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(kFull, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) smem[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < nw ? smem[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(kFull, w, o);
            if (lane >= o) w += y;
        }
        __syncwarp();
        if (lane < nw) smem[lane] = w;
    }
    __syncthreads();
    const int before = warp > 0 ? smem[warp - 1] : 0;
    *total           = smem[nw - 1];
    __syncthreads(); // smem is reused by the next call
    return before + x - v;
}

// ---- 1. chunk lists --------------------------------------------------------------------------
// grid: n_pairs; block: kSelThreads
__global__ void __launch_bounds__(kSelThreads) hip_chunks_kernel(stage_params p) {
    __shared__ int scan_smem[32];
    const int            bg = blockIdx.x, b = bg / p.n_groups;
    const lc_hip_qblock  q  = p.qb[b];
    int2                *ch = p.chunks + (size_t)bg * p.max_chunks;
    uint32_t            *sc = p.scores + (size_t)bg * p.max_chunks;
    if (!p.in) {
        int n = q.win0 > p.n_sink ? (int)(((int64_t)q.win0 - p.n_sink + p.chunk - 1) / p.chunk) : 0;
        if (n > p.max_chunks) n = p.max_chunks;
        for (int c = threadIdx.x; c < n; c += blockDim.x) {
            const int start = p.n_sink + c * p.chunk;
            ch[c]           = make_int2(start, min(p.chunk, q.win0 - start));
            sc[c]           = 0u;
        }
        if (threadIdx.x == 0) p.n_ch[bg] = n;
        return;
    }
    int nin = p.in_n[bg];
    nin     = nin < 0 ? 0 : (nin > p.in_cap ? p.in_cap : nin);
    const lc_hip_seg *in = p.in + (size_t)bg * p.in_cap;
    int               base = 0;
    for (int s0 = 0; s0 < nin; s0 += blockDim.x) {
        const int  s   = s0 + threadIdx.x;
        lc_hip_seg sg  = s < nin ? in[s] : lc_hip_seg{0, 0};
        const int  cnt = sg.len > 0 ? (sg.len + p.chunk - 1) / p.chunk : 0;
        int        total;
        const int  off = base + block_excl_scan(cnt, &total, scan_smem);
        for (int i = 0; i < cnt && off + i < p.max_chunks; i++) {
            ch[off + i] = make_int2(sg.start + i * p.chunk, min(p.chunk, sg.len - i * p.chunk));
            sc[off + i] = 0u;
        }
        base += total;
    }
    if (threadIdx.x == 0) p.n_ch[bg] = base < p.max_chunks ? base : p.max_chunks;
}

// ---- 2. pooled queries as A fragments ----------------------------------------------------------
// Fragment layout of one m-tile (16 pooled queries) for lane l = 4g + c: D/4 registers, k-tile t
// in registers [4t, 4t + 4): a0 = row g, a1 = row g + 8 (dims c·D/4 + 4t + {0,1}), a2 = row g,
// a3 = row g + 8 (dims c·D/4 + 4t + {2,3}). The B fragments hold the keys in the same order.
//
// Element d of x (one head vector) rotated by table row pos.
__device__ __forceinline__ float rot_elem(const float *x, int d, int pos, const stage_params &p) {
    const int half = p.n_rot >> 1;
    if (d >= p.n_rot) return x[d];
    if (!p.neox) {
        const int   i = d >> 1;
        const float c = p.cs[(size_t)pos * half + i], s = p.sn[(size_t)pos * half + i];
        const float x0 = x[d & ~1], x1 = x[d | 1];
        return (d & 1) ? x0 * s + x1 * c : x0 * c - x1 * s;
    }
    const int   i = d < half ? d : d - half;
    const float c = p.cs[(size_t)pos * half + i], s = p.sn[(size_t)pos * half + i];
    const float x0 = x[i], x1 = x[i + half];
    return d < half ? x0 * c - x1 * s : x0 * s + x1 * c;
}
// Element d of R(pos)ᵀ y (the inverse rotation with the table's row).
__device__ __forceinline__ float unrot_elem(const float *y, int d, int pos, const stage_params &p) {
    const int half = p.n_rot >> 1;
    if (d >= p.n_rot) return y[d];
    if (!p.neox) {
        const int   i = d >> 1;
        const float c = p.cs[(size_t)pos * half + i], s = p.sn[(size_t)pos * half + i];
        const float y0 = y[d & ~1], y1 = y[d | 1];
        return (d & 1) ? y1 * c - y0 * s : y0 * c + y1 * s;
    }
    const int   i = d < half ? d : d - half;
    const float c = p.cs[(size_t)pos * half + i], s = p.sn[(size_t)pos * half + i];
    const float y0 = y[i], y1 = y[i + half];
    return d < half ? y0 * c + y1 * s : y1 * c - y0 * s;
}

// grid: (n_qb * n_head, n_mt); block: kPrepThreads. Each thread owns a few elements of the
// m-tile's 16 pooled rows (loads of all of them in flight at once), then a few fragment words.
template <int D> __global__ void __launch_bounds__(kPrepThreads) hip_queries_kernel(stage_params p) {
    constexpr int EL = 16 * D / kPrepThreads, FW = 32 * (D / 4) / kPrepThreads;
    __shared__ float y[16][D];
    const int            h = blockIdx.x % p.n_head, b = blockIdx.x / p.n_head, mt = blockIdx.y;
    const lc_hip_qblock  q = p.qb[b];
    const int            nq = (q.n_rows + p.q_stride - 1) / p.q_stride;
    if (mt * 16 >= nq) return; // no valid row: the scoring warp of this m-tile reads nothing
    const int g   = p.n_groups == 1 ? 0 : h / p.hpk;
    const int nch = p.n_ch[b * p.n_groups + g];
    const int nv  = p.mode == LC_HIP_SCAN_RELATIVE ? 2 : 1;
    uint32_t *dst = p.qfrag + (size_t)(b * p.n_head + h) * 2 * p.n_mt * 32 * (D / 4);
#pragma unroll
    for (int e = 0; e < EL; e++) {
        const int idx = e * kPrepThreads + threadIdx.x, ul = idx / D, d = idx % D, u = mt * 16 + ul;
        float     acc = 0.0f;
        if (u < nq) {
            const int r0 = u * p.q_stride, r1 = min(r0 + p.q_stride, q.n_rows);
            for (int r = r0; r < r1; r++) {
                const int pp  = q.pos0 + r;
                int       pos = p.mode == LC_HIP_SCAN_PLAIN      ? pp
                              : p.mode == LC_HIP_SCAN_RELATIVE ? p.n_stream + 1
                                                               : min(pp, nch + p.n_stream);
                pos = clamp_pos(pos, p.n_pos);
                acc += rot_elem(p.q_raw + ((size_t)(q.row0 + r) * p.n_head + h) * D, d, pos, p);
            }
            acc *= 1.0f / (float)(r1 - r0);
        }
        y[ul][d] = acc;
    }
    __syncthreads();
    for (int v = 0; v < nv; v++) {
#pragma unroll
        for (int e = 0; e < FW; e++) {
            const int idx = e * kPrepThreads + threadIdx.x;
            const int l = idx / (D / 4), j = idx % (D / 4), t = j >> 2, r = j & 3;
            const int row = (l >> 2) + ((r & 1) ? 8 : 0);
            const int d0  = (l & 3) * (D / 4) + 4 * t + ((r & 2) ? 2 : 0);
            float     e0, e1;
            if (p.mode == LC_HIP_SCAN_RELATIVE) // key slot v folded in: R(v)ᵀ R(n_stream+1) q
                e0 = unrot_elem(y[row], d0, v, p), e1 = unrot_elem(y[row], d0 + 1, v, p);
            else e0 = y[row][d0], e1 = y[row][d0 + 1];
            dst[((size_t)(v * p.n_mt + mt) * 32 + l) * (D / 4) + j] = pack_bf16(e0, e1);
        }
    }
}

// ---- 3. scoring ------------------------------------------------------------------------------
template <int D> struct score_cfg {
    static constexpr int KT = D / 16; // k-tiles of one mma chain
    static constexpr int QR = D / 4;  // A registers per lane per m-tile
    static constexpr int KR = D / 8;  // registers of a lane's share of one key (D/4 bf16)
};

// A lane's share of key `pos` (dims c·D/4 .. + D/4) from the pages; zero when pos < 0.
template <int D>
__device__ __forceinline__ void load_key(uint32_t (&r)[D / 8], int pos, const int32_t *pt,
                                         const uint16_t *kbase, const stage_params &p) {
    if (pos < 0) {
#pragma unroll
        for (int j = 0; j < D / 8; j++) r[j] = 0u;
        return;
    }
    const int   page = __ldg(pt + (pos >> p.p_shift)), slot = pos & (p.P - 1);
    const uint4 *src = (const uint4 *)(kbase + ((size_t)page * p.H * p.P + slot) * D);
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        const uint4 v = __ldg(src + i);
        r[4 * i] = v.x, r[4 * i + 1] = v.y, r[4 * i + 2] = v.z, r[4 * i + 3] = v.w;
    }
}

// Rotate a lane's key share by table row pos in registers (PLAIN / CHUNK). NORM pairs are in a
// register; NEOX partners (d, d + n_rot/2) sit in the lane of the quad n_rot/2 / (D/4) away.
template <int D>
__device__ __forceinline__ void rotate_key(uint32_t (&r)[D / 8], int pos, int cq, const stage_params &p) {
    const int    half = p.n_rot >> 1;
    const float *cr = p.cs + (size_t)pos * half, *sr = p.sn + (size_t)pos * half;
    const int    d0 = cq * (D / 4);
    if (!p.neox) {
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            const int d = d0 + 2 * j;
            if (d < p.n_rot) {
                const float c = __ldg(cr + (d >> 1)), s = __ldg(sr + (d >> 1));
                const float x0 = bf16_lo(r[j]), x1 = bf16_hi(r[j]);
                r[j] = pack_bf16(x0 * c - x1 * s, x0 * s + x1 * c);
            }
        }
        return;
    }
    const int pm = half > 0 ? half / (D / 4) : 0;
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
        const uint32_t partner = __shfl_xor_sync(kFull, r[j], pm);
        float          y[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int   d  = d0 + 2 * j + e;
            const float x  = e ? bf16_hi(r[j]) : bf16_lo(r[j]);
            const float xp = e ? bf16_hi(partner) : bf16_lo(partner);
            y[e]           = x;
            if (d < half) y[e] = x * __ldg(cr + d) - xp * __ldg(sr + d);
            else if (d < p.n_rot) y[e] = xp * __ldg(sr + d - half) + x * __ldg(cr + d - half);
        }
        r[j] = pack_bf16(y[0], y[1]);
    }
}

__device__ __forceinline__ void named_barrier(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

// One probe step of a warp: the m-tile's scores of the left tile (A_L·B_left) and the right tile
// (A_R·B_right) for 8 chunks, the max over the valid rows, then the max over the m-tiles of the
// pair (through shared memory when n_mt > 1); returns this lane's chunk's (column g's) scores.
// LEFT = false: the right tile only.
template <int D, bool LEFT>
__device__ __forceinline__ void probe_scores(const uint32_t (&aL)[D / 4], const uint32_t (&aR)[D / 4],
                                             const uint32_t (&bl)[D / 8], const uint32_t (&br)[D / 8],
                                             bool rows_valid, int row0, int nq, int n_mt, int warp,
                                             int pair, int &parity, float (*red)[16][16], int lane,
                                             float &sL, float &sR) {
    const int g   = lane >> 2;
    float     mL0 = -INFINITY, mL1 = -INFINITY, mR0 = -INFINITY, mR1 = -INFINITY;
    if (rows_valid) {
        float cl[4] = {0.f, 0.f, 0.f, 0.f}, cr[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int t = 0; t < D / 16; t++) {
            if (LEFT) mma_bf16(cl, aL + 4 * t, bl[2 * t], bl[2 * t + 1]);
            mma_bf16(cr, aR + 4 * t, br[2 * t], br[2 * t + 1]);
        }
        if (row0 + g < nq) {
            if (LEFT) mL0 = cl[0], mL1 = cl[1];
            mR0 = cr[0], mR1 = cr[1];
        }
        if (row0 + g + 8 < nq) {
            if (LEFT) mL0 = fmaxf(mL0, cl[2]), mL1 = fmaxf(mL1, cl[3]);
            mR0 = fmaxf(mR0, cr[2]), mR1 = fmaxf(mR1, cr[3]);
        }
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            if (LEFT) {
                mL0 = fmaxf(mL0, __shfl_xor_sync(kFull, mL0, o));
                mL1 = fmaxf(mL1, __shfl_xor_sync(kFull, mL1, o));
            }
            mR0 = fmaxf(mR0, __shfl_xor_sync(kFull, mR0, o));
            mR1 = fmaxf(mR1, __shfl_xor_sync(kFull, mR1, o));
        }
    }
    // column n = g sits in lanes with lane % 4 = g / 2, element g % 2
    if (n_mt == 1) {
        const int src = g >> 1;
        if (LEFT) {
            const float l0 = __shfl_sync(kFull, mL0, src), l1 = __shfl_sync(kFull, mL1, src);
            sL             = (g & 1) ? l1 : l0;
        }
        const float r0 = __shfl_sync(kFull, mR0, src), r1 = __shfl_sync(kFull, mR1, src);
        sR             = (g & 1) ? r1 : r0;
        return;
    }
    // several m-tiles: lanes 0-3 publish their columns, the pair's warps meet, all combine the
    // same values in the same order (double-buffered by parity: one barrier per step)
    float *mine = red[parity][warp];
    if (lane < 4) {
        mine[lane * 4 + 0] = mL0, mine[lane * 4 + 1] = mL1;
        mine[lane * 4 + 2] = mR0, mine[lane * 4 + 3] = mR1;
    }
    named_barrier(1 + pair, 32 * n_mt);
    float l = -INFINITY, r = -INFINITY;
    for (int m = 0; m < n_mt; m++) {
        const float *o = red[parity][pair * n_mt + m];
        l              = fmaxf(l, o[(g >> 1) * 4 + (g & 1)]);
        r              = fmaxf(r, o[(g >> 1) * 4 + 2 + (g & 1)]);
    }
    if (LEFT) sL = l;
    sR     = r;
    parity ^= 1;
}

// grid: (ceil(n_qb / nb) * H * n_hsub, chunk tiles); block: 32 * nb * hpc * n_mt warps.
// Warp w: pair w / n_mt (block w / n_mt / hpc of the CTA's nb, head w / n_mt % hpc of the KV
// head's), m-tile w % n_mt. The pairs of a CTA walk the same chunk ranks, so in the first stage
// (one chunk grid for every block) the probes they share come from L1.
template <int D, int MODE> __global__ void __launch_bounds__(512, 1) hip_score_kernel(stage_params p) {
    constexpr int QR = D / 4, KR = D / 8;
    __shared__ float red[2][16][16];
    const int     lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int     pair = warp / p.n_mt, mt = warp % p.n_mt;
    const int     hs   = blockIdx.x % p.n_hsub;
    const int     kvh  = (blockIdx.x / p.n_hsub) % p.H;
    const int     b    = blockIdx.x / (p.n_hsub * p.H) * p.nb + pair / p.hpc;
    const int     hh   = hs * p.hpc + pair % p.hpc;
    if (b >= p.n_qb || hh >= p.hpk) return; // the whole pair leaves together
    const int h   = kvh * p.hpk + hh;
    const int bg  = b * p.n_groups + (p.n_groups == 1 ? 0 : kvh);
    const int nch = p.n_ch[bg];
    const int c_begin = blockIdx.y * p.chunks_per_cta;
    if (c_begin >= nch) return;
    const int            c_end = min(nch, c_begin + p.chunks_per_cta);
    const lc_hip_qblock  q     = p.qb[b];
    const int32_t       *pt    = p.seqs[q.seq].page_table;
    const int            nq    = (q.n_rows + p.q_stride - 1) / p.q_stride;
    const bool           rows_valid = mt * 16 < nq; // warp-uniform: an idle m-tile only meets
    const int            g = lane >> 2, cq = lane & 3;
    const uint16_t      *kbase = p.k + (size_t)kvh * p.P * D + cq * (D / 4);
    uint32_t             aL[QR], aR[QR];
    if (rows_valid) {
        const uint32_t *qf = p.qfrag + (size_t)(b * p.n_head + h) * 2 * p.n_mt * 32 * QR + lane * QR;
        const uint4    *s0 = (const uint4 *)(qf + (size_t)mt * 32 * QR);
        const uint4    *s1 = (const uint4 *)(qf + (size_t)(p.n_mt + mt) * 32 * QR);
#pragma unroll
        for (int i = 0; i < QR / 4; i++) {
            uint4 x   = __ldg(s0 + i);
            aL[4 * i] = x.x, aL[4 * i + 1] = x.y, aL[4 * i + 2] = x.z, aL[4 * i + 3] = x.w;
            if (MODE == LC_HIP_SCAN_RELATIVE) x = __ldg(s1 + i);
            aR[4 * i] = x.x, aR[4 * i + 1] = x.y, aR[4 * i + 2] = x.z, aR[4 * i + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < QR; i++) aL[i] = aR[i] = 0u;
    }
    int         parity = 0;
    uint32_t   *scores = p.scores + (size_t)bg * p.max_chunks;
    const int2 *chunks = p.chunks + (size_t)bg * p.max_chunks;
    for (int c0 = c_begin; c0 < c_end; c0 += 8) {
        const int  c     = c0 + g;
        const bool valid = c < c_end;
        int        lo = 0, hi = 0;
        if (valid) {
            const int2 ch = chunks[c];
            lo = ch.x, hi = ch.x + ch.y;
        }
        float fin   = -INFINITY;
        bool  known = false; // fin holds S(lo, RIGHT)
        while (true) {
            const bool active = hi - lo > 1;
            if (!__any_sync(kFull, active)) break; // the same in every warp of the pair
            const int mid = lo + ((hi - lo) >> 1);
            uint32_t  bl[KR], br[KR];
            load_key<D>(bl, active && rows_valid ? lo : -1, pt, kbase, p);
            load_key<D>(br, active && rows_valid ? mid : -1, pt, kbase, p);
            if (MODE != LC_HIP_SCAN_RELATIVE) {
                rotate_key<D>(bl, clamp_pos(MODE == LC_HIP_SCAN_PLAIN ? lo : c, p.n_pos), cq, p);
                rotate_key<D>(br, clamp_pos(MODE == LC_HIP_SCAN_PLAIN ? mid : c, p.n_pos), cq, p);
            }
            float sL, sR;
            probe_scores<D, true>(aL, aR, bl, br, rows_valid, mt * 16, nq, p.n_mt, warp, pair,
                                  parity, red, lane, sL, sR);
            if (active) {
                if (sR > sL) lo = mid, fin = sR, known = true;
                else {
                    hi = mid;
                    if (MODE != LC_HIP_SCAN_RELATIVE) fin = sL, known = true;
                }
            }
        }
        const bool need = valid && !known; // lo never probed in the right slot: probe it now
        if (__any_sync(kFull, need)) {
            uint32_t br[KR];
            load_key<D>(br, need && rows_valid ? lo : -1, pt, kbase, p);
            if (MODE != LC_HIP_SCAN_RELATIVE)
                rotate_key<D>(br, clamp_pos(MODE == LC_HIP_SCAN_PLAIN ? lo : c, p.n_pos), cq, p);
            float sL = 0.f, sR;
            probe_scores<D, false>(aL, aR, br, br, rows_valid, mt * 16, nq, p.n_mt, warp, pair,
                                   parity, red, lane, sL, sR);
            if (need) fin = sR;
        }
        if (valid && cq == 0 && mt == 0) atomicMax(scores + c, score_key(fin));
    }
}

// ---- 4. top n_keep per (block, group) ----------------------------------------------------------
// grid: n_pairs; block: kSelThreads
__global__ void __launch_bounds__(kSelThreads) hip_select_kernel(stage_params p) {
    __shared__ int      hist[2048];
    __shared__ int      scan_smem[32];
    __shared__ uint32_t sh_digit;
    __shared__ int      sh_above;
    const int           bg = blockIdx.x, n = p.n_ch[bg], k = p.n_keep, tid = threadIdx.x;
    const int2         *ch = p.chunks + (size_t)bg * p.max_chunks;
    const uint32_t     *sc = p.scores + (size_t)bg * p.max_chunks;
    lc_hip_seg         *out = p.out + (size_t)bg * p.n_keep;
    if (n <= k) {
        for (int c = tid; c < n; c += blockDim.x) out[c] = lc_hip_seg{ch[c].x, ch[c].y};
        if (tid == 0) p.out_n[bg] = n;
        return;
    }
    // radix select of the k-th largest key T: after the passes, kk keys equal to T are wanted
    uint32_t  prefix = 0, pmask = 0;
    int       kk     = k;
    const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
    for (int pass = 0; pass < 3; pass++) {
        const int sh = shifts[pass], nb = 1 << widths[pass];
        const uint32_t dm = (uint32_t)nb - 1u;
        for (int i = tid; i < nb; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (int c = tid; c < n; c += blockDim.x) {
            const uint32_t key = sc[c];
            if ((key & pmask) == prefix) atomicAdd(&hist[(key >> sh) & dm], 1);
        }
        __syncthreads();
        // thread t owns the bins nb-1-t*per .. downwards; find the bin where the count from the
        // top reaches kk
        const int per = nb / blockDim.x;
        int       local = 0;
        for (int i = 0; i < per; i++) local += hist[nb - 1 - (tid * per + i)];
        int       tot;
        int       cum = block_excl_scan(local, &tot, scan_smem);
        for (int i = 0; i < per; i++) {
            const int bin = nb - 1 - (tid * per + i), cnt = hist[bin];
            if (cum < kk && cum + cnt >= kk) sh_digit = (uint32_t)bin, sh_above = cum;
            cum += cnt;
        }
        __syncthreads();
        kk -= sh_above;
        prefix |= sh_digit << sh;
        pmask |= dm << sh;
        __syncthreads();
    }
    const uint32_t T = prefix;
    // rank ranges per thread; equal keys are kept from the highest rank down
    const int per = (n + blockDim.x - 1) / blockDim.x;
    const int c0 = min(n, tid * per), c1 = min(n, c0 + per);
    int       eq = 0;
    for (int c = c0; c < c1; c++) eq += sc[c] == T;
    int       tot_eq;
    const int eq_before = block_excl_scan(eq, &tot_eq, scan_smem);
    const int eq_above  = tot_eq - eq_before - eq;
    int       kept = 0, cum = eq_above;
    for (int c = c1 - 1; c >= c0; c--) {
        const uint32_t key = sc[c];
        if (key > T) kept++;
        else if (key == T) kept += cum++ < kk;
    }
    int       tot_kept;
    const int at = block_excl_scan(kept, &tot_kept, scan_smem);
    int       j = 0;
    cum         = eq_above;
    for (int c = c1 - 1; c >= c0; c--) {
        const uint32_t key  = sc[c];
        bool           keep = key > T;
        if (key == T) keep = cum++ < kk;
        if (keep) {
            out[at + kept - 1 - j] = lc_hip_seg{ch[c].x, ch[c].y};
            j++;
        }
    }
    if (tid == 0) p.out_n[bg] = tot_kept;
}

// ---- host side -------------------------------------------------------------------------------

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// Scratch layout for head dim D; offsets of n_ch, chunks, scores, qfrag and the total.
size_t scratch_layout(int32_t n_qb, int32_t n_head, const lc_hip_stage_args *a, int D, size_t off[4]) {
    const size_t pairs = (size_t)n_qb * (size_t)a->n_groups, mc = (size_t)(a->max_chunks > 0 ? a->max_chunks : 0);
    const int    nq    = (a->max_rows + a->q_stride - 1) / a->q_stride;
    const size_t n_mt  = (size_t)((nq + 15) / 16);
    off[0]             = 0;
    off[1]             = align256(off[0] + pairs * sizeof(int32_t));
    off[2]             = align256(off[1] + pairs * mc * sizeof(int2));
    off[3]             = align256(off[2] + pairs * mc * sizeof(uint32_t));
    return align256(off[3] + (size_t)n_qb * n_head * 2 * n_mt * 32 * (size_t)(D / 4) * 4);
}

template <int D> int launch_all(const stage_params &p, int n_pairs, int n_tiles) {
    cudaStream_t st = lc_cuda_stream();
    hip_chunks_kernel<<<n_pairs, kSelThreads, 0, st>>>(p);
    LC_CUDA_LAUNCHED();
    hip_queries_kernel<D><<<dim3((unsigned)(p.n_qb * p.n_head), (unsigned)p.n_mt), kPrepThreads, 0, st>>>(p);
    LC_CUDA_LAUNCHED();
    if (n_tiles > 0) {
        const dim3 grid((unsigned)((p.n_qb + p.nb - 1) / p.nb * p.H * p.n_hsub), (unsigned)n_tiles);
        const int  threads = 32 * p.nb * p.hpc * p.n_mt;
        switch (p.mode) {
        case LC_HIP_SCAN_PLAIN: hip_score_kernel<D, LC_HIP_SCAN_PLAIN><<<grid, threads, 0, st>>>(p); break;
        case LC_HIP_SCAN_RELATIVE:
            hip_score_kernel<D, LC_HIP_SCAN_RELATIVE><<<grid, threads, 0, st>>>(p);
            break;
        default: hip_score_kernel<D, LC_HIP_SCAN_CHUNK><<<grid, threads, 0, st>>>(p); break;
        }
        LC_CUDA_LAUNCHED();
    }
    hip_select_kernel<<<n_pairs, kSelThreads, 0, st>>>(p);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

} // namespace

extern "C" size_t lc_cuda_hip_stage_scratch_bytes(int32_t n_qb, int32_t n_head, const lc_hip_stage_args *a) {
    if (!a || n_qb <= 0 || n_head <= 0 || a->q_stride < 1 || a->max_rows < 1 || a->n_groups < 1) return 0;
    size_t off[4];
    return scratch_layout(n_qb, n_head, a, 128, off); // head dims up to 128
}

extern "C" int lc_cuda_hip_stage(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                 const lc_hip_qblock *qb, int32_t n_qb, const float *q_raw,
                                 int32_t n_head, const lc_rope_table *rope,
                                 const lc_hip_stage_args *a, void *scratch, size_t scratch_bytes) {
    if (!kv || !rope || !a || n_qb < 0 || (n_qb > 0 && (!qb || !seqs || !q_raw)) || !a->out || !a->out_n)
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: missing argument");
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size;
    if (H < 1 || n_head < H || n_head % H || P < 1 || (P & (P - 1)))
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: bad shape (%d heads, %d KV heads, page %d)",
                       n_head, H, P);
    if (a->chunk < 1 || a->n_keep < 1 || a->q_stride < 1 || a->n_sink < 0 || a->n_stream < 0 ||
        a->scan_rope < LC_HIP_SCAN_PLAIN || a->scan_rope > LC_HIP_SCAN_CHUNK ||
        (a->n_groups != 1 && a->n_groups != H) || a->max_rows < 1 || a->max_chunks < 0 ||
        (a->in && (!a->in_n || a->in_cap < 0)))
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: bad stage arguments (chunk %d, keep %d, "
                       "q_stride %d, groups %d, scan_rope %d)", a->chunk, a->n_keep,
                       a->q_stride, a->n_groups, a->scan_rope);
    if (rope->n_rot > D || rope->n_rot < 0 || rope->n_rot % 2 || rope->n_pos < 1)
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: n_rot %d with head dim %d", rope->n_rot, D);
    if (a->scan_rope == LC_HIP_SCAN_RELATIVE && (int64_t)a->n_stream + 1 >= rope->n_pos)
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: relative RoPE needs position %d, the "
                       "table has %d", a->n_stream + 1, rope->n_pos);
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip_stage: head dim %d on CUDA (64 or 128)", D);
    if (rope->pairing == LC_ROPE_NEOX && a->scan_rope != LC_HIP_SCAN_RELATIVE &&
        (rope->n_rot / 2) % (D / 4) != 0)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip_stage: NEOX RoPE over %d of %d dims on CUDA "
                       "(needs all or half)", rope->n_rot, D);
    if (n_qb == 0) return LC_OK;
    size_t       off[4];
    const size_t need = scratch_layout(n_qb, n_head, a, D, off);
    if (!scratch || scratch_bytes < need)
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: scratch of %zu bytes, %zu needed",
                       scratch_bytes, need);
    const int nq = (a->max_rows + a->q_stride - 1) / a->q_stride;
    const int G  = n_head / H;

    stage_params p;
    memset(&p, 0, sizeof p);
    p.seqs = seqs, p.qb = qb, p.q_raw = q_raw, p.k = (const uint16_t *)kv->k;
    p.cs = rope->cos, p.sn = rope->sin;
    p.n_qb = n_qb, p.n_head = n_head, p.hpk = G, p.H = H, p.P = P;
    p.p_shift = 0;
    while ((1 << p.p_shift) < P) p.p_shift++;
    p.n_pos = rope->n_pos, p.n_rot = rope->n_rot, p.neox = rope->pairing == LC_ROPE_NEOX;
    p.chunk = a->chunk, p.n_keep = a->n_keep, p.q_stride = a->q_stride, p.n_sink = a->n_sink;
    p.n_stream = a->n_stream, p.mode = a->scan_rope, p.n_groups = a->n_groups;
    p.max_chunks = a->max_chunks, p.in_cap = a->in_cap, p.n_mt = (nq + 15) / 16;
    p.in = a->in, p.in_n = a->in_n, p.out = a->out, p.out_n = a->out_n;
    char *s  = (char *)scratch;
    p.n_ch   = (int32_t *)(s + off[0]);
    p.chunks = (int2 *)(s + off[1]);
    p.scores = (uint32_t *)(s + off[2]);
    p.qfrag  = (uint32_t *)(s + off[3]);
    // a CTA: nb blocks (first stage only: they share the chunk grid) x hpc query heads of one
    // KV head x n_mt m-tiles, one warp each, at most 16 warps; chunk tiles of 8 * iters
    if (p.n_mt > 16)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip_stage: %d pooled queries per block on CUDA "
                       "(at most 256)", nq);
    p.hpc    = G < 16 / p.n_mt ? G : 16 / p.n_mt;
    p.n_hsub = (G + p.hpc - 1) / p.hpc;
    p.nb     = a->in ? 1 : 16 / (p.hpc * p.n_mt);
    if (p.nb > 4) p.nb = 4;
    if (p.nb > n_qb) p.nb = n_qb;
    if (p.nb < 1) p.nb = 1;
    const int64_t ctas_1 = (int64_t)(n_qb + p.nb - 1) / p.nb * H * p.n_hsub;
    int           iters  = 1;
    while (iters < 16 && ctas_1 * (((int64_t)a->max_chunks + 16 * iters - 1) / (16 * iters)) >= 4096)
        iters *= 2;
    while (((int64_t)a->max_chunks + 8 * iters - 1) / (8 * iters) > 65535) iters *= 2;
    p.chunks_per_cta  = 8 * iters;
    const int n_tiles = (a->max_chunks + p.chunks_per_cta - 1) / p.chunks_per_cta;
    if (ctas_1 > 0x7fffffff || (int64_t)n_qb * n_head > 0x7fffffff)
        return lc_fail(LC_ERR_INVALID_ARG, "hip_stage: %d blocks is too many", n_qb);
    return D == 64 ? launch_all<64>(p, n_qb * a->n_groups, n_tiles)
                   : launch_all<128>(p, n_qb * a->n_groups, n_tiles);
}
