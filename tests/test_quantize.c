/*
 * test_quantize.c — fp32 to the block types (format/quantize.h), read back through
 * lc_dequantize (which test_quant.c checks bit-exactly against the PyPI `gguf` package, so
 * the layouts here are the files' layouts). For every type and several value distributions
 * (gaussian, heavy outliers, all zero, constant, one sign only, tiny and large magnitudes):
 * every value is within the bound quantize.c states for its (sub-)block — half a step, plus
 * the K types' 6-bit minimum, with the steps as stored (rounded up to fp16) — and the mean
 * squared error is near what round-to-nearest on a uniform grid gives (step^2 / 12, plus
 * dmin^2 / 3 for the K types' rounded minimum), which a misplaced bit or nibble would break by
 * orders of magnitude. Bad input: non-finite values, values past fp16's range,
 * a count that is not whole blocks, a type without a quantiser.
 */
#include "format/quant.h"
#include "format/quantize.h"
#include "test_util.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double   uni(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni())); }

enum { DIST_GAUSS, DIST_OUTLIERS, DIST_ZERO, DIST_CONST, DIST_POSITIVE, DIST_NEGATIVE, DIST_TINY,
       DIST_LARGE, N_DIST };
static const char *k_dist[N_DIST] = {"gauss", "outliers", "zero", "const", "positive",
                                     "negative", "tiny", "large"};

static void fill(float *x, int64_t n, int dist) {
    for (int64_t i = 0; i < n; i++) {
        float g = gauss();
        switch (dist) {
        case DIST_GAUSS: x[i] = 0.02f * g; break;
        case DIST_OUTLIERS: x[i] = (i % 61 == 7 ? 3.0f : 0.02f) * g; break;
        case DIST_ZERO: x[i] = 0.0f; break;
        case DIST_CONST: x[i] = -0.75f; break;
        case DIST_POSITIVE: x[i] = 0.1f + fabsf(g); break;
        case DIST_NEGATIVE: x[i] = -0.1f - fabsf(g); break;
        case DIST_TINY: x[i] = 1e-6f * g; break;
        case DIST_LARGE: x[i] = 1000.0f * g; break;
        }
    }
}

/* stats of x[0..n) */
static void stats(const float *x, int n, float *mn, float *mx, float *amax) {
    *mn = x[0], *mx = x[0], *amax = 0.0f;
    for (int j = 0; j < n; j++) {
        *mn   = fminf(*mn, x[j]);
        *mx   = fmaxf(*mx, x[j]);
        *amax = fmaxf(*amax, fabsf(x[j]));
    }
}

/* The smallest fp16 at or above v (v >= 0) and the largest at or below v: the scales
 * quantize.h stores (steps rounded up, q4_1/q5_1's minimum rounded down). */
static float up16(float v) {
    uint16_t h = lc_fp32_to_fp16(v);
    if (lc_fp16_to_fp32(h) < v) h++;
    return lc_fp16_to_fp32(h);
}
static float down16(float v) {
    uint16_t h = lc_fp32_to_fp16(v);
    if (lc_fp16_to_fp32(h) > v) h = v < 0.0f ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
    return lc_fp16_to_fp32(h);
}

/* The error bound of value i of the block at blk, its step, and the K types' minimum step
 * (dmin: the minimum is rounded up to a multiple of it, 0 for the others). */
static void bound_of(uint32_t type, const float *blk, int i, float *bound, float *step,
                     float *dmin) {
    float mn, mx, amax;
    *dmin = 0.0f;
    switch (type) {
    case LC_TYPE_Q4_0: case LC_TYPE_Q5_0: case LC_TYPE_Q8_0: {
        const float q = type == LC_TYPE_Q4_0 ? 7.0f : type == LC_TYPE_Q5_0 ? 15.0f : 127.0f;
        stats(blk, 32, &mn, &mx, &amax);
        *step  = up16(amax / q);
        *bound = *step / 2;
        return;
    }
    case LC_TYPE_Q4_1: case LC_TYPE_Q5_1: {
        const float q = type == LC_TYPE_Q4_1 ? 15.0f : 31.0f;
        stats(blk, 32, &mn, &mx, &amax);
        *step  = up16((mx - down16(mn)) / q);
        *bound = *step / 2;
        return;
    }
    case LC_TYPE_Q4_K: case LC_TYPE_Q5_K: {
        const float q = type == LC_TYPE_Q4_K ? 15.0f : 31.0f;
        float       smax = 0.0f, omax = 0.0f, sj = 0.0f;
        for (int j = 0; j < 8; j++) {
            stats(blk + 32 * j, 32, &mn, &mx, &amax);
            mn            = fminf(mn, 0.0f);
            const float s = (mx - mn) / q;
            smax          = fmaxf(smax, s);
            omax          = fmaxf(omax, -mn);
            if (j == i / 32) sj = s;
        }
        /* the sub-step is rounded up to a multiple of d (at most one d more); the minimum up
         * to a multiple of dmin, which may clip the top by at most dmin */
        *step  = sj + up16(smax / 63.0f);
        *dmin  = up16(omax / 63.0f);
        *bound = *step / 2 + *dmin;
        return;
    }
    case LC_TYPE_Q6_K: {
        float smax = 0.0f, sj = 0.0f;
        for (int j = 0; j < 16; j++) {
            stats(blk + 16 * j, 16, &mn, &mx, &amax);
            smax = fmaxf(smax, amax / 31.0f);
            if (j == i / 16) sj = amax / 31.0f;
        }
        *step  = sj + up16(smax / 127.0f);
        *bound = *step / 2;
        return;
    }
    default: *bound = *step = 0.0f;
    }
}

static const uint32_t k_types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1,
                                   LC_TYPE_Q8_0, LC_TYPE_Q4_K, LC_TYPE_Q5_K, LC_TYPE_Q6_K};

static void test_round_trip(uint32_t type, int dist) {
    const lc_type_traits *tr = lc_type_traits_get(type);
    const int64_t         bs = tr->blck_size, nb = 40, n = nb * bs;
    float                *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    uint8_t              *q = malloc(tr->type_size * (size_t)nb);
    fill(x, n, dist);
    memset(q, 0xa5, tr->type_size * (size_t)nb); /* poison: every byte must be written */
    CHECKF(lc_quantize(type, x, q, n) == LC_OK, "%s %s: %s", tr->name, k_dist[dist], lc_last_error());
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
    CHECK(lc_dequantize(type, q, y, n) == LC_OK);
    int64_t bad = 0, worst = -1;
    double  se = 0.0, se_uniform = 0.0, worst_ratio = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float bound, step, dmin;
        bound_of(type, x + (i / bs) * bs, (int)(i % bs), &bound, &step, &dmin);
        const float e = fabsf(y[i] - x[i]);
        if (!(e <= bound + 1e-30f)) {
            bad++;
            if (bound > 0 && e / bound > worst_ratio) worst_ratio = e / bound, worst = i;
            if (bound == 0 && worst < 0) worst = i;
        }
        se += (double)e * e;
        /* the K types' minimum, rounded up by up to dmin, shifts values by about dmin/2 */
        se_uniform += (double)step * step / 12.0 + (double)dmin * dmin / 3.0;
    }
    CHECKF(bad == 0, "%s %s: %lld of %lld values past their bound (worst #%lld: x %g y %g, %.2fx)",
           tr->name, k_dist[dist], (long long)bad, (long long)n, (long long)worst,
           worst >= 0 ? x[worst] : 0.0, worst >= 0 ? y[worst] : 0.0, worst_ratio);
    /* nearest rounding on the steps: squared error about step^2/12 (constant blocks can be
     * exact; clipping of the K types' top adds a little): at most 2x that */
    CHECKF(se <= 2.0 * se_uniform + 1e-30, "%s %s: mean squared error %g vs %g of a uniform grid",
           tr->name, k_dist[dist], se / (double)n, se_uniform / (double)n);
    if (dist == DIST_ZERO)
        for (int64_t i = 0; i < n; i++) CHECK(y[i] == 0.0f);
    free(x), free(y), free(q);
}

/* Determinism, block independence (a block's bytes depend on its values only) and the
 * parallel path (more than 4096 blocks) agreeing with block-by-block calls. */
static void test_blocks_independent(uint32_t type) {
    const lc_type_traits *tr = lc_type_traits_get(type);
    const int64_t         bs = tr->blck_size, nb = 5000, n = nb * bs;
    float                *x  = malloc(sizeof(float) * (size_t)n);
    uint8_t *a = malloc(tr->type_size * (size_t)nb), *b = malloc(tr->type_size * (size_t)nb);
    fill(x, n, DIST_OUTLIERS);
    CHECK(lc_quantize(type, x, a, n) == LC_OK);
    for (int64_t i = 0; i < nb; i += 1)
        CHECK(lc_quantize(type, x + i * bs, b + i * (int64_t)tr->type_size, bs) == LC_OK);
    CHECKF(memcmp(a, b, tr->type_size * (size_t)nb) == 0, "%s: whole tensor != block by block",
           tr->name);
    free(x), free(a), free(b);
}

static void test_bad_input(void) {
    float    x[256] = {0};
    uint8_t  q[512];
    CHECK(lc_quantize(LC_TYPE_Q4_K, x, q, 255) == LC_ERR_INVALID_ARG);
    CHECK(strstr(lc_last_error(), "q4_K") && strstr(lc_last_error(), "255"));
    CHECK(lc_quantize(LC_TYPE_Q8_0, x, q, 33) == LC_ERR_INVALID_ARG);
    CHECK(lc_quantize(LC_TYPE_Q8_0, x, q, 0) == LC_OK);
    CHECK(lc_quantize(LC_TYPE_Q2_K, x, q, 256) == LC_ERR_UNSUPPORTED);
    CHECK(lc_quantize(LC_TYPE_F16, x, q, 256) == LC_ERR_UNSUPPORTED);
    CHECK(lc_quantize(999, x, q, 256) == LC_ERR_UNSUPPORTED);
    CHECK(!lc_quantize_supported(LC_TYPE_Q3_K) && lc_quantize_supported(LC_TYPE_Q6_K));
    for (size_t t = 0; t < sizeof k_types / sizeof k_types[0]; t++) {
        const lc_type_traits *tr = lc_type_traits_get(k_types[t]);
        /* 1e9: every type's scale would be past fp16's 65504 */
        const float bad_vals[3] = {NAN, INFINITY, 1e9f};
        for (int k = 0; k < 3; k++) {
            float v[256] = {0};
            v[tr->blck_size - 1] = bad_vals[k];
            const int st = lc_quantize(k_types[t], v, q, tr->blck_size);
            CHECKF(st == LC_ERR_INVALID_ARG && strstr(lc_last_error(), "block 0"),
                   "%s value %g: %d %s", tr->name, bad_vals[k], st, lc_last_error());
        }
    }
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    for (size_t t = 0; t < sizeof k_types / sizeof k_types[0]; t++) {
        for (int d = 0; d < N_DIST; d++) test_round_trip(k_types[t], d);
        test_blocks_independent(k_types[t]);
    }
    test_bad_input();
    TEST_END();
}
