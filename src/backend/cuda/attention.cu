// attention.cu — dense causal attention over the paged fp16 KV cache, the GPU twin of the CPU
// backend's lc_cpu_attn_dense (backend/cpu/cpu_attention.c); the dense baseline the sparse
// methods (HiP, InfiniteHiP, TokenSelect) are measured against and built from. It also reads
// the fp8 layout (backend.h LC_KV_E4M3, issue 23): decode streams the slabs as stored and
// dequantises each page once in shared memory, prefill's rotation pass dequantises on the way
// into its fp16 scratch; the products are the fp16 path's from there on.
//
// Keys are stored before RoPE (DESIGN.md "Pre-RoPE keys"), so both paths rotate them with
// their true positions on the way in.
//
//  * decode (one new query per sequence): FlashDecoding-style split over pages, on tensor
//    cores. A CTA owns one (sequence, KV head, split) and all G query heads of that KV head (the
//    rows of an m16n8k16 tile), so every K/V byte is read once; it streams its pages through a
//    3-5 stage cp.async ring and its 4 warps take 16 keys of each page. A key at ps + j
//    (ps = its page's first position) rotates by R(ps) R(j): each thread keeps R(j) of its fixed
//    slots j in registers and rotates its K fragments right after ldmatrix; the queries carry
//    R(-ps), rebuilt once per page from one table row. Per-split partials (o, m, l) are merged
//    by a second kernel.
//  * prefill (any number of new rows per sequence): one pass rotates every key of the prefill
//    sequences into fp16 (and copies V) in a scratch laid out like the pages; then a
//    FlashAttention-2-style causal kernel (mma.sync m16n8k16, fp32 accumulation) runs over it.
//    A CTA owns 128 packed query rows of one KV head — rows are (token, query head of the
//    group) pairs, so the G heads of a group share each K/V tile — and walks 64-key tiles,
//    double-buffered with cp.async.
//  Both paths multiply in fp16: the rotated keys, queries and probabilities keep 11 mantissa
//  bits where bf16's 8 cost ~4e-2 in SmolLM2's log-probs; V goes to the mma as the pages hold it.
//
// The page size is 64 tokens on this backend: one page is exactly one key tile of the prefill
// kernel and one pipeline stage of the decode kernel, so a tile never straddles pages and the
// page table is read once per tile.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/attn_tiles.cuh"
#include "backend/cuda/device_prims.cuh"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 64

struct attn_common {
    const lc_kv16     *kpool, *vpool; // [n_pages][H][PAGE][D], or the fp8 layout's slabs
    const float       *kc;            // fp8 layout: the key centres [H][D] (NULL: zero)
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

// ---- shared helpers ------------------------------------------------------------------------

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
// ---- decode --------------------------------------------------------------------------------

// The staged decode kernel (the default until the direct one below is measured on a GPU;
// --tune dense-decode=staged|direct). A CTA owns one (sequence, KV head, split): it streams the split's
// pages through an NS-stage cp.async ring (K and V of one page per stage, ~35 KB at D = 128:
// two CTAs per SM keep ~128 KB of loads in flight, what HBM3 needs to run at its rate), and
// each of its 4 warps takes 16 keys of every page. The G query heads of the KV head are the
// rows of an m16n8k16 tile (rows past G are zero), so S = Q Kᵀ and O += P V are two short mma
// chains per warp and page; every K/V byte is read from HBM once.
//
// RoPE: keys are rotated in registers right after ldmatrix — an adjacent pair (2i, 2i+1) sits
// in one register, a split-half pair (i, i + D/2) in the same register of k-steps kk and
// kk + D/32 — by R(j), j = the key's slot in its page (0..63), whose cos/sin a thread keeps in
// registers for the whole kernel since its slots never change. The queries carry R(-ps) for
// the page's first position ps (R(ps + j) = R(ps) R(j)), rebuilt once per page from one table
// row. Products in fp16 with fp32 accumulation, as the prefill kernel.
// E8: the pools hold the fp8 layout. Then the ring's stages hold a page's K and V slabs as
// stored (codes and scales, half the bytes: one more stage in flight for the same shared
// memory), and each page is dequantised once into a single fp16 K / V stage that the
// ldmatrix reads below take as they take an fp16 page.
template <int D, bool E8 = false> struct decode_staged_cfg {
    static constexpr int NS   = E8 ? (D == 128 ? 4 : 6) : (D == 128 ? 3 : 5); // pipeline stages
    static constexpr int LD   = D + 8;            // smem row pitch (fp16): conflict-free ldmatrix
    static constexpr int SB8  = kv8_slab_bytes(PAGE, D);      // one fp8 slab
    static constexpr int RING = E8 ? NS * 2 * SB8 : 0;        // fp8 stages (K slab, V slab)
    static constexpr int KV   = RING + 2 * (E8 ? 1 : NS) * PAGE * LD * 2;
    static constexpr int SMEM = KV + 16 * D * 4 + NS * D * 4; // + fp32 queries [16][D] + the
                                                            // pages' cos/sin rows [NS][2][D/2]
};

template <int D, bool NEOX, bool E8>
__global__ void __launch_bounds__(128, 2)
    attn_decode_staged_kernel(attn_common a, const int32_t *__restrict__ dec_list, int32_t n_splits,
                       float *__restrict__ part) {
    using cfg = decode_staged_cfg<D, E8>;
    constexpr int NS = cfg::NS, LD = cfg::LD, KS = D / 16, DT = D / 8, SB8 = cfg::SB8;
    constexpr int NT = 4 * KS;          // table entries per thread (registers, see above)
    constexpr int KB = E8 ? 1 : NS;     // fp16 K / V stages
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *R8 = smem_raw;                  // E8: [NS][K slab | V slab]
    lc_kv16 *Ks = (lc_kv16 *)(smem_raw + cfg::RING); // [KB][PAGE][LD]
    lc_kv16 *Vs = Ks + KB * PAGE * LD;           // [KB][PAGE][LD]
    float   *qs = (float *)(Vs + KB * PAGE * LD); // [16][D], rows >= G zero
    float   *rs = qs + 16 * D;                    // [NS][cos HR | sin HR] of each page's row ps

    const int         h = blockIdx.x, split = blockIdx.y;
    const lc_attn_seq sq      = a.seqs[dec_list[blockIdx.z]];
    const int         L       = sq.pos0 + 1;
    const int         n_pages = (L + PAGE - 1) / PAGE;
    const int         pps     = (n_pages + n_splits - 1) / n_splits;
    const int         pg0 = min(n_pages, split * pps), pg1 = min(n_pages, pg0 + pps);
    const int         n_it = pg1 - pg0;
    const int         tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int         G = a.G, HR = a.half_rot;

    for (int i = tid; i < 16 * D; i += 128)
        qs[i] = i < G * D ? a.q[((int64_t)sq.row0 * a.n_head + h * G) * D + i] : 0.0f;

    // the stage's K and V page, and the table row of its first position (the page table entry
    // is read one iteration ahead, so that no load latency sits between two pages)
    auto load_page = [&](int pg, int phys, int stage) {
        const int      n_in = min(PAGE, L - pg * PAGE);
        const int64_t  base = ((int64_t)phys * a.H + h) * PAGE * D;
        if (tid < HR / 2) { // HR / 4 chunks of cos, then of sin
            const int    c   = tid % (HR / 4) * 4;
            const float *src = (tid < HR / 4 ? a.cs : a.sn) + (int64_t)pg * PAGE * HR + c;
            cp_async16(rs + stage * D + (tid < HR / 4 ? 0 : HR) + c, src);
        }
        if (E8) { // the two slabs as stored; rows past the end are zeroed when dequantised
            const int64_t        sb = ((int64_t)phys * a.H + h) * SB8;
            const unsigned char *kg = (const unsigned char *)a.kpool + sb;
            const unsigned char *vg = (const unsigned char *)a.vpool + sb;
            unsigned char       *kd = R8 + stage * 2 * SB8, *vd = kd + SB8;
            for (int i = tid; i < SB8 / 16; i += 128) {
                cp_async16(kd + 16 * i, kg + 16 * i);
                cp_async16(vd + 16 * i, vg + 16 * i);
            }
            return;
        }
        const lc_kv16 *kg = a.kpool + base, *vg = a.vpool + base;
        lc_kv16       *kd = Ks + stage * PAGE * LD, *vd = Vs + stage * PAGE * LD;
#pragma unroll
        for (int i = tid; i < PAGE * (D / 8); i += 128) {
            const int r = i / (D / 8), c = (i % (D / 8)) * 8;
            const int nb = r < n_in ? 16 : 0; // slots past the end: zeros (no NaN into P V)
            cp_async16_zfill(kd + r * LD + c, kg + r * D + c, nb);
            cp_async16_zfill(vd + r * LD + c, vg + r * D + c, nb);
        }
    };
#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
        if (s < n_it) load_page(pg0 + s, sq.page_table[pg0 + s], s);
        cp_async_commit();
    }
    int next_phys = NS - 1 < n_it ? sq.page_table[pg0 + NS - 1] : 0;

    // this thread's keys (slots in a page) and rotation pairs; entry e of the table:
    //   adjacent pairs: e = 4 kk + r (register r of k-step kk)
    //   split halves:   e = 2 (4 kk + r) + lo/hi element, kk < KS / 2
    const int key0 = 16 * warp + (lane >> 2); // slot of registers r = 0, 1; r = 2, 3: + 8
    float     tc[NT], ts[NT];
#pragma unroll
    for (int e = 0; e < NT; e++) {
        int pair, j;
        if (NEOX) {
            const int kk = (e >> 1) / 4, r = (e >> 1) % 4;
            pair = 16 * kk + 8 * (r & 1) + 2 * (lane & 3) + (e & 1);
            j    = key0 + 8 * (r >> 1);
        } else {
            const int kk = e / 4, r = e % 4;
            pair = 8 * kk + 4 * (r & 1) + (lane & 3);
            j    = key0 + 8 * (r >> 1);
        }
        const bool rot = pair < HR && j < a.n_pos; // rows past the table: masked keys
        tc[e]          = rot ? a.cs[j * HR + pair] : 1.0f;
        ts[e]          = rot ? a.sn[j * HR + pair] : 0.0f;
    }

    // E8: this thread dequantises the 16-dim column chunk dc of rows c8_row0 + (128 / CPR) i
    // of every page; the chunk's fp16 key centres stay in registers
    constexpr int CPR = D / 16; // 16-byte code chunks per row
    const int     dc = (tid % CPR) * 16, c8_row0 = tid / CPR;
    __half2       kcen[8];
#pragma unroll
    for (int j = 0; j < 8; j++) kcen[j] = E8 ? kv8_centre2(a.kc ? a.kc + h * D : NULL, dc + 2 * j)
                                             : __floats2half2_rn(0.f, 0.f);

    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    float o[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

    for (int it = 0; it < n_it; it++) {
        cp_async_wait<NS - 2>();
        __syncthreads();
        if (it + NS - 1 < n_it) {
            load_page(pg0 + it + NS - 1, next_phys, (it + NS - 1) % NS);
            if (it + NS < n_it) next_phys = sq.page_table[pg0 + it + NS];
        }
        cp_async_commit();

        const int      stage = it % NS, ps = (pg0 + it) * PAGE, n_in = min(PAGE, L - ps);
        if (E8) { // the stage's slabs -> the fp16 K / V stage (rows past the end: zeros)
            const unsigned char *k8 = R8 + stage * 2 * SB8, *v8 = k8 + SB8;
            const float         *ksc = (const float *)(k8 + PAGE * D), *vsc = (const float *)(v8 + PAGE * D);
            const __half2        zero2 = __floats2half2_rn(0.f, 0.f);
#pragma unroll
            for (int i = 0; i < PAGE * CPR / 128; i++) {
                const int row = c8_row0 + (128 / CPR) * i;
                uint32_t  ko[8], vo[8];
                if (row < n_in) {
                    const uint4   kq = *(const uint4 *)(k8 + row * D + dc);
                    const uint4   vq = *(const uint4 *)(v8 + row * D + dc);
                    const __half2 sk = __float2half2_rn(ksc[row] * 256.0f);
                    const __half2 sv = __float2half2_rn(vsc[row] * 256.0f);
                    kv8_dequant4(kq.x, sk, kcen[0], kcen[1], ko[0], ko[1]);
                    kv8_dequant4(kq.y, sk, kcen[2], kcen[3], ko[2], ko[3]);
                    kv8_dequant4(kq.z, sk, kcen[4], kcen[5], ko[4], ko[5]);
                    kv8_dequant4(kq.w, sk, kcen[6], kcen[7], ko[6], ko[7]);
                    kv8_dequant4(vq.x, sv, zero2, zero2, vo[0], vo[1]);
                    kv8_dequant4(vq.y, sv, zero2, zero2, vo[2], vo[3]);
                    kv8_dequant4(vq.z, sv, zero2, zero2, vo[4], vo[5]);
                    kv8_dequant4(vq.w, sv, zero2, zero2, vo[6], vo[7]);
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++) ko[j] = vo[j] = 0u;
                }
                *(uint4 *)(Ks + row * LD + dc)     = make_uint4(ko[0], ko[1], ko[2], ko[3]);
                *(uint4 *)(Ks + row * LD + dc + 8) = make_uint4(ko[4], ko[5], ko[6], ko[7]);
                *(uint4 *)(Vs + row * LD + dc)     = make_uint4(vo[0], vo[1], vo[2], vo[3]);
                *(uint4 *)(Vs + row * LD + dc + 8) = make_uint4(vo[4], vo[5], vo[6], vo[7]);
            }
            __syncthreads();
        }
        const lc_kv16 *kst = Ks + (E8 ? 0 : stage) * PAGE * LD, *vst = Vs + (E8 ? 0 : stage) * PAGE * LD;

        // queries rotated back by R(-ps) (pairs past the rotated dims: scaled by the table
        // factor, so that every dim carries it), fp16 A fragments; rows lane/4 and + 8
        uint32_t qa[KS][4];
        {
            const float *crow = rs + stage * D, *srow = crow + HR;
#pragma unroll
            for (int half = 0; half < 2; half++) { // row lane/4 (+ 8)
                const float *qr = qs + ((lane >> 2) + 8 * half) * D;
                if (half == 1 && G <= 8) { // rows 8..15 are zero
#pragma unroll
                    for (int kk = 0; kk < KS; kk++) qa[kk][1] = qa[kk][3] = 0u;
                    continue;
                }
                if (NEOX) {
#pragma unroll
                    for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                        for (int hi8 = 0; hi8 < 2; hi8++) {
                            const int d0 = 16 * kk + 8 * hi8 + 2 * (lane & 3);
                            float     lo[2], up[2];
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int   p = d0 + e;
                                const float c = crow[p], s = srow[p];
                                const float x = qr[p], y = qr[p + D / 2];
                                lo[e] = x * c + y * s;
                                up[e] = y * c - x * s;
                            }
                            qa[kk][2 * hi8 + half]          = pack_f16(lo[0], lo[1]);
                            qa[kk + KS / 2][2 * hi8 + half] = pack_f16(up[0], up[1]);
                        }
                } else {
#pragma unroll
                    for (int kk = 0; kk < KS; kk++)
#pragma unroll
                        for (int hi8 = 0; hi8 < 2; hi8++) {
                            const int   p  = 8 * kk + 4 * hi8 + (lane & 3);
                            const bool  rt = p < HR;
                            const float c = rt ? crow[p] : a.mscale, s = rt ? srow[p] : 0.0f;
                            const float x = qr[2 * p], y = qr[2 * p + 1];
                            qa[kk][2 * hi8 + half] = pack_f16(x * c + y * s, y * c - x * s);
                        }
                }
            }
        }
        // this warp's 16 keys: K fragments, rotated by R(j) in registers
        uint32_t kb[KS][4];
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const int mi = lane >> 3;
            ldmatrix_x4(kb[kk], kst + (16 * warp + (mi >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (mi & 1) * 8);
        }
        if (NEOX) {
#pragma unroll
            for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const uint32_t lo = kb[kk][r], up = kb[kk + KS / 2][r];
                    const int      e  = 2 * (4 * kk + r);
                    const float    x0 = kv_lo(lo), x1 = kv_hi(lo), y0 = kv_lo(up), y1 = kv_hi(up);
                    kb[kk][r]          = pack_f16(x0 * tc[e] - y0 * ts[e], x1 * tc[e + 1] - y1 * ts[e + 1]);
                    kb[kk + KS / 2][r] = pack_f16(x0 * ts[e] + y0 * tc[e], x1 * ts[e + 1] + y1 * tc[e + 1]);
                }
        } else {
#pragma unroll
            for (int kk = 0; kk < KS; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int   e = 4 * kk + r;
                    const float x = kv_lo(kb[kk][r]), y = kv_hi(kb[kk][r]);
                    kb[kk][r]     = pack_f16(x * tc[e] - y * ts[e], x * ts[e] + y * tc[e]);
                }
        }
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            mma_f16(s[0], qa[kk], kb[kk][0], kb[kk][1]);
            mma_f16(s[1], qa[kk], kb[kk][2], kb[kk][3]);
        }
        // scale, mask the slots past the end, online softmax (rows lane/4 and + 8)
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int slot = 16 * warp + 8 * nt + 2 * (lane & 3) + (e & 1);
                const float v  = slot < n_in ? s[nt][e] * a.scale_log2 : -INFINITY;
                s[nt][e]       = v;
                mx[e >> 1]     = fmaxf(mx[e >> 1], v);
            }
        softmax_tile(s, mx, m_run, l_run, o);
        // O += P V over the warp's 16 keys
        const uint32_t pa[4] = {pack_f16(s[0][0], s[0][1]), pack_f16(s[0][2], s[0][3]),
                                pack_f16(s[1][0], s[1][1]), pack_f16(s[1][2], s[1][3])};
#pragma unroll
        for (int dp = 0; dp < DT / 2; dp++) {
            uint32_t  b[4];
            const int mi = lane >> 3;
            ldmatrix_x4_trans(b, vst + (16 * warp + (mi & 1) * 8 + (lane & 7)) * LD + dp * 16 + (mi >> 1) * 8);
            mma_f16(o[2 * dp], pa, b[0], b[1]);
            mma_f16(o[2 * dp + 1], pa, b[2], b[3]);
        }
    }
    cp_async_wait_all();
    __syncthreads(); // the stage buffers become the merge area
    float *red = (float *)smem_raw; // [4 warps][16 rows][D + 2]: o, then m, l
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
        l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
        const int row = (lane >> 2) + 8 * i;
        if (row >= G) continue;
        float *rw = red + (warp * 16 + row) * (D + 2);
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            *(float2 *)(rw + dt * 8 + 2 * (lane & 3)) = make_float2(o[dt][2 * i], o[dt][2 * i + 1]);
        if ((lane & 3) == 0) rw[D] = m_run[i], rw[D + 1] = l_run[i];
    }
    __syncthreads();
    for (int i = tid; i < G * D; i += 128) {
        const int g = i / D, d = i % D;
        merge_decode_warps<D, 4>(red, 16, g, d, a, sq.row0, h * G + g, part, blockIdx.z, n_splits,
                                 split);
    }
}

// The direct decode kernel (--tune dense-decode=direct; written 2026-12-04, not yet run on a
// GPU: bench/NOTES.md 65). A CTA owns one (sequence, KV head, split) and up to 8 query heads of
// that KV head (G > 8: ceil(G / 8) CTAs share the KV head, each reading its K / V). It streams the
// split's pages through an NS-stage cp.async ring (K and V of one page per stage: at fp16 ~35 KB
// at D = 128, two CTAs an SM; the fp8 slabs half that, three CTAs an SM), and each of its 4
// warps takes 16 keys of every page. Per warp and page two short mma chains (m16n8k16, fp16 in,
// fp32 accumulation):
//  * S = Q Kᵀ: the rows are the CTA's query heads (rows past them zero), the columns the warp's
//    16 keys in two n-tiles;
//  * Oᵀ += Vᵀ Pᵀ: the rows are 16 dims of V, the columns the 8 heads, so the probabilities are
//    the B operand exactly as S's accumulators hold them, and no accumulator row is spent on an
//    absent head (FlashDecoding's split over keys; the per-split partials (o, m, l) are merged by
//    attn_decode_merge_kernel).
// RoPE: a key at ps + j (ps = its page's first position, j = 16 w + 8 n + i for warp w, n-tile n)
// rotates by R(ps + 8 n) R(16 w + i): each thread keeps R(16 w + lane / 4) in registers (one slot:
// its two n-tiles share it) and rotates its K fragments right after they are loaded; the queries
// of n-tile n carry R(-ps - 8 n). The CTA rotates its queries once a page, one page ahead, into
// the order of the mma's A fragments in a shared double buffer (both n-tiles' versions), from the
// table row the ring fetched with the page before, so no warp repeats that work and no load
// sits in its way.
// fp16 pools: K by ldmatrix, rotated in fp32; V by ldmatrix.trans.
// fp8 pools (E8, backend.h LC_KV_E4M3): the ring holds the slabs as stored, code rows padded to
// D + 16 bytes (conflict-free ldmatrix). ldmatrix over the codes as 16-bit pairs gives a thread 4
// consecutive dims of a key, so the mma's k index runs over a 16-dim block's dims in the order
// 4u + {0, 1} (low register), 4u + {2, 3} (high); the queries are laid out in that order. Two
// codes become an f16x2 of code / 256 (device_prims.cuh's kv8_pair, as every fp8 reader) and
// one HMUL2 by the token's fp16(256 s); keys rotate in f16x2, their deviations from the centre only: the rotated
// centres R(j) c of the 64 slots are a table of the CTA (fp32 rotation, one fp16 rounding),
// added to S by a second mma chain, so a large key bias (Qwen2's) never passes through f16x2
// arithmetic. ldmatrix.trans over V's codes gives a thread 2 keys x 2 dims a register: the even
// dims are the mma's rows 0-7, the odd ones rows 8-15.
template <int D, bool E8> struct decode_direct_cfg {
    static constexpr int NS   = E8 ? (D == 128 ? 3 : 4) : (D == 128 ? 3 : 5); // pipeline stages
    static constexpr int MINB = E8 ? 3 : 2;                 // CTAs an SM (no key centres)
    static constexpr int LD   = D + 8;                      // fp16 row pitch (elements)
    static constexpr int LD8  = D + 16;                     // fp8 code row pitch (bytes)
    static constexpr int SLAB = E8 ? PAGE * LD8 + PAGE * 4 : PAGE * LD * 2; // one K or V page
    static constexpr int RING = NS * 2 * SLAB;
    static constexpr int RED  = 4 * 16 * (D + 2) * 4;       // the merge area, over the ring
    static constexpr int QF   = 2 * (D / 16) * 32 * 2 * 4;  // one buffer of query fragments
    static constexpr int OFF_QF = RING > RED ? RING : RED;
    static constexpr int OFF_QS = OFF_QF + 2 * QF;          // fp32 queries [8][D]
    static constexpr int OFF_R8 = OFF_QS + 8 * D * 4;       // table row 8 [cos HR | sin HR]
    static constexpr int OFF_RS = OFF_R8 + D * 4;           // [NS][cos HR | sin HR] table rows
    static constexpr int SMEM   = OFF_RS + NS * D * 4;      // E8 with centres: + the table below
    static constexpr int CROT   = PAGE * LD * 2;            // R(j) c, fp16 [PAGE][LD]
    // the dynamic shared memory of a launch (centre: fp8 pools with key centres)
    static constexpr int smem(bool centre) { return SMEM + (E8 && centre ? CROT : 0); }
};
// the position of dim d in the k order of the fp8 path's fragments (see above)
template <bool E8> __device__ __forceinline__ int decode_korder(int d) {
    if (!E8) return d;
    const int w = d & 15;
    return (d & ~15) + 8 * ((w >> 1) & 1) + 2 * (w >> 2) + (w & 1);
}
// the codes of bytes (0, 1), (2, 3), (0, 2) and (1, 3) of a word: kv8_pair's selectors
constexpr uint32_t KV8_B01 = 0x1404u, KV8_B23 = 0x3424u, KV8_B02 = 0x2404u, KV8_B13 = 0x3414u;
// codes of word x at selector sel (kv8_pair) times s, as an f16x2 register
__device__ __forceinline__ uint32_t kv8_scaled(uint32_t x, uint32_t sel, __half2 s) {
    const __half2 r = __hmul2(kv8_pair(x, sel), s);
    return *(const uint32_t *)&r;
}

template <int D, bool NEOX, bool E8>
__global__ void __launch_bounds__(128, decode_direct_cfg<D, E8>::MINB)
    attn_decode_direct_kernel(attn_common a, const int32_t *__restrict__ dec_list, int32_t n_splits,
                       float *__restrict__ part) {
    using cfg = decode_direct_cfg<D, E8>;
    constexpr int NS = cfg::NS, LD = cfg::LD, LD8 = cfg::LD8, SLAB = cfg::SLAB, KS = D / 16;
    constexpr int NT = 2 * KS; // rotation table entries per thread (registers, see above)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    uint32_t *qf   = (uint32_t *)(smem_raw + cfg::OFF_QF); // [2][n-tile][KS][32 lanes][2]
    float    *qs   = (float *)(smem_raw + cfg::OFF_QS);    // [8][D]
    float    *r8   = (float *)(smem_raw + cfg::OFF_R8);    // [D]
    float    *rs   = (float *)(smem_raw + cfg::OFF_RS);    // [NS][D]
    lc_kv16  *crot = (lc_kv16 *)(smem_raw + cfg::SMEM);    // [PAGE][LD], E8 with centres

    const int         n_hg = (a.G + 7) / 8;
    const int         h = blockIdx.x / n_hg, g0 = 8 * (blockIdx.x % n_hg), Gc = min(8, a.G - g0);
    const int         qh0 = h * a.G + g0, split = blockIdx.y;
    const lc_attn_seq sq      = a.seqs[dec_list[blockIdx.z]];
    const int         L       = sq.pos0 + 1;
    const int         n_pages = (L + PAGE - 1) / PAGE;
    const int         pps     = (n_pages + n_splits - 1) / n_splits;
    const int         pg0 = min(n_pages, split * pps), pg1 = min(n_pages, pg0 + pps);
    const int         n_it = pg1 - pg0;
    const int         tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int         HR = a.half_rot;
    const bool        centre = E8 && a.kc != NULL;

    for (int i = tid; i < 4 * KS * 64; i += 128) qf[i] = 0u; // rows past Gc stay zero
    for (int i = tid; i < Gc * D; i += 128) qs[i] = a.q[((int64_t)sq.row0 * a.n_head + qh0) * D + i];
    for (int i = tid; i < HR; i += 128) { // R(-8), the table factor divided out
        const bool ok = a.n_pos > 8;
        r8[i]      = ok ? a.cs[8 * HR + i] / a.mscale : 1.0f;
        r8[HR + i] = ok ? a.sn[8 * HR + i] / a.mscale : 0.0f;
    }
    if (centre) { // R(j) c for the 64 slots, columns in the fragments' k order
        const float *kc = a.kc + h * D;
        for (int i = tid; i < PAGE * (D / 2); i += 128) {
            const int j = i / (D / 2), p = i % (D / 2);
            const int dx = NEOX ? p : 2 * p, dy = NEOX ? p + D / 2 : 2 * p + 1;
            const bool rot = p < HR && j < a.n_pos;
            const float c = rot ? a.cs[j * HR + p] : 1.0f, s = rot ? a.sn[j * HR + p] : 0.0f;
            const float x = kc[dx], y = kc[dy];
            crot[j * LD + decode_korder<E8>(dx)] = __float2half_rn(x * c - y * s);
            crot[j * LD + decode_korder<E8>(dy)] = __float2half_rn(x * s + y * c);
        }
    }

    // stage i of the ring: page pg0 + i's K and V, and the table row of the page after it
    auto table_row = [&](int i) {
        if (tid < HR / 2) { // HR / 4 chunks of cos, then of sin
            const int    c   = tid % (HR / 4) * 4;
            const float *src = (tid < HR / 4 ? a.cs : a.sn) + (int64_t)(pg0 + i) * PAGE * HR + c;
            cp_async16(rs + (i % NS) * D + (tid < HR / 4 ? 0 : HR) + c, src);
        }
    };
    auto load_stage = [&](int i, int phys) {
        const int      pg = pg0 + i, n_in = min(PAGE, L - pg * PAGE);
        unsigned char *kd = smem_raw + (i % NS) * 2 * SLAB, *vd = kd + SLAB;
        if (i + 1 < n_it) table_row(i + 1);
        if (E8) { // codes row by row into the padded rows, then the scales; rows past the end
                  // are masked where they are read (their scales select zero)
            const int64_t        sb = ((int64_t)phys * a.H + h) * kv8_slab_bytes(PAGE, D);
            const unsigned char *kg = (const unsigned char *)a.kpool + sb;
            const unsigned char *vg = (const unsigned char *)a.vpool + sb;
#pragma unroll
            for (int c = tid; c < PAGE * (D / 16); c += 128) {
                const int r = c / (D / 16), o = (c % (D / 16)) * 16;
                cp_async16(kd + r * LD8 + o, kg + r * D + o);
                cp_async16(vd + r * LD8 + o, vg + r * D + o);
            }
            if (tid < PAGE / 4) {
                cp_async16(kd + PAGE * LD8 + 16 * tid, kg + PAGE * D + 16 * tid);
                cp_async16(vd + PAGE * LD8 + 16 * tid, vg + PAGE * D + 16 * tid);
            }
            return;
        }
        const int64_t  base = ((int64_t)phys * a.H + h) * PAGE * D;
        const lc_kv16 *kg = a.kpool + base, *vg = a.vpool + base;
        lc_kv16       *k16 = (lc_kv16 *)kd, *v16 = (lc_kv16 *)vd;
#pragma unroll
        for (int c = tid; c < PAGE * (D / 8); c += 128) {
            const int r = c / (D / 8), o = (c % (D / 8)) * 8;
            const int nb = r < n_in ? 16 : 0; // slots past the end: zeros (no NaN into P V)
            cp_async16_zfill(k16 + r * LD + o, kg + r * D + o, nb);
            cp_async16_zfill(v16 + r * LD + o, vg + r * D + o, nb);
        }
    };
    // the queries of page i rotated back by R(-ps) (pairs past the rotated dims: scaled by the
    // table factor, so that every dim carries it), and by R(-ps - 8) for the second n-tile, as
    // fp16 A fragments: [n-tile][KS][lane][lo k, hi k]
    auto build_queries = [&](int i) {
        uint32_t    *qb = qf + (i & 1) * 2 * KS * 64;
        const float *crow = rs + (i % NS) * D, *srow = crow + HR;
        auto         at = [&](int g, int d) { // d even: the fragment word of dims d, d + 1
            const int k = decode_korder<E8>(d);
            return ((k >> 4) * 32 + 4 * g + ((k & 7) >> 1)) * 2 + ((k >> 3) & 1);
        };
        // (x, y) of a pair rotated by R(-ps), then by R(-8) (c8, s8)
        auto put = [&](int g, int dx, int dy, float x[2], float y[2], float c[2], float s[2],
                       float c8[2], float s8[2]) {
            float lo[2], up[2], lo8[2], up8[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                lo[e]  = x[e] * c[e] + y[e] * s[e];
                up[e]  = y[e] * c[e] - x[e] * s[e];
                lo8[e] = lo[e] * c8[e] + up[e] * s8[e];
                up8[e] = up[e] * c8[e] - lo[e] * s8[e];
            }
            if (NEOX) {
                qb[at(g, dx)] = pack_f16(lo[0], lo[1]), qb[at(g, dy)] = pack_f16(up[0], up[1]);
                qb[KS * 64 + at(g, dx)] = pack_f16(lo8[0], lo8[1]), qb[KS * 64 + at(g, dy)] = pack_f16(up8[0], up8[1]);
            } else {
                qb[at(g, dx)]           = pack_f16(lo[0], up[0]);
                qb[KS * 64 + at(g, dx)] = pack_f16(lo8[0], up8[0]);
            }
        };
        if (NEOX) { // items: pairs p, p + 1 (dims p, p + 1 and p + D / 2, p + 1 + D / 2)
            for (int it = tid; it < Gc * (D / 4); it += 128) {
                const int    g = it / (D / 4), p = (it % (D / 4)) * 2;
                const float *qr = qs + g * D;
                float        x[2], y[2], c[2], sn[2], c8[2], s8[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    x[e] = qr[p + e], y[e] = qr[p + e + D / 2];
                    c[e] = crow[p + e], sn[e] = srow[p + e], c8[e] = r8[p + e], s8[e] = r8[HR + p + e];
                }
                put(g, p, p + D / 2, x, y, c, sn, c8, s8);
            }
        } else { // items: pair p (dims 2p, 2p + 1)
            for (int it = tid; it < Gc * (D / 2); it += 128) {
                const int    g = it / (D / 2), p = it % (D / 2);
                const bool   rt = p < HR;
                const float *qr = qs + g * D;
                float        x[2] = {qr[2 * p], 0.f}, y[2] = {qr[2 * p + 1], 0.f};
                float        c[2] = {rt ? crow[p] : a.mscale, 0.f}, sn[2] = {rt ? srow[p] : 0.0f, 0.f};
                float        c8[2] = {rt ? r8[p] : 1.0f, 0.f}, s8[2] = {rt ? r8[HR + p] : 0.0f, 0.f};
                put(g, 2 * p, 2 * p + 1, x, y, c, sn, c8, s8);
            }
        }
    };

    if (n_it > 0) table_row(0);
#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
        if (s < n_it) load_stage(s, sq.page_table[pg0 + s]);
        cp_async_commit();
    }
    int next_phys = NS - 1 < n_it ? sq.page_table[pg0 + NS - 1] : 0;

    // this thread's key slot in its n-tiles (key0; key0 + 8 rotates by R(key0) too, its queries
    // carry the other R(8)) and rotation pairs; entry e of the tables, for register r of
    // k-step kk (r = 2 n + hi):
    //   adjacent pairs: e = 2 kk + hi
    //   split halves:   fp16 pools: e = 2 (2 kk + hi) + element; fp8: e = 2 kk + hi, both
    //                   elements in one f16x2; kk < KS / 2
    const int key0 = 16 * warp + (lane >> 2);
    constexpr int NT8 = NEOX ? NT / 2 : NT;
    float   tc[E8 ? 1 : NT], ts[E8 ? 1 : NT];
    __half2 tc2[E8 ? NT8 : 1], ts2[E8 ? NT8 : 1];
    const bool slot_ok = key0 < a.n_pos; // rows past the table: masked keys
#pragma unroll
    for (int e = 0; e < (E8 ? NT8 : NT); e++) {
        if (!E8) {
            int pair;
            if (NEOX) {
                const int kk = (e >> 1) / 2, hi = (e >> 1) % 2;
                pair = 16 * kk + 8 * hi + 2 * (lane & 3) + (e & 1);
            } else {
                const int kk = e / 2, hi = e % 2;
                pair = 8 * kk + 4 * hi + (lane & 3);
            }
            const bool rot = pair < HR && slot_ok;
            tc[e]          = rot ? a.cs[key0 * HR + pair] : 1.0f;
            ts[e]          = rot ? a.sn[key0 * HR + pair] : 0.0f;
        } else {
            const int kk = e / 2, hi = e % 2;
            float     c[2], s[2];
#pragma unroll
            for (int x = 0; x < 2; x++) {
                // fp8 k order: register hi of k-step kk holds dims 16 kk + 4 u + 2 hi + x
                const int  dim  = 16 * kk + 4 * (lane & 3) + 2 * hi + x;
                const int  pair = NEOX ? dim : dim / 2;
                const bool rot  = pair < HR && slot_ok;
                c[x]            = rot ? a.cs[key0 * HR + pair] : 1.0f;
                s[x]            = rot ? a.sn[key0 * HR + pair] : 0.0f;
            }
            if (NEOX) {
                tc2[e] = __floats2half2_rn(c[0], c[1]);
                ts2[e] = __floats2half2_rn(s[0], s[1]);
            } else { // both elements are one pair: (c, c) and (-s, s)
                tc2[e] = __floats2half2_rn(c[0], c[0]);
                ts2[e] = __floats2half2_rn(-s[0], s[0]);
            }
        }
    }

    cp_async_wait<NS - 2>(); // stage 0 and the first table row
    __syncthreads();
    if (n_it > 0) build_queries(0);

    float m_run = -INFINITY, l_run = 0.f; // S's row lane / 4: the CTA's query head g0 + lane / 4
    float o[KS][4];                        // Oᵀ: 16-dim block, (dim, head) pairs (see the end)
#pragma unroll
    for (int b = 0; b < KS; b++) o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.f;

    for (int it = 0; it < n_it; it++) {
        cp_async_wait<NS - 2>();
        __syncthreads();
        if (it + NS - 1 < n_it) {
            load_stage(it + NS - 1, next_phys);
            if (it + NS < n_it) next_phys = sq.page_table[pg0 + it + NS];
        }
        cp_async_commit();
        if (it + 1 < n_it) build_queries(it + 1); // read after the next barrier

        const int            ps = (pg0 + it) * PAGE, n_in = min(PAGE, L - ps);
        const unsigned char *kst = smem_raw + (it % NS) * 2 * SLAB, *vst = kst + SLAB;

        uint32_t qa[2][KS][4]; // per n-tile
        {
            const uint2 *qv = (const uint2 *)(qf + (it & 1) * 2 * KS * 64);
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    const uint2 w = qv[(nt * KS + kk) * 32 + lane];
                    qa[nt][kk][0] = w.x, qa[nt][kk][1] = 0u, qa[nt][kk][2] = w.y, qa[nt][kk][3] = 0u;
                }
        }
        // this warp's 16 keys as B fragments kb[kk][nt-tile 2 nt + lo / hi], rotated by R(j)
        uint32_t kb[KS][4];
        if (!E8) {
            const lc_kv16 *k16 = (const lc_kv16 *)kst;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                const int mi = lane >> 3;
                ldmatrix_x4(kb[kk], k16 + (16 * warp + (mi >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (mi & 1) * 8);
            }
            if (NEOX) {
#pragma unroll
                for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const uint32_t lo = kb[kk][r], up = kb[kk + KS / 2][r];
                        const int      e  = 2 * (2 * kk + (r & 1));
                        const float    x0 = kv_lo(lo), x1 = kv_hi(lo), y0 = kv_lo(up), y1 = kv_hi(up);
                        kb[kk][r]          = pack_f16(x0 * tc[e] - y0 * ts[e], x1 * tc[e + 1] - y1 * ts[e + 1]);
                        kb[kk + KS / 2][r] = pack_f16(x0 * ts[e] + y0 * tc[e], x1 * ts[e + 1] + y1 * tc[e + 1]);
                    }
            } else {
#pragma unroll
                for (int kk = 0; kk < KS; kk++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const int   e = 2 * kk + (r & 1);
                        const float x = kv_lo(kb[kk][r]), y = kv_hi(kb[kk][r]);
                        kb[kk][r]     = pack_f16(x * tc[e] - y * ts[e], x * ts[e] + y * tc[e]);
                    }
            }
        } else {
            const float  *ksc = (const float *)(kst + PAGE * LD8);
            const __half2 sk0 = __float2half2_rn(ksc[key0] * 256.0f), sk1 = __float2half2_rn(ksc[key0 + 8] * 256.0f);
#pragma unroll
            for (int p = 0; p < KS / 2; p++) { // k-steps 2p, 2p + 1: both n-tiles
                uint32_t r[4];
                ldmatrix_x4(r, kst + (16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD8 + 16 * (2 * p + (lane >> 4)));
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    kb[2 * p + q][0] = kv8_scaled(r[2 * q], KV8_B01, sk0);
                    kb[2 * p + q][1] = kv8_scaled(r[2 * q], KV8_B23, sk0);
                    kb[2 * p + q][2] = kv8_scaled(r[2 * q + 1], KV8_B01, sk1);
                    kb[2 * p + q][3] = kv8_scaled(r[2 * q + 1], KV8_B23, sk1);
                }
            }
            if (NEOX) {
#pragma unroll
                for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const int     e = 2 * kk + (r & 1);
                        const __half2 X = *(const __half2 *)&kb[kk][r], Y = *(const __half2 *)&kb[kk + KS / 2][r];
                        const __half2 Xr = __hfma2(__hneg2(Y), ts2[e], __hmul2(X, tc2[e]));
                        const __half2 Yr = __hfma2(X, ts2[e], __hmul2(Y, tc2[e]));
                        kb[kk][r]          = *(const uint32_t *)&Xr;
                        kb[kk + KS / 2][r] = *(const uint32_t *)&Yr;
                    }
            } else {
#pragma unroll
                for (int kk = 0; kk < KS; kk++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const int     e = 2 * kk + (r & 1);
                        const __half2 X = *(const __half2 *)&kb[kk][r];
                        const __half2 R = __hfma2(__lowhigh2highlow(X), ts2[e], __hmul2(X, tc2[e]));
                        kb[kk][r]       = *(const uint32_t *)&R;
                    }
            }
        }
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
        if (centre) { // + Q (R(j) c): both n-tiles read the slots of the first (key0)
#pragma unroll
            for (int p = 0; p < KS / 2; p++) {
                uint32_t  cb[4];
                const int mi = lane >> 3;
                ldmatrix_x4(cb, crot + (16 * warp + (lane & 7)) * LD + (2 * p + (mi >> 1)) * 16 + (mi & 1) * 8);
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    mma_f16(s[0], qa[0][2 * p + q], cb[2 * q], cb[2 * q + 1]);
                    mma_f16(s[1], qa[1][2 * p + q], cb[2 * q], cb[2 * q + 1]);
                }
            }
        }
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            mma_f16(s[0], qa[0][kk], kb[kk][0], kb[kk][1]);
            mma_f16(s[1], qa[1][kk], kb[kk][2], kb[kk][3]);
        }
        // scale, mask the slots past the end, online softmax of row lane / 4
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int   slot = 16 * warp + 8 * nt + 2 * (lane & 3) + e;
                const float v    = slot < n_in ? s[nt][e] * a.scale_log2 : -INFINITY;
                s[nt][e]         = v;
                mx               = fmaxf(mx, v);
            }
        mx                = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx                = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run, mx), base = m_new == -INFINITY ? 0.f : m_new;
        const float corr  = exp2f(m_run - base);
        m_run             = m_new;
        l_run *= corr;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float p = exp2f(s[nt][e] - base);
                s[nt][e]      = p;
                l_run += p;
            }
        // Oᵀ's columns are heads 2 (lane % 4) and + 1: their corrections from the rows' lanes
        const float c0 = __shfl_sync(0xffffffffu, corr, 8 * (lane & 3));
        const float c1 = __shfl_sync(0xffffffffu, corr, 8 * (lane & 3) + 4);
#pragma unroll
        for (int b = 0; b < KS; b++) o[b][0] *= c0, o[b][1] *= c1, o[b][2] *= c0, o[b][3] *= c1;
        // Oᵀ += Vᵀ Pᵀ over the warp's 16 keys; Pᵀ's B fragment is S's accumulators as they are
        const uint32_t pb0 = pack_f16(s[0][0], s[0][1]), pb1 = pack_f16(s[1][0], s[1][1]);
        if (!E8) {
            const lc_kv16 *v16 = (const lc_kv16 *)vst;
#pragma unroll
            for (int b = 0; b < KS; b++) {
                uint32_t  va[4];
                const int mi = lane >> 3;
                ldmatrix_x4_trans(va, v16 + (16 * warp + (mi >> 1) * 8 + (lane & 7)) * LD + 16 * b + (mi & 1) * 8);
                mma_f16(o[b], va, pb0, pb1);
            }
        } else {
            const float *vsc = (const float *)(vst + PAGE * LD8);
            const int    k0  = 16 * warp + 2 * (lane & 3);
            auto         vs256 = [&](int k) { return k < n_in ? vsc[k] * 256.0f : 0.0f; };
            const __half2 sa = __floats2half2_rn(vs256(k0), vs256(k0 + 1));
            const __half2 sb = __floats2half2_rn(vs256(k0 + 8), vs256(k0 + 9));
#pragma unroll
            for (int p = 0; p < KS / 2; p++) { // 16-dim blocks 2p, 2p + 1
                uint32_t r[4];
                ldmatrix_x4_trans(r, vst + (16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD8 + 16 * (2 * p + (lane >> 4)));
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const uint32_t va[4] = {kv8_scaled(r[2 * q], KV8_B02, sa), kv8_scaled(r[2 * q], KV8_B13, sa),
                                            kv8_scaled(r[2 * q + 1], KV8_B02, sb),
                                            kv8_scaled(r[2 * q + 1], KV8_B13, sb)};
                    mma_f16(o[2 * p + q], va, pb0, pb1);
                }
            }
        }
    }
    cp_async_wait_all();
    __syncthreads(); // the stage buffers become the merge area
    float *red = (float *)smem_raw; // [4 warps][16 rows][D + 2]: o, then m, l
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
    {
        // o[b]: elements 0, 1 = heads 2 (lane % 4), + 1 at dim d0 of block b, 2, 3 the same at d1:
        // fp16 pools d0 = 16 b + lane / 4, d1 = d0 + 8; fp8 d0 = 16 b + 2 (lane / 4), d1 = d0 + 1
        const int hh = 2 * (lane & 3);
#pragma unroll
        for (int b = 0; b < KS; b++)
#pragma unroll
            for (int f = 0; f < 2; f++) {
                const int dim = E8 ? 16 * b + 2 * (lane >> 2) + f : 16 * b + 8 * f + (lane >> 2);
                if (hh < Gc) red[(warp * 16 + hh) * (D + 2) + dim] = o[b][2 * f];
                if (hh + 1 < Gc) red[(warp * 16 + hh + 1) * (D + 2) + dim] = o[b][2 * f + 1];
            }
        if ((lane & 3) == 0 && (lane >> 2) < Gc) {
            float *rw = red + (warp * 16 + (lane >> 2)) * (D + 2);
            rw[D] = m_run, rw[D + 1] = l_run;
        }
    }
    __syncthreads();
    for (int i = tid; i < Gc * D; i += 128) {
        const int g = i / D, d = i % D;
        merge_decode_warps<D, 4>(red, 16, g, d, a, sq.row0, qh0 + g, part, blockIdx.z, n_splits,
                                 split);
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

// Prefill first rotates every key of its sequences once into a scratch of fp16 tiles (and
// copies V beside it, into the same swizzled layout), laid out as the pages are but
// contiguously per sequence: tile t of the z-th prefill sequence is scratch page (base_z + t).
// The tiled kernel then reads plain fp16 tiles: no rotation pass in its loop. The pass costs reading
// K + V and writing them once per layer (~0.1 ms at 32K keys on the 8B shape, next to tens of
// ms of attention) and a scratch as large as the prefill sequences' K + V of one layer.
// The first tile of a sequence: tile64_first; the element (key r, dim c) of a scratch tile (64
// keys x D fp16): tile64_off (both device_prims.cuh) — D / 64 column blocks of [64 keys][64
// dims], each 128-byte row's 16-byte chunks permuted by XOR with the row's index mod 8, the
// 128-byte-swizzled layout that Hopper's tensor cores read from shared memory (K as a K-major
// operand, V as an MN-major one), so the wgmma kernel copies a tile with one bulk copy, and the
// mma.sync kernel's ldmatrix reads of the copy are free of bank conflicts.

// E8: the pools hold the fp8 layout; keys and values are dequantised on the way (kv8_row8).
// grid (tile strides, H, n_pre); block 128
template <int D, bool NEOX, bool E8>
__global__ void __launch_bounds__(128)
    attn_prefill_rotate_kernel(attn_common a, const int32_t *__restrict__ pre_list,
                               __half *__restrict__ ks, __half *__restrict__ vs) {
    const int         h  = blockIdx.y;
    const lc_attn_seq sq = a.seqs[pre_list[blockIdx.z]];
    const int         L = sq.pos0 + sq.n_rows, n_tiles = (L + PAGE - 1) / PAGE, HR = a.half_rot;
    const int64_t     base = tile64_first(a.seqs, pre_list, blockIdx.z);
    constexpr int     CPR = NEOX ? D / 16 : D / 8; // K work items per key: 8-dim chunks (pairs)
    constexpr int     SB8 = kv8_slab_bytes(PAGE, D);
    const float      *kcen = a.kc ? a.kc + h * D : NULL;
    for (int kt = blockIdx.x; kt < n_tiles; kt += gridDim.x) {
        const int64_t  src = ((int64_t)sq.page_table[kt] * a.H + h) * PAGE * D;
        const int64_t  dst = ((base + kt) * a.H + h) * PAGE * D;
        const lc_kv16 *kg = a.kpool + src, *vg = a.vpool + src;
        const unsigned char *k8 = (const unsigned char *)a.kpool + ((int64_t)sq.page_table[kt] * a.H + h) * SB8;
        const unsigned char *v8 = (const unsigned char *)a.vpool + ((int64_t)sq.page_table[kt] * a.H + h) * SB8;
        // 8 elements of key / value j from dim c as fp16 (fp16 pages: as stored)
        auto k_chunk = [&](int j, int c) -> uint4 {
            if (!E8) return *(const uint4 *)(kg + j * D + c);
            const __half2 cc[4] = {kv8_centre2(kcen, c), kv8_centre2(kcen, c + 2),
                                   kv8_centre2(kcen, c + 4), kv8_centre2(kcen, c + 6)};
            return kv8_row8(k8 + j * D + c, ((const float *)(k8 + PAGE * D))[j], cc);
        };
        auto v_chunk = [&](int j, int c) -> uint4 {
            if (!E8) return *(const uint4 *)(vg + j * D + c);
            const __half2 z = __floats2half2_rn(0.f, 0.f), cc[4] = {z, z, z, z};
            return kv8_row8(v8 + j * D + c, ((const float *)(v8 + PAGE * D))[j], cc);
        };
        const int      n_in = min(PAGE, L - kt * PAGE);
        for (int i = threadIdx.x; i < PAGE * CPR; i += 128) {
            const int j = i / CPR, c0 = (i % CPR) * 8;
            if (j >= n_in) { // past the end: zeros
                *(uint4 *)(ks + dst + tile64_off(j, c0)) = make_uint4(0, 0, 0, 0);
                if (NEOX) *(uint4 *)(ks + dst + tile64_off(j, c0 + D / 2)) = make_uint4(0, 0, 0, 0);
                continue;
            }
            const int64_t pos = (int64_t)kt * PAGE + j;
            if (NEOX) {
                const uint4     xa = k_chunk(j, c0), xb = k_chunk(j, c0 + D / 2);
                const uint32_t *ua = (const uint32_t *)&xa, *ub = (const uint32_t *)&xb;
                uint32_t        ra[4], rb[4];
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const int   p0 = c0 + 2 * w;
                    const float c0_ = a.cs[pos * HR + p0], s0 = a.sn[pos * HR + p0];
                    const float c1 = a.cs[pos * HR + p0 + 1], s1 = a.sn[pos * HR + p0 + 1];
                    const float x0 = kv_lo(ua[w]), x1 = kv_hi(ua[w]);
                    const float y0 = kv_lo(ub[w]), y1 = kv_hi(ub[w]);
                    ra[w] = pack_f16(x0 * c0_ - y0 * s0, x1 * c1 - y1 * s1);
                    rb[w] = pack_f16(x0 * s0 + y0 * c0_, x1 * s1 + y1 * c1);
                }
                *(uint4 *)(ks + dst + tile64_off(j, c0))         = make_uint4(ra[0], ra[1], ra[2], ra[3]);
                *(uint4 *)(ks + dst + tile64_off(j, c0 + D / 2)) = make_uint4(rb[0], rb[1], rb[2], rb[3]);
            } else {
                const uint4     xk = k_chunk(j, c0);
                const uint32_t *uk = (const uint32_t *)&xk;
                uint32_t        rk[4];
                const int       p0 = c0 / 2;
                const bool      rot = p0 < HR; // HR is a multiple of 4: all or none of the chunk
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const float x = kv_lo(uk[w]), y = kv_hi(uk[w]);
                    const float c = rot ? a.cs[pos * HR + p0 + w] : 1.0f;
                    const float s = rot ? a.sn[pos * HR + p0 + w] : 0.0f;
                    rk[w] = pack_f16(x * c - y * s, x * s + y * c);
                }
                *(uint4 *)(ks + dst + tile64_off(j, c0)) = make_uint4(rk[0], rk[1], rk[2], rk[3]);
            }
        }
        for (int i = threadIdx.x; i < PAGE * (D / 8); i += 128) { // V: as the pages hold it
            const int j = i / (D / 8), c0 = (i % (D / 8)) * 8;
            const uint4 r = j < n_in ? v_chunk(j, c0) : make_uint4(0, 0, 0, 0);
            *(uint4 *)(vs + dst + tile64_off(j, c0)) = r;
        }
    }
}

template <int D> struct prefill_cfg {
    static constexpr int BM = 128, WARPS = BM / 16, THREADS = 32 * WARPS, LD = D + 8;
    static constexpr int SMEM = (BM + 4 * PAGE) * LD * 2; // Q, then K and V double-buffered
};

// grid (row blocks, H, n_pre); block 256 = 8 warps x 16 packed rows
template <int D, bool NEOX>
__global__ void __launch_bounds__(prefill_cfg<D>::THREADS, 2)
    attn_prefill_kernel(attn_common a, const int32_t *__restrict__ pre_list,
                        const __half *__restrict__ ks, const __half *__restrict__ vs) {
    constexpr int BM = prefill_cfg<D>::BM, NTH = prefill_cfg<D>::THREADS, LD = prefill_cfg<D>::LD;
    constexpr int BN = PAGE, NT = BN / 8, DT = D / 8, KS = D / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half  *Qs = (__half *)smem_raw;              // [BM][LD] fp16
    __half  *Ks = Qs + BM * LD;                    // [2][BN][LD] rotated keys, fp16
    __half  *Vs = Ks + 2 * BN * LD;                // [2][BN][LD] values, fp16

    const int         h  = blockIdx.y;
    const lc_attn_seq sq = a.seqs[pre_list[blockIdx.z]];
    const int         G = a.G, n_packed = sq.n_rows * G;
    const int         r0 = (gridDim.x - 1 - blockIdx.x) * BM; // longest rows first
    if (r0 >= n_packed) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const packed_rows rows = {a.q, a.out, a.n_head, G, h, sq.row0, n_packed};

    stage_queries_f16<D, BM, LD, NTH>(Qs, rows, r0, tid); // Q tile: fp32 rotated queries -> fp16
    const int t_lo    = r0 / G, t_hi = (min(n_packed, r0 + BM) - 1) / G;
    const int n_tiles = (sq.pos0 + t_hi) / BN + 1;
    const int full    = (sq.pos0 + t_lo + 1) / BN; // tiles every row sees whole

    const int64_t tile0 = tile64_first(a.seqs, pre_list, blockIdx.z);
    auto load_tile = [&](int kt, int buf) {
        const int64_t base = ((tile0 + kt) * a.H + h) * BN * D;
        const __half *kg = ks + base, *vg = vs + base;
        __half       *kd = Ks + buf * BN * LD, *vd = Vs + buf * BN * LD;
#pragma unroll
        for (int i = tid; i < BN * (D / 8); i += NTH) {
            const int r = i / (D / 8), c = (i % (D / 8)) * 8;
            cp_async16(kd + r * LD + c, kg + tile64_off(r, c));
            cp_async16(vd + r * LD + c, vg + tile64_off(r, c));
        }
        cp_async_commit();
    };
    load_tile(0, 0);

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

    for (int kt = 0; kt < n_tiles; kt++) {
        const int buf = kt & 1;
        cp_async_wait_all();
        __syncthreads();
        if (kt + 1 < n_tiles) load_tile(kt + 1, buf ^ 1);

        const __half *kb = Ks + buf * BN * LD, *vb = Vs + buf * BN * LD;
        float         s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t qf[4];
            ldmatrix_x4(qf, Qs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t  b[4];
                const int mi = lane >> 3;
                ldmatrix_x4(b, kb + (np * 16 + (mi >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (mi & 1) * 8);
                mma_f16(s[2 * np], qf, b[0], b[1]);
                mma_f16(s[2 * np + 1], qf, b[2], b[3]);
            }
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
        softmax_tile(s, mx, m_run, l_run, o);
        mma_pv_tile<BN, DT, LD>(o, s, vb, lane); // O += P V
    }
    write_packed_rows<D>(rows, r0 + warp * 16 + (lane >> 2), lane, l_run, &o[0][0]);
}

// ---- prefill on Hopper: warp-specialised wgmma (sm_90a) ------------------------------------
//
// The same causal tiling as attn_prefill_kernel (128 packed rows of one KV head per CTA, 64-key
// tiles), FlashAttention-3 style:
//  * a producer warp streams the K and V tiles through an NS-stage shared-memory ring with bulk
//    asynchronous copies (cp.async.bulk, one instruction per 8-16 KB tile: the scratch tiles
//    are already in the 128-byte-swizzled layout the tensor cores read, see scratch_off), full
//    and empty mbarriers per stage;
//  * two consumer warpgroups of 64 rows each run S = Q Kᵀ (m64n64k16, Q and K from shared
//    memory) and O += P V (m64nDk16, P from registers, V read transposed from shared memory)
//    as asynchronous warpgroup MMAs, and overlap them with the softmax: tile j's Q Kᵀ and tile
//    j-1's P V are issued together, the softmax of tile j runs while P V still computes, and
//    the two warpgroups interleave on the SM's schedulers.

template <int D> struct hopper_cfg {
    static constexpr int NS   = D == 128 ? 4 : 6; // ring stages (K + V tile each)
    using ring                = wgmma_ring<D, NS>;
    static constexpr int SMEM = ring::SMEM;
};

// grid (row blocks, H, n_pre); block 384 = producer warpgroup + 2 consumer warpgroups
template <int D>
__global__ void __launch_bounds__(384, 1)
    attn_prefill_hopper_kernel(attn_common a, const int32_t *__restrict__ pre_list,
                               const __half *__restrict__ ks, const __half *__restrict__ vs) {
#ifdef LC_HAVE_WGMMA
    constexpr int NS = hopper_cfg<D>::NS, TILE_B = hopper_cfg<D>::ring::TILE_B;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const typename hopper_cfg<D>::ring ring(smem_raw);

    const int         h  = blockIdx.y;
    const lc_attn_seq sq = a.seqs[pre_list[blockIdx.z]];
    const int         G = a.G, n_packed = sq.n_rows * G;
    const int         r0 = (gridDim.x - 1 - blockIdx.x) * 128; // longest rows first
    if (r0 >= n_packed) return;
    const int t_lo    = r0 / G, t_hi = (min(n_packed, r0 + 128) - 1) / G;
    const int n_tiles = (sq.pos0 + t_hi) / PAGE + 1;
    const int full_tiles = (sq.pos0 + t_lo + 1) / PAGE; // tiles every row sees whole
    const int tid = threadIdx.x, warp = tid >> 5;

    if (tid == 0) {
        for (int s = 0; s < NS; s++) mbar_init(ring.full + s, 1), mbar_init(ring.empty + s, 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp < 4) { // producer warpgroup: one thread issues the copies
        if (tid == 0) {
            const int64_t tile0 = tile64_first(a.seqs, pre_list, blockIdx.z);
            for (int kt = 0; kt < n_tiles; kt++) {
                const int s = kt % NS, round = kt / NS;
                if (round > 0) mbar_wait(ring.empty + s, (round - 1) & 1);
                const int64_t off = ((tile0 + kt) * a.H + h) * (int64_t)(PAGE * D);
                mbar_expect_tx(ring.full + s, 2 * TILE_B);
                bulk_load(ring.Kr + s * TILE_B, ks + off, TILE_B, ring.full + s);
                bulk_load(ring.Vr + s * TILE_B, vs + off, TILE_B, ring.full + s);
            }
        }
        return;
    }
    // consumers: causal, packed row pr sees keys 0 .. pos0 + pr / G
    const packed_rows rows = {a.q, a.out, a.n_head, G, h, sq.row0, n_packed};
    wgmma_consumer(ring, rows, r0, n_tiles, full_tiles, a.scale_log2,
                   [&](int pr) { return sq.pos0 + pr / G + 1; });
#endif
}

// ---- launchers -----------------------------------------------------------------------------

template <int D, bool NEOX, bool E8> static int launch_decode(const attn_common &a, const lc_cuda_attn_batch *bt) {
    if (bt->decode_direct) {
        using cfg      = decode_direct_cfg<D, E8>;
        const int smem = cfg::smem(a.kc != NULL);
        LC_CUDA_SMEM_ONCE(cfg::smem(true), attn_decode_direct_kernel<D, NEOX, E8>);
        dim3 grid((unsigned)(a.H * ((a.G + 7) / 8)), (unsigned)bt->n_splits, (unsigned)bt->n_dec);
        attn_decode_direct_kernel<D, NEOX, E8><<<grid, 128, smem, lc_cuda_stream()>>>(a, bt->dec, bt->n_splits, bt->part);
        return LC_OK;
    }
    if (a.G > 16)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda attention: %d query heads per KV head (the staged "
                       "decode kernel takes 1..16; --tune dense-decode=direct takes any)", a.G);
    const int smem = decode_staged_cfg<D, E8>::SMEM;
    LC_CUDA_SMEM_ONCE(smem, attn_decode_staged_kernel<D, NEOX, E8>);
    dim3 grid((unsigned)a.H, (unsigned)bt->n_splits, (unsigned)bt->n_dec);
    attn_decode_staged_kernel<D, NEOX, E8><<<grid, 128, smem, lc_cuda_stream()>>>(a, bt->dec, bt->n_splits, bt->part);
    return LC_OK;
}

extern "C" size_t lc_cuda_attn_prefill_scratch_bytes(const lc_kv_layer_view *kv, int64_t pre_tiles) {
    return 2 * (size_t)pre_tiles * (size_t)kv->n_kv_head * PAGE * (size_t)kv->head_dim * sizeof(__half);
}

// Prefill kernel choice: the warp-specialised wgmma kernel on compute capability 9.x (it needs
// sm_90a's wgmma and bulk copies: lc_cuda_have_wgmma), the mma.sync kernel elsewhere and
// wherever the batch asks for it (bt->prefill_mma, the backend's tuning.prefill_mma).
template <int D, bool NEOX, bool E8> static int launch_prefill(const attn_common &a, const lc_cuda_attn_batch *bt) {
    const int smem = prefill_cfg<D>::SMEM;
    LC_CUDA_SMEM_ONCE(smem, attn_prefill_kernel<D, NEOX>);
    if (!bt->scratch)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda attention: no prefill scratch for %lld pages",
                       (long long)bt->pre_tiles);
    __half *ks = (__half *)bt->scratch, *vs = ks + (size_t)bt->pre_tiles * a.H * PAGE * D;
    const int strides = (4 * lc_cuda_sm_count() + a.H * bt->n_pre - 1) / (a.H * bt->n_pre);
    attn_prefill_rotate_kernel<D, NEOX, E8><<<dim3((unsigned)strides, (unsigned)a.H, (unsigned)bt->n_pre), 128, 0,
                                          lc_cuda_stream()>>>(a, bt->pre, ks, vs);
    LC_CUDA_LAUNCHED();
    const int blocks = (bt->max_pre_rows * a.G + prefill_cfg<D>::BM - 1) / prefill_cfg<D>::BM;
    dim3      grid((unsigned)blocks, (unsigned)a.H, (unsigned)bt->n_pre);
    if (!bt->prefill_mma && lc_cuda_have_wgmma()) {
        const int wsmem = hopper_cfg<D>::SMEM;
        LC_CUDA_SMEM_ONCE(wsmem, attn_prefill_hopper_kernel<D>);
        attn_prefill_hopper_kernel<D><<<grid, 384, wsmem, lc_cuda_stream()>>>(a, bt->pre, ks, vs);
        return LC_OK;
    }
    attn_prefill_kernel<D, NEOX><<<grid, prefill_cfg<D>::THREADS, smem, lc_cuda_stream()>>>(a, bt->pre, ks, vs);
    return LC_OK;
}

// direct decode CTAs that fit on one SM at once (shared memory and the kernel's register bound)
template <int D, bool E8> static int decode_ctas_per_sm(bool centre) {
    using cfg = decode_direct_cfg<D, E8>;
    const int per = cfg::smem(centre) + 1024; // + the runtime's reserve
    const int n   = lc_cuda_smem_per_sm() / per;
    return n < 1 ? 1 : (n > cfg::MINB ? cfg::MINB : n);
}

extern "C" int lc_cuda_attn_splits(const lc_kv_layer_view *kv, int32_t n_head, int32_t n_dec,
                                   int64_t max_keys, bool direct) {
    const int n_sm = lc_cuda_sm_count();
    if (n_dec <= 0 || kv->n_kv_head <= 0) return 1;
    const bool centre = kv->e4m3 && kv->k_centre;
    const int  per_sm = !direct ? 2 // the staged kernel: two CTAs an SM, one per KV head
                      : kv->head_dim == 64 ? (kv->e4m3 ? decode_ctas_per_sm<64, true>(centre) : decode_ctas_per_sm<64, false>(false))
                                           : (kv->e4m3 ? decode_ctas_per_sm<128, true>(centre) : decode_ctas_per_sm<128, false>(false));
    const int64_t ctas  = (int64_t)kv->n_kv_head * (direct ? (n_head / kv->n_kv_head + 7) / 8 : 1) * n_dec;
    const int64_t pages = (max_keys + PAGE - 1) / PAGE;
    // one wave of the decode kernel, each CTA streaming >= 4 pages
    int64_t splits = ((int64_t)per_sm * n_sm + ctas - 1) / ctas;
    if (splits > pages / 4) splits = pages / 4;
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
    a.kpool = (const lc_kv16 *)kv->k, a.vpool = (const lc_kv16 *)kv->v;
    a.kc    = kv->e4m3 ? kv->k_centre : NULL;
    const bool e8 = kv->e4m3;
    a.H = H, a.G = n_head / H, a.n_head = n_head;
    a.seqs = bt->seqs, a.q = q, a.out = out, a.cs = rope->cos, a.sn = rope->sin;
    a.half_rot = rope->n_rot / 2, a.mscale = mscale, a.n_pos = rope->n_pos;
    // decode composes three table factors (query, R(-ps), R(j)) and prefill two (query, key):
    // divide out the extra one in both
    a.scale_log2 = scale * 1.4426950408889634f / mscale;
    if (bt->n_dec > 0) {
        if (bt->n_splits > 1 && !bt->part)
            return lc_fail(LC_ERR_INVALID_ARG, "cuda attention: no partial buffer for %d splits", bt->n_splits);
        int st = e8 ? (D == 64 ? (neox ? launch_decode<64, true, true>(a, bt) : launch_decode<64, false, true>(a, bt))
                               : (neox ? launch_decode<128, true, true>(a, bt) : launch_decode<128, false, true>(a, bt)))
                    : (D == 64 ? (neox ? launch_decode<64, true, false>(a, bt) : launch_decode<64, false, false>(a, bt))
                               : (neox ? launch_decode<128, true, false>(a, bt) : launch_decode<128, false, false>(a, bt)));
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
        int st = e8 ? (D == 64 ? (neox ? launch_prefill<64, true, true>(a, bt) : launch_prefill<64, false, true>(a, bt))
                               : (neox ? launch_prefill<128, true, true>(a, bt) : launch_prefill<128, false, true>(a, bt)))
                    : (D == 64 ? (neox ? launch_prefill<64, true, false>(a, bt) : launch_prefill<64, false, false>(a, bt))
                               : (neox ? launch_prefill<128, true, false>(a, bt) : launch_prefill<128, false, false>(a, bt)));
        if (st != LC_OK) return st;
        LC_CUDA_LAUNCHED();
    }
    return LC_OK;
}
