/*
 * cpu_matmul.c — y = x·Wᵀ on the CPU for weights held in fp32 or fp16 (W[out][in], as GGUF
 * stores it). fp32: OpenBLAS directly. fp16 (half the bytes a decode step streams): our own
 * GEMV for a few rows (each weight row converted and dotted with every input row in one pass,
 * fp32 accumulation), and for larger batches blocks of weight rows converted to fp32 then
 * OpenBLAS. Also the fp32 -> fp16 weight conversion used at load.
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "util/util.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

void lc_cpu_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i] = lc_fp32_to_fp16(src[i]);
}

static void fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = lc_fp16_to_fp32(src[i]);
}

/* dot of an fp16 row with an fp32 vector */
static float dot_f16(const uint16_t *w, const float *x, int64_t n) {
    int64_t i   = 0;
    float   acc = 0.0f;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                             _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                             _mm512_loadu_ps(x + i + 16), a1);
    }
    acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#endif
    for (; i < n; i++) acc += lc_fp16_to_fp32(w[i]) * x[i];
    return acc;
}

#define LC_GEMV_MAX_ROWS 4   /* up to this many input rows use the one-pass GEMV */
#define LC_F16_BLOCK_ROWS 256 /* weight rows converted per block for the GEMM path */

static int matmul_f16(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
    const int64_t N = w->rows, K = w->cols;
    const uint16_t *W = w->data;
    if (n_rows <= LC_GEMV_MAX_ROWS) {
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < N; o++)
            for (int64_t r = 0; r < n_rows; r++) y[r * N + o] = dot_f16(W + o * K, x + r * K, K);
        return LC_OK;
    }
    float *blk = malloc(sizeof(float) * (size_t)LC_F16_BLOCK_ROWS * (size_t)K);
    if (!blk) return lc_fail(LC_ERR_NOMEM, "out of memory for a weight block (%lld x %lld)",
                             (long long)LC_F16_BLOCK_ROWS, (long long)K);
    for (int64_t o0 = 0; o0 < N; o0 += LC_F16_BLOCK_ROWS) {
        const int64_t nb = N - o0 < LC_F16_BLOCK_ROWS ? N - o0 : LC_F16_BLOCK_ROWS;
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < nb; o++) fp16_to_fp32_row(W + (o0 + o) * K, blk + o * K, K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_rows, (int)nb, (int)K, 1.0f,
                    x, (int)K, blk, (int)K, 0.0f, y + o0, (int)N);
    }
    free(blk);
    return LC_OK;
}

int lc_cpu_matmul(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
    if (w->type == LC_TYPE_F16) return matmul_f16(w, x, y, n_rows);
    if (w->type != LC_TYPE_F32)
        return lc_fail(LC_ERR_INTERNAL, "cpu matmul: weight type %u not supported", w->type);
    const int M = (int)n_rows, N = (int)w->rows, K = (int)w->cols;
    if (M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w->data, K, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w->data, K,
                    0.0f, y, N);
    return LC_OK;
}

int lc_cpu_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out) {
    for (int64_t r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || ids[r] >= table->rows)
            return lc_fail(LC_ERR_INVALID_ARG, "token id %d at batch row %lld is outside the "
                           "vocabulary (0..%lld)", ids[r], (long long)r,
                           (long long)table->rows - 1);
        const int64_t off = (int64_t)ids[r] * table->cols;
        if (table->type == LC_TYPE_F16)
            fp16_to_fp32_row((const uint16_t *)table->data + off, out + r * table->cols, table->cols);
        else
            memcpy(out + r * table->cols, (const float *)table->data + off,
                   sizeof(float) * (size_t)table->cols);
    }
    return LC_OK;
}
