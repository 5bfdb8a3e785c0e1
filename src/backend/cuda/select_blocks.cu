// select_blocks.cu — HiP hierarchical top-k mask estimation on the GPU, the twin of lc_cpu_select_blocks
// (backend/cpu/cpu_select_blocks.c; contract in backend.h, "HiP hierarchical top-k mask
// estimation"). Paper: HiP (seeds/004_b4c89dd3429c70a1.txt) §3.1–3.2, Alg. 1; digest
// spec/infinitehip-and-hip.md §1.2–1.5.
//
// Kernels on the backend's stream:
//  1. init: per (block, group) pair the trivial cases (no candidates: no segment; NB <= n_nodes:
//     the whole range) written at once and the pair marked done; else the n_nodes first nodes,
//     the branch scores cleared.
//  2. one launch per iteration (the host knows the most iterations any pair needs from
//     max_cand: ceil(log2) of the largest first node): a CTA = (pair, KV head of the group,
//     split of the pair's probes). Its query heads' sampled rows are rotated into shared memory
//     (fp32); its warps take batches of 8 probes (branch, sampled key of the branch's middle
//     block): the fp16 key rows gathered through the page table into a per-warp buffer, rotated
//     there in fp32 from the table rows (PLAIN: the key's position; RELATIVE: row 0), and dotted
//     with every query of the KV head (prefill: a lane computes 2 probes x 4 queries over all
//     dims; decode: 1 probe x 4 queries over a slice of the dims, slices reduced by shuffles;
//     the 4 queries of a lane are nquads rows apart, so a warp's shared-memory reads are
//     conflict-free). A probe's max goes to the branch's score by an
//     atomicMax on an order-preserving integer key (max over keys, heads, rows and the group's
//     KV heads). The last CTA of a pair (a counter) selects the n_nodes best branches: radix
//     select (4 passes of 8 bits, warp-aggregated histogram atomics: the scores share their
//     high bytes; plain atomics timed the same) of the n_nodes-th largest key, the ones above
//     it and, among
//     those equal to it, the lowest branches (= lowest starts: nodes are kept in start order)
//     first, compacted in start order by block scans into the next nodes; when every node is
//     one block the pair's segments are written and the pair marked done.
// All arithmetic in fp32 on the CUDA cores: the scores differ from the CPU twin's only by the
// order of the sums (~1e-6 relative), so the selections agree except at near ties.
//
// H100 (bench_select_blocks, 8B shape, block_k 2): decode 160 us (k 512) / 275 us (k 2048) at 128K,
// 220 / 415 us at 1M, the same for 1 and 8 groups: ~20 us per iteration with 256 nodes, ~47 us
// with 1024, though each iteration moves ~1 MB — the chain of dependent global loads in the
// scoring CTAs, the serial select of the last CTA and the launch gaps (not profiled yet; a
// kernel that keeps a pair's nodes on chip across iterations, e.g. a thread-block cluster per
// pair, is the next step). Prefill (32K rows in 32-row blocks, 8 groups): 67 / 151 ms at 32K,
// 115 / 318 ms at 128K, fp32 FMA-bound (~20 TFLOP/s; tensor cores not used yet).
// Limits: head_dim 64 or 128; n_nodes = k / block_k at most 2048; page size a power of two;
// the query rows of one KV head's heads in shared memory. Launch sizes (max_rows, max_cand)
// are trusted: rows past max_rows are not sampled, candidates past max_cand not considered
// (the CPU twin fails there); positions outside the RoPE table are clamped.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr unsigned kFull     = 0xffffffffu;
constexpr int      kThreads  = 256;
constexpr int      kWarps    = kThreads / 32;
constexpr int      kBatch    = 8; // probes per warp batch
constexpr int      kMaxNodes = 2048;

struct mask_params {
    const lc_attn_seq   *seqs;
    const lc_qblock *qb;
    const float         *q_raw; // [rows][n_head][D]
    const uint16_t      *k;     // [n_pages][H][P][D] fp16 (lc_kv16)
    const float         *cs, *sn;
    int32_t              n_head, G, H, p_shift, n_pos, n_rot, neox;
    int32_t              block_k, q_stride, k_stride, n_sink, n_stream, mode, n_groups;
    int32_t              max_nsr, max_cand, out_cap, n_nodes, n_br, nks, kpg, ctas_per_pair;
    int32_t              per_split, q_floats;
    lc_segment          *out;
    const int32_t       *list; // [n_qb] or NULL: block b's out lists at list[b] (backend.h)
    const int32_t       *from; // [n_qb] or NULL: block b computed only where from[b] <= 0
    int32_t             *out_n;
    int2                *nodes;  // [n_pairs][n_nodes] blocks [f, l), in start order
    uint32_t            *bscore; // [n_pairs][n_br] score keys of this iteration's branches
    int32_t             *cnt;    // [n_pairs] CTAs done in this iteration
    int32_t             *done;   // [n_pairs]
};

__device__ __forceinline__ uint32_t score_key(float s) {
    if (isnan(s)) s = -INFINITY;
    const uint32_t u = __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Candidates of block q, capped at max_cand.
__device__ __forceinline__ int pair_cand(const mask_params &p, const lc_qblock &q) {
    int64_t cand = (int64_t)q.win0 - p.n_sink;
    if (cand > p.max_cand) cand = p.max_cand;
    return cand > 0 ? (int)cand : 0;
}

// Branch beta of node list nd: blocks [f, l); false when the branch does not exist.
__device__ __forceinline__ bool branch_of(const int2 *nd, int beta, int *f, int *l) {
    const int2 n = nd[beta >> 1];
    if (n.y - n.x >= 2) {
        const int m = n.x + (n.y - n.x) / 2;
        *f = (beta & 1) ? m : n.x;
        *l = (beta & 1) ? n.y : m;
        return true;
    }
    *f = n.x, *l = n.y;
    return !(beta & 1);
}

// Pair bg's index in the out lists (p.list).
__device__ __forceinline__ size_t out_pair(const mask_params &p, int bg) {
    const int b = bg / p.n_groups;
    return (size_t)(p.list ? p.list[b] : b) * p.n_groups + (bg - b * p.n_groups);
}

// ---- 1. init --------------------------------------------------------------------------------
__global__ void __launch_bounds__(kThreads) hm_init_kernel(mask_params p) {
    const int           bg = blockIdx.x, b = bg / p.n_groups;
    const lc_qblock q  = p.qb[b];
    const int           cand = pair_cand(p, q);
    if (threadIdx.x == 0) p.cnt[bg] = 0;
    if (p.from && p.from[b] > 0) { // not refreshed in this call: its cached mask stands
        if (threadIdx.x == 0) p.done[bg] = 1;
        return;
    }
    if (cand == 0 || (cand + p.block_k - 1) / p.block_k <= p.n_nodes) {
        if (threadIdx.x == 0) {
            const size_t lbg = out_pair(p, bg);
            if (cand > 0) p.out[lbg * p.out_cap] = lc_segment{p.n_sink, cand};
            p.out_n[lbg] = cand > 0 ? 1 : 0;
            p.done[bg]   = 1;
        }
        return;
    }
    const int64_t NB = (cand + p.block_k - 1) / p.block_k;
    if (threadIdx.x == 0) p.done[bg] = 0;
    int2     *nd = p.nodes + (size_t)bg * p.n_nodes;
    uint32_t *sc = p.bscore + (size_t)bg * p.n_br;
    for (int j = threadIdx.x; j < p.n_nodes; j += kThreads)
        nd[j] = make_int2((int)(j * NB / p.n_nodes), (int)((j + 1) * NB / p.n_nodes));
    for (int j = threadIdx.x; j < p.n_br; j += kThreads) sc[j] = 0u;
}

// ---- 2b. select (the last CTA of a pair) ----------------------------------------------------
__device__ void select_pair(const mask_params &p, int bg, int cand, unsigned char *smem) {
    const int n_br = p.n_br, n_nodes = p.n_nodes, tid = threadIdx.x;
    uint32_t *sc   = (uint32_t *)smem;          // [n_br]
    int2     *brg  = (int2 *)(sc + n_br);       // [n_br]
    int2     *nn   = brg + n_br;                // [n_nodes]
    int      *hist = (int *)(nn + n_nodes);     // [256]
    int      *scan = hist + 256;                // [32]
    int      *info = scan + 32;                 // [4]
    int2     *nd   = p.nodes + (size_t)bg * p.n_nodes;
    uint32_t *gsc  = p.bscore + (size_t)bg * n_br;
    for (int beta = tid; beta < n_br; beta += kThreads) {
        int        f, l;
        const bool ok = branch_of(nd, beta, &f, &l);
        brg[beta]     = make_int2(f, l);
        sc[beta]      = ok ? __ldcg(gsc + beta) : 0u;
        gsc[beta]     = 0u; // cleared for the next iteration
    }
    // radix select of the n_nodes-th largest key: prefix / need
    uint32_t prefix = 0, mask = 0;
    int      need = n_nodes;
    for (int shift = 24; shift >= 0; shift -= 8) {
        radix_pass8([&](int beta) { return sc[beta]; }, n_br, prefix, mask, shift, need, hist, info);
        prefix |= (uint32_t)info[0] << shift;
        mask |= 255u << shift;
        need -= info[1]; // the keys wanted from the digit's bin
        __syncthreads();
    }
    // kept: key > prefix, or == prefix and among the first `need` such (branch order)
    constexpr int kPer = 2 * kMaxNodes / kThreads;
    const int     per  = (n_br + kThreads - 1) / kThreads, c0 = tid * per;
    int           n_eq = 0;
    for (int i = 0; i < per && i < kPer; i++)
        if (c0 + i < n_br && sc[c0 + i] == prefix) n_eq++;
    int       tot;
    int       eq_before = block_excl_scan(n_eq, &tot, scan, kWarps);
    int       n_sel     = 0;
    for (int i = 0; i < per && i < kPer; i++) {
        const int beta = c0 + i;
        if (beta >= n_br) break;
        const uint32_t s = sc[beta];
        if (s > prefix) n_sel++;
        else if (s == prefix && eq_before++ < need) n_sel++;
    }
    int at = block_excl_scan(n_sel, &tot, scan, kWarps);
    eq_before = eq_before - n_eq; // back to this thread's first equal rank
    int multi = 0;
    for (int i = 0; i < per && i < kPer; i++) {
        const int beta = c0 + i;
        if (beta >= n_br) break;
        const uint32_t s    = sc[beta];
        bool           keep = s > prefix;
        if (s == prefix) keep = eq_before++ < need;
        if (keep && at < n_nodes) {
            nn[at++] = brg[beta];
            if (brg[beta].y - brg[beta].x >= 2) multi = 1;
        }
    }
    multi = __syncthreads_or(multi);
    if (multi) {
        for (int j = tid; j < n_nodes; j += kThreads) nd[j] = nn[j];
    } else {
        const size_t lbg = out_pair(p, bg);
        lc_segment  *out = p.out + lbg * p.out_cap;
        const int    end = p.n_sink + cand;
        for (int j = tid; j < n_nodes; j += kThreads) {
            const int start = p.n_sink + nn[j].x * p.block_k;
            out[j]          = lc_segment{start, min(p.block_k, end - start)};
        }
        if (tid == 0) p.out_n[lbg] = n_nodes, p.done[bg] = 1;
    }
    if (tid == 0) p.cnt[bg] = 0;
}

// ---- 2a. one iteration: score the branches ---------------------------------------------------
template <int D> __global__ void __launch_bounds__(kThreads) hm_iter_kernel(mask_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ uint32_t wmax[kWarps][kBatch];
    __shared__ int      s_last;
    constexpr int QS = D + 4; // padded row stride (floats)
    constexpr int V  = D / 32; // raw elements per lane
    constexpr int NP = (D / 2 + 31) / 32;
    const int     bg = blockIdx.x / p.kpg, kk = blockIdx.x % p.kpg;
    if (p.done[bg]) return;
    const int           b = bg / p.n_groups, g = bg % p.n_groups;
    const int           kvh = p.n_groups == 1 ? kk : g;
    const lc_qblock q   = p.qb[b];
    const int           cand = pair_cand(p, q), win0 = p.n_sink + cand;
    const int           nsr  = min((q.n_rows + p.q_stride - 1) / p.q_stride, p.max_nsr);
    const int           nq   = p.G * nsr;
    const int           tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float              *qs = (float *)smem;              // [nq][QS]
    float              *kw = qs + p.q_floats + warp * kBatch * QS; // this warp's [kBatch][QS]
    // the sampled rows of the KV head's query heads, rotated
    for (int e = tid; e < nq * D; e += kThreads) {
        const int qi = e / D, d = e % D, gh = qi / nsr, i = qi % nsr;
        const int h = kvh * p.G + gh, row = q.row0 + i * p.q_stride;
        const int pos = clamp_pos(p.mode == LC_SCAN_PLAIN ? q.pos0 + i * p.q_stride : p.n_stream + 1, p.n_pos);
        qs[qi * QS + d] = rope_elem(p.q_raw + ((size_t)row * p.n_head + h) * D, d, pos, p.cs, p.sn, p.n_rot, p.neox);
    }
    __syncthreads();
    const int32_t *pt    = p.seqs[q.seq].page_table;
    const int2    *nd    = p.nodes + (size_t)bg * p.n_nodes;
    uint32_t      *bsc   = p.bscore + (size_t)bg * p.n_br;
    const int      total = p.n_br * p.nks;
    const int      i0 = blockIdx.y * p.per_split, i1 = min(total, i0 + p.per_split);
    const int      half = p.n_rot >> 1;
    const int      nquads = (nq + 3) >> 2, units = kBatch * nquads;
    const int      ds = units <= 8 ? 4 : (units <= 16 ? 2 : 1), lpr = 32 / ds;
    const int      rounds = (units + lpr - 1) / lpr, dlen = D / ds;
    const int      P = 1 << p.p_shift;
    for (int base = i0 + warp * kBatch; base < i1; base += kWarps * kBatch) {
        int tok[kBatch], br[kBatch];
#pragma unroll
        for (int e = 0; e < kBatch; e++) {
            tok[e] = -1, br[e] = -1;
            const int it = base + e;
            if (it >= i1) continue;
            const int beta = it / p.nks, j = it % p.nks;
            int       f, l;
            if (!branch_of(nd, beta, &f, &l)) continue;
            const int r = f + (l - f - 1) / 2, t = p.n_sink + r * p.block_k + j * p.k_stride;
            if (j * p.k_stride < p.block_k && t < win0) tok[e] = t, br[e] = beta;
        }
        // gather the raw rows and the table entries
        float raw[kBatch][V], cv[kBatch][NP], sv[kBatch][NP];
#pragma unroll
        for (int e = 0; e < kBatch; e++) {
            const int t = tok[e] < 0 ? 0 : tok[e];
            const uint16_t *row = p.k + ((((size_t)pt[tok[e] < 0 ? 0 : t >> p.p_shift] * p.H + kvh) << p.p_shift) +
                                         (t & (P - 1))) * D;
            if (tok[e] >= 0) {
                if (V == 4) {
                    const uint2 v = *(const uint2 *)(row + 4 * lane);
                    raw[e][0] = kv_lo(v.x), raw[e][1] = kv_hi(v.x);
                    raw[e][2 % V] = kv_lo(v.y), raw[e][3 % V] = kv_hi(v.y);
                } else {
                    const uint32_t v = *(const uint32_t *)(row + 2 * lane);
                    raw[e][0] = kv_lo(v), raw[e][1 % V] = kv_hi(v);
                }
            } else {
#pragma unroll
                for (int c = 0; c < V; c++) raw[e][c] = 0.0f;
            }
            const int pos = clamp_pos(p.mode == LC_SCAN_PLAIN ? t : 0, p.n_pos);
#pragma unroll
            for (int c = 0; c < NP; c++) {
                const int i = lane + 32 * c;
                cv[e][c] = 1.0f, sv[e][c] = 0.0f;
                if (tok[e] >= 0 && i < half)
                    cv[e][c] = p.cs[(size_t)pos * half + i], sv[e][c] = p.sn[(size_t)pos * half + i];
            }
        }
        __syncwarp();
#pragma unroll
        for (int e = 0; e < kBatch; e++)
#pragma unroll
            for (int c = 0; c < V; c++) kw[e * QS + V * lane + c] = raw[e][c];
        if (lane < kBatch) wmax[warp][lane] = 0u;
        __syncwarp();
        // rotate in place: pair i of probe e belongs to lane i % 32
#pragma unroll
        for (int e = 0; e < kBatch; e++)
#pragma unroll
            for (int c = 0; c < NP; c++) {
                const int i = lane + 32 * c;
                if (i < half) {
                    const int   a0 = p.neox ? i : 2 * i, a1 = p.neox ? i + half : 2 * i + 1;
                    const float x0 = kw[e * QS + a0], x1 = kw[e * QS + a1];
                    kw[e * QS + a0] = x0 * cv[e][c] - x1 * sv[e][c];
                    kw[e * QS + a1] = x0 * sv[e][c] + x1 * cv[e][c];
                }
            }
        __syncwarp();
        // dots. Quad qd = queries qd + i * nquads (i < 4; consecutive rows across lanes: no
        // bank conflicts). Many queries (prefill): a lane takes 2 probes x 1 quad over all dims;
        // few (decode): 1 probe x 1 quad over a 1/ds slice of the dims, slices reduced by shuffles.
        if (nquads >= 8) {
            const int units2 = (kBatch / 2) * nquads, rounds2 = (units2 + 31) / 32;
            for (int rnd = 0; rnd < rounds2; rnd++) {
                const int  u = rnd * 32 + lane;
                const bool valid = u < units2;
                const int  ep = u % (kBatch / 2), qd = u / (kBatch / 2);
                float      a0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, a1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (valid) {
                    const float *k0 = kw + (2 * ep) * QS, *k1 = k0 + QS;
                    const float *qp[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) qp[i] = qs + (size_t)min(qd + i * nquads, nq - 1) * QS;
#pragma unroll 2
                    for (int d = 0; d < D; d += 4) {
                        const float4 x0 = *(const float4 *)(k0 + d), x1 = *(const float4 *)(k1 + d);
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const float4 y = *(const float4 *)(qp[i] + d);
                            a0[i] += y.x * x0.x + y.y * x0.y + y.z * x0.z + y.w * x0.w;
                            a1[i] += y.x * x1.x + y.y * x1.y + y.z * x1.z + y.w * x1.w;
                        }
                    }
                }
                float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
                for (int i = 0; i < 4; i++)
                    if (qd + i * nquads < nq) m0 = fmaxf(m0, a0[i]), m1 = fmaxf(m1, a1[i]);
                if (valid) {
                    atomicMax(&wmax[warp][2 * ep], score_key(m0));
                    atomicMax(&wmax[warp][2 * ep + 1], score_key(m1));
                }
            }
        } else {
            for (int rnd = 0; rnd < rounds; rnd++) {
                const int  u = rnd * lpr + lane / ds, sl = lane % ds;
                const bool valid = u < units;
                const int  e = u % kBatch, qd = u / kBatch;
                float      acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (valid) {
                    const float *kr = kw + e * QS + sl * dlen;
                    const float *qp[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) qp[i] = qs + (size_t)min(qd + i * nquads, nq - 1) * QS + sl * dlen;
#pragma unroll 4
                    for (int d = 0; d < dlen; d += 4) {
                        const float4 kv = *(const float4 *)(kr + d);
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const float4 y = *(const float4 *)(qp[i] + d);
                            acc[i] += y.x * kv.x + y.y * kv.y + y.z * kv.z + y.w * kv.w;
                        }
                    }
                }
                for (int o = 1; o < ds; o <<= 1)
#pragma unroll
                    for (int i = 0; i < 4; i++) acc[i] += __shfl_xor_sync(kFull, acc[i], o);
                float m = -INFINITY;
#pragma unroll
                for (int i = 0; i < 4; i++)
                    if (qd + i * nquads < nq) m = fmaxf(m, acc[i]);
                if (valid && sl == 0) atomicMax(&wmax[warp][e], score_key(m));
            }
        }
        __syncwarp();
#pragma unroll
        for (int e = 0; e < kBatch; e++)
            if (lane == e && br[e] >= 0) atomicMax(bsc + br[e], wmax[warp][e]);
        __syncwarp();
    }
    // the last CTA of the pair selects
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        s_last = atomicAdd(p.cnt + bg, 1) == p.ctas_per_pair - 1;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    select_pair(p, bg, cand, smem);
}

// ---- host side -------------------------------------------------------------------------------

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// Scratch layout: offsets of nodes, bscore, cnt, done and the total.
size_t scratch_layout(int32_t n_qb, const lc_select_blocks_args *a, size_t off[4]) {
    const size_t pairs = (size_t)n_qb * (size_t)a->n_groups, nn = (size_t)(a->k / a->block_k);
    off[0] = 0;
    off[1] = align256(off[0] + pairs * nn * sizeof(int2));
    off[2] = align256(off[1] + pairs * 2 * nn * sizeof(uint32_t));
    off[3] = align256(off[2] + pairs * sizeof(int32_t));
    return align256(off[3] + pairs * sizeof(int32_t));
}

struct dev_info {
    int n_sm, smem_optin;
};
dev_info device_info(void) {
    static dev_info di = {0, 0};
    if (di.n_sm == 0) {
        int dev = 0, n = 0, o = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&o, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            n = 108, o = 163 * 1024;
        (void)cudaGetLastError();
        di = dev_info{n, o};
    }
    return di;
}

template <int D> int launch_all(const mask_params &p, int n_pairs, int n_it, dim3 grid, int smem) {
    static int configured = 0;
    if (smem > configured) {
        LC_CUDA_TRY(cudaFuncSetAttribute(hm_iter_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = smem;
    }
    cudaStream_t st = lc_cuda_stream();
    hm_init_kernel<<<(unsigned)n_pairs, kThreads, 0, st>>>(p);
    LC_CUDA_LAUNCHED();
    for (int it = 0; it < n_it; it++) {
        hm_iter_kernel<D><<<grid, kThreads, (size_t)smem, st>>>(p);
        LC_CUDA_LAUNCHED();
    }
    return LC_OK;
}

} // namespace

extern "C" size_t lc_cuda_select_blocks_scratch_bytes(const lc_kv_layer_view *kv, int32_t n_qb, int32_t n_head,
                                                 const lc_select_blocks_args *a) {
    (void)kv, (void)n_head;
    if (!a || n_qb <= 0 || a->block_k < 1 || a->k < a->block_k || a->n_groups < 1) return 0;
    size_t off[4];
    return scratch_layout(n_qb, a, off);
}

extern "C" int lc_cuda_select_blocks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                                int32_t n_head, const lc_rope_table *rope,
                                const lc_select_blocks_args *a, void *scratch, size_t scratch_bytes) {
    const int st0 = lc_select_blocks_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st0 != LC_OK) return st0;
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size;
    if (P & (P - 1))
        return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: page size %d is not a power of two", P);
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "select_blocks: head dim %d on CUDA (64 or 128)", D);
    const int32_t n_nodes = a->k / a->block_k;
    if (n_nodes > kMaxNodes)
        return lc_fail(LC_ERR_UNSUPPORTED, "select_blocks: %d nodes (k / block_k) on CUDA (at most %d)",
                       n_nodes, kMaxNodes);
    if (n_qb == 0) return LC_OK;
    size_t       off[4];
    const size_t need = scratch_layout(n_qb, a, off);
    if (!scratch || scratch_bytes < need)
        return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: scratch of %zu bytes, %zu needed",
                       scratch_bytes, need);
    if ((int64_t)n_qb * a->n_groups * (a->n_groups == 1 ? H : 1) > 0x7fffffff)
        return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: %d blocks is too many", n_qb);

    mask_params p;
    memset(&p, 0, sizeof p);
    p.seqs = seqs, p.qb = qb, p.q_raw = q_raw, p.k = (const uint16_t *)kv->k;
    p.cs = rope->cos, p.sn = rope->sin;
    p.n_head = n_head, p.G = n_head / H, p.H = H;
    p.p_shift = 0;
    while ((1 << p.p_shift) < P) p.p_shift++;
    p.n_pos = rope->n_pos, p.n_rot = rope->n_rot, p.neox = rope->pairing == LC_ROPE_NEOX;
    p.block_k = a->block_k, p.q_stride = a->q_stride, p.k_stride = a->k_stride;
    p.n_sink = a->n_sink, p.n_stream = a->n_stream, p.mode = a->scan_rope, p.n_groups = a->n_groups;
    p.max_nsr = (a->max_rows + a->q_stride - 1) / a->q_stride;
    p.max_cand = a->max_cand, p.out_cap = a->out_cap, p.n_nodes = n_nodes, p.n_br = 2 * n_nodes;
    p.nks = (a->block_k + a->k_stride - 1) / a->k_stride;
    p.kpg = a->n_groups == 1 ? H : 1;
    p.out = a->out, p.out_n = a->out_n;
    p.list = a->list, p.from = a->from;
    char *s  = (char *)scratch;
    p.nodes  = (int2 *)(s + off[0]);
    p.bscore = (uint32_t *)(s + off[1]);
    p.cnt    = (int32_t *)(s + off[2]);
    p.done   = (int32_t *)(s + off[3]);

    // shared memory: the queries and the warps' probe rows; the select reuses it
    const int64_t nq    = (int64_t)p.G * p.max_nsr;
    p.q_floats          = (int32_t)(((nq + 3) & ~(int64_t)3) * (D + 4));
    const int64_t score = ((int64_t)p.q_floats + (int64_t)kWarps * kBatch * (D + 4)) * 4;
    const int64_t sel   = (int64_t)p.n_br * 4 + (int64_t)p.n_br * 8 + (int64_t)n_nodes * 8 + (256 + 32 + 4) * 4;
    const int64_t smem  = score > sel ? score : sel;
    const dev_info di   = device_info();
    if (smem + 1024 > di.smem_optin)
        return lc_fail(LC_ERR_UNSUPPORTED, "select_blocks: %lld bytes of shared memory per block (%d "
                       "available): %lld query rows per KV head", (long long)smem, di.smem_optin,
                       (long long)nq);

    // probes of a (pair, KV head): split so that the launch has a few CTAs per SM
    const int64_t n_pairs = (int64_t)n_qb * a->n_groups, units = n_pairs * p.kpg;
    const int64_t total   = (int64_t)p.n_br * p.nks;
    const int64_t batches = (total + kBatch - 1) / kBatch;
    int64_t       splits  = (4 * (int64_t)di.n_sm + units - 1) / units;
    const int64_t useful  = (batches + kWarps - 1) / kWarps;
    if (splits > useful) splits = useful;
    if (splits < 1) splits = 1;
    int64_t per = (total + splits - 1) / splits;
    per         = (per + kBatch - 1) / kBatch * kBatch;
    splits      = (total + per - 1) / per;
    if (splits > 65535) return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: too many probes");
    p.per_split     = (int32_t)per;
    p.ctas_per_pair = (int32_t)(p.kpg * splits);

    // iterations: halvings of the largest first node down to one block
    const int64_t NB = ((int64_t)(a->max_cand > 0 ? a->max_cand : 0) + a->block_k - 1) / a->block_k;
    int           n_it = 0;
    if (NB > n_nodes)
        for (int64_t sz = (NB + n_nodes - 1) / n_nodes; sz > 1; sz = (sz + 1) / 2) n_it++;
    const dim3 grid((unsigned)units, (unsigned)splits);
    return D == 64 ? launch_all<64>(p, (int)n_pairs, n_it, grid, (int)smem)
                   : launch_all<128>(p, (int)n_pairs, n_it, grid, (int)smem);
}
