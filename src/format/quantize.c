/*
 * quantize.c — fp32 to q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K and q6_K (quantize.h), the
 * byte layouts of quant.c's dequantisers (which tests/test_quant.c checks bit-exactly against
 * the PyPI `gguf` package). Round to nearest; every scale is rounded up to the next fp16 (and
 * the K-types' 6-bit sub-scales up to the next step), so the largest value of a block never
 * clips: the error of a value is at most half its step, plus, for the types with a minimum,
 * the rounding of that minimum (at most one step of the K-types' 6-bit minimum). Blocks are
 * independent, so large tensors are quantised in parallel.
 */
#include "format/quantize.h"
#include "format/quant.h"
#include "util/util.h"

#include <math.h>
#include <string.h>

#define QK_K 256
#define HALF_MAX 65504.0f

/* The smallest fp16 >= v (v >= 0 and finite); false past fp16's range. */
static bool half_up(float v, uint16_t *h) {
    if (!(v <= HALF_MAX)) return false;
    uint16_t b = lc_fp32_to_fp16(v);
    if (lc_fp16_to_fp32(b) < v) b++;
    *h = b;
    return lc_fp16_to_fp32(b) <= HALF_MAX;
}

static void put_half(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* round(v / step) clamped to [lo, hi]; step 0 (an all-zero block): 0 clamped */
static int qround(float v, float step, int lo, int hi) {
    return clampi(step > 0.0f ? (int)lrintf(v / step) : 0, lo, hi);
}

/* min, max and max |x| of n values; false if one is not finite */
static bool range_of(const float *x, int n, float *mn, float *mx, float *amax) {
    float a = x[0], b = x[0], m = 0.0f;
    bool  ok = true;
    for (int j = 0; j < n; j++) {
        ok = ok && isfinite(x[j]);
        a  = fminf(a, x[j]);
        b  = fmaxf(b, x[j]);
        m  = fmaxf(m, fabsf(x[j]));
    }
    *mn = a, *mx = b, *amax = m;
    return ok;
}

/* ---- the 32-element types ----------------------------------------------------------------- */

/* q4_0 / q5_0: d = amax / (levels/2 - 1), y = (q - zero) d. q4_1 / q5_1: d = range / levels,
 * m = min (fp16, rounded down so that q >= 0), y = q d + m. Layout: quant.c deq_q32. */
static bool quant_q32(const float *x, uint8_t *b, bool min, bool five) {
    const int levels = five ? 31 : 15, zero = five ? 16 : 8;
    float     mn, mx, amax;
    if (!range_of(x, 32, &mn, &mx, &amax)) return false;
    uint16_t dh, mh = 0;
    float    m = 0.0f;
    if (min) {
        mh = lc_fp32_to_fp16(mn);
        if (lc_fp16_to_fp32(mh) > mn) mh = mn < 0.0f ? (uint16_t)(mh + 1) : (uint16_t)(mh - 1);
        m = lc_fp16_to_fp32(mh);
        if (!(fabsf(m) <= HALF_MAX) || !half_up((mx - m) / (float)levels, &dh)) return false;
    } else if (!half_up(amax / (float)(zero - 1), &dh)) {
        return false;
    }
    const float d = lc_fp16_to_fp32(dh);
    put_half(b, dh);
    uint8_t *p = b + 2;
    if (min) put_half(p, mh), p += 2;
    uint8_t *qh = five ? p : NULL, *qs = p + (five ? 4 : 0);
    uint32_t hbits = 0;
    memset(qs, 0, 16);
    for (int j = 0; j < 32; j++) {
        const int q = min ? qround(x[j] - m, d, 0, levels) : qround(x[j], d, -zero, zero - 1) + zero;
        qs[j % 16] |= (uint8_t)((q & 0x0f) << (j < 16 ? 0 : 4));
        if (five) hbits |= (uint32_t)((q >> 4) & 1) << j;
    }
    if (five)
        for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(hbits >> (8 * k));
    return true;
}

/* q8_0: d = amax / 127, y = q d. */
static bool quant_q8_0(const float *x, uint8_t *b) {
    float mn, mx, amax;
    if (!range_of(x, 32, &mn, &mx, &amax)) return false;
    uint16_t dh;
    if (!half_up(amax / 127.0f, &dh)) return false;
    const float d = lc_fp16_to_fp32(dh);
    put_half(b, dh);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)qround(x[j], d, -127, 127);
    return true;
}

/* ---- the K types ---------------------------------------------------------------------------- */

/* Pack the 8 six-bit scales and mins of a q4_K / q5_K block (the inverse of quant.c's
 * scale_min_k4): j < 4 in the low 6 bits of s[j] and s[j + 4]; j >= 4 as nibbles of s[j + 4]
 * with their top 2 bits in the top bits of s[j - 4] (scale) and s[j] (min). */
static void pack_scale_min_k4(const int *sc, const int *m, uint8_t *s) {
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j]     = (uint8_t)(sc[j] & 63);
        s[j + 4] = (uint8_t)(m[j] & 63);
    }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
        s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        s[j] |= (uint8_t)((m[j] >> 4) << 6);
    }
}

/* q4_K / q5_K: 8 sub-blocks of 32, y = d sc_j q - dmin m_j with q in 0..15 (0..31). Sub-block
 * j wants step range_j / levels and offset -min(0, min_j); d = max step / 63 and dmin = max
 * offset / 63 (fp16, up), sc_j and m_j the 6-bit multiples rounded up. Layout: deq_q45_k. */
static bool quant_q45_k(const float *x, uint8_t *b, bool q5) {
    const int levels = q5 ? 31 : 15;
    float     step[8], off[8], smax = 0.0f, omax = 0.0f;
    for (int j = 0; j < 8; j++) {
        float mn, mx, amax;
        if (!range_of(x + 32 * j, 32, &mn, &mx, &amax)) return false;
        if (mn > 0.0f) mn = 0.0f; /* the format's offset only lowers values */
        step[j] = (mx - mn) / (float)levels;
        off[j]  = -mn;
        smax    = fmaxf(smax, step[j]);
        omax    = fmaxf(omax, off[j]);
    }
    uint16_t dh, mh;
    if (!half_up(smax / 63.0f, &dh) || !half_up(omax / 63.0f, &mh)) return false;
    const float d = lc_fp16_to_fp32(dh), dmin = lc_fp16_to_fp32(mh);
    int         sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0.0f ? clampi((int)ceilf(step[j] / d), 0, 63) : 0;
        m[j]  = dmin > 0.0f ? clampi((int)ceilf(off[j] / dmin), 0, 63) : 0;
    }
    put_half(b, dh);
    put_half(b + 2, mh);
    pack_scale_min_k4(sc, m, b + 4);
    uint8_t *qh = b + 16, *qs = b + (q5 ? 48 : 16);
    memset(qs, 0, 128);
    if (q5) memset(qh, 0, 32);
    for (int j = 0; j < 8; j++) {
        const float dj = d * (float)sc[j], mj = dmin * (float)m[j];
        const int   c = j / 2, hi = j & 1;
        for (int l = 0; l < 32; l++) {
            const int q = qround(x[32 * j + l] + mj, dj, 0, levels);
            qs[32 * c + l] |= (uint8_t)((q & 0x0f) << (4 * hi));
            if (q5) qh[l] |= (uint8_t)(((q >> 4) & 1) << j);
        }
    }
    return true;
}

/* q6_K: 16 sub-blocks of 16, y = d sc_j (q - 32) with q in 0..63 and sc_j an int8. Sub-block
 * j wants step amax_j / 31 (so +amax fits q - 32 <= 31); d = max step / 127 (fp16, up), sc_j
 * rounded up. Layout: deq_q6_k. */
static bool quant_q6_k(const float *x, uint8_t *b) {
    float step[16], smax = 0.0f;
    for (int j = 0; j < 16; j++) {
        float mn, mx, amax;
        if (!range_of(x + 16 * j, 16, &mn, &mx, &amax)) return false;
        step[j] = amax / 31.0f;
        smax    = fmaxf(smax, step[j]);
    }
    uint16_t dh;
    if (!half_up(smax / 127.0f, &dh)) return false;
    const float d  = lc_fp16_to_fp32(dh);
    uint8_t    *ql = b, *qh = b + 128;
    int8_t     *sc = (int8_t *)(b + 192);
    memset(b, 0, 192);
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)(d > 0.0f ? clampi((int)ceilf(step[j] / d), 0, 127) : 0);
    put_half(b + 208, dh);
    for (int o = 0; o < QK_K; o++) {
        /* o = 128 h + 32 t + li: low nibble in ql[64 h + 32 (t & 1) + li] at 4 (t >> 1),
         * high 2 bits in qh[32 h + li] at 2 t */
        const int h = o / 128, t = (o % 128) / 32, li = o % 32;
        const int q = qround(x[o], d * (float)sc[o / 16], -32, 31) + 32;
        ql[64 * h + 32 * (t & 1) + li] |= (uint8_t)((q & 0x0f) << (4 * (t >> 1)));
        qh[32 * h + li] |= (uint8_t)((q >> 4) << (2 * t));
    }
    return true;
}

/* ---- entry -------------------------------------------------------------------------------- */

bool lc_quantize_supported(uint32_t type) {
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q4_1: case LC_TYPE_Q5_0: case LC_TYPE_Q5_1:
    case LC_TYPE_Q8_0: case LC_TYPE_Q4_K: case LC_TYPE_Q5_K: case LC_TYPE_Q6_K: return true;
    default: return false;
    }
}

static bool quant_block(uint32_t type, const float *x, uint8_t *b) {
    switch (type) {
    case LC_TYPE_Q4_0: return quant_q32(x, b, false, false);
    case LC_TYPE_Q4_1: return quant_q32(x, b, true, false);
    case LC_TYPE_Q5_0: return quant_q32(x, b, false, true);
    case LC_TYPE_Q5_1: return quant_q32(x, b, true, true);
    case LC_TYPE_Q8_0: return quant_q8_0(x, b);
    case LC_TYPE_Q4_K: return quant_q45_k(x, b, false);
    case LC_TYPE_Q5_K: return quant_q45_k(x, b, true);
    case LC_TYPE_Q6_K: return quant_q6_k(x, b);
    default: return false;
    }
}

int lc_quantize(uint32_t type, const float *x, void *out, int64_t n) {
    const lc_type_traits *tr = lc_type_traits_get(type);
    if (!tr || !lc_quantize_supported(type))
        return lc_fail(LC_ERR_UNSUPPORTED, "cannot quantise to %s",
                       tr ? tr->name : "an unknown type");
    if (n < 0 || n % tr->blck_size != 0 || (n && (!x || !out)))
        return lc_fail(LC_ERR_INVALID_ARG, "quantise to %s: %lld values is not a whole number of "
                       "%lld-value blocks", tr->name, (long long)n, (long long)tr->blck_size);
    const int64_t nb  = n / tr->blck_size;
    int64_t       bad = -1;
#pragma omp parallel for schedule(static) if (nb > 4096)
    for (int64_t i = 0; i < nb; i++) {
        if (!quant_block(type, x + i * tr->blck_size, (uint8_t *)out + i * (int64_t)tr->type_size)) {
#pragma omp critical(lc_quantize_bad)
            if (bad < 0 || i < bad) bad = i;
        }
    }
    if (bad >= 0)
        return lc_fail(LC_ERR_INVALID_ARG, "quantise to %s: block %lld (values %lld..%lld) is "
                       "beyond fp16's range or not finite", tr->name, (long long)bad,
                       (long long)(bad * tr->blck_size), (long long)((bad + 1) * tr->blck_size - 1));
    return LC_OK;
}
