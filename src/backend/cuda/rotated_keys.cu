// rotated_keys.cu — the keys of a batch's prefill sequences rotated once per layer at their true
// positions into fp16 tiles (lc_cuda_rotate_keys, contract in cuda.h "lc_cuda_rot_tiles"), for
// plain RoPE in prefill-sized calls: InfiniteHiP's pruning stages (prune_chunks.cu) then gather
// rotated rows instead of rotating each probe, and its block-sparse attention (attn_segments.cu)
// copies rotated tiles instead of rotating each gathered tile (InfiniteHiP §3.1-3.2; digest
// spec/infinitehip-and-hip.md §4.1). The tiles have the layout of attention.cu's prefill
// scratch: tile t of the z-th listed sequence is tile tile64_first(z) + t, 128-byte swizzled.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh"

#include <cuda_fp16.h>
#include <stdint.h>

namespace {

struct rot_params {
    const lc_attn_seq *seqs;
    const int32_t *pre; // the rotated sequences
    const lc_kv16 *kpool; // or the fp8 layout's slabs (e8)
    const float *kc;      // e8: the key centres [H][D] (NULL: zero)
    int32_t e8;
    const float *cs, *sn;
    __half *ks; // [tiles][H][64][D] fp16, tile64_off layout
    int32_t H, P, p_shift, half_rot, neox, n_pos;
};

// Every key of a rotated sequence at its true position (clamped to the table), as the kernels
// that read the pages rotate them: x0·c − x1·s, x0·s + x1·c in fp32 from the stored values,
// rounded to fp16 (adjacent pairs 2i, 2i+1 or split halves i, i + n_rot/2 for i < n_rot/2; the
// other dims copied). Rows past the sequence are not
// written (no kernel reads them). A thread owns one 16-byte output chunk of one key and does it
// for every KV head (the table values loaded once).
// grid (tile strides, n_pre); block 256: one 64-token tile per CTA and stride
template <int D> __global__ void __launch_bounds__(256) rotate_keys_to_tiles_kernel(rot_params r) {
    constexpr int CPR = D / 8;
    const int z = blockIdx.y;
    const lc_attn_seq sq = r.seqs[r.pre[z]];
    const int L = sq.pos0 + sq.n_rows, n_tiles = (L + 63) / 64, HR = r.half_rot;
    const int64_t base = tile64_first(r.seqs, r.pre, z);
    const int64_t hs_src = (int64_t)r.P * D, hs_dst = 64 * D; // one KV head further
    for (int t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        for (int it = threadIdx.x; it < 64 * CPR; it += blockDim.x) {
            const int j = it / CPR, c = it % CPR, tok = t * 64 + j, d0 = 8 * c;
            if (tok >= L) continue;
            const int64_t pos = min(tok, r.n_pos - 1);
            const int64_t page = sq.page_table[tok >> r.p_shift];
            const int64_t src = (page * r.H * r.P + (tok & (r.P - 1))) * D;
            // e8: 8 elements [d, d + 8) of this key in KV head h, dequantised (fp16 pages: as read)
            auto key8 = [&](int h, int d) {
                return kv8_load8((const unsigned char *)r.kpool, page * r.H + h, tok & (r.P - 1), d, r.P, D,
                                 r.kc ? r.kc + (int64_t)h * D : NULL);
            };
            const int64_t dst = (base + t) * r.H * 64 * D + tile64_off(j, d0);
            if (!r.neox) { // adjacent pairs: pair 4c + w in word w
                float cc[4], ss[4];
                bool rot[4];
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const int i = 4 * c + w;
                    rot[w] = i < HR;
                    cc[w] = rot[w] ? r.cs[pos * HR + i] : 1.f;
                    ss[w] = rot[w] ? r.sn[pos * HR + i] : 0.f;
                }
#pragma unroll 4
                for (int h = 0; h < r.H; h++) {
                    const uint4 xk = r.e8 ? key8(h, d0) : *(const uint4 *)(r.kpool + src + h * hs_src + d0);
                    const uint32_t *u = (const uint32_t *)&xk;
                    uint32_t o[4];
#pragma unroll
                    for (int w = 0; w < 4; w++) {
                        const float x0 = kv_lo(u[w]), x1 = kv_hi(u[w]);
                        o[w] = rot[w] ? pack_f16(x0 * cc[w] - x1 * ss[w], x0 * ss[w] + x1 * cc[w])
                                      : u[w];
                    }
                    *(uint4 *)(r.ks + dst + h * hs_dst) = make_uint4(o[0], o[1], o[2], o[3]);
                }
                continue;
            }
            // split halves: dim d < HR pairs with d + HR (lower), HR <= d < 2 HR with d - HR
            // (upper)
            float cc[8], ss[8];
            int kind[8], part[8]; // 0: copy, 1: lower, 2: upper; partner dim
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int d = d0 + e;
                kind[e] = d < HR ? 1 : (d < 2 * HR ? 2 : 0);
                const int i = kind[e] == 1 ? d : d - HR;
                part[e] = kind[e] == 1 ? d + HR : d - HR;
                cc[e] = kind[e] ? r.cs[pos * HR + i] : 1.f;
                ss[e] = kind[e] ? r.sn[pos * HR + i] : 0.f;
            }
            const bool vec = (HR & 7) == 0; // the partners form one aligned chunk
            for (int h = 0; h < r.H; h++) {
                const lc_kv16 *row = r.kpool + src + h * hs_src;
                const uint4 xk = r.e8 ? key8(h, d0) : *(const uint4 *)(row + d0);
                const uint16_t *xo = (const uint16_t *)&xk;
                uint4 xp = make_uint4(0, 0, 0, 0);
                if (vec && kind[0]) xp = r.e8 ? key8(h, part[0]) : *(const uint4 *)(row + part[0]);
                const uint16_t *xq = (const uint16_t *)&xp;
                float o[8];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float x = kv_f32(xo[e]);
                    if (!kind[e]) {
                        o[e] = x;
                        continue;
                    }
                    const float y = vec    ? kv_f32(xq[e])
                                    : r.e8 ? kv8_elem((const unsigned char *)r.kpool, page * r.H + h,
                                                      tok & (r.P - 1), part[e], r.P, D,
                                                      r.kc ? r.kc + (int64_t)h * D : NULL)
                                           : kv_f32(((const uint16_t *)row)[part[e]]);
                    // lower: x0 = x (own), y0 = partner; upper: x0 = partner, y0 = x (own)
                    o[e] = kind[e] == 1 ? x * cc[e] - y * ss[e] : y * ss[e] + x * cc[e];
                }
                *(uint4 *)(r.ks + dst + h * hs_dst) =
                    make_uint4(pack_f16(o[0], o[1]), pack_f16(o[2], o[3]), pack_f16(o[4], o[5]),
                               pack_f16(o[6], o[7]));
            }
        }
    }
}

} // namespace

extern "C" int lc_cuda_rotate_keys(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                                  const lc_rope_table *rope, const lc_cuda_rot_tiles *rot) {
    const int D = kv->head_dim, P = kv->page_size;
    if (!rot || rot->n_pre <= 0 || rot->tiles <= 0 || rot->filled) return LC_OK;
    if (!rot->k || !rot->pre || !seqs)
        return lc_fail(LC_ERR_INVALID_ARG, "cuda rotate_keys: missing buffers");
    if ((D != 64 && D != 128) || P <= 0 || (P & (P - 1)) || rope->n_rot < 0 || rope->n_rot > D ||
        rope->n_rot % 2 || rope->n_pos < 1)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda rotate_keys: head dim %d, page %d, n_rot %d", D, P,
                       rope->n_rot);
    rot_params r;
    r.seqs = seqs, r.pre = rot->pre;
    r.kpool = (const lc_kv16 *)kv->k;
    r.e8 = kv->e4m3, r.kc = kv->e4m3 ? kv->k_centre : NULL;
    r.cs = rope->cos, r.sn = rope->sin;
    r.ks = (__half *)rot->k;
    r.H = kv->n_kv_head, r.P = P, r.p_shift = 0;
    while ((1 << r.p_shift) < P)
        r.p_shift++;
    r.half_rot = rope->n_rot / 2, r.neox = rope->pairing == LC_ROPE_NEOX, r.n_pos = rope->n_pos;
    int64_t gx = (4 * (int64_t)lc_cuda_sm_count() + rot->n_pre - 1) / rot->n_pre;
    if (gx > rot->tiles) gx = rot->tiles;
    if (gx < 1) gx = 1;
    const dim3 grid((unsigned)gx, (unsigned)rot->n_pre);
    if (D == 64)
        rotate_keys_to_tiles_kernel<64><<<grid, 256, 0, lc_cuda_stream()>>>(r);
    else
        rotate_keys_to_tiles_kernel<128><<<grid, 256, 0, lc_cuda_stream()>>>(r);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
