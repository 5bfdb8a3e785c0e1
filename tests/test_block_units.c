/*
 * test_block_units.c — the unit arithmetic of the GPU's products over block-type weights
 * (src/backend/block_units.h, inlined by cuda/weights_blocks.cu) run on the CPU, where CI can:
 *   - the runs of the units cover every element of a row exactly once;
 *   - bu_dequant equals the PyPI `gguf` package's dequantisation bit for bit (the fixtures of
 *     test_quant, scripts/gen_quant_fixtures.py) and lc_dequantize on random blocks;
 *   - bu_dot (the shifted-mantissa sums with fp32 inputs) matches a double-precision dot
 *     product of the dequantised row within 2e-5 of sum |w x|, on rows of odd block counts
 *     (k = 17 x 32, 3 x 256) and on inputs with a large common offset (the cancellation case).
 */
#include "backend/block_units.h"
#include "format/quant.h"
#include "quant_fixture.h"
#include "random_blocks.h"
#include "test_util.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t k_types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1,
                                   LC_TYPE_Q8_0, LC_TYPE_Q4_K, LC_TYPE_Q5_K, LC_TYPE_Q6_K};

static bool k_type(uint32_t t) { return t == LC_TYPE_Q4_K || t == LC_TYPE_Q5_K || t == LC_TYPE_Q6_K; }

static void check_cover(uint32_t type, int64_t cols) {
    const int     ue = bu_unit_elems(type);
    const int64_t units = cols / ue;
    char         *seen = calloc((size_t)cols, 1);
    int           bad = 0;
    for (int64_t u = 0; u < units; u++)
        for (int j = 0; j < ue / 16; j++)
            for (int i = 0; i < 16; i++) {
                const int64_t p = bu_run_pos(type, u, j) + i;
                if (p < 0 || p >= cols || seen[p]++) bad++;
            }
    for (int64_t p = 0; p < cols; p++) bad += seen[p] != 1;
    CHECKF(bad == 0 && units * ue == cols, "type %u: runs cover a row of %lld badly (%d)", type, (long long)cols, bad);
    free(seen);
}

/* dequantise a whole row through the units */
static void units_dequant(uint32_t type, const uint8_t *row, int64_t cols, float *out) {
    const int ue = bu_unit_elems(type);
    float     v[64];
    for (int64_t u = 0; u < cols / ue; u++) {
        bu_dequant(type, row, u, v);
        for (int j = 0; j < ue / 16; j++)
            for (int i = 0; i < 16; i++) out[bu_run_pos(type, u, j) + i] = v[16 * j + i];
    }
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* the gguf package's values (test_quant's fixtures, quant_fixture.h) */
static void check_fixture(const char *file, uint32_t type) {
    quant_fixture q;
    if (!quant_fixture_load(file, type, &q)) return;
    float *ref = malloc(4 * (size_t)q.n), *got = malloc(4 * (size_t)q.n);
    memcpy(ref, q.ref, 4 * (size_t)q.n);
    units_dequant(type, q.raw, q.n, got);
    int bad = 0;
    for (uint32_t i = 0; i < q.n; i++) bad += f2u(got[i]) != f2u(ref[i]);
    CHECKF(bad == 0, "%s: %d of %u values differ from the gguf package's", file, bad, q.n);
    free(q.buf), free(ref), free(got);
}

static void check_type(uint64_t *rng, uint32_t type) {
    const int64_t         cols = k_type(type) ? 3 * 256 : 17 * 32;
    const lc_type_traits *tr = lc_type_traits_get(type);
    const int64_t         rb = cols / tr->blck_size * tr->type_size;
    check_cover(type, cols);
    uint8_t *row = malloc((size_t)rb);
    float   *ref = malloc(sizeof(float) * (size_t)cols), *got = malloc(sizeof(float) * (size_t)cols);
    float   *x = malloc(sizeof(float) * (size_t)cols);
    int      bad_deq = 0, bad_dot = 0;
    double   worst = 0;
    for (int trial = 0; trial < 40; trial++) {
        test_random_blocks(rng, type, row, cols);
        CHECK(lc_dequantize(type, row, ref, cols) == LC_OK);
        units_dequant(type, row, cols, got);
        for (int64_t i = 0; i < cols; i++) bad_deq += f2u(got[i]) != f2u(ref[i]);
        /* inputs: plain, then with a common offset 8x their spread (sum x large against sum q x) */
        const float offset = trial % 2 ? 8.0f : 0.0f;
        for (int64_t i = 0; i < cols; i++) x[i] = offset + test_frand(rng);
        const int ue = bu_unit_elems(type);
        float     xv[64], xs[4], sum = 0.f;
        for (int64_t u = 0; u < cols / ue; u++) {
            bu_load_x(type, x, u, xv, xs);
            sum += bu_dot(type, row, u, xv, xs);
        }
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < cols; i++) exact += (double)ref[i] * x[i], mag += fabs((double)ref[i] * x[i]);
        const double err = fabs(sum - exact) / (mag > 0 ? mag : 1);
        if (err > worst) worst = err;
        if (!(err <= 2e-5)) bad_dot++;
    }
    CHECKF(bad_deq == 0, "type %s: %d dequantised values differ from lc_dequantize", tr->name, bad_deq);
    CHECKF(bad_dot == 0, "type %s: %d of 40 dot products off (worst %.3g of sum |w x|)", tr->name, bad_dot, worst);
    fprintf(stderr, "%-5s k=%-4lld dot: worst error %.2g of sum |w x|\n", tr->name, (long long)cols, worst);
    free(row), free(ref), free(got), free(x);
}

int main(void) {
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        CHECK(bu_type_ok(k_types[i]));
        check_type(&rng, k_types[i]);
    }
    /* types the GPU does not read as blocks */
    CHECK(!bu_type_ok(LC_TYPE_Q2_K) && !bu_type_ok(LC_TYPE_Q3_K) && !bu_type_ok(LC_TYPE_F16) &&
          !bu_type_ok(LC_TYPE_Q8_K) && !bu_type_ok(LC_TYPE_BF16));
    check_fixture("q4_0.bin", LC_TYPE_Q4_0);
    check_fixture("q4_1.bin", LC_TYPE_Q4_1);
    check_fixture("q5_0.bin", LC_TYPE_Q5_0);
    check_fixture("q5_1.bin", LC_TYPE_Q5_1);
    check_fixture("q8_0.bin", LC_TYPE_Q8_0);
    check_fixture("q4_k.bin", LC_TYPE_Q4_K);
    check_fixture("q5_k.bin", LC_TYPE_Q5_K);
    check_fixture("q6_k.bin", LC_TYPE_Q6_K);
    TEST_END();
}
