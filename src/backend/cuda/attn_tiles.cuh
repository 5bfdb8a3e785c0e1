// attn_tiles.cuh — the row side of the FlashAttention-style kernels of attention.cu (dense) and
// attn_segments.cu (InfiniteHiP block-sparse), shared by both: the online-softmax step over the
// rows a thread holds in an m16n8 (or m64nN) accumulator, the fp16 staging of a CTA's packed
// query rows, their normalised write-out, and the consumer warpgroups of the warp-specialised
// wgmma prefill kernels (Hopper, sm_90a; FlashAttention-3 style). Every function is
// force-inlined and its shapes are template parameters, so each kernel compiles as if the code
// stood in it.
#pragma once
#include "backend/cuda/device_prims.cuh"

#include <math.h>
#include <stdint.h>

// The packed query rows of a prefill CTA: packed row pr is (token pr / G of the rows from row0,
// query head h G + pr % G); rows from n_packed on are padding. q and out: [rows][n_head][D].
struct packed_rows {
    const float *q;   // rotated queries
    float       *out; // attention output
    int          n_head, G, h, row0, n_packed;
    // (row, head) index of packed row pr in q and out (times D: the element offset)
    __device__ __forceinline__ int64_t head_row(int pr) const {
        return (int64_t)(row0 + pr / G) * n_head + h * G + pr % G;
    }
};

// One online-softmax step for the two rows (lane/4 and + 8) a thread holds in an m16n8 (or
// m64nN) accumulator: mx = this tile's row maxima over the thread's columns (log2 units),
// reduced here over the 4 lanes of the row; the running max and sum move on, corr rescales the
// old sum and output, base is what the tile's scores are exponentiated against (0 while the
// row has seen only masked keys, so that exp2(-inf - base) = 0 and never NaN).
__device__ __forceinline__ void online_softmax_step(float mx[2], float m_run[2], float l_run[2],
                                                    float corr[2], float base[2]) {
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
}

// The online softmax of one tile of NT m16n8 score fragments s, already scaled to log2 units
// and masked (-inf), mx their row maxima over the thread's columns: the step above, the DT
// m16n8 output accumulators o rescaled, and s replaced by its probabilities (added to l_run).
template <int NT, int DT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float mx[2], float m_run[2],
                                             float l_run[2], float (&o)[DT][4]) {
    float corr[2], base[2];
    online_softmax_step(mx, m_run, l_run, corr, base);
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
}

// The fp32 queries of packed rows r0 .. r0 + BM - 1 into fp16 rows of Qs ([BM][LD]; padding
// rows zero), by the NTH threads of the CTA (thread tid).
template <int D, int BM, int LD, int NTH>
__device__ __forceinline__ void stage_queries_f16(__half *Qs, const packed_rows &rows, int r0, int tid) {
    for (int i = tid; i < BM * (D / 4); i += NTH) {
        const int r = i / (D / 4), c = (i % (D / 4)) * 4, pr = r0 + r;
        float4    v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (pr < rows.n_packed) v = *(const float4 *)(rows.q + rows.head_row(pr) * D + c);
        *(uint2 *)(Qs + r * LD + c) = make_uint2(pack_f16(v.x, v.y), pack_f16(v.z, v.w));
    }
}

// The end of a prefill row block: each row's sum reduced over the 4 lanes that share it, then
// the thread's two rows (packed rows row and row + 8; those past n_packed are skipped) of o
// normalised and written. o holds D / 8 groups of 4 accumulators in the m16n8 (and m64nD)
// layout: group j, elements 2 i and 2 i + 1 = row (+ 8 i), dims 8 j + 2 (lane % 4) and + 1.
template <int D>
__device__ __forceinline__ void write_packed_rows(const packed_rows &rows, int row, int lane,
                                                  float l_run[2], const float *o) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int pr = row + 8 * i;
        if (pr >= rows.n_packed) continue;
        const float inv = l_run[i] > 0.f ? 1.0f / l_run[i] : 0.f;
        float      *op  = rows.out + rows.head_row(pr) * D;
#pragma unroll
        for (int j = 0; j < D / 8; j++)
            *(float2 *)(op + 8 * j + 2 * (lane & 3)) = make_float2(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv);
    }
}

// O += P V for a warp's 16 query rows over a tile of NK keys: P the tile's probabilities s
// (m16n8 accumulator fragments, packed to fp16 here as the A operand), V the tile's NK key rows
// at vb (fp16 in shared memory, LD halves a row); o the warp's m16n8 output fragments.
template <int NK, int DT, int LD>
__device__ __forceinline__ void mma_pv_tile(float (&o)[DT][4], const float (&s)[NK / 8][4],
                                            const __half *vb, int lane) {
#pragma unroll
    for (int kk = 0; kk < NK / 16; kk++) {
        const uint32_t pa[4] = {pack_f16(s[2 * kk][0], s[2 * kk][1]), pack_f16(s[2 * kk][2], s[2 * kk][3]),
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

// The end of a split-K decode CTA: element d of its query head qh's row merged from the NW
// warps' partials in red (warp w's at red + (w * wstride + r) * (D + 2): o[0..D), then its max m
// and sum l; m = -inf: the warp saw no key). One split: the normalised output into a.out (rows
// of a.n_head heads, the row at row0); else the split's partial (o; m and l at D, D + 1, written
// by d == 0) into part's entry (blk, qh, split) of n_splits per (blk, head).
template <int D, int NW, typename Args>
__device__ __forceinline__ void merge_decode_warps(const float *red, int wstride, int r, int d,
                                                   const Args &a, int64_t row0, int qh,
                                                   float *part, int64_t blk, int n_splits,
                                                   int split) {
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; w++) M = fmaxf(M, red[(w * wstride + r) * (D + 2) + D]);
    float o_ = 0.0f, l = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; w++) {
        const float *rw = red + (w * wstride + r) * (D + 2);
        if (rw[D] == -INFINITY) continue;
        const float f = exp2f(rw[D] - M);
        o_ += f * rw[d];
        l += f * rw[D + 1];
    }
    if (n_splits == 1) {
        a.out[(row0 * a.n_head + qh) * D + d] = l > 0.0f ? o_ / l : 0.0f;
    } else {
        float *pp = part + ((blk * a.n_head + qh) * n_splits + split) * (D + 2);
        pp[d] = o_;
        if (d == 0) pp[D] = M, pp[D + 1] = l;
    }
}

// Shared memory of the warp-specialised prefill kernels (attention.cu's
// attn_prefill_hopper_kernel, attn_segments.cu's sparse_prefill_wgmma_kernel), 1 KB aligned (the
// swizzle atoms): the two consumer warpgroups' queries ([2][64 rows][D] fp16, 128-byte
// swizzled as tile64_off), a ring of NS stages of one K and one V tile (64 keys x D fp16, the
// same layout), and per stage a "full" mbarrier (the producer filled it) and an "empty" one
// (the consumers' 8 warps are done with it).
template <int D, int NS> struct wgmma_ring {
    static constexpr int TILE_B = 64 * D * 2; // one fp16 tile, bytes
    static constexpr int Q_B    = 64 * D * 2; // one warpgroup's queries, bytes
    static constexpr int SMEM   = 1024 /* alignment */ + 2 * Q_B + 2 * NS * TILE_B + 2 * NS * 8;
    __half        *Qs;          // [2][64 rows][D] swizzled
    unsigned char *Kr, *Vr;     // [NS] K tiles, [NS] V tiles
    uint64_t      *full, *empty; // [NS] each
    __device__ __forceinline__ explicit wgmma_ring(unsigned char *smem_raw) {
        unsigned char *sm = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
        Qs                = (__half *)sm;
        Kr                = sm + 2 * Q_B;
        Vr                = Kr + NS * TILE_B;
        full              = (uint64_t *)(Vr + NS * TILE_B);
        empty             = full + NS;
    }
};

#ifdef LC_HAVE_WGMMA
// Consumer warpgroup wg (0 or 1; threads 128 + 128 wg ..) of a warp-specialised prefill kernel,
// packed rows r0 + 64 wg .. + 63. It stages their queries into fp16 (swizzled), then takes the
// n_tiles 64-key tiles the producer fills into the ring in order (tile kt in stage kt % NS, its
// full barrier's phase (kt / NS) & 1) and runs S = Q Kᵀ (m64n64k16, Q and K from shared memory)
// and O += P V (m64nDk16, P from registers in fp16, V read transposed from shared memory) as
// asynchronous warpgroup MMAs overlapped with the softmax: tile kt's Q Kᵀ and tile kt-1's P V
// are issued together, the softmax of tile kt runs while P V still computes. Each warp arrives
// on a stage's empty barrier once it is done with it. Tiles from full_tiles on are masked: key
// (list index) x of the tile run is seen by packed row pr when x < seen(pr). Ends with the
// rows normalised and written.
template <int D, int NS, typename Seen>
__device__ __forceinline__ void wgmma_consumer(const wgmma_ring<D, NS> &ring, const packed_rows &rows,
                                               int r0, int n_tiles, int full_tiles, float c_log2,
                                               Seen seen) {
    constexpr int TILE_B = wgmma_ring<D, NS>::TILE_B, KS = D / 16;
    const int     tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int     wg = (warp >> 2) - 1, ctid = tid - 128 - 128 * wg, wrow = 16 * (warp & 3) + (lane >> 2);
    __half       *Qw = ring.Qs + wg * 64 * D;
    for (int i = ctid; i < 64 * (D / 8); i += 128) { // fp32 rotated queries -> fp16, swizzled
        const int r = i / (D / 8), c = (i % (D / 8)) * 8, pr = r0 + 64 * wg + r;
        uint4     v = make_uint4(0, 0, 0, 0);
        if (pr < rows.n_packed) {
            const float *qp = rows.q + rows.head_row(pr) * D + c;
            const float4 x = *(const float4 *)qp, y = *(const float4 *)(qp + 4);
            v = make_uint4(pack_f16(x.x, x.y), pack_f16(x.z, x.w), pack_f16(y.x, y.y), pack_f16(y.z, y.w));
        }
        *(uint4 *)(Qw + tile64_off(r, c)) = v;
    }
    fence_proxy_async();
    named_barrier(1 + wg, 128);

    int lim[2]; // keys the thread's two rows see (0: padding row)
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int pr = r0 + 64 * wg + wrow + 8 * i;
        lim[i]       = pr < rows.n_packed ? seen(pr) : 0;
    }
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.f;
    float    s[32];
    uint32_t pa[4][4];

    auto issue_qk = [&](int kt) { // S = Q K(kt)ᵀ, issued (not waited for)
        const unsigned char *kb = ring.Kr + (kt % NS) * TILE_B;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) { // 16 dims: 32 bytes along a 128-byte row of a column block
            const int off = (kk & 3) * 32 + (kk >> 2) * 64 * 128;
            wgmma_ss_n64(s, wgmma_desc_sw128((const unsigned char *)Qw + off, 16, 1024),
                         wgmma_desc_sw128(kb + off, 16, 1024), kk > 0);
        }
    };
    auto issue_pv = [&](int kt) { // O += P V(kt), issued
        const unsigned char *vb = ring.Vr + (kt % NS) * TILE_B;
#pragma unroll
        for (int t = 0; t < 4; t++) { // 16 keys: two 8-row groups of 1 KB
            const uint64_t dv = wgmma_desc_sw128(vb + t * 2048, 64 * 128, 1024);
            if constexpr (D == 128) wgmma_rs_n128_t(o, pa[t], dv);
            else wgmma_rs_n64_t(o, pa[t], dv);
        }
    };
    // masks, online softmax of S (in place: exponentials), returns the rescale of O
    auto softmax = [&](int kt, float corr[2]) {
        float mx[2] = {-INFINITY, -INFINITY};
        if (kt >= full_tiles) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = kt * 64 + 8 * j + 2 * (lane & 3) + (e & 1);
                    if (key >= lim[e >> 1]) s[4 * j + e] = -INFINITY;
                }
        }
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
        mx[0] *= c_log2, mx[1] *= c_log2;
        float base[2];
        online_softmax_step(mx, m_run, l_run, corr, base);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = fast_exp2(fmaf(s[4 * j + e], c_log2, -base[e >> 1]));
                s[4 * j + e]  = p;
                l_run[e >> 1] += p;
            }
    };
    auto pack_p = [&]() { // P in fp16, as the pages' V
#pragma unroll
        for (int j = 0; j < 8; j++) {
            pa[j >> 1][2 * (j & 1)]     = pack_f16(s[4 * j], s[4 * j + 1]);
            pa[j >> 1][2 * (j & 1) + 1] = pack_f16(s[4 * j + 2], s[4 * j + 3]);
        }
    };
    auto release = [&](int kt) {
        __syncwarp();
        if (lane == 0) mbar_arrive(ring.empty + kt % NS);
    };

    if (n_tiles > 0) {
        float corr[2];
        mbar_wait(ring.full, 0);
        wgmma_fence();
        issue_qk(0);
        wgmma_commit();
        wgmma_wait<0>();
        pin_regs<32>(s);
        softmax(0, corr);
        pack_p();
        for (int kt = 1; kt < n_tiles; kt++) {
            mbar_wait(ring.full + kt % NS, (kt / NS) & 1);
            wgmma_fence();
            issue_qk(kt);
            wgmma_commit();
            issue_pv(kt - 1);
            wgmma_commit();
            wgmma_wait<1>(); // S of tile kt is ready; P V of tile kt-1 may still run
            pin_regs<32>(s);
            softmax(kt, corr);
            wgmma_wait<0>();
            pin_regs<D / 2>(o);
            release(kt - 1);
#pragma unroll
            for (int j = 0; j < D / 8; j++) {
                o[4 * j] *= corr[0], o[4 * j + 1] *= corr[0];
                o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
            }
            pack_p();
        }
        wgmma_fence();
        issue_pv(n_tiles - 1);
        wgmma_commit();
        wgmma_wait<0>();
        pin_regs<D / 2>(o);
    }
    write_packed_rows<D>(rows, r0 + 64 * wg + wrow, lane, l_run, o);
}
#endif
