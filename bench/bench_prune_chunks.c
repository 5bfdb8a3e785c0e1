/*
 * bench_prune_chunks.c — the CUDA InfiniteHiP pruning stage (prune_chunks.cu) alone, on the
 * Llama-3.1-8B shape (32/8 heads, dim 128, fp16 KV in 64-token pages, random values), through
 * the three stages of the paper's `3k` preset (InfiniteHiP App. F; digest
 * spec/infinitehip-and-hip.md §3.6): stage 1 l_c 256 keeps 32768 tokens (128 chunks) of
 * [256, T-1024), stage 2 l_c 32 keeps 256 chunks of those, stage 3 l_c 8 keeps 256 chunks;
 * q_stride 4 in stages 1-2 and 1 in stage 3; one head group (n_groups 1); relative RoPE, and
 * plain RoPE at 128K (what the engine uses while the context fits the trained window). Each
 * stage runs on the previous one's output. CUDA-event timing: a warm-up, then the median (and
 * minimum) of REPEATS runs of each stage, each stage timed alone (synchronised before it, so
 * the host's launch time counts), and the median of the three stages issued back to back
 * ("chain": one event pair around them).
 *
 * usage: bench_prune_chunks [REPEATS [FILTER]] [also=SET;SET...]   (FILTER: run the cases whose
 * label contains it; also reps=N filter=TEXT; -h: bench_args.h)
 * prints one line per case: what, context, query rows, µs of stage 1/2/3, their sum, the chain
 * LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the backend's tuning (bench_util.h);
 * also="NAME=VALUE,NAME=VALUE;NAME=VALUE..." runs each case again with each ';'-separated set
 * of tuning knobs on top of it (the kernels' switches, e.g. rotate-keys=off or stage-tiles=2),
 * one line each.
 * Timing: bench_time_ops (bench_util.h) with four ops a sample (the three stages and the
 * chain, in that order, each between its own events), the same warm-ups, repetitions and units
 * as before. Changed: the environment variable LONGCTX_BENCH_ALSO is now the option also=...;
 * a bad argument is an error (exit 2); before, REPEATS < 1 read as 1.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_prune_chunks"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 8, G = 4, D = 128, P = 64, N_HEAD = H * G, B_Q = 64, N_SINK = 256, N_STREAM = 1024 };

typedef struct bench_env {
    lc_backend      *b;
    lc_kv_layer_view kv;
    lc_rope_table    rope;
    float           *dq;
    int32_t         *pages;
    int              reps;
} bench_env;

/* One case: n_rows query rows ending at position T - 1, cut into 64-row blocks. */
static int run_case(bench_env *env, const char *what, int64_t T, int32_t n_rows, int32_t mode) {
    lc_backend   *b    = env->b;
    const int32_t n_qb = (n_rows + B_Q - 1) / B_Q;
    lc_attn_seq   seq  = {0, n_rows, (int32_t)(T - n_rows), env->pages, 0};
    lc_qblock *hq  = malloc(sizeof(lc_qblock) * (size_t)n_qb);
    int32_t        max_win = 0;
    for (int32_t i = 0; i < n_qb; i++) {
        const int32_t pos0 = seq.pos0 + i * B_Q, n = n_rows - i * B_Q < B_Q ? n_rows - i * B_Q : B_Q;
        int32_t       win0 = pos0 + 1 < N_SINK ? pos0 + 1 : N_SINK;
        if (pos0 + 1 - N_STREAM > win0) win0 = pos0 + 1 - N_STREAM;
        if (win0 > max_win) max_win = win0;
        hq[i] = (lc_qblock){0, i * B_Q, n, pos0, win0};
    }
    lc_qblock *dqb = b->alloc(b, sizeof(lc_qblock) * (size_t)n_qb, "qb");
    /* stage outputs: [n_qb][n_keep] segments + counts */
    const int32_t keep[3] = {128, 256, 256}, lc[3] = {256, 32, 8}, qs[3] = {4, 4, 1};
    lc_segment   *out[3];
    int32_t      *out_n[3];
    for (int s = 0; s < 3; s++) {
        out[s]   = b->alloc(b, sizeof(lc_segment) * (size_t)n_qb * keep[s], "out");
        out_n[s] = b->alloc(b, sizeof(int32_t) * (size_t)n_qb, "out_n");
        if (!out[s] || !out_n[s]) return 1;
    }
    if (!dqb) return 1;
    TRYL(b->upload(b, dqb, hq, sizeof(lc_qblock) * (size_t)n_qb));
    lc_prune_chunks_args a[3];
    lc_rotated_keys   rk = {0}; /* the stages' rotated keys (plain RoPE), as InfiniteHiP keeps them */
    for (int s = 0; s < 3; s++) {
        memset(&a[s], 0, sizeof a[s]);
        a[s].rot = &rk;
        a[s].chunk = lc[s], a[s].n_keep = keep[s], a[s].q_stride = qs[s], a[s].n_sink = N_SINK;
        a[s].n_stream = N_STREAM, a[s].scan_rope = mode, a[s].n_groups = 1;
        a[s].max_rows = n_rows < B_Q ? n_rows : B_Q, a[s].out = out[s], a[s].out_n = out_n[s];
        if (s == 0) a[s].max_chunks = (max_win - N_SINK + lc[0] - 1) / lc[0];
        else {
            a[s].in = out[s - 1], a[s].in_n = out_n[s - 1], a[s].in_cap = keep[s - 1];
            a[s].max_chunks = keep[s - 1] * lc[s - 1] / lc[s];
        }
    }
    TRYL(b->batch_begin(b, &seq, 1, P));
    /* each stage alone, then the three back to back (the chain), in that order in every run */
    bench_opcall call[4];
    bench_op     op[4];
    bench_times  tm[4];
    for (int s = 0; s < 4; s++) {
        call[s] = (bench_opcall){b, &env->kv, &seq, dqb, n_qb, env->dq, N_HEAD, &env->rope, 0, NULL,
                                 &a[s < 3 ? s : 0], s < 3 ? 1 : 3};
        op[s]   = (bench_op){bench_call_prune_chunks, &call[s], NULL, NULL, NULL};
    }
    if (bench_time_ops((cudaStream_t)lc_cuda_stream_handle(), (bench_plan){2, env->reps, 1, false}, 4, op, tm))
        return 1;
    /* sanity: every block kept what it should */
    int32_t *hn = malloc(sizeof(int32_t) * (size_t)n_qb);
    TRYL(b->download(b, hn, out_n[2], sizeof(int32_t) * (size_t)n_qb));
    int ok = 1;
    for (int32_t i = 0; i < n_qb; i++) ok &= hn[i] == 256;
    double med[4], mn[4], tot = 0;
    for (int s = 0; s < 4; s++) {
        med[s] = 1000.0 * tm[s].median, mn[s] = 1000.0 * tm[s].min;
        if (s < 3) tot += med[s];
    }
    printf("%-14s T=%-8lld rows=%-6d blocks=%-4d | stage1 %9.1f us (min %9.1f, %d chunks) | stage2 "
           "%8.1f us (min %8.1f) | stage3 %8.1f us (min %8.1f) | total %9.1f us | chain %9.1f us%s\n",
           what, (long long)T, n_rows, n_qb, med[0], mn[0], a[0].max_chunks, med[1], mn[1], med[2],
           mn[2], tot, med[3], ok ? "" : "  (OUTPUT COUNTS WRONG)");
    fflush(stdout);
    for (int s = 0; s < 3; s++) b->dealloc(b, out[s]), b->dealloc(b, out_n[s]);
    b->dealloc(b, dqb);
    lc_rotated_keys_release(b, &rk);
    free(hq), free(hn);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    bench_env env;
    memset(&env, 0, sizeof env);
    env.reps                = 5;
    const char     *filter  = NULL, *also = "";
    const bench_opt opts[]  = {
        BENCH_OPTS_CASES(&env.reps, &filter),
        {"also", 's', &also, NULL, 0, 0, 0, false,
         "run each case again with each ';'-separated set of tuning knobs NAME=VALUE,NAME=VALUE"},
    };
    BENCH_ARGS("[REPEATS [FILTER]] [also=SET;SET...]", opts, NULL, NULL, NULL);
    const int64_t T_max = 1 << 20, n_pages = T_max / P;
    const int32_t max_rows = 32768;
    if (bench_backend(&env.b)) return 1;
    lc_backend     *b     = env.b;
    const lc_tuning tune0 = b->tuning; /* as LONGCTX_BENCH_TUNE set it */
    const size_t pool = (size_t)n_pages * H * P * D; /* fp16 elements: 2 GiB */
    void        *dk   = b->alloc(b, 2 * pool, "k");
    env.dq            = b->alloc(b, sizeof(float) * (size_t)max_rows * N_HEAD * D, "q");
    const int32_t n_pos = 131072 + 64, half = D / 2; /* plain RoPE up to 128K */
    float *dcs = b->alloc(b, sizeof(float) * n_pos * half, "cos"), *dsn = b->alloc(b, sizeof(float) * n_pos * half, "sin");
    if (!dk || !env.dq || !dcs || !dsn) {
        fprintf(stderr, "bench_prune_chunks: %s\n", lc_last_error());
        return 1;
    }
    {
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(88172645463325252ull, chunk, &h16, &h32)) return 1;
        /* shift the source window each copy so pages differ */
        for (size_t off = 0, k = 0; off < pool; off += chunk / 2, k++) {
            const size_t n = pool - off < chunk / 2 ? pool - off : chunk / 2;
            TRYC(cudaMemcpy((uint16_t *)dk + off, h16 + (k * 7919) % (chunk / 2), 2 * n, cudaMemcpyHostToDevice));
        }
        const int bad = bench_upload_repeat(env.dq, (size_t)max_rows * N_HEAD * D, h32, chunk, 4);
        free(h16), free(h32);
        if (bad) return 1;
    }
    if (bench_rope_upload(n_pos, D, dcs, dsn)) return 1;
    env.rope  = (lc_rope_table){n_pos, D, LC_ROPE_NORM, dcs, dsn, 1.0f};
    env.kv    = (lc_kv_layer_view){dk, dk, P, H, D, NULL, false, NULL};
    env.pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int64_t i = 0; i < n_pages; i++) /* scattered: a fixed odd stride through the pool */
        env.pages[i] = (int32_t)((i * 40503) % n_pages);
    struct cudaDeviceProp prop;
    TRYC(cudaGetDeviceProperties(&prop, 0));
    printf("bench_prune_chunks on %s: Llama-3.1-8B shape (32/8 heads, dim 128, fp16 KV), 3k preset, "
           "median of %d runs\n", prop.name, env.reps);
    static const struct {
        const char *what;
        int64_t     T;
        int32_t     rows, mode;
    } cases[] = {
        {"decode", 131072, 1, LC_SCAN_RELATIVE},
        {"decode", 524288, 1, LC_SCAN_RELATIVE},
        {"decode", 1048576, 1, LC_SCAN_RELATIVE},
        {"decode-plain", 131072, 1, LC_SCAN_PLAIN},
        {"prefill", 131072, 32768, LC_SCAN_RELATIVE},
        {"prefill-plain", 131072, 32768, LC_SCAN_PLAIN},
        {"prefill", 1048576, 32768, LC_SCAN_RELATIVE},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s-%lldK", cases[i].what, (long long)(cases[i].T >> 10));
        if (filter && !strstr(label, filter)) continue;
        rc |= run_case(&env, cases[i].what, cases[i].T, cases[i].rows, cases[i].mode);
        char vars[512], *sv = NULL;
        snprintf(vars, sizeof vars, "%s", also);
        for (char *set = strtok_r(vars, ";", &sv); set; set = strtok_r(NULL, ";", &sv)) {
            char what[160];
            snprintf(what, sizeof what, "%s [%s]", cases[i].what, set);
            if (!bench_tune(&b->tuning, set))
                rc |= run_case(&env, what, cases[i].T, cases[i].rows, cases[i].mode);
            else
                rc = 1;
            b->tuning = tune0;
        }
    }
    b->dealloc(b, dk), b->dealloc(b, env.dq), b->dealloc(b, dcs), b->dealloc(b, dsn);
    free(env.pages);
    b->free(b);
    return rc;
}
