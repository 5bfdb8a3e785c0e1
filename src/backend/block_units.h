/*
 * block_units.h — GGUF weight blocks read one "unit" at a time: the dot product of a unit's
 * weights with the matching inputs, and its dequantisation, for the GPU's products over weights
 * kept in their file type (issue 23 item 1; cuda/weights_blocks.cu). Written once for the host
 * and the device: the CUDA kernels inline these functions, and tests/test_block_units.c runs the
 * same code on the CPU against lc_dequantize (CI has no GPU).
 *
 * A unit is 32 weights of one row (64 for Q6_K) in four or two runs of 16 consecutive
 * elements ("slots" 16j .. 16j + 15 are elements bu_run_pos(type, u, j) + 0..15):
 *   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: a unit is one 32-element block (runs: its two halves);
 *   Q4_K, Q5_K: unit 8s + 2p + h of super-block s: elements 64p + 16h + 0..15 (the low
 *     nibbles of qs[32p + 16h ..]) and 64p + 32 + 16h + 0..15 (their high nibbles);
 *   Q6_K: unit 4s + 2a + g: elements 128a + 32t + 16g + 0..15 for the four quarters t.
 * So one unit is a handful of aligned loads, and a warp's lanes read neighbouring bytes.
 *
 * The products keep the weights' exact values and fp32 inputs. The quantised integers reach the
 * FMA without an int->float conversion (a quarter-rate instruction): a shift and a mask put q
 * into the top mantissa bits of 1.0f, giving f = 1 + q / 2^b exactly, and
 *   sum q x = 2^b (sum f x - sum x),
 * with sum x per run computed once for all the rows that share the inputs. The cancellation
 * costs at most b + 1 bits of the fp32 sum (relative 1e-5 at b = 8), far below the 16-bit
 * rounding of the dequantised weights that the GEMM path and --weights f16 accept.
 */
#ifndef LC_BLOCK_UNITS_H
#define LC_BLOCK_UNITS_H

#include "format/quant.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define BU_FN __host__ __device__ __forceinline__
#else
#define BU_FN static inline
#endif

/* ---- loads (device: read-only path; host: bytes, any alignment) ---- */

BU_FN uint32_t bu_ld16(const uint8_t *p) { /* p 2-byte aligned on the device */
#ifdef __CUDA_ARCH__
    return (uint32_t)__ldg((const unsigned short *)p);
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
#endif
}
BU_FN uint32_t bu_ld32(const uint8_t *p) { /* 4-byte aligned */
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned int *)p);
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
#endif
}
BU_FN uint32_t bu_ld32_a2(const uint8_t *p) { return bu_ld16(p) | (bu_ld16(p + 2) << 16); }
BU_FN void bu_ld128(const uint8_t *p, uint32_t w[4]) { /* 16-byte aligned */
#ifdef __CUDA_ARCH__
    const uint4 v = __ldg((const uint4 *)p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
#else
    for (int i = 0; i < 4; i++) w[i] = bu_ld32(p + 4 * i);
#endif
}

BU_FN float bu_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } c;
    c.u = u;
    return c.f;
#endif
}
BU_FN float bu_half(uint32_t h) { /* the low 16 bits as IEEE half */
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short)(h & 0xffffu)));
#else
    return lc_fp16_to_fp32((uint16_t)(h & 0xffffu));
#endif
}
/* a*b rounded, never fused with a following add (the CPU dequantiser's rounding) */
BU_FN float bu_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    volatile float r = a * b;
    return r;
#endif
}

/* w shifted left by s (right by -s); s a constant after unrolling */
BU_FN uint32_t bu_shift(uint32_t w, int s) { return s >= 0 ? w << s : w >> -s; }

#define BU_ONE 0x3F800000u

/* ---- the layout ---- */

BU_FN bool bu_type_ok(uint32_t type) {
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q5_0: case LC_TYPE_Q5_1: case LC_TYPE_Q8_0:
    case LC_TYPE_Q4_K: case LC_TYPE_Q5_K: case LC_TYPE_Q6_K: return true;
    default: return false;
    }
}
BU_FN int bu_unit_elems(uint32_t type) { return type == LC_TYPE_Q6_K ? 64 : 32; }
/* the alignment a row's start needs for these loads (bytes) */
BU_FN int bu_row_align(uint32_t type) {
    return type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K ? 16
           : type == LC_TYPE_Q4_1 || type == LC_TYPE_Q5_1 ? 4
                                                         : 2;
}

/* first element (in the row) of run j of unit u */
BU_FN int64_t bu_run_pos(uint32_t type, int64_t u, int j) {
    if (type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K) {
        const int64_t s = u >> 3;
        const int     p = (int)(u >> 1) & 3, h = (int)u & 1;
        return 256 * s + 64 * p + 32 * j + 16 * h;
    }
    if (type == LC_TYPE_Q6_K) {
        const int64_t s = u >> 2;
        const int     a = (int)(u >> 1) & 1, g = (int)u & 1;
        return 256 * s + 128 * a + 32 * j + 16 * g;
    }
    return 32 * u + 16 * j;
}

/* ---- the unit's inputs: xv[slot] and xs[run] = the sum of the run's inputs ---- */

BU_FN void bu_load_x(uint32_t type, const float *x, int64_t u, float *xv, float *xs) {
    const int runs = bu_unit_elems(type) / 16;
    for (int j = 0; j < runs; j++) {
        const float *p = x + bu_run_pos(type, u, j);
        float        s = 0.f;
#ifdef __CUDA_ARCH__
        for (int i = 0; i < 16; i += 4) {
            const float4 v = __ldg((const float4 *)(p + i));
            xv[16 * j + i] = v.x, xv[16 * j + i + 1] = v.y, xv[16 * j + i + 2] = v.z, xv[16 * j + i + 3] = v.w;
        }
#else
        for (int i = 0; i < 16; i++) xv[16 * j + i] = p[i];
#endif
        for (int i = 0; i < 16; i++) s += xv[16 * j + i];
        xs[j] = s;
    }
}

/* ---- nibble sums: 16 bytes q[4] whose low nibbles are slots 0..15, high nibbles 16..31 ---- */

/* lo = sum over the low nibbles of q * x, hi = the same over the high nibbles */
BU_FN void bu_nib_dot(const uint32_t q[4], const float *xv, const float *xs, float *lo, float *hi) {
    float al = 0.f, ah = 0.f;
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 4; b++) {
            /* byte b to bits 15..22: low nibble at 15..18 (1 + q/256), high at 19..22 (1 + q/16) */
            const uint32_t t = bu_shift(q[w], 15 - 8 * b);
            al += bu_f32((t & 0x00078000u) | BU_ONE) * xv[4 * w + b];
            ah += bu_f32((t & 0x00780000u) | BU_ONE) * xv[16 + 4 * w + b];
        }
    *lo = 256.f * (al - xs[0]);
    *hi = 16.f * (ah - xs[1]);
}

/* the same with a fifth bit per value: bit (hb_lo + slot) of h for the low nibbles' values,
 * bit (hb_hi + slot) for the high ones (h: 32 bits, or 16 bytes h4[] with one bit per byte) */
BU_FN void bu_nib5_dot(const uint32_t q[4], uint32_t h, const float *xv, const float *xs,
                       float *lo, float *hi) {
    float al = 0.f, ah = 0.f;
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 4; b++) {
            const int      e  = 4 * w + b; /* slot of the low value */
            /* q5 / 32 at bits 18..22: the nibble at 18..21, the fifth bit at 22 */
            const uint32_t tl = bu_shift(q[w], 18 - 8 * b), th = bu_shift(q[w], 14 - 8 * b);
            const uint32_t hl = bu_shift(h, 22 - e), hh = bu_shift(h, 22 - (e + 16));
            al += bu_f32((tl & 0x003C0000u) | (hl & 0x00400000u) | BU_ONE) * xv[e];
            ah += bu_f32((th & 0x003C0000u) | (hh & 0x00400000u) | BU_ONE) * xv[16 + e];
        }
    *lo = 32.f * (al - xs[0]);
    *hi = 32.f * (ah - xs[1]);
}
/* Q5_K: the fifth bits come from 16 bytes qh4[4] (one per slot), bit sl for the low values and
 * bit sl + 1 for the high ones */
BU_FN void bu_nib5k_dot(const uint32_t q[4], const uint32_t qh4[4], int sl, const float *xv,
                        const float *xs, float *lo, float *hi) {
    float al = 0.f, ah = 0.f;
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 4; b++) {
            const int      e  = 4 * w + b;
            const uint32_t tl = bu_shift(q[w], 18 - 8 * b), th = bu_shift(q[w], 14 - 8 * b);
            const uint32_t hv = qh4[w] >> (8 * b + sl); /* bit 0: low value's, bit 1: high's */
            al += bu_f32((tl & 0x003C0000u) | ((hv & 1u) << 22) | BU_ONE) * xv[e];
            ah += bu_f32((th & 0x003C0000u) | ((hv & 2u) << 21) | BU_ONE) * xv[16 + e];
        }
    *lo = 32.f * (al - xs[0]);
    *hi = 32.f * (ah - xs[1]);
}

/* Q4_K / Q5_K scale and min j (6 bits each) from the header words hd[4] (bytes 0..15 of the
 * block; the 12 packed bytes are hd[1..3]). Shifts only: no register array indexed at run time
 * (which the compiler would put in local memory). */
BU_FN void bu_scale_min_k(const uint32_t hd[4], int j, int *sc, int *mn) {
    const int sh = 8 * (j & 3);
    const int b1 = (int)((hd[1] >> sh) & 255u), b2 = (int)((hd[2] >> sh) & 255u);
    if (j < 4) {
        *sc = b1 & 63;
        *mn = b2 & 63;
    } else {
        const int b3 = (int)((hd[3] >> sh) & 255u);
        *sc = (b3 & 0x0f) | ((b1 >> 6) << 4);
        *mn = (b3 >> 4) | ((b2 >> 6) << 4);
    }
}

/* ---- the dot product of unit u of a row (the row's first byte) with its inputs ---- */

BU_FN float bu_dot(uint32_t type, const uint8_t *row, int64_t u, const float *xv, const float *xs) {
    switch (type) {
    case LC_TYPE_Q4_0: {
        const uint8_t *b = row + 18 * u;
        uint32_t       q[4];
        for (int i = 0; i < 4; i++) q[i] = bu_ld32_a2(b + 2 + 4 * i);
        float lo, hi;
        bu_nib_dot(q, xv, xs, &lo, &hi);
        return bu_half(bu_ld16(b)) * (lo + hi - 8.f * (xs[0] + xs[1]));
    }
    case LC_TYPE_Q4_1: {
        const uint8_t *b = row + 20 * u;
        const uint32_t dm = bu_ld32(b);
        uint32_t       q[4];
        for (int i = 0; i < 4; i++) q[i] = bu_ld32(b + 4 + 4 * i);
        float lo, hi;
        bu_nib_dot(q, xv, xs, &lo, &hi);
        return bu_half(dm) * (lo + hi) + bu_half(dm >> 16) * (xs[0] + xs[1]);
    }
    case LC_TYPE_Q5_0: {
        const uint8_t *b = row + 22 * u;
        uint32_t       q[4];
        for (int i = 0; i < 4; i++) q[i] = bu_ld32_a2(b + 6 + 4 * i);
        float lo, hi;
        bu_nib5_dot(q, bu_ld32_a2(b + 2), xv, xs, &lo, &hi);
        return bu_half(bu_ld16(b)) * (lo + hi - 16.f * (xs[0] + xs[1]));
    }
    case LC_TYPE_Q5_1: {
        const uint8_t *b = row + 24 * u;
        const uint32_t dm = bu_ld32(b);
        uint32_t       q[4];
        for (int i = 0; i < 4; i++) q[i] = bu_ld32(b + 8 + 4 * i);
        float lo, hi;
        bu_nib5_dot(q, bu_ld32(b + 4), xv, xs, &lo, &hi);
        return bu_half(dm) * (lo + hi) + bu_half(dm >> 16) * (xs[0] + xs[1]);
    }
    case LC_TYPE_Q8_0: {
        const uint8_t *b = row + 34 * u;
        float          a = 0.f;
        for (int w = 0; w < 8; w++) {
            const uint32_t q = bu_ld32_a2(b + 2 + 4 * w);
            for (int i = 0; i < 4; i++) { /* (q + 128) / 256 at bits 15..22 */
                const uint32_t t = bu_shift(q ^ 0x80808080u, 15 - 8 * i);
                a += bu_f32((t & 0x007F8000u) | BU_ONE) * xv[4 * w + i];
            }
        }
        const float sx = xs[0] + xs[1];
        return bu_half(bu_ld16(b)) * (256.f * (a - sx) - 128.f * sx);
    }
    case LC_TYPE_Q4_K:
    case LC_TYPE_Q5_K: {
        const bool     q5 = type == LC_TYPE_Q5_K;
        const uint8_t *b  = row + (q5 ? 176 : 144) * (u >> 3);
        const int      p = (int)(u >> 1) & 3, h = (int)u & 1;
        uint32_t       hd[4], q[4];
        bu_ld128(b, hd);
        bu_ld128(b + (q5 ? 48 : 16) + 32 * p + 16 * h, q);
        float lo, hi;
        if (q5) {
            uint32_t qh[4];
            bu_ld128(b + 16 + 16 * h, qh);
            bu_nib5k_dot(q, qh, 2 * p, xv, xs, &lo, &hi);
        } else {
            bu_nib_dot(q, xv, xs, &lo, &hi);
        }
        int s0, m0, s1, m1;
        bu_scale_min_k(hd, 2 * p, &s0, &m0);
        bu_scale_min_k(hd, 2 * p + 1, &s1, &m1);
        const float d = bu_half(hd[0]), dmin = bu_half(hd[0] >> 16);
        /* the 6-bit scales as floats without a conversion instruction (as the values) */
        const float f0 = bu_f32(0x4B000000u | (uint32_t)s0) - 8388608.f, f1 = bu_f32(0x4B000000u | (uint32_t)s1) - 8388608.f;
        const float g0 = bu_f32(0x4B000000u | (uint32_t)m0) - 8388608.f, g1 = bu_f32(0x4B000000u | (uint32_t)m1) - 8388608.f;
        return d * (f0 * lo + f1 * hi) - dmin * (g0 * xs[0] + g1 * xs[1]);
    }
    case LC_TYPE_Q6_K: {
        const uint8_t *b = row + 210 * (u >> 2);
        const int      a = (int)(u >> 1) & 1, g = (int)u & 1;
        uint32_t       ql[8], qh[4], sc[2];
        for (int i = 0; i < 4; i++) {
            ql[i]     = bu_ld32_a2(b + 64 * a + 16 * g + 4 * i);
            ql[4 + i] = bu_ld32_a2(b + 64 * a + 32 + 16 * g + 4 * i);
            qh[i]     = bu_ld32_a2(b + 128 + 32 * a + 16 * g + 4 * i);
        }
        sc[0] = bu_ld32_a2(b + 192 + 8 * a), sc[1] = bu_ld32_a2(b + 196 + 8 * a);
        float r = 0.f;
        for (int t = 0; t < 4; t++) { /* quarter t: ql half (t & 1), nibble (t >> 1), qh bits 2t */
            float acc = 0.f;
            for (int w = 0; w < 4; w++)
                for (int i = 0; i < 4; i++) {
                    /* q6 / 64 at bits 17..22: the nibble at 17..20, the two high bits at 21..22 */
                    const uint32_t tl = bu_shift(ql[4 * (t & 1) + w], 17 - 8 * i - 4 * (t >> 1));
                    const uint32_t th = bu_shift(qh[w], 21 - 8 * i - 2 * t);
                    acc += bu_f32((tl & 0x001E0000u) | (th & 0x00600000u) | BU_ONE) * xv[16 * t + 4 * w + i];
                }
            const int   si = 2 * t + g; /* scale 8a + 2t + g: byte si of sc[0..1] */
            const float s  = (float)(int8_t)(((t < 2 ? sc[0] : sc[1]) >> (8 * (si & 3))) & 255u);
            r += s * (64.f * (acc - xs[t]) - 32.f * xs[t]);
        }
        return bu_half(bu_ld16(b + 208)) * r;
    }
    default: return 0.f;
    }
}

/* ---- dequantisation of unit u into v[slot], rounded as lc_dequantize rounds ---- */

BU_FN void bu_dequant(uint32_t type, const uint8_t *row, int64_t u, float *v) {
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q5_0: case LC_TYPE_Q5_1: {
        const bool     mn = type == LC_TYPE_Q4_1 || type == LC_TYPE_Q5_1;
        const bool     five = type == LC_TYPE_Q5_0 || type == LC_TYPE_Q5_1;
        const int      bytes = 18 + (mn ? 2 : 0) + (five ? 4 : 0);
        const uint8_t *b = row + bytes * u;
        const float    d = bu_half(bu_ld16(b)), m = mn ? bu_half(bu_ld16(b + 2)) : 0.f;
        const uint8_t *p = b + (mn ? 4 : 2);
        const uint32_t qh = five ? bu_ld32_a2(p) : 0u;
        const uint8_t *qs = p + (five ? 4 : 0);
        const int      zero = five ? 16 : 8;
        for (int j = 0; j < 16; j += 2) {
            const uint32_t two = bu_ld16(qs + j);
            for (int k = 0; k < 2; k++) {
                const int e  = j + k;
                const int lo = (int)((two >> (8 * k)) & 15u) | (int)(((qh >> e) & 1u) << 4);
                const int hi = (int)((two >> (8 * k + 4)) & 15u) | (int)(((qh >> (e + 16)) & 1u) << 4);
                if (mn) {
                    v[e] = bu_mul((float)lo, d) + m;
                    v[e + 16] = bu_mul((float)hi, d) + m;
                } else {
                    v[e] = bu_mul((float)(lo - zero), d);
                    v[e + 16] = bu_mul((float)(hi - zero), d);
                }
            }
        }
        return;
    }
    case LC_TYPE_Q8_0: {
        const uint8_t *b = row + 34 * u;
        const float    d = bu_half(bu_ld16(b));
        for (int j = 0; j < 32; j += 2) {
            const uint32_t two = bu_ld16(b + 2 + j);
            v[j]     = bu_mul((float)(int8_t)(two & 255u), d);
            v[j + 1] = bu_mul((float)(int8_t)(two >> 8), d);
        }
        return;
    }
    case LC_TYPE_Q4_K: case LC_TYPE_Q5_K: {
        const bool     q5 = type == LC_TYPE_Q5_K;
        const uint8_t *b  = row + (q5 ? 176 : 144) * (u >> 3);
        const int      p = (int)(u >> 1) & 3, h = (int)u & 1;
        uint32_t       hd[4], q[4], qh[4] = {0, 0, 0, 0};
        bu_ld128(b, hd);
        bu_ld128(b + (q5 ? 48 : 16) + 32 * p + 16 * h, q);
        if (q5) bu_ld128(b + 16 + 16 * h, qh);
        int s0, m0, s1, m1;
        bu_scale_min_k(hd, 2 * p, &s0, &m0);
        bu_scale_min_k(hd, 2 * p + 1, &s1, &m1);
        const float d = bu_half(hd[0]), dmin = bu_half(hd[0] >> 16);
        const float d0 = bu_mul(d, (float)s0), n0 = bu_mul(dmin, (float)m0);
        const float d1 = bu_mul(d, (float)s1), n1 = bu_mul(dmin, (float)m1);
        for (int e = 0; e < 16; e++) {
            const uint32_t byte = (q[e >> 2] >> (8 * (e & 3))) & 255u;
            const uint32_t hb   = (qh[e >> 2] >> (8 * (e & 3) + 2 * p)) & 3u;
            const int      v0   = (int)(byte & 15u) | (int)((hb & 1u) << 4);
            const int      v1   = (int)(byte >> 4) | (int)((hb >> 1) << 4);
            v[e]      = bu_mul(d0, (float)v0) - n0;
            v[16 + e] = bu_mul(d1, (float)v1) - n1;
        }
        return;
    }
    case LC_TYPE_Q6_K: {
        const uint8_t *b = row + 210 * (u >> 2);
        const int      a = (int)(u >> 1) & 1, g = (int)u & 1;
        const float    d = bu_half(bu_ld16(b + 208));
        for (int t = 0; t < 4; t++) {
            const int   si = 8 * a + 2 * t + g;
            const float dl = bu_mul(d, (float)(int8_t)((bu_ld16(b + 192 + (si & ~1)) >> (8 * (si & 1))) & 255u));
            const uint8_t *lq = b + 64 * a + 32 * (t & 1) + 16 * g, *hq = b + 128 + 32 * a + 16 * g;
            for (int l = 0; l < 16; l += 2) {
                const uint32_t l2 = bu_ld16(lq + l), h2 = bu_ld16(hq + l);
                for (int k = 0; k < 2; k++) {
                    const int q = (int)((((l2 >> (8 * k)) >> (4 * (t >> 1))) & 15u) |
                                        ((((h2 >> (8 * k)) >> (2 * t)) & 3u) << 4)) - 32;
                    v[16 * t + l + k] = bu_mul(dl, (float)q);
                }
            }
        }
        return;
    }
    default: return;
    }
}

#endif
