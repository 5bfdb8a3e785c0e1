/*
 * test_ops_cuda.c — CUDA ops vs their CPU twins (NMSE over odd shapes, fresh random inputs,
 * outputs poisoned before each run). Skips (exit 77) where no GPU is present.
 */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t rng;
static float    frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double nmse(const float *ref, const float *got, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)ref[i] - got[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

int main(void) {
    lc_backend *b;
    if (lc_backend_cuda_create(0, &b) != LC_OK) {
        fprintf(stderr, "no CUDA device: %s\n", lc_last_error());
        return 77;
    }
    rng = (uint64_t)time(NULL) | 1;
    const int64_t rows_list[] = {1, 63, 65, 4097};
    const int64_t dims[]      = {64, 576, 4096};
    for (size_t ri = 0; ri < 4; ri++)
        for (size_t di = 0; di < 3; di++) {
            const int64_t R = rows_list[ri], D = dims[di], N = R * D;
            float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N),
                  *w = malloc(sizeof(float) * D), *ref = malloc(sizeof(float) * N),
                  *got = malloc(sizeof(float) * N);
            for (int64_t i = 0; i < N; i++) x[i] = 3 * frand(), y[i] = frand();
            for (int64_t i = 0; i < D; i++) w[i] = frand();
            float *dx = b->alloc(b, sizeof(float) * N, "x"), *dy = b->alloc(b, sizeof(float) * N, "y"),
                  *dw = b->alloc(b, sizeof(float) * D, "w"), *dout = b->alloc(b, sizeof(float) * N, "out");
            CHECK(dx && dy && dw && dout);
            b->upload(b, dx, x, sizeof(float) * N);
            b->upload(b, dy, y, sizeof(float) * N);
            b->upload(b, dw, w, sizeof(float) * D);
            /* rmsnorm */
            memset(got, 0xff, sizeof(float) * N); /* poison: NaN */
            b->upload(b, dout, got, sizeof(float) * N);
            lc_cpu_rmsnorm(x, w, ref, R, D, 1e-5f);
            CHECK(lc_cuda_rmsnorm(dx, dw, dout, R, D, 1e-5f) == LC_OK && lc_cuda_sync() == LC_OK);
            b->download(b, got, dout, sizeof(float) * N);
            double e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-10, "rmsnorm rows %lld dim %lld nmse %g", (long long)R, (long long)D, e);
            /* silu_mul */
            memset(got, 0xff, sizeof(float) * N);
            b->upload(b, dout, got, sizeof(float) * N);
            lc_cpu_silu_mul(x, y, ref, N);
            CHECK(lc_cuda_silu_mul(dx, dy, dout, N) == LC_OK && lc_cuda_sync() == LC_OK);
            b->download(b, got, dout, sizeof(float) * N);
            e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-10, "silu_mul n %lld nmse %g", (long long)N, e);
            /* add and add_bias */
            memcpy(ref, x, sizeof(float) * N);
            lc_cpu_add(ref, y, N);
            lc_cpu_add_bias(ref, w, R, D);
            CHECK(lc_cuda_add(dx, dy, N) == LC_OK && lc_cuda_add_bias(dx, dw, R, D) == LC_OK &&
                  lc_cuda_sync() == LC_OK);
            b->download(b, got, dx, sizeof(float) * N);
            e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-12, "add/add_bias n %lld nmse %g", (long long)N, e);
            b->dealloc(b, dx), b->dealloc(b, dy), b->dealloc(b, dw), b->dealloc(b, dout);
            free(x), free(y), free(w), free(ref), free(got);
        }
    b->free(b);
    TEST_END();
}
