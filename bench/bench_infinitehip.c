/*
 * bench_infinitehip.c — one attention layer through the InfiniteHiP method exactly as the
 * engine runs it (attn/infinitehip.c: query blocks, pruning stages, block-sparse attention,
 * stage-wise mask caching in decode; paper 000_ced830aa0d9eb0ea.txt §3.3, Table 4/19/20), next
 * to our dense attention on the same paged fp16 K/V, timed with CUDA events.
 *
 * usage: bench_infinitehip decode  N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS] [PRESET] [LAYER]
 *        bench_infinitehip prefill N_KV_HEADS GROUP HEAD_DIM KEYS ROWS [PRESET] [LAYER]
 * decode: STEPS consecutive decode steps of one sequence at KEYS context (default 256); each
 *   step is timed alone and classed by the first stage it recomputed (1 = all stages, 2 =
 *   stages 2.., ..., "none" = cached mask only); prints the average over the steps (the
 *   amortised cost of the refresh schedule), each class's median, and dense decode's median;
 *   then the average of the same schedule issued back to back (one event pair around all the
 *   steps, no wait between them — how a model's layers run, the host issuing ahead of the GPU;
 *   the step timed alone also holds the host's time to issue its first kernel). The method
 *   uploads its query blocks only when they change (once per decode step of a model, not per
 *   layer); here they never change after the first step.
 * prefill: ROWS query rows at the end of a KEYS-token context (one chunk), infinitehip vs
 *   dense, medians of 3 runs.
 * PRESET may carry knobs after '+' signs, as --hip-NAME=VALUE: "3k+heads=group+q-stride=4,4,1".
 * LAYER picks the per-layer settings (layers below first-layers use chunk-indexed RoPE and
 * first-k); default 5. RoPE: the preset's auto mode with a 131072-token trained context
 * (Llama-3.1-8B), so contexts past 128K use the re-indexing strategies.
 * Environment: LONGCTX_BENCH_DENSE=0 skips the dense reference; LONGCTX_BENCH_TUNE=
 * "NAME=VALUE,..." sets the backend's tuning (bench_util.h); LONGCTX_BENCH_ALSO=
 * "NAME=VALUE,NAME=VALUE;NAME=VALUE..." (prefill) times the method again with each
 * ';'-separated set of tuning knobs on top of it (the kernels' switches, e.g. rotate-keys=off),
 * in the same process.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "attn/infinitehip/infinitehip.h"
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_infinitehip"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: bench_infinitehip decode|prefill N_KV_HEADS GROUP HEAD_DIM KEYS "
                        "[STEPS|ROWS] [PRESET] [LAYER]\n");
        return 2;
    }
    const int     decode = strcmp(argv[1], "decode") == 0;
    const int32_t H = atoi(argv[2]), G = atoi(argv[3]), D = atoi(argv[4]);
    const int64_t keys  = atoll(argv[5]);
    const int32_t arg6  = argc > 6 ? atoi(argv[6]) : (decode ? 256 : 32768);
    const char   *preset = argc > 7 ? argv[7] : "3k";
    const int32_t layer  = argc > 8 ? atoi(argv[8]) : 5;
    const int32_t P = 64, n_head = H * G;
    const int32_t rows = decode ? 1 : arg6;
    if (H < 1 || G < 1 || (D != 64 && D != 128) || keys < 2 || arg6 < 1 || rows > keys) {
        fprintf(stderr, "bench_infinitehip: bad arguments\n");
        return 2;
    }
    lc_infinitehip_params hp_;
    {
        /* "PRESET+KEY=VALUE+..." as the settings string "preset=PRESET KEY=VALUE ..." */
        char settings[512];
        snprintf(settings, sizeof settings, "preset=%s", preset);
        for (char *c = settings; *c; c++)
            if (*c == '+') *c = ' ';
        void *parsed = NULL;
        TRYL(lc_attn_settings_parse(&lc_attn_desc_infinitehip, settings, &parsed));
        hp_ = *(const lc_infinitehip_params *)parsed;
        free(parsed);
    }
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    const lc_tuning tune0 = b->tuning; /* as LONGCTX_BENCH_TUNE set it */
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
        fprintf(stderr, "bench_infinitehip: %s\n", lc_last_error());
        return 1;
    }
    if (bench_fill_random(dk, pool, 1, 1) || bench_fill_random(dv, pool, 1, 2) || bench_fill_random(dq, qn, 0, 3) ||
        bench_fill_random(dqr, qn, 0, 4)) {
        fprintf(stderr, "bench_infinitehip: filling the inputs failed\n");
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
    TRYL(lc_attn_infinitehip_create(b, &shape, &hp_, NULL, &m));
    void *state = NULL;
    TRYL(m->state_create(m, layer, &state));
    void *const  states[1] = {state};
    cudaStream_t s         = (cudaStream_t)lc_cuda_stream_handle();
    cudaEvent_t  e0, e1;
    TRYC(cudaEventCreate(&e0));
    TRYC(cudaEventCreate(&e1));
    char desc[512];
    lc_settings_describe(&lc_attn_desc_infinitehip.settings, &hp_, desc, sizeof desc);
    printf("# %s %d/%d heads, dim %d, %lld keys, layer %d, preset %s (%s)\n",
           decode ? "decode" : "prefill", n_head, H, D, (long long)keys, layer, preset, desc);

    /* dense reference */
    const char *nd         = getenv("LONGCTX_BENCH_DENSE");
    const int   reps_dense = nd && !strcmp(nd, "0") ? 0 : (decode ? 50 : 3);
    float      *td         = malloc(sizeof(float) * (size_t)(reps_dense > arg6 ? reps_dense : arg6 + 8));
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
        const char *also = getenv("LONGCTX_BENCH_ALSO");
        char        vars[512];
        snprintf(vars, sizeof vars, "%s", also ? also : "");
        char *save = NULL, *set = NULL;
        for (int variant = 0;; variant++) {
            if (variant > 0) { /* the next ';'-separated set of NAME=VALUE */
                set = strtok_r(variant == 1 ? vars : NULL, ";", &save);
                if (!set) break;
                if (bench_tune(&b->tuning, set)) return 1;
            }
            float t[3];
            for (int i = -1; i < 3; i++) {
                TRYL(b->batch_begin(b, &seq, 1, P));
                TRYC(cudaEventRecord(e0, s));
                TRYL(m->forward(m, b, layer, &kv, &seq, 1, states, dq, dqr, n_head, &rope, scale, dout));
                TRYC(cudaEventRecord(e1, s));
                TRYC(cudaEventSynchronize(e1));
                if (i >= 0) TRYC(cudaEventElapsedTime(&t[i], e0, e1));
            }
            const float us = 1000.0f * bench_median(t, 3);
            if (variant == 0)
                printf("prefill rows %d at %lld keys: infinitehip %.1f us, dense %.1f us, speed-up %.2fx\n",
                       rows, (long long)keys, us, dense_us, dense_us / us);
            else
                printf("  with %s: infinitehip %.1f us, speed-up %.2fx\n", set, us, dense_us / us);
            b->tuning = tune0; /* the set's knobs back */
            if (!also) break;
        }
    } else {
        /* the refresh class of step i, as the method decides it (state valid after step 0) */
        const int32_t N = hp_.n_stages;
        float        *cls[LC_HIP_MAX_STAGES + 1];
        int           n_cls[LC_HIP_MAX_STAGES + 1] = {0};
        for (int c = 0; c <= N; c++) cls[c] = malloc(sizeof(float) * (size_t)arg6);
        double sum = 0;
        /* warm-up: one full refresh and a cached step, then start the count at step 0 */
        for (int i = 0; i < 2; i++) {
            TRYL(b->batch_begin(b, &seq, 1, P));
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, states, dq, dqr, n_head, &rope, scale, dout));
        }
        /* a prefill-free restart: invalidate by a fresh state */
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        void *const st2[1] = {state};
        for (int i = 0; i < arg6; i++) {
            int32_t from = N;
            for (int32_t k = 0; k < N && from == N; k++)
                if (i == 0 || i % hp_.refresh[k] == 0) from = k;
            TRYL(b->batch_begin(b, &seq, 1, P));
            TRYC(cudaEventRecord(e0, s));
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, st2, dq, dqr, n_head, &rope, scale, dout));
            TRYC(cudaEventRecord(e1, s));
            TRYC(cudaEventSynchronize(e1));
            float ms;
            TRYC(cudaEventElapsedTime(&ms, e0, e1));
            sum += ms;
            cls[from][n_cls[from]++] = 1000.0f * ms;
        }
        const double avg = 1000.0 * sum / arg6;
        printf("decode %lld keys, %d steps: infinitehip average %.1f us/step, dense %.1f us, "
               "speed-up %.2fx\n", (long long)keys, arg6, avg, dense_us, dense_us / avg);
        /* the same schedule again from a fresh state, the steps issued back to back between two
           events (as a model's layers run: the host issues ahead of the GPU, no wait per step) */
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        void *const st3[1] = {state};
        TRYL(b->batch_begin(b, &seq, 1, P));
        TRYC(cudaEventRecord(e0, s));
        for (int i = 0; i < arg6; i++)
            TRYL(m->forward(m, b, layer, &kv, &seq, 1, st3, dq, dqr, n_head, &rope, scale, dout));
        TRYC(cudaEventRecord(e1, s));
        TRYC(cudaEventSynchronize(e1));
        float ms_b2b;
        TRYC(cudaEventElapsedTime(&ms_b2b, e0, e1));
        const double avg_b2b = 1000.0 * ms_b2b / arg6;
        printf("  back to back: average %.1f us/step, speed-up %.2fx\n", avg_b2b,
               dense_us / avg_b2b);
        for (int c = 0; c <= N; c++) {
            if (c < N) printf("  steps recomputing stages %d..%d: %d, median %.1f us\n", c + 1, N,
                              n_cls[c], bench_median(cls[c], n_cls[c]));
            else printf("  steps with every stage cached: %d, median %.1f us\n", n_cls[c],
                        bench_median(cls[c], n_cls[c]));
            free(cls[c]);
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
