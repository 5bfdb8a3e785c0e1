/*
 * attention_naive.h — the naive attention reference shared by test_attention.c (the CPU
 * kernels) and the op registry's attn_dense entry (diagnosing a GPU/CPU
 * disagreement): rotate every key with
 * its true position (lc_cpu_rope_vec), full softmax in double, weighted sum. fp32 pools.
 */
#ifndef LC_TEST_ATTENTION_NAIVE_H
#define LC_TEST_ATTENTION_NAIVE_H

#include "backend/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* naive attention of one query row (already rotated) against keys [0, n_k) of a sequence */
static inline void naive(const lc_kv_layer_view *kv, const int32_t *pages, int32_t n_k, const float *q,
                  int32_t g, const lc_rope_table *rope, float scale, float *out) {
    const int32_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
    double       *s = malloc(sizeof(double) * (size_t)n_k);
    double        mx = -INFINITY, sum = 0;
    float         kr[512];
    for (int32_t t = 0; t < n_k; t++) {
        const float *k = (const float *)kv->k + (((int64_t)pages[t / P] * H + g) * P + t % P) * D;
        memcpy(kr, k, sizeof(float) * (size_t)D);
        lc_cpu_rope_vec(kr, t, rope);
        double d = 0;
        for (int32_t i = 0; i < D; i++) d += (double)q[i] * kr[i];
        s[t] = d * scale;
        if (s[t] > mx) mx = s[t];
    }
    double acc[512] = {0};
    for (int32_t t = 0; t < n_k; t++) {
        const double p = exp(s[t] - mx);
        sum += p;
        const float *v = (const float *)kv->v + (((int64_t)pages[t / P] * H + g) * P + t % P) * D;
        for (int32_t i = 0; i < D; i++) acc[i] += p * v[i];
    }
    for (int32_t i = 0; i < D; i++) out[i] = (float)(acc[i] / sum);
    free(s);
}

#endif
