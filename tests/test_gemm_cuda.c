/*
 * test_gemm_cuda.c — the CUDA weight path against the CPU: GPU dequantisation of F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 blocks to bf16 and to f16 vs lc_dequantize rounded the
 * same way (and the host path for a K-quant), and the cuBLASLt projection y = x·Wᵀ in both
 * types vs a double-precision reference on the same 16-bit inputs, over odd row counts
 * (1, 63, 65, 4097). Fresh random
 * inputs each run; outputs poisoned first. Skips (exit 77) where no GPU is present.
 */
#include "backend/cuda/cuda.h"
#include "format/quant.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t rng;
static uint32_t u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frand(void) { return (float)((double)u32() / 4294967296.0 * 2.0 - 1.0); }

/* random block bytes with sane scales (finite fp16 d / m fields) */
/* nmse of y[n][m] against x[n][k] · W[m][k]ᵀ in double (W bf16 or f16 bits); *nan counts the
 * non-finite outputs */
static double product_nmse(const float *x, const uint16_t *wb, bool bf, int64_t m, int64_t k,
                           int64_t n, const float *y, int *nan) {
    double num = 0, den = 0;
    *nan       = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t o = 0; o < m; o++) {
            double acc = 0;
            for (int64_t i = 0; i < k; i++)
                acc += (double)x[r * k + i] *
                       (bf ? lc_bf16_to_fp32(wb[o * k + i]) : lc_fp16_to_fp32(wb[o * k + i]));
            const float gv = y[r * m + o];
            if (!isfinite(gv)) (*nan)++;
            num += (acc - gv) * (acc - gv);
            den += acc * acc;
        }
    return num / den;
}

static void random_blocks(uint32_t type, uint8_t *buf, int64_t n_elems) {
    const lc_type_traits *tr = lc_type_traits_get(type);
    const int64_t         nb = n_elems / tr->blck_size;
    for (int64_t i = 0; i < nb * (int64_t)tr->type_size; i++) buf[i] = (uint8_t)u32();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = buf + b * tr->type_size;
        if (type == LC_TYPE_F32) {
            float f = frand();
            memcpy(blk, &f, 4);
        } else if (type == LC_TYPE_F16 || type == LC_TYPE_BF16) {
            const uint16_t h = type == LC_TYPE_F16 ? lc_fp32_to_fp16(frand()) : lc_fp32_to_bf16(frand());
            memcpy(blk, &h, 2);
        } else if (type == LC_TYPE_Q6_K) {
            const uint16_t d = lc_fp32_to_fp16(0.01f * frand());
            memcpy(blk + 208, &d, 2);
        } else {
            const uint16_t d = lc_fp32_to_fp16(0.05f * frand()), m = lc_fp32_to_fp16(0.1f * frand());
            memcpy(blk, &d, 2);
            if (type == LC_TYPE_Q4_1 || type == LC_TYPE_Q5_1) memcpy(blk + 2, &m, 2);
        }
    }
}

int main(void) {
    lc_backend *b;
    REQUIRE_CUDA_BACKEND(b);
    rng = (uint64_t)time(NULL) | 1;
    printf("seed %llu\n", (unsigned long long)rng);

    /* dequantisation through the weight loader */
    const uint32_t types[] = {LC_TYPE_F32, LC_TYPE_F16, LC_TYPE_BF16, LC_TYPE_Q8_0, LC_TYPE_Q4_0,
                              LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1, LC_TYPE_Q6_K};
    const uint32_t outs[2] = {LC_TYPE_BF16, LC_TYPE_F16};
    for (int oi = 0; oi < 2; oi++)
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti], out = outs[oi];
        const bool     bf = out == LC_TYPE_BF16;
        b->weight_type     = out;
        const int64_t  rows = 37, cols = 512, n = rows * cols;
        uint64_t       row_bytes;
        CHECK(lc_type_row_bytes(type, (uint64_t)cols, &row_bytes));
        uint8_t *raw = malloc((size_t)(row_bytes * rows));
        random_blocks(type, raw, n);
        lc_gguf_tensor t = {"test", 2, {(uint64_t)cols, (uint64_t)rows, 1, 1}, type, 0,
                            row_bytes * rows, raw};
        lc_weight w;
        int       st = b->weight_load(b, &t, &w);
        CHECKF(st == LC_OK && w.type == out, "load %s: %s", lc_type_name(type), lc_last_error());
        if (st != LC_OK) {
            free(raw);
            continue;
        }
        uint16_t *got = malloc(sizeof(uint16_t) * n);
        float    *ref = malloc(sizeof(float) * n);
        b->download(b, got, w.data, sizeof(uint16_t) * n);
        CHECK(lc_dequantize(type, raw, ref, n) == LC_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float g = bf ? lc_bf16_to_fp32(got[i]) : lc_fp16_to_fp32(got[i]);
            const float r = bf ? lc_bf16_to_fp32(lc_fp32_to_bf16(ref[i]))
                               : lc_fp16_to_fp32(lc_fp32_to_fp16(ref[i]));
            /* equal after rounding, or one step apart where the GPU fused q*d + m */
            if (!(g == r || fabsf(g - r) <= fabsf(r) * (bf ? 1.0f / 128.0f : 1.0f / 1024.0f))) bad++;
        }
        CHECKF(bad == 0, "dequant %s -> %s: %lld of %lld differ", lc_type_name(type),
               bf ? "bf16" : "f16", (long long)bad, (long long)n);
        b->weight_free(b, &w);
        free(raw), free(got), free(ref);
    }

    /* GEMM */
    lc_cuda_gemm *g;
    CHECK(lc_cuda_gemm_create(&g) == LC_OK);
    const int64_t ns[] = {1, 63, 65, 4097};
    const int64_t mk[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {4096, 1024}};
    for (int oi = 0; oi < 2; oi++)
    for (size_t si = 0; si < 4; si++)
        for (size_t ni = 0; ni < 4; ni++) {
            const uint32_t ty = outs[oi];
            const bool     bf = ty == LC_TYPE_BF16;
            const int64_t m = mk[si][0], k = mk[si][1], n = ns[ni];
            if (n == 4097 && m * k > 1000000) continue; /* keep the double reference quick */
            uint16_t *wb = malloc(2 * m * k), *xb = malloc(2 * n * k);
            float    *x = malloc(sizeof(float) * n * k), *y = malloc(sizeof(float) * n * m);
            for (int64_t i = 0; i < m * k; i++) wb[i] = bf ? lc_fp32_to_bf16(frand()) : lc_fp32_to_fp16(frand());
            for (int64_t i = 0; i < n * k; i++) {
                x[i]  = 4.0f * frand();
                xb[i] = bf ? lc_fp32_to_bf16(x[i]) : lc_fp32_to_fp16(x[i]);
            }
            void  *dw = b->alloc(b, 2 * m * k, "w"), *dxb = b->alloc(b, 2 * n * k, "xb");
            float *dx = b->alloc(b, sizeof(float) * n * k, "x"), *dy = b->alloc(b, sizeof(float) * n * m, "y");
            b->upload(b, dw, wb, 2 * m * k);
            b->upload(b, dx, x, sizeof(float) * n * k);
            memset(y, 0xff, sizeof(float) * n * m);
            b->upload(b, dy, y, sizeof(float) * n * m);
            CHECK(lc_cuda_f32_to_16(dx, ty, dxb, n * k) == LC_OK);
            CHECKF(lc_cuda_gemm16(g, ty, dw, m, k, dxb, n, dy) == LC_OK, "gemm: %s", lc_last_error());
            CHECK(lc_cuda_sync() == LC_OK);
            b->download(b, y, dy, sizeof(float) * n * m);
            /* the converted input must equal the host rounding */
            uint16_t *xg = malloc(2 * n * k);
            b->download(b, xg, dxb, 2 * n * k);
            CHECKF(memcmp(xg, xb, 2 * n * k) == 0, "f32->%s conversion (%lld elements)",
                   bf ? "bf16" : "f16", (long long)(n * k));
            /* the reference multiplies what the GEMM multiplies: the rounded inputs */
            for (int64_t i = 0; i < n * k; i++) x[i] = bf ? lc_bf16_to_fp32(xb[i]) : lc_fp16_to_fp32(xb[i]);
            int          nan;
            const double e = product_nmse(x, wb, bf, m, k, n, y, &nan);
            CHECKF(nan == 0 && e < 1e-10, "gemm %s m%lld k%lld n%lld: nmse %.3g, %d non-finite",
                   bf ? "bf16" : "f16", (long long)m, (long long)k, (long long)n, e, nan);
            b->dealloc(b, dw), b->dealloc(b, dxb), b->dealloc(b, dx), b->dealloc(b, dy);
            free(wb), free(xb), free(x), free(y), free(xg);
        }
    /* decode GEMV (1-4 rows, fp32 input): odd output counts, short and long inputs */
    const int64_t gmk[][2] = {{577, 576}, {1536, 72}, {576, 1536}, {4096, 4104}, {1024, 14336}};
    for (int oi = 0; oi < 2; oi++)
        for (size_t si = 0; si < sizeof gmk / sizeof gmk[0]; si++)
            for (int64_t n = 1; n <= LC_CUDA_GEMV_MAX_ROWS; n++) {
                const uint32_t ty = outs[oi];
                const bool     bf = ty == LC_TYPE_BF16;
                const int64_t  m = gmk[si][0], k = gmk[si][1];
                uint16_t *wb = malloc(2 * m * k);
                float    *x = malloc(sizeof(float) * n * k), *y = malloc(sizeof(float) * n * m);
                for (int64_t i = 0; i < m * k; i++) wb[i] = bf ? lc_fp32_to_bf16(frand()) : lc_fp32_to_fp16(frand());
                for (int64_t i = 0; i < n * k; i++) x[i] = 4.0f * frand();
                void  *dw = b->alloc(b, 2 * m * k, "w");
                float *dx = b->alloc(b, sizeof(float) * n * k, "x"), *dy = b->alloc(b, sizeof(float) * n * m, "y");
                b->upload(b, dw, wb, 2 * m * k);
                b->upload(b, dx, x, sizeof(float) * n * k);
                memset(y, 0xff, sizeof(float) * n * m);
                b->upload(b, dy, y, sizeof(float) * n * m);
                CHECK(lc_cuda_gemv_fits(k, n, dw, dx));
                CHECKF(lc_cuda_gemv16(ty, dw, m, k, dx, n, dy) == LC_OK, "gemv: %s", lc_last_error());
                CHECK(lc_cuda_sync() == LC_OK);
                b->download(b, y, dy, sizeof(float) * n * m);
                int          nan;
                const double e = product_nmse(x, wb, bf, m, k, n, y, &nan);
                CHECKF(nan == 0 && e < 1e-12, "gemv %s m%lld k%lld n%lld: nmse %.3g, %d non-finite",
                       bf ? "bf16" : "f16", (long long)m, (long long)k, (long long)n, e, nan);
                b->dealloc(b, dw), b->dealloc(b, dx), b->dealloc(b, dy);
                free(wb), free(x), free(y);
            }
    CHECK(!lc_cuda_gemv_fits(1001, 1, NULL, NULL) && !lc_cuda_gemv_fits(1024, 5, NULL, NULL));
    lc_cuda_gemm_free(g);
    b->free(b);
    TEST_END();
}
