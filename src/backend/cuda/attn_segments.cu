// attn_segments.cu — InfiniteHiP block-sparse attention on the GPU (op attn_segments), the twin of
// lc_cpu_attn_segments (backend/cpu/cpu_attn_segments.c); contract in backend/backend.h "Sparse
// attention"; digest spec/infinitehip-and-hip.md §3–4 (the BSA step: sink + selected chunks +
// sliding window, StreamingLLM re-indexing §4.2). Pools in the fp8 layout (backend.h
// LC_KV_E4M3, sp_params.e8) are read through kv8_load8: each 16-byte piece a path copies is
// loaded as 8 codes and stored dequantised instead (bench/NOTES.md 64).
//
// The attended keys of a query block b and group g form one list, the same for every row of
// the block: sink [0, n_s), the selected segments in position order, the window [win0, last
// row]. List index i has rope position base + i (STREAMING, base = win0 - n_sink_keys - n_sel),
// that with the gaps compressed (GAPS, lc_gap_pos) or its token (PLAIN). K/V are read from the paged fp16 pools in place (no gathered copy in
// global memory); every key is rotated with its own table row (fp32) and rounded to fp16;
// products on tensor cores in fp16 with fp32 accumulation, as our dense kernels.
//
//  * decode (a call whose blocks are all one row, max_rows == 1): Flash-Decoding with small
//    CTAs, all in flight at once. A CTA owns (block, KV head, split): at most 64 consecutive
//    list entries, built in shared memory by the CTA itself from a scan of the segment list
//    (lists of more than 4 segments a thread, e.g. TokenSelect's ~2000 one-token segments: each
//    warp a contiguous range of segments, its lanes reading consecutive ones, coalesced; shorter
//    lists: per-thread ranges; tuning.sparse_decode_scan=thread|warp forces one), and all G
//    query heads of the KV head, so each K/V byte is read once. Each
//    thread looks up the pages of its two keys and issues every load of the CTA at once: K
//    into registers (16-byte loads; the head dims are permuted identically in the query and
//    key fragments, so a loaded chunk is directly an mma operand), V and the keys' table rows
//    into shared memory. Each warp takes 16 keys: rotation in registers, S = Q Kᵀ and O = P V
//    as m16n8k16 (the G query heads are the rows), the warps merge in shared memory, and a
//    merge kernel — launched as a programmatic dependent of the split kernel on sm_90, so its
//    launch hides behind the splits — combines the splits (log-sum-exp).
//  * prefill (any other call, or every call with tuning.sparse_decode_prefill; its 1-row
//    blocks go this way too): a small kernel writes each
//    (block, group)'s list as (position, page slot) pairs into scratch. On sm_90a the
//    attention kernel is warp-specialised wgmma (FlashAttention-3 style, as our dense
//    attn_prefill_hopper_kernel): a producer warpgroup gathers each 64-key tile of the list
//    from the pages with cp.async straight into 128-byte-swizzled stage buffers (a ring of
//    NS stages, NS - 2 tiles in flight), rotates K into fp16 in place (each thread one key's
//    half: the table row in registers, loaded one tile ahead), and hands the stage to two
//    consumer warpgroups (64 packed (row, head) rows each) that run S = Q Kᵀ (fp16) and
//    O += P V (fp16: P rounded to fp16, V as the pages hold it, so the producer makes no pass
//    over V) as asynchronous wgmma, overlapped with the online softmax; only the window keys
//    are masked (causal). With PLAIN RoPE in a prefill-sized call the backend passes the
//    prefill sequences' keys rotated once per layer into fp16 tiles of the same swizzled
//    layout (lc_cuda_rot_tiles, filled by lc_cuda_rotate_keys in rotated_keys.cu, here or in
//    the layer's first prune_chunks): the list then names tile rows (and the values' page slots), and the producer
//    of a block of such a sequence only copies (no table rows, no pass over the stage; H100,
//    8B shape, 32K rows at 128K: ~9.6 -> ~5 ms). Elsewhere (sm_80, or
//    tuning.sparse_prefill_mma) an mma.sync FlashAttention-2 kernel over the same gathered
//    tiles, from the pages, all in fp16. (Streaming RoPE composed as R(base + 64 t) R(j) — one
//    table row per tile, key j's own in registers — was tried instead of a row per key: 2.8 ms
//    slower at 1M, reverted. So were CTA pairs sharing the rotation: a block's two CTAs as a
//    cluster, each rotating half of every tile's keys into both CTAs' stages through
//    distributed shared memory, arriving on both CTAs' barriers: streaming at 1M 8.6 -> 12.4 ms,
//    14.1 with one arrival a warp (H100, bench_attn_segments); removed.)
// The launch shapes depend only on n_qb and the args' bounds: graph-capturable.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/attn_tiles.cuh"
#include "backend/cuda/device_prims.cuh"

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int SP_DMAX = 128; // head dims 64 and 128
constexpr int SP_MAXG = 16;  // query heads per KV head
constexpr int DEC_NT = 128, DEC_K = 64; // decode: threads, list entries of one CTA (4 warps x 16)
constexpr int PRE_NT = 256, PRE_TK = 64, PRE_BM = 128;

struct sp_params {
    const lc_kv16       *kpool, *vpool; // [n_pages][H][P][D], or the fp8 layout's slabs (e8)
    const float         *kc;            // e8: the key centres [H][D] (NULL: zero)
    int32_t              e8;            // the pools hold the fp8 layout (backend.h LC_KV_E4M3)
    const int32_t       *slab_map;      // [n_pages][H] or NULL (lc_kv_layer_view.slab_map)
    const lc_attn_seq   *seqs;
    const lc_qblock *qb;
    const lc_segment    *sel;   // [n_qb][n_groups][sel_cap]
    const int32_t       *sel_n; // [n_qb][n_groups]
    const int32_t       *list;  // [n_qb] or NULL: block b's sel / sel_n lists at list[b] (backend.h)
    const float         *q;     // [rows][n_head][D], rotated
    float               *out;   // [rows][n_head][D]
    const float         *cs, *sn; // [n_pos][half_rot]
    int32_t              H, G, n_head, page_shift, n_groups, sel_cap, n_sink, streaming;
    int32_t              gap_span; // GAPS (streaming set too): > 0; STREAMING: 0
    int32_t              half_rot, n_pos;
    float                scale_log2; // softmax scale * log2(e)
    // plain RoPE, rotated tiles (lc_cuda_rot_tiles): blocks of the listed sequences read them
    const __half        *rk;
    const int32_t       *rpre;
    int32_t              n_rpre;
    int32_t              dec_warp_scan; // decode list: 1 seg_scan_warp past 4 segments a thread, else
                                        // seg_scan; 0 always seg_scan, 2 always seg_scan_warp
};

// ---- small device helpers ------------------------------------------------------------------

__device__ __forceinline__ uint4 ldg_u4(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}
__device__ __forceinline__ float4 ldg_f4(const float *p) { return __ldg((const float4 *)p); }
// One 16-byte chunk of 4 adjacent pairs (2i, 2i+1) rotated by cos c / sin s into fp16.
__device__ __forceinline__ uint4 rot_adjacent(uint4 x, float4 c, float4 s) {
    const float cc[4] = {c.x, c.y, c.z, c.w}, ss[4] = {s.x, s.y, s.z, s.w};
    const uint32_t *u = (const uint32_t *)&x;
    uint32_t r[4];
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const float x0 = kv_lo(u[w]), x1 = kv_hi(u[w]);
        r[w] = pack_f16(x0 * cc[w] - x1 * ss[w], x0 * ss[w] + x1 * cc[w]);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}
// Two 16-byte chunks: dims 8c..8c+7 (lo) and their split-half partners + D/2 (up), pairs
// (i, i + D/2) rotated by the 8 cos / sin values of pairs 8c..8c+7.
__device__ __forceinline__ void rot_halves(uint4 &lo, uint4 &up, float4 c0, float4 c1, float4 s0,
                                           float4 s1) {
    const float     cc[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    const float     ss[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    const uint32_t *ua = (const uint32_t *)&lo, *ub = (const uint32_t *)&up;
    uint32_t        ra[4], rb[4];
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const float x0 = kv_lo(ua[w]), x1 = kv_hi(ua[w]), y0 = kv_lo(ub[w]), y1 = kv_hi(ub[w]);
        ra[w] = pack_f16(x0 * cc[2 * w] - y0 * ss[2 * w], x1 * cc[2 * w + 1] - y1 * ss[2 * w + 1]);
        rb[w] = pack_f16(x0 * ss[2 * w] + y0 * cc[2 * w], x1 * ss[2 * w + 1] + y1 * cc[2 * w + 1]);
    }
    lo = make_uint4(ra[0], ra[1], ra[2], ra[3]);
    up = make_uint4(rb[0], rb[1], rb[2], rb[3]);
}

// Programmatic dependent launch (sm_90): the primary lets its dependent start launching; the
// dependent waits for the primary's completion (and its memory) before reading its output.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// ---- the attended key list ------------------------------------------------------------------

// Tokens of segment s inside the candidates [lo, hi): count, first token in *first.
__device__ __forceinline__ int clip_len(const lc_segment &s, int lo, int hi, int *first) {
    const int       a = max(s.start, lo);
    const long long e = min((long long)s.start + s.len, (long long)hi);
    *first            = a;
    return e > a ? (int)(e - a) : 0;
}

// Block-wide scan of a selection list: thread t owns segments [j0, j1) (a contiguous share),
// off = selected tokens before j0; returns the total. red: NT / 32 ints of shared memory.
template <int NT>
__device__ int seg_scan(const lc_segment *s, int ns, int lo, int hi, int &j0, int &j1, int &off,
                        int *red) {
    const int per = (ns + NT - 1) / NT;
    j0 = min(ns, (int)threadIdx.x * per), j1 = min(ns, j0 + per);
    int sum = 0, f;
#pragma unroll 4
    for (int j = j0; j < j1; j++) sum += clip_len(s[j], lo, hi, &f);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int x    = warp_incl_scan(sum);
    if (lane == 31) red[warp] = x;
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < NT / 32; w++) {
        const int v = red[w];
        before += w < warp ? v : 0;
        total += v;
    }
    off = before + x - sum;
    __syncthreads(); // red may be reused
    return total;
}

// f(r, token) for the selected tokens of rank r in [r0, r1) among this thread's segments.
template <typename F>
__device__ void seg_emit(const lc_segment *s, int j0, int j1, int off, int lo, int hi, int r0,
                         int r1, F f) {
    for (int j = j0; j < j1 && off < r1; j++) {
        int       a;
        const int len = clip_len(s[j], lo, hi, &a);
        const int b0 = max(off, r0), b1 = min(off + len, r1);
        for (int r = b0; r < b1; r++) f(r, a + (r - off));
        off += len;
    }
}

// The decode kernel's list from a long list of short segments (TokenSelect: ~2000 one-token
// runs): warp w owns a contiguous range of segments [j0, j1) and its lanes read consecutive
// segments (coalesced: the per-thread ranges of seg_scan cost one L2 request per segment and
// lane, ~10 us per call on H100 for 2048 one-token segments). Returns the total; wsum = the
// warp's tokens, off = tokens before j0.
template <int NT>
__device__ int seg_scan_warp(const lc_segment *s, int ns, int lo, int hi, int &j0, int &j1, int &off,
                             int &wsum, int *red) {
    constexpr int NW   = NT / 32;
    const int     lane = threadIdx.x & 31, warp = threadIdx.x >> 5, per = (ns + NW - 1) / NW;
    j0 = min(ns, warp * per), j1 = min(ns, j0 + per);
    int sum = 0, f;
    for (int j = j0 + lane; j < j1; j += 32) sum += clip_len(s[j], lo, hi, &f);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < NW; w++) {
        const int v = red[w];
        before += w < warp ? v : 0;
        total += v;
    }
    off = before, wsum = sum;
    __syncthreads(); // red may be reused
    return total;
}

// f(r, token) for the selected tokens of rank r in [r0, r1) among the warp's segments (every
// lane of the warp calls it).
template <typename F>
__device__ void seg_emit_warp(const lc_segment *s, int j0, int j1, int off, int wsum, int lo, int hi,
                              int r0, int r1, F f) {
    if (off >= r1 || off + wsum <= r0) return; // (uniform over the warp)
    const int lane = threadIdx.x & 31;
    for (int jj = j0; jj < j1 && off < r1; jj += 32) {
        const int j = jj + lane;
        int       a = 0;
        const int len = j < j1 ? clip_len(s[j], lo, hi, &a) : 0;
        int       incl = len;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        const int my = off + incl - len, b0 = max(my, r0), b1 = min(my + len, r1);
        for (int r = b0; r < b1; r++) f(r, a + (r - my));
        off += __shfl_sync(0xffffffffu, incl, 31);
    }
}

// A list entry: (rope position, page slot = physical page * P + slot).
__device__ __forceinline__ int2 key_entry(const sp_params &a, const int32_t *pt, int tok, int pos) {
    const uint32_t P    = 1u << a.page_shift;
    const uint32_t phys = (uint32_t)pt[tok >> a.page_shift] * P + ((uint32_t)tok & (P - 1));
    return make_int2(min(max(pos, 0), a.n_pos - 1), (int)phys);
}
// Row (element offset / D) of the page slot e.y for KV head h.
// With a slab map (the slot cache of host-tier slabs, kv/slab_bank.h), the slab's cached copy.
__device__ __forceinline__ int64_t slot_row(const sp_params &a, int slot, int h) {
    const uint32_t s = (uint32_t)slot, P = 1u << a.page_shift;
    int64_t slab = (int64_t)(s >> a.page_shift) * a.H + h;
    if (a.slab_map) slab = __ldg(a.slab_map + slab);
    return (slab << a.page_shift) + (s & (P - 1));
}
// e8: 8 elements [d, d + 8) of K (key) or V at row `row` (slot_row's) of KV head h as fp16
__device__ __forceinline__ uint4 kv8_at(const sp_params &a, bool key, int64_t row, int h, int d, int D) {
    const int P = 1 << a.page_shift;
    return kv8_load8((const unsigned char *)(key ? a.kpool : a.vpool), row >> a.page_shift,
                     (int)(row & (P - 1)), d, P, D, key && a.kc ? a.kc + (int64_t)h * D : NULL);
}

// Chunk c (16 bytes) of the key entry e: c < D/8: K; < D/4: V; then the table row's cos
// (half_rot/4 chunks) and sin. Rows past the list are zero-filled.
template <int D>
__device__ __forceinline__ void load_chunk(const sp_params &a, int h, int2 e, bool valid, int c,
                                           lc_kv16 *kd, lc_kv16 *vd, float *td) {
    const int64_t row = slot_row(a, e.y, h);
    const int     nb  = valid ? 16 : 0;
    if (c < D / 4 && a.e8) { // dequantised on the way (a plain store, zeros past the list)
        const bool key = c < D / 8;
        const int  cc  = key ? c : c - D / 8;
        *(uint4 *)((key ? kd : vd) + cc * 8) = valid ? kv8_at(a, key, row, h, 8 * cc, D) : make_uint4(0, 0, 0, 0);
    } else if (c < D / 8) {
        cp_async16_zfill(kd + c * 8, valid ? a.kpool + row * D + c * 8 : a.kpool, nb);
    } else if (c < D / 4) {
        const int cc = c - D / 8;
        cp_async16_zfill(vd + cc * 8, valid ? a.vpool + row * D + cc * 8 : a.vpool, nb);
    } else {
        const int    HR = a.half_rot, tc = c - D / 4, q4 = HR / 4;
        const bool   is_cos = tc < q4;
        const int    k4     = (is_cos ? tc : tc - q4) * 4;
        const float *src    = (is_cos ? a.cs : a.sn) + (int64_t)e.x * HR + k4;
        cp_async16_zfill(td + (is_cos ? 0 : HR) + k4, valid ? src : a.cs, nb);
    }
}

// ---- list kernel (prefill calls) -----------------------------------------------------------

// grid (n_qb, n_groups), block 256: lists[b][g][0 .. N) and hdr[b][g] = (N, n_pre, win0, 0)
__global__ void __launch_bounds__(256)
    sparse_list_kernel(sp_params a, int64_t L_cap, int2 *__restrict__ lists, int4 *__restrict__ hdr) {
    __shared__ int red[8];
    const int           b = blockIdx.x, g = blockIdx.y;
    const lc_qblock B = a.qb[b];
    const int64_t     gl   = (int64_t)b * a.n_groups + g;
    const int64_t     sl   = (int64_t)(a.list ? a.list[b] : b) * a.n_groups + g;
    const lc_segment *segs = a.sel + sl * a.sel_cap;
    const int         ns   = min(max(a.sel_n[sl], 0), a.sel_cap);
    const int         last = B.pos0 + B.n_rows - 1;
    const int         win0 = min(max(B.win0, 0), B.pos0 + 1), n_s = min(a.n_sink, win0);
    int               j0, j1, off;
    const int         n_sel = seg_scan<256>(segs, ns, a.n_sink, win0, j0, j1, off, red);
    const int         n_pre = n_s + n_sel;
    const int N = (int)min((int64_t)n_pre + max(0, last - win0 + 1), L_cap);
    const int base = win0 - n_pre;
    const int keep = a.gap_span > 0 ? lc_gap_keep(a.gap_span, n_pre, last - win0 + 1, base) : 0;
    const int32_t *pt = a.seqs[B.seq].page_table;
    int2          *L  = lists + gl * L_cap;
    // plain RoPE with rotated tiles: entries (page slot, 64 * tile + slot of the tiles)
    int64_t rt = -1;
    if (a.n_rpre > 0 && !a.streaming) {
        int64_t t0 = 0;
        for (int i = 0; i < a.n_rpre && rt < 0; i++) {
            const lc_attn_seq sq = a.seqs[a.rpre[i]];
            if (a.rpre[i] == B.seq) rt = t0;
            t0 += (sq.pos0 + sq.n_rows + 63) / 64;
        }
    }
    auto ent = [&](int tok, int pos) -> int2 {
        if (rt < 0) return key_entry(a, pt, tok, pos);
        return make_int2(key_entry(a, pt, tok, pos).y, (int)(rt * 64 + tok));
    };
    for (int i = threadIdx.x; i < N; i += 256) {
        if (i < n_s) L[i] = ent(i, a.streaming ? lc_gap_pos(base, keep, i, i) : i);
        else if (i >= n_pre) {
            const int tok = win0 + (i - n_pre);
            L[i]          = ent(tok, tok);
        }
    }
    const int r1 = min(n_pre, N) - n_s;
    if (r1 > 0)
        seg_emit(segs, j0, j1, off, a.n_sink, win0, 0, r1, [&](int r, int tok) {
            L[n_s + r] = ent(tok, a.streaming ? lc_gap_pos(base, keep, n_s + r, tok) : tok);
        });
    if (threadIdx.x == 0) hdr[gl] = make_int4(N, min(n_pre, N), win0, rt >= 0 ? 1 : 0);
}

// ---- decode --------------------------------------------------------------------------------

// Table rows in the decode kernel's shared memory: cos | sin | pad, the pitch 64 bytes past a
// multiple of 128, so that the float4 reads of two keys by a quarter warp miss each other's banks.
__host__ __device__ constexpr int dec_tab_pitch(int HR) {
    return 2 * HR + (((64 - 8 * HR) % 128) + 128) % 128 / 4;
}
template <int D> struct dec_cfg {
    static constexpr int LDV = D + 8;             // V rows (fp16): conflict-free ldmatrix.trans
    static constexpr int V_B = DEC_K * LDV * 2;
    static constexpr int HDR = V_B + DEC_K * 8 + 64; // V, list entries, scan scratch
    static size_t smem(int HR, int G) {
        const size_t tab = (size_t)DEC_K * dec_tab_pitch(HR) * 4; // then the warps' merge area
        const size_t red = (size_t)(DEC_NT / 32) * G * (D + 2) * 4;
        return HDR + (tab > red ? tab : red);
    }
};

// The 16-byte chunk of head dims that slot j of a thread with lane % 4 == q loads (of each of
// its keys, and of its query rows): D / 32 slots per thread, 4 threads per key. With split-half
// pairs, slot j + D/64 holds the partner (dims + D/2) of slot j.
template <int D, bool NEOX> __device__ __forceinline__ int dec_chunk(int j, int q) {
    if (!NEOX) return 4 * j + q;
    return j < D / 64 ? 4 * j + q : 4 * (j - D / 64) + q + D / 16;
}

// grid (n_qb * n_splits, H), block 128 = 4 warps x 16 keys.
// The mma k index is a permutation of the head dims, the same for the query (A) and key (B)
// fragments: k-step 2j + hh, element e of register b0 (a0, a1) <-> dim 8 c + 4 hh + e and of
// b1 (a2, a3) <-> dim 8 c + 4 hh + 2 + e, c = dec_chunk(j, lane % 4): the 16 bytes a thread
// loads for slot j are its B registers of k-steps 2j and 2j + 1.
template <int D, bool NEOX>
__global__ void __launch_bounds__(DEC_NT, 4)
    sparse_decode_kernel(sp_params a, int n_splits, float *__restrict__ part) {
    using C = dec_cfg<D>;
    constexpr int LDV = C::LDV, NSL = D / 32, KS = D / 16, DT = D / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    lc_kv16 *Vs  = (lc_kv16 *)smem_raw;             // [DEC_K][LDV]
    int2    *ent = (int2 *)(smem_raw + C::V_B);     // [DEC_K] (position, token)
    int     *red = (int *)(ent + DEC_K);            // scan scratch
    float   *Ts  = (float *)(smem_raw + C::HDR);    // [DEC_K][pitch] table rows; then merge area

    const int           b = blockIdx.x / n_splits, split = blockIdx.x % n_splits, h = blockIdx.y;
    const int           gsel = a.n_groups == 1 ? 0 : h;
    const int64_t       gl   = (int64_t)(a.list ? a.list[b] : b) * a.n_groups + gsel;
    const lc_qblock B    = a.qb[b];
    const int           ns_in = a.sel_n[gl]; // loaded beside the block (one round trip)
    pdl_launch_dependents();                 // the merge kernel may start launching
    if (B.n_rows != 1) return;
    const int         tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, G = a.G, HR = a.half_rot;
    const int32_t    *pt   = a.seqs[B.seq].page_table;
    const lc_segment *segs = a.sel + gl * a.sel_cap;
    const int         ns   = min(max(ns_in, 0), a.sel_cap);
    const int p = B.pos0, win0 = min(max(B.win0, 0), p + 1), n_s = min(a.n_sink, win0);
    int       j0, j1, off, wsum = 0;
    // the warp scan for long lists only (> 4 segments a thread; H100: 2042 one-token segments
    // 31 -> 25 us a call, while 256 8-token ones were ~0.7 us slower with it than without)
    const bool wscan = a.dec_warp_scan > 1 || (a.dec_warp_scan == 1 && ns > 4 * DEC_NT);
    const int  n_sel = wscan ? seg_scan_warp<DEC_NT>(segs, ns, a.n_sink, win0, j0, j1, off, wsum, red)
                             : seg_scan<DEC_NT>(segs, ns, a.n_sink, win0, j0, j1, off, red);
    const int n_pre = n_s + n_sel, N = n_pre + (p - win0 + 1);
    const int per   = (N + n_splits - 1) / n_splits;
    const int i0 = min(N, split * per), nk = min(min(N, i0 + per) - i0, DEC_K);
    const int base = win0 - n_pre; // STREAMING: position of list index 0
    const int keep = a.gap_span > 0 ? lc_gap_keep(a.gap_span, n_pre, p - win0 + 1, base) : 0;
    const int last = a.n_pos - 1;

    // this CTA's list entries [i0, i0 + nk) as (position, token)
    for (int x = tid; x < nk; x += DEC_NT) {
        const int i = i0 + x;
        if (i < n_s)
            ent[x] = make_int2(min(max(a.streaming ? lc_gap_pos(base, keep, i, i) : i, 0), last), i);
        else if (i >= n_pre) {
            const int tok = win0 + (i - n_pre);
            ent[x]        = make_int2(min(tok, last), tok);
        }
    }
    {
        const int r0 = max(i0, n_s) - n_s, r1 = min(i0 + nk, n_pre) - n_s;
        auto      put = [&](int r, int tok) {
            const int i = n_s + r;
            ent[i - i0] =
                make_int2(min(max(a.streaming ? lc_gap_pos(base, keep, i, tok) : tok, 0), last), tok);
        };
        if (r1 > r0) {
            if (wscan) seg_emit_warp(segs, j0, j1, off, wsum, a.n_sink, win0, r0, r1, put);
            else seg_emit(segs, j0, j1, off, a.n_sink, win0, r0, r1, put);
        }
    }
    __syncthreads();

    // every load of the CTA at once: this thread's two keys (16 warp + g, + 8): page-table
    // lookup, K chunks into registers, its share of V and of the table rows into shared memory
    const int g = lane >> 2, q = lane & 3, TP = dec_tab_pitch(HR);
    uint4     kraw[2][NSL];
#pragma unroll
    for (int t = 0; t < 2; t++) {
        const int      x = 16 * warp + 8 * t + g;
        const bool     valid = x < nk;
        const int2     e     = valid ? ent[x] : make_int2(0, 0);
        const uint32_t P     = 1u << a.page_shift;
        const int      slot = valid ? (int)((uint32_t)pt[e.y >> a.page_shift] * P + ((uint32_t)e.y & (P - 1))) : 0;
        const int64_t  row  = slot_row(a, slot, h);
        const lc_kv16 *kg = a.kpool + row * D, *vg = a.vpool + row * D;
        if (a.e8) { // dequantised on the way: K into registers, V by plain stores
#pragma unroll
            for (int j = 0; j < NSL; j++)
                kraw[t][j] = valid ? kv8_at(a, true, row, h, 8 * dec_chunk<D, NEOX>(j, q), D) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int r = 0; r < D / 32; r++) {
                const int c = q + 4 * r;
                *(uint4 *)(Vs + x * LDV + 8 * c) = valid ? kv8_at(a, false, row, h, 8 * c, D) : make_uint4(0u, 0u, 0u, 0u);
            }
        } else {
#pragma unroll
            for (int j = 0; j < NSL; j++)
                kraw[t][j] = valid ? ldg_u4(kg + 8 * dec_chunk<D, NEOX>(j, q)) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int r = 0; r < D / 32; r++) {
                const int c = q + 4 * r;
                cp_async16_zfill(Vs + x * LDV + 8 * c, valid ? vg + 8 * c : a.vpool, valid ? 16 : 0);
            }
        }
        for (int c2 = q; c2 < HR / 2; c2 += 4) { // HR / 4 chunks of cos, then of sin
            const bool   is_cos = c2 < HR / 4;
            const int    k4     = (is_cos ? c2 : c2 - HR / 4) * 4;
            const float *src    = (is_cos ? a.cs : a.sn) + (int64_t)e.x * HR + k4;
            cp_async16_zfill(Ts + x * TP + (is_cos ? 0 : HR) + k4, valid ? src : a.cs, valid ? 16 : 0);
        }
    }
    cp_async_commit();
    // the query fragments (rows g and g + 8 = query heads of the KV head; rows >= G zero)
    uint32_t qa[KS][4];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        const int    row = g + 8 * hf;
        const bool   has = row < G;
        const float *qr  = a.q + ((int64_t)B.row0 * a.n_head + h * G + (has ? row : 0)) * D;
#pragma unroll
        for (int j = 0; j < NSL; j++) {
            const int    c  = dec_chunk<D, NEOX>(j, q);
            const float4 lo = has ? ldg_f4(qr + 8 * c) : make_float4(0.f, 0.f, 0.f, 0.f);
            const float4 hi = has ? ldg_f4(qr + 8 * c + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
            qa[2 * j][hf] = pack_f16(lo.x, lo.y), qa[2 * j][2 + hf] = pack_f16(lo.z, lo.w);
            qa[2 * j + 1][hf] = pack_f16(hi.x, hi.y), qa[2 * j + 1][2 + hf] = pack_f16(hi.z, hi.w);
        }
    }
    cp_async_wait_all();
    __syncthreads(); // V and the table rows landed

    // S = Q Kᵀ over the warp's 16 keys (tile t: keys 16 warp + 8 t + n), keys rotated in registers
    float s[2][4];
#pragma unroll
    for (int t = 0; t < 2; t++) {
        s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
        const float *tr = Ts + (16 * warp + 8 * t + g) * TP;
        if (NEOX) { // n_rot == D: every pair rotated
#pragma unroll
            for (int j = 0; j < NSL / 2; j++) {
                const int c = dec_chunk<D, NEOX>(j, q);
                rot_halves(kraw[t][j], kraw[t][j + NSL / 2], *(const float4 *)(tr + 8 * c),
                           *(const float4 *)(tr + 8 * c + 4), *(const float4 *)(tr + HR + 8 * c),
                           *(const float4 *)(tr + HR + 8 * c + 4));
            }
        } else {
#pragma unroll
            for (int j = 0; j < NSL; j++) {
                const int c = dec_chunk<D, NEOX>(j, q);
                if (4 * c < HR) // the dims past the rotated ones go to the mma as stored
                    kraw[t][j] = rot_adjacent(kraw[t][j], *(const float4 *)(tr + 4 * c),
                                              *(const float4 *)(tr + HR + 4 * c));
            }
        }
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const uint4 &w = kraw[t][kk >> 1];
            if (kk & 1) mma_f16(s[t], qa[kk], w.z, w.w);
            else mma_f16(s[t], qa[kk], w.x, w.y);
        }
    }
    // softmax of the split's keys (rows g and g + 8; 4 lanes share a row)
    float mx[2] = {-INFINITY, -INFINITY}, bs[2], lsum[2] = {0.f, 0.f};
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int   key = 16 * warp + 8 * t + 2 * q + (e & 1);
            const float v   = key < nk ? s[t][e] * a.scale_log2 : -INFINITY;
            s[t][e]         = v;
            mx[e >> 1]      = fmaxf(mx[e >> 1], v);
        }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        bs[i] = mx[i] == -INFINITY ? 0.f : mx[i];
    }
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float pe = exp2f(s[t][e] - bs[e >> 1]);
            s[t][e]        = pe;
            lsum[e >> 1] += pe;
        }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        lsum[i] += __shfl_xor_sync(0xffffffffu, lsum[i], 1);
        lsum[i] += __shfl_xor_sync(0xffffffffu, lsum[i], 2);
    }
    // O = P V over the warp's 16 keys
    const uint32_t pa[4] = {pack_f16(s[0][0], s[0][1]), pack_f16(s[0][2], s[0][3]),
                            pack_f16(s[1][0], s[1][1]), pack_f16(s[1][2], s[1][3])};
    float          o[DT][4];
#pragma unroll
    for (int dp = 0; dp < DT / 2; dp++) {
        uint32_t  bv[4];
        const int mi = lane >> 3;
        o[2 * dp][0] = o[2 * dp][1] = o[2 * dp][2] = o[2 * dp][3] = 0.f;
        o[2 * dp + 1][0] = o[2 * dp + 1][1] = o[2 * dp + 1][2] = o[2 * dp + 1][3] = 0.f;
        ldmatrix_x4_trans(bv, Vs + (16 * warp + (mi & 1) * 8 + (lane & 7)) * LDV + dp * 16 + (mi >> 1) * 8);
        mma_f16(o[2 * dp], pa, bv[0], bv[1]);
        mma_f16(o[2 * dp + 1], pa, bv[2], bv[3]);
    }
    // merge the 4 warps (shared memory: the table area, free now), then the split's output
    __syncthreads();
    float *rd = Ts; // [4 warps][G][D + 2]: o, then m, l
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = g + 8 * i;
        if (row >= G) continue;
        float *rw = rd + (warp * G + row) * (D + 2);
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            *(float2 *)(rw + dt * 8 + 2 * q) = make_float2(o[dt][2 * i], o[dt][2 * i + 1]);
        if (q == 0) rw[D] = mx[i], rw[D + 1] = lsum[i];
    }
    __syncthreads();
    for (int idx = tid; idx < G * D; idx += DEC_NT) {
        const int row = idx / D, d = idx % D;
        merge_decode_warps<D, DEC_NT / 32>(rd, G, row, d, a, B.row0, h * G + row, part, b, n_splits,
                                           split);
    }
}

// (m, l) of two partial softmaxes combined: the larger max, the sums rescaled to it
__device__ __forceinline__ void ml_combine(float &m, float &l, float m2, float l2) {
    const float M = fmaxf(m, m2);
    if (M == -INFINITY) return;
    l = (m == -INFINITY ? 0.f : l * exp2f(m - M)) + (m2 == -INFINITY ? 0.f : l2 * exp2f(m2 - M));
    m = M;
}

// out[row][qh] = merge of the n_splits partials; grid (n_qb, n_head), block 4 D: first the
// splits' (max, sum) reduced over the block, then 4 groups of D threads sum a quarter of the
// splits' outputs each (every load independent of the others). Launched as a programmatic
// dependent of the split kernel where the GPU has it (pdl_wait: its results).
constexpr int MERGE_GROUPS = 4, MERGE_REGS = 16;
__global__ void __launch_bounds__(MERGE_GROUPS * SP_DMAX)
    sparse_merge_kernel(sp_params a, int n_splits, int D, const float *__restrict__ part) {
    __shared__ float red_m[MERGE_GROUPS * SP_DMAX / 32], red_l[MERGE_GROUPS * SP_DMAX / 32];
    __shared__ float acc[MERGE_GROUPS - 1][SP_DMAX];
    const int           b = blockIdx.x, qh = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
    const int           lane = tid & 31, warp = tid >> 5;
    const lc_qblock B = a.qb[b];
    pdl_wait();
    if (B.n_rows != 1) return;
    const float *pp = part + ((int64_t)b * a.n_head + qh) * n_splits * (D + 2);
    if (n_splits <= MERGE_GROUPS * MERGE_REGS) {
        // every load at once (one round trip): thread (group, d) holds o[d], m, l of the splits
        // group + 4 i; the max over all splits from those, then each group's sums. (Was: the
        // splits' (m, l) first, then the outputs in rounds of 4: H200, 1M, decode ~5 L2 round
        // trips.)
        const int grp = tid / D, d = tid % D;
        float     os[MERGE_REGS], ms[MERGE_REGS], ls[MERGE_REGS], mloc = -INFINITY;
#pragma unroll
        for (int i = 0; i < MERGE_REGS; i++) {
            const int  s2 = grp + MERGE_GROUPS * i;
            const bool v  = s2 < n_splits;
            os[i] = v ? pp[s2 * (D + 2) + d] : 0.f;
            ms[i] = v ? pp[s2 * (D + 2) + D] : -INFINITY;
            ls[i] = v ? pp[s2 * (D + 2) + D + 1] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < MERGE_REGS; i++) mloc = fmaxf(mloc, ms[i]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mloc = fmaxf(mloc, __shfl_xor_sync(0xffffffffu, mloc, o));
        if (lane == 0) red_m[warp] = mloc;
        __syncthreads();
        float M = red_m[0];
        for (int w = 1; w < nt / 32; w++) M = fmaxf(M, red_m[w]);
        float o = 0.f, l = 0.f;
        if (M != -INFINITY) {
#pragma unroll
            for (int i = 0; i < MERGE_REGS; i++)
                if (ms[i] != -INFINITY) {
                    const float f = exp2f(ms[i] - M);
                    o += f * os[i], l += f * ls[i];
                }
        }
        if (grp > 0) {
            acc[grp - 1][d] = o;
            if (d == 0) red_l[grp - 1] = l;
        }
        __syncthreads();
        if (grp == 0) {
#pragma unroll
            for (int k = 0; k < MERGE_GROUPS - 1; k++) o += acc[k][d], l += red_l[k];
            a.out[((int64_t)B.row0 * a.n_head + qh) * D + d] = l > 0.f ? o / l : 0.f;
        }
        return;
    }
    float m = -INFINITY, l = 0.f;
    for (int s = tid; s < n_splits; s += nt) ml_combine(m, l, pp[s * (D + 2) + D], pp[s * (D + 2) + D + 1]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        ml_combine(m, l, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, l, o));
    if (lane == 0) red_m[warp] = m, red_l[warp] = l;
    __syncthreads();
    m = red_m[0], l = red_l[0];
    for (int w = 1; w < nt / 32; w++) ml_combine(m, l, red_m[w], red_l[w]);
    const int grp = tid / D, d = tid % D;
    float     o   = 0.f;
    if (m != -INFINITY) {
#pragma unroll 4
        for (int s = grp; s < n_splits; s += MERGE_GROUPS) {
            const float ms = pp[s * (D + 2) + D], os = pp[s * (D + 2) + d];
            if (ms != -INFINITY) o += exp2f(ms - m) * os;
        }
    }
    if (grp > 0) acc[grp - 1][d] = o;
    __syncthreads();
    if (grp == 0) {
#pragma unroll
        for (int k = 0; k < MERGE_GROUPS - 1; k++) o += acc[k][d];
        a.out[((int64_t)B.row0 * a.n_head + qh) * D + d] = l > 0.f ? o / l : 0.f;
    }
}

// ---- prefill, mma.sync (any GPU) -----------------------------------------------------------
// ---- prefill -------------------------------------------------------------------------------

template <int D> struct pre_cfg {
    static constexpr int TK = PRE_TK, BM = PRE_BM, LD = D + 8, LDT = D + 4;
    static constexpr int Q_B = BM * LD * 2, KR_B = TK * LD * 2;                   // fp16
    static constexpr int KRAW_B = TK * D * 2, V_B = TK * LD * 2, T_B = TK * LDT * 4; // a stage
    static constexpr int STAGE = KRAW_B + V_B + T_B;
    // [stage 0][Kr][stage 1]; Q is staged at Kr (over Kr and stage 1) before the key loop
    static constexpr int SMEM = KR_B + 2 * STAGE;
    static_assert(Q_B <= KR_B + STAGE, "Q staging area");
};

// grid (n_qb * n_chunks, H), block 256 = 8 warps x 16 packed rows (row, head of the group)
template <int D, bool NEOX>
__global__ void __launch_bounds__(PRE_NT, 1)
    sparse_prefill_kernel(sp_params a, int n_chunks, int64_t L_cap, const int2 *__restrict__ lists,
                          const int4 *__restrict__ hdr) {
    using C = pre_cfg<D>;
    constexpr int TK = C::TK, BM = C::BM, LD = C::LD, LDT = C::LDT;
    constexpr int NT8 = TK / 8, DT = D / 8, KS = D / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half *Kr = (__half *)(smem_raw + C::STAGE); // [TK][LD] rotated keys of the current tile
    __half *Qs = Kr;                               // [BM][LD] fp16, read into registers first
    auto    stg  = [&](int st) { return smem_raw + (st ? C::STAGE + C::KR_B : 0); };
    auto    kraw = [&](int st) { return (lc_kv16 *)stg(st); };                          // [TK][D]
    auto    vsm  = [&](int st) { return (lc_kv16 *)(stg(st) + C::KRAW_B); };            // [TK][LD]
    auto    tsm  = [&](int st) { return (float *)(stg(st) + C::KRAW_B + C::V_B); };     // [TK][LDT]

    const int           b = blockIdx.x / n_chunks, chunk = blockIdx.x % n_chunks, h = blockIdx.y;
    const lc_qblock B = a.qb[b];
    const int G = a.G, n_packed = B.n_rows * G, r0 = chunk * BM;
    if (r0 >= n_packed) return;
    const int     tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int     g   = a.n_groups == 1 ? 0 : h;
    const int64_t gl  = (int64_t)b * a.n_groups + g;
    const int4    hd  = hdr[gl];
    const int     N = hd.x, n_pre = hd.y, win0 = hd.z;
    const int2   *L = lists + gl * L_cap;

    const packed_rows rows = {a.q, a.out, a.n_head, G, h, B.row0, n_packed};
    stage_queries_f16<D, BM, LD, PRE_NT>(Qs, rows, r0, tid);
    const int t_hi    = (min(n_packed, r0 + BM) - 1) / G;
    const int n_keys  = min(N, n_pre + max(0, B.pos0 + t_hi - win0 + 1));
    const int n_tiles = (n_keys + TK - 1) / TK;
    const int HR = a.half_rot, CPK = D / 4 + HR / 2;
    const int lk = tid >> 2, lq = tid & 3; // loads: key of the tile, quarter of its chunks
    auto load_tile = [&](int kt, int st, int2 e) {
        const bool valid = kt * TK + lk < n_keys;
        for (int c = lq; c < CPK; c += 4)
            load_chunk<D>(a, h, e, valid, c, kraw(st) + lk * D, vsm(st) + lk * LD, tsm(st) + lk * LDT);
        cp_async_commit();
    };
    int2 e_next = lk < n_keys ? L[lk] : make_int2(0, 0);
    if (n_tiles > 0) load_tile(0, 0, e_next); // stage 0 does not overlap Q
    e_next = TK + lk < n_keys ? L[TK + lk] : make_int2(0, 0);
    __syncthreads();
    // (the Q area is next written by tile 1's loads and the rotation, after the loop's first
    // __syncthreads, so every warp has its fragments by then)
    uint32_t qf[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
        ldmatrix_x4(qf[kk], Qs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);

    // keys visible to this thread's two rows: list indices < lim (window keys causal)
    int lim[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int pr = r0 + warp * 16 + (lane >> 2) + 8 * i;
        lim[i] = pr < n_packed ? min(N, n_pre + max(0, B.pos0 + pr / G - win0 + 1)) : 0;
    }
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    float o[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

    for (int kt = 0; kt < n_tiles; kt++) {
        const int st = kt & 1;
        cp_async_wait_all();
        __syncthreads(); // tile kt landed; everyone is done with tile kt - 1
        if (kt + 1 < n_tiles) {
            load_tile(kt + 1, st ^ 1, e_next);
            const int x = (kt + 2) * TK + lk;
            e_next      = x < n_keys ? L[x] : make_int2(0, 0);
        }
        // rotate the tile's keys into fp16
        const lc_kv16 *kin = kraw(st);
        const float   *tin = tsm(st);
        if (!NEOX) {
            for (int i = tid; i < TK * (D / 8); i += PRE_NT) {
                const int       j = i / (D / 8), c0 = (i % (D / 8)) * 8, p0 = c0 / 2;
                const uint4     xk = *(const uint4 *)(kin + j * D + c0);
                const uint32_t *uk = (const uint32_t *)&xk;
                uint32_t        rk[4];
                if (p0 < HR) { // HR is a multiple of 4: all or none of the chunk's pairs
                    const float4 c4 = *(const float4 *)(tin + j * LDT + p0);
                    const float4 s4 = *(const float4 *)(tin + j * LDT + HR + p0);
                    const float  cc[4] = {c4.x, c4.y, c4.z, c4.w}, ss[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
                    for (int w = 0; w < 4; w++) {
                        const float x = kv_lo(uk[w]), y = kv_hi(uk[w]);
                        rk[w] = pack_f16(x * cc[w] - y * ss[w], x * ss[w] + y * cc[w]);
                    }
                } else {
#pragma unroll
                    for (int w = 0; w < 4; w++) rk[w] = uk[w];
                }
                *(uint4 *)(Kr + j * LD + c0) = make_uint4(rk[0], rk[1], rk[2], rk[3]);
            }
        } else { // n_rot == D: pairs (i, i + D/2)
            for (int i = tid; i < TK * (D / 16); i += PRE_NT) {
                const int       j = i / (D / 16), c0 = (i % (D / 16)) * 8;
                const uint4     xa = *(const uint4 *)(kin + j * D + c0);
                const uint4     xb = *(const uint4 *)(kin + j * D + c0 + D / 2);
                const uint32_t *ua = (const uint32_t *)&xa, *ub = (const uint32_t *)&xb;
                const float    *cr = tin + j * LDT + c0, *sr = tin + j * LDT + HR + c0;
                uint32_t        ra[4], rb[4];
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const float c0_ = cr[2 * w], s0 = sr[2 * w], c1 = cr[2 * w + 1], s1 = sr[2 * w + 1];
                    const float x0 = kv_lo(ua[w]), x1 = kv_hi(ua[w]);
                    const float y0 = kv_lo(ub[w]), y1 = kv_hi(ub[w]);
                    ra[w] = pack_f16(x0 * c0_ - y0 * s0, x1 * c1 - y1 * s1);
                    rb[w] = pack_f16(x0 * s0 + y0 * c0_, x1 * s1 + y1 * c1);
                }
                *(uint4 *)(Kr + j * LD + c0)         = make_uint4(ra[0], ra[1], ra[2], ra[3]);
                *(uint4 *)(Kr + j * LD + c0 + D / 2) = make_uint4(rb[0], rb[1], rb[2], rb[3]);
            }
        }
        __syncthreads();
        // S = Q Kᵀ
        float s[NT8][4];
#pragma unroll
        for (int nt = 0; nt < NT8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
#pragma unroll
            for (int np = 0; np < NT8 / 2; np++) {
                uint32_t  bq[4];
                const int mi = lane >> 3;
                ldmatrix_x4(bq, Kr + (np * 16 + (mi >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (mi & 1) * 8);
                mma_f16(s[2 * np], qf[kk], bq[0], bq[1]);
                mma_f16(s[2 * np + 1], qf[kk], bq[2], bq[3]);
            }
        // scale, mask, online softmax (rows lane/4 and + 8; 4 lanes share a row)
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = kt * TK + nt * 8 + 2 * (lane & 3) + (e & 1);
                const float v = key < lim[e >> 1] ? s[nt][e] * a.scale_log2 : -INFINITY;
                s[nt][e]       = v;
                mx[e >> 1]     = fmaxf(mx[e >> 1], v);
            }
        softmax_tile(s, mx, m_run, l_run, o);
        // O += P V (V as the pages hold it)
        mma_pv_tile<TK, DT, LD>(o, s, (const __half *)vsm(st), lane);
    }
    cp_async_wait_all();
    write_packed_rows<D>(rows, r0 + warp * 16 + (lane >> 2), lane, l_run, &o[0][0]);
}

// ---- prefill on Hopper: warp-specialised wgmma (sm_90a) ------------------------------------

template <int D> struct wpre_cfg {
    static constexpr int NS   = D == 128 ? 6 : 10; // ring stages (K + V tile each)
    using ring                = wgmma_ring<D, NS>;
    static constexpr int SMEM = ring::SMEM;
};

// The 16-byte chunks of one key that producer thread half hf (0, 1) rotates, m = 0 .. D/16 - 1:
// adjacent pairs: chunk 8 (m / 4) + 4 hf + m % 4 (a quarter warp — 4 keys x 2 halves — then
// touches 8 distinct swizzled chunk columns: no bank conflict); split halves: pairs of chunks
// (c, c + D/16), c = 4 hf + m (D = 128) or 2 hf + m (D = 64), m < D/32.
template <int D, bool NEOX> __device__ __forceinline__ int pro_chunk(int m, int hf) {
    if (NEOX) return (D / 32) * hf + m;
    return 8 * (m >> 2) + 4 * hf + (m & 3);
}

// grid (H * n_chunks, n_qb), block 384 = producer warpgroup + 2 consumer warpgroups
template <int D, bool NEOX>
__global__ void __launch_bounds__(384, 1)
    sparse_prefill_wgmma_kernel(sp_params a, int n_chunks, int64_t L_cap,
                                const int2 *__restrict__ lists, const int4 *__restrict__ hdr) {
#ifdef LC_HAVE_WGMMA
    using C = wpre_cfg<D>;
    constexpr int NS = C::NS, TILE_B = C::ring::TILE_B;
    constexpr int LA = NS - 2; // tiles gathered ahead of the one rotated (consumers hold 2)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const typename C::ring ring(smem_raw); // K tiles fp16 rotated, V tiles as the pages
    unsigned char *Kr = ring.Kr, *Vr = ring.Vr;
    uint64_t      *full = ring.full, *empty = ring.empty;

    const int           h = blockIdx.x / n_chunks, chunk = blockIdx.x % n_chunks, b = blockIdx.y;
    const lc_qblock B = a.qb[b];
    const int           G = a.G, n_packed = B.n_rows * G, r0 = chunk * 128;
    if (r0 >= n_packed) return;
    const int     tid = threadIdx.x, warp = tid >> 5;
    const int     gsel = a.n_groups == 1 ? 0 : h;
    const int64_t gl   = (int64_t)b * a.n_groups + gsel;
    const int4    hd   = hdr[gl];
    const int     N = hd.x, n_pre = hd.y, win0 = hd.z;
    const int2   *L = lists + gl * L_cap;
    const int     t_lo = r0 / G, t_hi = (min(n_packed, r0 + 128) - 1) / G;
    const int     n_keys   = min(N, n_pre + max(0, B.pos0 + t_hi - win0 + 1));
    const int     min_keys = min(N, n_pre + max(0, B.pos0 + t_lo - win0 + 1)); // every row sees these
    const int     n_tiles = (n_keys + 63) / 64, full_tiles = min_keys / 64;

    if (tid == 0) {
        for (int s = 0; s < NS; s++) mbar_init(full + s, 128), mbar_init(empty + s, 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp < 4) { // producer warpgroup: thread (key j, half hf) of every tile
        const int j = tid >> 1, hf = tid & 1, HR = a.half_rot;
        // list entry of key j of tile t; y = -1: past the keys (zero-filled)
        auto entry = [&](int t) -> int2 {
            const int x = t * 64 + j;
            return t < n_tiles && x < n_keys ? L[x] : make_int2(0, -1);
        };
        int2 F[LA + 1]; // F[i] = entry(kt + 1 + i) at iteration kt
        const int2 e0 = entry(0);
#pragma unroll
        for (int i = 0; i <= LA; i++) F[i] = entry(1 + i);
        if (hd.w) {
            // rotated fp16 tiles (plain RoPE): K of key j copied into the stage as it is (the
            // tiles share the stage's swizzle, with the source row's phase), V from its page slot
            // e.x (as the streaming path)
            auto issue_r = [&](int t, int2 e) {
                const int s = t % NS;
                if (t >= NS) mbar_wait(empty + s, ((t / NS) - 1) & 1);
                const bool     valid = e.y >= 0;
                const int64_t  tb    = valid ? ((int64_t)(e.y >> 6) * a.H + h) * (64 * D) : 0;
                const int      r     = e.y & 63;
                const int64_t  vrow  = valid ? slot_row(a, e.x, h) : 0;
                const lc_kv16 *vg    = a.vpool + vrow * D;
                unsigned char *kd = Kr + s * TILE_B, *vd = Vr + s * TILE_B;
#pragma unroll
                for (int q = 0; q < D / 16; q++) { // chunks 2q + hf: a lane pair reads 32 bytes
                    const int c = 2 * q + hf, doff = 2 * tile64_off(j, 8 * c), so = tile64_off(r, 8 * c);
                    cp_async16_zfill(kd + doff, valid ? a.rk + tb + so : a.rk, valid ? 16 : 0);
                    if (a.e8) // V dequantised on the way (the fence before the arrival covers it)
                        *(uint4 *)(vd + doff) = valid ? kv8_at(a, false, vrow, h, 8 * c, D) : make_uint4(0, 0, 0, 0);
                    else
                        cp_async16_zfill(vd + doff, valid ? vg + 8 * c : a.vpool, valid ? 16 : 0);
                }
            };
#pragma unroll
            for (int t = 0; t < LA; t++) {
                if (t < n_tiles) issue_r(t, t == 0 ? e0 : F[t - 1]);
                cp_async_commit();
            }
            for (int kt = 0; kt < n_tiles; kt++) {
                cp_async_wait<LA - 1>(); // this thread's copies of tile kt landed
                fence_proxy_async();     // the tensor cores read what they wrote
                mbar_arrive(full + kt % NS);
                if (kt + LA < n_tiles) issue_r(kt + LA, F[LA - 1]);
                cp_async_commit();
#pragma unroll
                for (int i = 0; i < LA; i++) F[i] = F[i + 1];
                F[LA] = entry(kt + LA + 2);
            }
            cp_async_wait_all();
            return;
        }
        // K and V of key j, tile t: raw fp16 into the swizzled places of stage t % NS
        auto issue_kv = [&](int t, int2 e) {
            const int s = t % NS;
            if (t >= NS) mbar_wait(empty + s, ((t / NS) - 1) & 1);
            const bool     valid = e.y >= 0;
            const int64_t  row   = valid ? slot_row(a, e.y, h) : 0;
            const lc_kv16 *kg = a.kpool + row * D, *vg = a.vpool + row * D;
            unsigned char *kd = Kr + s * TILE_B, *vd = Vr + s * TILE_B;
            if (a.e8) { // dequantised on the way: plain stores (K is rotated after the barrier)
#pragma unroll
                for (int r = 0; r < D / 16; r++) {
                    const int c = 2 * r + hf, off = 2 * tile64_off(j, 8 * c);
                    const uint4 z = make_uint4(0, 0, 0, 0);
                    *(uint4 *)(kd + off) = valid ? kv8_at(a, true, row, h, 8 * c, D) : z;
                    *(uint4 *)(vd + off) = valid ? kv8_at(a, false, row, h, 8 * c, D) : z;
                }
                return;
            }
#pragma unroll
            for (int r = 0; r < D / 16; r++) { // chunks 2r + hf: a lane pair reads 32 bytes
                const int c = 2 * r + hf, off = 2 * tile64_off(j, 8 * c);
                cp_async16_zfill(kd + off, valid ? kg + 8 * c : a.kpool, valid ? 16 : 0);
                cp_async16_zfill(vd + off, valid ? vg + 8 * c : a.vpool, valid ? 16 : 0);
            }
        };
        // in-kernel rotation: this thread's table values for key j: per rotated item m, cos and
        // sin of its pairs (adjacent pairs: 4 of each; split halves: 8 of each)
        constexpr int NM = NEOX ? D / 32 : D / 16; // items (chunks or chunk pairs) per thread
        float4        tab[NEOX ? 4 * NM : 2 * NM];
        auto load_tab_m = [&](int m, const float *cr, const float *sr) {
            const int c = pro_chunk<D, NEOX>(m, hf);
            if (NEOX) {
                tab[4 * m] = ldg_f4(cr + 8 * c), tab[4 * m + 1] = ldg_f4(sr + 8 * c);
                tab[4 * m + 2] = ldg_f4(cr + 8 * c + 4), tab[4 * m + 3] = ldg_f4(sr + 8 * c + 4);
            } else if (4 * c < HR) {
                tab[2 * m] = ldg_f4(cr + 4 * c), tab[2 * m + 1] = ldg_f4(sr + 4 * c);
            } else { // past the rotated dims: the identity (exact: an fp16 value through fp32)
                tab[2 * m] = make_float4(1.f, 1.f, 1.f, 1.f), tab[2 * m + 1] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
        };
        {
            const int2 et = e0.y >= 0 ? e0 : make_int2(0, 0);
#pragma unroll
            for (int m = 0; m < NM; m++) load_tab_m(m, a.cs + (int64_t)et.x * HR, a.sn + (int64_t)et.x * HR);
        }
#pragma unroll
        for (int t = 0; t < LA; t++) {
            if (t < n_tiles) issue_kv(t, t == 0 ? e0 : F[t - 1]);
            cp_async_commit();
        }
        for (int kt = 0; kt < n_tiles; kt++) {
            const int s = kt % NS;
            cp_async_wait<LA - 1>(); // this thread's copies of tile kt landed
            named_barrier(3, 128);   // everyone's; and everyone is done with tile kt - 1
            if (kt + LA < n_tiles) issue_kv(kt + LA, F[LA - 1]);
            cp_async_commit();
            unsigned char *kd = Kr + s * TILE_B; // V stays as gathered
            // rotate K into fp16 in place; each item's table registers then load tile kt + 1's
            const bool   more = kt + 1 < n_tiles;
            const int2   en   = F[0].y >= 0 ? F[0] : make_int2(0, 0);
            const float *cr = a.cs + (int64_t)en.x * HR, *sr = a.sn + (int64_t)en.x * HR;
#pragma unroll
            for (int m = 0; m < NM; m++) {
                const int c = pro_chunk<D, NEOX>(m, hf);
                if (NEOX) {
                    uint4 *pa = (uint4 *)(kd + 2 * tile64_off(j, 8 * c));
                    uint4 *pb = (uint4 *)(kd + 2 * tile64_off(j, 8 * c + D / 2));
                    uint4  xa = *pa, xb = *pb;
                    rot_halves(xa, xb, tab[4 * m], tab[4 * m + 2], tab[4 * m + 1], tab[4 * m + 3]);
                    *pa = xa, *pb = xb;
                } else {
                    uint4 *pk = (uint4 *)(kd + 2 * tile64_off(j, 8 * c));
                    // every chunk, the unrotated ones by the identity: a branch here made the
                    // producer 45% slower (bench_attn_segments streaming, H100; bench/NOTES.md 36)
                    *pk = rot_adjacent(*pk, tab[2 * m], tab[2 * m + 1]);
                }
                if (more) load_tab_m(m, cr, sr);
            }
            fence_proxy_async(); // the tensor cores read what the stores wrote
            mbar_arrive(full + s);
#pragma unroll
            for (int i = 0; i < LA; i++) F[i] = F[i + 1];
            F[LA] = entry(kt + LA + 2);
        }
        cp_async_wait_all();
        return;
    }

    // consumers: packed row pr sees the list entries before its window position (causal)
    const packed_rows rows = {a.q, a.out, a.n_head, G, h, B.row0, n_packed};
    wgmma_consumer(ring, rows, r0, n_tiles, full_tiles, a.scale_log2,
                   [&](int pr) { return min(N, n_pre + max(0, B.pos0 + pr / G - win0 + 1)); });
#endif
}

// ---- host side -----------------------------------------------------------------------------

// Decode splits per (block, KV head): every split at most DEC_K list entries.
int64_t dec_splits(int64_t n_max) {
    const int64_t s = (n_max + DEC_K - 1) / DEC_K;
    return s < 1 ? 1 : s;
}

struct sp_plan {
    bool    decode; // every block one row (max_rows == 1): the split kernels; else the prefill ones
    int64_t splits, L_cap;
    size_t  hdr_off, list_off, total;
};

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

sp_plan make_plan(int32_t n_qb, int32_t n_head, const lc_attn_segments_args *a,
                  const lc_tuning *tune) {
    sp_plan       pl    = {};
    const int64_t n_max = (int64_t)(a->n_sink > 0 ? a->n_sink : 0) + (a->max_sel > 0 ? a->max_sel : 0) +
                          (a->max_window > 0 ? a->max_window : 0);
    pl.L_cap  = n_max > 0 ? n_max : 1;
    pl.decode = a->max_rows <= 1 && !tune->sparse_decode_prefill; // else decode takes the prefill path
    pl.splits = dec_splits(pl.L_cap);
    size_t off = 0;
    if (pl.decode) {
        if (pl.splits > 1)
            off = align256((size_t)n_qb * n_head * pl.splits * (SP_DMAX + 2) * sizeof(float));
        pl.hdr_off = pl.list_off = off;
    } else {
        const size_t n_lists = (size_t)n_qb * (size_t)(a->n_groups > 0 ? a->n_groups : 1);
        pl.hdr_off  = 0;
        off         = align256(n_lists * sizeof(int4));
        pl.list_off = off;
        off         = align256(off + n_lists * (size_t)pl.L_cap * sizeof(int2));
    }
    pl.total = off;
    return pl;
}

template <int D, bool NEOX>
int launch_decode(const sp_params &p, int32_t n_qb, int64_t splits, bool pdl_off, float *part) {
    static bool configured = false;
    if (!configured) {
        LC_CUDA_TRY(cudaFuncSetAttribute(sparse_decode_kernel<D, NEOX>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)dec_cfg<D>::smem(D / 2, SP_MAXG)));
        LC_CUDA_TRY(cudaFuncSetAttribute(sparse_decode_kernel<D, NEOX>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared));
        configured = true;
    }
    dim3 grid((unsigned)(n_qb * splits), (unsigned)p.H);
    sparse_decode_kernel<D, NEOX><<<grid, DEC_NT, dec_cfg<D>::smem(p.half_rot, p.G), lc_cuda_stream()>>>(
        p, (int)splits, part);
    LC_CUDA_LAUNCHED();
    if (splits > 1) {
        // the merge as a programmatic dependent (sm_90): it launches while the splits run and
        // waits for them inside (pdl_wait)
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        cfg.gridDim          = dim3((unsigned)n_qb, (unsigned)p.n_head);
        cfg.blockDim         = dim3((unsigned)(MERGE_GROUPS * D));
        cfg.dynamicSmemBytes = 0;
        cfg.stream           = lc_cuda_stream();
        // (tuning.no_sparse_pdl: an ordinary launch, for comparisons)
        if (lc_cuda_cc_major() >= 9 && !pdl_off) {
            at[0].id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at, cfg.numAttrs = 1;
        }
        LC_CUDA_TRY(cudaLaunchKernelEx(&cfg, sparse_merge_kernel, p, (int)splits, (int)D, (const float *)part));
    }
    return LC_OK;
}

template <int D, bool NEOX>
int launch_prefill(const sp_params &p, int32_t n_qb, int32_t max_rows, const sp_plan &pl,
                   bool wgmma, unsigned char *scratch) {
    int4 *hdr   = (int4 *)(scratch + pl.hdr_off);
    int2 *lists = (int2 *)(scratch + pl.list_off);
    sparse_list_kernel<<<dim3((unsigned)n_qb, (unsigned)p.n_groups), 256, 0, lc_cuda_stream()>>>(
        p, pl.L_cap, lists, hdr);
    LC_CUDA_LAUNCHED();
    const int n_chunks = (max_rows * p.G + PRE_BM - 1) / PRE_BM;
    if (wgmma) {
        LC_CUDA_SMEM_ONCE(wpre_cfg<D>::SMEM, sparse_prefill_wgmma_kernel<D, NEOX>);
        dim3 grid((unsigned)(p.H * n_chunks), (unsigned)n_qb); // a block's CTAs side by side
        sparse_prefill_wgmma_kernel<D, NEOX><<<grid, 384, wpre_cfg<D>::SMEM, lc_cuda_stream()>>>(
            p, n_chunks, pl.L_cap, lists, hdr);
        LC_CUDA_LAUNCHED();
        return LC_OK;
    }
    LC_CUDA_SMEM_ONCE(pre_cfg<D>::SMEM, sparse_prefill_kernel<D, NEOX>);
    dim3 grid((unsigned)(n_qb * n_chunks), (unsigned)p.H);
    sparse_prefill_kernel<D, NEOX><<<grid, PRE_NT, pre_cfg<D>::SMEM, lc_cuda_stream()>>>(
        p, n_chunks, pl.L_cap, lists, hdr);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

} // namespace

extern "C" size_t lc_cuda_attn_segments_scratch_bytes(int32_t n_qb, int32_t n_head,
                                                    const lc_attn_segments_args *a, const lc_tuning *tune) {
    if (n_qb <= 0 || n_head <= 0 || !a || !tune) return 0;
    return make_plan(n_qb, n_head, a, tune).total;
}

extern "C" int lc_cuda_attn_segments(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                   const lc_qblock *qb, int32_t n_qb, const float *q,
                                   int32_t n_head, const lc_rope_table *rope, float scale,
                                   const lc_attn_segments_args *a, const lc_cuda_rot_tiles *rot,
                                   const lc_tuning *tune, void *scratch, size_t scratch_bytes,
                                   float *out) {
    const int D = kv->head_dim, H = kv->n_kv_head, P = kv->page_size;
    if (n_qb <= 0) return LC_OK;
    if (!tune) return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_segments: no tuning");
    const int st0 = lc_attn_segments_check(kv, n_head, a);
    if (st0 != LC_OK) return st0;
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_segments: head dim %d (64 and 128 supported)", D);
    if (H <= 0 || n_head % H != 0 || n_head / H > SP_MAXG)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_segments: %d query heads over %d KV heads "
                       "(1..%d per KV head supported)", n_head, H, SP_MAXG);
    if (P <= 0 || (P & (P - 1)) != 0)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_segments: page size %d is not a power of two", P);
    const bool neox = rope->pairing == LC_ROPE_NEOX;
    if (rope->n_rot % 8 != 0 || rope->n_rot <= 0 || rope->n_rot > D || (neox && rope->n_rot != D))
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_segments: %d rotated dims of %d (%s pairing)",
                       rope->n_rot, D, neox ? "neox" : "adjacent");
    const sp_plan pl = make_plan(n_qb, n_head, a, tune);
    if (pl.total > 0 && (!scratch || scratch_bytes < pl.total))
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_segments: scratch of %zu bytes, %zu needed",
                       scratch_bytes, pl.total);
    sp_params p;
    p.kpool = (const lc_kv16 *)kv->k, p.vpool = (const lc_kv16 *)kv->v;
    p.e8 = kv->e4m3, p.kc = kv->e4m3 ? kv->k_centre : NULL;
    p.slab_map = kv->slab_map;
    p.seqs = seqs, p.qb = qb, p.sel = a->sel, p.sel_n = a->sel_n, p.q = q, p.out = out;
    p.list = a->list;
    p.cs = rope->cos, p.sn = rope->sin;
    p.H = H, p.G = n_head / H, p.n_head = n_head;
    p.page_shift = 0;
    while ((1 << p.page_shift) < P) p.page_shift++;
    p.n_groups = a->n_groups, p.sel_cap = a->sel_cap, p.n_sink = a->n_sink;
    p.streaming = a->attn_rope != LC_ATTN_ROPE_PLAIN; // STREAMING or GAPS: positions moved
    p.gap_span  = a->attn_rope == LC_ATTN_ROPE_GAPS ? a->gap_span : 0;
    p.half_rot = rope->n_rot / 2, p.n_pos = rope->n_pos;
    p.scale_log2 = scale * 1.4426950408889634f;
    p.rk = NULL, p.rpre = NULL, p.n_rpre = 0;
    // tuning.sparse_decode_scan thread|warp: one segment scan for every list (comparisons)
    p.dec_warp_scan = tune->sparse_decode_scan == LC_TUNE_SCAN_THREAD ? 0
                      : tune->sparse_decode_scan == LC_TUNE_SCAN_WARP ? 2
                                                                      : 1;
    const bool wgmma = !tune->sparse_prefill_mma && lc_cuda_have_wgmma();

    unsigned char *sc = (unsigned char *)scratch;
    if (!pl.decode && rot && rot->n_pre > 0 && rot->tiles > 0 && !p.streaming && wgmma) {
        const int st = lc_cuda_rotate_keys(kv, seqs, rope, rot);
        if (st != LC_OK) return st;
        p.rk = (const __half *)rot->k;
        p.rpre = rot->pre, p.n_rpre = rot->n_pre;
    }
    if (pl.decode) {
        float *part = (float *)sc;
        const bool pdl_off = tune->no_sparse_pdl;
        return D == 64 ? (neox ? launch_decode<64, true>(p, n_qb, pl.splits, pdl_off, part)
                               : launch_decode<64, false>(p, n_qb, pl.splits, pdl_off, part))
                       : (neox ? launch_decode<128, true>(p, n_qb, pl.splits, pdl_off, part)
                               : launch_decode<128, false>(p, n_qb, pl.splits, pdl_off, part));
    }
    return D == 64 ? (neox ? launch_prefill<64, true>(p, n_qb, a->max_rows, pl, wgmma, sc)
                           : launch_prefill<64, false>(p, n_qb, a->max_rows, pl, wgmma, sc))
                   : (neox ? launch_prefill<128, true>(p, n_qb, a->max_rows, pl, wgmma, sc)
                           : launch_prefill<128, false>(p, n_qb, a->max_rows, pl, wgmma, sc));
}
