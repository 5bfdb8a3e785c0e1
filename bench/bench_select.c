/*
 * bench_select.c — one attention layer through the HiP (attn/hip.c) or TokenSelect
 * (attn/tokenselect.c) method exactly as the engine runs it (query blocks, selection op, block-
 * sparse attention, HiP's mask refresh every r_m steps, TokenSelect's selection cache), next to
 * our dense attention on the same paged fp16 K/V, timed with CUDA events (HiP paper §5.4 Table 5;
 * TokenSelect paper §4.4, Fig. 7).
 *
 * usage: bench_select decode  hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS] [KNOB=VAL..]
 *        bench_select prefill hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS ROWS [KNOB=VAL..]
 * KNOB=VAL: a method setting as --hip-KNOB / --ts-KNOB (e.g. k=2048, theta=2).
 * decode: STEPS consecutive decode steps of one sequence at KEYS context with one query (so
 *   TokenSelect's cache hits after its first step unless theta > 1); each step is timed alone
 *   and classed by whether it computed a selection (the method's counters); prints both classes'
 *   medians, the average over the steps, and dense decode's median. For TokenSelect the average
 *   at another hit rate h is h * hit + (1 - h) * miss from the two medians. Then, for TokenSelect,
 *   where a hit step's time goes: the method's forward, the query block's upload, ts_select (a
 *   hit) and attn_sparse each alone on the backend's ops (GPU time between events and the host's
 *   time to issue them, medians of 30), and attn_sparse over the same number of tokens as 8-token
 *   runs and as one run (what the selection's many 1-token segments cost).
 * prefill: ROWS query rows at the end of a KEYS-token context (one chunk), medians of 3 runs.
 * RoPE: auto with a 131072-token trained context (Llama-3.1-8B): contexts past 128K re-index.
 * Environment: LONGCTX_BENCH_DENSE=0 skips the dense reference; LONGCTX_BENCH_TUNE=
 * "NAME=VALUE,..." sets the backend's tuning (bench_util.h).
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, clock_gettime */
#include "attn/tokenselect/tokenselect.h"
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_select"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

/* What a piece of work costs: the median over REPS runs (each after a synchronise) of the GPU
 * time between two events around it and of the host's time to issue it. */
typedef int (*piece_fn)(void *ctx);
static int time_piece(const char *name, piece_fn fn, void *ctx, cudaStream_t s, cudaEvent_t e0,
                      cudaEvent_t e1) {
    enum { REPS = 30 };
    float gpu[REPS], host[REPS];
    for (int i = -3; i < REPS; i++) {
        TRYC(cudaStreamSynchronize(s));
        TRYC(cudaEventRecord(e0, s));
        const double h0 = now_us();
        if (fn(ctx)) return 1;
        const double h1 = now_us();
        TRYC(cudaEventRecord(e1, s));
        TRYC(cudaEventSynchronize(e1));
        if (i >= 0) {
            TRYC(cudaEventElapsedTime(&gpu[i], e0, e1));
            gpu[i] *= 1000.0f, host[i] = (float)(h1 - h0);
        }
    }
    printf("  %-58s GPU %7.1f us, host issue %7.1f us\n", name, bench_median(gpu, REPS),
           bench_median(host, REPS));
    return 0;
}

/* The pieces of a TokenSelect decode step (hit), each alone on the backend's ops. */
typedef struct ts_pieces {
    lc_attn_method    *m;
    lc_backend        *b;
    void              *state;
    lc_kv_layer_view  *kv;
    lc_attn_seq       *seq;
    const float       *dq, *dqr;
    float             *dout;
    int32_t            n_head;
    lc_rope_table     *rope;
    float              scale;
    lc_hip_qblock      hqb;
    lc_hip_qblock     *dqb;
    lc_ts_select_args  sa;
    lc_hip_sparse_args aa;
} ts_pieces;

static int piece_forward(void *c) {
    ts_pieces  *x         = c;
    void *const states[1] = {x->state};
    if (x->m->forward(x->m, x->b, 5, x->kv, x->seq, 1, states, x->dq, x->dqr, x->n_head, x->rope,
                      x->scale, x->dout) != LC_OK)
        return fprintf(stderr, "bench_select: %s\n", lc_last_error()), 1;
    return 0;
}
static int piece_upload(void *c) {
    ts_pieces *x = c;
    int (*up)(lc_backend *, void *, const void *, size_t) = x->b->upload_async ? x->b->upload_async
                                                                              : x->b->upload;
    return up(x->b, x->dqb, &x->hqb, sizeof x->hqb) != LC_OK;
}
static int piece_select(void *c) {
    ts_pieces *x = c;
    return x->b->ts_select(x->b, x->kv, x->seq, 1, x->dqb, 1, x->dqr, x->n_head, x->rope, &x->sa) != LC_OK;
}
static int piece_sparse(void *c) {
    ts_pieces *x = c;
    return x->b->attn_sparse(x->b, x->kv, x->seq, 1, x->dqb, 1, x->dq, x->n_head, x->rope, x->scale,
                             &x->aa, x->dout) != LC_OK;
}
static int piece_select_sparse(void *c) { return piece_select(c) || piece_sparse(c); }
static int piece_all_ops(void *c) { return piece_upload(c) || piece_select(c) || piece_sparse(c); }

static int ts_breakdown(ts_pieces *x, int64_t keys, const lc_tokenselect_params *tp, cudaStream_t s,
                        cudaEvent_t e0, cudaEvent_t e1) {
    lc_backend   *b = x->b;
    const int32_t k = tp->k, pos0 = (int32_t)keys - 1;
    int32_t       win0 = pos0 + 1 - tp->n_local;
    if (win0 < (tp->n_init < pos0 + 1 ? tp->n_init : pos0 + 1)) win0 = tp->n_init < pos0 + 1 ? tp->n_init : pos0 + 1;
    x->hqb = (lc_hip_qblock){0, 0, 1, pos0, win0};
    const int32_t nf = x->n_head * x->kv->head_dim;
    x->dqb           = b->alloc(b, sizeof(lc_hip_qblock), "qb");
    lc_hip_seg *sel  = b->alloc(b, sizeof(lc_hip_seg) * (size_t)k, "sel");
    int32_t    *seln = b->alloc(b, sizeof(int32_t), "sel_n");
    float      *cq   = b->alloc(b, sizeof(float) * (size_t)nf, "cache_q");
    int32_t    *cv   = b->alloc(b, sizeof(int32_t), "cache_valid");
    lc_hip_seg *syn  = malloc(sizeof(lc_hip_seg) * (size_t)k);
    if (!x->dqb || !sel || !seln || !cq || !cv || !syn) return fprintf(stderr, "bench_select: out of memory\n"), 1;
    const int32_t zero = 0;
    TRYL(b->upload(b, x->dqb, &x->hqb, sizeof x->hqb));
    TRYL(b->upload(b, cv, &zero, sizeof zero));
    memset(&x->sa, 0, sizeof x->sa);
    x->sa.n_init = tp->n_init, x->sa.k = k, x->sa.fp_pos = tp->n_local, x->sa.gqa_mod = tp->gqa_mod;
    x->sa.max_rows = 1, x->sa.max_cand = win0 - tp->n_init, x->sa.out_cap = k;
    x->sa.out = sel, x->sa.out_n = seln, x->sa.cache_q = cq, x->sa.cache_valid = cv, x->sa.theta = 2.0f;
    TRYL(piece_select(x)); /* a miss: the selection and a valid cache */
    x->sa.theta = -1.0f;   /* then every call hits */
    memset(&x->aa, 0, sizeof x->aa);
    x->aa.n_sink = tp->n_init, x->aa.n_groups = 1, x->aa.sel_cap = k, x->aa.max_sel = k;
    x->aa.attn_rope  = keys > 131072 ? LC_HIP_ATTN_STREAMING : LC_HIP_ATTN_PLAIN;
    x->aa.max_rows   = 1, x->aa.max_window = pos0 + 1 - win0;
    x->aa.sel = sel, x->aa.sel_n = seln;
    int32_t n_seg = 0;
    TRYL(b->download(b, &n_seg, seln, sizeof n_seg));
    printf("# hit-step pieces at %lld keys (selection: %d segments for %d tokens; sink %d, window %d)\n",
           (long long)keys, n_seg, k, tp->n_init, pos0 + 1 - win0);
    int rc = time_piece("method forward (a cache hit)", piece_forward, x, s, e0, e1);
    rc |= time_piece("upload of the query block (20 bytes)", piece_upload, x, s, e0, e1);
    rc |= time_piece("ts_select, a hit", piece_select, x, s, e0, e1);
    rc |= time_piece("attn_sparse over that selection", piece_sparse, x, s, e0, e1);
    rc |= time_piece("ts_select hit + attn_sparse", piece_select_sparse, x, s, e0, e1);
    rc |= time_piece("upload + ts_select hit + attn_sparse", piece_all_ops, x, s, e0, e1);
    /* the same number of tokens as 8-token runs and as one run (segment count vs cost) */
    const int32_t cand = win0 - tp->n_init;
    for (int len = 8; len <= k && cand >= k; len = len == 8 ? k : k + 1) {
        const int32_t ns = k / len;
        for (int32_t i = 0; i < ns; i++)
            syn[i] = (lc_hip_seg){tp->n_init + (int32_t)((int64_t)i * (cand - len) / (ns > 1 ? ns - 1 : 1)), len};
        TRYL(b->upload(b, sel, syn, sizeof(lc_hip_seg) * (size_t)ns));
        TRYL(b->upload(b, seln, &ns, sizeof ns));
        char name[96];
        snprintf(name, sizeof name, "attn_sparse over %d segments of %d tokens", ns, len);
        rc |= time_piece(name, piece_sparse, x, s, e0, e1);
    }
    b->dealloc(b, x->dqb), b->dealloc(b, sel), b->dealloc(b, seln), b->dealloc(b, cq), b->dealloc(b, cv);
    free(syn);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: bench_select decode|prefill hip|tokenselect N_KV_HEADS GROUP "
                        "HEAD_DIM KEYS [STEPS|ROWS] [KNOB=VAL ...]\n");
        return 2;
    }
    const int      decode = strcmp(argv[1], "decode") == 0;
    const char    *kind   = argv[2];
    const bool     is_ts  = !strcmp(kind, "tokenselect");
    const int32_t H = atoi(argv[3]), G = atoi(argv[4]), D = atoi(argv[5]);
    const int64_t keys = atoll(argv[6]);
    const int32_t arg7 = argc > 7 ? atoi(argv[7]) : (decode ? 256 : 32768);
    const int32_t P = 64, n_head = H * G, layer = 5;
    const int32_t rows = decode ? 1 : arg7;
    if ((strcmp(kind, "hip") && !is_ts) || H < 1 || G < 1 ||
        (D != 64 && D != 128) || keys < 2 || arg7 < 1 || rows > keys) {
        fprintf(stderr, "bench_select: bad arguments\n");
        return 2;
    }
    lc_context_params cp = lc_context_default_params();
    cp.attn              = kind;
    char settings[1024]  = "";
    for (int i = 8, at = 0; i < argc; i++) { /* the KNOB=VAL arguments as a settings string */
        if (!strchr(argv[i], '=')) {
            fprintf(stderr, "bench_select: '%s' is not KNOB=VAL\n", argv[i]);
            return 2;
        }
        at += snprintf(settings + at, sizeof settings - (size_t)at, "%s%s", at ? " " : "", argv[i]);
        if (at >= (int)sizeof settings) {
            fprintf(stderr, "bench_select: too many knobs\n");
            return 2;
        }
    }
    cp.attn_settings = settings;
    lc_tokenselect_params tsp = {0}; /* TokenSelect's settings, for the breakdown */
    if (is_ts) {
        void *parsed = NULL;
        TRYL(lc_attn_settings_parse(&lc_attn_desc_tokenselect, settings, &parsed));
        tsp = *(const lc_tokenselect_params *)parsed;
        free(parsed);
    }
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    const int64_t n_pages = (keys + P - 1) / P;
    const size_t  pool    = (size_t)n_pages * H * P * D;
    void         *dk = b->alloc(b, 2 * pool, "k"), *dv = b->alloc(b, 2 * pool, "v");
    const size_t  qn = (size_t)rows * n_head * D;
    float        *dq = b->alloc(b, sizeof(float) * qn, "q"), *dqr = b->alloc(b, sizeof(float) * qn, "q");
    float        *dout = b->alloc(b, sizeof(float) * qn, "out");
    const size_t  half = (size_t)D / 2;
    float        *dcs = b->alloc(b, sizeof(float) * keys * half, "cos");
    float        *dsn = b->alloc(b, sizeof(float) * keys * half, "sin");
    if (!dk || !dv || !dq || !dqr || !dout || !dcs || !dsn) {
        fprintf(stderr, "bench_select: %s\n", lc_last_error());
        return 1;
    }
    if (bench_fill_random(dk, pool, 1, 1) || bench_fill_random(dv, pool, 1, 2) || bench_fill_random(dq, qn, 0, 3) ||
        bench_fill_random(dqr, qn, 0, 4)) {
        fprintf(stderr, "bench_select: filling the inputs failed\n");
        return 1;
    }
    if (bench_rope_upload(keys, D, dcs, dsn)) return 1;
    lc_rope_table    rope = {(int32_t)keys, D, LC_ROPE_NORM, dcs, dsn, 1.0f};
    int32_t         *pages = malloc(sizeof(int32_t) * n_pages);
    for (int64_t i = 0; i < n_pages; i++) pages[i] = (int32_t)i;
    lc_attn_seq      seq = {0, rows, (int32_t)(keys - rows), pages, 0};
    lc_kv_layer_view kv  = {dk, dv, P, H, D};
    const float      scale = 1.0f / sqrtf((float)D);
    const lc_attn_shape shape = {32, n_head, H, D, 131072};
    lc_attn_method     *m     = NULL;
    TRYL(lc_attn_create(b, &shape, &cp, &m));
    void *state = NULL;
    TRYL(m->state_create(m, layer, &state));
    cudaStream_t s = (cudaStream_t)lc_cuda_stream_handle();
    cudaEvent_t  e0, e1;
    TRYC(cudaEventCreate(&e0));
    TRYC(cudaEventCreate(&e1));
    char desc[512];
    TRYL(lc_attn_check(kind, settings, desc, sizeof desc));
    printf("# %s %s %d/%d heads, dim %d, %lld keys, layer %d (%s)\n", decode ? "decode" : "prefill",
           argv[2], n_head, H, D, (long long)keys, layer, desc);

    const char *nd         = getenv("LONGCTX_BENCH_DENSE");
    const int   reps_dense = nd && !strcmp(nd, "0") ? 0 : (decode ? 50 : 3);
    float      *td         = malloc(sizeof(float) * (size_t)(reps_dense > arg7 ? reps_dense : arg7 + 8));
    for (int i = reps_dense > 0 ? -2 : 0; i < reps_dense; i++) {
        TRYL(b->batch_begin(b, &seq, 1, P));
        TRYC(cudaEventRecord(e0, s));
        TRYL(b->attn_dense(b, &kv, &seq, 1, dq, n_head, &rope, scale, dout));
        TRYC(cudaEventRecord(e1, s));
        TRYC(cudaEventSynchronize(e1));
        if (i >= 0) TRYC(cudaEventElapsedTime(&td[i], e0, e1));
    }
    const float dense_us = 1000.0f * bench_median(td, reps_dense);
    if (!decode) {
        float t[3];
        for (int i = -1; i < 3; i++) {
            void *const states[1] = {state};
            TRYL(b->batch_begin(b, &seq, 1, P));
            TRYC(cudaEventRecord(e0, s));
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, states, dq, dqr, n_head, &rope, scale, dout));
            TRYC(cudaEventRecord(e1, s));
            TRYC(cudaEventSynchronize(e1));
            if (i >= 0) TRYC(cudaEventElapsedTime(&t[i], e0, e1));
        }
        const float us = 1000.0f * bench_median(t, 3);
        printf("prefill rows %d at %lld keys: %s %.1f us, dense %.1f us, speed-up %.2fx\n", rows,
               (long long)keys, argv[2], us, dense_us, dense_us / us);
    } else {
        float *cls[2];
        int    n_cls[2] = {0, 0};
        cls[0] = malloc(sizeof(float) * (size_t)arg7), cls[1] = malloc(sizeof(float) * (size_t)arg7);
        double sum = 0;
        for (int i = 0; i < 2; i++) { /* warm-up, then a fresh state */
            void *const states[1] = {state};
            TRYL(b->batch_begin(b, &seq, 1, P));
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, states, dq, dqr, n_head, &rope, scale, dout));
        }
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        void *const   st2[1] = {state};
        lc_attn_stats before, after;
        TRYL(m->stats(m, &before));
        for (int i = 0; i < arg7; i++) {
            TRYL(b->batch_begin(b, &seq, 1, P));
            TRYC(cudaEventRecord(e0, s));
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, st2, dq, dqr, n_head, &rope, scale, dout));
            TRYC(cudaEventRecord(e1, s));
            TRYC(cudaEventSynchronize(e1));
            float ms;
            TRYC(cudaEventElapsedTime(&ms, e0, e1));
            sum += ms;
            TRYL(m->stats(m, &after));
            const int c = after.selected > before.selected ? 0 : 1;
            before      = after;
            cls[c][n_cls[c]++] = 1000.0f * ms;
        }
        const double avg = 1000.0 * sum / arg7;
        const float  sel = bench_median(cls[0], n_cls[0]), reu = bench_median(cls[1], n_cls[1]);
        printf("decode %lld keys, %d steps: %s average %.1f us/step, dense %.1f us, speed-up %.2fx\n",
               (long long)keys, arg7, argv[2], avg, dense_us, dense_us / avg);
        printf("  steps computing a selection: %d, median %.1f us; reusing one: %d, median %.1f us\n",
               n_cls[0], sel, n_cls[1], reu);
        if (is_ts && n_cls[0] > 0 && n_cls[1] > 0 && sel > reu) {
            /* the hit rate at which the average reaches 20x dense */
            const double h20 = (sel - dense_us / 20.0) / (sel - reu);
            printf("  20x dense needs a hit rate >= %.1f%% (h*%.1f + (1-h)*%.1f <= %.1f us)\n",
                   100.0 * h20, reu, sel, dense_us / 20.0);
        }
        free(cls[0]), free(cls[1]);
        if (is_ts) { /* where a hit step's time goes */
            ts_pieces x;
            memset(&x, 0, sizeof x);
            x.m = m, x.b = b, x.state = state, x.kv = &kv, x.seq = &seq, x.dq = dq, x.dqr = dqr;
            x.dout = dout, x.n_head = n_head, x.rope = &rope, x.scale = scale;
            if (ts_breakdown(&x, keys, &tsp, s, e0, e1)) return 1;
        }
    }
    free(td), free(pages);
    m->state_free(m, state);
    lc_attn_method_free(m);
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dqr);
    b->dealloc(b, dout), b->dealloc(b, dcs), b->dealloc(b, dsn);
    b->free(b);
    return 0;
}
