/*
 * cpu_simd_vnni.c — products with 8-bit activations (cpu_simd.h; issue 23 item 4): the
 * input rows quantised to int8 per 32 values (scale max|x|/127, round to nearest), then the
 * weight blocks' unsigned integers multiplied with them by AVX-512 VNNI (VPDPBUSD: 64 u8 x s8
 * multiply-adds an instruction), block scales and minimums applied in fp32 afterwards. The
 * arithmetic of llama.cpp's CPU path, not the exact values of --weights f32: chosen by the
 * tuning knob cpu-dot=q8. Types: Q4_0, Q4_1, Q8_0, Q4_K, Q6_K. CMake compiles this file alone
 * with the AVX-512 and VNNI flags on x86-64 (LC_HAVE_VNNI_KERNELS); cpu_matmul.c calls it after
 * the run-time CPU check, for decode rows (prompt products stay on fp32 tiles: bench/NOTES.md 66).
 */
#include "backend/cpu/cpu_simd.h"

#if defined(LC_HAVE_VNNI_KERNELS)
#include "backend/cpu/cpu_simd_blocks.h"
#include "format/quant.h"

#include <immintrin.h>

bool lc_vnni_qdot_type(uint32_t type) {
    return type == LC_TYPE_Q4_0 || type == LC_TYPE_Q4_1 || type == LC_TYPE_Q8_0 ||
           type == LC_TYPE_Q4_K || type == LC_TYPE_Q6_K;
}

void lc_vnni_quantize_row(const float *x, int64_t K, int8_t *xq, float *xd, int32_t *xs16) {
    for (int64_t b = 0; b < K / 32; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
        const float  amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float  d  = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
        /* round to nearest even (the MXCSR default), values within ±127 */
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128((__m128i *)(xq + 32 * b), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(xq + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
        xd[b]           = d;
        xs16[2 * b]     = _mm512_reduce_add_epi32(q0);
        xs16[2 * b + 1] = _mm512_reduce_add_epi32(q1);
    }
}


/* the sum of 8 lanes */
static inline float sum8(__m256 v) {
    return _mm512_reduce_add_ps(_mm512_zextps256_ps512(v));
}

/* two 32-lane halves into one 512-bit register */
static inline __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* lanes 0-7 a, lanes 8-15 b */
static inline __m512 halves(float a, float b) {
    return _mm512_mask_blend_ps((__mmask16)0xff00, _mm512_set1_ps(a), _mm512_set1_ps(b));
}

/* The 32-value blocks, two at a time: the block's 32 unsigned values (Q4: low nibbles then high
 * nibbles, as the values are laid out; Q8_0: the signed bytes + 128) times the activations,
 * 8 lanes a block, each lane's integer sum scaled by d_w·d_x into fp32; the offsets (Q4_0: -8,
 * Q8_0: -128) and Q4_1's minimum through the activations' integer sums. */
static inline void dot_q32(uint32_t type, const uint8_t *w, const int8_t *xq0, const float *xd0,
                           const int32_t *xs0, int64_t K, float *out, const int n) {
    const int64_t nb    = K / 32;
    const int64_t bytes = type == LC_TYPE_Q8_0 ? 34 : type == LC_TYPE_Q4_1 ? 20 : 18;
    const __m256i m0f   = _mm256_set1_epi8(0x0f);
    __m256        acc[LC_QDOT_MAX_ROWS];
    float         sacc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm256_setzero_ps(), sacc[r] = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += bytes) {
        __m256i u;
        float   off; /* value = d·(u + off) (+ m for Q4_1) */
        if (type == LC_TYPE_Q8_0) {
            u   = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 2)), _mm256_set1_epi8((char)0x80));
            off = -128.0f;
        } else {
            const __m128i q = _mm_loadu_si128((const __m128i *)(w + (type == LC_TYPE_Q4_1 ? 4 : 2)));
            const __m256i qq = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
            u   = _mm256_and_si256(qq, m0f);
            off = type == LC_TYPE_Q4_0 ? -8.0f : 0.0f;
        }
        const float d = lc_block_half(w);
        const float m = type == LC_TYPE_Q4_1 ? lc_block_half(w + 2) : 0.0f;
        for (int r = 0; r < n; r++) {
            const __m256i x  = _mm256_loadu_si256((const __m256i *)(xq0 + r * K + 32 * b));
            const __m256i s  = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
            const float   dx = xd0[r * nb + b];
            const float   is = (float)(xs0[r * 2 * nb + 2 * b] + xs0[r * 2 * nb + 2 * b + 1]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * dx), acc[r]);
            sacc[r] += (d * off + m) * dx * is;
        }
    }
    for (int r = 0; r < n; r++) out[r] = sum8(acc[r]) + sacc[r];
}

/* Q4_K: chunk c of 64 values = the low nibbles of qs[32c..32c+31] (sub-block 2c) then their
 * high nibbles (2c + 1), against 64 activations; y = d·sc·q - dmin·m per sub-block. Per
 * super-block and input row the 8 sub-block factors d·sc_j·dx_j are one vector (each chunk's
 * 16 lanes pick theirs by a permute) and the minimums one 8-lane product with the
 * activations' block sums xs32. */
static inline void dot_q4k(const uint8_t *w, const int8_t *xq0, const float *xd0,
                           const float *xs32, int64_t K, float *out, const int n) {
    const int64_t nb = K / 256, ng = K / 32;
    const __m256i m0f = _mm256_set1_epi8(0x0f);
    __m512i       sel[4]; /* chunk c: lanes 0-7 sub-block 2c, lanes 8-15 2c + 1 */
    for (int c = 0; c < 4; c++)
        sel[c] = _mm512_mask_blend_epi32((__mmask16)0xff00, _mm512_set1_epi32(2 * c),
                                         _mm512_set1_epi32(2 * c + 1));
    __m512 acc[LC_QDOT_MAX_ROWS];
    __m256 macc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm512_setzero_ps(), macc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += 144) {
        const float    d = lc_block_half(w), dmin = lc_block_half(w + 2);
        const uint8_t *qs = w + 16;
        uint8_t sc[8], mn[8];
        lc_block_k4_scales(w + 4, sc, mn);
        const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                             _mm_loadl_epi64((const __m128i *)sc))));
        const __m256 dmn = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                             _mm_loadl_epi64((const __m128i *)mn))));
        __m512 f[LC_QDOT_MAX_ROWS]; /* lanes 0-7: d·sc_j·dx_j */
        for (int r = 0; r < n; r++) {
            const __m256 dx = _mm256_loadu_ps(xd0 + r * ng + 8 * b);
            f[r]            = _mm512_castps256_ps512(_mm256_mul_ps(dsc, dx));
            macc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dmn, dx), _mm256_loadu_ps(xs32 + r * ng + 8 * b),
                                      macc[r]);
        }
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            const __m512i u = join256(_mm256_and_si256(q, m0f),
                                      _mm256_and_si256(_mm256_srli_epi16(q, 4), m0f));
            for (int r = 0; r < n; r++) {
                const __m512i x = _mm512_loadu_si512((const void *)(xq0 + r * K + 256 * b + 64 * c));
                const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(sel[c], f[r]),
                                         acc[r]);
            }
        }
    }
    for (int r = 0; r < n; r++) out[r] = _mm512_reduce_add_ps(acc[r]) - sum8(macc[r]);
}

/* Q6_K: half h, quarter t, values o = 128h + 32t + l: q = low 4 bits of
 * ql[64h + 32(t&1) + l] >> 4(t>>1) | 2 bits of qh[32h + l] >> 2t, value (q - 32)·d·sc[o/16].
 * Quarters t = 2p, 2p + 1 go together (64 values); the -32 through the activations' sums
 * over each 16 values. */
static inline void dot_q6k(const uint8_t *w, const int8_t *xq0, const float *xd0,
                           const int32_t *xs0, int64_t K, float *out, const int n) {
    const int64_t nb = K / 256, ng = K / 32;
    const __m256i m0f = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(3);
    /* lane i of a 64-value product: scale group 4p' + i/4 within the half, x block i/8 */
    const __m512i gsel = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    __m512        acc[LC_QDOT_MAX_ROWS];
    float         oacc[LC_QDOT_MAX_ROWS];
    for (int r = 0; r < n; r++) acc[r] = _mm512_setzero_ps(), oacc[r] = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 210) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t  *sc = (const int8_t *)(w + 192);
        const float    d  = lc_block_half(w + 208);
        const __m512   scf = _mm512_mul_ps(_mm512_set1_ps(d),
                                           _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                               _mm_loadu_si128((const __m128i *)sc))));
        for (int r = 0; r < n; r++) { /* Σ_g d·sc_g·dx·(-32)·Σx_g over the 16 groups */
            const float  *dx = xd0 + r * ng + 8 * b;
            const __m512i is = _mm512_loadu_si512((const void *)(xs0 + r * 2 * ng + 16 * b));
            /* group g's activations block is g/2 */
            const __m512 dxg = _mm512_permutexvar_ps(
                _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
                _mm512_castps256_ps512(_mm256_loadu_ps(dx)));
            oacc[r] += -32.0f * _mm512_reduce_add_ps(_mm512_mul_ps(_mm512_mul_ps(scf, dxg),
                                                                   _mm512_cvtepi32_ps(is)));
        }
        for (int h = 0; h < 2; h++) {
            const __m256i hq  = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
            const __m256i lq0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h));
            const __m256i lq1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32));
            for (int p = 0; p < 2; p++) {
                const int     t0 = 2 * p, t1 = 2 * p + 1; /* t & 1 = 0, 1; t >> 1 = p */
                const __m256i l0 = _mm256_and_si256(_mm256_srli_epi16(lq0, 4 * p), m0f);
                const __m256i l1 = _mm256_and_si256(_mm256_srli_epi16(lq1, 4 * p), m0f);
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hq, 2 * t0), m03);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hq, 2 * t1), m03);
                const __m512i u  = join256(_mm256_or_si256(l0, _mm256_slli_epi16(h0, 4)),
                                           _mm256_or_si256(l1, _mm256_slli_epi16(h1, 4)));
                /* the 16 lanes' scales: groups 8h + 4p + i/4, x blocks 4h + 2p + i/8 */
                const __m512 sl = _mm512_permutexvar_ps(
                    _mm512_add_epi32(gsel, _mm512_set1_epi32(8 * h + 4 * p)), scf);
                const int64_t g = 8 * b + 4 * h + 2 * p;
                for (int r = 0; r < n; r++) {
                    const __m512i x = _mm512_loadu_si512((const void *)(xq0 + r * K + 32 * g));
                    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
                    const float  *dx = xd0 + r * ng + g;
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                             _mm512_mul_ps(sl, halves(dx[0], dx[1])), acc[r]);
                }
            }
        }
    }
    for (int r = 0; r < n; r++) out[r] = _mm512_reduce_add_ps(acc[r]) + oacc[r];
}

void lc_vnni_qdot(uint32_t type, const uint8_t *w, const int8_t *xq, const float *xd,
                  const int32_t *xs16, const float *xs32, int64_t K, int n_rows, float *out) {
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q8_0:
        LC_QDOT_FOR_ROWS(n_rows, dot_q32(type, w, xq, xd, xs16, K, out, n));
        break;
    case LC_TYPE_Q4_K: LC_QDOT_FOR_ROWS(n_rows, dot_q4k(w, xq, xd, xs32, K, out, n)); break;
    case LC_TYPE_Q6_K: LC_QDOT_FOR_ROWS(n_rows, dot_q6k(w, xq, xd, xs16, K, out, n)); break;
    default: break;
    }
}

#else
typedef int lc_cpu_simd_vnni_empty;
#endif
