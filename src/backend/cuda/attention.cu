// attention.cu — dense causal attention over the paged bf16 KV cache, the GPU twin of the CPU
// backend's lc_cpu_attn_dense (backend/cpu/cpu_attention.c); the dense baseline the sparse
// methods (HiP, InfiniteHiP, TokenSelect) are measured against and built from.
//
// Keys are stored before RoPE (DESIGN.md "Pre-RoPE keys"); both kernels rotate them with their
// true positions while they read them. A position ps + j (ps = the page's first token, j < 64)
// rotates by R(ps + j) = R(ps)·R(j), so only table rows 0..63 (hot in L1) and one row per page
// are read — never a table row per key.
//
//  * decode (one new query per sequence): FlashDecoding-style split over pages. A CTA owns one
//    (sequence, KV head, split) and all G query heads of that KV head, so every K/V byte is read
//    once; each warp walks whole pages (64 keys) with online softmax; per-split partials (o, m,
//    l) are merged by a second kernel. Instead of rotating each key by its absolute angle the
//    warp rotates the G queries by R(-ps) once per page and each key by R(j).
//  * prefill (any number of new rows per sequence): FlashAttention-2-style tiles on tensor
//    cores (mma.sync m16n8k16, fp32 accumulation). A CTA owns 64 packed query rows of one
//    KV head — rows are (token, query head of the group) pairs, so the G heads of a group share
//    each K/V tile — and walks 64-key tiles, one page each, double-buffered with cp.async;
//    each K tile is rotated in shared memory before use (and V converted in the same pass).
//    Both products run in fp16: the rotated keys, queries and probabilities keep 11 mantissa
//    bits where bf16's 8 cost ~4e-2 in SmolLM2's log-probs; the bf16 K/V convert exactly.
//
// The page size is 64 tokens on this backend: one page is exactly one key tile of the prefill
// kernel and one unit of a decode warp's walk, so a tile never straddles pages and the page
// table is read once per tile.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <math.h>
#include <stdint.h>

#define PAGE 64

struct attn_common {
    const lc_bf16     *kpool, *vpool; // [n_pages][H][PAGE][D]
    int32_t            H, G, n_head;
    const lc_attn_seq *seqs;
    const float       *q;             // [rows][n_head][D], rotated
    float             *out;           // [rows][n_head][D]
    const float       *cs, *sn;       // [n_pos][half_rot]
    int32_t            half_rot;
    int32_t            n_pos;         // table rows
    float              mscale;        // table factor (1 unless YaRN)
    float              scale_log2;    // softmax scale * log2(e), table factors divided out
};

// ---- decode --------------------------------------------------------------------------------

// A lane's 8 dims of one bf16 row as its 4 rotation pairs: a[t] = x[ea[t]], b[t] = x[eb[t]]
// (adjacent pairs: dims 8 sub .. 8 sub + 7; split halves: 4 sub .. + 3 and D/2 + 4 sub .. + 3).
template <int D, bool NEOX>
__device__ __forceinline__ void load_pairs(const lc_bf16 *row, int sub, float a[4], float b[4]) {
    if (NEOX) {
        const uint2           lo = *(const uint2 *)(row + 4 * sub);
        const uint2           hi = *(const uint2 *)(row + D / 2 + 4 * sub);
        const __nv_bfloat162 *l2 = (const __nv_bfloat162 *)&lo, *h2 = (const __nv_bfloat162 *)&hi;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            a[2 * t] = __low2float(l2[t]), a[2 * t + 1] = __high2float(l2[t]);
            b[2 * t] = __low2float(h2[t]), b[2 * t + 1] = __high2float(h2[t]);
        }
    } else {
        const uint4           w  = *(const uint4 *)(row + 8 * sub);
        const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&w;
#pragma unroll
        for (int t = 0; t < 4; t++) a[t] = __low2float(w2[t]), b[t] = __high2float(w2[t]);
    }
}

template <int D, int G, bool NEOX>
__global__ void __launch_bounds__(128)
    attn_decode_kernel(attn_common a, const int32_t *__restrict__ dec_list, int32_t n_splits,
                       float *__restrict__ part) {
    constexpr int LPK = D / 8;      // lanes per key (8 dims each)
    constexpr int KPI = 32 / LPK;   // keys per warp iteration
    constexpr int IT  = PAGE / KPI; // iterations per page
    constexpr int SPL = IT / LPK;   // scores a lane keeps per query head
    __shared__ float qs[G * D];
    __shared__ float red[4][G][D + 2];

    const int         h = blockIdx.x, split = blockIdx.y;
    const lc_attn_seq sq = a.seqs[dec_list[blockIdx.z]];
    const int         L       = sq.pos0 + 1;
    const int         n_pages = (L + PAGE - 1) / PAGE;
    const int         pps     = (n_pages + n_splits - 1) / n_splits;
    const int         pg0 = split * pps, pg1 = min(n_pages, pg0 + pps);
    const int         warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int         sub = lane % LPK, slot = lane / LPK;

    for (int i = threadIdx.x; i < G * D; i += 128)
        qs[i] = a.q[((int64_t)sq.row0 * a.n_head + h * G) * D + i];
    __syncthreads();

    // this lane's dims: pairs p = 4 sub + t, elements (ea, eb)
    int ea[4], eb[4];
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const int p = 4 * sub + t;
        ea[t]       = NEOX ? p : 2 * p;
        eb[t]       = NEOX ? p + D / 2 : 2 * p + 1;
    }
    const bool rotated = 4 * sub < a.half_rot; // half_rot is a multiple of 4

    float m_run[G], l_run[G], acc[G][8]; // acc[g][t] at dim ea[t], acc[g][4 + t] at eb[t]
#pragma unroll
    for (int g = 0; g < G; g++) {
        m_run[g] = -INFINITY, l_run[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) acc[g][e] = 0.0f;
    }

    for (int pg = pg0 + warp; pg < pg1; pg += 4) {
        const int      ps   = pg * PAGE;
        const int      n_in = min(PAGE, L - ps);
        const int64_t  base = ((int64_t)sq.page_table[pg] * a.H + h) * PAGE * D;
        const lc_bf16 *kp = a.kpool + base, *vp = a.vpool + base;
        // queries rotated back by R(-ps): q' = R(-ps) q (unrotated dims scaled by mscale so that
        // every dim carries the same table factor)
        float qa[G][4], qb[G][4];
        {
            float c[4], s[4];
            if (rotated) {
                const float4 c4 = *(const float4 *)(a.cs + (int64_t)ps * a.half_rot + 4 * sub);
                const float4 s4 = *(const float4 *)(a.sn + (int64_t)ps * a.half_rot + 4 * sub);
                c[0] = c4.x, c[1] = c4.y, c[2] = c4.z, c[3] = c4.w;
                s[0] = s4.x, s[1] = s4.y, s[2] = s4.z, s[3] = s4.w;
            } else {
#pragma unroll
                for (int t = 0; t < 4; t++) c[t] = a.mscale, s[t] = 0.0f;
            }
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const float x = qs[g * D + ea[t]], y = qs[g * D + eb[t]];
                    qa[g][t] = x * c[t] + y * s[t];
                    qb[g][t] = y * c[t] - x * s[t];
                }
        }
        // phase 1: scores of the page's keys
        float sc[G][SPL];
#pragma unroll
        for (int it = 0; it < IT; it++) {
            const int j = it * KPI + slot;
            float     ka[4], kb[4];
            load_pairs<D, NEOX>(kp + j * D, sub, ka, kb);
            if (rotated && j < a.n_pos) { // rows past the table belong to masked keys
                const float4 c4 = *(const float4 *)(a.cs + (int64_t)j * a.half_rot + 4 * sub);
                const float4 s4 = *(const float4 *)(a.sn + (int64_t)j * a.half_rot + 4 * sub);
                const float  c[4] = {c4.x, c4.y, c4.z, c4.w}, s[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const float x = ka[t], y = kb[t];
                    ka[t]         = x * c[t] - y * s[t];
                    kb[t]         = x * s[t] + y * c[t];
                }
            }
#pragma unroll
            for (int g = 0; g < G; g++) {
                float d = 0.0f;
#pragma unroll
                for (int t = 0; t < 4; t++) d += qa[g][t] * ka[t] + qb[g][t] * kb[t];
#pragma unroll
                for (int o = LPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                if (it % LPK == sub) sc[g][it / LPK] = j < n_in ? d * a.scale_log2 : -INFINITY;
            }
        }
        // online softmax over the page
#pragma unroll
        for (int g = 0; g < G; g++) {
            float pm = sc[g][0];
#pragma unroll
            for (int i = 1; i < SPL; i++) pm = fmaxf(pm, sc[g][i]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) pm = fmaxf(pm, __shfl_xor_sync(0xffffffffu, pm, o));
            const float m_new = fmaxf(m_run[g], pm); // finite: every page has a key
            const float corr  = exp2f(m_run[g] - m_new);
            m_run[g]          = m_new;
            l_run[g] *= corr;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[g][e] *= corr;
#pragma unroll
            for (int i = 0; i < SPL; i++) {
                sc[g][i] = exp2f(sc[g][i] - m_new);
                l_run[g] += sc[g][i];
            }
        }
        // phase 2: accumulate V
#pragma unroll
        for (int it = 0; it < IT; it++) {
            const int j = it * KPI + slot;
            float     va[4], vb[4];
            load_pairs<D, NEOX>(vp + j * D, sub, va, vb);
            const bool live = j < n_in; // slots past the sequence end may hold anything
#pragma unroll
            for (int g = 0; g < G; g++) {
                const float p = __shfl_sync(0xffffffffu, sc[g][it / LPK], slot * LPK + it % LPK);
                if (live)
#pragma unroll
                    for (int t = 0; t < 4; t++) acc[g][t] += p * va[t], acc[g][4 + t] += p * vb[t];
            }
        }
    }
    // merge the warp's key slots, then the block's warps
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int o = LPK; o < 32; o <<= 1)
#pragma unroll
            for (int e = 0; e < 8; e++) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) l_run[g] += __shfl_xor_sync(0xffffffffu, l_run[g], o);
        if (slot == 0)
#pragma unroll
            for (int t = 0; t < 4; t++) red[warp][g][ea[t]] = acc[g][t], red[warp][g][eb[t]] = acc[g][4 + t];
        if (lane == 0) red[warp][g][D] = m_run[g], red[warp][g][D + 1] = l_run[g];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += 128) {
        const int g = i / D, d = i % D;
        float     M = -INFINITY;
#pragma unroll
        for (int w = 0; w < 4; w++) M = fmaxf(M, red[w][g][D]);
        float o = 0.0f, l = 0.0f;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const float mw = red[w][g][D];
            if (mw == -INFINITY) continue;
            const float f = exp2f(mw - M);
            o += f * red[w][g][d];
            l += f * red[w][g][D + 1];
        }
        const int qh = h * G + g;
        if (n_splits == 1) {
            a.out[((int64_t)sq.row0 * a.n_head + qh) * D + d] = l > 0.0f ? o / l : 0.0f;
        } else {
            float *pp = part + (((int64_t)blockIdx.z * a.n_head + qh) * n_splits + split) * (D + 2);
            pp[d] = o;
            if (d == 0) pp[D] = M, pp[D + 1] = l;
        }
    }
}

// out[row][qh] = merge of the n_splits partials; grid (n_head, n_dec), block D
__global__ void attn_decode_merge_kernel(attn_common a, const int32_t *__restrict__ dec_list,
                                         int32_t n_splits, int32_t D,
                                         const float *__restrict__ part) {
    const int         qh = blockIdx.x, d = threadIdx.x;
    const lc_attn_seq sq = a.seqs[dec_list[blockIdx.y]];
    const float      *pp = part + ((int64_t)blockIdx.y * a.n_head + qh) * n_splits * (D + 2);
    float             M  = -INFINITY;
    for (int s = 0; s < n_splits; s++) M = fmaxf(M, pp[s * (D + 2) + D]);
    float o = 0.0f, l = 0.0f;
    for (int s = 0; s < n_splits; s++) {
        const float ms = pp[s * (D + 2) + D];
        if (ms == -INFINITY) continue;
        const float f = exp2f(ms - M);
        o += f * pp[s * (D + 2) + d];
        l += f * pp[s * (D + 2) + D + 1];
    }
    a.out[((int64_t)sq.row0 * a.n_head + qh) * D + d] = l > 0.0f ? o / l : 0.0f;
}

// ---- prefill -------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

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

template <int D> constexpr int prefill_smem_bytes() { return (64 + 4 * 64) * (D + 8) * 2; }

// grid (row blocks, H, n_pre); block 128 = 4 warps x 16 packed rows
template <int D, bool NEOX>
__global__ void __launch_bounds__(128, 2)
    attn_prefill_kernel(attn_common a, const int32_t *__restrict__ pre_list) {
    constexpr int BM = 64, BN = PAGE, LD = D + 8, NT = BN / 8, DT = D / 8, KS = D / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half  *Qs = (__half *)smem_raw;              // [BM][LD] fp16
    lc_bf16 *Ks = (lc_bf16 *)(Qs + BM * LD);       // [2][BN][LD] bf16 as loaded, fp16 rotated
    lc_bf16 *Vs = Ks + 2 * BN * LD;                // [2][BN][LD] bf16 as loaded, then fp16

    const int         h  = blockIdx.y;
    const lc_attn_seq sq = a.seqs[pre_list[blockIdx.z]];
    const int         G = a.G, n_packed = sq.n_rows * G;
    const int         r0 = (gridDim.x - 1 - blockIdx.x) * BM; // longest rows first
    if (r0 >= n_packed) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int L   = sq.pos0 + sq.n_rows; // keys of this sequence after this step

    // Q tile: fp32 rotated queries -> fp16 in shared memory
    for (int i = tid; i < BM * (D / 4); i += 128) {
        const int r = i / (D / 4), c = (i % (D / 4)) * 4, pr = r0 + r;
        float4    v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (pr < n_packed) {
            const int t = pr / G, g = pr % G;
            v = *(const float4 *)(a.q + ((int64_t)(sq.row0 + t) * a.n_head + h * G + g) * D + c);
        }
        *(uint2 *)(Qs + r * LD + c) = make_uint2(pack_f16(v.x, v.y), pack_f16(v.z, v.w));
    }
    const int t_lo    = r0 / G, t_hi = (min(n_packed, r0 + BM) - 1) / G;
    const int n_tiles = (sq.pos0 + t_hi) / BN + 1;
    const int full    = (sq.pos0 + t_lo + 1) / BN; // tiles every row sees whole

    auto load_tile = [&](int kt, int buf) {
        const int64_t  base = ((int64_t)sq.page_table[kt] * a.H + h) * BN * D;
        const lc_bf16 *kg = a.kpool + base, *vg = a.vpool + base;
        lc_bf16       *kd = Ks + buf * BN * LD, *vd = Vs + buf * BN * LD;
        for (int i = tid; i < BN * (D / 8); i += 128) {
            const int r = i / (D / 8), c = (i % (D / 8)) * 8;
            if (kt * BN + r < L) {
                cp_async16(kd + r * LD + c, kg + r * D + c);
                cp_async16(vd + r * LD + c, vg + r * D + c);
            } else { // past the end: zeros, so that 0-probability keys cannot inject NaN
                *(uint4 *)(kd + r * LD + c) = make_uint4(0, 0, 0, 0);
                *(uint4 *)(vd + r * LD + c) = make_uint4(0, 0, 0, 0);
            }
        }
        cp_async_commit();
    };
    load_tile(0, 0);
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
        ldmatrix_x4(qf[kk], Qs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);

    // causal limits of this thread's two rows (-1: padding row)
    int lim[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int pr = r0 + warp * 16 + (lane >> 2) + 8 * i;
        lim[i]       = pr < n_packed ? sq.pos0 + pr / G : -1;
    }
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    float o[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

    // rotation pass (bf16 -> rotated fp16 in place): thread -> pair p, keys j0, j0 + step, ...
    constexpr int HALF = D / 2, STEP = 128 / HALF;
    const int     rp = tid % HALF, rj0 = tid / HALF;
    const bool    rot = rp < a.half_rot; // pairs past the rotated dims are only converted
    const float   inv_ms = 1.0f / a.mscale;

    for (int kt = 0; kt < n_tiles; kt++) {
        const int buf = kt & 1;
        cp_async_wait_all();
        __syncthreads();
        {
            lc_bf16    *kd = Ks + buf * BN * LD;
            const float C = rot ? a.cs[(int64_t)kt * BN * a.half_rot + rp] * inv_ms : 1.0f;
            const float S = rot ? a.sn[(int64_t)kt * BN * a.half_rot + rp] * inv_ms : 0.0f;
            for (int j = rj0; j < BN; j += STEP) {
                float c = 1.0f, s = 0.0f;
                if (rot && j < a.n_pos) { // rows past the table belong to masked keys
                    const float cj = a.cs[j * a.half_rot + rp], sj = a.sn[j * a.half_rot + rp];
                    c = C * cj - S * sj, s = S * cj + C * sj;
                }
                const int   oa = j * LD + (NEOX ? rp : 2 * rp), ob = j * LD + (NEOX ? rp + HALF : 2 * rp + 1);
                lc_bf16    *pa = kd + oa, *pb = kd + ob;
                const float x = __bfloat162float(*pa), y = __bfloat162float(*pb);
                *(__half *)pa = __float2half_rn(x * c - y * s);
                *(__half *)pb = __float2half_rn(x * s + y * c);
                lc_bf16 *va = Vs + buf * BN * LD + oa, *vb2 = Vs + buf * BN * LD + ob;
                *(__half *)va  = __float2half_rn(__bfloat162float(*va));
                *(__half *)vb2 = __float2half_rn(__bfloat162float(*vb2));
            }
        }
        __syncthreads();
        if (kt + 1 < n_tiles) load_tile(kt + 1, buf ^ 1);

        const lc_bf16 *kb = Ks + buf * BN * LD, *vb = Vs + buf * BN * LD;
        float          s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t  b[4];
                const int mi = lane >> 3;
                ldmatrix_x4(b, kb + (np * 16 + (mi >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (mi & 1) * 8);
                mma_f16(s[2 * np], qf[kk], b[0], b[1]);
                mma_f16(s[2 * np + 1], qf[kk], b[2], b[3]);
            }
        // scale, mask, online softmax (rows lane>>2 and +8; 4 lanes share a row)
        const bool need_mask = kt >= full;
        float      mx[2]     = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = kt * BN + nt * 8 + 2 * (lane & 3) + (e & 1);
                float     v   = s[nt][e] * a.scale_log2;
                if (need_mask && key > lim[e >> 1]) v = -INFINITY;
                s[nt][e]  = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        float corr[2], base[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m_run[i], mx[i]);
            base[i]           = m_new == -INFINITY ? 0.f : m_new;
            corr[i]           = exp2f(m_run[i] - base[i]);
            m_run[i]          = m_new;
            l_run[i] *= corr[i];
        }
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= corr[0], o[dt][1] *= corr[0];
            o[dt][2] *= corr[1], o[dt][3] *= corr[1];
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = exp2f(s[nt][e] - base[e >> 1]);
                s[nt][e]      = p;
                l_run[e >> 1] += p;
            }
        // O += P V
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4] = {pack_f16(s[2 * kk][0], s[2 * kk][1]), pack_f16(s[2 * kk][2], s[2 * kk][3]),
                              pack_f16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_f16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < DT / 2; dp++) {
                uint32_t  b[4];
                const int mi = lane >> 3;
                ldmatrix_x4_trans(b, vb + (kk * 16 + (mi & 1) * 8 + (lane & 7)) * LD + dp * 16 + (mi >> 1) * 8);
                mma_f16(o[2 * dp], pa, b[0], b[1]);
                mma_f16(o[2 * dp + 1], pa, b[2], b[3]);
            }
        }
    }
    // normalise and write
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int pr = r0 + warp * 16 + (lane >> 2) + 8 * i;
        if (pr >= n_packed) continue;
        const int   t = pr / G, g = pr % G;
        const float inv = l_run[i] > 0.f ? 1.0f / l_run[i] : 0.f;
        float      *op  = a.out + ((int64_t)(sq.row0 + t) * a.n_head + h * G + g) * D;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            *(float2 *)(op + dt * 8 + 2 * (lane & 3)) =
                make_float2(o[dt][2 * i] * inv, o[dt][2 * i + 1] * inv);
    }
}

// ---- launchers -----------------------------------------------------------------------------

template <int D, int G, bool NEOX>
static void launch_decode(const attn_common &a, const lc_cuda_attn_batch *bt) {
    dim3 grid((unsigned)a.H, (unsigned)bt->n_splits, (unsigned)bt->n_dec);
    attn_decode_kernel<D, G, NEOX><<<grid, 128, 0, lc_cuda_stream()>>>(a, bt->dec, bt->n_splits,
                                                                     bt->part);
}

template <int D, bool NEOX>
static int decode_for_g(const attn_common &a, const lc_cuda_attn_batch *bt) {
    switch (a.G) {
    case 1: launch_decode<D, 1, NEOX>(a, bt); break;
    case 2: launch_decode<D, 2, NEOX>(a, bt); break;
    case 3: launch_decode<D, 3, NEOX>(a, bt); break;
    case 4: launch_decode<D, 4, NEOX>(a, bt); break;
    case 5: launch_decode<D, 5, NEOX>(a, bt); break;
    case 6: launch_decode<D, 6, NEOX>(a, bt); break;
    case 7: launch_decode<D, 7, NEOX>(a, bt); break;
    case 8: launch_decode<D, 8, NEOX>(a, bt); break;
    default: return lc_fail(LC_ERR_UNSUPPORTED, "cuda attention: %d query heads per KV head "
                            "(1..8 supported)", a.G);
    }
    return LC_OK;
}

template <int D, bool NEOX> static int launch_prefill(const attn_common &a, const lc_cuda_attn_batch *bt) {
    static bool configured = false; // the attribute is per kernel; setting it twice is harmless
    const int   smem       = prefill_smem_bytes<D>();
    if (!configured) {
        LC_CUDA_TRY(cudaFuncSetAttribute(attn_prefill_kernel<D, NEOX>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = true;
    }
    const int blocks = (bt->max_pre_rows * a.G + 63) / 64;
    dim3      grid((unsigned)blocks, (unsigned)a.H, (unsigned)bt->n_pre);
    attn_prefill_kernel<D, NEOX><<<grid, 128, smem, lc_cuda_stream()>>>(a, bt->pre);
    return LC_OK;
}

extern "C" int lc_cuda_attn_splits(int32_t n_kv_head, int32_t n_dec, int64_t max_keys) {
    static int n_sm = 0;
    if (n_sm == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n_sm = 132;
    }
    if (n_dec <= 0) return 1;
    const int64_t pages  = (max_keys + PAGE - 1) / PAGE;
    int64_t       splits = (4 * (int64_t)n_sm + (int64_t)n_kv_head * n_dec - 1) / ((int64_t)n_kv_head * n_dec);
    if (splits > pages) splits = pages;
    if (splits < 1) splits = 1;
    return (int)splits;
}

extern "C" int lc_cuda_attn_dense(const lc_kv_layer_view *kv, const lc_cuda_attn_batch *bt,
                                  const float *q, int32_t n_head, const lc_rope_table *rope,
                                  float scale, float *out) {
    const int D = kv->head_dim, H = kv->n_kv_head;
    if (kv->page_size != PAGE)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attention: page size %d (the CUDA kernels use "
                       "64-token pages; --page-size 64)", kv->page_size);
    if (D != 64 && D != 128)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attention: head dim %d (64 and 128 supported)", D);
    if (n_head % H != 0)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attention: %d query heads over %d KV heads", n_head, H);
    const bool neox = rope->pairing == LC_ROPE_NEOX;
    if (rope->n_rot % 8 != 0 || rope->n_rot > D || (neox && rope->n_rot != D))
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attention: %d rotated dims of %d (%s pairing)",
                       rope->n_rot, D, neox ? "neox" : "adjacent");
    const float mscale = rope->mscale > 0.f ? rope->mscale : 1.0f;
    attn_common a;
    a.kpool = (const lc_bf16 *)kv->k, a.vpool = (const lc_bf16 *)kv->v;
    a.H = H, a.G = n_head / H, a.n_head = n_head;
    a.seqs = bt->seqs, a.q = q, a.out = out, a.cs = rope->cos, a.sn = rope->sin;
    a.half_rot = rope->n_rot / 2, a.mscale = mscale, a.n_pos = rope->n_pos;
    // decode composes three table factors (query, R(-ps), R(j)) and prefill two (query, key):
    // divide out the extra one in both
    a.scale_log2 = scale * 1.4426950408889634f / mscale;
    if (bt->n_dec > 0) {
        if (bt->n_splits > 1 && !bt->part)
            return lc_fail(LC_ERR_INVALID_ARG, "cuda attention: no partial buffer for %d splits", bt->n_splits);
        int st = D == 64 ? (neox ? decode_for_g<64, true>(a, bt) : decode_for_g<64, false>(a, bt))
                         : (neox ? decode_for_g<128, true>(a, bt) : decode_for_g<128, false>(a, bt));
        if (st != LC_OK) return st;
        LC_CUDA_LAUNCHED();
        if (bt->n_splits > 1) {
            attn_decode_merge_kernel<<<dim3((unsigned)n_head, (unsigned)bt->n_dec), D, 0,
                                       lc_cuda_stream()>>>(a, bt->dec, bt->n_splits, D, bt->part);
            LC_CUDA_LAUNCHED();
        }
    }
    if (bt->n_pre > 0 && bt->max_pre_rows > 0) {
        // the prefill kernel's key rotation composes two factors (R(ps) R(j)) and divides one
        // out itself, so its scores carry the factor twice, as the CPU twin's
        a.scale_log2 = scale * 1.4426950408889634f;
        int st = D == 64 ? (neox ? launch_prefill<64, true>(a, bt) : launch_prefill<64, false>(a, bt))
                         : (neox ? launch_prefill<128, true>(a, bt) : launch_prefill<128, false>(a, bt));
        if (st != LC_OK) return st;
        LC_CUDA_LAUNCHED();
    }
    return LC_OK;
}
