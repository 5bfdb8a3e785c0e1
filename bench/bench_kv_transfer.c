/*
 * bench_kv_transfer.c — moving KV slabs between the host tier and the GPU (issue 24 items 2-3;
 * SparseServe's FlashH2D / FlashD2H, spec/tokenselect-and-sparseserve.md B.3): a KV pool from
 * the backend's alloc_tiered (2 MiB on the GPU, 8 GiB of pinned host memory mapped behind it,
 * tiered_memory.cu), a 512 MiB bank of GPU slots, and per slab size (4, 16 and 32 KiB; 16 KiB
 * is one (layer, page, kv_head) slab of the 8B and Qwen shapes: 64 tokens x 128 x fp16):
 *   gather  host tier -> GPU slots, slabs spread over the tier: the copy_slabs op (one kernel, one CTA a
 *           slab), one cudaMemcpyAsync per slab, and the op reading a cudaHostAlloc'd buffer
 *           instead (plain mapped pinned memory) for comparison;
 *   save    GPU slots -> host-tier slabs spread the same way: copy_slabs (the GPU writing mapped memory),
 *           one cudaMemcpyAsync per slab;
 *   bulk    one contiguous 512 MiB cudaMemcpyAsync each way (the rate PCIe gives; FlashD2H's
 *           first half).
 * 512 MiB moved per call; median of REPS calls after 2 warm-ups (bench_time, CUDA events). Prints
 * a Markdown table (GB/s = 1e9 bytes/s, and the share of the bulk copy of the same direction).
 *
 * usage: bench_kv_transfer [REPS]   (also reps=N; -h: bench_args.h)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_kv_transfer"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVED ((size_t)512 << 20)
#define HOST  ((size_t)8 << 30)

typedef struct xfer {
    lc_backend         *b;
    cudaStream_t        s;
    const uint8_t      *src;
    uint8_t            *dst;
    const lc_slab_copy *dcopies; /* device */
    const lc_slab_copy *hcopies; /* host, for the per-slab copies */
    int32_t             n;
    size_t              slab;
} xfer;

static int run_op(void *ctx, int i) {
    (void)i;
    xfer *x = ctx;
    return x->b->copy_slabs(x->b, x->src, x->dst, x->dcopies, x->n, x->slab) != LC_OK;
}
static int run_memcpys(void *ctx, int i) {
    (void)i;
    xfer *x = ctx;
    for (int32_t k = 0; k < x->n; k++)
        if (cudaMemcpyAsync(x->dst + (size_t)x->hcopies[k].dst * x->slab,
                            x->src + (size_t)x->hcopies[k].src * x->slab, x->slab,
                            cudaMemcpyDefault, x->s) != cudaSuccess)
            return 1;
    return 0;
}
static int run_bulk(void *ctx, int i) {
    (void)i;
    xfer *x = ctx;
    return cudaMemcpyAsync(x->dst, x->src, MOVED, cudaMemcpyDefault, x->s) != cudaSuccess;
}

static double gbps(const bench_times *t) { return (double)MOVED / (t->median * 1e-3) / 1e9; }

int main(int argc, char **argv) {
    int reps = 7;
    if (argc > 1 && (reps = atoi(argv[1])) < 1) {
        fprintf(stderr, "usage: bench_kv_transfer [REPS >= 1]\n");
        return 2;
    }
    lc_backend *b = NULL;
    if (bench_backend(&b)) return 1;
    if (!b->tier_align) {
        fprintf(stderr, BENCH_NAME ": this GPU cannot map host memory (no host tier)\n");
        return 1;
    }
    cudaStream_t s = (cudaStream_t)lc_cuda_stream_handle();
    uint8_t *pool = b->alloc_tiered(b, b->tier_align, HOST, "host tier");
    uint8_t *bank = b->alloc(b, MOVED, "slots");
    uint8_t *plain = NULL;
    if (!pool || !bank) {
        fprintf(stderr, BENCH_NAME ": %s\n", lc_last_error());
        return 1;
    }
    TRYC(cudaHostAlloc((void **)&plain, HOST, cudaHostAllocMapped));
    TRYC(cudaMemset(pool, 1, b->tier_align + HOST));
    TRYC(cudaMemset(bank, 2, MOVED));
    memset(plain, 3, HOST);
    uint8_t *host_tier = pool + b->tier_align;
    char     name[128] = "?";
    if (b->device_name) b->device_name(b, name, sizeof name);
    printf("# KV slab transfers, %s\n\n%d reps (median), 512 MiB a call, slabs spread over an 8 GiB "
           "host tier (alloc_tiered: pinned host memory mapped behind 2 MiB of GPU memory).\n\n",
           name, reps);
    printf("| slab | gather: copy_slabs GB/s | gather: memcpy per slab | gather: copy_slabs from "
           "cudaHostAlloc | save: copy_slabs | save: memcpy per slab | bulk H2D | bulk D2H |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    static const size_t slabs[] = {4096, 16384, 32768};
    for (size_t si = 0; si < sizeof slabs / sizeof slabs[0]; si++) {
        const size_t  slab = slabs[si];
        const int32_t n = (int32_t)(MOVED / slab);
        const int64_t n_host = (int64_t)(HOST / slab);
        lc_slab_copy *h = malloc(sizeof *h * (size_t)n), *hs = malloc(sizeof *h * (size_t)n);
        lc_slab_copy *dg = b->alloc(b, sizeof *h * (size_t)n, "copies");
        lc_slab_copy *ds = b->alloc(b, sizeof *h * (size_t)n, "copies");
        if (!h || !hs || !dg || !ds) return 1;
        /* distinct host slabs spread over the tier: an odd stride (coprime with the power-of-two
         * count) from a start that differs per size */
        const int64_t start = (int64_t)((12345u + 7919u * si) % (uint64_t)n_host);
        for (int32_t k = 0; k < n; k++) {
            const int64_t hslab = (start + (int64_t)k * 2654435761LL) % n_host;
            h[k]  = (lc_slab_copy){hslab, k};
            hs[k] = (lc_slab_copy){k, hslab};
        }
        TRYL(b->upload(b, dg, h, sizeof *h * (size_t)n));
        TRYL(b->upload(b, ds, hs, sizeof *h * (size_t)n));
        xfer g  = {b, s, host_tier, bank, dg, h, n, slab};
        xfer gp = {b, s, plain, bank, dg, h, n, slab};
        xfer sv = {b, s, bank, host_tier, ds, hs, n, slab};
        xfer bh = {b, s, host_tier, bank, NULL, NULL, 0, slab};
        xfer bd = {b, s, bank, host_tier, NULL, NULL, 0, slab};
        bench_times t[7];
        if (bench_time(s, 2, reps, run_op, &g, &t[0])) return 1;
        /* the gather moved the right bytes: slot k holds host slab h[k] (spot checks) */
        for (int32_t k = 0; k < n; k += n / 7) {
            uint8_t a[16], c[16];
            TRYC(cudaMemcpy(a, bank + (size_t)k * slab, 16, cudaMemcpyDefault));
            TRYC(cudaMemcpy(c, host_tier + (size_t)h[k].src * slab, 16, cudaMemcpyDefault));
            if (memcmp(a, c, 16)) {
                fprintf(stderr, BENCH_NAME ": slot %d does not hold its slab\n", k);
                return 1;
            }
        }
        if (
            bench_time(s, 1, reps < 3 ? reps : 3, run_memcpys, &g, &t[1]) ||
            bench_time(s, 2, reps, run_op, &gp, &t[2]) || bench_time(s, 2, reps, run_op, &sv, &t[3]) ||
            bench_time(s, 1, reps < 3 ? reps : 3, run_memcpys, &sv, &t[4]) ||
            bench_time(s, 2, reps, run_bulk, &bh, &t[5]) || bench_time(s, 2, reps, run_bulk, &bd, &t[6]))
            return 1;
        const double bulk_h2d = gbps(&t[5]), bulk_d2h = gbps(&t[6]);
        printf("| %zu KiB | %.1f (%.0f%%) | %.1f | %.1f | %.1f (%.0f%%) | %.1f | %.1f | %.1f |\n",
               slab >> 10, gbps(&t[0]), 100 * gbps(&t[0]) / bulk_h2d, gbps(&t[1]), gbps(&t[2]),
               gbps(&t[3]), 100 * gbps(&t[3]) / bulk_d2h, gbps(&t[4]), bulk_h2d, bulk_d2h);
        fflush(stdout);
        free(h), free(hs);
        b->dealloc(b, dg), b->dealloc(b, ds);
    }
    cudaFreeHost(plain);
    b->dealloc(b, bank);
    b->dealloc_tiered(b, pool);
    b->free(b);
    return 0;
}
