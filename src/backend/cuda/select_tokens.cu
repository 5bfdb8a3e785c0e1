// select_tokens.cu — TokenSelect token-level selection on CUDA, the twin of lc_cpu_select_tokens
// (contract: backend.h "TokenSelect token-level selection"; paper 001_823a2d0cdd44ac9c.txt
// Eq. 7, Alg. 1–2; digest spec/tokenselect-and-sparseserve.md A.2–A.5). fp16 KV pools
// [page][kv_head][P][D] read in place through each sequence's page table.
// Kernels of the many-block path, in stream order (every one reads its block's device hit flag
// first and skips the block on a hit; a step never waits for the host):
//   1 fp:      fingerprints f[b][h] (rows rotated at fp_pos + i, mean); with the selection
//              cache (one CTA per block, over every head) the cosine against the block's
//              cache slot decides its hit / miss on the device (flag[b]), counts are bumped,
//              cache_q and cache_valid updated on a miss; the per-slot select state is zeroed.
//              Kernels 2-9 skip the blocks that hit (batched decode: one launch each serves
//              every decode sequence of a step, each with its own cache slot, list[b]).
//   2 logits:  persistent CTAs over (key tile, block) items, tile-major so CTAs of different
//              blocks that read the same keys run together (prefill: L2 reuse); each warp
//              reads rows of one KV head (8 lanes x 16 bytes per row, 4 rows per step) and dots
//              them with the fp32 fingerprints of the query heads that map to it (GQA div or
//              mod); logits fp32 to scratch, per-tile (max, sum exp) partials per head.
//   3 reduce:  per (block, head) m_h and Z_h from the partials.
//   4 vote:    score[t] = sum_h exp(s_h[t] - m_h) / Z_h (fp32, >= 0), and the first pass of a
//              radix select on the score bits (11 / 11 / 10 bits): a shared histogram per CTA,
//              added to the block's global one; the last CTA (atomic ticket) finds the bin of
//              the k-th largest and zeroes the histogram.
//   5,6 hist:  the next two radix passes over the keys that match the prefix found so far.
//              After them: the threshold key T and krem, the ties at T to take.
//   7 count:   contiguous chunks of candidates per CTA count keys > T and == T; the last CTA
//              scans the chunks: each chunk's output offset (ties: the lowest positions first).
//   8 collect: each CTA writes its chunk's selected positions in order (block scans), so the
//              token list is already sorted by position.
//   9 seg:     the sorted list as maximal runs (one CTA per block); candidates <= k: the whole
//              range as one segment, none when empty.
// Calls of at most kMaxFused (8) blocks (decode, short chunks; with the cache, one block) run
// instead one cooperative
// persistent kernel, ts_fused_kernel, whose phases are the work of kernels 1-9 separated by
// grid-wide barriers (the fingerprints spread over the grid, each CTA's share of the cosine
// sums summed in a fixed order by every CTA after the first barrier: all decide alike; a hit
// returns there), so a cached decode step is one launch, not nine early-returning ones (H100,
// 8B shape, 1M keys: hit 44 -> 19 us, one call; miss 1127 -> 1002 us). The backend's tuning
// (lc_tuning): ts_select_launches=2|3 keeps kernel 1 (and 2) as their own launches;
// ts_select_path=kernels|fused forces a path. Both paths give the same bytes
// (test_select_tokens_cuda).
// Prefill calls with many blocks run kernels 2-9 over groups of blocks whose scratch (logits
// [group][n_head][max_cand] fp32 and scores) stays under a budget (256 MiB; tuning
// ts_select_group caps the blocks per group, for tests).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh"

#include <cooperative_groups.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int      kTT      = 128;  // candidate tokens per logits tile
constexpr int      kThreads = 256;  // threads of the grid-stride kernels
constexpr int      kBins    = 2048; // radix bins per pass (11 bits; the last pass uses 1024)
constexpr unsigned kFull    = 0xffffffffu;
constexpr size_t   kBudget  = (size_t)256 << 20;

struct ts_params {
    const lc_attn_seq   *seqs;
    const lc_qblock *qb;
    const float         *q_raw;
    const uint16_t      *kp; // fp16 (lc_kv16) [n_pages][H][P][D]
    const float         *cs, *sn;
    int32_t n_head, H, G, D, P, p_shift, n_rot, neox, n_pos;
    int32_t n_init, k, fp_pos, gqa_mod, max_rows, max_cand;
    lc_segment *out;
    int32_t    *out_n;
    int32_t     out_cap;
    float      *cache_q;     // [slots][n_head * D]
    int32_t    *cache_valid; // [slots]
    const int32_t *slots;    // [n_qb] or NULL: block b's slot of out / out_n / cache_q / cache_valid
    float       theta;
    long long  *counts;
    // scratch
    float    *fp;    // [n_qb][n_head][D]
    int32_t  *flag;  // [n_qb]: 1 = block b's cache hit
    double   *cosp;  // [CTAs with fingerprints][4] the fused kernel's per-CTA cosine sums
    float    *logit; // [NB][n_head][max_cand]
    float2   *part;  // [NB][n_tiles][n_head] (max, sum exp)
    float2   *mz;    // [NB][n_head] (m, Z)
    float    *score; // [NB][max_cand]
    uint32_t *hist;  // [NB][3][kBins] (the kernels path uses region 0; the fused one all 3)
    uint32_t *done;  // [NB][4] tickets (3 radix passes, count)
    uint2    *sel;   // [NB] (threshold prefix, krem)
    int4     *chunk; // [NB][nch] (gt, eq, base, eq before)
    int32_t  *list;  // [NB][list_cap]
    int32_t   list_cap, n_tiles, nch, ch_len, nb_slots;
    int32_t   b0;    // first block of the group being processed
};

// The slot of block b's lists and cache (batched decode: list[b]; else b).
__device__ __forceinline__ int slot_of(const ts_params &p, int b) { return p.slots ? p.slots[b] : b; }

// Candidates of block b, clamped to the launch size (the CPU twin refuses larger ones).
__device__ __forceinline__ int cand_of(const ts_params &p, int b) {
    const int n = p.qb[b].win0 - p.n_init;
    return n < 0 ? 0 : (n > p.max_cand ? p.max_cand : n);
}

// Element d of x rotated by position pos with the table (device_prims.cuh's rope_elem).
__device__ __forceinline__ float rot_elem(const float *x, int d, int pos, const ts_params &p) {
    return rope_elem(x, d, pos, p.cs, p.sn, p.n_rot, p.neox != 0);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

// Sum over the block of v (blockDim a multiple of 32); every thread gets it. smem: 32 slots.
template <typename T> __device__ T block_sum(T v, T *smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    __syncthreads();
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    T s = 0;
    for (int i = 0; i < nw; i++) s += smem[i];
    return s;
}

// Exclusive prefix sum over the block (blockDim a multiple of 32); *total gets the sum.
// smem: 32 ints. Every thread must call it.
__device__ int block_excl_scan(int v, int *total, int *smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int       x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(kFull, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) smem[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < nw ? smem[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(kFull, w, o);
            if (lane >= o) w += y;
        }
        if (lane < nw) smem[lane] = w; // inclusive sums of the warps
    }
    __syncthreads();
    const int before = warp > 0 ? smem[warp - 1] : 0;
    *total           = smem[nw - 1];
    return before + x - v;
}

__device__ __forceinline__ uint32_t score_key(float s) {
    return s >= 0.0f ? __float_as_uint(s) : 0u; // scores are >= 0 (NaN counts as 0)
}

// ---- 1: fingerprints and the selection cache ----
__global__ void __launch_bounds__(kThreads) ts_fp_kernel(ts_params p) {
    __shared__ double red[32];
    __shared__ int    s_hit;
    const int         b = blockIdx.x;
    const lc_qblock q = p.qb[b];
    const int         n = q.n_rows < 1 ? 1 : (q.n_rows > p.max_rows ? p.max_rows : q.n_rows);
    const float       inv = 1.0f / (float)n;
    for (int h = blockIdx.y; h < p.n_head; h += gridDim.y)
        for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
            float acc = 0.0f;
            for (int i = 0; i < n; i++)
                acc += rot_elem(p.q_raw + ((size_t)(q.row0 + i) * p.n_head + h) * p.D, d,
                                clamp_pos(p.fp_pos + i, p.n_pos), p);
            p.fp[((size_t)b * p.n_head + h) * p.D + d] = acc * inv;
        }
    // zero the select state of slot b (kernels 4-7 leave it zeroed after use)
    if (b < p.nb_slots && blockIdx.y == 0) {
        for (int i = threadIdx.x; i < kBins; i += blockDim.x) p.hist[(size_t)b * 3 * kBins + i] = 0u;
        if (threadIdx.x < 4) p.done[b * 4 + threadIdx.x] = 0u;
    }
    if (blockIdx.y != 0) return;
    if (!p.cache_q) {
        if (threadIdx.x == 0) p.flag[b] = 0;
        return;
    }
    // the cache of block b's slot: this kernel ran as one CTA per block over every head
    __syncthreads();
    const int    nf   = p.n_head * p.D;
    const size_t slot = (size_t)slot_of(p, b);
    float       *cq   = p.cache_q + slot * nf;
    const float *f    = p.fp + (size_t)b * nf;
    double       dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (int i = threadIdx.x; i < nf; i += blockDim.x) {
        const double fv = f[i], c = cq[i];
        dot += fv * c, n1 += fv * fv, n2 += c * c;
    }
    dot = block_sum(dot, red);
    n1  = block_sum(n1, red);
    n2  = block_sum(n2, red);
    if (threadIdx.x == 0) {
        const double c   = n1 > 0.0 && n2 > 0.0 ? dot / sqrt(n1 * n2) : 0.0;
        const int    hit = p.cache_valid[slot] != 0 && c >= (double)p.theta;
        s_hit            = hit;
        p.flag[b]        = hit;
        if (p.counts) atomicAdd((unsigned long long *)&p.counts[hit ? 0 : 1], 1ull);
        if (!hit) p.cache_valid[slot] = 1;
    }
    __syncthreads();
    if (!s_hit)
        for (int i = threadIdx.x; i < nf; i += blockDim.x) cq[i] = f[i];
}

// ---- 2: logits ----
// Warp unit: KV head kvh, 32 tokens of the tile, query heads [hc*GM, hc*GM + GM) of its group.
// Lane: row lane / 8 of each 4-row step, dims seg*8 .. +8 (and 64 + seg*8 .. +8 for D 128).
// The items (key tile, block) of this CTA (blockIdx.x + i * gridDim.x): the standalone kernel's
// whole work and the fused kernel's logits phase. smem: n_head * (D + kTT) floats.
template <int D, int GM>
__device__ __forceinline__ void logits_phase(const ts_params &p, int nbg, float *smem, bool skip_hits) {
    float        *f_s = smem;                          // [n_head][D]
    float        *l_s = smem + (size_t)p.n_head * D;   // [n_head][kTT]
    constexpr int NV = D / 64;                         // 16-byte loads per lane per row
    const int     lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int     seg = lane & 7, rsub = lane >> 3;
    const int     n_hc = (p.G + GM - 1) / GM, units = p.H * (kTT / 32) * n_hc;
    const int     items = nbg * p.n_tiles;
    int           loaded = -1;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int tile = item / nbg, bs = item % nbg, b = p.b0 + bs;
        const int cand = cand_of(p, b);
        if (cand <= p.k || tile * kTT >= cand || (skip_hits && p.flag[b])) continue; // uniform over the CTA
        const int32_t *pt = p.seqs[p.qb[b].seq].page_table;
        if (loaded != b) {
            __syncthreads();
            const float4 *src = (const float4 *)(p.fp + (size_t)b * p.n_head * D);
            for (int i = threadIdx.x; i < p.n_head * D / 4; i += blockDim.x) ((float4 *)f_s)[i] = src[i];
            loaded = b;
        }
        __syncthreads();
        for (int u = warp; u < units; u += nw) {
            const int kvh = u % p.H, rest = u / p.H, sub = rest % (kTT / 32), hc = rest / (kTT / 32);
            float     f[GM][8 * NV];
            int       hh[GM];
#pragma unroll
            for (int g = 0; g < GM; g++) {
                const int j = hc * GM + g;
                hh[g]       = j < p.G ? (p.gqa_mod ? j * p.H + kvh : kvh * p.G + j) : -1;
                const float *fs = f_s + (size_t)(hh[g] < 0 ? 0 : hh[g]) * D;
#pragma unroll
                for (int v = 0; v < NV; v++)
#pragma unroll
                    for (int e = 0; e < 8; e++) f[g][8 * v + e] = hh[g] < 0 ? 0.0f : fs[64 * v + seg * 8 + e];
            }
#pragma unroll
            for (int half = 0; half < 2; half++) {
                uint4 raw[4][NV];
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    const int r = sub * 32 + (half * 4 + s) * 4 + rsub, t = tile * kTT + r;
#pragma unroll
                    for (int v = 0; v < NV; v++) raw[s][v] = make_uint4(0u, 0u, 0u, 0u);
                    if (t < cand) {
                        const int      pos = p.n_init + t;
                        const int64_t  page = pt[pos >> p.p_shift];
                        const uint4   *row  = (const uint4 *)(p.kp + ((size_t)(page * p.H + kvh) * p.P + (pos & (p.P - 1))) * D);
#pragma unroll
                        for (int v = 0; v < NV; v++) raw[s][v] = __ldg(row + 8 * v + seg);
                    }
                }
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    const int r = sub * 32 + (half * 4 + s) * 4 + rsub, t = tile * kTT + r;
                    float     kf[8 * NV];
#pragma unroll
                    for (int v = 0; v < NV; v++) {
                        const uint32_t w[4] = {raw[s][v].x, raw[s][v].y, raw[s][v].z, raw[s][v].w};
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            kf[8 * v + 2 * e]     = kv_lo(w[e]);
                            kf[8 * v + 2 * e + 1] = kv_hi(w[e]);
                        }
                    }
                    float acc[GM];
#pragma unroll
                    for (int g = 0; g < GM; g++) {
                        float a = 0.0f;
#pragma unroll
                        for (int e = 0; e < 8 * NV; e++) a = fmaf(f[g][e], kf[e], a);
                        acc[g] = a;
                    }
#pragma unroll
                    for (int g = 0; g < GM; g++) {
                        acc[g] += __shfl_xor_sync(kFull, acc[g], 1);
                        acc[g] += __shfl_xor_sync(kFull, acc[g], 2);
                        acc[g] += __shfl_xor_sync(kFull, acc[g], 4);
                    }
                    float mine = acc[0];
#pragma unroll
                    for (int g = 1; g < GM; g++)
                        if (seg == g) mine = acc[g];
                    int hm = hh[0];
#pragma unroll
                    for (int g = 1; g < GM; g++)
                        if (seg == g) hm = hh[g];
                    if (seg < GM && hm >= 0 && t < cand) l_s[(size_t)hm * kTT + r] = mine;
                }
            }
        }
        __syncthreads();
        // logits out (coalesced) and the tile's (max, sum exp) per head
        for (int h = warp; h < p.n_head; h += nw) {
            float m = -INFINITY;
            for (int r = lane; r < kTT; r += 32) {
                const int t = tile * kTT + r;
                if (t < cand) {
                    const float v = l_s[(size_t)h * kTT + r];
                    p.logit[((size_t)bs * p.n_head + h) * p.max_cand + t] = v;
                    m = fmaxf(m, v);
                }
            }
            m       = warp_max(m);
            float z = 0.0f;
            for (int r = lane; r < kTT; r += 32)
                if (tile * kTT + r < cand) z += expf(l_s[(size_t)h * kTT + r] - m);
            z = warp_sum(z);
            if (lane == 0) p.part[((size_t)bs * p.n_tiles + tile) * p.n_head + h] = make_float2(m, z);
        }
    }
}

template <int D, int GM>
__global__ void __launch_bounds__(kThreads, GM <= 4 ? 2 : 1) ts_logits_kernel(ts_params p, int nbg) {
    extern __shared__ float smem[];
    logits_phase<D, GM>(p, nbg, smem, true);
}

// ---- 3: m_h, Z_h ----
__global__ void __launch_bounds__(kThreads) ts_reduce_kernel(ts_params p) {
    __shared__ float red[32];
    const int h = blockIdx.x, bs = blockIdx.y, cand = cand_of(p, p.b0 + bs);
    if (cand <= p.k || p.flag[p.b0 + bs]) return;
    const int     nt   = (cand + kTT - 1) / kTT;
    const float2 *part = p.part + (size_t)bs * p.n_tiles * p.n_head + h;
    float         m    = -INFINITY;
    for (int i = threadIdx.x; i < nt; i += blockDim.x) m = fmaxf(m, part[(size_t)i * p.n_head].x);
    m = warp_max(m);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = -INFINITY;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) m = fmaxf(m, red[i]);
    float z = 0.0f;
    for (int i = threadIdx.x; i < nt; i += blockDim.x) {
        const float2 pr = part[(size_t)i * p.n_head];
        if (pr.y > 0.0f) z += pr.y * expf(pr.x - m);
    }
    z = block_sum(z, red);
    if (threadIdx.x == 0) p.mz[(size_t)bs * p.n_head + h] = make_float2(m, z);
}

// The histogram of a CTA (shared) into the block's global one, then the last CTA of the pass
// finds the bin of the krem-th largest key and updates the select state of slot bs.
__device__ void hist_finish(const ts_params &p, int bs, int pass, uint32_t *hs, int *scan_smem) {
    uint32_t *gh = p.hist + (size_t)bs * 3 * kBins; // region 0 of the slot
    __syncthreads();
    for (int i = threadIdx.x; i < kBins; i += blockDim.x)
        if (hs[i]) atomicAdd(gh + i, hs[i]);
    __threadfence();
    __syncthreads();
    __shared__ int s_last;
    if (threadIdx.x == 0) s_last = atomicAdd(p.done + bs * 4 + pass, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const uint2 st     = pass == 0 ? make_uint2(0u, (uint32_t)p.k) : p.sel[bs];
    const int   shift  = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const int   per    = kBins / blockDim.x; // bins per thread, thread 0 the highest
    int         local  = 0;
    for (int j = 0; j < per; j++) local += (int)__ldcg(gh + (kBins - 1 - per * threadIdx.x - j));
    int       total;
    int       above = block_excl_scan(local, &total, scan_smem);
    const int krem  = (int)st.y;
    for (int j = 0; j < per; j++) {
        const int bin = kBins - 1 - per * threadIdx.x - j;
        const int c   = (int)__ldcg(gh + bin);
        if (above < krem && above + c >= krem)
            p.sel[bs] = make_uint2(st.x | ((uint32_t)bin << shift), (uint32_t)(krem - above));
        above += c;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) gh[i] = 0u;
    if (threadIdx.x == 0) p.done[bs * 4 + pass] = 0u;
}

// ---- 4: soft vote + radix pass 0 ----
__global__ void __launch_bounds__(kThreads) ts_vote_kernel(ts_params p) {
    const int bs = blockIdx.y, cand = cand_of(p, p.b0 + bs);
    if (cand <= p.k || p.flag[p.b0 + bs]) return;
    __shared__ uint32_t hs[kBins];
    __shared__ int      scan_smem[32];
    extern __shared__ float2 mz_s[]; // [n_head] (m, Z)
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) hs[i] = 0u;
    for (int h = threadIdx.x; h < p.n_head; h += blockDim.x) mz_s[h] = p.mz[(size_t)bs * p.n_head + h];
    __syncthreads();
    const float *lg = p.logit + (size_t)bs * p.n_head * p.max_cand;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < cand; t += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int h = 0; h < p.n_head; h++) {
            const float2 mz = mz_s[h];
            s += expf(lg[(size_t)h * p.max_cand + t] - mz.x) / mz.y;
        }
        p.score[(size_t)bs * p.max_cand + t] = s;
        atomicAdd(&hs[score_key(s) >> 21], 1u);
    }
    hist_finish(p, bs, 0, hs, scan_smem);
}

// ---- 5, 6: radix passes 1 and 2 ----
__global__ void __launch_bounds__(kThreads) ts_hist_kernel(ts_params p, int pass) {
    const int bs = blockIdx.y, cand = cand_of(p, p.b0 + bs);
    if (cand <= p.k || p.flag[p.b0 + bs]) return;
    __shared__ uint32_t hs[kBins];
    __shared__ int      scan_smem[32];
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) hs[i] = 0u;
    __syncthreads();
    const uint32_t prefix = p.sel[bs].x;
    const uint32_t mask   = pass == 1 ? 0xffe00000u : 0xfffffc00u;
    const int      shift  = pass == 1 ? 10 : 0;
    const uint32_t bm     = pass == 1 ? 2047u : 1023u;
    const float   *sc     = p.score + (size_t)bs * p.max_cand;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < cand; t += gridDim.x * blockDim.x) {
        const uint32_t key = score_key(sc[t]);
        if ((key & mask) == prefix) atomicAdd(&hs[(key >> shift) & bm], 1u);
    }
    hist_finish(p, bs, pass, hs, scan_smem);
}

// ---- 7: per-chunk counts; the last CTA turns them into output offsets ----
__global__ void __launch_bounds__(kThreads) ts_count_kernel(ts_params p) {
    const int bs = blockIdx.y, cand = cand_of(p, p.b0 + bs);
    if (cand <= p.k || p.flag[p.b0 + bs]) return;
    __shared__ int scan_smem[32];
    __shared__ int s_last;
    const uint2    st = p.sel[bs];
    const int      c  = blockIdx.x, t0 = c * p.ch_len, t1 = min(cand, t0 + p.ch_len);
    const float   *sc = p.score + (size_t)bs * p.max_cand;
    int            gt = 0, eq = 0;
    for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
        const uint32_t key = score_key(sc[t]);
        gt += key > st.x, eq += key == st.x;
    }
    int tot_gt, tot_eq;
    block_excl_scan(gt, &tot_gt, scan_smem);
    block_excl_scan(eq, &tot_eq, scan_smem);
    int4 *ch = p.chunk + (size_t)bs * p.nch;
    if (threadIdx.x == 0) ch[c] = make_int4(tot_gt, tot_eq, 0, 0);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(p.done + bs * 4 + 3, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const int krem = (int)st.y;
    int       cgt = 0, ceq = 0; // carried over the previous rounds
    for (int i0 = 0; i0 < p.nch; i0 += blockDim.x) {
        const int i = i0 + threadIdx.x;
        int4      v = make_int4(0, 0, 0, 0);
        if (i < p.nch) {
            const int *src = (const int *)(ch + i);
            v.x = __ldcg(src), v.y = __ldcg(src + 1);
        }
        int       sg, se;
        const int bg = block_excl_scan(v.x, &sg, scan_smem);
        const int be = block_excl_scan(v.y, &se, scan_smem);
        if (i < p.nch) {
            const int eqb = ceq + be;
            ch[i]         = make_int4(v.x, v.y, cgt + bg + min(eqb, krem), eqb);
        }
        cgt += sg, ceq += se;
    }
    if (threadIdx.x == 0) p.done[bs * 4 + 3] = 0u;
}

// ---- 8: the selected positions, in order ----
// The positions of block slot bs's candidates [t0, t1) that pass the threshold (key > T, or
// == T among the first krem ties), written to the list from run_out on; run_eq: ties before t0.
// Scores are read through L2 (__ldcg), as the fused kernel needs for scores other CTAs wrote.
__device__ void collect_chunk(const ts_params &p, int bs, int t0, int t1, uint2 st, int run_eq,
                              int run_out, int *scan_smem) {
    const int    krem = (int)st.y;
    const float *sc   = p.score + (size_t)bs * p.max_cand;
    int32_t     *list = p.list + (size_t)bs * p.list_cap;
    for (int s0 = t0; s0 < t1; s0 += blockDim.x) {
        const int      t     = s0 + threadIdx.x;
        const uint32_t key   = t < t1 ? score_key(__ldcg(sc + t)) : 0u;
        const int      is_eq = t < t1 && key == st.x, is_gt = t < t1 && key > st.x;
        int            n_eq, n_sel;
        const int      er  = run_eq + block_excl_scan(is_eq, &n_eq, scan_smem);
        const int      sel = is_gt || (is_eq && er < krem);
        const int      at  = run_out + block_excl_scan(sel, &n_sel, scan_smem);
        if (sel && at < p.list_cap) list[at] = p.n_init + t;
        run_eq += n_eq, run_out += n_sel;
    }
}

__global__ void __launch_bounds__(kThreads) ts_collect_kernel(ts_params p) {
    const int bs = blockIdx.y, cand = cand_of(p, p.b0 + bs);
    if (cand <= p.k || p.flag[p.b0 + bs]) return;
    __shared__ int scan_smem[32];
    const int      c  = blockIdx.x, t0 = c * p.ch_len, t1 = min(cand, t0 + p.ch_len);
    const int4     ch = p.chunk[(size_t)bs * p.nch + c];
    collect_chunk(p, bs, t0, t1, p.sel[bs], ch.w, ch.z, scan_smem);
}

// ---- 9: maximal runs ----
__global__ void __launch_bounds__(1024) ts_seg_kernel(ts_params p) {
    __shared__ int scan_smem[32];
    const int      bs = blockIdx.x, b = p.b0 + bs, cand = cand_of(p, b);
    if (p.flag[b]) return;
    const int      slot = slot_of(p, b);
    lc_segment    *out  = p.out + (size_t)slot * p.out_cap;
    if (cand <= p.k) {
        if (threadIdx.x == 0) {
            if (cand > 0) out[0] = lc_segment{p.n_init, cand};
            p.out_n[slot] = cand > 0 ? 1 : 0;
        }
        return;
    }
    const int32_t *list = p.list + (size_t)bs * p.list_cap;
    const int      n    = p.k;
    int            nseg = 0;
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        const int i     = i0 + threadIdx.x;
        const int tok   = i < n ? list[i] : 0;
        const int start = i < n && (i == 0 || list[i - 1] != tok - 1);
        const int end   = i < n && (i == n - 1 || list[i + 1] != tok + 1);
        int       ns;
        const int s = nseg + block_excl_scan(start, &ns, scan_smem) + start - 1;
        if (start && s < p.out_cap) out[s].start = tok;
        if (end && s >= 0 && s < p.out_cap) out[s].len = tok + 1; // the end, made a length below
        nseg += ns;
    }
    __threadfence_block();
    __syncthreads();
    for (int s = threadIdx.x; s < nseg && s < p.out_cap; s += blockDim.x) out[s].len -= out[s].start;
    if (threadIdx.x == 0) p.out_n[slot] = nseg < p.out_cap ? nseg : p.out_cap;
}

// ---- the fused path (calls of few blocks: decode, short prefill chunks) ----
// One cooperative persistent kernel (every CTA co-resident, grid-wide barriers between the
// phases) instead of kernels 3-9, optionally with the logits (FIRST 1) and the fingerprints +
// cache decision (FIRST 0) in it too: a cached decode step then costs 3, 2 or 1 early-returning
// launches instead of 9 (the host's launch cost was the whole hit step). The phases compute
// every value exactly as the kernels above (same per-element arithmetic and order, integer
// histograms and counts), so both paths give the same bytes. The state between phases: the
// three radix passes' histograms in separate slot regions (zeroed in the first phase), the
// threshold state in each CTA's shared memory (every CTA finds the bin itself from the global
// histogram: no extra barrier), the chunk offsets summed by the CTA that collects the chunk.
constexpr int kMaxFused      = 8; // blocks per group of the fused kernel
constexpr int kFusedLaunches = 1; // launches of a fused call by default (1, 2 or 3; H100: 1 is best)

__device__ __forceinline__ uint32_t *hist_of(const ts_params &p, int bs, int pass) {
    return p.hist + ((size_t)bs * 3 + pass) * kBins;
}

// The bin of the krem-th largest key of pass `pass` of slot bs (as hist_finish), into s_sel[bs].
__device__ void fused_find_bin(const ts_params &p, int bs, int pass, uint2 *s_sel, int *scan_smem) {
    const uint32_t *gh    = hist_of(p, bs, pass);
    const uint2     st    = pass == 0 ? make_uint2(0u, (uint32_t)p.k) : s_sel[bs];
    const int       shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const int       per   = kBins / blockDim.x;
    int             local = 0;
    for (int j = 0; j < per; j++) local += (int)__ldcg(gh + (kBins - 1 - per * threadIdx.x - j));
    int       total;
    int       above = block_excl_scan(local, &total, scan_smem); // (its barriers order st's reads)
    const int krem  = (int)st.y;
    for (int j = 0; j < per; j++) {
        const int bin = kBins - 1 - per * threadIdx.x - j;
        const int c   = (int)__ldcg(gh + bin);
        if (above < krem && above + c >= krem)
            s_sel[bs] = make_uint2(st.x | ((uint32_t)bin << shift), (uint32_t)(krem - above));
        above += c;
    }
    __syncthreads();
}

// The CTA's shared histogram into the slot's global one for pass `pass`, then cleared.
__device__ __forceinline__ void fused_flush(const ts_params &p, int bs, int pass, uint32_t *hs) {
    __syncthreads();
    uint32_t *gh = hist_of(p, bs, pass);
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) {
        const uint32_t v = hs[i];
        if (v) atomicAdd(gh + i, v), hs[i] = 0u;
    }
    __syncthreads();
}

// FIRST 0: fingerprints + cache decision, logits, selection; 1: logits, selection; 2: selection.
// grid: co-resident CTAs of kThreads (cooperative launch); nbg <= kMaxFused blocks from p.b0.
template <int D, int GM, int FIRST>
__global__ void __launch_bounds__(kThreads, FIRST == 2 ? 4 : (GM <= 4 ? 2 : 1))
    ts_fused_kernel(ts_params p, int nbg) {
    namespace cg = cooperative_groups;
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float smem[];
    __shared__ uint2  s_sel[kMaxFused];
    __shared__ int    scan_smem[32];
    __shared__ float  red[32];
    __shared__ double dred[32];
    __shared__ int    s_hit;
    const int tid = threadIdx.x, nct = gridDim.x;
    const int gtid = blockIdx.x * blockDim.x + tid, gthreads = nct * blockDim.x;

    if constexpr (FIRST == 0) {
        // fingerprints (as ts_fp_kernel), spread over the grid; with the cache (one block) each
        // CTA that has some also sums its share of f·c, |f|², |c|² into cosp[CTA] (read after
        // the barrier by every CTA in the same order: the same decision everywhere)
        if (p.cache_q) {
            const lc_qblock q   = p.qb[0];
            const int           n   = q.n_rows < 1 ? 1 : (q.n_rows > p.max_rows ? p.max_rows : q.n_rows);
            const float         inv = 1.0f / (float)n;
            const int           nf  = p.n_head * D;
            if (tid == 0) s_hit = p.cache_valid[slot_of(p, 0)]; // read before CTA 0 may set it (after the barrier)
            if (blockIdx.x * blockDim.x < nf) {   // uniform over the CTA
                double dot = 0.0, n1 = 0.0, n2 = 0.0;
                for (int i = gtid; i < nf; i += gthreads) {
                    const int h = i / D, d = i % D;
                    float     acc = 0.0f;
                    for (int r = 0; r < n; r++)
                        acc += rot_elem(p.q_raw + ((size_t)(q.row0 + r) * p.n_head + h) * D, d,
                                        clamp_pos(p.fp_pos + r, p.n_pos), p);
                    const float  f = acc * inv;
                    const double c = p.cache_q[(size_t)slot_of(p, 0) * nf + i];
                    p.fp[i]        = f;
                    dot += (double)f * c, n1 += (double)f * f, n2 += c * c;
                }
                dot = block_sum(dot, dred);
                n1  = block_sum(n1, dred);
                n2  = block_sum(n2, dred);
                if (tid == 0) {
                    double *cp = p.cosp + 4 * blockIdx.x;
                    cp[0] = dot, cp[1] = n1, cp[2] = n2;
                }
            }
        } else {
            const int per_b = p.n_head * D, ne = nbg * per_b;
            for (int e = gtid; e < ne; e += gthreads) {
                const int           b = p.b0 + e / per_b, h = (e % per_b) / D, d = e % D;
                const lc_qblock q = p.qb[b];
                const int   n   = q.n_rows < 1 ? 1 : (q.n_rows > p.max_rows ? p.max_rows : q.n_rows);
                float       acc = 0.0f;
                for (int r = 0; r < n; r++)
                    acc += rot_elem(p.q_raw + ((size_t)(q.row0 + r) * p.n_head + h) * D, d,
                                    clamp_pos(p.fp_pos + r, p.n_pos), p);
                p.fp[((size_t)b * p.n_head + h) * D + d] = acc * (1.0f / (float)n);
            }
            if (gtid == 0) *p.flag = 0;
        }
    } else {
        if (*p.flag) return; // a cache hit: nothing to do
    }
    // the three histograms of the group's slots start at zero (written after the next barrier)
    for (int i = gtid; i < nbg * 3 * kBins; i += gthreads) p.hist[i] = 0u;
    bool any = false; // a block of the group has more candidates than k (uniform)
    for (int bs = 0; bs < nbg; bs++) any |= cand_of(p, p.b0 + bs) > p.k;
    if constexpr (FIRST == 0) {
        grid.sync();
        if (p.cache_q) { // the cache decision (as ts_fp_kernel), made alike by every CTA
            const int nf = p.n_head * D, ncp = min(nct, (nf + (int)blockDim.x - 1) / (int)blockDim.x);
            __syncthreads();
            if (tid == 0) {
                double dot = 0.0, n1 = 0.0, n2 = 0.0;
                for (int c = 0; c < ncp; c++) {
                    dot += __ldcg(p.cosp + 4 * c), n1 += __ldcg(p.cosp + 4 * c + 1);
                    n2 += __ldcg(p.cosp + 4 * c + 2);
                }
                const double c   = n1 > 0.0 && n2 > 0.0 ? dot / sqrt(n1 * n2) : 0.0;
                const int    hit = s_hit != 0 && c >= (double)p.theta;
                s_hit            = hit;
                if (blockIdx.x == 0) {
                    *p.flag = hit;
                    if (p.counts) p.counts[hit ? 0 : 1] += 1;
                    if (!hit) p.cache_valid[slot_of(p, 0)] = 1;
                }
            }
            __syncthreads();
            if (s_hit) return;
            // a miss: cache_q = f (every CTA read its share of cache_q before the barrier)
            float *cq = p.cache_q + (size_t)slot_of(p, 0) * nf;
            for (int i = gtid; i < nf; i += gthreads) cq[i] = __ldcg(p.fp + i);
        }
    }
    if (any) {
        if constexpr (FIRST <= 1) {
            logits_phase<D, GM>(p, nbg, smem, false);
            grid.sync();
        }
        // m_h, Z_h (as ts_reduce_kernel) per (block, head) item
        for (int it = blockIdx.x; it < nbg * p.n_head; it += nct) {
            const int bs = it / p.n_head, h = it % p.n_head, cand = cand_of(p, p.b0 + bs);
            if (cand <= p.k) continue;
            const int     nt   = (cand + kTT - 1) / kTT;
            const float2 *part = p.part + (size_t)bs * p.n_tiles * p.n_head + h;
            float         m    = -INFINITY;
            for (int i = tid; i < nt; i += blockDim.x) m = fmaxf(m, __ldcg(&part[(size_t)i * p.n_head].x));
            m = warp_max(m);
            __syncthreads();
            if ((tid & 31) == 0) red[tid >> 5] = m;
            __syncthreads();
            m = -INFINITY;
            for (int i = 0; i < (int)(blockDim.x >> 5); i++) m = fmaxf(m, red[i]);
            float z = 0.0f;
            for (int i = tid; i < nt; i += blockDim.x) {
                const float2 pr = __ldcg(&part[(size_t)i * p.n_head]);
                if (pr.y > 0.0f) z += pr.y * expf(pr.x - m);
            }
            z = block_sum(z, red);
            if (tid == 0) p.mz[(size_t)bs * p.n_head + h] = make_float2(m, z);
        }
        grid.sync();
        uint32_t *hs   = (uint32_t *)smem;           // [kBins]
        float2   *mz_s = (float2 *)(smem + kBins);   // [n_head]
        for (int i = tid; i < kBins; i += blockDim.x) hs[i] = 0u;
        // soft vote + radix pass 0 (as ts_vote_kernel; 8 heads' logits loaded at once)
        for (int bs = 0; bs < nbg; bs++) {
            const int cand = cand_of(p, p.b0 + bs);
            if (cand <= p.k) continue;
            __syncthreads();
            for (int h = tid; h < p.n_head; h += blockDim.x) mz_s[h] = __ldcg(p.mz + (size_t)bs * p.n_head + h);
            __syncthreads();
            const float *lg = p.logit + (size_t)bs * p.n_head * p.max_cand;
            for (int t = gtid; t < cand; t += gthreads) {
                float s = 0.0f;
                int   h = 0;
                for (; h + 8 <= p.n_head; h += 8) {
                    float v[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) v[j] = __ldcg(lg + (size_t)(h + j) * p.max_cand + t);
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        const float2 mz = mz_s[h + j];
                        s += expf(v[j] - mz.x) / mz.y;
                    }
                }
                for (; h < p.n_head; h++) {
                    const float2 mz = mz_s[h];
                    s += expf(__ldcg(lg + (size_t)h * p.max_cand + t) - mz.x) / mz.y;
                }
                p.score[(size_t)bs * p.max_cand + t] = s;
                atomicAdd(&hs[score_key(s) >> 21], 1u);
            }
            fused_flush(p, bs, 0, hs);
        }
        grid.sync();
        for (int bs = 0; bs < nbg; bs++)
            if (cand_of(p, p.b0 + bs) > p.k) fused_find_bin(p, bs, 0, s_sel, scan_smem);
        // radix passes 1 and 2 (as ts_hist_kernel; this thread's candidates as in the vote)
        for (int pass = 1; pass < 3; pass++) {
            const uint32_t mask  = pass == 1 ? 0xffe00000u : 0xfffffc00u;
            const int      shift = pass == 1 ? 10 : 0;
            const uint32_t bm    = pass == 1 ? 2047u : 1023u;
            for (int bs = 0; bs < nbg; bs++) {
                const int cand = cand_of(p, p.b0 + bs);
                if (cand <= p.k) continue;
                const uint32_t prefix = s_sel[bs].x;
                const float   *sc     = p.score + (size_t)bs * p.max_cand;
                for (int t = gtid; t < cand; t += gthreads) {
                    const uint32_t key = score_key(sc[t]);
                    if ((key & mask) == prefix) atomicAdd(&hs[(key >> shift) & bm], 1u);
                }
                fused_flush(p, bs, pass, hs);
            }
            grid.sync();
            for (int bs = 0; bs < nbg; bs++)
                if (cand_of(p, p.b0 + bs) > p.k) fused_find_bin(p, bs, pass, s_sel, scan_smem);
        }
        // per-chunk counts (as ts_count_kernel), then each chunk's offsets summed by its collector
        for (int it = blockIdx.x; it < nbg * p.nch; it += nct) {
            const int bs = it / p.nch, c = it % p.nch, cand = cand_of(p, p.b0 + bs);
            if (cand <= p.k) continue;
            const uint2  st = s_sel[bs];
            const int    t0 = c * p.ch_len, t1 = min(cand, t0 + p.ch_len);
            const float *sc = p.score + (size_t)bs * p.max_cand;
            int          gt = 0, eq = 0;
            for (int t = t0 + tid; t < t1; t += blockDim.x) {
                const uint32_t key = score_key(__ldcg(sc + t));
                gt += key > st.x, eq += key == st.x;
            }
            gt = block_sum(gt, scan_smem);
            eq = block_sum(eq, scan_smem);
            if (tid == 0) p.chunk[(size_t)bs * p.nch + c] = make_int4(gt, eq, 0, 0);
        }
        grid.sync();
        for (int it = blockIdx.x; it < nbg * p.nch; it += nct) {
            const int bs = it / p.nch, c = it % p.nch, cand = cand_of(p, p.b0 + bs);
            if (cand <= p.k) continue;
            const int4 *ch = p.chunk + (size_t)bs * p.nch;
            int         gb = 0, eb = 0; // counts of the chunks before c
            for (int i = tid; i < c; i += blockDim.x) {
                const int *src = (const int *)(ch + i);
                gb += __ldcg(src), eb += __ldcg(src + 1);
            }
            gb = block_sum(gb, scan_smem);
            eb = block_sum(eb, scan_smem);
            // the selected positions of chunk c, in order (as ts_collect_kernel)
            const uint2 st = s_sel[bs];
            collect_chunk(p, bs, c * p.ch_len, min(cand, (c + 1) * p.ch_len), st, eb,
                          gb + min(eb, (int)st.y), scan_smem);
        }
        grid.sync();
    }
    // segments (as ts_seg_kernel): one CTA per block, each thread a contiguous share of the list
    for (int bs = blockIdx.x; bs < nbg; bs += nct) {
        const int   b = p.b0 + bs, cand = cand_of(p, b), slot = slot_of(p, b);
        lc_segment *out = p.out + (size_t)slot * p.out_cap;
        if (cand <= p.k) {
            if (tid == 0) {
                if (cand > 0) out[0] = lc_segment{p.n_init, cand};
                p.out_n[slot] = cand > 0 ? 1 : 0;
            }
            continue;
        }
        const int32_t *list = p.list + (size_t)bs * p.list_cap;
        const int      n = p.k, per = (n + blockDim.x - 1) / blockDim.x;
        const int      i0 = min(n, tid * per), i1 = min(n, i0 + per);
        int            starts = 0;
        for (int i = i0; i < i1; i++) starts += i == 0 || __ldcg(list + i - 1) != __ldcg(list + i) - 1;
        int       nseg;
        int       s = block_excl_scan(starts, &nseg, scan_smem) - 1; // segment of entry i0 - 1
        for (int i = i0; i < i1; i++) {
            const int tok   = __ldcg(list + i);
            const int start = i == 0 || __ldcg(list + i - 1) != tok - 1;
            const int end   = i == n - 1 || __ldcg(list + i + 1) != tok + 1;
            s += start;
            if (start && s < p.out_cap) out[s].start = tok;
            if (end && s >= 0 && s < p.out_cap) out[s].len = tok + 1; // the end, made a length below
        }
        __threadfence_block();
        __syncthreads();
        for (int j = tid; j < nseg && j < p.out_cap; j += blockDim.x) out[j].len -= out[j].start;
        if (tid == 0) p.out_n[slot] = nseg < p.out_cap ? nseg : p.out_cap;
        __syncthreads();
    }
}

struct layout {
    int32_t nb, n_tiles, nch, ch_len, list_cap;
    size_t  off[12], total;
};

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// Scratch plan: fp of every block, then NB slots of the per-block buffers.
void plan(int32_t n_qb, int32_t n_head, int32_t D, const lc_select_tokens_args *a,
          const lc_tuning *tune, layout *L) {
    const int64_t mc = a->max_cand > 0 ? a->max_cand : 1;
    L->n_tiles  = (int32_t)((mc + kTT - 1) / kTT);
    L->nch      = (int32_t)((mc + 4095) / 4096);
    if (L->nch > 1024) L->nch = 1024;
    L->ch_len   = (int32_t)(((mc + L->nch - 1) / L->nch + 255) / 256 * 256);
    L->list_cap = a->k < mc ? a->k : (int32_t)mc;
    const size_t per = align256(sizeof(float) * (size_t)n_head * mc) +
                       align256(sizeof(float2) * (size_t)L->n_tiles * n_head) +
                       align256(sizeof(float2) * (size_t)n_head) + align256(sizeof(float) * mc) +
                       align256(sizeof(uint32_t) * 3 * kBins) + align256(16) + align256(8) +
                       align256(sizeof(int4) * (size_t)L->nch) + align256(sizeof(int32_t) * L->list_cap);
    int64_t nb = (int64_t)(kBudget / per);
    if (nb < 1) nb = 1;
    if (nb > n_qb) nb = n_qb;
    if (tune->ts_select_group > 0 && tune->ts_select_group < nb) nb = tune->ts_select_group;
    L->nb = (int32_t)(nb > 0 ? nb : 1);
    const size_t sz[12] = {sizeof(float) * (size_t)n_qb * n_head * D, sizeof(int32_t) * (size_t)n_qb,
                           sizeof(float) * (size_t)L->nb * n_head * mc,
                           sizeof(float2) * (size_t)L->nb * L->n_tiles * n_head,
                           sizeof(float2) * (size_t)L->nb * n_head,
                           sizeof(float) * (size_t)L->nb * mc,
                           sizeof(uint32_t) * 3 * (size_t)L->nb * kBins,
                           sizeof(uint32_t) * 4 * (size_t)L->nb,
                           sizeof(uint2) * (size_t)L->nb,
                           sizeof(int4) * (size_t)L->nb * L->nch,
                           sizeof(int32_t) * (size_t)L->nb * L->list_cap,
                           4 * sizeof(double) * (size_t)((n_head * D + kThreads - 1) / kThreads)};
    size_t o = 0;
    for (int i = 0; i < 12; i++) L->off[i] = o, o += align256(sz[i] ? sz[i] : 1);
    L->total = o;
}

template <int D, int GM> int launch_logits(const ts_params &p, int nbg, int grid, size_t smem) {
    static size_t set = 0;
    if (smem > 48 * 1024 && smem > set) {
        LC_CUDA_TRY(cudaFuncSetAttribute(ts_logits_kernel<D, GM>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        set = smem;
    }
    ts_logits_kernel<D, GM><<<grid, kThreads, smem, lc_cuda_stream()>>>(p, nbg);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

// The fused kernel as a cooperative launch over at most `need` co-resident CTAs (a few per SM).
template <int D, int GM, int FIRST> int launch_fused(const ts_params &p, int nbg, int64_t need, size_t smem) {
    static size_t set = 0, occ_smem = 0;
    static int    occ = 0;
    const void   *fn  = (const void *)ts_fused_kernel<D, GM, FIRST>;
    if (smem > 48 * 1024 && smem > set) {
        LC_CUDA_TRY(cudaFuncSetAttribute(ts_fused_kernel<D, GM, FIRST>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        set = smem;
    }
    if (occ == 0 || occ_smem != smem) {
        LC_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, ts_fused_kernel<D, GM, FIRST>,
                                                                  kThreads, smem));
        occ_smem = smem;
    }
    if (occ < 1) return lc_fail(LC_ERR_UNSUPPORTED, "select_tokens: the fused kernel does not fit an SM");
    int64_t grid = (int64_t)(occ < 4 ? occ : 4) * lc_cuda_sm_count();
    if (grid > need) grid = need;
    if (grid < 1) grid = 1;
    ts_params pp  = p;
    int       nb  = nbg;
    void     *args[2] = {&pp, &nb};
    LC_CUDA_TRY(cudaLaunchCooperativeKernel(fn, dim3((unsigned)grid), dim3(kThreads), args, smem,
                                            lc_cuda_stream()));
    return LC_OK;
}

// Cooperative launches on this device (cached).
bool coop_ok(void) {
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, v = 0;
        ok = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess && v;
        (void)cudaGetLastError();
    }
    return ok != 0;
}

// Largest opt-in shared memory per CTA (cached).
int smem_optin(void) {
    static int n = -1;
    if (n < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            v = 48 * 1024;
        (void)cudaGetLastError();
        n = v;
    }
    return n;
}

} // namespace

extern "C" size_t lc_cuda_select_tokens_scratch_bytes(const lc_kv_layer_view *kv, int32_t n_qb,
                                                  int32_t n_head, const lc_select_tokens_args *a,
                                                  const lc_tuning *tune) {
    if (!kv || !a || !tune || n_qb <= 0 || n_head <= 0 || kv->head_dim <= 0 || a->k < 1)
        return 0;
    layout L;
    plan(n_qb, n_head, kv->head_dim, a, tune, &L);
    return L.total;
}

extern "C" int lc_cuda_select_tokens(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                 const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                                 int32_t n_head, const lc_rope_table *rope,
                                 const lc_select_tokens_args *a, const lc_tuning *tune, void *scratch,
                                 size_t scratch_bytes) {
    const int st0 = lc_select_tokens_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st0 != LC_OK) return st0;
    if (!tune) return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: no tuning");
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size, G = n_head / H;
    if (P & (P - 1))
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: page size %d is not a power of two", P);
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "select_tokens: head dim %d on CUDA (64 or 128)", D);
    if (n_qb == 0) return LC_OK;
    layout L;
    plan(n_qb, n_head, D, a, tune, &L);
    if (!scratch || scratch_bytes < L.total)
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: scratch of %zu bytes, %zu needed",
                       scratch_bytes, L.total);
    const size_t smem_l = sizeof(float) * (size_t)n_head * (D + kTT);
    const int    optin  = smem_optin();
    if (smem_l > (size_t)optin)
        return lc_fail(LC_ERR_UNSUPPORTED, "select_tokens: %d query heads of dim %d need %zu bytes of "
                       "shared memory (%d available)", n_head, D, smem_l, optin);
    if ((int64_t)n_qb * n_head * D > 0x7fffffff || (int64_t)L.n_tiles * L.nb > 0x7fffffff)
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: %d blocks is too many", n_qb);

    ts_params p;
    memset(&p, 0, sizeof p);
    p.seqs = seqs, p.qb = qb, p.q_raw = q_raw, p.kp = (const uint16_t *)kv->k;
    p.cs = rope->cos, p.sn = rope->sin;
    p.n_head = n_head, p.H = H, p.G = G, p.D = D, p.P = P;
    while ((1 << p.p_shift) < P) p.p_shift++;
    p.n_rot = rope->n_rot, p.neox = rope->pairing == LC_ROPE_NEOX, p.n_pos = rope->n_pos;
    p.n_init = a->n_init, p.k = a->k, p.fp_pos = a->fp_pos, p.gqa_mod = a->gqa_mod;
    p.max_rows = a->max_rows, p.max_cand = a->max_cand > 0 ? a->max_cand : 1;
    p.out = a->out, p.out_n = a->out_n, p.out_cap = a->out_cap;
    p.cache_q = a->cache_q, p.cache_valid = a->cache_valid, p.theta = a->theta, p.slots = a->list;
    p.counts = (long long *)a->counts;
    char *s = (char *)scratch;
    p.fp    = (float *)(s + L.off[0]);
    p.flag  = (int32_t *)(s + L.off[1]);
    p.logit = (float *)(s + L.off[2]);
    p.part  = (float2 *)(s + L.off[3]);
    p.mz    = (float2 *)(s + L.off[4]);
    p.score = (float *)(s + L.off[5]);
    p.hist  = (uint32_t *)(s + L.off[6]);
    p.done  = (uint32_t *)(s + L.off[7]);
    p.sel   = (uint2 *)(s + L.off[8]);
    p.chunk = (int4 *)(s + L.off[9]);
    p.list  = (int32_t *)(s + L.off[10]);
    p.cosp  = (double *)(s + L.off[11]);
    p.list_cap = L.list_cap, p.n_tiles = L.n_tiles, p.nch = L.nch, p.ch_len = L.ch_len;
    p.nb_slots = L.nb;
    cudaStream_t stream = lc_cuda_stream();

    // The path: calls of at most kMaxFused blocks (decode; short prefill chunks) take the fused
    // kernel, FUSED_LAUNCHES launches in all (tuning.ts_select_launches=1|2|3 overrides);
    // tuning.ts_select_path=kernels|fused forces one path (tests, benchmarks). The fused kernel
    // decides the cache of one block only: several blocks with the cache (batched decode) take
    // the kernels, whose hit flags are per block.
    const int32_t path  = tune->ts_select_path, le = tune->ts_select_launches;
    const bool    fused = coop_ok() && path != LC_TUNE_TS_KERNELS && (!a->cache_q || n_qb == 1) &&
                       (path == LC_TUNE_TS_FUSED || n_qb <= kMaxFused);
    const int     gsz   = fused ? (L.nb < kMaxFused ? L.nb : kMaxFused) : L.nb;
    int           nlaunch = le >= 1 && le <= 3 ? le : kFusedLaunches;
    if (fused && nlaunch == 1 && gsz < n_qb) nlaunch = 2; // fingerprints in the kernel: one group only
    const int GMn = G <= 4 ? 4 : 8;

    // 1: fingerprints (one CTA for all heads with the cache, else one per block and head)
    if (!fused || nlaunch > 1) {
        const dim3 g1((unsigned)n_qb, a->cache_q ? 1u : (unsigned)n_head);
        ts_fp_kernel<<<g1, 128, 0, stream>>>(p);
        LC_CUDA_LAUNCHED();
    }

    const int sms = lc_cuda_sm_count();
    for (int32_t b0 = 0; b0 < n_qb; b0 += gsz) {
        const int nbg = n_qb - b0 < gsz ? n_qb - b0 : gsz;
        p.b0          = b0;
        // 2: logits, persistent CTAs (a few per SM)
        int64_t items = (int64_t)nbg * L.n_tiles, grid = (int64_t)sms * 4;
        if (grid > items) grid = items;
        int64_t cpb = ((int64_t)p.max_cand + 8 * kThreads - 1) / (8 * kThreads);
        int st = LC_OK;
        if (fused) {
            // CTAs worth having: the largest phase's items
            int64_t need = (int64_t)nbg * (n_head > L.nch ? n_head : L.nch);
            if ((int64_t)nbg * cpb > need) need = (int64_t)nbg * cpb;
            if (nlaunch < 3 && items > need) need = items;
            const size_t smem_s = sizeof(uint32_t) * kBins + sizeof(float2) * (size_t)n_head;
            const size_t smem_f = smem_l > smem_s ? smem_l : smem_s;
            if (nlaunch == 3) {
                st = D == 64 ? (GMn == 4 ? launch_logits<64, 4>(p, nbg, (int)grid, smem_l)
                                         : launch_logits<64, 8>(p, nbg, (int)grid, smem_l))
                             : (GMn == 4 ? launch_logits<128, 4>(p, nbg, (int)grid, smem_l)
                                         : launch_logits<128, 8>(p, nbg, (int)grid, smem_l));
                if (st == LC_OK) st = launch_fused<64, 4, 2>(p, nbg, need, smem_s);
            } else if (nlaunch == 2) {
                st = D == 64 ? (GMn == 4 ? launch_fused<64, 4, 1>(p, nbg, need, smem_f)
                                         : launch_fused<64, 8, 1>(p, nbg, need, smem_f))
                             : (GMn == 4 ? launch_fused<128, 4, 1>(p, nbg, need, smem_f)
                                         : launch_fused<128, 8, 1>(p, nbg, need, smem_f));
            } else {
                st = D == 64 ? (GMn == 4 ? launch_fused<64, 4, 0>(p, nbg, need, smem_f)
                                         : launch_fused<64, 8, 0>(p, nbg, need, smem_f))
                             : (GMn == 4 ? launch_fused<128, 4, 0>(p, nbg, need, smem_f)
                                         : launch_fused<128, 8, 0>(p, nbg, need, smem_f));
            }
            if (st != LC_OK) return st;
            continue;
        }
        if (D == 64) st = GMn == 4 ? launch_logits<64, 4>(p, nbg, (int)grid, smem_l)
                                   : launch_logits<64, 8>(p, nbg, (int)grid, smem_l);
        else st = GMn == 4 ? launch_logits<128, 4>(p, nbg, (int)grid, smem_l)
                           : launch_logits<128, 8>(p, nbg, (int)grid, smem_l);
        if (st != LC_OK) return st;
        // 3: m, Z
        ts_reduce_kernel<<<dim3((unsigned)n_head, (unsigned)nbg), kThreads, 0, stream>>>(p);
        LC_CUDA_LAUNCHED();
        // 4-6: vote and the radix passes: about 4 CTAs per SM over the group
        int64_t lim = ((int64_t)sms * 4 + nbg - 1) / nbg;
        if (cpb > lim) cpb = lim;
        if (cpb < 1) cpb = 1;
        const dim3 gv((unsigned)cpb, (unsigned)nbg);
        ts_vote_kernel<<<gv, kThreads, sizeof(float2) * (size_t)n_head, stream>>>(p);
        LC_CUDA_LAUNCHED();
        for (int pass = 1; pass < 3; pass++) {
            ts_hist_kernel<<<gv, kThreads, 0, stream>>>(p, pass);
            LC_CUDA_LAUNCHED();
        }
        // 7-8: the ordered collection over contiguous chunks
        const dim3 gc((unsigned)L.nch, (unsigned)nbg);
        ts_count_kernel<<<gc, kThreads, 0, stream>>>(p);
        LC_CUDA_LAUNCHED();
        ts_collect_kernel<<<gc, kThreads, 0, stream>>>(p);
        LC_CUDA_LAUNCHED();
        // 9: segments
        ts_seg_kernel<<<(unsigned)nbg, 1024, 0, stream>>>(p);
        LC_CUDA_LAUNCHED();
    }
    return LC_OK;
}
