/*
 * bench_util.h — pieces the kernel benchmarks (the programs in bench/) share: error macros that print the
 * program's name (define BENCH_NAME before including), the float comparison for medians, the
 * xorshift uniforms their random inputs come from (as fp32 or as fp16 bits), a host chunk of
 * them uploaded over and over to fill large device arrays, the RoPE table (base 500000,
 * Llama-3 style, adjacent pairs) uploaded to the device, and the CUDA backend with its tuning
 * (lc_tuning) from the benchmarks' own variable LONGCTX_BENCH_TUNE="NAME=VALUE,NAME=VALUE"
 * (the names of `longctx --tune`, e.g. LONGCTX_BENCH_TUNE=sparse-pdl=off,rotate-keys=off;
 * read only here, by bench_backend: the library reads no environment), and the one timing loop
 * (bench_time: warm-up calls, then N calls each between two CUDA events; median, min, max).
 */
#ifndef LC_BENCH_UTIL_H
#define LC_BENCH_UTIL_H

#include "format/quant.h"
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

/* n uniforms of the xorshift stream from seed, as fp16 bits (*h16: the CUDA KV pools' element)
 * and as floats (*h32), in
 * host buffers the caller frees; 0 on success */
static inline int bench_random_chunk(uint64_t seed, size_t n, uint16_t **h16, float **h32) {
    *h16 = malloc(2 * n), *h32 = malloc(4 * n);
    if (!*h16 || !*h32) {
        free(*h16), free(*h32);
        fprintf(stderr, BENCH_NAME ": out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const float f = bench_urand(&seed);
        (*h32)[i]     = f;
        (*h16)[i]     = lc_fp32_to_fp16(f);
    }
    return 0;
}

/* fill n elements of esz bytes at device dst with src[0 .. chunk) repeated (random inputs:
 * the values do not change the speed); 0 on success */
static inline int bench_upload_repeat(void *dst, size_t n, const void *src, size_t chunk,
                                      size_t esz) {
    for (size_t off = 0; off < n; off += chunk)
        TRYC(cudaMemcpy((char *)dst + off * esz, src, esz * (n - off < chunk ? n - off : chunk),
                        cudaMemcpyHostToDevice));
    return 0;
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

static inline float bench_median(float *t, int n) {
    if (n <= 0) return 0;
    qsort(t, (size_t)n, sizeof(float), cmp_float);
    return t[n / 2];
}

/* Device times of one call, in milliseconds. */
typedef struct bench_times {
    float median, min, max;
} bench_times;

/* One timed call: issue the work on the stream; 0 on success (else 1, having said why). */
typedef int (*bench_call)(void *ctx);

/* Time call(ctx) on stream: `warmup` untimed calls, then `reps` (>= 1) calls each between two
 * CUDA events, waited for one by one; the median (the upper middle for an even count), min
 * and max into *out; 0 on success. */
static inline int bench_time(cudaStream_t stream, int warmup, int reps, bench_call call, void *ctx,
                             bench_times *out) {
    cudaEvent_t e0, e1;
    float      *t = malloc(sizeof(float) * (size_t)(reps > 0 ? reps : 1));
    int         bad = !t || reps < 1;
    if (bad) fprintf(stderr, BENCH_NAME ": bench_time: no memory or reps < 1\n");
    TRYC(cudaEventCreate(&e0));
    TRYC(cudaEventCreate(&e1));
    for (int i = -warmup; !bad && i < reps; i++) {
        bad = cudaEventRecord(e0, stream) != cudaSuccess || call(ctx) != 0 ||
              cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
              (i >= 0 && cudaEventElapsedTime(&t[i], e0, e1) != cudaSuccess);
        if (bad) fprintf(stderr, BENCH_NAME ": timed call %d failed: %s\n", i, cudaGetErrorString(cudaGetLastError()));
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    if (!bad) {
        out->median = bench_median(t, reps); /* sorts t */
        out->min = t[0], out->max = t[reps - 1];
    }
    free(t);
    return bad;
}

/* fill n device fp16 (the KV pools' element; or fp32) values with uniform [-1, 1) */
static inline int bench_fill_random(void *dst, size_t n, int f16, uint64_t seed) {
    const size_t chunk = 1 << 22;
    void        *h     = malloc(4 * chunk);
    if (!h) return 1;
    uint64_t s = seed | 1;
    for (size_t off = 0; off < n; off += chunk) {
        const size_t m = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < m; i++) {
            const float f = bench_urand(&s);
            if (f16) ((uint16_t *)h)[i] = lc_fp32_to_fp16(f);
            else ((float *)h)[i] = f;
        }
        if (cudaMemcpy((char *)dst + off * (f16 ? 2 : 4), h, m * (f16 ? 2 : 4),
                       cudaMemcpyHostToDevice) != cudaSuccess)
            return free(h), 1;
    }
    free(h);
    return 0;
}

/* Set the knobs of spec "NAME=VALUE,NAME=VALUE" (lc_tuning_set's names; NULL or "": none) in
 * *t; 0 on success, else 1 with a message. */
static inline int bench_tune(lc_tuning *t, const char *spec) {
    for (const char *p = spec; p && *p;) {
        const char *end = strchr(p, ','), *stop = end ? end : p + strlen(p);
        const char *eq  = memchr(p, '=', (size_t)(stop - p));
        char        name[64], value[64];
        if (!eq || eq - p >= (long)sizeof name || stop - eq - 1 >= (long)sizeof value) {
            fprintf(stderr, BENCH_NAME ": tuning '%.*s' is not NAME=VALUE\n", (int)(stop - p), p);
            return 1;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        snprintf(value, sizeof value, "%.*s", (int)(stop - eq - 1), eq + 1);
        if (lc_tuning_set(t, name, value) != LC_OK) {
            fprintf(stderr, BENCH_NAME ": %s\n", lc_last_error());
            return 1;
        }
        p = end ? end + 1 : stop;
    }
    return 0;
}

/* The CUDA backend (device 0) with its tuning from LONGCTX_BENCH_TUNE (a tuning other than
 * the default is named on stderr); 0 on success, else 1 with a message. */
static inline int bench_backend(lc_backend **b) {
    if (lc_backend_cuda_create(0, b) != LC_OK) {
        fprintf(stderr, BENCH_NAME ": %s\n", lc_last_error());
        return 1;
    }
    char      d[512];
    const int bad = bench_tune(&(*b)->tuning, getenv("LONGCTX_BENCH_TUNE"));
    if (!bad && lc_tuning_describe(&(*b)->tuning, d, sizeof d) != LC_OK)
        fprintf(stderr, BENCH_NAME ": %s\n", lc_last_error());
    else if (!bad) {
        if (strcmp(d, "default") != 0) fprintf(stderr, BENCH_NAME ": tuning %s\n", d);
        return 0;
    }
    (*b)->free(*b);
    *b = NULL;
    return 1;
}

#endif
