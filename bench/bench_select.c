/*
 * bench_select.c — one attention layer through the HiP (attn/hip.c) or TokenSelect
 * (attn/tokenselect.c) method exactly as the engine runs it (query blocks, selection op, block-
 * sparse attention, HiP's mask refresh every r_m steps, TokenSelect's selection cache), next to
 * our dense attention on the same paged bf16 K/V, timed with CUDA events (HiP paper §5.4 Table 5;
 * TokenSelect paper §4.4, Fig. 7).
 *
 * usage: bench_select decode  hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS] [KNOB=VAL..]
 *        bench_select prefill hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS ROWS [KNOB=VAL..]
 * KNOB=VAL: a method setting as --hip-KNOB / --ts-KNOB (e.g. k=2048, theta=2).
 * decode: STEPS consecutive decode steps of one sequence at KEYS context with one query (so
 *   TokenSelect's cache hits after its first step unless theta > 1); each step is timed alone
 *   and classed by whether it computed a selection (the method's counters); prints both classes'
 *   medians, the average over the steps, and dense decode's median. For TokenSelect the average
 *   at another hit rate h is h * hit + (1 - h) * miss from the two medians.
 * prefill: ROWS query rows at the end of a KEYS-token context (one chunk), medians of 3 runs.
 * RoPE: auto with a 131072-token trained context (Llama-3.1-8B): contexts past 128K re-index.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strtok_r */
#include "attn/attn.h"
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_select"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: bench_select decode|prefill hip|tokenselect N_KV_HEADS GROUP "
                        "HEAD_DIM KEYS [STEPS|ROWS] [KNOB=VAL ...]\n");
        return 2;
    }
    const int      decode = strcmp(argv[1], "decode") == 0;
    lc_attn_kind   kind;
    TRYL(lc_attn_kind_from_name(argv[2], &kind));
    const int32_t H = atoi(argv[3]), G = atoi(argv[4]), D = atoi(argv[5]);
    const int64_t keys = atoll(argv[6]);
    const int32_t arg7 = argc > 7 ? atoi(argv[7]) : (decode ? 256 : 32768);
    const int32_t P = 64, n_head = H * G, layer = 5;
    const int32_t rows = decode ? 1 : arg7;
    if ((kind != LC_ATTN_HIP && kind != LC_ATTN_TOKENSELECT) || H < 1 || G < 1 ||
        (D != 64 && D != 128) || keys < 2 || arg7 < 1 || rows > keys) {
        fprintf(stderr, "bench_select: bad arguments\n");
        return 2;
    }
    lc_context_params cp = lc_context_default_params();
    cp.attn              = kind;
    for (int i = 8; i < argc; i++) {
        char  knob[128];
        snprintf(knob, sizeof knob, "%s", argv[i]);
        char *eq = strchr(knob, '=');
        if (!eq) {
            fprintf(stderr, "bench_select: '%s' is not KNOB=VAL\n", argv[i]);
            return 2;
        }
        *eq = 0;
        TRYL(kind == LC_ATTN_HIP ? lc_hipattn_set(&cp.hipattn, knob, eq + 1)
                                 : lc_tokenselect_set(&cp.tokenselect, knob, eq + 1));
    }
    lc_backend *b;
    TRYL(lc_backend_cuda_create(0, &b));
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
    lc_attn_seq      seq = {0, rows, (int32_t)(keys - rows), pages};
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
    if (kind == LC_ATTN_HIP) lc_hipattn_describe(&cp.hipattn, desc, sizeof desc);
    else lc_tokenselect_describe(&cp.tokenselect, desc, sizeof desc);
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
        if (kind == LC_ATTN_TOKENSELECT && n_cls[0] > 0 && n_cls[1] > 0 && sel > reu) {
            /* the hit rate at which the average reaches 20x dense */
            const double h20 = (sel - dense_us / 20.0) / (sel - reu);
            printf("  20x dense needs a hit rate >= %.1f%% (h*%.1f + (1-h)*%.1f <= %.1f us)\n",
                   100.0 * h20, reu, sel, dense_us / 20.0);
        }
        free(cls[0]), free(cls[1]);
    }
    free(td), free(pages);
    m->state_free(m, state);
    lc_attn_method_free(m);
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dqr);
    b->dealloc(b, dout), b->dealloc(b, dcs), b->dealloc(b, dsn);
    b->free(b);
    return 0;
}
