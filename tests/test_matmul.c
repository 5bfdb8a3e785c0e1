/*
 * test_matmul.c — the CPU GEMM for fp32 and fp16 weights (one-pass GEMV for few rows, blocked
 * conversion + OpenBLAS for many) against a double-precision reference over odd shapes; the
 * fp16 embedding lookup; out-of-vocabulary ids are rejected.
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static uint64_t rng = 99;

int main(void) {
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
            lc_weight w = {N, K, pass ? LC_TYPE_F16 : LC_TYPE_F32, pass ? (void *)w16 : (void *)w32};
            const float *ref_w = pass ? wr : w32;
            memset(y, 0xff, sizeof(float) * M * N);
            CHECK(lc_cpu_matmul(&w, x, y, M) == LC_OK);
            double max_err = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t o = 0; o < N; o++) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) acc += (double)x[i * K + k] * ref_w[o * K + k];
                    const double e = fabs(acc - y[i * N + o]);
                    if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
                }
            CHECKF(max_err < 1e-4 * sqrt((double)K), "%s M %lld N %lld K %lld: max err %g",
                   pass ? "f16" : "f32", (long long)M, (long long)N, (long long)K, max_err);
        }
        /* embedding rows from the fp16 table */
        lc_weight t    = {N, K, LC_TYPE_F16, w16};
        int32_t   ids[2] = {0, (int32_t)(N - 1)};
        float    *e    = malloc(sizeof(float) * 2 * K);
        CHECK(lc_cpu_embed(&t, ids, 2, e) == LC_OK);
        CHECK(memcmp(e, wr, sizeof(float) * K) == 0 && memcmp(e + K, wr + (N - 1) * K, sizeof(float) * K) == 0);
        ids[1] = (int32_t)N;
        CHECK(lc_cpu_embed(&t, ids, 2, e) == LC_ERR_INVALID_ARG);
        free(e), free(x), free(w32), free(wr), free(w16), free(y);
    }
    TEST_END();
}
