/*
 * bench_select_blocks.c — the CUDA HiP mask estimation (select_blocks.cu) alone, on the Llama-3.1-8B
 * shape (32/8 heads, dim 128, fp16 KV in 64-token pages behind a scattered page table, random
 * values; HiP paper 004_b4c89dd3429c70a1.txt §3, digest spec/infinitehip-and-hip.md §1.3,
 * §1.10): block_k 2, sink 256, window 1024.
 *   decode:  one row at T = 128K / 512K / 1M, k 512 and 2048, n_groups 8 (per KV head) and 1,
 *            relative RoPE (out of the trained window) and plain RoPE;
 *   prefill: 32K rows ending at T = 32K / 128K in blocks of 32 (b_sq 1), k 512 and 2048,
 *            n_groups 8, relative RoPE.
 * CUDA-event timing around the whole op (its init and per-iteration launches): two warm-ups,
 * then the median and minimum of REPEATS runs.
 *
 * usage: bench_select_blocks [REPEATS [FILTER [RESULTS.md]]]   FILTER: cases whose label contains it
 * (also reps=N filter=TEXT out=PATH; -h: bench_args.h; a bad argument is an error, exit 2:
 * before, REPEATS < 1 read as 1)
 * prints a table and writes it (markdown, with the GPU name, date and $LC_COMMIT) to RESULTS.md,
 * by default bench/results/hip-mask-<gpu>-<date>.md. LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets
 * the backend's tuning (bench_util.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_select_blocks"
#include "bench_util.h"

#include <ctype.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { H = 8, G = 4, D = 128, P = 64, N_HEAD = H * G, B_Q = 32, N_SINK = 256, N_STREAM = 1024, BLOCK_K = 2 };

typedef struct bench_env {
    lc_backend      *b;
    lc_kv_layer_view kv;
    lc_rope_table    rope;
    float           *dq;
    int32_t         *pages;
    int              reps;
    char             lines[64][240];
    int              n_lines;
} bench_env;

/* One case: n_rows rows ending at position T - 1 in blocks of B_Q; median / min µs into med / mn. */
static int run_case(bench_env *env, const char *label, int64_t T, int32_t n_rows, int32_t k,
                    int32_t n_groups, int32_t mode) {
    lc_backend    *b    = env->b;
    const int32_t  n_qb = (n_rows + B_Q - 1) / B_Q;
    lc_attn_seq    seq  = {0, n_rows, (int32_t)(T - n_rows), env->pages, 0};
    lc_qblock *hq   = malloc(sizeof(lc_qblock) * (size_t)n_qb);
    int32_t        max_cand = 0;
    for (int32_t i = 0; i < n_qb; i++) {
        const int32_t pos0 = seq.pos0 + i * B_Q, n = n_rows - i * B_Q < B_Q ? n_rows - i * B_Q : B_Q;
        int32_t       win0 = pos0 + 1 < N_SINK ? pos0 + 1 : N_SINK;
        if (pos0 + 1 - N_STREAM > win0) win0 = pos0 + 1 - N_STREAM;
        if (win0 - N_SINK > max_cand) max_cand = win0 - N_SINK;
        hq[i] = (lc_qblock){0, i * B_Q, n, pos0, win0};
    }
    const int32_t  n_pairs = n_qb * n_groups, cap = k / BLOCK_K;
    lc_qblock *dqb     = b->alloc(b, sizeof(lc_qblock) * (size_t)n_qb, "qb");
    lc_segment    *out     = b->alloc(b, sizeof(lc_segment) * (size_t)n_pairs * cap, "out");
    int32_t       *out_n   = b->alloc(b, sizeof(int32_t) * (size_t)n_pairs, "out_n");
    if (!dqb || !out || !out_n) return 1;
    TRYL(b->upload(b, dqb, hq, sizeof(lc_qblock) * (size_t)n_qb));
    lc_select_blocks_args a;
    memset(&a, 0, sizeof a);
    a.k = k, a.block_k = BLOCK_K, a.q_stride = 1, a.k_stride = 1, a.n_sink = N_SINK;
    a.n_stream = N_STREAM, a.scan_rope = mode, a.n_groups = n_groups;
    a.max_rows = n_rows < B_Q ? n_rows : B_Q, a.max_cand = max_cand, a.out_cap = cap;
    a.out = out, a.out_n = out_n;
    TRYL(b->batch_begin(b, &seq, 1, P));
    bench_opcall call = {b, &env->kv, &seq, dqb, n_qb, env->dq, N_HEAD, &env->rope, 0, NULL, &a, 1};
    bench_times  tm;
    if (bench_time((cudaStream_t)lc_cuda_stream_handle(), 2, env->reps, bench_call_select_blocks, &call, &tm)) return 1;
    /* sanity: every block with more candidate blocks than nodes selected k / block_k */
    int32_t *hn = malloc(sizeof(int32_t) * (size_t)n_pairs);
    TRYL(b->download(b, hn, out_n, sizeof(int32_t) * (size_t)n_pairs));
    int ok = 1;
    for (int32_t i = 0; i < n_pairs; i++) {
        const int32_t cand = hq[i / n_groups].win0 - N_SINK;
        const int32_t want = cand <= 0 ? 0 : ((cand + BLOCK_K - 1) / BLOCK_K <= cap ? 1 : cap);
        ok &= hn[i] == want;
    }
    const double med = 1000.0 * tm.median, mn = 1000.0 * tm.min;
    snprintf(env->lines[env->n_lines < 64 ? env->n_lines : 63], 240,
             "| %-22s | %8lldK | %6d | %5d | %6d | %s | %10.1f | %10.1f |%s", label,
             (long long)(T >> 10), n_rows, k, n_groups, mode == LC_SCAN_PLAIN ? "plain   " : "relative",
             med, mn, ok ? "" : " OUTPUT COUNTS WRONG");
    printf("%s\n", env->lines[env->n_lines < 64 ? env->n_lines : 63]);
    fflush(stdout);
    if (env->n_lines < 64) env->n_lines++;
    b->dealloc(b, dqb), b->dealloc(b, out), b->dealloc(b, out_n);
    free(hq), free(hn);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    bench_env env;
    memset(&env, 0, sizeof env);
    env.reps               = 10;
    const char     *filter = NULL, *out = NULL;
    const bench_opt opts[] = {
        BENCH_OPTS_CASES(&env.reps, &filter),
        {"out", 's', &out, NULL, 0, 0, 3, false,
         "the results file (default bench/results/hip-mask-GPU-DATE.md)"},
    };
    BENCH_ARGS("[REPEATS [FILTER [RESULTS.md]]]", opts, NULL, NULL, NULL);
    if (filter && !filter[0]) filter = NULL;
    const int64_t T_max = 1 << 20, n_pages = T_max / P;
    const int32_t max_rows = 32768;
    if (bench_backend(&env.b)) return 1;
    lc_backend  *b    = env.b;
    const size_t pool = (size_t)n_pages * H * P * D; /* fp16 elements: 2 GiB */
    void        *dk   = b->alloc(b, 2 * pool, "k");
    env.dq            = b->alloc(b, sizeof(float) * (size_t)max_rows * N_HEAD * D, "q");
    const int32_t n_pos = (int32_t)T_max + 64, half = D / 2; /* plain RoPE up to 1M */
    float *dcs = b->alloc(b, sizeof(float) * (size_t)n_pos * half, "cos");
    float *dsn = b->alloc(b, sizeof(float) * (size_t)n_pos * half, "sin");
    if (!dk || !env.dq || !dcs || !dsn) {
        fprintf(stderr, "bench_select_blocks: %s\n", lc_last_error());
        return 1;
    }
    {
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(88172645463325252ull, chunk, &h16, &h32)) return 1;
        for (size_t off = 0, kk = 0; off < pool; off += chunk / 2, kk++) { /* pages differ */
            const size_t n = pool - off < chunk / 2 ? pool - off : chunk / 2;
            TRYC(cudaMemcpy((uint16_t *)dk + off, h16 + (kk * 7919) % (chunk / 2), 2 * n, cudaMemcpyHostToDevice));
        }
        const int bad = bench_upload_repeat(env.dq, (size_t)max_rows * N_HEAD * D, h32, chunk, 4);
        free(h16), free(h32);
        if (bad) return 1;
    }
    if (bench_rope_upload(n_pos, D, dcs, dsn)) return 1;
    env.rope  = (lc_rope_table){n_pos, D, LC_ROPE_NORM, dcs, dsn, 1.0f};
    env.kv    = (lc_kv_layer_view){dk, dk, P, H, D, NULL, false, NULL};
    env.pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int64_t i = 0; i < n_pages; i++) env.pages[i] = (int32_t)((i * 40503) % n_pages);
    struct cudaDeviceProp prop;
    TRYC(cudaGetDeviceProperties(&prop, 0));
    char head[600];
    snprintf(head, sizeof head, "bench_select_blocks on %s: Llama-3.1-8B shape (32/8 heads, dim 128, "
             "fp16 KV, 64-token pages), block_k 2, b_sq 1, b_sk 1, sink 256, window 1024; median "
             "(and min) of %d runs", prop.name, env.reps);
    printf("%s\n| case                   |  context  |  rows  |   k   | groups | rope     | median us  |   min us   |\n"
           "|---|---|---|---|---|---|---|---|\n", head);
    static const struct {
        const char *what;
        int64_t     T;
        int32_t     rows, k, groups, mode;
    } cases[] = {
        {"decode", 131072, 1, 512, 8, LC_SCAN_RELATIVE},
        {"decode", 131072, 1, 2048, 8, LC_SCAN_RELATIVE},
        {"decode", 131072, 1, 512, 1, LC_SCAN_RELATIVE},
        {"decode", 131072, 1, 2048, 1, LC_SCAN_RELATIVE},
        {"decode", 524288, 1, 512, 8, LC_SCAN_RELATIVE},
        {"decode", 524288, 1, 2048, 8, LC_SCAN_RELATIVE},
        {"decode", 524288, 1, 512, 1, LC_SCAN_RELATIVE},
        {"decode", 524288, 1, 2048, 1, LC_SCAN_RELATIVE},
        {"decode", 1048576, 1, 512, 8, LC_SCAN_RELATIVE},
        {"decode", 1048576, 1, 2048, 8, LC_SCAN_RELATIVE},
        {"decode", 1048576, 1, 512, 1, LC_SCAN_RELATIVE},
        {"decode", 1048576, 1, 2048, 1, LC_SCAN_RELATIVE},
        {"decode-plain", 131072, 1, 2048, 8, LC_SCAN_PLAIN},
        {"decode-plain", 1048576, 1, 2048, 8, LC_SCAN_PLAIN},
        {"decode-plain", 1048576, 1, 2048, 1, LC_SCAN_PLAIN},
        {"prefill", 32768, 32768, 512, 8, LC_SCAN_RELATIVE},
        {"prefill", 32768, 32768, 2048, 8, LC_SCAN_RELATIVE},
        {"prefill", 131072, 32768, 512, 8, LC_SCAN_RELATIVE},
        {"prefill", 131072, 32768, 2048, 8, LC_SCAN_RELATIVE},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s-%lldK-k%d-g%d", cases[i].what, (long long)(cases[i].T >> 10),
                 cases[i].k, cases[i].groups);
        if (filter && !strstr(label, filter)) continue;
        rc |= run_case(&env, label, cases[i].T, cases[i].rows, cases[i].k, cases[i].groups, cases[i].mode);
    }
    /* the results file */
    char path[700], gpu[64] = "gpu", date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    const char *nm = strncmp(prop.name, "NVIDIA ", 7) == 0 ? prop.name + 7 : prop.name;
    size_t      gi = 0;
    for (; nm[gi] && nm[gi] != ' ' && gi + 1 < sizeof gpu; gi++) gpu[gi] = (char)tolower((unsigned char)nm[gi]);
    gpu[gi] = 0;
    if (out) snprintf(path, sizeof path, "%s", out);
    else snprintf(path, sizeof path, "bench/results/hip-mask-%s-%s.md", gpu, date);
    FILE *f = fopen(path, "w");
    if (f) {
        const char *commit = getenv("LC_COMMIT");
        fprintf(f, "# select_blocks (HiP mask estimation) on %s, %s, commit %s\n\n%s\n\n", prop.name, date,
                commit ? commit : "unknown", head);
        fprintf(f, "| case                   |  context  |  rows  |   k   | groups | rope     | median us  |   min us   |\n"
                   "|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < env.n_lines; i++) fprintf(f, "%s\n", env.lines[i]);
        fclose(f);
        printf("wrote %s\n", path);
    } else {
        fprintf(stderr, "bench_select_blocks: cannot write %s\n", path);
    }
    b->dealloc(b, dk), b->dealloc(b, env.dq), b->dealloc(b, dcs), b->dealloc(b, dsn);
    free(env.pages);
    b->free(b);
    return rc;
}
