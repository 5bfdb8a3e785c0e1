/*
 * cpu_ops.c — elementwise and row-wise reference ops of the CPU backend: RMSNorm, bias, RoPE
 * (both pairings), SwiGLU, residual add, slab copies. (Embedding and GEMM: cpu_matmul.c.)
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "util/util.h"

#include <math.h>
#include <string.h>

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

int lc_cpu_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] += bias[i];
    return LC_OK;
}

void lc_cpu_rope_copy(const float *x, float *y, int32_t head_dim, int32_t pos,
                      const lc_rope_table *rope) {
    const int    half = rope->n_rot / 2;
    const float *c    = rope->cos + (int64_t)pos * half;
    const float *s    = rope->sin + (int64_t)pos * half;
    if (rope->pairing == LC_ROPE_NORM) {
        for (int i = 0; i < half; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            y[2 * i]     = x0 * c[i] - x1 * s[i];
            y[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
    } else {
        for (int i = 0; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            y[i]        = x0 * c[i] - x1 * s[i];
            y[i + half] = x0 * s[i] + x1 * c[i];
        }
    }
    for (int i = rope->n_rot; i < head_dim; i++) y[i] = x[i]; /* unrotated tail, if any */
}

void lc_cpu_rope_vec(float *x, int32_t pos, const lc_rope_table *rope) {
    lc_cpu_rope_copy(x, x, rope->n_rot, pos, rope);
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

int lc_cpu_copy_slabs(const void *src, void *dst, const lc_slab_copy *copies, int32_t n,
                      size_t slab_bytes) {
    if (n <= 0) return LC_OK;
    const int st = lc_copy_slabs_check(src, dst, copies, slab_bytes);
    if (st != LC_OK) return st;
#pragma omp parallel for schedule(static) if (n > 64)
    for (int32_t i = 0; i < n; i++)
        memcpy((uint8_t *)dst + (size_t)copies[i].dst * slab_bytes,
               (const uint8_t *)src + (size_t)copies[i].src * slab_bytes, slab_bytes);
    return LC_OK;
}
