/*
 * bench_attention.c — one layer of our dense CUDA attention (attention.cu: split-KV decode,
 * tensor-core causal prefill) on random fp16 K/V in 64-token pages, timed with CUDA events
 * (warm-up, then the median of repeated runs). Driven by bench/attention_vs_sdpa.py, which runs
 * PyTorch SDPA (cuDNN, flash) at the same shapes in the same run and writes the table.
 *
 * usage: bench_attention decode|prefill N_KV_HEADS GROUP HEAD_DIM KEYS [REPEATS]
 * (each also as NAME=VALUE: mode, kv_heads, group, head_dim, keys, reps, kv; -h lists them:
 * bench_args.h; a bad argument names itself, exit 2 as before). kv=e4m3: the pools in the fp8
 * layout (backend.h LC_KV_E4M3: random codes, scales and key centres), kv=f16 the default;
 * centre=0: fp8 pools without key centres (a model without key biases: Llama; the decode kernel
 * then skips its centre term and fits three CTAs an SM); rope=neox: split-half pairs (Qwen2).
 * prints one line: mode kv_heads group head_dim keys median_us min_us
 * LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the backend's tuning (bench_util.h; e.g.
 * prefill=mma: the mma.sync prefill kernel on Hopper).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_attention"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int             mode = 0, H = 0, G = 0, D = 0, reps = 0, e8 = 0, centre = 1, neox = 0;
    int64_t         keys   = 0;
    const bench_opt opts[] = {
        {"mode", 'c', &mode, "decode|prefill", 0, 0, 1, true, "one decode row or a causal prefill of KEYS rows"},
        BENCH_OPTS_SHAPE(&H, &G, &D, &keys, 1, 2),
        {"reps", 'i', &reps, NULL, 0, 1000000, 6, false, "timed runs (0: 50 decode, 5 prefill)"},
        {"kv", 'c', &e8, "f16|e4m3", 0, 0, 0, false, "the KV pools' layout (default f16)"},
        {"centre", 'i', &centre, NULL, 0, 1, 0, false, "e4m3: key centres (1, default) or none (0)"},
        {"rope", 'c', &neox, "norm|neox", 0, 0, 0, false, "RoPE pairing (default norm: adjacent)"},
    };
    BENCH_ARGS("decode|prefill N_KV_HEADS GROUP HEAD_DIM KEYS [REPEATS]", opts, NULL, NULL, NULL);
    const int     decode = mode == 0;
    const int32_t P = 64, n_head = H * G;
    if (!reps) reps = decode ? 50 : 5;
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    const int64_t n_pages = (keys + P - 1) / P;
    const size_t  pool    = (size_t)n_pages * H * P * D;
    const size_t  pool_b  = e8 ? (size_t)n_pages * H * lc_kv_slab_bytes(true, b->kv_type, P, D) : 2 * pool;
    const int32_t rows    = decode ? 1 : (int32_t)keys;
    void         *dk = b->alloc(b, pool_b, "k"), *dv = b->alloc(b, pool_b, "v");
    float        *dcen = b->alloc(b, sizeof(float) * H * D, "key centres");
    float        *dq = b->alloc(b, sizeof(float) * rows * n_head * D, "q");
    float        *dout = b->alloc(b, sizeof(float) * rows * n_head * D, "out");
    const size_t  half = (size_t)D / 2;
    float        *dcs = b->alloc(b, sizeof(float) * keys * half, "cos");
    float        *dsn = b->alloc(b, sizeof(float) * keys * half, "sin");
    if (!dk || !dv || !dq || !dout || !dcs || !dsn || !dcen) {
        fprintf(stderr, "bench_attention: %s\n", lc_last_error());
        return 1;
    }
    /* random data, a host chunk uploaded over and over (values do not change the speed) */
    {
        const size_t chunk = 1 << 24;
        uint16_t    *h16   = NULL;
        float       *h32   = NULL;
        if (bench_random_chunk(88172645463325252ull, chunk, &h16, &h32)) return 1;
        int bad;
        if (e8) { /* whole slabs of codes and scales (one per token: 0.01 .. 1), repeated */
            const size_t   sb = lc_kv_slab_bytes(true, b->kv_type, P, D), ns = chunk / sb;
            unsigned char *h8 = malloc(ns * sb);
            if (!h8) return 1;
            for (size_t i = 0; i < ns * sb; i++) h8[i] = (unsigned char)(h16[i] & 0x77u); /* finite codes */
            for (size_t s8 = 0; s8 < ns; s8++)
                for (int t = 0; t < P; t++) {
                    const float sc = 0.01f + fabsf(h32[s8 * P + t]);
                    memcpy(h8 + s8 * sb + (size_t)P * D + 4 * (size_t)t, &sc, 4);
                }
            bad = bench_upload_repeat(dk, pool_b / sb, h8, ns, sb) ||
                  bench_upload_repeat(dv, pool_b / sb, h8, ns, sb) ||
                  bench_upload_repeat(dcen, (size_t)H * D, h32, chunk, 4);
            free(h8);
        } else {
            bad = bench_upload_repeat(dk, pool, h16, chunk, 2) ||
                  bench_upload_repeat(dv, pool, h16, chunk, 2);
        }
        bad = bad || bench_upload_repeat(dq, (size_t)rows * n_head * D, h32, chunk, 4);
        free(h16), free(h32);
        if (bad) return 1;
    }
    if (bench_rope_upload(keys, D, dcs, dsn)) return 1;
    lc_rope_table rope = {(int32_t)keys, D, neox ? LC_ROPE_NEOX : LC_ROPE_NORM, dcs, dsn, 1.0f};
    int32_t      *pages = malloc(sizeof(int32_t) * n_pages);
    for (int64_t i = 0; i < n_pages; i++) pages[i] = (int32_t)i;
    lc_attn_seq seq = {0, rows, decode ? (int32_t)keys - 1 : 0, pages, 0};
    if (b->batch_begin(b, &seq, 1, P) != LC_OK) {
        fprintf(stderr, "bench_attention: %s\n", lc_last_error());
        return 1;
    }
    lc_kv_layer_view kv = {dk, dv, P, H, D, NULL, e8 != 0, e8 && centre ? dcen : NULL};
    const float      scale = 1.0f / sqrtf((float)D);
    bench_opcall call = {b, &kv, &seq, NULL, 0, dq, n_head, &rope, scale, dout, NULL, 0};
    bench_times  tm;
    if (bench_time((cudaStream_t)lc_cuda_stream_handle(), 3, reps, bench_call_attn_dense, &call, &tm)) return 1;
    printf("%s %d %d %d %lld %.2f %.2f\n", decode ? "decode" : "prefill", H, G, D,
           (long long)keys, 1000.0 * tm.median, 1000.0 * tm.min);
    free(pages);
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dout);
    b->dealloc(b, dcs), b->dealloc(b, dsn), b->dealloc(b, dcen);
    b->free(b);
    return 0;
}
