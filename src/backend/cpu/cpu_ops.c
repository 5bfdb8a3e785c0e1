/*
 * cpu_ops.c — elementwise and row-wise reference ops of the CPU backend: embedding gather,
 * RMSNorm, bias, RoPE (both pairings), SwiGLU, residual add, and the dense GEMM through
 * OpenBLAS (y = x·Wᵀ with W[out][in] as GGUF stores it).
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "util/util.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

int lc_cpu_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out) {
    const float *t = table->data;
    for (int64_t r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || ids[r] >= table->rows)
            return lc_fail(LC_ERR_INVALID_ARG, "token id %d at batch row %lld is outside the "
                           "vocabulary (0..%lld)", ids[r], (long long)r,
                           (long long)table->rows - 1);
        memcpy(out + r * table->cols, t + (int64_t)ids[r] * table->cols,
               sizeof(float) * (size_t)table->cols);
    }
    return LC_OK;
}

int lc_cpu_rmsnorm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim,
                   float eps) {
#pragma omp parallel for schedule(static) if (n_rows > 16)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float       *yr = y + r * dim;
        double       ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        const float s = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * s * w[i];
    }
    return LC_OK;
}

int lc_cpu_matmul(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
    if (w->type != LC_TYPE_F32) return lc_fail(LC_ERR_INTERNAL, "cpu matmul: weight not f32");
    const int M = (int)n_rows, N = (int)w->rows, K = (int)w->cols;
    if (M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w->data, K, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w->data, K,
                    0.0f, y, N);
    return LC_OK;
}

int lc_cpu_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] += bias[i];
    return LC_OK;
}

void lc_cpu_rope_vec(float *x, int32_t pos, const lc_rope_table *rope) {
    const int    half = rope->n_rot / 2;
    const float *c    = rope->cos + (int64_t)pos * half;
    const float *s    = rope->sin + (int64_t)pos * half;
    if (rope->pairing == LC_ROPE_NORM) {
        for (int i = 0; i < half; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i]     = x0 * c[i] - x1 * s[i];
            x[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
    } else {
        for (int i = 0; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            x[i]        = x0 * c[i] - x1 * s[i];
            x[i + half] = x0 * s[i] + x1 * c[i];
        }
    }
}

int lc_cpu_rope(float *x, const int32_t *pos, int64_t n_rows, int32_t n_heads, int32_t head_dim,
                const lc_rope_table *rope) {
    for (int64_t r = 0; r < n_rows; r++) {
        if (pos[r] < 0 || pos[r] >= rope->n_pos)
            return lc_fail(LC_ERR_INVALID_ARG, "rope: position %d outside the table (0..%d)",
                           pos[r], rope->n_pos - 1);
        for (int32_t h = 0; h < n_heads; h++)
            lc_cpu_rope_vec(x + (r * n_heads + h) * head_dim, pos[r], rope);
    }
    return LC_OK;
}

int lc_cpu_silu_mul(const float *gate, const float *up, float *out, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i]        = g / (1.0f + expf(-g)) * up[i];
    }
    return LC_OK;
}

int lc_cpu_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
    return LC_OK;
}
