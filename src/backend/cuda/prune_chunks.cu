// prune_chunks.cu — one InfiniteHiP pruning stage on the GPU, the twin of lc_cpu_prune_chunks
// (backend/cpu/cpu_prune_chunks.c; contract in backend.h, "InfiniteHiP selection and block-sparse
// attention"). Paper: InfiniteHiP (seeds/000_ced830aa0d9eb0ea.txt) §3.1–3.2, Alg. 2–3; digest
// spec/infinitehip-and-hip.md §3.2 and §4.1. A key pool in the fp8 layout (backend.h
// LC_KV_E4M3) is read by dequant_probe_row instead of copy_probe_row (bench/NOTES.md 64).
//
// Two kernels on the backend's stream (a third for relative-RoPE decode, 2b):
//  1. prep: per (block, group) the chunk list [start, len) in rank order (the input segments
//     cut into l_c pieces by a block scan, or in the first stage [n_sink, win0) cut on its
//     grid: an optional shorter head chunk (first_offset), then l_c tokens every first_stride —
//     overlapping when the stride is below l_c, the kept ones then clipped to stay disjoint,
//     ours, not the paper's), its scores and completion counter cleared; per (block, head, m-tile of 16) the
//     pooled queries (rows rotated at the mode's query position, averaged over q_stride) as
//     mma.sync A fragments (fp16, as the keys). With RELATIVE RoPE the key
//     rotation is folded into the query, q·R(a)k = (R(a)ᵀq)·k, so two versions (a = 0 for the
//     left slot, 1 for the right) are kept and the keys go to the tensor cores exactly as the
//     pages hold them.
//  2. score + select: a unit = one (block, query head) = n_mt warps (one per m-tile, A
//     fragments in registers); a CTA is about 4 warps: the units of up to 4 query heads of one
//     KV head (small CTAs: several per SM drift apart, so one's loads overlap another's mma).
//     A unit walks its chunk ranks in waves of W = 8·S·n_mt chunks, their SelectRep descents
//     in lockstep. Each step needs one new key per chunk: step 0 probes the chunk's first key
//     f, step i the new mid; the left key of a step is the winner of the previous one, whose
//     left-slot score is already known (PLAIN / CHUNK: the slot is ignored; RELATIVE: the mid
//     is probed in both slots at once, the left one only where the descent goes on). The keys
//     of a step (and, PLAIN / CHUNK, their table rows) are gathered from the pages into shared
//     memory by cp.async (page-table entries cached per wave) — no registers held while in
//     flight — rotated there in fp32 and rounded back to fp16 (one pass shared by the
//     unit's m-tiles), and read by ldmatrix as B fragments of m16n8k16 (8 chunks × 16 queries
//     per mma). With PLAIN RoPE in a prefill-sized call the backend passes the prefill
//     sequences' keys rotated once into fp16 tiles (lc_cuda_rot_tiles, filled here first): their
//     blocks gather rotated rows, no table rows and no rotation (a probe moved 768 bytes and was
//     rotated in every unit that probed it). The max over the queries is a shuffle reduction
//     (four values per thread at once by recursive halving: 4 shuffles per pair of 8-column
//     tiles instead of 12), across m-tiles a shared-memory exchange; each
//     warp owns S tiles of 8 chunks for the descent state (kept in shared memory). A chunk's
//     score (max over the group's heads) is an atomicMax on an order-preserving integer key;
//     the last CTA to finish a (block, group) — a counter — selects its n_keep best by a
//     radix select of 8-bit passes (radix_pass8, stopping early; equal scores taken from the
//     highest rank down) over the keys staged in shared memory, and writes the kept chunks in
//     rank (= position) order with a block scan.
//  Decode-sized launches (one m-tile whose unit has at most 8 query columns: pooled rows x key
//  slots; p.tr) score transposed: 16 probe keys are the mma's A (ldmatrix from the same
//  swizzled rows) and the unit's query columns its B, so a lane gets (key, column) scores with
//  no reduction over 16 query rows of which one was valid, and 4x fewer mma. With relative
//  RoPE (keys as stored) the score stage is hip_score_dec_kernel (2b): descent state in
//  registers and two pipelined groups of probe rows a warp; with plain or chunk-indexed RoPE
//  the TR branch of hip_score_kernel. One-warp units (a decode row with one descent per KV
//  head) take several chunk ranges a CTA (p.nsub) instead of idling 3 of its 4 warps.
//
// Limits: head_dim 64 or 128; at most 256 pooled queries per block; page size a power of two.
// Launch sizes (max_rows, max_chunks, in_cap) are trusted: rows and chunks past them are
// ignored here, where the CPU twin fails; positions outside the RoPE table are clamped.
// The backend's tuning (lc_tuning): stage_one_cta (tests) puts all chunk waves of a unit in one
// CTA (and up to 4 blocks in one CTA in the first stage) and makes the select read the scores
// from global memory; stage_tiles=1|2|4 sets the tiles per warp; stage_transpose below.
// Tiles of a step: S <= 2 keep their probe positions in registers and issue their loads unrolled
// (independent address chains); relative RoPE scores two tiles per mma pass (four independent
// mma chains instead of two). H100, same run vs before (bench_prune_chunks, 32K rows): stage 3
// 13.3 -> 11.5 ms (relative), 9.5 -> 9.2 (plain); stage 2 plain 7.85 -> 7.58. Profile (ncu, H100):
// the score kernels run 16 warps per SM (limited by 128 registers and by the 16 named barriers
// a CTA reserves), issue an instruction every ~7 cycles per warp, the largest stall being fixed-
// latency dependencies (~36%); L2 throughput 48% (stage 1 at 1M) to 72% (stage 1 plain at 128K).
// Tried (H100, same run, removed): probing 2-3 descent levels per round (the candidate subtree
// of each chunk, fewer dependent round trips, more probes) made every stage slower (stage 1 at
// 1M 55 -> 88 ms with 2 levels, stage 3 10.4 -> 21.5 ms with the whole 8-key chunk in one
// round); 96-register CTAs (5 per SM) were slower (spills; the barrier limit kept 4 per SM).
// H100 (bench_prune_chunks, 8B shape, 3k preset, 32K rows at 128K), before the rotated tiles and
// the halving reduction: stages 6.2 / 9.1 / 14.3 ms with relative RoPE, 10.5 / 15.2 / 15.7 with
// plain RoPE. Stages 1-2 move ~2.6-3 TB/s of 256-byte key rows; loading each row once for the
// 4 heads of a KV head (30-44% fewer bytes, the units in lockstep) and whole 128-byte lines per
// instruction were both slower (H100, tried), more tiles per warp too. Stage 3 was bound by the
// column-max shuffles (12 per tile and step, relative RoPE: ~12 of its 15.7 ms at one warp
// shuffle per clock per SM). A short-chunk kernel (every key of a wave's 8-key chunks copied
// once for the 4 heads of a KV head in 16-warp CTAs, the descents then stepping from shared
// memory with no round trip per step) was 1.7x slower on stage 3 (H100, tried, removed).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr unsigned kFull        = 0xffffffffu;
constexpr int      kPrepThreads = 256;
constexpr int      kSelBins     = 256;            // radix select histogram (radix_pass8)
constexpr int      kSelHead     = kSelBins + 36;  // ints before the staged keys
constexpr int      kMaxWarps    = 16;             // per score CTA
constexpr int      kSelWarps    = 4;              // at least, for the select of the last CTA

struct stage_params {
    const lc_attn_seq   *seqs;
    const lc_qblock *qb;
    const float         *q_raw;   // [rows][n_head][D]
    const uint16_t      *k;       // [n_pages][H][P][D] fp16 (lc_kv16), or the fp8 layout (e8)
    const float         *kc;      // e8: the key centres [H][D] (NULL: zero)
    int32_t              e8;      // the key pool holds the fp8 layout (backend.h LC_KV_E4M3)
    const float         *cs, *sn; // [n_pos][n_rot/2]
    int32_t              n_qb, n_head, hpk, H, P, p_shift, n_pos, n_rot, neox, tab16;
    // scoring heads: per query head (n_uh = n_head, uhpk = hpk, rmul = 1) or, kv_descent, per
    // KV head (n_uh = H, uhpk = 1, rmul = hpk: its query heads' pooled rows stacked, head-major)
    int32_t              n_uh, uhpk, rmul;
    int32_t              chunk, n_keep, q_stride, n_sink, n_stream, mode, n_groups, first_offset;
    int32_t              first_stride; // first stage: chunk starts every first_stride tokens
    int32_t              max_chunks, in_cap, n_mt, n_pairs;
    // score launch: units of a CTA = nb blocks x hpc heads; S tiles of 8 chunks per warp
    int32_t              hpc, nb, n_hsub, S, cpt, ctas_per_pair, unit_bytes, tab_stride, npg;
    int32_t              smem_bytes, global_select;
    // tr: decode-sized launch (one m-tile, at most 8 query columns a unit: pooled rows x key
    // slots) scored transposed, 16 probe keys as the mma's A and the unit's query columns as B;
    // nsub: chunk ranges a CTA takes at once (units of different grid-y tiles, where a CTA
    // would otherwise hold fewer scoring warps than kSelWarps)
    int32_t              tr, nsub;
    const lc_segment    *in;
    const int32_t       *in_n;
    lc_segment          *out;
    int32_t             *out_n;
    // batched decode (backend.h): block b's lists at list[b] (NULL: b); computed only where
    // from[b] <= stage (NULL: every block), its cached output left as it is otherwise
    const int32_t       *list;
    const int32_t       *from;
    int32_t              stage;
    // plain RoPE with rotated tiles (lc_cuda_rot_tiles): units of the listed sequences read them
    const uint16_t      *rk;     // fp16 [tiles][H][64][D], tile64_off layout
    const int32_t       *rpre;
    int32_t              n_rpre;
    int32_t             *n_ch;   // [n_pairs]
    int32_t             *cnt;    // [n_pairs] score CTAs done
    int2                *chunks; // [n_pairs][max_chunks]
    uint32_t            *scores; // [n_pairs][max_chunks]
    uint32_t            *qfrag;  // [n_qb][n_uh][2][n_mt][32 lanes][D/4] (fp16 pairs)
};

__device__ __forceinline__ uint32_t score_key(float s) {
    if (isnan(s)) s = -INFINITY;
    const uint32_t u = __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}

// ---- 1. prep: chunk lists and pooled queries ------------------------------------------------
// The first stage's chunks of block q (the twin's first_grid_of / first_chunk): a head chunk
// [n_sink, n_sink + o) when a first_offset o leaves tokens past it, then chunks of l_c every
// first_stride tokens (0: l_c) from there, the last ending at win0.
__device__ __forceinline__ bool first_head(const stage_params &p, const lc_qblock &q) {
    return p.first_offset > 0 && q.win0 - p.n_sink > p.first_offset;
}
__device__ __forceinline__ int first_chunk_count(const stage_params &p, const lc_qblock &q) {
    if (q.win0 <= p.n_sink) return 0;
    const int head = first_head(p, q) ? 1 : 0;
    const int rest = q.win0 - p.n_sink - (head ? p.first_offset : 0);
    return head + (rest <= p.chunk ? 1 : 1 + (rest - p.chunk + p.first_stride - 1) / p.first_stride);
}
__device__ __forceinline__ int2 first_chunk(const stage_params &p, const lc_qblock &q, int c) {
    const int head = first_head(p, q) ? 1 : 0, base = p.n_sink + (head ? p.first_offset : 0);
    if (head && c == 0) return make_int2(p.n_sink, p.first_offset);
    const int start = base + (c - head) * p.first_stride;
    return make_int2(start, min(start + p.chunk, q.win0) - start);
}

// Pair bg's index in the in / out lists (p.list), and whether its block is computed (p.from).
__device__ __forceinline__ size_t list_pair(const stage_params &p, int bg) {
    const int b = bg / p.n_groups;
    return (size_t)(p.list ? p.list[b] : b) * p.n_groups + (bg - b * p.n_groups);
}
__device__ __forceinline__ bool block_runs(const stage_params &p, int b) {
    return !p.from || p.from[b] <= p.stage;
}

// Pair bg's input segments (the previous stage's list for its block): *in, and their count
// (p.in_n clamped to 0 .. in_cap).
__device__ __forceinline__ int pair_inputs(const stage_params &p, int bg, const lc_segment **in) {
    const size_t lbg = list_pair(p, bg);
    const int    nin = p.in_n[lbg];
    *in              = p.in + lbg * p.in_cap;
    return nin < 0 ? 0 : (nin > p.in_cap ? p.in_cap : nin);
}

// Chunks of pair bg's list, capped at max_chunks (every thread of the block calls it).
__device__ int pair_chunk_count(const stage_params &p, int bg, const lc_qblock &q, int *scan_smem) {
    if (!p.in) {
        const int n = first_chunk_count(p, q);
        return n < p.max_chunks ? n : p.max_chunks;
    }
    const lc_segment *in;
    const int         nin  = pair_inputs(p, bg, &in);
    int               base = 0;
    for (int s0 = 0; s0 < nin; s0 += blockDim.x) {
        const int s   = s0 + threadIdx.x;
        const int len = s < nin ? in[s].len : 0;
        int       total;
        block_excl_scan(len > 0 ? (len + p.chunk - 1) / p.chunk : 0, &total, scan_smem, blockDim.x >> 5);
        base += total;
    }
    return base < p.max_chunks ? base : p.max_chunks;
}

// A fragments of one m-tile (16 pooled queries), natural m16n8k16 layout: lane l = 4g + c holds
// D/4 registers, k-step t in [4t, 4t + 4): a0 = (row g, dims 16t + 2c + {0,1}), a1 = (row g + 8,
// same dims), a2 = (row g, dims 16t + 8 + 2c + {0,1}), a3 = (row g + 8, those dims).
// Scoring head uh's row rr (< rmul * nq): with kv_descent query head uh * hpk + rr / nq, pooled
// query rr % nq; else head uh, query rr.
// grid: n_pairs (chunk lists) + n_qb * n_uh * n_mt (queries, one m-tile a block: 4 a block was
// slower, H100 8B shape at 1M: stage-1 prep 364 -> 481 us, stage-3 1064 -> 1399 us — fewer
// blocks hide less latency); block: kPrepThreads.
template <int D> __global__ void __launch_bounds__(kPrepThreads) hip_prep_kernel(stage_params p) {
    constexpr int EP = 16 * (D / 2) / kPrepThreads, FW = 32 * (D / 4) / kPrepThreads;
    __shared__ float y[2][16][D]; // the versions of the m-tile's pooled queries
    __shared__ int   scan_smem[32];
    if ((int)blockIdx.x < p.n_pairs) { // the chunk list of pair bg
        const int            bg = blockIdx.x, b = bg / p.n_groups;
        const lc_qblock  q  = p.qb[b];
        int2                *ch = p.chunks + (size_t)bg * p.max_chunks;
        uint32_t            *sc = p.scores + (size_t)bg * p.max_chunks;
        if (threadIdx.x == 0) p.cnt[bg] = 0;
        if (!block_runs(p, b)) { // no chunks: the scoring skips it, the select leaves it
            if (threadIdx.x == 0) p.n_ch[bg] = 0;
            return;
        }
        if (!p.in) {
            const int n = pair_chunk_count(p, bg, q, scan_smem);
            for (int c = threadIdx.x; c < n; c += blockDim.x) {
                ch[c] = first_chunk(p, q, c);
                sc[c] = 0u;
            }
            if (threadIdx.x == 0) p.n_ch[bg] = n;
            return;
        }
        const lc_segment *in;
        const int         nin  = pair_inputs(p, bg, &in);
        int               base = 0;
        for (int s0 = 0; s0 < nin; s0 += blockDim.x) {
            const int  s   = s0 + threadIdx.x;
            lc_segment sg  = s < nin ? in[s] : lc_segment{0, 0};
            const int  cnt = sg.len > 0 ? (sg.len + p.chunk - 1) / p.chunk : 0;
            int        total;
            const int  off = base + block_excl_scan(cnt, &total, scan_smem, blockDim.x >> 5);
            for (int i = 0; i < cnt && off + i < p.max_chunks; i++) {
                ch[off + i] = make_int2(sg.start + i * p.chunk, min(p.chunk, sg.len - i * p.chunk));
                sc[off + i] = 0u;
            }
            base += total;
        }
        if (threadIdx.x == 0) p.n_ch[bg] = base < p.max_chunks ? base : p.max_chunks;
        return;
    }
    const int           id = blockIdx.x - p.n_pairs;
    const int           mt = id % p.n_mt, bh = id / p.n_mt, uh = bh % p.n_uh, b = bh / p.n_uh;
    const lc_qblock q  = p.qb[b];
    const int           nq = (q.n_rows + p.q_stride - 1) / p.q_stride, nqu = p.rmul * nq;
    if (mt * 16 >= nqu) return; // no valid row: the scoring warp of this m-tile reads nothing
    if (!block_runs(p, b)) return;
    const int g   = p.n_groups == 1 ? 0 : uh / p.uhpk;
    const int nch = p.mode == LC_SCAN_CHUNK ? pair_chunk_count(p, b * p.n_groups + g, q, scan_smem) : 0;
    const bool rel = p.mode == LC_SCAN_RELATIVE;
    const int  nv  = rel ? 2 : 1; // versions: RELATIVE one per key slot
    uint32_t *dst = p.qfrag + (size_t)(b * p.n_uh + uh) * 2 * p.n_mt * 32 * (D / 4);
    // one dim pair per item (the rotation's pairs: NORM (2i, 2i + 1), NEOX (i, i + n_rot / 2);
    // past n_rot pairs of unrotated dims), its q_stride rows summed with independent loads (H100,
    // 8B shape, 32K rows: an element per item reading both dims and the table row per dim, rows
    // in a dependent chain, was ~0.7 ms per prefill stage). RELATIVE: every row has the same
    // query position c = n_stream + 1, so the raw rows are summed and the mean rotated once per
    // key slot v, by R(c - v) = R(v)ᵀ R(c) (the slot's key rotation folded in); PLAIN / CHUNK:
    // each row rotated at its own position before the sum.
    const int half = p.n_rot >> 1;
    const int crel = clamp_pos(p.n_stream + 1, p.n_pos);
#pragma unroll
    for (int e = 0; e < EP; e++) {
        const int idx = e * kPrepThreads + threadIdx.x, ul = idx / (D / 2), pi = idx % (D / 2);
        const int rr = mt * 16 + ul;
        const int hq = p.rmul == 1 ? 0 : rr / nq, u = rr - hq * nq, h = p.rmul == 1 ? uh : uh * p.hpk + hq;
        const bool rot = pi < half;
        const int  d0  = !p.neox ? 2 * pi : rot ? pi : p.n_rot + 2 * (pi - half);
        const int  d1  = !p.neox ? 2 * pi + 1 : rot ? pi + half : d0 + 1;
        float      a0 = 0.0f, a1 = 0.0f;
        if (rr < nqu) {
            const int r0 = u * p.q_stride, r1 = min(r0 + p.q_stride, q.n_rows);
            if (rel || !rot) {
#pragma unroll 4
                for (int r = r0; r < r1; r++) {
                    const float *x = p.q_raw + ((size_t)(q.row0 + r) * p.n_head + h) * D;
                    a0 += __ldg(x + d0), a1 += __ldg(x + d1);
                }
            } else {
#pragma unroll 4
                for (int r = r0; r < r1; r++) {
                    const float *x  = p.q_raw + ((size_t)(q.row0 + r) * p.n_head + h) * D;
                    const float  x0 = __ldg(x + d0), x1 = __ldg(x + d1);
                    const int    pp = q.pos0 + r;
                    const int    pos =
                        clamp_pos(p.mode == LC_SCAN_PLAIN ? pp : min(pp, nch + p.n_stream), p.n_pos);
                    const float c = __ldg(p.cs + (size_t)pos * half + pi), sn = __ldg(p.sn + (size_t)pos * half + pi);
                    a0 += x0 * c - x1 * sn, a1 += x0 * sn + x1 * c;
                }
            }
            const float inv = 1.0f / (float)(r1 - r0);
            a0 *= inv, a1 *= inv;
        }
        if (rel && rot) {
#pragma unroll
            for (int v = 0; v < 2; v++) {
                const int   pos = max(crel - v, 0);
                const float c = __ldg(p.cs + (size_t)pos * half + pi), sn = __ldg(p.sn + (size_t)pos * half + pi);
                y[v][ul][d0] = a0 * c - a1 * sn, y[v][ul][d1] = a0 * sn + a1 * c;
            }
        } else {
            y[0][ul][d0] = a0, y[0][ul][d1] = a1;
            if (rel) y[1][ul][d0] = a0, y[1][ul][d1] = a1;
        }
    }
    __syncthreads();
    if (p.tr) {
        // B fragments of m16n8k16 (k = 16 dims, n = 8 query columns): lane l = 4g + c holds
        // D/8 registers, k-step t: (dims 16t + 2c + {0,1}) and (dims 16t + 8 + 2c + {0,1}) of
        // column g. Column g: pooled row g % nqu of key slot g / nqu — slot 0 the right-slot
        // version (RELATIVE: y[1]; else y[0]), slot 1 the left (y[0]); zero past the columns.
        for (int idx = threadIdx.x; idx < 32 * (D / 8); idx += kPrepThreads) {
            const int l = idx / (D / 8), j = idx % (D / 8), gc = l >> 2, c = l & 3;
            const int slot = gc / nqu, row = gc - slot * nqu, ver = rel ? 1 - slot : 0;
            const int d0 = 16 * (j >> 1) + 8 * (j & 1) + 2 * c;
            float2    ev = make_float2(0.f, 0.f);
            if (slot < nv) ev = make_float2(y[ver][row][d0], y[ver][row][d0 + 1]);
            dst[idx] = pack_f16(ev.x, ev.y);
        }
        return;
    }
    for (int v = 0; v < nv; v++) {
#pragma unroll
        for (int e = 0; e < FW; e++) {
            const int idx = e * kPrepThreads + threadIdx.x;
            const int l = idx / (D / 4), j = idx % (D / 4), t = j >> 2, r = j & 3;
            const int row = (l >> 2) + ((r & 1) ? 8 : 0);
            const int d0  = 16 * t + 2 * (l & 3) + ((r & 2) ? 8 : 0);
            const float2 ev = *(const float2 *)&y[v][row][d0];
            // fp16, as the keys (the pages' and the rotated ones)
            dst[((size_t)(v * p.n_mt + mt) * 32 + l) * (D / 4) + j] = pack_f16(ev.x, ev.y);
        }
    }
}

// ---- 2. scoring and selection ----------------------------------------------------------------
// Shared memory of a unit (unit_bytes, 16-aligned): keys [W][D] fp16 (16-byte pieces of row r
// swizzled by r & 7 for conflict-free ldmatrix), PLAIN / CHUNK table rows [W][tab_stride] fp32
// (cos at 0, sin at n_rot/2; the stride padded by 4 floats), red [n_mt][2 slots][W] fp32 (the
// m-tiles' maxima), tflag [2 parities][NT] (bit 0: the tile has a probe, bit 1: left slot too).

// Element index of dim d of key row r in the swizzled buffer.
template <int D> __device__ __forceinline__ int kidx(int r, int d) {
    return r * D + ((((d >> 3) ^ (r & 7)) << 3) | (d & 7));
}

__device__ __forceinline__ uint32_t rot_norm(uint32_t x, float c, float s) {
    const float x0 = kv_lo(x), x1 = kv_hi(x);
    return pack_f16(x0 * c - x1 * s, x0 * s + x1 * c);
}

// Rotate key row r (fp16, swizzled) in place by its staged table row tr (PLAIN / CHUNK), in fp32
// and back to fp16; item it of n_items: NORM 4 pairs (one 16-byte piece), NEOX 4 pairs (d, d +
// half), or with n_rot / 2 not a multiple of 4 one pair. The dims past n_rot stay as stored.
template <int D>
__device__ __forceinline__ void rotate_item(uint16_t *kbuf, const float *tr, int r, int it, int half,
                                            bool neox, bool quad) {
    if (quad) {
        const float4 c = *(const float4 *)(tr + 4 * it), s = *(const float4 *)(tr + half + 4 * it);
        if (!neox) {
            uint4 *pk = (uint4 *)(kbuf + kidx<D>(r, 8 * it));
            uint4  x  = *pk;
            x.x = rot_norm(x.x, c.x, s.x), x.y = rot_norm(x.y, c.y, s.y);
            x.z = rot_norm(x.z, c.z, s.z), x.w = rot_norm(x.w, c.w, s.w);
            *pk = x;
        } else {
            uint2 *pa = (uint2 *)(kbuf + kidx<D>(r, 4 * it)), *pb = (uint2 *)(kbuf + kidx<D>(r, 4 * it + half));
            const uint2 a = *pa, b = *pb;
            const float a0 = kv_lo(a.x), a1 = kv_hi(a.x), a2 = kv_lo(a.y), a3 = kv_hi(a.y);
            const float b0 = kv_lo(b.x), b1 = kv_hi(b.x), b2 = kv_lo(b.y), b3 = kv_hi(b.y);
            *pa = make_uint2(pack_f16(a0 * c.x - b0 * s.x, a1 * c.y - b1 * s.y),
                             pack_f16(a2 * c.z - b2 * s.z, a3 * c.w - b3 * s.w));
            *pb = make_uint2(pack_f16(a0 * s.x + b0 * c.x, a1 * s.y + b1 * c.y),
                             pack_f16(a2 * s.z + b2 * c.z, a3 * s.w + b3 * c.w));
        }
        return;
    }
    const float c = tr[it], s = tr[half + it];
    const int   i0 = neox ? it : 2 * it, i1 = neox ? it + half : 2 * it + 1;
    const float x0 = kv_f32(kbuf[kidx<D>(r, i0)]);
    const float x1 = kv_f32(kbuf[kidx<D>(r, i1)]);
    kbuf[kidx<D>(r, i0)] = __half_as_ushort(__float2half_rn(x0 * c - x1 * s));
    kbuf[kidx<D>(r, i1)] = __half_as_ushort(__float2half_rn(x0 * s + x1 * c));
}

// The n_keep best chunks of pair bg (all threads of the block call it; smem >= kSelHead ints).
__device__ void select_pair_keep(const stage_params &p, int bg, unsigned char *smem) {
    int            *hist = (int *)smem, *scan = hist + kSelBins, *misc = scan + 32;
    uint32_t       *kc   = (uint32_t *)(smem + kSelHead * 4);
    const int       tid = threadIdx.x, bd = blockDim.x;
    const int       n = p.n_ch[bg], k = p.n_keep;
    const int2     *ch  = p.chunks + (size_t)bg * p.max_chunks;
    const uint32_t *sc  = p.scores + (size_t)bg * p.max_chunks;
    const size_t    lbg = list_pair(p, bg);
    lc_segment     *out = p.out + lbg * p.n_keep;
    if (n <= k) {
        for (int c = tid; c < n; c += bd) out[c] = lc_segment{ch[c].x, ch[c].y};
        if (tid == 0) p.out_n[lbg] = n;
        return;
    }
    const bool cached = !p.global_select && (int64_t)(kSelHead + n) * 4 <= (int64_t)p.smem_bytes;
    if (cached) {
        for (int c = tid; c < n; c += bd) kc[c] = __ldcg(sc + c);
        __syncthreads();
    }
    // radix select of the k-th largest key, 8 bits a pass from the top: after a pass the keys
    // whose masked bits (key & pmask) exceed prefix are kept and kk of those equal to it are
    // wanted; the passes stop early when every key equal to the prefix is wanted. (Was 11 bits a
    // pass over 2048 bins with a block scan each, 7 barriers a pass against 3 here; H200, 8B
    // shape, decode at 1M, 3k: a stage-3 refresh ~39 -> ~37.8 us, a stage-2 one ~46 -> ~45.8.)
    uint32_t prefix = 0, pmask = 0;
    int      kk     = k;
    for (int sh = 24; sh >= 0; sh -= 8) {
        radix_pass8([&](int c) { return cached ? kc[c] : __ldcg(sc + c); }, n, prefix, pmask, sh, kk,
                    hist, misc);
        kk -= misc[1];
        prefix |= (uint32_t)misc[0] << sh;
        pmask |= 255u << sh;
        const bool all = misc[2] == kk;
        __syncthreads(); // misc is rewritten by the next pass
        if (all) break;
    }
    // rank ranges per thread; keys equal to the prefix are kept from the highest rank down
    const int per = (n + bd - 1) / bd;
    const int c0 = min(n, tid * per), c1 = min(n, c0 + per);
    int       eq = 0;
    for (int c = c0; c < c1; c++) eq += ((cached ? kc[c] : __ldcg(sc + c)) & pmask) == prefix;
    int       tot_eq;
    const int eq_before = block_excl_scan(eq, &tot_eq, scan, blockDim.x >> 5);
    const int eq_above  = tot_eq - eq_before - eq;
    int       kept = 0, cum = eq_above;
    for (int c = c1 - 1; c >= c0; c--) {
        const uint32_t km = (cached ? kc[c] : __ldcg(sc + c)) & pmask;
        if (km > prefix) kept++;
        else if (km == prefix) kept += cum++ < kk;
    }
    int       tot_kept;
    const int at = block_excl_scan(kept, &tot_kept, scan, blockDim.x >> 5);
    int       j = 0;
    cum         = eq_above;
    for (int c = c1 - 1; c >= c0; c--) {
        const uint32_t km   = (cached ? kc[c] : __ldcg(sc + c)) & pmask;
        bool           keep = km > prefix;
        if (km == prefix) keep = cum++ < kk;
        if (keep) {
            out[at + kept - 1 - j] = lc_segment{ch[c].x, ch[c].y};
            j++;
        }
    }
    if (tid == 0) p.out_n[lbg] = tot_kept;
}

// select_pair_keep, then with overlapping first-stage chunks each kept chunk clipped to start
// where the kept one before it ends (ends rise with rank; a chunk's end is never changed, so a
// thread may read its neighbour's while that one is rewritten — both fields are read before
// the barrier, written after it).
__device__ void select_pair(const stage_params &p, int bg, unsigned char *smem) {
    if (!block_runs(p, bg / p.n_groups)) return; // its cached output stands
    select_pair_keep(p, bg, smem);
    if (p.in || p.first_stride >= p.chunk) return;
    __syncthreads();
    const size_t lbg = list_pair(p, bg);
    lc_segment  *out = p.out + lbg * p.n_keep;
    const int    n   = p.out_n[lbg];
    for (int base = 0; base < n; base += blockDim.x) {
        const int  i = base + threadIdx.x;
        lc_segment c = {0, 0};
        if (i < n) {
            c = out[i];
            if (i > 0) {
                const lc_segment pv  = out[i - 1];
                const int        end = c.start + c.len, pe = pv.start + pv.len;
                if (c.start < pe) c.start = pe, c.len = end - pe;
            }
        }
        __syncthreads();
        if (i < n) out[i] = c;
        __syncthreads();
    }
}

// The key a descent state (lo, hi) probes at a step (-1: none): step 0 the chunk's first key,
// then the mid; *needL: its left-slot score may be needed later (the descent goes on past it).
__device__ __forceinline__ int probe_pos(int4 st, int step, bool *needL) {
    *needL = false;
    if (step == 0) {
        if (st.y <= st.x) return -1;
        *needL = st.y - st.x > 1;
        return st.x;
    }
    if (st.y - st.x <= 1) return -1;
    const int mid = st.x + ((st.y - st.x) >> 1);
    *needL        = st.y - mid > 1;
    return mid;
}

// This thread's maxima over its two rows (g, g + 8; masked unless valid) of an m16n8
// accumulator c, for its columns 2·cq and 2·cq + 1: v[0], v[1].
__device__ __forceinline__ void row_pair_max(const float c[4], bool ok0, bool ok1, float *v) {
    v[0] = ok0 ? c[0] : -INFINITY, v[1] = ok0 ? c[1] : -INFINITY;
    if (ok1) v[0] = fmaxf(v[0], c[2]), v[1] = fmaxf(v[1], c[3]);
}

// Four values per thread (v[i], i < 4) maxed over the 8 row groups g of the warp (lanes with the
// same cq) by recursive halving — 4 shuffles where maxing each value over the warp takes 12
// (shuffles run at one warp instruction per clock per SM: stage 3 was bound by them). Lane
// (g, cq) ends up with the maximum of value g >> 1.
__device__ __forceinline__ float max4_over_rows(const float v[4], int g) {
    const bool hi1 = g & 4, hi2 = g & 2;
    float      k0 = hi1 ? v[2] : v[0], k1 = hi1 ? v[3] : v[1];
    const float s0 = hi1 ? v[0] : v[2], s1 = hi1 ? v[1] : v[3];
    k0 = fmaxf(k0, __shfl_xor_sync(kFull, s0, 16)); // values (hi1 ? 2 : 0) + {0, 1} over g, g ^ 4
    k1 = fmaxf(k1, __shfl_xor_sync(kFull, s1, 16));
    float       k = hi2 ? k1 : k0;
    const float s = hi2 ? k0 : k1;
    k = fmaxf(k, __shfl_xor_sync(kFull, s, 8)); // value g >> 1 over g ^ {0, 2, 4, 6}
    return fmaxf(k, __shfl_xor_sync(kFull, k, 4));
}


// ---- transposed scoring helpers (decode-sized launches, p.tr) -----------------------------------
// The unit's query columns as B fragments (the prep's TR layout: lane l holds D/8 registers).
template <int D>
__device__ __forceinline__ void load_tr_query(const stage_params &p, int b, int h, int lane, uint32_t *bq) {
    const uint4 *s0 = (const uint4 *)(p.qfrag + (size_t)(b * p.n_uh + h) * 2 * 32 * (D / 4) + lane * (D / 8));
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        const uint4 x = __ldg(s0 + i);
        bq[4 * i] = x.x, bq[4 * i + 1] = x.y, bq[4 * i + 2] = x.z, bq[4 * i + 3] = x.w;
    }
}

// The slot maxima of keys g and g + 8 from a transposed tile's two accumulators (k-steps
// split over ca and cb): v = {right g, left g, right g + 8, left g + 8}, -inf where none.
// Columns 2cq, 2cq + 1 of the lane are right-slot scores below nq, then (REL) left-slot ones
// below 2 nq; with nq == 1 both sit in lane cq = 0 and are broadcast over the quad, else
// maxed over it (every lane of the quad ends with the values).
template <bool REL>
__device__ __forceinline__ void tr_slot_max(const float ca[4], const float cb[4], int nq, int lane, float v[4]) {
    const int cq = lane & 3, c0 = 2 * cq, c1 = c0 + 1;
    const int k0 = c0 < nq ? 0 : (REL && c0 < 2 * nq ? 1 : 2);
    const int k1 = c1 < nq ? 0 : (REL && c1 < 2 * nq ? 1 : 2);
    v[0] = v[1] = v[2] = v[3] = -INFINITY;
#pragma unroll
    for (int m = 0; m < 2; m++) { // (selects, not v[2m + k]: a runtime index puts v in local memory)
        const float x0 = ca[2 * m] + cb[2 * m], x1 = ca[2 * m + 1] + cb[2 * m + 1];
        float       r = k0 == 0 ? x0 : -INFINITY, l = k0 == 1 ? x0 : -INFINITY;
        if (k1 == 0) r = fmaxf(r, x1);
        if (k1 == 1) l = fmaxf(l, x1);
        v[2 * m] = r, v[2 * m + 1] = l;
    }
    if ((REL ? 2 : 1) * nq <= 2) {
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = __shfl_sync(kFull, v[i], lane & ~3);
    } else {
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1)
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] = fmaxf(v[i], __shfl_xor_sync(kFull, v[i], o));
    }
}

// One transposed pass: the 16 probe rows row0 .. row0 + 15 of the swizzled buffer (with `two`
// false only row0 .. row0 + 7 exist; lanes 8-15 then read those again, unused) as A, by the
// query columns bq as B; the k-steps alternate over ca and cb (two independent mma chains).
// Lane (g, cq) gets rows g (ca/cb[0..1]) and g + 8 ([2..3]) at columns 2cq, 2cq + 1.
template <int D>
__device__ __forceinline__ void tr_mma_tile(const uint16_t *kbuf, int row0, bool two, int lane,
                                            const uint32_t *bq, float ca[4], float cb[4]) {
    const int row = row0 + ((lane >> 3) & 1 && two ? 8 : 0) + (lane & 7);
#pragma unroll
    for (int i = 0; i < 4; i++) ca[i] = cb[i] = 0.f;
#pragma unroll
    for (int t = 0; t < D / 16; t++) {
        uint32_t  a[4];
        const int pc = 2 * t + (lane >> 4);
        ldmatrix_x4(a, kbuf + row * D + ((pc ^ (row & 7)) << 3));
        float *c = (t & 1) ? cb : ca;
        mma_f16(c, a, bq[2 * t], bq[2 * t + 1]);
    }
}

// Quad lane cq's share of probe row `row` (fp16, D dims at src) into the swizzled rows: piece
// pc = cq + 4m goes to slot pc ^ (row & 7) = (cq ^ (row & 3)) + 4 (m ^ hb), hb = bit 2 of the
// row: two shared bases and immediate offsets (the per-piece 64-bit address arithmetic was a
// third of a decode step's instructions).
template <int D>
__device__ __forceinline__ void copy_probe_row(uint16_t *kbuf, int row, int cq, const uint16_t *src) {
    const int      hb = (row >> 2) & 1;
    const uint32_t d0 = smem_u32(kbuf + row * D + ((cq ^ (row & 3)) << 3));
    const uint32_t da = d0 + (hb << 6), db = d0 + ((hb ^ 1) << 6);
    const uint16_t *sq = src + cq * 8;
    cp_async16_cg_at<0, 0>(da, sq);
    cp_async16_cg_at<0, 64>(db, sq);
    if constexpr (D == 128) {
        cp_async16_cg_at<128, 128>(da, sq);
        cp_async16_cg_at<128, 192>(db, sq);
    }
}

// The fp8 layout's twin of copy_probe_row: quad lane cq's pieces of key `slot` of slab `slab`
// dequantised to fp16 (kv8_load8) into the same swizzled places, by plain stores (visible to the
// warp after its __syncwarp, as the copies after their wait).
template <int D>
__device__ __forceinline__ void dequant_probe_row(uint16_t *kbuf, int row, int cq, const stage_params &p,
                                                  int64_t slab, int slot, int kvh) {
    const float *cen = p.kc ? p.kc + (int64_t)kvh * D : NULL;
#pragma unroll
    for (int m = 0; m < D / 32; m++) {
        const int pc = cq + 4 * m;
        *(uint4 *)(kbuf + row * D + ((pc ^ (row & 7)) << 3)) =
            kv8_load8((const unsigned char *)p.k, slab, slot, 8 * pc, p.P, D, cen);
    }
}

__device__ void select_if_last(const stage_params &p, int bgrp, int kvh, unsigned char *smem);

// grid: (ceil(n_qb / nb) * H * n_hsub, chunk tiles of cpt ranks); block: 32 * nb * hpc * n_mt;
// dynamic smem: smem_bytes. Warp w: unit u = w / n_mt (block u / hpc of the CTA's nb, head
// u % hpc of its KV head's subset), m-tile w % n_mt; it owns tiles T = j * n_mt + mt (j < S)
// of every wave: issues their loads, rotates their keys and steps their descents (state in
// shared memory). A wave starts by caching its chunks' page-table entries (npg per chunk).
template <int D, int MODE, int S, int TPR, bool TR>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) hip_score_kernel(stage_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int  QR  = D / 4;
    constexpr bool REL   = MODE == LC_SCAN_RELATIVE;
    constexpr bool PLAIN = MODE == LC_SCAN_PLAIN;
    // tiles per mma pass: independent mma chains (a tile's 8 k-steps are one dependent chain);
    // RELATIVE: TPR tiles of two slots each
    constexpr int  TP    = REL ? TPR : 2;
    const int      lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, cq = lane & 3;
    const int      n_mt = TR ? 1 : p.n_mt, u = warp / n_mt, mt = warp - u * n_mt;
    const int      units = p.nb * p.hpc, u0 = u % units, sub = u / units; // (block, head), range
    const int      NT = S * n_mt, W = 8 * NT, npg = p.npg, sh = p.p_shift;
    unsigned char *ub    = smem + (size_t)u * p.unit_bytes;
    uint16_t      *kbuf  = (uint16_t *)ub;
    float         *tab   = (float *)(ub + (size_t)W * D * 2);
    float         *red   = tab + (REL ? 0 : (size_t)W * p.tab_stride);
    int4          *stt   = (int4 *)(red + (size_t)n_mt * 2 * W); // [W] lo, hi, S(lo, LEFT), final
    int2          *rec   = (int2 *)(stt + W);                    // [2][W] chunk records
    int           *fpg   = (int *)(rec + 2 * W);                 // [W] first page of the chunk
    int           *pcache = fpg + W;                             // [W][npg] its page-table entries
    int           *tflag = pcache + (size_t)W * npg;             // [2][NT]
    const int      hs = blockIdx.x % p.n_hsub, kvh = (blockIdx.x / p.n_hsub) % p.H;
    const int      bgrp = blockIdx.x / (p.n_hsub * p.H);
    const int      b = bgrp * p.nb + u0 / p.hpc, hh = hs * p.hpc + u0 % p.hpc;

    // (warps past the CTA's units only join the select: a CTA has at least kSelWarps)
    if (u < units * p.nsub && b < p.n_qb && hh < p.uhpk) { // the whole unit takes this branch
        const int h       = kvh * p.uhpk + hh; // scoring head
        const int bg      = b * p.n_groups + (p.n_groups == 1 ? 0 : kvh);
        const int nch     = p.n_ch[bg];
        const int c_begin = (blockIdx.y * p.nsub + sub) * p.cpt, c_end = min(nch, c_begin + p.cpt);
        if (c_begin < c_end) {
            const lc_qblock q  = p.qb[b];
            const int32_t      *pt = p.seqs[q.seq].page_table;
            const int           nq = p.rmul * ((q.n_rows + p.q_stride - 1) / p.q_stride);
            const bool          rows_valid = mt * 16 < nq;
            const bool          ok0 = mt * 16 + g < nq, ok1 = mt * 16 + g + 8 < nq;
            uint32_t            aR[TR ? 1 : QR], aL[REL && !TR ? QR : 1], bq[TR ? D / 8 : 1];
            if constexpr (TR) load_tr_query<D>(p, b, h, lane, bq);
            else if (rows_valid) {
                const uint32_t *qf = p.qfrag + (size_t)(b * p.n_uh + h) * 2 * n_mt * 32 * QR + lane * QR;
                const uint4    *s0 = (const uint4 *)(qf + (size_t)mt * 32 * QR);
                const uint4    *s1 = (const uint4 *)(qf + (size_t)(n_mt + mt) * 32 * QR);
#pragma unroll
                for (int i = 0; i < QR / 4; i++) {
                    uint4 x = __ldg(s0 + i);
                    if (REL) {
                        aL[4 * i] = x.x, aL[4 * i + 1] = x.y, aL[4 * i + 2] = x.z, aL[4 * i + 3] = x.w;
                        x = __ldg(s1 + i);
                    }
                    aR[4 * i] = x.x, aR[4 * i + 1] = x.y, aR[4 * i + 2] = x.z, aR[4 * i + 3] = x.w;
                }
            }
            // PLAIN with rotated tiles: the first tile of this block's sequence (-1: not rotated)
            int64_t rtile = -1;
            if (PLAIN && p.n_rpre > 0) {
                int64_t t0 = 0;
                for (int i = 0; i < p.n_rpre && rtile < 0; i++) {
                    const lc_attn_seq sq = p.seqs[p.rpre[i]];
                    if (p.rpre[i] == q.seq) rtile = t0;
                    t0 += (sq.pos0 + sq.n_rows + 63) / 64;
                }
            }
            const bool      rot_src = rtile >= 0;
            const uint16_t *kbase = p.k + (size_t)kvh * p.P * D;
            const size_t    page_stride = (size_t)p.H * p.P * D;
            const int       half = p.n_rot >> 1;
            const bool      quad = (half & 3) == 0;
            const int       n_items = quad ? half >> 2 : half;
            uint32_t       *scores = p.scores + (size_t)bg * p.max_chunks;
            const int2     *chunks = p.chunks + (size_t)bg * p.max_chunks;
            int             par = 0, wp = 0;
#pragma unroll
            for (int j = 0; j < S; j++) { // the first wave's chunk records
                const int ci = (j * n_mt + mt) * 8 + g;
                if (cq == 0 && c_begin + ci < c_end) rec[ci] = chunks[c_begin + ci];
            }
            __syncwarp();
            for (int w0 = c_begin; w0 < c_end; w0 += W, wp ^= 1) {
                // descent state and page entries from the records; fetch the next wave's records
#pragma unroll
                for (int j = 0; j < S; j++) {
                    const int  ci = (j * n_mt + mt) * 8 + g, rank = w0 + ci;
                    const bool v  = rank < c_end;
                    const int2 r  = rec[wp * W + ci];
                    const int  p0 = r.x >> sh, p1 = (r.x + r.y - 1) >> sh;
                    if (cq == 0) {
                        stt[ci] = v ? make_int4(r.x, r.x + r.y, 0, 0) : make_int4(0, -1, 0, 0);
                        fpg[ci] = p0;
                        if (rank + W < c_end) {
                            const unsigned d = smem_u32(rec + (wp ^ 1) * W + ci);
                            asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d),
                                         "l"(chunks + rank + W) : "memory");
                        }
                    }
                    if (v && !rot_src)
                        for (int e = cq; e < npg && p0 + e <= p1; e += 4)
                            cp_async4(pcache + ci * npg + e, pt + p0 + e);
                }
                cp_async_wait_all();
                __syncwarp();
                for (int step = 0;; step++, par ^= 1) {
                    // the probes of this step: step 0 the first key, then the mid (S <= 2: kept
                    // in registers for the loads, which are unrolled — independent address
                    // chains; S = 4 recomputes them in a rolled loop: fewer live registers)
                    constexpr bool KEEP = S <= 2 || TR;
                    unsigned       tact = 0;
                    int            pj[S];
#pragma unroll
                    for (int j = 0; j < S; j++) {
                        const int      T = j * n_mt + mt;
                        bool           needL;
                        const int      pos = probe_pos(stt[T * 8 + g], step, &needL);
                        const unsigned bR = __ballot_sync(kFull, pos >= 0), bL = __ballot_sync(kFull, needL);
                        if (lane == 0) tflag[par * NT + T] = (bR ? 1 : 0) | (REL && bL ? 2 : 0);
                        if (bR) tact |= 1u << j;
                        if constexpr (KEEP) pj[j] = pos;
                    }
#pragma unroll(KEEP ? S : 1)
                    for (int j = 0; j < S; j++) {
                        const int T = j * n_mt + mt, ci = T * 8 + g, row = ci;
                        int       pos;
                        if constexpr (KEEP) pos = pj[j];
                        else {
                            bool needL;
                            pos = probe_pos(stt[ci], step, &needL);
                        }
                        if (pos < 0) continue;
                        // the probe row, L2 to shared memory (no L1 allocation: measured 2-3%
                        // faster than cp.async.ca): a rotated tile's row (piece pc at
                        // tile64_off(pos & 63, 8 pc)) or the page's row (piece pc at 8 pc)
                        if (rot_src) {
                            const uint16_t *tb = p.rk + ((size_t)(rtile + (pos >> 6)) * p.H + kvh) * (64 * D);
#pragma unroll
                            for (int m = 0; m < D / 32; m++) {
                                const int pc = cq + 4 * m;
                                cp_async16_cg(kbuf + row * D + ((pc ^ (row & 7)) << 3), tb + tile64_off(pos & 63, 8 * pc));
                            }
                            continue;
                        }
                        const int e = (pos >> sh) - fpg[ci];
                        const int page = e < npg ? pcache[ci * npg + e] : __ldg(pt + (pos >> sh));
                        if (p.e8) {
                            dequant_probe_row<D>(kbuf, row, cq, p, (int64_t)page * p.H + kvh, pos & (p.P - 1), kvh);
                        } else {
                            const uint16_t *src = kbase + (size_t)page * page_stride + (size_t)(pos & (p.P - 1)) * D;
                            copy_probe_row<D>(kbuf, row, cq, src);
                        }
                        if (!REL && half > 0) {
                            const int    tp = clamp_pos(MODE == LC_SCAN_PLAIN ? pos : w0 + ci, p.n_pos);
                            const float *c = p.cs + (size_t)tp * half, *s = p.sn + (size_t)tp * half;
                            float       *tr = tab + (size_t)row * p.tab_stride;
                            if (p.tab16) {
                                for (int e2 = 4 * cq; e2 < half; e2 += 16) {
                                    cp_async16(tr + e2, c + e2);
                                    cp_async16(tr + half + e2, s + e2);
                                }
                            } else {
                                for (int e2 = cq; e2 < half; e2 += 4) {
                                    cp_async4(tr + e2, c + e2);
                                    cp_async4(tr + half + e2, s + e2);
                                }
                            }
                        }
                    }
                    cp_async_wait_all();
                    __syncwarp();
                    // rotate the rows of this warp's tiles (PLAIN / CHUNK; the dims past n_rot as
                    // stored); rotated tiles are ready as loaded
                    if (!REL && !rot_src && half > 0) {
                        for (int j = 0; j < S; j++) {
                            if (!(tact >> j & 1)) continue;
                            const int T = j * n_mt + mt;
#pragma unroll 2
                            for (int idx = lane; idx < 8 * n_items; idx += 32) {
                                const int r = T * 8 + (idx & 7);
                                rotate_item<D>(kbuf, tab + (size_t)r * p.tab_stride, r, idx >> 3, half,
                                               p.neox != 0, quad);
                            }
                        }
                    }
                    if (!TR && n_mt > 1) named_barrier(1 + u, 32 * n_mt);
                    else __syncwarp();
                    const int tf = lane < NT ? tflag[par * NT + lane] : 0;
                    if (!__ballot_sync(kFull, tf & 1)) { // every descent of the wave is done
                        par ^= 1;                         // (the next wave writes the other flags)
                        break;
                    }
                    if constexpr (TR) {
                        // transposed: two tiles (16 probe keys) a pass as A, by the unit's query
                        // columns (B). Lane (g, cq) gets keys g and g + 8 (tr_slot_max).
                        for (int T0 = 0; T0 < NT; T0 += 2) {
                            const bool two = T0 + 1 < NT;
                            const int  fl  = tflag[par * NT + T0] | (two ? tflag[par * NT + T0 + 1] : 0);
                            if (!(fl & 1)) continue;
                            float ca[4], cb[4];
                            tr_mma_tile<D>(kbuf, T0 * 8, two, lane, bq, ca, cb);
                            float v[4]; // R g, L g, R g+8, L g+8
                            tr_slot_max<REL>(ca, cb, nq, lane, v);
                            if (cq == 0) {
                                red[W + T0 * 8 + g] = v[0];
                                if (REL) red[T0 * 8 + g] = v[1];
                                if (two) {
                                    red[W + (T0 + 1) * 8 + g] = v[2];
                                    if (REL) red[(T0 + 1) * 8 + g] = v[3];
                                }
                            }
                        }
                    } else
                    // scores of the active tiles, TP at a time (independent mma chains): 16
                    // queries of this m-tile x 8 chunks each
                    for (int T0 = 0; T0 < NT; T0 += TP) {
                        int  Ts[TP], fs[TP], fany = 0;
#pragma unroll
                        for (int t = 0; t < TP; t++) {
                            Ts[t] = T0 + t < NT ? T0 + t : T0;
                            fs[t] = T0 + t < NT ? tflag[par * NT + Ts[t]] : 0;
                            fany |= fs[t];
                        }
                        if (!(fany & 1)) continue;
                        const bool doL = REL && (fany & 2);
                        float      cR[TP][4], cL[TP][4];
#pragma unroll
                        for (int t = 0; t < TP; t++)
#pragma unroll
                            for (int i = 0; i < 4; i++) cR[t][i] = cL[t][i] = 0.f;
                        if (rows_valid) {
#pragma unroll
                            for (int kk = 0; kk < D / 32; kk++) {
                                const int off = ((4 * kk + (lane >> 3)) ^ (lane & 7)) << 3;
                                uint32_t  bf[TP][4];
#pragma unroll
                                for (int t = 0; t < TP; t++)
                                    ldmatrix_x4(bf[t], kbuf + (Ts[t] * 8 + (lane & 7)) * D + off);
#pragma unroll
                                for (int hk = 0; hk < 2; hk++)
#pragma unroll
                                    for (int t = 0; t < TP; t++) {
                                        mma_f16(cR[t], aR + 8 * kk + 4 * hk, bf[t][2 * hk], bf[t][2 * hk + 1]);
                                        if (REL && doL)
                                            mma_f16(cL[t], aL + 8 * kk + 4 * hk, bf[t][2 * hk], bf[t][2 * hk + 1]);
                                    }
                            }
                        }
                        // the column maxima: four values per thread (REL: the right and left slot's
                        // two columns; else two tiles' two columns) reduced together; lane
                        // (g, cq) holds value g >> 1, lanes of even g write it
#pragma unroll
                        for (int t2 = 0; t2 < (REL ? TP : 1); t2++) {
                            float v[4];
                            row_pair_max(cR[t2], rows_valid && ok0, rows_valid && ok1, v);
                            row_pair_max(REL ? cL[t2] : cR[TP - 1], rows_valid && ok0, rows_valid && ok1, v + 2);
                            const float mx = max4_over_rows(v, g);
                            const int   vi = g >> 1, col = 2 * cq + (vi & 1);
                            const bool  second = !REL && vi >= 2, left = REL && vi >= 2;
                            const int   Tw = REL ? Ts[t2] : second ? Ts[TP - 1] : Ts[0];
                            const int   fw = REL ? fs[t2] : second ? fs[TP - 1] : fs[0];
                            if (!(g & 1) && (fw & 1) && (!left || doL))
                                red[(size_t)mt * 2 * W + (left ? 0 : W) + Tw * 8 + col] = mx;
                        }
                    }
                    if (!TR && n_mt > 1) named_barrier(1 + u, 32 * n_mt);
                    else __syncwarp();
                    // the descent steps of this warp's chunks: the left probe's score is the
                    // winner's, known from an earlier step
#pragma unroll
                    for (int j = 0; j < S; j++) {
                        const int ci = (j * n_mt + mt) * 8 + g;
                        int4      st = stt[ci];
                        bool      needL; // (recomputed, not kept from the loads: fewer live registers)
                        const int pjj = probe_pos(st, step, &needL); // this step's probe (as issued)
                        if (pjj >= 0) {
                            float sR = -INFINITY, sL = -INFINITY;
                            for (int m = 0; m < n_mt; m++) {
                                sR = fmaxf(sR, red[(size_t)m * 2 * W + W + ci]);
                                if (REL) sL = fmaxf(sL, red[(size_t)m * 2 * W + ci]);
                            }
                            if (!REL) sL = sR;
                            if (step == 0) st.z = __float_as_int(sL), st.w = __float_as_int(sR);
                            else if (sR > __int_as_float(st.z))
                                st.x = pjj, st.z = __float_as_int(sL), st.w = __float_as_int(sR);
                            else st.y = pjj;
                        }
                        __syncwarp(); // every lane of the quad has read the state
                        if (pjj >= 0 && cq == 0) stt[ci] = st;
                    }
                    __syncwarp();
                }
#pragma unroll
                for (int j = 0; j < S; j++) {
                    const int  ci = (j * n_mt + mt) * 8 + g;
                    const int4 st = stt[ci];
                    if (st.y > st.x && cq == 0) atomicMax(scores + w0 + ci, score_key(__int_as_float(st.w)));
                }
                __syncwarp();
            }
        }
    }
    select_if_last(p, bgrp, kvh, smem);
}

// The last CTA of a (block, group) pair selects its chunks (every thread of the CTA calls it).
__device__ void select_if_last(const stage_params &p, int bgrp, int kvh, unsigned char *smem) {
    __threadfence();
    __syncthreads();
    int *sflag = (int *)smem;
    if ((int)threadIdx.x < p.nb) {
        const int b2   = bgrp * p.nb + threadIdx.x;
        int       last = 0;
        if (b2 < p.n_qb) {
            const int bg2 = b2 * p.n_groups + (p.n_groups == 1 ? 0 : kvh);
            last          = atomicAdd(p.cnt + bg2, 1) == p.ctas_per_pair - 1;
        }
        sflag[threadIdx.x] = last;
    }
    __syncthreads();
    unsigned lastmask = 0;
    for (int i = 0; i < p.nb; i++) lastmask |= sflag[i] ? 1u << i : 0u;
    __syncthreads();
    for (int i = 0; i < p.nb; i++)
        if (lastmask >> i & 1) {
            __threadfence();
            select_pair(p, (bgrp * p.nb + i) * p.n_groups + (p.n_groups == 1 ? 0 : kvh), smem);
            __syncthreads();
        }
}

// ---- 2b. decode scoring with relative RoPE: descent state in registers, two pipelined groups --
// p.tr == 2: a decode-sized launch (one m-tile, at most 4 pooled rows a unit, so at most 8
// query columns with the two key slots) with relative RoPE, whose keys need no rotation. The
// same units, chunk ranges, descents and transposed mma as the tr == 1 path of
// hip_score_kernel, but lane (g, cq) keeps in registers, for each of its NA = ceil(S / 2) A
// tiles of 16 chunks, the descent state of chunks 16a + g and 16a + 8 + g (every lane of the
// quad the same), and their first page-table entries (cq and cq + 4, read across the quad by a
// shuffle); the A tiles are groups of a two-stage pipeline: a tile's probe rows are copied
// (cp.async) while the other tile is scored and stepped, so a warp always has loads in flight.
// No shared state, no barriers in a step. (H200, 8B shape, 3k at 1M, against the tr == 1 path
// in the same run: stage 2 32.5 -> 29.6 us, stage 3 26.9 -> 24.8, stage 1 the same; probe rows
// straight into registers as A fragments were no faster, bench/NOTES.md 32.) block: 128
// threads (units x nsub = 4 warps); dynamic smem: the warps' probe rows [4][W][D] fp16
// (swizzled as kidx), then the select's keys.
template <int D, int S>
__global__ void __launch_bounds__(128, 5) hip_score_dec_kernel(stage_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int NA = (S + 1) / 2, W = 8 * S;
    const int     lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, cq = lane & 3;
    const int     units = p.hpc, u0 = warp % units, sub = warp / units;
    const int     hs = blockIdx.x % p.n_hsub, kvh = (blockIdx.x / p.n_hsub) % p.H;
    const int     bgrp = blockIdx.x / (p.n_hsub * p.H);
    const int     b = bgrp, hh = hs * p.hpc + u0;
    uint16_t     *kbuf = (uint16_t *)smem + (size_t)warp * W * D;
    if (warp < units * p.nsub && b < p.n_qb && hh < p.uhpk) {
        const int h  = kvh * p.uhpk + hh;
        const int bg = b * p.n_groups + (p.n_groups == 1 ? 0 : kvh);
        const int nch = p.n_ch[bg];
        const int c_begin = (blockIdx.y * p.nsub + sub) * p.cpt, c_end = min(nch, c_begin + p.cpt);
        if (c_begin < c_end) {
            const lc_qblock q  = p.qb[b];
            const int32_t      *pt = p.seqs[q.seq].page_table;
            const int           nq = p.rmul * ((q.n_rows + p.q_stride - 1) / p.q_stride);
            uint32_t            bq[D / 8];
            load_tr_query<D>(p, b, h, lane, bq);
            const uint16_t *kbase = p.k + (size_t)kvh * p.P * D;
            const size_t    page_stride = (size_t)p.H * p.P * D;
            const int       sh = p.p_shift, npg = p.npg;
            uint32_t       *scores = p.scores + (size_t)bg * p.max_chunks;
            const int2     *chunks = p.chunks + (size_t)bg * p.max_chunks;
            for (int w0 = c_begin; w0 < c_end; w0 += W) {
                int   lo[NA][2], hi[NA][2], fp[NA][2], pe0[NA][2], pe1[NA][2], pos[NA][2];
                float sl[NA][2], sf[NA][2];
                bool  act[NA];
#pragma unroll
                for (int a = 0; a < NA; a++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int  ci = 16 * a + 8 * r + g, rank = w0 + ci;
                        const bool v  = 16 * a + 8 * r < W && rank < c_end;
                        const int2 rc = v ? __ldg(chunks + rank) : make_int2(0, 0);
                        lo[a][r] = rc.x, hi[a][r] = v ? rc.x + rc.y : -1;
                        sl[a][r] = sf[a][r] = -INFINITY;
                        fp[a][r] = rc.x >> sh;
                        const int p1 = v ? (rc.x + rc.y - 1) >> sh : -1;
                        pe0[a][r] = cq < npg && fp[a][r] + cq <= p1 ? __ldg(pt + fp[a][r] + cq) : 0;
                        pe1[a][r] = cq + 4 < npg && fp[a][r] + cq + 4 <= p1 ? __ldg(pt + fp[a][r] + cq + 4) : 0;
                    }
                // the probes of A tile a at a step (step 0: the first key, then the mid), copied
                // into rows 16a + 8r + g (quad lane cq: pieces cq + 4m, swizzled by row & 7)
                auto issue = [&](int a, int step) {
                    bool any = false;
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int l = lo[a][r], u = hi[a][r];
                        const int ps = step == 0 ? (u > l ? l : -1) : (u - l > 1 ? l + ((u - l) >> 1) : -1);
                        pos[a][r]    = ps;
                        const int e  = (ps >> sh) - fp[a][r];
                        const int pv = (e >> 2) & 1 ? pe1[a][r] : pe0[a][r];
                        int       page = __shfl_sync(kFull, pv, (lane & ~3) | (e & 3));
                        if (ps < 0) continue;
                        any = true;
                        if (e >= npg || e < 0) page = __ldg(pt + (ps >> sh));
                        if (p.e8)
                            dequant_probe_row<D>(kbuf, 16 * a + 8 * r + g, cq, p, (int64_t)page * p.H + kvh,
                                                 ps & (p.P - 1), kvh);
                        else
                            copy_probe_row<D>(kbuf, 16 * a + 8 * r + g, cq,
                                              kbase + (size_t)page * page_stride + (size_t)(ps & (p.P - 1)) * D);
                    }
                    cp_async_commit();
                    act[a] = __any_sync(kFull, any);
                };
#pragma unroll
                for (int a = 0; a < NA; a++) issue(a, 0);
                for (int step = 0; step < 64; step++) { // (a chunk's descent is <= 32 steps)
                    bool more = false;
#pragma unroll
                    for (int a = 0; a < NA; a++) {
                        // the oldest group in flight is this tile's (one group per tile a step)
                        if constexpr (NA == 2) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
                        else asm volatile("cp.async.wait_group 0;\n" ::: "memory");
                        __syncwarp();
                        if (act[a]) {
                            // (rows 8-15 of an A tile past the warp's W rows: rows 0-7 again, unused)
                            float ca[4], cb[4];
                            tr_mma_tile<D>(kbuf, 16 * a, 16 * a + 8 < W, lane, bq, ca, cb);
                            float v[4]; // R, L of row g; of g + 8
                            tr_slot_max<true>(ca, cb, nq, lane, v);
#pragma unroll
                            for (int r = 0; r < 2; r++) {
                                const int ps = pos[a][r];
                                if (ps < 0) continue;
                                const float sR = v[2 * r], sL = v[2 * r + 1];
                                if (step == 0) sl[a][r] = sL, sf[a][r] = sR;
                                else if (sR > sl[a][r]) lo[a][r] = ps, sl[a][r] = sL, sf[a][r] = sR;
                                else hi[a][r] = ps;
                            }
                            __syncwarp(); // every lane has read the rows before they are refilled
                            issue(a, step + 1);
                        } else {
                            cp_async_commit(); // (an empty group keeps one group per tile a step)
                        }
                        more |= act[a];
                    }
                    if (!more) break;
                }
                asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll
                for (int a = 0; a < NA; a++)
#pragma unroll
                    for (int r = 0; r < 2; r++)
                        if (cq == 0 && hi[a][r] > lo[a][r] && 16 * a + 8 * r < W)
                            atomicMax(scores + w0 + 16 * a + 8 * r + g, score_key(sf[a][r]));
            }
        }
    }
    __syncthreads(); // (the select reuses the rows' shared memory)
    select_if_last(p, bgrp, kvh, smem);
}

// ---- host side -------------------------------------------------------------------------------

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// Scratch layout for head dim D; offsets of n_ch, cnt, chunks, scores, qfrag and the total.
size_t scratch_layout(int32_t n_qb, int32_t n_head, const lc_prune_chunks_args *a, int D, size_t off[5]) {
    const size_t pairs = (size_t)n_qb * (size_t)a->n_groups, mc = (size_t)(a->max_chunks > 0 ? a->max_chunks : 0);
    const int    nq    = (a->max_rows + a->q_stride - 1) / a->q_stride;
    const size_t n_mt  = (size_t)((nq + 15) / 16);
    off[0]             = 0;
    off[1]             = align256(off[0] + pairs * sizeof(int32_t));
    off[2]             = align256(off[1] + pairs * sizeof(int32_t));
    off[3]             = align256(off[2] + pairs * mc * sizeof(int2));
    off[4]             = align256(off[3] + pairs * mc * sizeof(uint32_t));
    return align256(off[4] + (size_t)n_qb * n_head * 2 * n_mt * 32 * (size_t)(D / 4) * 4);
}

struct dev_info {
    int n_sm, smem_optin, smem_sm;
};
dev_info device_info(void) {
    static dev_info di = {0, 0, 0};
    if (di.n_sm == 0) {
        int dev = 0, n = 0, o = 0, s = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&o, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&s, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
            n = 108, o = 163 * 1024, s = 164 * 1024;
        (void)cudaGetLastError();
        di = dev_info{n, o, s};
    }
    return di;
}

template <int D, int MODE, int S, int TPR, bool TR = false>
int launch_score(const stage_params &p, dim3 grid, int threads) {
    LC_CUDA_SMEM_ONCE(device_info().smem_optin, hip_score_kernel<D, MODE, S, TPR, TR>);
    hip_score_kernel<D, MODE, S, TPR, TR><<<grid, threads, (size_t)p.smem_bytes, lc_cuda_stream()>>>(p);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

// RELATIVE: two tiles per mma pass where a warp has two or more
template <int D, int MODE> int launch_mode(const stage_params &p, dim3 grid, int threads) {
    if (p.tr)
        return p.S == 1   ? launch_score<D, MODE, 1, 1, true>(p, grid, threads)
               : p.S == 2 ? launch_score<D, MODE, 2, 1, true>(p, grid, threads)
                          : launch_score<D, MODE, 4, 1, true>(p, grid, threads);
    if constexpr (MODE == LC_SCAN_RELATIVE) {
        if (p.S * p.n_mt >= 2)
            return p.S == 1   ? launch_score<D, MODE, 1, 2>(p, grid, threads)
                   : p.S == 2 ? launch_score<D, MODE, 2, 2>(p, grid, threads)
                              : launch_score<D, MODE, 4, 2>(p, grid, threads);
    }
    return p.S == 1   ? launch_score<D, MODE, 1, 1>(p, grid, threads)
           : p.S == 2 ? launch_score<D, MODE, 2, 1>(p, grid, threads)
                      : launch_score<D, MODE, 4, 1>(p, grid, threads);
}

template <int D, int S> int launch_dec(const stage_params &p, dim3 grid) {
    hip_score_dec_kernel<D, S><<<grid, 128, (size_t)p.smem_bytes, lc_cuda_stream()>>>(p);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

template <int D> int launch_all(const stage_params &p, dim3 grid, int threads) {
    cudaStream_t  st    = lc_cuda_stream();
    const int64_t nprep = (int64_t)p.n_pairs + (int64_t)p.n_qb * p.n_uh * p.n_mt;
    hip_prep_kernel<D><<<(unsigned)nprep, kPrepThreads, 0, st>>>(p);
    LC_CUDA_LAUNCHED();
    if (p.tr == 2)
        return p.S == 1 ? launch_dec<D, 1>(p, grid) : p.S == 2 ? launch_dec<D, 2>(p, grid) : launch_dec<D, 4>(p, grid);
    switch (p.mode) {
    case LC_SCAN_PLAIN: return launch_mode<D, LC_SCAN_PLAIN>(p, grid, threads);
    case LC_SCAN_RELATIVE: return launch_mode<D, LC_SCAN_RELATIVE>(p, grid, threads);
    default: return launch_mode<D, LC_SCAN_CHUNK>(p, grid, threads);
    }
}

// Shared memory of one unit with S tiles per warp.
int unit_bytes(int D, int mode, int n_rot, int n_mt, int S, int npg, int *tab_stride) {
    const int W = 8 * S * n_mt, ts = ((n_rot + 3) & ~3) + 4;
    *tab_stride = ts;
    size_t b = (size_t)W * D * 2 + (mode == LC_SCAN_RELATIVE ? 0 : (size_t)W * ts * 4) +
               (size_t)n_mt * 2 * W * 4 + (size_t)W * 16 + (size_t)2 * W * 8 + (size_t)W * 4 +
               (size_t)W * npg * 4 + (size_t)2 * S * n_mt * 4;
    return (int)((b + 15) & ~(size_t)15);
}

} // namespace

extern "C" size_t lc_cuda_prune_chunks_scratch_bytes(int32_t n_qb, int32_t n_head, const lc_prune_chunks_args *a) {
    if (!a || n_qb <= 0 || n_head <= 0 || a->q_stride < 1 || a->max_rows < 1 || a->n_groups < 1) return 0;
    size_t off[5];
    return scratch_layout(n_qb, n_head, a, 128, off); // head dims up to 128
}

extern "C" int lc_cuda_prune_chunks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                 const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                                 int32_t n_head, const lc_rope_table *rope,
                                 const lc_prune_chunks_args *a, const lc_cuda_rot_tiles *rot,
                                 const lc_tuning *tune, void *scratch, size_t scratch_bytes) {
    const int st0 = lc_prune_chunks_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st0 != LC_OK) return st0;
    if (!tune) return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: no tuning");
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size;
    if (P & (P - 1))
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: page size %d is not a power of two", P);
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "prune_chunks: head dim %d on CUDA (64 or 128)", D);
    if (n_qb == 0) return LC_OK;
    size_t       off[5];
    const size_t need = scratch_layout(n_qb, n_head, a, D, off);
    if (!scratch || scratch_bytes < need)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: scratch of %zu bytes, %zu needed",
                       scratch_bytes, need);
    const int G  = n_head / H;
    const int nq = (a->max_rows + a->q_stride - 1) / a->q_stride * (a->kv_descent ? G : 1);
    if (nq > 256)
        return lc_fail(LC_ERR_UNSUPPORTED, "prune_chunks: %d pooled queries per block%s on CUDA "
                       "(at most 256)", nq, a->kv_descent ? " and KV head" : "");

    stage_params p;
    memset(&p, 0, sizeof p);
    p.seqs = seqs, p.qb = qb, p.q_raw = q_raw, p.k = (const uint16_t *)kv->k;
    p.e8 = kv->e4m3, p.kc = kv->e4m3 ? kv->k_centre : NULL;
    p.cs = rope->cos, p.sn = rope->sin;
    p.n_qb = n_qb, p.n_head = n_head, p.hpk = G, p.H = H, p.P = P;
    p.n_uh = a->kv_descent ? H : n_head, p.uhpk = a->kv_descent ? 1 : G, p.rmul = a->kv_descent ? G : 1;
    p.p_shift = 0;
    while ((1 << p.p_shift) < P) p.p_shift++;
    p.n_pos = rope->n_pos, p.n_rot = rope->n_rot, p.neox = rope->pairing == LC_ROPE_NEOX;
    p.tab16 = (rope->n_rot / 2) % 4 == 0 && ((uintptr_t)rope->cos % 16) == 0 &&
              ((uintptr_t)rope->sin % 16) == 0;
    p.chunk = a->chunk, p.n_keep = a->n_keep, p.q_stride = a->q_stride, p.n_sink = a->n_sink;
    p.n_stream = a->n_stream, p.mode = a->scan_rope, p.n_groups = a->n_groups;
    p.first_offset = a->in ? 0 : a->first_offset;
    p.first_stride = a->in || a->first_stride <= 0 ? a->chunk : a->first_stride;
    p.max_chunks = a->max_chunks, p.in_cap = a->in_cap, p.n_mt = (nq + 15) / 16;
    p.n_pairs = n_qb * a->n_groups;
    p.in = a->in, p.in_n = a->in_n, p.out = a->out, p.out_n = a->out_n;
    p.list = a->list, p.from = a->from, p.stage = a->stage;
    char *s  = (char *)scratch;
    p.n_ch   = (int32_t *)(s + off[0]);
    p.cnt    = (int32_t *)(s + off[1]);
    p.chunks = (int2 *)(s + off[2]);
    p.scores = (uint32_t *)(s + off[3]);
    p.qfrag  = (uint32_t *)(s + off[4]);
    p.rk = NULL, p.rpre = NULL, p.n_rpre = 0;
    if (rot && rot->n_pre > 0 && rot->tiles > 0 && a->scan_rope == LC_SCAN_PLAIN) {
        const int st = lc_cuda_rotate_keys(kv, seqs, rope, rot);
        if (st != LC_OK) return st;
        p.rk = (const uint16_t *)rot->k, p.rpre = rot->pre, p.n_rpre = rot->n_pre;
    }

    // Score CTA: hpc query heads of one KV head x n_mt m-tiles, one warp each, about 4 warps
    // (small CTAs: several per SM drift apart, so one's loads overlap another's mma); nb
    // blocks of them (first stage only, where the chunk grids coincide) in the test mode. S
    // tiles of 8 chunks per warp: 4 (2 with table rows, or several m-tiles), fewer where that
    // leaves the GPU with less than one round of CTAs (decode: shorter steps, more CTAs).
    const dev_info di   = device_info();
    p.global_select     = tune->stage_one_cta;
    const bool rel      = a->scan_rope == LC_SCAN_RELATIVE;
    p.hpc = 4 / p.n_mt;
    if (p.hpc > p.uhpk) p.hpc = p.uhpk;
    if (p.hpc < 1) p.hpc = 1;
    p.nb = 1;
    if (p.global_select && !a->in) {
        p.nb = kMaxWarps / (p.hpc * p.n_mt);
        if (p.nb > 4) p.nb = 4;
        if (p.nb > n_qb) p.nb = n_qb;
        if (p.nb < 1) p.nb = 1;
    }
    p.n_hsub  = (p.uhpk + p.hpc - 1) / p.hpc;
    p.npg     = (int32_t)(((int64_t)P - 1 + a->chunk - 1) / P + 1);
    if (p.npg > 8) p.npg = 8;
    // Decode-sized launches (one m-tile, at most 8 query columns a unit) score transposed
    // (p.tr; tuning.stage_transpose=off: as the others). A CTA of fewer one-warp units than
    // kSelWarps (a decode row with one descent per KV head, or G < 4) takes that many chunk
    // ranges at once (p.nsub), rather than one range with the other warps only joining the
    // select, which one warp runs slowly (bench/NOTES.md 29).
    p.tr = p.n_mt == 1 && nq * (rel ? 2 : 1) <= 8 &&
           tune->stage_transpose != LC_TUNE_TRANSPOSE_OFF;
    // relative RoPE (keys as stored): straight into registers (tuning.stage_transpose=smem:
    // through shared memory)
    if (p.tr && rel && !p.global_select && tune->stage_transpose != LC_TUNE_TRANSPOSE_SMEM)
        p.tr = 2;
    const int     units  = p.nb * p.hpc;
    p.nsub = 1;
    if (p.n_mt == 1 && units < kSelWarps && !p.global_select) p.nsub = kSelWarps / units;
    const int64_t ctas_x = (int64_t)(n_qb + p.nb - 1) / p.nb * H * p.n_hsub;
    int64_t       per_sm = kMaxWarps / (units * p.n_mt); // units resident per SM (warps' limit)
    if (per_sm < 1) per_sm = 1;
    // (relative RoPE in a prefill-sized call: 2, with two tiles per mma pass — H100, 32K rows:
    // stage 1 at 1M 45.4 -> 44.2 ms, at 128K 5.78 -> 5.63 ms vs 4)
    int S = p.n_mt == 1 ? (rel && a->max_rows == 1 ? 4 : 2) : (p.n_mt <= 8 ? 2 : 1);
    while (S > 1 && ctas_x * (((int64_t)a->max_chunks + 4 * S * p.n_mt - 1) / (4 * S * p.n_mt)) <=
                        (int64_t)di.n_sm * per_sm)
        S /= 2;
    if (tune->stage_tiles == 1 || tune->stage_tiles == 2 || tune->stage_tiles == 4)
        S = tune->stage_tiles;
    while (S > 1 && S * p.n_mt > 32) S /= 2; // the tile flags are read one per lane
    int ts = 0;
    for (;;) {
        p.unit_bytes = unit_bytes(D, a->scan_rope, rope->n_rot, p.n_mt, S, p.npg, &ts);
        if ((int64_t)p.unit_bytes * units * p.nsub <= di.smem_optin) break;
        if (p.nsub > 1) {
            p.nsub /= 2;
            continue;
        }
        if (S == 1)
            return lc_fail(LC_ERR_UNSUPPORTED, "prune_chunks: %lld bytes of shared memory per block "
                           "(%d available)", (long long)p.unit_bytes * units, di.smem_optin);
        S /= 2;
    }
    const int     threads = 32 * (units * p.nsub * p.n_mt > kSelWarps ? units * p.nsub * p.n_mt : kSelWarps);
    p.S          = S;
    p.tab_stride = ts;
    p.smem_bytes = p.unit_bytes * units * p.nsub;
    if (p.tr == 2) { // 4 warps' probe rows, or the select's keys if more (staged up to 48 KB)
        int64_t sel = ((int64_t)kSelHead + a->max_chunks) * 4;
        if (sel > 48 * 1024) sel = 48 * 1024;
        const int64_t rows = 4 * 8 * S * D * 2;
        p.smem_bytes       = (int32_t)(sel > rows ? sel : rows);
    }
    if (p.smem_bytes < (kSelHead + 64) * 4) p.smem_bytes = (kSelHead + 64) * 4;
    const int64_t by_smem = di.smem_sm / (p.smem_bytes + 1024) * p.nsub;
    if (by_smem < per_sm) per_sm = by_smem > 0 ? by_smem : 1;
    // chunk tiles (grid y, nsub to a CTA): enough units for two rounds of the resident ones (or
    // more, below).
    const int     W      = 8 * S * p.n_mt;
    const int64_t waves  = ((int64_t)a->max_chunks + W - 1) / W;
    const int64_t target = 2 * (int64_t)di.n_sm * per_sm;
    int64_t       tiles  = (target + ctas_x - 1) / ctas_x;
    if (tiles > waves) tiles = waves;
    if (tiles < 1 || p.global_select) tiles = 1;
    int64_t wpt = (waves + tiles - 1) / tiles;
    // first stage of a prefill: at most 4 waves per CTA, so that the CTAs resident at a time
    // probe a narrower band of the common chunk grid (H100, 32K rows: stage 1 -3% at 1M, -2%
    // at 128K; 1 wave per CTA was slower, its per-CTA setup repeated)
    // (with one descent per KV head, 8: 48.1 -> 47.2 ms at 1M, H100, bench/NOTES.md 29)
    const int64_t wpt_cap = a->kv_descent ? 8 : 4;
    if (!a->in && a->max_rows > 1 && wpt > wpt_cap) wpt = wpt_cap;
    if (wpt < 1) wpt = 1;
    while (((waves + wpt - 1) / wpt + p.nsub - 1) / p.nsub > 65535) wpt *= 2;
    if (wpt * W > 0x7fffffff / 2)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: %d chunks is too many", a->max_chunks);
    p.cpt       = (int32_t)(wpt * W);
    tiles       = waves > 0 ? (waves + wpt - 1) / wpt : 1;
    if (p.nsub > tiles) p.nsub = (int32_t)tiles; // (the smem and threads above stay enough)
    tiles       = (tiles + p.nsub - 1) / p.nsub;
    p.ctas_per_pair = (int32_t)((a->n_groups == 1 ? H : 1) * p.n_hsub * tiles);
    if (ctas_x > 0x7fffffff || (int64_t)p.n_pairs + (int64_t)n_qb * p.n_uh * p.n_mt > 0x7fffffff ||
        (int64_t)p.ctas_per_pair > 0x7fffffff / 2)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: %d blocks is too many", n_qb);
    const dim3 grid((unsigned)ctas_x, (unsigned)tiles);
    return D == 64 ? launch_all<64>(p, grid, threads) : launch_all<128>(p, grid, threads);
}
