/*
 * bench_select_tokens.c — the CUDA TokenSelect selection (select_tokens.cu) alone, on the
 * Llama-3.1-8B shape (32/8 heads, dim 128, fp16 KV in 64-token pages behind a scattered page
 * table, random values), TokenSelect's defaults n_init 128, n_local 512, k 2048
 * (digest spec/tokenselect-and-sparseserve.md A.3):
 *   decode (one row) at 128K, 512K, 1M keys: a miss step (no cache) and a hit step (cache
 *   valid, theta -1), the hit also issued 20 times back to back (device cost per step), and
 *   the floor of the miss: the candidates' K bytes over the measured device copy bandwidth;
 *   prefill: 32K rows as 64 blocks of 512 rows at 32K and 128K context.
 * CUDA-event timing: two warm-ups, then the median (and minimum) of REPEATS runs, each run
 * synchronised before it (the host's launch time counts).
 * usage: bench_select_tokens [REPEATS [TABLE.md]]  (TABLE.md: the table is also written there;
 * also reps=N table=PATH; -h: bench_args.h)
 * Timing: bench_time_ops (bench_util.h) with sync (and, for the 20 back to back, calls 20),
 * the same warm-ups, repetitions and units as before; the copy bandwidth is the best of 4
 * copies, each between two events. Changed: a bad argument is an error (exit 2); before,
 * REPEATS < 1 read as 1.
 * The path follows the backend's tuning from LONGCTX_BENCH_TUNE (bench_util.h), e.g.
 * ts-select-path=kernels|fused, ts-select-launches=1|2|3 (select_tokens.cu; the title names them):
 * decode calls take the fused kernel by default.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_select_tokens"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 8, G = 4, D = 128, P = 64, N_HEAD = H * G, N_INIT = 128, N_LOCAL = 512, K = 2048, B_Q = 512 };

typedef struct bench_env {
    lc_backend      *b;
    lc_kv_layer_view kv;
    lc_rope_table    rope;
    float           *dq, *cache_q;
    int32_t         *cache_valid, *pages;
    int64_t         *counts;
    int              reps;
    double           copy_gbs;
    FILE            *table;
} bench_env;

/* one timed call: a device copy of `n` bytes from `src` to `src` + n, on the legacy stream */
typedef struct copy_call {
    char  *src;
    size_t n;
} copy_call;

static int copy_once(void *ctx, int i) {
    const copy_call *c = ctx;
    TRYC(cudaMemcpyAsync(c->src + c->n, c->src, c->n, cudaMemcpyDeviceToDevice, 0));
    return 0;
}

static void out_line(bench_env *env, const char *line) {
    fputs(line, stdout);
    fflush(stdout);
    if (env->table) fputs(line, env->table);
}

/* median / min of REPEATS timed calls (ms -> us); hit: the cache on, theta -1; back: the
 * median of 20 calls between one event pair, per call */
static int time_case(bench_env *env, int64_t T, int32_t n_rows, int hit, int back, double *med, double *mn) {
    lc_backend   *b    = env->b;
    const int32_t n_qb = (n_rows + B_Q - 1) / B_Q;
    lc_attn_seq   seq  = {0, n_rows, (int32_t)(T - n_rows), env->pages, 0};
    lc_qblock *hq  = malloc(sizeof(lc_qblock) * (size_t)n_qb);
    int32_t        max_cand = 0, max_rows = 1;
    for (int32_t i = 0; i < n_qb; i++) {
        const int32_t pos0 = seq.pos0 + i * B_Q, n = n_rows - i * B_Q < B_Q ? n_rows - i * B_Q : B_Q;
        int32_t       win0 = pos0 + 1 < N_INIT ? pos0 + 1 : N_INIT;
        if (pos0 + 1 - N_LOCAL > win0) win0 = pos0 + 1 - N_LOCAL;
        if (win0 - N_INIT > max_cand) max_cand = win0 - N_INIT;
        if (n > max_rows) max_rows = n;
        hq[i] = (lc_qblock){0, i * B_Q, n, pos0, win0};
    }
    lc_qblock *dqb   = b->alloc(b, sizeof(lc_qblock) * (size_t)n_qb, "qb");
    lc_segment    *out   = b->alloc(b, sizeof(lc_segment) * (size_t)n_qb * K, "out");
    int32_t       *out_n = b->alloc(b, sizeof(int32_t) * (size_t)n_qb, "out_n");
    if (!dqb || !out || !out_n) return 1;
    TRYL(b->upload(b, dqb, hq, sizeof(lc_qblock) * (size_t)n_qb));
    lc_select_tokens_args a;
    memset(&a, 0, sizeof a);
    a.n_init = N_INIT, a.k = K, a.fp_pos = N_LOCAL, a.max_rows = max_rows, a.max_cand = max_cand;
    a.out_cap = K, a.out = out, a.out_n = out_n;
    if (hit) {
        const int32_t zero = 0;
        TRYL(b->upload(b, env->cache_valid, &zero, sizeof zero));
        a.cache_q = env->cache_q, a.cache_valid = env->cache_valid, a.counts = env->counts;
        a.theta = -1.0f;
    }
    TRYL(b->batch_begin(b, &seq, 1, P));
    const bench_opcall call = {b, &env->kv, &seq, dqb, n_qb, env->dq, N_HEAD, &env->rope, 0, NULL, &a, 1};
    const bench_op     op   = {bench_call_select_tokens, (void *)&call, NULL, NULL, NULL};
    bench_times        tm;
    if (bench_time_ops((cudaStream_t)lc_cuda_stream_handle(), (bench_plan){2, env->reps, back ? 20 : 1, true},
                       1, &op, &tm))
        return 1;
    /* sanity: every block with candidates selected some, the others none */
    int32_t *hn  = malloc(sizeof(int32_t) * (size_t)n_qb);
    TRYL(b->download(b, hn, out_n, sizeof(int32_t) * (size_t)n_qb));
    int ok = 1;
    for (int32_t i = 0; i < n_qb; i++) /* (the first blocks of a prefill from 0 have none) */
        ok &= hq[i].win0 > N_INIT ? hn[i] >= 1 && hn[i] <= K : hn[i] == 0;
    *med = 1000.0 * tm.median, *mn = 1000.0 * tm.min;
    b->dealloc(b, dqb), b->dealloc(b, out), b->dealloc(b, out_n);
    free(hq), free(hn);
    if (!ok) fprintf(stderr, BENCH_NAME ": T=%lld rows=%d: bad out_n\n", (long long)T, n_rows);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    bench_env env;
    memset(&env, 0, sizeof env);
    env.reps                  = 7;
    const char     *table     = NULL;
    const bench_opt opts[]    = {
        {"reps", 'i', &env.reps, NULL, 1, 1000000, 1, false, "timed runs per case"},
        {"table", 's', &table, NULL, 0, 0, 2, false, "also write the table there"},
    };
    BENCH_ARGS("[REPEATS [TABLE.md]]", opts, NULL, NULL, NULL);
    if (table && !(env.table = fopen(table, "w"))) {
        fprintf(stderr, BENCH_NAME ": cannot write %s\n", table);
        return 1;
    }
    const int64_t T_max = 1 << 20, n_pages = T_max / P;
    const int32_t max_rows = 32768;
    if (bench_backend(&env.b)) return 1;
    lc_backend  *b    = env.b;
    const size_t pool = (size_t)n_pages * H * P * D; /* fp16 elements: 2 GiB */
    void        *dk   = b->alloc(b, 2 * pool, "k");
    env.dq            = b->alloc(b, sizeof(float) * (size_t)max_rows * N_HEAD * D, "q");
    env.cache_q       = b->alloc(b, sizeof(float) * N_HEAD * D, "cache_q");
    env.cache_valid   = b->alloc(b, sizeof(int32_t), "cache_valid");
    env.counts        = b->alloc(b, 2 * sizeof(int64_t), "counts");
    const int32_t n_pos = N_LOCAL + B_Q + 64, half = D / 2; /* fingerprint positions only */
    float *dcs = b->alloc(b, sizeof(float) * n_pos * half, "cos"), *dsn = b->alloc(b, sizeof(float) * n_pos * half, "sin");
    if (!dk || !env.dq || !dcs || !dsn || !env.cache_q || !env.cache_valid || !env.counts) {
        fprintf(stderr, BENCH_NAME ": %s\n", lc_last_error());
        return 1;
    }
    {
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(88172645463325252ull, chunk, &h16, &h32)) return 1;
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
    for (int64_t i = 0; i < n_pages; i++) env.pages[i] = (int32_t)((i * 40503) % n_pages);
    /* device copy bandwidth: 1 GiB device to device (read + write counted), the best of 4 */
    {
        copy_call   cc = {dk, (size_t)1 << 30};
        bench_times tm;
        if (bench_time(0, 0, 4, copy_once, &cc, &tm)) return 1;
        env.copy_gbs = 2.0 * (double)cc.n / (tm.min * 1e-3) / 1e9;
    }
    struct cudaDeviceProp prop;
    TRYC(cudaGetDeviceProperties(&prop, 0));
    char        line[2048];
    static const char *const path_names[] = {"as launched", "kernels", "fused"};
    const int32_t            path = b->tuning.ts_select_path, nl = b->tuning.ts_select_launches;
    char                     le[16] = "default";
    if (nl > 0) snprintf(le, sizeof le, "%d", nl);
    snprintf(line, sizeof line, "bench_select_tokens on %s: Llama-3.1-8B shape (32/8 heads, dim 128, fp16 KV, "
             "page 64), n_init %d, n_local %d, k %d; median (min) of %d runs, us; copy bandwidth "
             "%.0f GB/s; path %s, launches %s\n\n| case | keys | rows | blocks | miss | hit (1 call) | hit (20 back to back, per call) | K bytes / copy BW |\n"
             "|---|---|---|---|---|---|---|---|\n", prop.name, N_INIT, N_LOCAL, K, env.reps, env.copy_gbs,
             path_names[path >= 0 && path <= 2 ? path : 0], le);
    out_line(&env, line);
    static const struct {
        int64_t T;
        int32_t rows;
    } cases[] = {{131072, 1}, {524288, 1}, {1048576, 1}, {32768, 32768}, {131072, 32768}};
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t T = cases[i].T;
        const int32_t rows = cases[i].rows, n_qb = (rows + B_Q - 1) / B_Q;
        double        m0, n0, m1 = 0, n1 = 0, m2 = 0, n2 = 0;
        rc |= time_case(&env, T, rows, 0, 0, &m0, &n0);
        if (rows == 1) {
            rc |= time_case(&env, T, rows, 1, 0, &m1, &n1);
            rc |= time_case(&env, T, rows, 1, 1, &m2, &n2);
            const double kb = (double)(T - N_LOCAL - N_INIT) * H * D * 2;
            snprintf(line, sizeof line, "| decode | %lldK | 1 | 1 | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.0f MiB) |\n",
                     (long long)(T >> 10), m0, n0, m1, n1, m2, n2, kb / (env.copy_gbs * 1e9) * 1e6, kb / 1048576.0);
        } else {
            snprintf(line, sizeof line, "| prefill | %lldK | %d | %d | %.1f (%.1f) | - | - | - |\n",
                     (long long)(T >> 10), rows, n_qb, m0, n0);
        }
        out_line(&env, line);
    }
    if (env.table) fclose(env.table);
    b->dealloc(b, dk), b->dealloc(b, env.dq), b->dealloc(b, dcs), b->dealloc(b, dsn);
    b->dealloc(b, env.cache_q), b->dealloc(b, env.cache_valid), b->dealloc(b, env.counts);
    free(env.pages);
    b->free(b);
    return rc;
}
