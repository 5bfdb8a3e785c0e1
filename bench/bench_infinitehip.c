/*
 * bench_infinitehip.c — one attention layer through the InfiniteHiP method exactly as the
 * engine runs it (attn/infinitehip.c: query blocks, pruning stages, block-sparse attention,
 * stage-wise mask caching in decode; paper 000_ced830aa0d9eb0ea.txt §3.3, Table 4/19/20), next
 * to our dense attention on the same paged fp16 K/V, timed with CUDA events.
 *
 * usage: bench_infinitehip decode  N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS] [PRESET] [LAYER] [KNOB=VALUE..]
 *        bench_infinitehip prefill N_KV_HEADS GROUP HEAD_DIM KEYS ROWS [PRESET] [LAYER] [KNOB=VALUE..]
 * (each also as NAME=VALUE: mode, kv_heads, group, head_dim, keys, steps|rows, preset, layer;
 * and dense=0 (skip the dense reference), also="SET;SET" (below); -h lists them: bench_args.h)
 * decode: STEPS consecutive decode steps of one sequence at KEYS context (default 256); each
 *   step is timed alone and classed by the first stage it recomputed (1 = all stages, 2 =
 *   stages 2.., ..., "none" = cached mask only); prints the average over the steps (the
 *   amortised cost of the refresh schedule), each class's median, and dense decode's median
 *   (of 50, after 2 warm-ups); then the average of the same schedule issued back to back (one
 *   event pair around all the steps, no wait between them — how a model's layers run, the host
 *   issuing ahead of the GPU; the step timed alone also holds the host's time to issue its
 *   first kernel). The method uploads its query blocks only when they change (once per decode
 *   step of a model, not per layer); here they never change after the first step.
 * prefill: ROWS query rows at the end of a KEYS-token context (one chunk), infinitehip vs
 *   dense, medians of 3 runs after a warm-up; also="NAME=VALUE,NAME=VALUE;NAME=VALUE..." times
 *   the method again with each ';'-separated set of tuning knobs on top of it (the kernels'
 *   switches, e.g. rotate-keys=off), in the same process.
 * PRESET may carry knobs after '+' signs, as --hip-NAME=VALUE: "3k+heads=group+q-stride=4,4,1";
 * KNOB=VALUE arguments (names not in the table above) add more.
 * LAYER picks the per-layer settings (layers below first-layers use chunk-indexed RoPE and
 * first-k); default 5. RoPE: the preset's auto mode with a 131072-token trained context
 * (Llama-3.1-8B), so contexts past 128K use the re-indexing strategies.
 * Timing: bench_time_ops (bench_util.h), the same warm-ups, repetitions and units as before.
 * Changed: the environment variables LONGCTX_BENCH_DENSE=0 and LONGCTX_BENCH_ALSO are now the
 * options dense=0 and also=...; a bad argument is an error (exit 2) instead of atoi's 0.
 * LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the backend's tuning (bench_util.h).
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, clock_gettime (bench_util.h) */
#include "attn/infinitehip/infinitehip.h"
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_infinitehip"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "KEY=VALUE" arguments past the table: method settings appended to the preset's */
static int add_knob(void *ctx, const char *arg) {
    char *settings = ctx;
    const size_t at = strlen(settings);
    return snprintf(settings + at, 512 - at, " %s", arg) >= (int)(512 - at);
}

int main(int argc, char **argv) {
    int         mode = 0, H = 0, G = 0, D = 0, n = 0, layer = 5, dense = 1;
    int64_t     keys = 0;
    const char *preset = "3k", *also = "";
    char        knobs[512] = "";
    const bench_opt opts[] = {
        {"mode", 'c', &mode, "decode|prefill", 0, 0, 1, true, "decode steps or one prefill chunk"},
        BENCH_OPTS_SHAPE(&H, &G, &D, &keys, 2, 2),
        BENCH_OPTS_STEPS_DENSE(&n, &dense, 6),
        {"preset", 's', &preset, NULL, 0, 0, 7, false, "InfiniteHiP preset, knobs after '+' as --hip-NAME=VALUE"},
        {"layer", 'i', &layer, NULL, 0, 31, 8, false, "the layer whose settings apply (of 32)"},
        {"also", 's', &also, NULL, 0, 0, 0, false,
         "prefill: again with each ';'-separated set of tuning knobs NAME=VALUE,NAME=VALUE"},
    };
    BENCH_ARGS("decode|prefill KV_HEADS GROUP HEAD_DIM KEYS [STEPS|ROWS] [PRESET] [LAYER] [KNOB=VALUE ...] "
               "[NAME=VALUE ...]",
               opts, add_knob, knobs, "KNOB=VALUE: an InfiniteHiP setting on top of the preset");
    const int     decode = mode == 0;
    const int32_t n_head = H * G, arg6 = n ? n : (decode ? 256 : 32768);
    const int32_t rows = decode ? 1 : arg6;
    if (rows > keys) {
        fprintf(stderr, BENCH_NAME ": rows=%d > keys=%lld\n", rows, (long long)keys);
        return 2;
    }
    lc_infinitehip_params hp_;
    {
        /* "PRESET+KEY=VALUE+..." and the KNOB=VALUE arguments as the settings string "preset=PRESET KEY=VALUE ..." */
        char settings[1100];
        snprintf(settings, sizeof settings, "preset=%s%s", preset, knobs);
        for (char *c = settings; *c; c++)
            if (*c == '+') *c = ' ';
        void *parsed = NULL;
        if (lc_attn_settings_parse(&lc_attn_desc_infinitehip, settings, &parsed) != LC_OK) {
            fprintf(stderr, BENCH_NAME ": %s; the options of " BENCH_NAME ": ", lc_last_error());
            bench_args_names(stderr, opts, (int)(sizeof opts / sizeof opts[0]), NULL);
            fprintf(stderr, "\n");
            return 2;
        }
        hp_ = *(const lc_infinitehip_params *)parsed;
        free(parsed);
    }
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    const lc_tuning tune0 = b->tuning; /* as LONGCTX_BENCH_TUNE set it */
    bench_layer     L;
    if (bench_layer_init(&L, b, H, G, D, keys, rows)) return 1;
    const lc_attn_shape shape = {32, n_head, H, D, 131072};
    lc_attn_method     *m     = NULL;
    TRYL(lc_attn_infinitehip_create(b, &shape, &hp_, NULL, &m));
    void *state = NULL;
    TRYL(m->state_create(m, layer, &state));
    cudaStream_t s = (cudaStream_t)lc_cuda_stream_handle();
    char         desc[512];
    lc_settings_describe(&lc_attn_desc_infinitehip.settings, &hp_, desc, sizeof desc);
    printf("# %s %d/%d heads, dim %d, %lld keys, layer %d, preset %s (%s)\n",
           decode ? "decode" : "prefill", n_head, H, D, (long long)keys, layer, preset, desc);

    /* dense reference */
    float dense_us = 0;
    if (bench_layer_dense_us(&L, s, dense ? (decode ? 50 : 3) : 0, &dense_us)) return 1;

    bench_method_call call = {m, &L, layer, state};
    if (!decode) {
        char vars[512];
        snprintf(vars, sizeof vars, "%s", also);
        char *save = NULL, *set = NULL;
        for (int variant = 0;; variant++) {
            if (variant > 0) { /* the next ';'-separated set of NAME=VALUE */
                set = strtok_r(variant == 1 ? vars : NULL, ";", &save);
                if (!set) break;
                if (bench_tune(&b->tuning, set)) return 1;
            }
            const bench_op op = {bench_call_forward, &call, bench_call_forward_begin, NULL, NULL};
            bench_times    tm;
            if (bench_time_ops(s, (bench_plan){1, 3, 1, false}, 1, &op, &tm)) return 1;
            const float us = 1000.0f * tm.median;
            if (variant == 0)
                printf("prefill rows %d at %lld keys: infinitehip %.1f us, dense %.1f us, speed-up %.2fx\n",
                       rows, (long long)keys, us, dense_us, dense_us / us);
            else
                printf("  with %s: infinitehip %.1f us, speed-up %.2fx\n", set, us, dense_us / us);
            b->tuning = tune0; /* the set's knobs back */
        }
    } else {
        /* the refresh class of step i, as the method decides it (state valid after step 0) */
        const int32_t N = hp_.n_stages;
        float        *cls[LC_HIP_MAX_STAGES + 1];
        int           n_cls[LC_HIP_MAX_STAGES + 1] = {0};
        float        *steps = malloc(sizeof(float) * (size_t)arg6);
        for (int c = 0; c <= N; c++) cls[c] = malloc(sizeof(float) * (size_t)arg6);
        /* warm-up: one full refresh and a cached step, then start the count at step 0 */
        for (int i = 0; i < 2; i++)
            if (bench_call_forward_begin(&call, i) || bench_call_forward(&call, i)) return 1;
        /* a prefill-free restart: invalidate by a fresh state */
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        call.state = state;
        /* each step timed alone, in order; the steps differ (the refresh schedule) */
        const bench_op op = {bench_call_forward, &call, bench_call_forward_begin, NULL, steps};
        bench_times    tm;
        if (bench_time_ops(s, (bench_plan){0, arg6, 1, false}, 1, &op, &tm)) return 1;
        double sum = 0;
        for (int i = 0; i < arg6; i++) {
            int32_t from = N;
            for (int32_t k = 0; k < N && from == N; k++)
                if (i == 0 || i % hp_.refresh[k] == 0) from = k;
            sum += steps[i];
            cls[from][n_cls[from]++] = 1000.0f * steps[i];
        }
        const double avg = 1000.0 * sum / arg6;
        printf("decode %lld keys, %d steps: infinitehip average %.1f us/step, dense %.1f us, "
               "speed-up %.2fx\n", (long long)keys, arg6, avg, dense_us, dense_us / avg);
        /* the same schedule again from a fresh state, the steps issued back to back between two
           events (as a model's layers run: the host issues ahead of the GPU, no wait per step) */
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        call.state = state;
        const bench_op b2b = {bench_call_forward, &call, bench_call_forward_begin, NULL, NULL}; /* one batch_begin */
        if (bench_time_ops(s, (bench_plan){0, 1, arg6, false}, 1, &b2b, &tm)) return 1;
        const double avg_b2b = 1000.0 * tm.median;
        printf("  back to back: average %.1f us/step, speed-up %.2fx\n", avg_b2b,
               dense_us / avg_b2b);
        for (int c = 0; c <= N; c++) {
            if (c < N) printf("  steps recomputing stages %d..%d: %d, median %.1f us\n", c + 1, N,
                              n_cls[c], bench_median(cls[c], n_cls[c]));
            else printf("  steps with every stage cached: %d, median %.1f us\n", n_cls[c],
                        bench_median(cls[c], n_cls[c]));
            free(cls[c]);
        }
        free(steps);
    }
    m->state_free(m, state);
    lc_attn_method_free(m);
    bench_layer_free(&L);
    b->free(b);
    return 0;
}
