/*
 * cpu_simd_avx512.c — AVX-512 kernels of the CPU weight products (cpu_simd.h): fp16 <-> fp32
 * rows, fp32/fp16 dots, row dequantisers bit-identical to format/quant.c for the reference
 * models' types (prompt tiles, embedding rows), and fused dequantise-and-dot kernels for decode
 * over the eight block types GGUF models mostly use (issue 23 item 4: weights used as the file
 * stores them). CMake compiles this file alone with -mavx512f/bw/vl/dq, -mfma and -mf16c on
 * x86-64 and defines LC_HAVE_AVX512_KERNELS; cpu_matmul.c calls in only after the run-time CPU
 * check, so the rest of the library keeps the build's own target.
 */
#include "backend/cpu/cpu_simd.h"

#if defined(LC_HAVE_AVX512_KERNELS)
#include "backend/cpu/cpu_simd_blocks.h"
#include "format/quant.h"

#include <immintrin.h>

void lc_avx512_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = lc_fp32_to_fp16(src[i]);
}

void lc_avx512_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = lc_fp16_to_fp32(src[i]);
}

float lc_avx512_dot_f16(const uint16_t *w, const float *x, int64_t n) {
    int64_t i  = 0;
    __m512  a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                             _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                             _mm512_loadu_ps(x + i + 16), a1);
    }
    float acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) acc += lc_fp16_to_fp32(w[i]) * x[i];
    return acc;
}

float lc_avx512_dot_f32(const float *w, const float *x, int64_t n) {
    int64_t i  = 0;
    __m512  a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    }
    float acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) acc += w[i] * x[i];
    return acc;
}


/* 16 unsigned bytes to 16 floats */
static inline __m512 u8_to_ps(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)); }

/* ---- row dequantisers: the same operations in the same order as format/quant.c's (scale
 * times q, then plus or minus the minimum; no fused multiply-add), so the values are
 * bit-identical (tests/test_matmul.c compares embedding rows byte for byte) ---- */

static void row_q4_01(const uint8_t *b, float *dst, int64_t n, bool min) {
    const __m128i lo4 = _mm_set1_epi8(0x0f);
    const __m512  z8  = _mm512_set1_ps(8.0f);
    for (int64_t i = 0; i < n / 32; i++, b += min ? 20 : 18, dst += 32) {
        const __m512  d  = _mm512_set1_ps(lc_block_half(b));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + (min ? 4 : 2)));
        __m512        lo = u8_to_ps(_mm_and_si128(qs, lo4));
        __m512        hi = u8_to_ps(_mm_and_si128(_mm_srli_epi16(qs, 4), lo4));
        if (min) {
            const __m512 m = _mm512_set1_ps(lc_block_half(b + 2));
            lo             = _mm512_add_ps(_mm512_mul_ps(lo, d), m);
            hi             = _mm512_add_ps(_mm512_mul_ps(hi, d), m);
        } else { /* (q - 8) is exact in fp32, as the reference's integer subtraction */
            lo = _mm512_mul_ps(_mm512_sub_ps(lo, z8), d);
            hi = _mm512_mul_ps(_mm512_sub_ps(hi, z8), d);
        }
        _mm512_storeu_ps(dst, lo);
        _mm512_storeu_ps(dst + 16, hi);
    }
}

static void row_q4_k(const uint8_t *b, float *dst, int64_t n) {
    const __m128i lo4 = _mm_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / 256; i++, b += 144, dst += 256) {
        const float    d = lc_block_half(b), dmin = lc_block_half(b + 2);
        const uint8_t *qs = b + 16;
        uint8_t        scv[8], mnv[8];
        lc_block_k4_scales(b + 4, scv, mnv);
        for (int c = 0; c < 4; c++) {
            const int s0 = scv[2 * c], m0 = mnv[2 * c], s1 = scv[2 * c + 1], m1 = mnv[2 * c + 1];
            const __m512 d0 = _mm512_set1_ps(d * (float)s0), n0 = _mm512_set1_ps(dmin * (float)m0);
            const __m512 d1 = _mm512_set1_ps(d * (float)s1), n1 = _mm512_set1_ps(dmin * (float)m1);
            for (int h = 0; h < 2; h++) {
                const __m128i q = _mm_loadu_si128((const __m128i *)(qs + 32 * c + 16 * h));
                const __m512  a = u8_to_ps(_mm_and_si128(q, lo4));
                const __m512  e = u8_to_ps(_mm_and_si128(_mm_srli_epi16(q, 4), lo4));
                _mm512_storeu_ps(dst + 64 * c + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d0, a), n0));
                _mm512_storeu_ps(dst + 64 * c + 32 + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, e), n1));
            }
        }
    }
}

static void row_q6_k(const uint8_t *b, float *dst, int64_t n) {
    const __m128i lo4 = _mm_set1_epi8(0x0f), lo2 = _mm_set1_epi8(3);
    const __m512  z32 = _mm512_set1_ps(32.0f);
    for (int64_t i = 0; i < n / 256; i++, b += 210, dst += 256) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t  *sc = (const int8_t *)(b + 192);
        const float    d  = lc_block_half(b + 208);
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 4; t++)
                for (int g = 0; g < 2; g++) {
                    const int     o  = 128 * h + 32 * t + 16 * g;
                    const __m128i lq = _mm_loadu_si128((const __m128i *)(ql + 64 * h + 32 * (t & 1) + 16 * g));
                    const __m128i hq = _mm_loadu_si128((const __m128i *)(qh + 32 * h + 16 * g));
                    const __m128i l4 = _mm_and_si128(_mm_srli_epi16(lq, 4 * (t >> 1)), lo4);
                    const __m128i h2 = _mm_and_si128(_mm_srli_epi16(hq, 2 * t), lo2);
                    const __m128i q  = _mm_or_si128(l4, _mm_slli_epi16(h2, 4));
                    /* (q - 32) is exact in fp32 */
                    const __m512 v = _mm512_sub_ps(u8_to_ps(q), z32);
                    _mm512_storeu_ps(dst + o, _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[o / 16]), v));
                }
    }
}

bool lc_avx512_dequant_row(uint32_t type, const uint8_t *src, float *dst, int64_t n) {
    switch (type) {
    case LC_TYPE_Q4_0: row_q4_01(src, dst, n, false); return true;
    case LC_TYPE_Q4_1: row_q4_01(src, dst, n, true); return true;
    case LC_TYPE_Q4_K: row_q4_k(src, dst, n); return true;
    case LC_TYPE_Q6_K: row_q6_k(src, dst, n); return true;
    default: return false;
    }
}

/* ---- fused dequantise-and-dot (decode): per block the integer values widened to fp32, a
 * 16-lane partial sum with x scaled by the block's scale into the accumulator, the block's
 * minimum or offset once through the sum of x over its 32 elements ---- */

/* The 32-element blocks (quant.c's layouts): y = q·d + m (Q4_1, Q5_1), (q - zero)·d (Q4_0 zero
 * 8, Q5_0 zero 16; folded into m = -zero·d), Q8_0 y = qs·d with signed bytes. */
static inline void dot_q32(const uint8_t *w, const float *x0, const float *xs0, int64_t K,
                           float *out, const int n, const bool min, const bool five, const bool q8) {
    const int64_t nb    = K / 32;
    const int64_t bytes = q8 ? 34 : 18 + (min ? 2 : 0) + (five ? 4 : 0);
    const __m128i m0f   = _mm_set1_epi8(0x0f);
    __m512        acc[LC_QDOT_MAX_ROWS];
    float         macc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm512_setzero_ps(), macc[r] = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += bytes) {
        const float d = lc_block_half(w);
        __m512      lo, hi;
        float       m = 0.0f;
        if (q8) {
            lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 2))));
            hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 18))));
        } else {
            const uint8_t *p  = w + (min ? 4 : 2);
            uint32_t       qh = 0;
            if (five) memcpy(&qh, p, 4), p += 4;
            const __m128i q  = _mm_loadu_si128((const __m128i *)p);
            __m512i       li = _mm512_cvtepu8_epi32(_mm_and_si128(q, m0f));
            __m512i       hv = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m0f));
            if (five) {
                const __m512i s16 = _mm512_set1_epi32(16);
                li = _mm512_mask_add_epi32(li, (__mmask16)(qh & 0xffffu), li, s16);
                hv = _mm512_mask_add_epi32(hv, (__mmask16)(qh >> 16), hv, s16);
            }
            lo = _mm512_cvtepi32_ps(li);
            hi = _mm512_cvtepi32_ps(hv);
            m  = min ? lc_block_half(w + 2) : -(float)(five ? 16 : 8) * d;
        }
        const __m512 dv = _mm512_set1_ps(d);
        for (int r = 0; r < n; r++) {
            const float *x = x0 + r * K + 32 * b;
            __m512       t = _mm512_mul_ps(lo, _mm512_loadu_ps(x));
            t              = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), t);
            acc[r]         = _mm512_fmadd_ps(dv, t, acc[r]);
            if (!q8) macc[r] += m * xs0[r * nb + b];
        }
    }
    for (int r = 0; r < n; r++) out[r] = _mm512_reduce_add_ps(acc[r]) + macc[r];
}

/* Q4_K / Q5_K: chunk c of 64 elements, low nibbles of qs[32c..] sub-block 2c, high nibbles
 * sub-block 2c + 1 (Q5_K: bit 2c / 2c + 1 of qh adds 16); y = d·sc·q - dmin·m per sub-block. */
static inline void dot_q45k(const uint8_t *w, const float *x0, const float *xs0, int64_t K,
                            float *out, const int n, const bool q5) {
    const int64_t nb = K / 256, ng = K / 32;
    const __m128i m0f = _mm_set1_epi8(0x0f);
    const __m512i s16 = _mm512_set1_epi32(16);
    __m512        acc[LC_QDOT_MAX_ROWS];
    float         macc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm512_setzero_ps(), macc[r] = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += q5 ? 176 : 144) {
        const float    d = lc_block_half(w), dmin = lc_block_half(w + 2);
        const uint8_t *sc = w + 4, *qh = w + 16, *qs = w + (q5 ? 48 : 16);
        __m128i        h0 = _mm_setzero_si128(), h1 = _mm_setzero_si128();
        if (q5) {
            h0 = _mm_loadu_si128((const __m128i *)qh);
            h1 = _mm_loadu_si128((const __m128i *)(qh + 16));
        }
        uint8_t scv[8], mnv[8];
        lc_block_k4_scales(sc, scv, mnv);
        for (int c = 0; c < 4; c++) {
            const int     s0 = scv[2 * c], m0 = mnv[2 * c], s1 = scv[2 * c + 1], m1 = mnv[2 * c + 1];
            const __m512  d0 = _mm512_set1_ps(d * (float)s0), d1 = _mm512_set1_ps(d * (float)s1);
            const float   n0 = dmin * (float)m0, n1 = dmin * (float)m1;
            const __m128i qa = _mm_loadu_si128((const __m128i *)(qs + 32 * c));
            const __m128i qb = _mm_loadu_si128((const __m128i *)(qs + 32 * c + 16));
            __m512i       la = _mm512_cvtepu8_epi32(_mm_and_si128(qa, m0f));
            __m512i       lb = _mm512_cvtepu8_epi32(_mm_and_si128(qb, m0f));
            __m512i       ha = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(qa, 4), m0f));
            __m512i       hb = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(qb, 4), m0f));
            if (q5) {
                const __m128i bl = _mm_set1_epi8((char)(1 << (2 * c)));
                const __m128i bh = _mm_set1_epi8((char)(1 << (2 * c + 1)));
                la = _mm512_mask_add_epi32(la, _mm_test_epi8_mask(h0, bl), la, s16);
                lb = _mm512_mask_add_epi32(lb, _mm_test_epi8_mask(h1, bl), lb, s16);
                ha = _mm512_mask_add_epi32(ha, _mm_test_epi8_mask(h0, bh), ha, s16);
                hb = _mm512_mask_add_epi32(hb, _mm_test_epi8_mask(h1, bh), hb, s16);
            }
            const __m512 fla = _mm512_cvtepi32_ps(la), flb = _mm512_cvtepi32_ps(lb);
            const __m512 fha = _mm512_cvtepi32_ps(ha), fhb = _mm512_cvtepi32_ps(hb);
            for (int r = 0; r < n; r++) {
                const float *x  = x0 + r * K + 256 * b + 64 * c;
                __m512       t0 = _mm512_mul_ps(fla, _mm512_loadu_ps(x));
                t0              = _mm512_fmadd_ps(flb, _mm512_loadu_ps(x + 16), t0);
                __m512 t1       = _mm512_mul_ps(fha, _mm512_loadu_ps(x + 32));
                t1              = _mm512_fmadd_ps(fhb, _mm512_loadu_ps(x + 48), t1);
                acc[r]          = _mm512_fmadd_ps(d0, t0, acc[r]);
                acc[r]          = _mm512_fmadd_ps(d1, t1, acc[r]);
                const float *xs = xs0 + r * ng + 8 * b + 2 * c;
                macc[r] += n0 * xs[0] + n1 * xs[1];
            }
        }
    }
    for (int r = 0; r < n; r++) out[r] = _mm512_reduce_add_ps(acc[r]) - macc[r];
}

/* Q6_K: half h, quarter t, elements o = 128h + 32t + l; low 4 bits from
 * ql[64h + 32(t&1) + l] >> 4(t>>1), high 2 from qh[32h + l] >> 2t; (q - 32)·d·sc[o/16]. */
static inline void dot_q6k(const uint8_t *w, const float *x0, int64_t K, float *out, const int n) {
    const int64_t nb  = K / 256;
    const __m256i m0f = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(3);
    const __m512i s32 = _mm512_set1_epi32(32);
    __m512        acc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += 210) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t  *sc = (const int8_t *)(w + 192);
        const float    d  = lc_block_half(w + 208);
        for (int h = 0; h < 2; h++) {
            const __m256i hq = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
            for (int t = 0; t < 4; t++) {
                const __m256i lq = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32 * (t & 1)));
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(lq, 4 * (t >> 1)), m0f);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hq, 2 * t), m03);
                const __m256i q  = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                const __m512  qa = _mm512_cvtepi32_ps(
                    _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)), s32));
                const __m512 qb = _mm512_cvtepi32_ps(
                    _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)), s32));
                const int    o  = 128 * h + 32 * t;
                const __m512 da = _mm512_set1_ps(d * (float)sc[o / 16]);
                const __m512 db = _mm512_set1_ps(d * (float)sc[o / 16 + 1]);
                for (int r = 0; r < n; r++) {
                    const float *x = x0 + r * K + 256 * b + o;
                    acc[r] = _mm512_fmadd_ps(da, _mm512_mul_ps(qa, _mm512_loadu_ps(x)), acc[r]);
                    acc[r] = _mm512_fmadd_ps(db, _mm512_mul_ps(qb, _mm512_loadu_ps(x + 16)), acc[r]);
                }
            }
        }
    }
    for (int r = 0; r < n; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

bool lc_avx512_qdot_type(uint32_t type) {
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q5_0: case LC_TYPE_Q5_1:
    case LC_TYPE_Q8_0: case LC_TYPE_Q4_K: case LC_TYPE_Q5_K: case LC_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

/* n is a constant in each expansion so the accumulators stay in registers */
void lc_avx512_qdot(uint32_t type, const uint8_t *w, const float *x, const float *xs, int64_t K,
                    int n_rows, float *out) {
    switch (type) {
    case LC_TYPE_Q4_0: LC_QDOT_FOR_ROWS(n_rows, dot_q32(w, x, xs, K, out, n, false, false, false)); break;
    case LC_TYPE_Q4_1: LC_QDOT_FOR_ROWS(n_rows, dot_q32(w, x, xs, K, out, n, true, false, false)); break;
    case LC_TYPE_Q5_0: LC_QDOT_FOR_ROWS(n_rows, dot_q32(w, x, xs, K, out, n, false, true, false)); break;
    case LC_TYPE_Q5_1: LC_QDOT_FOR_ROWS(n_rows, dot_q32(w, x, xs, K, out, n, true, true, false)); break;
    case LC_TYPE_Q8_0: LC_QDOT_FOR_ROWS(n_rows, dot_q32(w, x, xs, K, out, n, false, false, true)); break;
    case LC_TYPE_Q4_K: LC_QDOT_FOR_ROWS(n_rows, dot_q45k(w, x, xs, K, out, n, false)); break;
    case LC_TYPE_Q5_K: LC_QDOT_FOR_ROWS(n_rows, dot_q45k(w, x, xs, K, out, n, true)); break;
    case LC_TYPE_Q6_K: LC_QDOT_FOR_ROWS(n_rows, dot_q6k(w, x, K, out, n)); break;
    default: break;
    }
}

#else
/* (not x86-64, or a compiler without the AVX-512 flags: cpu_matmul.c runs its scalar code) */
typedef int lc_cpu_simd_avx512_empty;
#endif
