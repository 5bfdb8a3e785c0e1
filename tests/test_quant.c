/*
 * test_quant.c — tensor type traits, fp16/bf16 conversions and dequantisation.
 * Dequantisers are checked against fixtures made by scripts/gen_quant_fixtures.py with the
 * PyPI `gguf` package as the independent reference (file layout documented there). The
 * comparison is bit-exact: the reference computes in fp32 in the same order as ggml
 * (scale = d * sub-scale first, then scale * q, then - min or + m, no fused multiply-add) and
 * so does lc_dequantize. Conversions are checked exhaustively (all 65536 half/bf16 patterns)
 * and against a slow nearest-even reference for fp32 inputs.
 */
#include "format/quant.h"
#include "quant_fixture.h"
#include "test_util.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- fixtures --------------------------------------------------------------------------- */

static void check_fixture(const char *file, uint32_t want_type) {
    quant_fixture q;
    if (!quant_fixture_load(file, want_type, &q)) return;
    const uint32_t type = q.type, n = q.n, raw_bytes = q.raw_bytes, flags = q.flags;
    /* copy the parts to separate (exactly sized, unaligned-start) buffers for ASan */
    uint8_t *raw = malloc(raw_bytes + 1);
    memcpy(raw + 1, q.raw, raw_bytes);
    float *ref = malloc(4 * (size_t)n), *out = malloc(4 * (size_t)n);
    memcpy(ref, q.ref, 4 * (size_t)n);
    int st = lc_dequantize(type, raw + 1, out, n);
    CHECKF(st == LC_OK, "%s: %s", file, lc_last_error());
    int bad = 0;
    for (uint32_t i = 0; st == LC_OK && i < n; i++) {
        if (f2u(out[i]) != f2u(ref[i])) {
            if (bad++ < 5)
                fprintf(stderr, "%s: element %u: got %.9g (0x%08x), reference %.9g (0x%08x)\n",
                        file, i, out[i], f2u(out[i]), ref[i], f2u(ref[i]));
        }
    }
    CHECKF(bad == 0, "%s: %d of %u elements differ from the reference", file, bad, n);
    if (flags & 1) {
        /* F16/BF16: the reference's quantisation of src must equal our conversion */
        const uint8_t *src = q.src;
        int cb = 0;
        for (uint32_t i = 0; i < n; i++) {
            float s;
            memcpy(&s, src + 4 * (size_t)i, 4);
            uint16_t want = (uint16_t)(raw[1 + 2 * i] | (raw[2 + 2 * i] << 8));
            uint16_t got = type == LC_TYPE_F16 ? lc_fp32_to_fp16(s) : lc_fp32_to_bf16(s);
            if (got != want && cb++ < 5)
                fprintf(stderr, "%s: convert %.9g (0x%08x): got 0x%04x, reference 0x%04x\n", file,
                        s, f2u(s), got, want);
        }
        CHECKF(cb == 0, "%s: %d conversions differ", file, cb);
    }
    free(raw);
    free(ref);
    free(out);
    free(q.buf);
}

/* ---- conversions ------------------------------------------------------------------------ */

/* Value of a half by arithmetic (independent of the bit tricks in quant.c). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Nearest half to finite x, ties to even, by search over the ordered positive halves. */
static uint16_t ref_fp32_to_fp16(float x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff; /* largest half <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (half_value(mid) <= a)
            lo = mid;
        else
            hi = (uint16_t)(mid - 1);
    }
    uint16_t r = lo;
    if (half_value(r) != a) {
        double dl = a - half_value(r), dh = half_value((uint16_t)(r + 1)) - a;
        if (dh < dl || (dh == dl && (r & 1))) r++;
    }
    return sign | r;
}

/* Nearest bf16 to x, ties to even, by comparing distances in double; the neighbour above the
 * largest finite bf16 counts as 2^128 (IEEE overflow rounding). */
static uint16_t ref_fp32_to_bf16(float x) {
    uint32_t u = f2u(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    uint32_t sign = u & 0x80000000u, t = u & 0x7fff0000u;
    if (isinf(x)) return (uint16_t)(u >> 16);
    double a = fabs((double)x);
    double lo = (double)u2f(t);
    double hi = t + 0x10000u == 0x7f800000u ? ldexp(1.0, 128) : (double)u2f(t + 0x10000u);
    double dl = a - lo, dh = hi - a;
    if (dh < dl || (dh == dl && ((t >> 16) & 1))) t += 0x10000u;
    return (uint16_t)((sign | t) >> 16);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void check_conversions(void) {
    /* all halves: decode exactly, round-trip (non-NaN), NaN stays NaN */
    int bad_dec = 0, bad_rt = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lc_fp16_to_fp32((uint16_t)h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        bool nn = e == 31 && m != 0;
        if (nn) {
            if (!isnan(f) || !isnan(lc_fp16_to_fp32(lc_fp32_to_fp16(f)))) bad_nan++;
            continue;
        }
        double want = e == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY) : half_value((uint16_t)h);
        if ((double)f != want || !!signbit(f) != !!(h & 0x8000)) bad_dec++;
        if (lc_fp32_to_fp16(f) != h) bad_rt++;
    }
    CHECKF(bad_dec == 0, "%d halves decoded wrongly", bad_dec);
    CHECKF(bad_rt == 0, "%d halves did not round-trip", bad_rt);
    CHECKF(bad_nan == 0, "%d NaN halves lost NaN-ness", bad_nan);

    /* fp32 -> fp16 against the reference: midpoints of neighbouring halves (+-1 ulp) and
     * random bit patterns */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double mid = (half_value((uint16_t)h) + half_value((uint16_t)(h + 1))) / 2;
        float m = (float)mid;
        float c[3] = {m, nextafterf(m, 0), nextafterf(m, INFINITY)};
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++) {
                float x = s ? -c[k] : c[k];
                if (lc_fp32_to_fp16(x) != ref_fp32_to_fp16(x) && bad++ < 5)
                    fprintf(stderr, "fp16(%.9g 0x%08x): got 0x%04x want 0x%04x\n", x, f2u(x),
                            lc_fp32_to_fp16(x), ref_fp32_to_fp16(x));
            }
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = test_u32(&rng_state);
        if (i & 1) u = (u & 0x8fffffffu) | 0x30000000u; /* bias towards the fp16 range */
        float x = u2f(u);
        if (isnan(x)) {
            uint16_t r = lc_fp32_to_fp16(x);
            if (!((r & 0x7c00) == 0x7c00 && (r & 0x3ff))) bad++;
            continue;
        }
        if (lc_fp32_to_fp16(x) != ref_fp32_to_fp16(x) && bad++ < 5)
            fprintf(stderr, "fp16(%.9g 0x%08x): got 0x%04x want 0x%04x\n", x, u, lc_fp32_to_fp16(x),
                    ref_fp32_to_fp16(x));
    }
    CHECKF(bad == 0, "%d fp32->fp16 conversions differ from the reference", bad);
    CHECK(lc_fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(lc_fp32_to_fp16(65519.99f) == 0x7bff);
    CHECK(lc_fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(lc_fp32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(lc_fp32_to_fp16(0x1p-24f) == 0x0001);
    CHECK(lc_fp32_to_fp16(0x1p-25f) == 0x0000);     /* tie -> even (0) */
    CHECK(lc_fp32_to_fp16(0x1.8p-24f) == 0x0002);   /* tie -> even (2) */
    CHECK(lc_fp32_to_fp16(0x1.ffcp-15f) == 0x0400); /* tie rounds up to the smallest normal */
    CHECK(lc_fp32_to_fp16(0x1.ff8p-15f) == 0x03ff); /* the largest subnormal */
    CHECK(lc_fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(lc_fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(lc_fp16_to_fp32(0x0001) == 0x1p-24f);

    /* bf16: all patterns round-trip; fp32 -> bf16 rounds to nearest even */
    int bad_b = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lc_bf16_to_fp32((uint16_t)h);
        if (f2u(f) != h << 16) bad_b++;
        if (!isnan(f) && lc_fp32_to_bf16(f) != h) bad_b++;
        if (isnan(f) && !isnan(lc_bf16_to_fp32(lc_fp32_to_bf16(f)))) bad_b++;
    }
    for (int i = 0; i < 1000000; i++) {
        float x = u2f(test_u32(&rng_state));
        if (lc_fp32_to_bf16(x) != ref_fp32_to_bf16(x)) bad_b++;
    }
    CHECKF(bad_b == 0, "%d bf16 conversions wrong", bad_b);
    CHECK(lc_fp32_to_bf16(1.00390625f) == 0x3f80);   /* tie, even stays */
    CHECK(lc_fp32_to_bf16(1.01171875f) == 0x3f82);   /* tie, odd rounds up */
    CHECK(lc_fp32_to_bf16(3.4028235e38f) == 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(lc_fp32_to_bf16(u2f(0x7f800001u)) == 0x7fc0);
}

/* ---- traits ----------------------------------------------------------------------------- */

static void check_traits(void) {
    struct {
        uint32_t id;
        const char *name;
        int64_t blck;
        size_t size;
        bool deq;
    } want[] = {
        {0, "f32", 1, 4, true},          {1, "f16", 1, 2, true},
        {2, "q4_0", 32, 18, true},       {3, "q4_1", 32, 20, true},
        {6, "q5_0", 32, 22, true},       {7, "q5_1", 32, 24, true},
        {8, "q8_0", 32, 34, true},       {9, "q8_1", 32, 36, false},
        {10, "q2_K", 256, 84, true},     {11, "q3_K", 256, 110, true},
        {12, "q4_K", 256, 144, true},    {13, "q5_K", 256, 176, true},
        {14, "q6_K", 256, 210, true},    {15, "q8_K", 256, 292, true},
        {16, "iq2_xxs", 256, 66, false}, {20, "iq4_nl", 32, 18, false},
        {23, "iq4_xs", 256, 136, false}, {24, "i8", 1, 1, false},
        {28, "f64", 1, 8, false},        {29, "iq1_m", 256, 56, false},
        {30, "bf16", 1, 2, true},        {34, "tq1_0", 256, 54, false},
        {35, "tq2_0", 256, 66, false},   {39, "mxfp4", 32, 17, false},
        {40, "nvfp4", 64, 36, false},    {41, "q1_0", 128, 18, false},
        {42, "q2_0", 64, 18, false},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const lc_type_traits *t = lc_type_traits_get(want[i].id);
        CHECKF(t != NULL, "type %u", want[i].id);
        if (!t) continue;
        CHECKF(strcmp(t->name, want[i].name) == 0 && t->blck_size == want[i].blck &&
                   t->type_size == want[i].size && (t->to_float != NULL) == want[i].deq,
               "type %u (%s)", want[i].id, want[i].name);
        CHECK(strcmp(lc_type_name(want[i].id), want[i].name) == 0);
    }
    uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 44, 999, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(lc_type_traits_get(unknown[i]) == NULL);
        CHECK(lc_type_name(unknown[i]) == NULL);
    }
    uint64_t b;
    CHECK(lc_type_row_bytes(LC_TYPE_Q4_1, 576, &b) && b == 18 * 20);
    CHECK(lc_type_row_bytes(LC_TYPE_F32, 7, &b) && b == 28);
    CHECK(!lc_type_row_bytes(LC_TYPE_Q4_1, 33, &b));
    CHECK(!lc_type_row_bytes(4, 32, &b));
    CHECK(!lc_type_row_bytes(LC_TYPE_F32, UINT64_MAX, &b));
    CHECK(lc_type_row_bytes(LC_TYPE_Q4_K, 0, &b) && b == 0);

    float out[32];
    uint8_t in[64] = {0};
    CHECK(lc_dequantize(4, in, out, 32) == LC_ERR_INVALID_ARG);
    CHECK(lc_dequantize(16, in, out, 256) == LC_ERR_UNSUPPORTED);
    CHECK(strstr(lc_last_error(), "iq2_xxs") != NULL);
    CHECK(lc_dequantize(LC_TYPE_Q8_0, in, out, 31) == LC_ERR_INVALID_ARG);
    CHECK(lc_dequantize(LC_TYPE_Q8_0, in, out, -32) == LC_ERR_INVALID_ARG);
    CHECK(lc_dequantize(LC_TYPE_Q8_0, in, out, 0) == LC_OK);
    /* a hand-made Q8_0 block: d = 0.5, qs = -16..15 */
    in[0] = 0x00, in[1] = 0x38;
    for (int j = 0; j < 32; j++)
        in[2 + j] = (uint8_t)(int8_t)(j - 16);
    CHECK(lc_dequantize(LC_TYPE_Q8_0, in, out, 32) == LC_OK);
    int ok = 1;
    for (int j = 0; j < 32; j++)
        ok &= out[j] == 0.5f * (float)(j - 16);
    CHECK(ok);
    /* a hand-made Q4_1 block: d = 2, m = -1, nibbles j (low) and 15-j (high) */
    uint8_t q41[20] = {0x00, 0x40, 0x00, 0xbc};
    for (int j = 0; j < 16; j++)
        q41[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(lc_dequantize(LC_TYPE_Q4_1, q41, out, 32) == LC_OK);
    ok = 1;
    for (int j = 0; j < 16; j++)
        ok &= out[j] == 2.0f * j - 1 && out[16 + j] == 2.0f * (15 - j) - 1;
    CHECK(ok);
}

int main(void) {
    check_traits();
    check_conversions();
    check_fixture("f16.bin", LC_TYPE_F16);
    check_fixture("bf16.bin", LC_TYPE_BF16);
    check_fixture("q4_0.bin", LC_TYPE_Q4_0);
    check_fixture("q4_1.bin", LC_TYPE_Q4_1);
    check_fixture("q5_0.bin", LC_TYPE_Q5_0);
    check_fixture("q5_1.bin", LC_TYPE_Q5_1);
    check_fixture("q8_0.bin", LC_TYPE_Q8_0);
    check_fixture("q2_k.bin", LC_TYPE_Q2_K);
    check_fixture("q3_k.bin", LC_TYPE_Q3_K);
    check_fixture("q4_k.bin", LC_TYPE_Q4_K);
    check_fixture("q5_k.bin", LC_TYPE_Q5_K);
    check_fixture("q6_k.bin", LC_TYPE_Q6_K);
    TEST_END();
}
