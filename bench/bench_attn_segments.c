/*
 * bench_attn_segments.c — the CUDA InfiniteHiP block-sparse attention (op attn_segments,
 * attn_segments.cu) alone, one layer of the Llama-3.1-8B shape (32 query heads, 8 KV heads, head
 * dim 128, fp16 KV in 64-token pages), on random data, timed with CUDA events (3 warm-up runs,
 * then the median of the repeats). InfiniteHiP's attended set (spec/infinitehip-and-hip.md §3):
 * 256 sink tokens + 2048 selected tokens in 256 segments of 8 at random places + the 1024-token
 * window, n_groups 1.
 *   decode: one sequence, one row, at 128K, 512K and 1M keys (STREAMING and PLAIN rope), with
 *           our dense decode attention over the whole context for reference;
 *   prefill: a 32K-row chunk in 512 blocks of 64 rows at the end of 128K and of 1M keys, through
 *           the default prefill kernel (wgmma on sm_90a) and the mma.sync one (the backend's
 *           tuning.sparse_prefill_mma), in the same process.
 * Prints µs (one call between two events, as a step issues it; and the mean of REPEATS calls
 * issued back to back between one event pair, which hides the host's launch time), the K+V
 * bytes the op must read against 3.0 TB/s (decode) and TFLOP/s (prefill); the dense reference
 * is the median of REPEATS after 3 warm-ups. LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the
 * backend's tuning (bench_util.h), e.g. sparse-pdl=off: the decode merge kernel without
 * programmatic dependent launch; with sparse-prefill=mma the prefill runs the mma.sync kernel
 * only.
 *
 * usage: bench_attn_segments [REPEATS [all|decode|prefill]]   (also reps=N what=...; -h: bench_args.h)
 * Timing: bench_time_ops (bench_util.h), the same warm-ups, repetitions and units as before.
 * Changed: a bad argument is an error (exit 2); before, REPEATS < 1 read as 1 and a second
 * argument other than decode / prefill as all.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_attn_segments"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 8, G = 4, NH = 32, D = 128, P = 64, N_SINK = 256, N_STREAM = 1024, N_SEGS = 256 };

static uint64_t rng = 88172645463325252ull;
static uint32_t irand(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* 256 random 8-token segments inside [lo, hi), sorted, into out; returns the count */
static int32_t pick_segments(int32_t lo, int32_t hi, lc_segment *out, unsigned char *mark) {
    const int32_t slots = (hi - lo) / 8;
    memset(mark, 0, (size_t)slots);
    for (int32_t k = 0; k < N_SEGS && k < slots;) {
        const int32_t s = (int32_t)irand((uint32_t)slots);
        if (!mark[s]) mark[s] = 1, k++;
    }
    int32_t n = 0;
    for (int32_t s = 0; s < slots; s++)
        if (mark[s]) out[n++] = (lc_segment){lo + 8 * s, 8};
    return n;
}

typedef struct bench_ctx {
    lc_backend      *b;
    lc_kv_layer_view kv;
    lc_rope_table    rope;
    float           *dq, *dout;
    int32_t         *pages; /* host identity page table */
    int              reps;
} bench_ctx;

/* the op on one sequence (qb: device query blocks; a: the sparse op's arguments) */
static bench_opcall op_call(bench_ctx *x, const lc_attn_seq *seq, const lc_qblock *qb, int32_t n_qb, const void *a) {
    return (bench_opcall){x->b, &x->kv, seq, qb, n_qb, x->dq, NH, &x->rope, 1.0f / sqrtf((float)D), x->dout, a, 1};
}

/* Median µs of the op on n_qb blocks (host qb / sel copied to the device) for one sequence. */
static int time_sparse(bench_ctx *x, const lc_attn_seq *seq, const lc_qblock *qb, int32_t n_qb,
                       const lc_segment *sel, const int32_t *sel_n, int32_t attn_rope,
                       int32_t max_rows, double *us, double *us_b2b) {
    lc_backend   *b = x->b;
    lc_qblock *dqb = b->alloc(b, sizeof *qb * n_qb, "qb");
    lc_segment    *dsel = b->alloc(b, sizeof *sel * n_qb * N_SEGS, "sel");
    int32_t       *dn   = b->alloc(b, sizeof *sel_n * n_qb, "sel_n");
    if (!dqb || !dsel || !dn) return 1;
    TRYL(b->upload(b, dqb, qb, sizeof *qb * n_qb));
    TRYL(b->upload(b, dsel, sel, sizeof *sel * n_qb * N_SEGS));
    TRYL(b->upload(b, dn, sel_n, sizeof *sel_n * n_qb));
    lc_attn_segments_args a = {.n_sink = N_SINK, .attn_rope = attn_rope, .n_groups = 1, .sel_cap = N_SEGS,
                            .max_rows = max_rows, .max_sel = 8 * N_SEGS,
                            .max_window = N_STREAM + max_rows - 1, .sel = dsel, .sel_n = dn};
    lc_rotated_keys    rk = {0}; /* the caller's rotated keys (plain RoPE prefill) */
    a.rot = &rk;
    TRYL(b->batch_begin(b, seq, 1, P));
    const bench_opcall call   = op_call(x, seq, dqb, n_qb, &a);
    const bench_op     op     = {bench_call_attn_segments, (void *)&call, NULL, NULL, NULL};
    const cudaStream_t stream = (cudaStream_t)lc_cuda_stream_handle();
    bench_times        tm, b2b;
    if (bench_time_ops(stream, (bench_plan){3, x->reps, 1, false}, 1, &op, &tm)) return 1;
    /* the same calls back to back: the host's launch time hidden behind the GPU's work */
    if (bench_time_ops(stream, (bench_plan){0, 1, x->reps, false}, 1, &op, &b2b)) return 1;
    *us = 1000.0 * tm.median, *us_b2b = 1000.0 * b2b.median;
    b->dealloc(b, dqb), b->dealloc(b, dsel), b->dealloc(b, dn);
    lc_rotated_keys_release(b, &rk);
    return 0;
}

static int time_dense_decode(bench_ctx *x, const lc_attn_seq *seq, double *us) {
    TRYL(x->b->batch_begin(x->b, seq, 1, P));
    bench_opcall call = op_call(x, seq, NULL, 0, NULL);
    bench_times  tm;
    if (bench_time((cudaStream_t)lc_cuda_stream_handle(), 3, x->reps, bench_call_attn_dense, &call, &tm)) return 1;
    *us = 1000.0 * tm.median;
    return 0;
}

int main(int argc, char **argv) {
    bench_ctx x;
    memset(&x, 0, sizeof x);
    x.reps                 = 20;
    int             what   = 0;
    const bench_opt opts[] = {
        {"reps", 'i', &x.reps, NULL, 1, 1000000, 1, false, "timed calls per case"},
        {"what", 'c', &what, "all|decode|prefill", 0, 0, 2, false, "which cases"},
    };
    BENCH_ARGS("[REPEATS [all|decode|prefill]]", opts, NULL, NULL, NULL);
    const int do_dec = what != 2, do_pre = what != 1;
    const int64_t max_ctx = 1 << 20, n_pages = max_ctx / P, pre_rows = 32768;
    if (bench_backend(&x.b)) return 1;
    lc_backend *b = x.b;
    {
        struct cudaDeviceProp prop;
        TRYC(cudaGetDeviceProperties(&prop, 0));
        printf("# %s, %d SMs; Llama-3.1-8B shape (%d/%d heads, dim %d), fp16 KV, %d-token pages; "
               "%d sink + %d selected (%d x 8) + %d window, n_groups 1; median of %d\n",
               prop.name, prop.multiProcessorCount, NH, H, D, P, N_SINK, 8 * N_SEGS, N_SEGS,
               N_STREAM, x.reps);
    }
    const size_t pool = (size_t)n_pages * H * P * D;
    void        *dk = b->alloc(b, 2 * pool, "k"), *dv = b->alloc(b, 2 * pool, "v");
    x.dq   = b->alloc(b, sizeof(float) * pre_rows * NH * D, "q");
    x.dout = b->alloc(b, sizeof(float) * pre_rows * NH * D, "out");
    float *dcs = b->alloc(b, sizeof(float) * max_ctx * (D / 2), "cos");
    float *dsn = b->alloc(b, sizeof(float) * max_ctx * (D / 2), "sin");
    if (!dk || !dv || !x.dq || !x.dout || !dcs || !dsn) {
        fprintf(stderr, "bench_attn_segments: %s\n", lc_last_error());
        return 1;
    }
    { /* random data, a host chunk uploaded over and over (values do not change the speed) */
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(0x2545F4914F6CDD1Dull, chunk, &h16, &h32)) return 1;
        const int bad = bench_upload_repeat(dk, pool, h16, chunk, 2) ||
                        bench_upload_repeat(dv, pool, h16, chunk, 2) ||
                        bench_upload_repeat(x.dq, (size_t)pre_rows * NH * D, h32, chunk, 4);
        free(h16), free(h32);
        if (bad) return 1;
    }
    if (bench_rope_upload(max_ctx, D, dcs, dsn)) return 1;
    x.rope  = (lc_rope_table){(int32_t)max_ctx, D, LC_ROPE_NORM, dcs, dsn, 1.0f};
    x.kv    = (lc_kv_layer_view){dk, dv, P, H, D, NULL, false, NULL};
    x.pages = malloc(sizeof(int32_t) * n_pages);
    for (int64_t i = 0; i < n_pages; i++) x.pages[i] = (int32_t)i;

    const int32_t  n_blk = (int32_t)(pre_rows / 64);
    lc_qblock *qb    = malloc(sizeof *qb * n_blk);
    lc_segment    *sel   = malloc(sizeof *sel * n_blk * N_SEGS);
    int32_t       *sel_n = malloc(sizeof *sel_n * n_blk);
    unsigned char *mark  = malloc((size_t)max_ctx / 8 + 1);

    /* decode */
    const double keys_dec = N_SINK + 8.0 * N_SEGS + N_STREAM;
    const double kv_bytes = keys_dec * H * D * 2 /* K and V */ * 2 /* fp16 */;
    if (do_dec) printf("\n| decode, 1 row | rope | sparse us | back-to-back us | K+V read (MB) | GB/s | of 3.0 TB/s | dense us | dense / sparse |\n");
    if (do_dec) printf("|---|---|---|---|---|---|---|---|---|\n");
    const int64_t ctxs[] = {128 * 1024, 512 * 1024, 1024 * 1024};
    for (int ci = 0; ci < 3 && do_dec; ci++) {
        const int32_t ctx = (int32_t)ctxs[ci], pos = ctx - 1;
        lc_attn_seq   seq = {0, 1, pos, x.pages, 0};
        qb[0]             = (lc_qblock){0, 0, 1, pos, pos + 1 - N_STREAM};
        sel_n[0]          = pick_segments(N_SINK, qb[0].win0, sel, mark);
        double dense_us   = 0;
        if (time_dense_decode(&x, &seq, &dense_us)) return 1;
        for (int rope = 0; rope < 2; rope++) {
            double us, us2;
            const int32_t mode = rope ? LC_ATTN_ROPE_PLAIN : LC_ATTN_ROPE_STREAMING;
            if (time_sparse(&x, &seq, qb, 1, sel, sel_n, mode, 1, &us, &us2)) return 1;
            const double gbs = kv_bytes / (us * 1e-6) / 1e9;
            printf("| %dK | %s | %.1f | %.1f | %.1f | %.0f | %.0f%% | %.0f | %.0fx |\n", ctx / 1024,
                   rope ? "plain" : "streaming", us, us2, kv_bytes / 1e6, gbs, 100.0 * gbs / 3000.0,
                   dense_us, dense_us / us);
        }
    }

    /* prefill: 512 blocks of 64 rows at the end of the context */
    if (do_pre) {
        printf("\n| prefill, 32K rows in 64-row blocks | kernel | rope | us | back-to-back us | TFLOP | TFLOP/s |\n");
        printf("|---|---|---|---|---|---|---|\n");
    }
    const int64_t pctx[] = {128 * 1024, 1024 * 1024};
    const lc_tuning tune0 = x.b->tuning; /* as LONGCTX_BENCH_TUNE set it */
    for (int ci = 0; ci < 2 && do_pre; ci++) {
        const int32_t ctx = (int32_t)pctx[ci], pos0 = ctx - (int32_t)pre_rows;
        lc_attn_seq   seq   = {0, (int32_t)pre_rows, pos0, x.pages, 0};
        double        flops = 0;
        for (int32_t k = 0; k < n_blk; k++) {
            const int32_t p0 = pos0 + 64 * k;
            qb[k]            = (lc_qblock){0, 64 * k, 64, p0, p0 + 1 - N_STREAM};
            sel_n[k]         = pick_segments(N_SINK, qb[k].win0, sel + (int64_t)k * N_SEGS, mark);
            for (int32_t r = 0; r < 64; r++) /* Q·K and P·V: 4 flops per key, dim and head */
                flops += 4.0 * D * NH * (N_SINK + 8.0 * sel_n[k] + (p0 + r - qb[k].win0 + 1));
        }
        for (int kern = 0; kern < 2; kern++) { /* the default kernel, then mma.sync */
            if (kern == 1 && tune0.sparse_prefill_mma) break;
            if (kern == 1) x.b->tuning.sparse_prefill_mma = true;
            for (int rope = 0; rope < 2; rope++) {
                double        us, us2;
                const int32_t mode = rope ? LC_ATTN_ROPE_PLAIN : LC_ATTN_ROPE_STREAMING;
                if (time_sparse(&x, &seq, qb, n_blk, sel, sel_n, mode, 64, &us, &us2)) return 1;
                printf("| %dK | %s | %s | %.0f | %.0f | %.2f | %.0f |\n", ctx / 1024,
                       kern || tune0.sparse_prefill_mma ? "mma.sync" : "default",
                       rope ? "plain" : "streaming",
                       us, us2, flops / 1e12, flops / (us * 1e-6) / 1e12);
            }
            x.b->tuning = tune0;
        }
    }
    free(qb), free(sel), free(sel_n), free(mark), free(x.pages);
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, x.dq), b->dealloc(b, x.dout);
    b->dealloc(b, dcs), b->dealloc(b, dsn);
    b->free(b);
    return 0;
}
