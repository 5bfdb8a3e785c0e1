/*
 * bench_util.h — pieces the kernel benchmarks (the programs in bench/) share: error macros that print the
 * program's name (define BENCH_NAME before including), the float comparison for medians, the
 * xorshift uniforms their random inputs come from (as fp32 or as bf16 bits), and the RoPE
 * table (base 500000, Llama-3 style, adjacent pairs) uploaded to the device.
 */
#ifndef LC_BENCH_UTIL_H
#define LC_BENCH_UTIL_H

#include "model/model.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

#define TRYC(x)                                                                               \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, BENCH_NAME ": %s: %s\n", #x, cudaGetErrorString(e_));             \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)
#define TRYL(x)                                                                               \
    do {                                                                                      \
        if ((x) != LC_OK) {                                                                   \
            fprintf(stderr, BENCH_NAME ": %s: %s\n", #x, lc_last_error());                    \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

static inline int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* the next uniform in [-1, 1) of a xorshift64 state */
static inline float bench_urand(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* the bf16 bit pattern of f (truncated) */
static inline uint16_t bench_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* cos/sin for positions [0, n_pos) of head dim D (rope base 500000, no scaling) into the
 * device arrays dcs / dsn ([n_pos][D/2] floats); 0 on success */
static inline int bench_rope_upload(int64_t n_pos, int32_t D, float *dcs, float *dsn) {
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = D, hp.rope_base = 500000.0f;
    const size_t bytes = sizeof(float) * (size_t)n_pos * (size_t)(D / 2);
    float       *hc = malloc(bytes), *hs = malloc(bytes);
    int          bad = !hc || !hs || lc_rope_table_fill(&hp, NULL, (int32_t)n_pos, hc, hs) != LC_OK ||
              cudaMemcpy(dcs, hc, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
              cudaMemcpy(dsn, hs, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
    free(hc), free(hs);
    if (bad) fprintf(stderr, BENCH_NAME ": building the RoPE table failed\n");
    return bad;
}

#endif
