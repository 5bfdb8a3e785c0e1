// device_prims.cuh — small device helpers shared by the CUDA attention and selection kernels
// (attention.cu, attn_segments.cu, prune_chunks.cu, select_blocks.cu, ...): shared-memory
// addresses, cp.async, ldmatrix, mma.sync and wgmma wrappers, the KV pools' element type,
// fp16/bf16 packing, fast exp2, named barriers, RoPE of one element, a block-wide prefix sum
// and a radix-select pass.
// Inline PTX; each function is what its name says, nothing more.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/cuda/cuda.h" // lc_attn_seq

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
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
// The KV pools' element: fp16 (DESIGN.md planned bf16; bench/NOTES.md 35-36). Its 11
// significant bits keep a key's per-token part where bf16's 8 lost it under a large per-layer
// key bias (Qwen2's k bias reaches 354 in layer 0: bf16 steps of 2 there cost 0.1 in log-probs,
// fp16 9e-3); the values attention reads (|K| <= 359, |V| <= 18 on Qwen2.5-Coder-1.5B) sit far
// below its 65,504, and kv_write saturates there. The pools are the tensor cores' operand type
// as they stand: no conversion on the way to an mma.
typedef __half lc_kv16;
// two pool elements (one 32-bit register) as floats: low element, high element (the conversion
// instruction; an integer form, bits moved into an fp32 and multiplied by 2^112, measured no
// faster: bench/NOTES.md 36)
__device__ __forceinline__ float kv_lo(uint32_t r) {
    return __half2float(__ushort_as_half((unsigned short)(r & 0xffffu)));
}
__device__ __forceinline__ float kv_hi(uint32_t r) {
    return __half2float(__ushort_as_half((unsigned short)(r >> 16)));
}
// one pool element from a 16-bit load
__device__ __forceinline__ float kv_f32(uint16_t h) { return kv_lo(h); }
// a float into a pool element, saturating at fp16's largest finite value (no inf from a finite
// key; NaN stays NaN, for the sampler's non-finite check)
__device__ __forceinline__ lc_kv16 kv_from_f32(float x) {
    return __float2half_rn(fabsf(x) > 65504.0f ? copysignf(65504.0f, x) : x);
}
// ---- the fp8 KV layout (backend.h LC_KV_E4M3) ----
// A slab (one page of one KV head): [PAGE][D] e4m3 codes, then [PAGE] fp32 scales. Element =
// fp16(fp16(256 s) * code / 256 + fp16(centre)): code / 256 is the code's bits moved into an
// fp16 (exponent bias 15 for 7, so the value divided by 2^8; subnormals map to subnormals,
// exact), and one fp16 FMA applies scale and centre; the host's copy is lc_kv_e4m3_value.
__host__ __device__ constexpr int kv8_slab_bytes(int page, int d) { return page * (d + 4); }
// the two codes that __byte_perm selector sel moves into the high bytes of the two halves,
// as an f16x2 of code / 256 each (sel 0x1404: bytes 0, 1 of x; 0x3424: bytes 2, 3)
__device__ __forceinline__ __half2 kv8_pair(uint32_t x, uint32_t sel) {
    const uint32_t y = __byte_perm(x, 0u, sel);
    const uint32_t h = (y & 0x80008000u) | ((y >> 1) & 0x3f803f80u);
    return *(const __half2 *)&h;
}
// one code as an fp16 of code / 256
__device__ __forceinline__ __half kv8_one(uint8_t c) {
    return __ushort_as_half((unsigned short)(((c & 0x80u) << 8) | ((c & 0x7fu) << 7)));
}
// 4 codes (a 32-bit word, lowest byte first) -> 2 f16x2 words of elements: s256 = fp16(256 s),
// c01 / c23 the fp16 centres of the 4 elements
__device__ __forceinline__ void kv8_dequant4(uint32_t w, __half2 s256, __half2 c01, __half2 c23,
                                             uint32_t &lo, uint32_t &hi) {
    const __half2 a = __hfma2(kv8_pair(w, 0x1404u), s256, c01);
    const __half2 b = __hfma2(kv8_pair(w, 0x3424u), s256, c23);
    lo = *(const uint32_t *)&a, hi = *(const uint32_t *)&b;
}
// 8 consecutive elements of one token (8 codes at p, 8-byte aligned; the token's scale; the
// 8 centres as 4 f16x2, zero for values) as 8 fp16 (a uint4, lowest element first)
__device__ __forceinline__ uint4 kv8_row8(const unsigned char *p, float scale, const __half2 *c) {
    const uint2   q    = *(const uint2 *)p;
    const __half2 s256 = __float2half2_rn(scale * 256.0f);
    uint4         r;
    kv8_dequant4(q.x, s256, c[0], c[1], r.x, r.y);
    kv8_dequant4(q.y, s256, c[2], c[3], r.z, r.w);
    return r;
}
// fp16 centres of dims [d, d + 2) of a centre row (NULL: zeros)
__device__ __forceinline__ __half2 kv8_centre2(const float *centre, int d) {
    return centre ? __floats2half2_rn(centre[d], centre[d + 1]) : __floats2half2_rn(0.f, 0.f);
}
// 8 elements [d, d + 8) of token `slot` of slab `slab` (a pool in the fp8 layout, page P, head
// dim D) as 8 fp16, lowest first; cen: the slab head's key centre row (NULL: zeros, values)
__device__ __forceinline__ uint4 kv8_load8(const unsigned char *pool, int64_t slab, int slot, int d,
                                           int P, int D, const float *cen) {
    const unsigned char *s     = pool + slab * (int64_t)P * (D + 4);
    const float          scale = __ldg((const float *)(s + (int64_t)P * D) + slot);
    const __half2        c[4]  = {kv8_centre2(cen, d), kv8_centre2(cen, d + 2), kv8_centre2(cen, d + 4),
                                  kv8_centre2(cen, d + 6)};
    return kv8_row8(s + (int64_t)slot * D + d, scale, c);
}
// one element d of token `slot` of slab `slab` (as kv8_load8) as an fp32 of its fp16 value
__device__ __forceinline__ float kv8_elem(const unsigned char *pool, int64_t slab, int slot, int d,
                                          int P, int D, const float *cen) {
    const unsigned char *s     = pool + slab * (int64_t)P * (D + 4);
    const float          scale = __ldg((const float *)(s + (int64_t)P * D) + slot);
    const __half         c     = __float2half_rn(cen ? cen[d] : 0.f);
    return __half2float(__hfma(kv8_one(s[(int64_t)slot * D + d]), __float2half_rn(scale * 256.0f), c));
}
// wgmma shared-memory descriptor, 128-byte swizzle: lbo / sbo in bytes
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void *p, uint32_t lbo, uint32_t sbo) {
    const uint64_t addr = smem_u32(p);
    return ((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void pin_regs(float *d) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ void named_barrier(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// Element offset of (key r, dim c) inside one 64-key tile of 16-bit values: D / 64 column
// blocks of [64 keys][64 dims], each 128-byte row's 16-byte chunks permuted by XOR with r mod 8
// (the 128-byte-swizzled operand layout of Hopper's tensor cores; attention.cu's prefill scratch
// and the InfiniteHiP rotated-key tiles). 8 consecutive dims (c % 8 == 0) stay contiguous.
__device__ __forceinline__ int tile64_off(int r, int c) {
    return ((c >> 6) * 64 + r) * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
}
// First 64-key tile of the z-th of the sequences seqs[pre[0..]] when each takes
// ceil((pos0 + n_rows) / 64) tiles in list order (attention.cu's prefill scratch, the rotated-key
// tiles of rotated_keys.cu).
__device__ __forceinline__ int64_t tile64_first(const lc_attn_seq *seqs, const int32_t *pre, int z) {
    int64_t base = 0;
    for (int i = 0; i < z; i++) {
        const lc_attn_seq s = seqs[pre[i]];
        base += (s.pos0 + s.n_rows + 63) / 64;
    }
    return base;
}
// cp.async of 16 bytes, L2 to shared memory without allocating in L1 (.cg)
__device__ __forceinline__ void cp_async16_cg(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}

// the same at shared address dst + DOFF and src + SOFF bytes (immediate offsets)
template <int DOFF, int SOFF> __device__ __forceinline__ void cp_async16_cg_at(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%3], 16;\n" ::"r"(dst), "l"(src), "n"(DOFF), "n"(SOFF)
                 : "memory");
}

// Hopper (sm_90a) only: mbarriers, bulk copies and the fp16 wgmma products of the
// warp-specialised attention kernels (attention.cu's dense prefill, attn_segments.cu's prefill)
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LC_HAVE_WGMMA 1
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n.reg .pred done;\nLC_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra LC_WAIT;\n}\n" ::"r"(smem_u32(b)),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}

#define LC_ACC32(d)                                                                                      \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),      \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define LC_REGS32                                                                                       \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
    "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LC_REGS64                                                                                       \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
    "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
    "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "  \
    "%59, %60, %61, %62, %63}"

// S (64 x 64, fp32) (+)= A B with A (64 x 16) and B (16 x 64, K-major) both from shared memory
__device__ __forceinline__ void wgmma_ss_n64(float d[32], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " LC_REGS32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : LC_ACC32(d)
                 : "l"(da), "l"(db), "r"(scale_d));
}
// O (64 x 64) += A B, A from registers, B (16 x 64) transposed (MN-major) in shared memory
__device__ __forceinline__ void wgmma_rs_n64_t(float d[32], const uint32_t a[4], uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " LC_REGS32
                 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                 : LC_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// O (64 x 128) += A B, as above
__device__ __forceinline__ void wgmma_rs_n128_t(float d[64], const uint32_t a[4], uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " LC_REGS64
                 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                 : LC_ACC32(d), LC_ACC32((d + 32))
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#endif

// pos clamped into a table of n_pos rows (0 .. n_pos - 1)
__device__ __forceinline__ int clamp_pos(int pos, int n_pos) {
    return pos < 0 ? 0 : (pos >= n_pos ? n_pos - 1 : pos);
}

// Element d of the head vector x rotated by RoPE table row pos (cs, sn: [rows][n_rot / 2] cos
// and sin), as lc_cpu_rope_copy: dims from n_rot on as they are; neox: pairs (i, i + n_rot / 2),
// else adjacent pairs (2i, 2i + 1).
__device__ __forceinline__ float rope_elem(const float *x, int d, int pos, const float *cs,
                                           const float *sn, int n_rot, bool neox) {
    const int half = n_rot >> 1;
    if (d >= n_rot) return x[d];
    if (!neox) {
        const int   i = d >> 1;
        const float c = cs[(size_t)pos * half + i], s = sn[(size_t)pos * half + i];
        const float x0 = x[d & ~1], x1 = x[d | 1];
        return (d & 1) ? x0 * s + x1 * c : x0 * c - x1 * s;
    }
    const int   i = d < half ? d : d - half;
    const float c = cs[(size_t)pos * half + i], s = sn[(size_t)pos * half + i];
    const float x0 = x[i], x1 = x[i + half];
    return d < half ? x0 * c - x1 * s : x0 * s + x1 * c;
}

// Inclusive prefix sum of x over the lanes of the warp (all 32 lanes call it).
__device__ __forceinline__ int warp_incl_scan(int x) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Exclusive prefix sum of v over the block (prune_chunks's and select_blocks's list building);
// *total gets the sum. nw: the block's warps, blockDim.x / 32 (at most 32; a compile-time
// constant where the caller has one). smem: 32 ints. Every thread must call it; it ends with a
// barrier, so the next call may reuse smem.
__device__ __forceinline__ int block_excl_scan(int v, int *total, int *smem, int nw) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int x    = warp_incl_scan(v);
    if (lane == 31) smem[warp] = x;
    __syncthreads();
    if (warp == 0) {
        const int w = warp_incl_scan(lane < nw ? smem[lane] : 0);
        __syncwarp();
        if (lane < nw) smem[lane] = w;
    }
    __syncthreads();
    const int before = warp > 0 ? smem[warp - 1] : 0;
    *total           = smem[nw - 1];
    __syncthreads(); // smem is reused by the next call
    return before + x - v;
}

// One 8-bit pass of a radix select of the need-th largest 32-bit key, from the top (prune_chunks's
// and select_blocks's selects): the keys key(i), i < n, whose bits under mask equal prefix are
// counted into 256 bins of bits [shift, shift + 8) — warp-aggregated shared atomics, one per
// distinct bin of a warp (scores share their high bytes, so most lanes hit one bin) — and warp
// 0 finds the bin where the count from the top reaches need: out[0] = its digit, out[1] = the
// keys of higher bins, out[2] = the bin's count. Every thread of the block calls it (blockDim.x a
// multiple of 32); hist: 256 ints of shared memory, out: 3; both are read by all threads after
// it returns (it ends with a barrier; callers place one before reusing hist or out).
template <typename KeyAt>
__device__ void radix_pass8(KeyAt key, int n, uint32_t prefix, uint32_t mask, int shift, int need,
                            int *hist, int *out) {
    const int tid = threadIdx.x, bd = blockDim.x, lane = tid & 31;
    for (int i = tid; i < 256; i += bd) hist[i] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += bd) { // whole warps a round (the match below)
        const int      i   = base + tid;
        const uint32_t k   = i < n ? key(i) : 0u;
        const bool     in  = i < n && (k & mask) == prefix;
        const unsigned act = __ballot_sync(0xffffffffu, in);
        if (in) {
            const int      bin  = (int)((k >> shift) & 255u);
            const unsigned same = __match_any_sync(act, bin);
            if (lane == __ffs(same) - 1) atomicAdd(&hist[bin], __popc(same));
        }
    }
    __syncthreads();
    if (tid < 32) { // lane l: bins 255 - 8 l .. 248 - 8 l, counted from the top
        int cnt[8], sum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) cnt[i] = hist[255 - 8 * lane - i], sum += cnt[i];
        int incl = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        int cum = incl - sum;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            if (cum < need && cum + cnt[i] >= need) out[0] = 255 - 8 * lane - i, out[1] = cum, out[2] = cnt[i];
            cum += cnt[i];
        }
    }
    __syncthreads();
}
