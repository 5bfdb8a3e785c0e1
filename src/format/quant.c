/*
 * quant.c — ggml tensor types: the traits table (names, block and byte sizes of every type id
 * ggml defines), fp16/bf16 conversions, and dequantisation of F32, F16, BF16, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K blocks to fp32. Block layouts:
 * spec/ecosystem-and-style.md §1.3 (ggml's ggml-common.h). Every block is read byte-wise
 * (no struct casts), so sources need no alignment.
 *
 * Arithmetic order matches ggml's reference dequantisers (per-sub-block scale computed first,
 * then scale*q [- min]); each product and sum is its own statement so that no compiler fuses
 * them into an FMA, which keeps results bit-identical to the reference.
 */
#include "format/quant.h"

#include <math.h>

#include "util/util.h"

#include <string.h>

/* ---- fp16 / bf16 ------------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Branch-free (selects only, so loops over it vectorise): move exponent and mantissa into
 * place and rebias; inf/nan get the exponent pushed to 255; zero/subnormals are computed as
 * (2^-14 * (1 + mant/1024)) - 2^-14 = mant * 2^-24, which is exact. */
static inline float half_to_float(uint16_t h) {
    uint32_t o = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t exp = o & 0x0f800000u;
    o += 0x38000000u;                           /* (127 - 15) << 23 */
    o += exp == 0x0f800000u ? 0x38000000u : 0u; /* inf/nan: exponent 255 */
    float sub = bits_f32(o + 0x00800000u) - 0x1p-14f;
    float f = exp == 0 ? sub : bits_f32(o);
    return bits_f32(f32_bits(f) | ((uint32_t)(h & 0x8000u) << 16));
}

float lc_fp16_to_fp32(uint16_t h) {
    return half_to_float(h);
}

uint16_t lc_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) { /* inf or nan: keep the top payload bits, force quiet */
        if (x == 0x7f800000u) return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    }
    if (x >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {
        /* below the smallest normal half (2^-14): result is a subnormal (or the smallest
         * normal after rounding). Adding 0.5 puts the value's 2^-24 units in the low mantissa
         * bits of a float, rounded to nearest even by the FPU. */
        float a = bits_f32(x) + 0.5f;
        return (uint16_t)(sign | (f32_bits(a) - 0x3f000000u));
    }
    /* normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even */
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd; /* ((15 - 127) << 23) + 0xfff, modulo 2^32 */
    return (uint16_t)(sign | (x >> 13));
}

float lc_e4m3_to_fp32(uint8_t c) {
    const int   e = (c >> 3) & 15, m = c & 7;
    const float a = (c & 0x7f) == 0x7f ? NAN
                    : e == 0           ? ldexpf((float)m, -9)
                                       : ldexpf((float)(8 + m), e - 10);
    return c & 0x80 ? -a : a;
}

uint8_t lc_fp32_to_e4m3(float f) {
    if (isnan(f)) return 0x7f;
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    const float   a    = fabsf(f);
    if (a >= 448.0f) return sign | 0x7e; /* saturate (464 and up would round past 448) */
    int e;
    frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1): a's exponent is e - 1 */
    if (a == 0.0f || e - 1 < -6) { /* subnormal: steps of 2^-9, 8 of them reach 2^-6 */
        const int m = (int)rintf(ldexpf(a, 9)); /* exact scaling, round half to even */
        return (uint8_t)(sign | m);             /* m = 8 is 0x08, the smallest normal */
    }
    /* normal: 8 + m = a / 2^(e - 4) in [8, 16), rounded half to even; 16 carries into the
     * exponent, which the bit layout does by itself */
    const int q = (int)rintf(ldexpf(a, 4 - e));
    return (uint8_t)(sign | (((e - 1 + 7) << 3) + (q - 8)));
}

float lc_bf16_to_fp32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

uint16_t lc_fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ---- helpers ---------------------------------------------------------------------------- */

static inline float rd_half(const uint8_t *p) {
    return half_to_float((uint16_t)(p[0] | (p[1] << 8)));
}

#define QK_K 256

/* ---- dequantisers (n is a multiple of the block size) ---------------------------------- */

static void deq_f32(const void *restrict src, float *restrict dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void deq_f16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = rd_half(p + 2 * i);
}

static void deq_bf16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)p[2 * i] | ((uint32_t)p[2 * i + 1] << 8)) << 16;
        dst[i] = bits_f32(u);
    }
}

static inline uint32_t rd_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* The 32-element blocks of Q4_0, Q4_1, Q5_0 and Q5_1: half d; with min, half m; with five,
 * u8 qh[4] (bit j: the 5th bit of element j); u8 qs[16] (element j in the low nibble of qs[j],
 * element j + 16 in the high one). y = (q - 8) * d (Q4_0), (q - 16) * d (Q5_0), q * d + m (with
 * min). One loop for the four (min and five constants where it is inlined). */
static inline void deq_q32(const void *restrict src, float *restrict dst, int64_t n, bool min,
                           bool five) {
    const uint8_t *b = src;
    const int64_t bytes = 18 + (min ? 2 : 0) + (five ? 4 : 0);
    const int zero = five ? 16 : 8;
    for (int64_t i = 0; i < n / 32; i++, b += bytes, dst += 32) {
        const float d = rd_half(b);
        const float m = min ? rd_half(b + 2) : 0.0f;
        const uint8_t *p = b + (min ? 4 : 2);
        const uint32_t qh = five ? rd_u32le(p) : 0;
        const uint8_t *qs = p + (five ? 4 : 0);
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            if (min) {
                float a = (float)lo * d;
                float c = (float)hi * d;
                dst[j] = a + m;
                dst[j + 16] = c + m;
            } else {
                dst[j] = (float)(lo - zero) * d;
                dst[j + 16] = (float)(hi - zero) * d;
            }
        }
    }
}

static void deq_q4_0(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q32(src, dst, n, false, false);
}

static void deq_q4_1(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q32(src, dst, n, true, false);
}

static void deq_q5_0(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q32(src, dst, n, false, true);
}

static void deq_q5_1(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q32(src, dst, n, true, true);
}

/* Q8_0: half d; i8 qs[32]. y = qs * d */
static void deq_q8_0(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 34, dst += 32) {
        const float d = rd_half(b);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)qs[j] * d;
    }
}

/* Q2_K: u8 scales[16] (low nibble scale, high nibble min); u8 qs[64]; half d; half dmin.
 * Two halves of 128 outputs; in half h, 2-bit field s of qs[32h + l] is output
 * 128h + 32s + l, whose 16-element group (scale index) is (128h + 32s + l) / 16. */
static void deq_q2_k(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 84, dst += QK_K) {
        const uint8_t *sc = b;
        const uint8_t *qs = b + 16;
        const float d = rd_half(b + 80);
        const float dmin = rd_half(b + 82);
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 4; s++) {
                for (int g = 0; g < 2; g++) {
                    const int o = 128 * h + 32 * s + 16 * g;
                    const float dl = d * (float)(sc[o / 16] & 0x0f);
                    const float ml = dmin * (float)(sc[o / 16] >> 4);
                    for (int l = 0; l < 16; l++) {
                        float q = (float)((qs[32 * h + 16 * g + l] >> (2 * s)) & 3);
                        float p = dl * q;
                        dst[o + l] = p - ml;
                    }
                }
            }
        }
    }
}

/* Q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12] (16 six-bit scales, bias 32); half d.
 * Output o = 128h + 32s + l: low 2 bits from qs[32h + l] >> 2s, high bit from
 * hmask[l] >> (4h + s) (a clear bit subtracts 4). */
static void deq_q3_k(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 110, dst += QK_K) {
        const uint8_t *hm = b;
        const uint8_t *qs = b + 32;
        const uint8_t *sc = b + 96;
        const float d = rd_half(b + 108);
        int scale[16];
        for (int k = 0; k < 16; k++) {
            int lo = (sc[k % 8] >> (4 * (k / 8))) & 0x0f;
            int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
            scale[k] = (lo | (hi << 4)) - 32;
        }
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 4; s++) {
                const int bit = 4 * h + s;
                for (int g = 0; g < 2; g++) {
                    const int o = 128 * h + 32 * s + 16 * g;
                    const float dl = d * (float)scale[o / 16];
                    for (int l = 0; l < 16; l++) {
                        const int li = 16 * g + l;
                        int q =
                            ((qs[32 * h + li] >> (2 * s)) & 3) - (((hm[li] >> bit) & 1) ? 0 : 4);
                        dst[o + l] = dl * (float)q;
                    }
                }
            }
        }
    }
}

/* 6-bit scale and min j (0..7) of a Q4_K/Q5_K block's 12 scale bytes. */
static inline void scale_min_k4(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: half d; half dmin; u8 scales[12]; u8 qs[128]. Chunk c (64 outputs) uses qs[32c..]:
 * low nibbles -> sub-block 2c, high nibbles -> sub-block 2c+1.
 * Q5_K: half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. As Q4_K, plus a 5th bit
 * for sub-block j from qh[l] >> j. One loop for both (q5 a constant where it is inlined). */
static inline void deq_q45_k(const void *restrict src, float *restrict dst, int64_t n, bool q5) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += q5 ? 176 : 144, dst += QK_K) {
        const float d = rd_half(b);
        const float dmin = rd_half(b + 2);
        const uint8_t *sc = b + 4;
        const uint8_t *qh = b + 16; /* Q5_K only */
        const uint8_t *qs = b + (q5 ? 48 : 16);
        for (int c = 0; c < 4; c++) {
            int s0, m0, s1, m1;
            scale_min_k4(2 * c, sc, &s0, &m0);
            scale_min_k4(2 * c + 1, sc, &s1, &m1);
            const float d0 = d * (float)s0, n0 = dmin * (float)m0;
            const float d1 = d * (float)s1, n1 = dmin * (float)m1;
            const uint8_t *q = qs + 32 * c;
            float *y = dst + 64 * c;
            for (int l = 0; l < 32; l++) {
                int v0 = q[l] & 0x0f, v1 = q[l] >> 4;
                if (q5) {
                    v0 |= ((qh[l] >> (2 * c)) & 1) << 4;
                    v1 |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                float a = d0 * (float)v0;
                float e = d1 * (float)v1;
                y[l] = a - n0;
                y[l + 32] = e - n1;
            }
        }
    }
}

static void deq_q4_k(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q45_k(src, dst, n, false);
}

static void deq_q5_k(const void *restrict src, float *restrict dst, int64_t n) {
    deq_q45_k(src, dst, n, true);
}

/* Q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; half d (last). Half h (128 outputs) uses
 * ql[64h..], qh[32h..]; quarter t of the half, element l: low 4 bits from
 * ql[64h + 32(t&1) + l] >> 4(t>>1), high 2 bits from qh[32h + l] >> 2t; q - 32. */
static void deq_q6_k(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 210, dst += QK_K) {
        const uint8_t *ql = b;
        const uint8_t *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = rd_half(b + 208);
        for (int h = 0; h < 2; h++) {
            for (int t = 0; t < 4; t++) {
                const uint8_t *lq = ql + 64 * h + 32 * (t & 1);
                const uint8_t *hq = qh + 32 * h;
                const int sl = 4 * (t >> 1), sh = 2 * t;
                for (int g = 0; g < 2; g++) {
                    const int o = 128 * h + 32 * t + 16 * g;
                    const float dl = d * (float)sc[o / 16];
                    for (int l = 0; l < 16; l++) {
                        const int li = 16 * g + l;
                        int q = (((lq[li] >> sl) & 0x0f) | (((hq[li] >> sh) & 3) << 4)) - 32;
                        dst[o + l] = dl * (float)q;
                    }
                }
            }
        }
    }
}

/* Q8_K: f32 d; i8 qs[256]; i16 bsums[16]. y = d * qs */
static void deq_q8_k(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 292, dst += QK_K) {
        float d;
        memcpy(&d, b, sizeof d);
        const int8_t *qs = (const int8_t *)(b + 4);
        for (int j = 0; j < QK_K; j++)
            dst[j] = d * (float)qs[j];
    }
}

/* ---- traits ----------------------------------------------------------------------------- */

static const lc_type_traits g_traits[LC_TYPE_COUNT] = {
    [0] = {"f32", 1, 4, deq_f32},        [1] = {"f16", 1, 2, deq_f16},
    [2] = {"q4_0", 32, 18, deq_q4_0},    [3] = {"q4_1", 32, 20, deq_q4_1},
    [6] = {"q5_0", 32, 22, deq_q5_0},    [7] = {"q5_1", 32, 24, deq_q5_1},
    [8] = {"q8_0", 32, 34, deq_q8_0},    [9] = {"q8_1", 32, 36, NULL},
    [10] = {"q2_K", 256, 84, deq_q2_k},  [11] = {"q3_K", 256, 110, deq_q3_k},
    [12] = {"q4_K", 256, 144, deq_q4_k}, [13] = {"q5_K", 256, 176, deq_q5_k},
    [14] = {"q6_K", 256, 210, deq_q6_k}, [15] = {"q8_K", 256, 292, deq_q8_k},
    [16] = {"iq2_xxs", 256, 66, NULL},   [17] = {"iq2_xs", 256, 74, NULL},
    [18] = {"iq3_xxs", 256, 98, NULL},   [19] = {"iq1_s", 256, 50, NULL},
    [20] = {"iq4_nl", 32, 18, NULL},     [21] = {"iq3_s", 256, 110, NULL},
    [22] = {"iq2_s", 256, 82, NULL},     [23] = {"iq4_xs", 256, 136, NULL},
    [24] = {"i8", 1, 1, NULL},           [25] = {"i16", 1, 2, NULL},
    [26] = {"i32", 1, 4, NULL},          [27] = {"i64", 1, 8, NULL},
    [28] = {"f64", 1, 8, NULL},          [29] = {"iq1_m", 256, 56, NULL},
    [30] = {"bf16", 1, 2, deq_bf16},     [34] = {"tq1_0", 256, 54, NULL},
    [35] = {"tq2_0", 256, 66, NULL},     [39] = {"mxfp4", 32, 17, NULL},
    [40] = {"nvfp4", 64, 36, NULL},      [41] = {"q1_0", 128, 18, NULL},
    [42] = {"q2_0", 64, 18, NULL},
};

const lc_type_traits *lc_type_traits_get(uint32_t type) {
    if (type >= LC_TYPE_COUNT || !g_traits[type].name) return NULL;
    return &g_traits[type];
}

const char *lc_type_name(uint32_t type) {
    const lc_type_traits *t = lc_type_traits_get(type);
    return t ? t->name : NULL;
}

bool lc_type_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes) {
    const lc_type_traits *t = lc_type_traits_get(type);
    if (!t || n % (uint64_t)t->blck_size != 0) return false;
    uint64_t r;
    if (!lc_mul_u64(n / (uint64_t)t->blck_size, (uint64_t)t->type_size, &r)) return false;
    *bytes = r;
    return true;
}

int lc_dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    const lc_type_traits *t = lc_type_traits_get(type);
    if (!t) return lc_fail(LC_ERR_INVALID_ARG, "dequantize: unknown type id %u", type);
    if (!t->to_float)
        return lc_fail(LC_ERR_UNSUPPORTED, "dequantize: type %s cannot be dequantised", t->name);
    if (n < 0 || n % t->blck_size != 0)
        return lc_fail(LC_ERR_INVALID_ARG,
                       "dequantize: %lld elements is not a multiple of the %s block size %lld",
                       (long long)n, t->name, (long long)t->blck_size);
    if (n == 0) return LC_OK;
    if (!src || !dst) return lc_fail(LC_ERR_INVALID_ARG, "dequantize: NULL buffer");
    t->to_float(src, dst, n);
    return LC_OK;
}
