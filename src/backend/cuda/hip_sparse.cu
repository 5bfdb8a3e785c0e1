// hip_sparse.cu — InfiniteHiP block-sparse attention on the GPU (op attn_sparse), the twin of
// lc_cpu_attn_sparse (backend/cpu/cpu_hip_sparse.c); contract in backend/backend.h "Sparse
// attention"; digest spec/infinitehip-and-hip.md §3–4 (the BSA step: sink + selected chunks +
// sliding window, StreamingLLM re-indexing §4.2).
//
// The attended keys of a query block b and group g form one list, the same for every row of
// the block: sink [0, n_s), the selected segments in position order, the window [win0, last
// row]. List index i has rope position base + i (STREAMING, base = win0 - n_sink_keys - n_sel)
// or its token (PLAIN). K/V are read from the paged bf16 pools in place (no gathered copy in
// global memory); every key is rotated with its own table row, which is copied to shared
// memory beside the key (cp.async), in fp32.
//
//  * decode (blocks of one row): Flash-Decoding. A CTA owns (block, KV head, split): a
//    contiguous range of the list (at most SP_KCAP keys), built in shared memory by the CTA
//    itself from a block-wide scan of the segment list (tokens first, then the page-table
//    lookups in one parallel pass), and all G query heads of the KV head, so each K/V byte is
//    read once. Keys stream through a cp.async ring of 32-key tiles, all stages in flight from
//    the start; scores and P·V on CUDA cores in fp32 (4 lanes per key for Q·K). A merge kernel
//    combines the splits (log-sum-exp, one pass).
//  * prefill (blocks of more rows): a small kernel writes each (block, group)'s list as
//    (position, page slot) pairs into scratch; the attention kernel is FlashAttention-2 on
//    tensor cores (mma.sync m16n8k16, fp16 operands, fp32 accumulation): a CTA owns 128 packed
//    (row, head-of-group) rows of one KV head, gathers 64-key tiles of the list from the pages
//    (double-buffered cp.async), rotates them into fp16 in shared memory (V converted in
//    place), online softmax, and masks causally only the window keys.
// Both launches run in every call (a kernel skips the blocks that belong to the other), so
// the launch shape depends only on n_qb and the args' bounds: graph-capturable.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int SP_DMAX = 128; // head dims 64 and 128
constexpr int SP_MAXG = 16;  // query heads per KV head
constexpr int SP_KCAP = 256; // decode: list entries of one CTA at most
constexpr int DEC_NT = 128, DEC_TK = 32;
constexpr int PRE_NT = 256, PRE_TK = 64, PRE_BM = 128;

struct sp_params {
    const lc_bf16       *kpool, *vpool; // [n_pages][H][P][D]
    const lc_attn_seq   *seqs;
    const lc_hip_qblock *qb;
    const lc_hip_seg    *sel;   // [n_qb][n_groups][sel_cap]
    const int32_t       *sel_n; // [n_qb][n_groups]
    const float         *q;     // [rows][n_head][D], rotated
    float               *out;   // [rows][n_head][D]
    const float         *cs, *sn; // [n_pos][half_rot]
    int32_t              H, G, n_head, page_shift, n_groups, sel_cap, n_sink, streaming;
    int32_t              half_rot, n_pos;
    float                scale_log2; // softmax scale * log2(e)
};

// ---- small device helpers ------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
// copies src_bytes (0 or 16) and zero-fills the rest of the 16 bytes
__device__ __forceinline__ void cp_async16_zfill(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}
// two bf16 (one 32-bit register) as floats: low element, high element
__device__ __forceinline__ float bf16_lo(uint32_t r) { return __uint_as_float(r << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t r) { return __uint_as_float(r & 0xffff0000u); }
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t r) {
    return pack_f16(bf16_lo(r), bf16_hi(r));
}

// ---- the attended key list ------------------------------------------------------------------

// Tokens of segment s inside the candidates [lo, hi): count, first token in *first.
__device__ __forceinline__ int clip_len(const lc_hip_seg &s, int lo, int hi, int *first) {
    const int       a = max(s.start, lo);
    const long long e = min((long long)s.start + s.len, (long long)hi);
    *first            = a;
    return e > a ? (int)(e - a) : 0;
}

// Block-wide scan of a selection list: thread t owns segments [j0, j1) (a contiguous share),
// off = selected tokens before j0; returns the total. red: NT / 32 ints of shared memory.
template <int NT>
__device__ int seg_scan(const lc_hip_seg *s, int ns, int lo, int hi, int &j0, int &j1, int &off,
                        int *red) {
    const int per = (ns + NT - 1) / NT;
    j0 = min(ns, (int)threadIdx.x * per), j1 = min(ns, j0 + per);
    int sum = 0, f;
#pragma unroll 4
    for (int j = j0; j < j1; j++) sum += clip_len(s[j], lo, hi, &f);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int       x    = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
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
__device__ void seg_emit(const lc_hip_seg *s, int j0, int j1, int off, int lo, int hi, int r0,
                         int r1, F f) {
    for (int j = j0; j < j1 && off < r1; j++) {
        int       a;
        const int len = clip_len(s[j], lo, hi, &a);
        const int b0 = max(off, r0), b1 = min(off + len, r1);
        for (int r = b0; r < b1; r++) f(r, a + (r - off));
        off += len;
    }
}

// A list entry: (rope position, page slot = physical page * P + slot).
__device__ __forceinline__ int2 key_entry(const sp_params &a, const int32_t *pt, int tok, int pos) {
    const uint32_t P    = 1u << a.page_shift;
    const uint32_t phys = (uint32_t)pt[tok >> a.page_shift] * P + ((uint32_t)tok & (P - 1));
    return make_int2(min(max(pos, 0), a.n_pos - 1), (int)phys);
}

// Chunk c (16 bytes) of the key entry e: c < D/8: K; < D/4: V; then the table row's cos
// (half_rot/4 chunks) and sin. Rows past the list are zero-filled.
template <int D>
__device__ __forceinline__ void load_chunk(const sp_params &a, int h, int2 e, bool valid, int c,
                                           lc_bf16 *kd, lc_bf16 *vd, float *td) {
    const uint32_t phys = (uint32_t)e.y, P = 1u << a.page_shift;
    const int64_t  row  = (((int64_t)(phys >> a.page_shift) * a.H + h) << a.page_shift) + (phys & (P - 1));
    const int      nb   = valid ? 16 : 0;
    if (c < D / 8) {
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

// ---- list kernel (prefill blocks) ----------------------------------------------------------

// grid (n_qb, n_groups), block 256: lists[b][g][0 .. N) and hdr[b][g] = (N, n_pre, win0, 0)
__global__ void __launch_bounds__(256)
    sparse_list_kernel(sp_params a, int64_t L_cap, int2 *__restrict__ lists, int4 *__restrict__ hdr) {
    __shared__ int red[8];
    const int           b = blockIdx.x, g = blockIdx.y;
    const lc_hip_qblock B = a.qb[b];
    if (B.n_rows <= 1) return;
    const int64_t     gl   = (int64_t)b * a.n_groups + g;
    const lc_hip_seg *segs = a.sel + gl * a.sel_cap;
    const int         ns   = min(max(a.sel_n[gl], 0), a.sel_cap);
    const int         last = B.pos0 + B.n_rows - 1;
    const int         win0 = min(max(B.win0, 0), B.pos0 + 1), n_s = min(a.n_sink, win0);
    int               j0, j1, off;
    const int         n_sel = seg_scan<256>(segs, ns, a.n_sink, win0, j0, j1, off, red);
    const int         n_pre = n_s + n_sel;
    const int N = (int)min((int64_t)n_pre + max(0, last - win0 + 1), L_cap);
    const int base = win0 - n_pre;
    const int32_t *pt = a.seqs[B.seq].page_table;
    int2          *L  = lists + gl * L_cap;
    for (int i = threadIdx.x; i < N; i += 256) {
        if (i < n_s) L[i] = key_entry(a, pt, i, a.streaming ? base + i : i);
        else if (i >= n_pre) {
            const int tok = win0 + (i - n_pre);
            L[i]          = key_entry(a, pt, tok, tok);
        }
    }
    const int r1 = min(n_pre, N) - n_s;
    if (r1 > 0)
        seg_emit(segs, j0, j1, off, a.n_sink, win0, 0, r1, [&](int r, int tok) {
            L[n_s + r] = key_entry(a, pt, tok, a.streaming ? base + n_s + r : tok);
        });
    if (threadIdx.x == 0) hdr[gl] = make_int4(N, min(n_pre, N), win0, 0);
}

// ---- decode --------------------------------------------------------------------------------

template <int D> struct dec_cfg {
    static constexpr int TK = DEC_TK, NS = D == 128 ? 3 : 6; // tile keys, ring stages
    static constexpr int LDK = D + 8, LDT = D + 4;             // pitches: bf16 rows, table rows
    static constexpr int STAGE = TK * LDK * 2 * 2 + TK * LDT * 4;
    static constexpr int smem(int G) {
        return NS * STAGE + G * D * 4 + G * TK * 4 + SP_KCAP * 8 + 3 * SP_MAXG * 4 + 8 * 4;
    }
};

// grid (n_qb * n_splits, H), block 128. GM >= G: accumulator count.
template <int D, bool NEOX, int GM>
__global__ void __launch_bounds__(DEC_NT, 2)
    sparse_decode_kernel(sp_params a, int n_splits, float *__restrict__ part) {
    using C = dec_cfg<D>;
    constexpr int TK = C::TK, NS = C::NS, LDK = C::LDK, LDT = C::LDT;
    constexpr int NGS = 2 * DEC_NT / D;         // P·V: head subsets (a thread: 2 dims)
    constexpr int GPT = (GM + NGS - 1) / NGS;   // P·V: heads per thread
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int G  = a.G;
    lc_bf16  *Ks = (lc_bf16 *)smem_raw;             // [NS][TK][LDK]
    lc_bf16  *Vs = Ks + NS * TK * LDK;              // [NS][TK][LDK]
    float    *Ts = (float *)(Vs + NS * TK * LDK);   // [NS][TK][LDT]: cos | sin of the key
    float    *qs = Ts + NS * TK * LDT;              // [G][D], scaled by scale * log2 e
    float    *Ss = qs + G * D;                      // [G][TK] scores, then probabilities
    int2     *ent = (int2 *)(Ss + G * TK);          // [SP_KCAP] this CTA's list entries
    float    *m_s = (float *)(ent + SP_KCAP), *l_s = m_s + SP_MAXG, *c_s = l_s + SP_MAXG;
    int      *red = (int *)(c_s + SP_MAXG);

    const int           b = blockIdx.x / n_splits, split = blockIdx.x % n_splits, h = blockIdx.y;
    const int           g  = a.n_groups == 1 ? 0 : h;
    const int64_t       gl = (int64_t)b * a.n_groups + g;
    const lc_hip_qblock B  = a.qb[b];
    const int           ns_in = a.sel_n[gl]; // loaded beside the block (one round trip)
    if (B.n_rows != 1) return;
    const int         tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t    *pt   = a.seqs[B.seq].page_table;
    const lc_hip_seg *segs = a.sel + gl * a.sel_cap;
    const int         ns   = min(max(ns_in, 0), a.sel_cap);
    for (int i = tid; i < G * D; i += DEC_NT)
        qs[i] = a.q[((int64_t)B.row0 * a.n_head + h * G) * D + i] * a.scale_log2;
    if (tid < G) m_s[tid] = -INFINITY, l_s[tid] = 0.f;
    const int p = B.pos0, win0 = min(max(B.win0, 0), p + 1), n_s = min(a.n_sink, win0);
    int       j0, j1, off;
    const int n_sel = seg_scan<DEC_NT>(segs, ns, a.n_sink, win0, j0, j1, off, red);
    const int n_pre = n_s + n_sel, N = n_pre + (p - win0 + 1);
    const int per   = (N + n_splits - 1) / n_splits;
    const int i0 = min(N, split * per), nk = min(min(N, i0 + per) - i0, SP_KCAP);
    const int base = win0 - n_pre; // STREAMING: position of list index 0
    const int last = a.n_pos - 1;

    // this CTA's list entries [i0, i0 + nk): first (position, token), then the tokens become
    // page slots in one parallel pass (the page-table loads all in flight together)
    for (int x = tid; x < nk; x += DEC_NT) {
        const int i = i0 + x;
        if (i < n_s) ent[x] = make_int2(min(max(a.streaming ? base + i : i, 0), last), i);
        else if (i >= n_pre) {
            const int tok = win0 + (i - n_pre);
            ent[x]        = make_int2(min(tok, last), tok);
        }
    }
    {
        const int r0 = max(i0, n_s) - n_s, r1 = min(i0 + nk, n_pre) - n_s;
        if (r1 > r0)
            seg_emit(segs, j0, j1, off, a.n_sink, win0, r0, r1, [&](int r, int tok) {
                const int i = n_s + r;
                ent[i - i0] = make_int2(min(max(a.streaming ? base + i : tok, 0), last), tok);
            });
    }
    __syncthreads();
    static_assert(SP_KCAP <= 2 * DEC_NT, "one pass of two entries per thread");
    {
        const int  x0 = tid, x1 = tid + DEC_NT;
        const bool v0 = x0 < nk, v1 = x1 < nk;
        const int  t0 = v0 ? ent[x0].y : 0, t1 = v1 ? ent[x1].y : 0;
        const int  pg0 = v0 ? pt[t0 >> a.page_shift] : 0, pg1 = v1 ? pt[t1 >> a.page_shift] : 0;
        const uint32_t P = 1u << a.page_shift;
        if (v0) ent[x0].y = (int)((uint32_t)pg0 * P + ((uint32_t)t0 & (P - 1)));
        if (v1) ent[x1].y = (int)((uint32_t)pg1 * P + ((uint32_t)t1 & (P - 1)));
    }
    __syncthreads();

    const int HR = a.half_rot, CPK = D / 4 + HR / 2; // 16-byte chunks per key
    const int n_tiles = (nk + TK - 1) / TK;
    const int kq = tid >> 2, qd = tid & 3; // loads and Q·K: key of the tile, quarter of its chunks
    auto load_tile = [&](int t, int st) {
        const int  x     = t * TK + kq;
        const bool valid = x < nk;
        const int2 e     = valid ? ent[x] : make_int2(0, 0);
        lc_bf16   *kd = Ks + (st * TK + kq) * LDK, *vd = Vs + (st * TK + kq) * LDK;
        float     *td = Ts + (st * TK + kq) * LDT;
        for (int c = qd; c < CPK; c += 4) load_chunk<D>(a, h, e, valid, c, kd, vd, td);
    };
    // all NS stages in flight at once; tile m is commit group m (see the wait counts below)
#pragma unroll
    for (int s = 0; s < NS; s++) {
        if (s < n_tiles) load_tile(s, s);
        cp_async_commit();
    }

    const int dp = tid % (D / 2), gs = tid / (D / 2); // P·V: dims 2 dp, 2 dp + 1; head subset
    float     o[GPT][2];
#pragma unroll
    for (int j = 0; j < GPT; j++) o[j][0] = o[j][1] = 0.f;

    for (int t = 0; t < n_tiles; t++) {
        // committed before this wait: NS groups, then one per iteration from t = 1 on
        if (t == 0) cp_async_wait<NS - 1>();
        else cp_async_wait<NS - 2>();
        __syncthreads(); // tile t landed; everyone is done with tile t - 1 and its stage
        if (t >= 1) {
            if (t - 1 + NS < n_tiles) load_tile(t - 1 + NS, (t - 1) % NS);
            cp_async_commit();
        }
        const int      st = t % NS;
        const lc_bf16 *kr = Ks + (st * TK + kq) * LDK;
        const float   *tr = Ts + (st * TK + kq) * LDT;
        float          acc[GM];
#pragma unroll
        for (int gg = 0; gg < GM; gg++) acc[gg] = 0.f;
        if (NEOX) { // pairs (i, i + HR); dims past 2 HR unrotated
#pragma unroll 4
            for (int pp = qd; pp < HR; pp += 4) {
                const float x0 = __bfloat162float(kr[pp]), x1 = __bfloat162float(kr[pp + HR]);
                const float c = tr[pp], s = tr[HR + pp];
                const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
#pragma unroll
                for (int gg = 0; gg < GM; gg++)
                    if (gg < G) acc[gg] += qs[gg * D + pp] * y0 + qs[gg * D + pp + HR] * y1;
            }
            for (int d = 2 * HR + qd; d < D; d += 4) {
                const float x = __bfloat162float(kr[d]);
#pragma unroll
                for (int gg = 0; gg < GM; gg++)
                    if (gg < G) acc[gg] += qs[gg * D + d] * x;
            }
        } else { // adjacent pairs (2i, 2i + 1); pairs past HR unrotated
#pragma unroll 4
            for (int pp = qd; pp < D / 2; pp += 4) {
                const uint32_t w  = *(const uint32_t *)(kr + 2 * pp);
                const float    x0 = bf16_lo(w), x1 = bf16_hi(w);
                float          y0 = x0, y1 = x1;
                if (pp < HR) {
                    const float c = tr[pp], s = tr[HR + pp];
                    y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
                }
#pragma unroll
                for (int gg = 0; gg < GM; gg++)
                    if (gg < G) {
                        const float2 qv = *(const float2 *)(qs + gg * D + 2 * pp);
                        acc[gg] += qv.x * y0 + qv.y * y1;
                    }
            }
        }
#pragma unroll
        for (int gg = 0; gg < GM; gg++) {
            acc[gg] += __shfl_xor_sync(0xffffffffu, acc[gg], 1);
            acc[gg] += __shfl_xor_sync(0xffffffffu, acc[gg], 2);
        }
        const bool valid = t * TK + kq < nk;
        if (qd == 0) {
#pragma unroll
            for (int gg = 0; gg < GM; gg++)
                if (gg < G) Ss[gg * TK + kq] = valid ? acc[gg] : -INFINITY;
        }
        __syncthreads();
        // online softmax: warp w takes heads w, w + 4, ...; lane = key
        for (int gg = warp; gg < G; gg += DEC_NT / 32) {
            const float sv = Ss[gg * TK + lane];
            float       mx = sv;
#pragma unroll
            for (int o_ = 16; o_ > 0; o_ >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o_));
            const float m_old = m_s[gg], m_new = fmaxf(m_old, mx);
            const float bs = m_new == -INFINITY ? 0.f : m_new;
            const float pr = exp2f(sv - bs);
            float       sum = pr;
#pragma unroll
            for (int o_ = 16; o_ > 0; o_ >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o_);
            Ss[gg * TK + lane] = pr;
            if (lane == 0) {
                const float cr = exp2f(m_old - bs);
                c_s[gg]        = cr;
                l_s[gg]        = l_s[gg] * cr + sum;
                m_s[gg]        = m_new;
            }
        }
        __syncthreads();
        // O = O * corr + P V
        const lc_bf16 *vst = Vs + st * TK * LDK;
#pragma unroll
        for (int j = 0; j < GPT; j++) {
            const int gg = gs + j * NGS;
            if (gg < G) o[j][0] *= c_s[gg], o[j][1] *= c_s[gg];
        }
        const int kn = min(TK, nk - t * TK);
        for (int k = 0; k < kn; k++) {
            const uint32_t w  = *(const uint32_t *)(vst + k * LDK + 2 * dp);
            const float    v0 = bf16_lo(w), v1 = bf16_hi(w);
#pragma unroll
            for (int j = 0; j < GPT; j++) {
                const int gg = gs + j * NGS;
                if (gg < G) {
                    const float pk = Ss[gg * TK + k];
                    o[j][0] += pk * v0, o[j][1] += pk * v1;
                }
            }
        }
    }
    cp_async_wait_all();
#pragma unroll
    for (int j = 0; j < GPT; j++) {
        const int gg = gs + j * NGS;
        if (gg >= G) continue;
        const int qh = h * G + gg;
        if (n_splits == 1) {
            const float l = l_s[gg], inv = l > 0.f ? 1.f / l : 0.f;
            *(float2 *)(a.out + ((int64_t)B.row0 * a.n_head + qh) * D + 2 * dp) =
                make_float2(o[j][0] * inv, o[j][1] * inv);
        } else {
            float *pp = part + (((int64_t)b * a.n_head + qh) * n_splits + split) * (D + 2);
            *(float2 *)(pp + 2 * dp) = make_float2(o[j][0], o[j][1]);
            if (dp == 0) pp[D] = m_s[gg], pp[D + 1] = l_s[gg];
        }
    }
}

// out[row][qh] = merge of the n_splits partials; grid (n_qb, n_head), block D
__global__ void sparse_merge_kernel(sp_params a, int n_splits, int D, const float *__restrict__ part) {
    const int           b = blockIdx.x, qh = blockIdx.y, d = threadIdx.x;
    const lc_hip_qblock B = a.qb[b];
    if (B.n_rows != 1) return;
    const float *pp = part + ((int64_t)b * a.n_head + qh) * n_splits * (D + 2);
    float        M = -INFINITY, o = 0.f, l = 0.f; // one pass, the running max rescales
#pragma unroll 8
    for (int s = 0; s < n_splits; s++) {
        const float *ps = pp + s * (D + 2);
        const float  ms = ps[D], ls = ps[D + 1], os = ps[d];
        const float  Mn = fmaxf(M, ms);
        if (Mn == -INFINITY) continue; // nothing seen yet
        const float fo = exp2f(M - Mn), fs = exp2f(ms - Mn);
        o = o * fo + os * fs, l = l * fo + ls * fs, M = Mn;
    }
    a.out[((int64_t)B.row0 * a.n_head + qh) * D + d] = l > 0.f ? o / l : 0.f;
}

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
    auto    kraw = [&](int st) { return (lc_bf16 *)stg(st); };                          // [TK][D]
    auto    vsm  = [&](int st) { return (lc_bf16 *)(stg(st) + C::KRAW_B); };            // [TK][LD]
    auto    tsm  = [&](int st) { return (float *)(stg(st) + C::KRAW_B + C::V_B); };     // [TK][LDT]

    const int           b = blockIdx.x / n_chunks, chunk = blockIdx.x % n_chunks, h = blockIdx.y;
    const lc_hip_qblock B = a.qb[b];
    if (B.n_rows <= 1) return;
    const int G = a.G, n_packed = B.n_rows * G, r0 = chunk * BM;
    if (r0 >= n_packed) return;
    const int     tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int     g   = a.n_groups == 1 ? 0 : h;
    const int64_t gl  = (int64_t)b * a.n_groups + g;
    const int4    hd  = hdr[gl];
    const int     N = hd.x, n_pre = hd.y, win0 = hd.z;
    const int2   *L = lists + gl * L_cap;

    for (int i = tid; i < BM * (D / 4); i += PRE_NT) {
        const int r = i / (D / 4), c = (i % (D / 4)) * 4, pr = r0 + r;
        float4    v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (pr < n_packed) {
            const int t = pr / G, gg = pr % G;
            v = *(const float4 *)(a.q + ((int64_t)(B.row0 + t) * a.n_head + h * G + gg) * D + c);
        }
        *(uint2 *)(Qs + r * LD + c) = make_uint2(pack_f16(v.x, v.y), pack_f16(v.z, v.w));
    }
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
        const lc_bf16 *kin = kraw(st);
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
                        const float x = bf16_lo(uk[w]), y = bf16_hi(uk[w]);
                        rk[w] = pack_f16(x * cc[w] - y * ss[w], x * ss[w] + y * cc[w]);
                    }
                } else {
#pragma unroll
                    for (int w = 0; w < 4; w++) rk[w] = bf16x2_to_f16x2(uk[w]);
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
                    const float x0 = bf16_lo(ua[w]), x1 = bf16_hi(ua[w]);
                    const float y0 = bf16_lo(ub[w]), y1 = bf16_hi(ub[w]);
                    ra[w] = pack_f16(x0 * c0_ - y0 * s0, x1 * c1 - y1 * s1);
                    rb[w] = pack_f16(x0 * s0 + y0 * c0_, x1 * s1 + y1 * c1);
                }
                *(uint4 *)(Kr + j * LD + c0)         = make_uint4(ra[0], ra[1], ra[2], ra[3]);
                *(uint4 *)(Kr + j * LD + c0 + D / 2) = make_uint4(rb[0], rb[1], rb[2], rb[3]);
            }
        }
        { // V: bf16 -> fp16 in place (exact for the magnitudes attention values have)
            uint4 *vv = (uint4 *)vsm(st);
            for (int i = tid; i < TK * (D / 8); i += PRE_NT) {
                const int j = i / (D / 8), c = i % (D / 8);
                uint4     w = vv[j * (LD / 8) + c];
                w           = make_uint4(bf16x2_to_f16x2(w.x), bf16x2_to_f16x2(w.y),
                                         bf16x2_to_f16x2(w.z), bf16x2_to_f16x2(w.w));
                vv[j * (LD / 8) + c] = w;
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
        float corr[2], bs[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m_run[i], mx[i]);
            bs[i]             = m_new == -INFINITY ? 0.f : m_new;
            corr[i]           = exp2f(m_run[i] - bs[i]);
            m_run[i]          = m_new;
            l_run[i] *= corr[i];
        }
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= corr[0], o[dt][1] *= corr[0];
            o[dt][2] *= corr[1], o[dt][3] *= corr[1];
        }
#pragma unroll
        for (int nt = 0; nt < NT8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float pe = exp2f(s[nt][e] - bs[e >> 1]);
                s[nt][e]       = pe;
                l_run[e >> 1] += pe;
            }
        // O += P V (V converted to fp16 above)
        const __half *vb = (const __half *)vsm(st);
#pragma unroll
        for (int kk = 0; kk < TK / 16; kk++) {
            const uint32_t pa[4] = {pack_f16(s[2 * kk][0], s[2 * kk][1]), pack_f16(s[2 * kk][2], s[2 * kk][3]),
                                    pack_f16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack_f16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < DT / 2; dp++) {
                uint32_t  bv[4];
                const int mi = lane >> 3;
                ldmatrix_x4_trans(bv, vb + (kk * 16 + (mi & 1) * 8 + (lane & 7)) * LD + dp * 16 + (mi >> 1) * 8);
                mma_f16(o[2 * dp], pa, bv[0], bv[1]);
                mma_f16(o[2 * dp + 1], pa, bv[2], bv[3]);
            }
        }
    }
    cp_async_wait_all();
    // normalise and write the thread's two rows
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
        const int pr = r0 + warp * 16 + (lane >> 2) + 8 * i;
        if (pr >= n_packed) continue;
        const int   t = pr / G, gg = pr % G;
        const float inv = l_run[i] > 0.f ? 1.0f / l_run[i] : 0.f;
        float      *op  = a.out + ((int64_t)(B.row0 + t) * a.n_head + h * G + gg) * D;
#pragma unroll
        for (int j = 0; j < DT; j++)
            *(float2 *)(op + 8 * j + 2 * (lane & 3)) = make_float2(o[j][2 * i] * inv, o[j][2 * i + 1] * inv);
    }
}

// ---- host side -----------------------------------------------------------------------------

int sm_count(void) {
    static int n_sm = 0;
    if (n_sm == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n_sm = 132;
    }
    return n_sm;
}

// Decode splits per (block, KV head): one wave of two CTAs per SM, at least ~64 keys per CTA,
// at most SP_KCAP. Non-increasing in H (the scratch size is taken at H = 1).
int64_t dec_splits(int64_t n_max, int64_t n_qb, int64_t H) {
    int64_t s = (2 * (int64_t)sm_count() + H * n_qb - 1) / (H * n_qb);
    if (s > (n_max + 63) / 64) s = (n_max + 63) / 64;
    if (s < (n_max + SP_KCAP - 1) / SP_KCAP) s = (n_max + SP_KCAP - 1) / SP_KCAP;
    return s < 1 ? 1 : s;
}

struct sp_plan {
    int64_t splits, L_cap;
    size_t  hdr_off, list_off, total;
};

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

sp_plan make_plan(int32_t n_qb, int32_t n_head, int32_t H, const lc_hip_sparse_args *a) {
    sp_plan       pl    = {};
    const int64_t n_max = (int64_t)(a->n_sink > 0 ? a->n_sink : 0) + (a->max_sel > 0 ? a->max_sel : 0) +
                          (a->max_window > 0 ? a->max_window : 0);
    pl.L_cap  = n_max > 0 ? n_max : 1;
    pl.splits = dec_splits(pl.L_cap, n_qb > 0 ? n_qb : 1, H);
    size_t off = 0;
    if (pl.splits > 1)
        off = align256((size_t)n_qb * n_head * pl.splits * (SP_DMAX + 2) * sizeof(float));
    pl.hdr_off = pl.list_off = off;
    if (a->max_rows > 1) {
        const size_t n_lists = (size_t)n_qb * (size_t)(a->n_groups > 0 ? a->n_groups : 1);
        off         = align256(off + n_lists * sizeof(int4));
        pl.list_off = off;
        off         = align256(off + n_lists * (size_t)pl.L_cap * sizeof(int2));
    }
    pl.total = off;
    return pl;
}

template <int D, bool NEOX, int GM>
int launch_decode(const sp_params &p, int32_t n_qb, int64_t splits, float *part) {
    static bool configured = false;
    if (!configured) {
        LC_CUDA_TRY(cudaFuncSetAttribute(sparse_decode_kernel<D, NEOX, GM>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         dec_cfg<D>::smem(SP_MAXG)));
        LC_CUDA_TRY(cudaFuncSetAttribute(sparse_decode_kernel<D, NEOX, GM>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared));
        configured = true;
    }
    dim3 grid((unsigned)(n_qb * splits), (unsigned)p.H);
    sparse_decode_kernel<D, NEOX, GM><<<grid, DEC_NT, dec_cfg<D>::smem(p.G), lc_cuda_stream()>>>(
        p, (int)splits, part);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

template <int D, bool NEOX>
int launch_decode_g(const sp_params &p, int32_t n_qb, int64_t splits, float *part) {
    if (p.G <= 4) return launch_decode<D, NEOX, 4>(p, n_qb, splits, part);
    if (p.G <= 8) return launch_decode<D, NEOX, 8>(p, n_qb, splits, part);
    return launch_decode<D, NEOX, 16>(p, n_qb, splits, part);
}

template <int D, bool NEOX>
int launch_prefill(const sp_params &p, int32_t n_qb, int32_t max_rows, const sp_plan &pl,
                   unsigned char *scratch) {
    static bool configured = false;
    if (!configured) {
        LC_CUDA_TRY(cudaFuncSetAttribute(sparse_prefill_kernel<D, NEOX>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, pre_cfg<D>::SMEM));
        configured = true;
    }
    int4 *hdr   = (int4 *)(scratch + pl.hdr_off);
    int2 *lists = (int2 *)(scratch + pl.list_off);
    sparse_list_kernel<<<dim3((unsigned)n_qb, (unsigned)p.n_groups), 256, 0, lc_cuda_stream()>>>(
        p, pl.L_cap, lists, hdr);
    LC_CUDA_LAUNCHED();
    const int n_chunks = (max_rows * p.G + PRE_BM - 1) / PRE_BM;
    dim3      grid((unsigned)(n_qb * n_chunks), (unsigned)p.H);
    sparse_prefill_kernel<D, NEOX><<<grid, PRE_NT, pre_cfg<D>::SMEM, lc_cuda_stream()>>>(
        p, n_chunks, pl.L_cap, lists, hdr);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}

} // namespace

extern "C" size_t lc_cuda_attn_sparse_scratch_bytes(int32_t n_qb, int32_t n_head,
                                                    const lc_hip_sparse_args *a) {
    if (n_qb <= 0 || n_head <= 0 || !a) return 0;
    return make_plan(n_qb, n_head, 1, a).total;
}

extern "C" int lc_cuda_attn_sparse(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                   const lc_hip_qblock *qb, int32_t n_qb, const float *q,
                                   int32_t n_head, const lc_rope_table *rope, float scale,
                                   const lc_hip_sparse_args *a, void *scratch, size_t scratch_bytes,
                                   float *out) {
    const int D = kv->head_dim, H = kv->n_kv_head, P = kv->page_size;
    if (n_qb <= 0) return LC_OK;
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_sparse: head dim %d (64 and 128 supported)", D);
    if (H <= 0 || n_head % H != 0 || n_head / H > SP_MAXG)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_sparse: %d query heads over %d KV heads "
                       "(1..%d per KV head supported)", n_head, H, SP_MAXG);
    if (P <= 0 || (P & (P - 1)) != 0)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_sparse: page size %d is not a power of two", P);
    if (a->n_groups != 1 && a->n_groups != H)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_sparse: n_groups %d (1 or n_kv_head %d)",
                       a->n_groups, H);
    if (a->max_rows < 1 || a->sel_cap < 0 || a->n_sink < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_sparse: max_rows %d, sel_cap %d, n_sink %d",
                       a->max_rows, a->sel_cap, a->n_sink);
    const bool neox = rope->pairing == LC_ROPE_NEOX;
    if (rope->n_rot % 8 != 0 || rope->n_rot <= 0 || rope->n_rot > D || (neox && rope->n_rot != D))
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attn_sparse: %d rotated dims of %d (%s pairing)",
                       rope->n_rot, D, neox ? "neox" : "adjacent");
    const sp_plan pl = make_plan(n_qb, n_head, H, a);
    if (pl.total > 0 && (!scratch || scratch_bytes < pl.total))
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attn_sparse: scratch of %zu bytes, %zu needed",
                       scratch_bytes, pl.total);
    sp_params p;
    p.kpool = (const lc_bf16 *)kv->k, p.vpool = (const lc_bf16 *)kv->v;
    p.seqs = seqs, p.qb = qb, p.sel = a->sel, p.sel_n = a->sel_n, p.q = q, p.out = out;
    p.cs = rope->cos, p.sn = rope->sin;
    p.H = H, p.G = n_head / H, p.n_head = n_head;
    p.page_shift = 0;
    while ((1 << p.page_shift) < P) p.page_shift++;
    p.n_groups = a->n_groups, p.sel_cap = a->sel_cap, p.n_sink = a->n_sink;
    p.streaming = a->attn_rope == LC_HIP_ATTN_STREAMING;
    p.half_rot = rope->n_rot / 2, p.n_pos = rope->n_pos;
    p.scale_log2 = scale * 1.4426950408889634f;

    unsigned char *sc   = (unsigned char *)scratch;
    float         *part = (float *)sc;
    int st = D == 64 ? (neox ? launch_decode_g<64, true>(p, n_qb, pl.splits, part)
                             : launch_decode_g<64, false>(p, n_qb, pl.splits, part))
                     : (neox ? launch_decode_g<128, true>(p, n_qb, pl.splits, part)
                             : launch_decode_g<128, false>(p, n_qb, pl.splits, part));
    if (st != LC_OK) return st;
    if (pl.splits > 1) {
        sparse_merge_kernel<<<dim3((unsigned)n_qb, (unsigned)n_head), D, 0, lc_cuda_stream()>>>(
            p, (int)pl.splits, D, part);
        LC_CUDA_LAUNCHED();
    }
    if (a->max_rows > 1) {
        st = D == 64 ? (neox ? launch_prefill<64, true>(p, n_qb, a->max_rows, pl, sc)
                             : launch_prefill<64, false>(p, n_qb, a->max_rows, pl, sc))
                     : (neox ? launch_prefill<128, true>(p, n_qb, a->max_rows, pl, sc)
                             : launch_prefill<128, false>(p, n_qb, a->max_rows, pl, sc));
        if (st != LC_OK) return st;
    }
    return LC_OK;
}
