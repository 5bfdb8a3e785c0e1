/*
 * test_matmul.c — the CPU GEMM for fp32, fp16 and GGUF block-type weights (one-pass GEMV for
 * few rows, tiles converted + OpenBLAS for many) against a double-precision reference over odd
 * shapes (block-type weights: their dequantised values, which is what --weights native
 * promises: the products of f32); the embedding lookup from fp16 and block-type tables (exact
 * rows); out-of-vocabulary ids are rejected. All of it with the run-time chosen kernels
 * (AVX-512: fused dequantise-and-dot for decode) and again with the scalar code.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_simd.h"
#include "format/quant.h"
#include "format/quantize.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static uint64_t rng = 99;

/* max |y - x·Wᵀ| over M x N, the product in double (a NaN or unwritten output: infinity) */
static double max_err_vs_reference(const float *x, const float *w, const float *y, int64_t M,
                                   int64_t N, int64_t K) {
    double max_err = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t o = 0; o < N; o++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)x[i * K + k] * w[o * K + k];
            const double e = fabs(acc - y[i * N + o]);
            if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
        }
    return max_err;
}

/* Block-type weights of every type lc_quantize writes: input rows 1..5 (the GEMV), 37 and 130
 * (the tiles), output rows that are no multiple of the 256-row tile, rows of whole blocks that
 * are no multiple of 256 values where the type's blocks are 32. */
static void test_block_types(void) {
    static const uint32_t types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1,
                                     LC_TYPE_Q8_0, LC_TYPE_Q4_K, LC_TYPE_Q5_K, LC_TYPE_Q6_K,
                                     LC_TYPE_BF16};
    static const int64_t ms[] = {1, 2, 3, 4, 5, 37, 130};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const lc_type_traits *tr = lc_type_traits_get(types[ti]);
        const int64_t K = tr->blck_size == 256 ? 768 : 544, N = 300;
        uint64_t      row_bytes = 0;
        CHECK(lc_type_row_bytes(types[ti], (uint64_t)K, &row_bytes));
        float   *w32 = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
        uint8_t *wq  = malloc((size_t)(row_bytes * (uint64_t)N));
        for (int64_t i = 0; i < N * K; i++) w32[i] = test_frand(&rng);
        if (types[ti] == LC_TYPE_BF16) {
            for (int64_t i = 0; i < N * K; i++) {
                uint32_t u;
                memcpy(&u, &w32[i], 4);
                const uint16_t h = (uint16_t)(u >> 16);
                memcpy(wq + 2 * i, &h, 2);
            }
        } else {
            CHECK(lc_quantize(types[ti], w32, wq, N * K) == LC_OK);
        }
        CHECK(lc_dequantize(types[ti], wq, wd, N * K) == LC_OK);
        const lc_weight w = {.rows = N, .cols = K, .type = types[ti], .data = wq};
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            const int64_t M = ms[mi];
            float        *x = malloc(sizeof(float) * M * K), *y = malloc(sizeof(float) * M * N);
            for (int64_t i = 0; i < M * K; i++) x[i] = test_frand(&rng);
            memset(y, 0xff, sizeof(float) * M * N);
            CHECK(lc_cpu_matmul(&w, x, y, M) == LC_OK);
            const double max_err = max_err_vs_reference(x, wd, y, M, N, K);
            CHECKF(max_err < 1e-4 * sqrt((double)K), "%s M %lld N %lld K %lld: max err %g",
                   tr->name, (long long)M, (long long)N, (long long)K, max_err);
            free(x), free(y);
        }
        int32_t ids[3] = {0, 123, (int32_t)(N - 1)};
        float  *e      = malloc(sizeof(float) * 3 * K);
        CHECK(lc_cpu_embed(&w, ids, 3, e) == LC_OK);
        for (int r = 0; r < 3; r++)
            CHECKF(memcmp(e + r * K, wd + (int64_t)ids[r] * K, sizeof(float) * K) == 0,
                   "%s embed row %d", tr->name, ids[r]);
        ids[0] = -1;
        CHECK(lc_cpu_embed(&w, ids, 3, e) == LC_ERR_INVALID_ARG);
        free(e), free(w32), free(wd), free(wq);
    }
}

/* lc_cpu_matmul_q8 (cpu-dot=q8): decode and prompt rows (37: whole and partial groups of 4
 * input rows, N = 300 a partial last tile of weight rows) over the VNNI types against the
 * product of the dequantised weights and the inputs quantised the same way (int8 per 32 values,
 * scale max|x|/127, round to nearest even), in double; the other types equal lc_cpu_matmul's.
 * Without VNNI every product is lc_cpu_matmul's. */
static void test_q8_dot(void) {
    static const uint32_t types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q8_0, LC_TYPE_Q4_K,
                                     LC_TYPE_Q6_K, LC_TYPE_Q5_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const lc_type_traits *tr = lc_type_traits_get(types[ti]);
        const int64_t K = tr->blck_size == 256 ? 768 : 544, N = 300;
        const bool    q8_type = lc_cpu_simd_vnni() && types[ti] != LC_TYPE_Q5_K;
        uint64_t      row_bytes = 0;
        CHECK(lc_type_row_bytes(types[ti], (uint64_t)K, &row_bytes));
        float   *w32 = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
        uint8_t *wq  = malloc((size_t)(row_bytes * (uint64_t)N));
        for (int64_t i = 0; i < N * K; i++) w32[i] = test_frand(&rng);
        CHECK(lc_quantize(types[ti], w32, wq, N * K) == LC_OK);
        CHECK(lc_dequantize(types[ti], wq, wd, N * K) == LC_OK);
        const lc_weight w = {.rows = N, .cols = K, .type = types[ti], .data = wq};
        static const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 37};
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int64_t M = Ms[mi];
            /* more than 4 rows (a prompt): the fp32 tiles, lc_cpu_matmul's own product */
            const bool    q8 = q8_type && M <= 4;
            float *x = malloc(sizeof(float) * M * K), *xr = malloc(sizeof(float) * M * K);
            float *y = malloc(sizeof(float) * M * N), *y0 = malloc(sizeof(float) * M * N);
            for (int64_t i = 0; i < M * K; i++) x[i] = test_frand(&rng) * (i % 7 == 0 ? 4 : 1);
            memcpy(xr, x, sizeof(float) * M * K);
            if (q8)
                for (int64_t b = 0; b < M * K / 32; b++) { /* the reference's quantised inputs */
                    float amax = 0;
                    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
                    const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
                    for (int j = 0; j < 32; j++) xr[32 * b + j] = nearbyintf(x[32 * b + j] * id) * d;
                }
            memset(y, 0xff, sizeof(float) * M * N);
            CHECK(lc_cpu_matmul_q8(&w, x, y, M) == LC_OK);
            const double max_err = max_err_vs_reference(xr, wd, y, M, N, K);
            CHECKF(max_err < 1e-4 * sqrt((double)K), "q8 dot %s M %lld: max err %g", tr->name,
                   (long long)M, max_err);
            CHECK(lc_cpu_matmul(&w, x, y0, M) == LC_OK); /* and near the exact product */
            double worst = 0;
            for (int64_t i = 0; i < M * N; i++) worst = fmax(worst, fabs((double)y[i] - y0[i]));
            CHECKF(worst < 0.05 * sqrt((double)K), "q8 dot %s M %lld: %g from the exact product",
                   tr->name, (long long)M, worst);
            if (q8) CHECKF(worst > 0, "q8 dot %s M %lld: the 8-bit path did not run",
                                      tr->name, (long long)M);
            if (!q8) CHECK(worst == 0); /* lc_cpu_matmul's own product */
            free(x), free(xr), free(y), free(y0);
        }
        free(w32), free(wd), free(wq);
    }
}

static void test_all(void) {
    test_q8_dot();
    test_block_types();
    const int64_t shapes[][3] = {{1, 577, 63}, {3, 300, 576}, {4, 1, 1536}, {5, 513, 64},
                                 {67, 257, 33}, {300, 600, 129}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int64_t M = shapes[c][0], N = shapes[c][1], K = shapes[c][2];
        float    *x = malloc(sizeof(float) * M * K), *w32 = malloc(sizeof(float) * N * K);
        float    *wr = malloc(sizeof(float) * N * K); /* fp16-rounded weights */
        uint16_t *w16 = malloc(sizeof(uint16_t) * N * K);
        float    *y = malloc(sizeof(float) * M * N);
        for (int64_t i = 0; i < M * K; i++) x[i] = test_frand(&rng);
        for (int64_t i = 0; i < N * K; i++) w32[i] = test_frand(&rng);
        lc_cpu_fp32_to_fp16_row(w32, w16, N * K);
        for (int64_t i = 0; i < N * K; i++) {
            wr[i] = lc_fp16_to_fp32(w16[i]);
            CHECK(wr[i] == lc_fp16_to_fp32(lc_fp32_to_fp16(w32[i]))); /* same rounding */
        }
        for (int pass = 0; pass < 2; pass++) {
            lc_weight w = {.rows = N, .cols = K, .type = pass ? LC_TYPE_F16 : LC_TYPE_F32,
                           .data = pass ? (void *)w16 : (void *)w32};
            const float *ref_w = pass ? wr : w32;
            memset(y, 0xff, sizeof(float) * M * N);
            CHECK(lc_cpu_matmul(&w, x, y, M) == LC_OK);
            const double max_err = max_err_vs_reference(x, ref_w, y, M, N, K);
            CHECKF(max_err < 1e-4 * sqrt((double)K), "%s M %lld N %lld K %lld: max err %g",
                   pass ? "f16" : "f32", (long long)M, (long long)N, (long long)K, max_err);
        }
        /* embedding rows from the fp16 table */
        lc_weight t    = {.rows = N, .cols = K, .type = LC_TYPE_F16, .data = w16};
        int32_t   ids[2] = {0, (int32_t)(N - 1)};
        float    *e    = malloc(sizeof(float) * 2 * K);
        CHECK(lc_cpu_embed(&t, ids, 2, e) == LC_OK);
        CHECK(memcmp(e, wr, sizeof(float) * K) == 0 && memcmp(e + K, wr + (N - 1) * K, sizeof(float) * K) == 0);
        ids[1] = (int32_t)N;
        CHECK(lc_cpu_embed(&t, ids, 2, e) == LC_ERR_INVALID_ARG);
        free(e), free(x), free(w32), free(wr), free(w16), free(y);
    }
}

/* every check with the kernels this CPU runs (AVX-512 where it has it), then with the scalar
 * code forced */
int main(void) {
    printf("test_matmul: %s kernels%s\n", lc_cpu_simd_avx512() ? "AVX-512" : "scalar",
           lc_cpu_simd_vnni() ? " + VNNI" : "");
    test_all();
    if (lc_cpu_simd_avx512()) {
        lc_cpu_simd_force_scalar(true);
        CHECK(!lc_cpu_simd_avx512());
        printf("test_matmul: scalar kernels (forced)\n");
        test_all();
        lc_cpu_simd_force_scalar(false);
    }
    TEST_END();
}
