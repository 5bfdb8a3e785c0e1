/*
 * bench_util.h — pieces the kernel benchmarks (the programs in bench/) share. Define
 * _POSIX_C_SOURCE 200809L before any #include and BENCH_NAME before this one.
 *  - error macros that print the program's name (TRYC: CUDA, TRYL: longctx status);
 *  - random inputs: xorshift uniforms as fp32 or fp16 bits, a host chunk of them uploaded over
 *    and over to fill large device arrays, the RoPE table (base 500000, Llama-3 style,
 *    adjacent pairs) uploaded to the device;
 *  - the one timing loop, bench_time_ops: for each sample (warm-ups first), each of a list of
 *    pieces of work in turn: an untimed `before` (e.g. batch_begin), optionally a stream
 *    synchronise, a CUDA event, `calls` calls issued back to back, an event, the wait, an
 *    untimed `after` (e.g. read the method's counters); per piece the median (upper middle),
 *    min and max device time per call and the median host time to issue a call, and optionally
 *    every sample in order (steps that differ, classed by the caller). bench_time is the plain
 *    case: one call per sample, no sync. All times in milliseconds;
 *  - the backend's attention ops as timed calls (bench_opcall + bench_call_attn_dense, ...),
 *    and one attention layer on random data (bench_layer) with the method's forward
 *    (bench_method_call) and the dense reference (bench_layer_dense_us);
 *  - the command-line parser (bench_args.h: a table of NAME=VALUE options, plain positional
 *    arguments as before, one clear line for a bad one) and option macros shared by programs;
 *  - the CUDA backend with its tuning (lc_tuning) from the benchmarks' own environment
 *    variable LONGCTX_BENCH_TUNE="NAME=VALUE,NAME=VALUE" (the names of `longctx --tune`, e.g.
 *    LONGCTX_BENCH_TUNE=sparse-pdl=off,rotate-keys=off), read only here, by bench_backend (the
 *    library reads no environment); a tuning other than the default is named on stderr.
 */
#ifndef LC_BENCH_UTIL_H
#define LC_BENCH_UTIL_H

#include "format/quant.h"
#include "model/model.h"

#include "bench_args.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#error "define _POSIX_C_SOURCE 200809L before any #include (bench_time_ops: clock_gettime)"
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

/* ---- timing: the one event loop of the bench programs ---- */

/* Times of one piece of work, in milliseconds: the device time of a sample between its two
 * CUDA events (median: the upper middle for an even count; min; max), and the median of the
 * host's time to issue it (from just after the first event is recorded to just after the last
 * call returns; per call when a sample holds several calls). */
typedef struct bench_times {
    float median, min, max, host_median;
} bench_times;

/* Issue (a piece of) the work on the stream; i: the sample, 0 .. reps - 1, negative in the
 * warm-up. 0 on success, else 1 having said why. */
typedef int (*bench_call)(void *ctx, int i);

/* One piece of work to time. */
typedef struct bench_op {
    bench_call run;     /* the timed work */
    void      *ctx;
    bench_call before;  /* optional: untimed, before the sample's first event (e.g. batch_begin) */
    bench_call after;   /* optional: untimed, once the sample is measured (e.g. read counters) */
    float     *samples; /* optional: gets the reps timed samples in the order taken (ms) */
} bench_op;

/* How to sample. */
typedef struct bench_plan {
    int  warmup; /* untimed samples first, each issued as a timed one */
    int  reps;   /* timed samples, >= 1 */
    int  calls;  /* calls of run per sample, issued back to back between the two events (how a
                    model's layers run: the host issuing ahead of the GPU); a sample is their
                    time / calls. 0 means 1 */
    bool sync;   /* synchronise the stream before each sample's first event */
} bench_plan;

static inline double bench_host_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* Time the n_ops pieces of work on stream as plan p says: for each sample (warm-up first),
 * each op in turn, as ops[o].before, [sync], event, `calls` x run, event, wait, ops[o].after;
 * each op's times into out[o]; 0 on success, else 1 having said why. */
static inline int bench_time_ops(cudaStream_t stream, bench_plan p, int n_ops, const bench_op *ops,
                                 bench_times *out) {
    const int   calls = p.calls > 0 ? p.calls : 1, reps = p.reps;
    const size_t n    = (size_t)(reps > 0 ? reps : 1) * (size_t)(n_ops > 0 ? n_ops : 1);
    float      *t = malloc(sizeof(float) * n), *h = malloc(sizeof(float) * n);
    cudaEvent_t e0 = NULL, e1 = NULL;
    int         bad = !t || !h || reps < 1 || n_ops < 1;
    if (n_ops > 0) memset(out, 0, sizeof *out * (size_t)n_ops);
    if (bad) fprintf(stderr, BENCH_NAME ": bench_time_ops: no memory, reps < 1 or no op\n");
    if (!bad && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)) {
        fprintf(stderr, BENCH_NAME ": cudaEventCreate: %s\n", cudaGetErrorString(cudaGetLastError()));
        bad = 1;
    }
    for (int i = -p.warmup; !bad && i < reps; i++)
        for (int o = 0; !bad && o < n_ops; o++) {
            const bench_op *op = &ops[o];
            if (op->before && op->before(op->ctx, i)) {
                bad = 1;
                break;
            }
            cudaError_t e = p.sync ? cudaStreamSynchronize(stream) : cudaSuccess;
            if (e == cudaSuccess) e = cudaEventRecord(e0, stream);
            const double h0 = bench_host_ms();
            for (int c = 0; e == cudaSuccess && !bad && c < calls; c++) bad = op->run(op->ctx, i) != 0;
            const double h1 = bench_host_ms();
            float        ms = 0;
            if (e == cudaSuccess && !bad) e = cudaEventRecord(e1, stream);
            if (e == cudaSuccess && !bad) e = cudaEventSynchronize(e1);
            if (e == cudaSuccess && !bad && i >= 0) e = cudaEventElapsedTime(&ms, e0, e1);
            if (e != cudaSuccess) {
                fprintf(stderr, BENCH_NAME ": timing sample %d: %s\n", i, cudaGetErrorString(e));
                bad = 1;
            }
            if (bad) break;
            if (i >= 0) {
                const size_t at = (size_t)o * (size_t)reps + (size_t)i;
                t[at] = ms / (float)calls, h[at] = (float)((h1 - h0) / calls);
                if (op->samples) op->samples[i] = t[at];
            }
            if (op->after && op->after(op->ctx, i)) bad = 1;
        }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    for (int o = 0; !bad && o < n_ops; o++) {
        float *to = t + (size_t)o * (size_t)reps, *ho = h + (size_t)o * (size_t)reps;
        out[o].median      = bench_median(to, reps); /* sorts to */
        out[o].min         = to[0], out[o].max = to[reps - 1];
        out[o].host_median = bench_median(ho, reps);
    }
    free(t), free(h);
    return bad;
}

/* One op, `calls` 1, no sync: `warmup` untimed calls, then `reps` calls each between two
 * events; 0 on success. */
static inline int bench_time(cudaStream_t stream, int warmup, int reps, bench_call call, void *ctx,
                             bench_times *out) {
    const bench_op op = {call, ctx, NULL, NULL, NULL};
    return bench_time_ops(stream, (bench_plan){warmup, reps, 1, false}, 1, &op, out);
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

/* ---- the backend's attention ops as timed calls (bench_call) ---- */

/* reps (plain argument 1) and filter (plain argument 2) of the programs that run a case table */
#define BENCH_OPTS_CASES(reps, filter)                                                        \
    {"reps", 'i', reps, NULL, 1, 1000000, 1, false, "timed runs per case"},                   \
    {"filter", 's', filter, NULL, 0, 0, 2, false, "run the cases whose label contains it"}

/* One op on one sequence: its inputs, and its argument struct (lc_select_blocks_args, ...). */
typedef struct bench_opcall {
    lc_backend             *b;
    const lc_kv_layer_view *kv;
    const lc_attn_seq      *seq;
    const lc_qblock    *qb; /* device query blocks */
    int32_t                 n_qb;
    const float            *q;
    int32_t                 n_head;
    const lc_rope_table    *rope;
    float                   scale; /* attn_* */
    float                  *out;   /* attn_* */
    const void             *args;
    int                     n_args; /* the selection ops: n_args structs from args, in turn (0: 1) */
} bench_opcall;

/* batch_begin for the sequence: untimed, as a bench_op's `before` */
static inline int bench_call_begin(void *ctx, int i) {
    const bench_opcall *c = ctx;
    TRYL(c->b->batch_begin(c->b, c->seq, 1, c->kv->page_size));
    return 0;
}
static inline int bench_call_attn_dense(void *ctx, int i) {
    const bench_opcall *c = ctx;
    TRYL(c->b->attn_dense(c->b, c->kv, c->seq, 1, c->q, c->n_head, c->rope, c->scale, c->out));
    return 0;
}
static inline int bench_call_attn_segments(void *ctx, int i) {
    const bench_opcall *c = ctx;
    TRYL(c->b->attn_segments(c->b, c->kv, c->seq, 1, c->qb, c->n_qb, c->q, c->n_head, c->rope, c->scale,
                           (const lc_attn_segments_args *)c->args, c->out));
    return 0;
}
/* the selection ops (one signature: q before RoPE, an argument struct); each call runs n_args
 * argument structs from args in turn (prune_chunks: the stages of a chain) */
#define BENCH_CALL_SELECT_OP(op, args_t)                                                       \
    static inline int bench_call_##op(void *ctx, int i) {                                      \
        const bench_opcall *c = ctx;                                                           \
        for (int k = 0; k < (c->n_args > 0 ? c->n_args : 1); k++)                              \
            TRYL(c->b->op(c->b, c->kv, c->seq, 1, c->qb, c->n_qb, c->q, c->n_head, c->rope,    \
                          (const args_t *)c->args + k));                                       \
        return 0;                                                                              \
    }
BENCH_CALL_SELECT_OP(select_blocks, lc_select_blocks_args)
BENCH_CALL_SELECT_OP(prune_chunks, lc_prune_chunks_args)
BENCH_CALL_SELECT_OP(select_tokens, lc_select_tokens_args)

/* ---- one attention layer, for the programs that run a method as the engine does ---- */

/* The options of a layer's shape (bench_args.h), plain arguments at, at + 1, at + 2, at + 3. */
#define BENCH_OPTS_SHAPE(H, G, D, keys, min_keys, at)                                         \
    {"kv_heads", 'i', H, NULL, 1, 1024, (at), true, "KV heads"},                              \
    {"group", 'i', G, NULL, 1, 64, (at) + 1, true, "query heads per KV head"},                \
    {"head_dim", 'i', D, "64|128", 0, 128, (at) + 2, true, "head dim"},                       \
    {"keys", 'l', keys, NULL, min_keys, INT32_MAX, (at) + 3, true, "context tokens"}
/* decode steps or prefill rows (plain argument at), and dense=0 */
#define BENCH_OPTS_STEPS_DENSE(n, dense, at)                                                  \
    {"steps|rows", 'i', n, NULL, 0, INT32_MAX, (at), false,                                   \
     "decode: steps (0: 256); prefill: query rows at the end of the context (0: 32768)"},     \
    {"dense", 'i', dense, NULL, 0, 1, 0, false, "0: skip the dense reference"}

/* One layer's inputs on the device: random fp16 K / V of `keys` tokens in 64-token pages behind
 * an identity page table, random q and a second q (the method's rotated query) and the output
 * for `rows` rows, the RoPE table for positions [0, keys), one sequence of `rows` rows ending at
 * position keys - 1, and the attention scale. */
typedef struct bench_layer {
    lc_backend      *b;
    int32_t          n_head, rows;
    void            *dk, *dv;
    float           *dq, *dqr, *dout, *dcs, *dsn;
    int32_t         *pages;
    lc_attn_seq      seq;
    lc_kv_layer_view kv;
    lc_rope_table    rope;
    float            scale;
} bench_layer;

static inline void bench_layer_free(bench_layer *L) {
    lc_backend *b = L->b;
    void       *d[] = {L->dk, L->dv, L->dq, L->dqr, L->dout, L->dcs, L->dsn};
    for (size_t i = 0; b && i < sizeof d / sizeof d[0]; i++)
        if (d[i]) b->dealloc(b, d[i]);
    free(L->pages);
    memset(L, 0, sizeof *L);
}

/* H KV heads of G query heads each, head dim D; 0 on success, else 1 with a message. */
static inline int bench_layer_init(bench_layer *L, lc_backend *b, int32_t H, int32_t G, int32_t D,
                                   int64_t keys, int32_t rows) {
    const int32_t P = 64;
    memset(L, 0, sizeof *L);
    L->b = b, L->n_head = H * G, L->rows = rows;
    const int64_t n_pages = (keys + P - 1) / P;
    const size_t  pool = (size_t)n_pages * H * P * D, qn = (size_t)rows * L->n_head * D, half = (size_t)D / 2;
    L->dk = b->alloc(b, 2 * pool, "k"), L->dv = b->alloc(b, 2 * pool, "v");
    L->dq = b->alloc(b, sizeof(float) * qn, "q"), L->dqr = b->alloc(b, sizeof(float) * qn, "q");
    L->dout  = b->alloc(b, sizeof(float) * qn, "out");
    L->dcs   = b->alloc(b, sizeof(float) * keys * half, "cos");
    L->dsn   = b->alloc(b, sizeof(float) * keys * half, "sin");
    L->pages = malloc(sizeof(int32_t) * n_pages);
    if (!L->dk || !L->dv || !L->dq || !L->dqr || !L->dout || !L->dcs || !L->dsn || !L->pages) {
        fprintf(stderr, BENCH_NAME ": %s\n", L->pages ? lc_last_error() : "out of host memory");
        return bench_layer_free(L), 1;
    }
    if (bench_fill_random(L->dk, pool, 1, 1) || bench_fill_random(L->dv, pool, 1, 2) ||
        bench_fill_random(L->dq, qn, 0, 3) || bench_fill_random(L->dqr, qn, 0, 4)) {
        fprintf(stderr, BENCH_NAME ": filling the inputs failed\n");
        return bench_layer_free(L), 1;
    }
    if (bench_rope_upload(keys, D, L->dcs, L->dsn)) return bench_layer_free(L), 1;
    L->rope = (lc_rope_table){(int32_t)keys, D, LC_ROPE_NORM, L->dcs, L->dsn, 1.0f};
    for (int64_t i = 0; i < n_pages; i++) L->pages[i] = (int32_t)i;
    L->seq   = (lc_attn_seq){0, rows, (int32_t)(keys - rows), L->pages, 0};
    L->kv    = (lc_kv_layer_view){L->dk, L->dv, P, H, D, NULL, false, NULL};
    L->scale = 1.0f / sqrtf((float)D);
    return 0;
}

/* an op on the whole layer (dense attention: args NULL; a sparse op: its device query blocks
 * and arguments) */
static inline bench_opcall bench_layer_opcall(bench_layer *L, const lc_qblock *dqb, const void *args) {
    return (bench_opcall){L->b, &L->kv, &L->seq, dqb, dqb ? 1 : 0, L->dq, L->n_head, &L->rope, L->scale,
                          L->dout, args, 1};
}

/* Our dense attention on the layer, the reference the methods are set against: its median in
 * µs over `reps` calls after 2 warm-ups, batch_begin before each (untimed); reps 0: 0 (the
 * reference skipped). 0 on success. */
static inline int bench_layer_dense_us(bench_layer *L, cudaStream_t stream, int reps, float *us) {
    const bench_opcall c  = bench_layer_opcall(L, NULL, NULL);
    const bench_op     op = {bench_call_attn_dense, (void *)&c, bench_call_begin, NULL, NULL};
    bench_times        tm = {0, 0, 0, 0};
    *us                   = 0;
    if (reps > 0 && bench_time_ops(stream, (bench_plan){2, reps, 1, false}, 1, &op, &tm)) return 1;
    *us = 1000.0f * tm.median;
    return 0;
}

/* The attention method on the layer: its forward as a timed call (bench_call). */
typedef struct bench_method_call {
    lc_attn_method *m;
    bench_layer    *L;
    int32_t         layer;
    void           *state;
} bench_method_call;

static inline int bench_call_forward(void *ctx, int i) {
    const bench_method_call *c         = ctx;
    bench_layer             *L         = c->L;
    void *const              states[1] = {c->state};
    const lc_attn_call       call      = {.layer  = c->layer,
                                          .kv     = &L->kv,
                                          .seqs   = &L->seq,
                                          .n_seqs = 1,
                                          .states = states,
                                          .q      = L->dq,
                                          .q_raw  = L->dqr,
                                          .n_head = L->n_head,
                                          .rope   = &L->rope,
                                          .scale  = L->scale,
                                          .out    = L->dout};
    TRYL(c->m->forward(c->m, L->b, &call));
    return 0;
}

static inline int bench_call_forward_begin(void *ctx, int i) {
    const bench_layer *L = ((const bench_method_call *)ctx)->L;
    TRYL(L->b->batch_begin(L->b, &L->seq, 1, L->kv.page_size));
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
