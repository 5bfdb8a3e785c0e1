/*
 * bench_attention.c — one layer of our dense CUDA attention (attention.cu: split-KV decode,
 * tensor-core causal prefill) on random fp16 K/V in 64-token pages, timed with CUDA events
 * (warm-up, then the median of repeated runs). Driven by bench/attention_vs_sdpa.py, which runs
 * PyTorch SDPA (cuDNN, flash) at the same shapes in the same run and writes the table.
 *
 * usage: bench_attention decode|prefill N_KV_HEADS GROUP HEAD_DIM KEYS [REPEATS]
 * prints one line: mode kv_heads group head_dim keys median_us min_us
 * LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the backend's tuning (bench_util.h; e.g.
 * prefill=mma: the mma.sync prefill kernel on Hopper).
 */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_attention"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one timed call: the dense attention */
typedef struct attn_call {
    lc_backend             *b;
    const lc_kv_layer_view *kv;
    const lc_attn_seq      *seq;
    const float            *q;
    int32_t                 n_head;
    const lc_rope_table    *rope;
    float                   scale;
    float                  *out;
} attn_call;

static int attn_once(void *ctx) {
    const attn_call *c = ctx;
    if (c->b->attn_dense(c->b, c->kv, c->seq, 1, c->q, c->n_head, c->rope, c->scale, c->out) != LC_OK) {
        fprintf(stderr, "bench_attention: %s\n", lc_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: bench_attention decode|prefill N_KV_HEADS GROUP HEAD_DIM KEYS [REPEATS]\n");
        return 2;
    }
    const int     decode = strcmp(argv[1], "decode") == 0;
    const int32_t H = atoi(argv[2]), G = atoi(argv[3]), D = atoi(argv[4]);
    const int64_t keys = atoll(argv[5]);
    const int     reps = argc > 6 ? atoi(argv[6]) : (decode ? 50 : 5);
    const int32_t P = 64, n_head = H * G;
    if (H < 1 || G < 1 || (D != 64 && D != 128) || keys < 1 || reps < 1) {
        fprintf(stderr, "bench_attention: bad arguments\n");
        return 2;
    }
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    const int64_t n_pages = (keys + P - 1) / P;
    const size_t  pool    = (size_t)n_pages * H * P * D;
    const int32_t rows    = decode ? 1 : (int32_t)keys;
    void         *dk = b->alloc(b, 2 * pool, "k"), *dv = b->alloc(b, 2 * pool, "v");
    float        *dq = b->alloc(b, sizeof(float) * rows * n_head * D, "q");
    float        *dout = b->alloc(b, sizeof(float) * rows * n_head * D, "out");
    const size_t  half = (size_t)D / 2;
    float        *dcs = b->alloc(b, sizeof(float) * keys * half, "cos");
    float        *dsn = b->alloc(b, sizeof(float) * keys * half, "sin");
    if (!dk || !dv || !dq || !dout || !dcs || !dsn) {
        fprintf(stderr, "bench_attention: %s\n", lc_last_error());
        return 1;
    }
    /* random data, a host chunk uploaded over and over (values do not change the speed) */
    {
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(88172645463325252ull, chunk, &h16, &h32)) return 1;
        const int bad = bench_upload_repeat(dk, pool, h16, chunk, 2) ||
                        bench_upload_repeat(dv, pool, h16, chunk, 2) ||
                        bench_upload_repeat(dq, (size_t)rows * n_head * D, h32, chunk, 4);
        free(h16), free(h32);
        if (bad) return 1;
    }
    if (bench_rope_upload(keys, D, dcs, dsn)) return 1;
    lc_rope_table rope = {(int32_t)keys, D, LC_ROPE_NORM, dcs, dsn, 1.0f};
    int32_t      *pages = malloc(sizeof(int32_t) * n_pages);
    for (int64_t i = 0; i < n_pages; i++) pages[i] = (int32_t)i;
    lc_attn_seq seq = {0, rows, decode ? (int32_t)keys - 1 : 0, pages, 0};
    if (b->batch_begin(b, &seq, 1, P) != LC_OK) {
        fprintf(stderr, "bench_attention: %s\n", lc_last_error());
        return 1;
    }
    lc_kv_layer_view kv = {dk, dv, P, H, D};
    const float      scale = 1.0f / sqrtf((float)D);
    attn_call call = {b, &kv, &seq, dq, n_head, &rope, scale, dout};
    bench_times tm;
    if (bench_time((cudaStream_t)lc_cuda_stream_handle(), 3, reps, attn_once, &call, &tm)) return 1;
    printf("%s %d %d %d %lld %.2f %.2f\n", decode ? "decode" : "prefill", H, G, D,
           (long long)keys, 1000.0 * tm.median, 1000.0 * tm.min);
    free(pages);
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dout);
    b->dealloc(b, dcs), b->dealloc(b, dsn);
    b->free(b);
    return 0;
}
