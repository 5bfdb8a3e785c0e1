/*
 * test_kv_tiers_cuda.c — the KV cache's host tier on the GPU (issue 24 items 1 and 4;
 * backend/cuda/tiered_memory.cu): a pool whose first bytes are device memory and the rest
 * pinned host memory mapped behind them
 *   1. holds what is uploaded across the tier boundary (poisoned first) and gives it back;
 *   2. copy_slabs (the FlashH2D gather / the save into host slabs) moves host->device and
 *      device->host slabs exactly as the CPU twin does;
 *   3. a context on a generated model (tiny-hd64, 10,000-token prompt) with its KV split
 *      between the tiers, or all in the host tier, gives bit for bit the logits and tokens of
 *      the all-GPU run, for every method (dense, InfiniteHiP, HiP, TokenSelect): the kernels
 *      read host pages at the same addresses, so the tier never changes a result;
 *      With the slot cache of host reads (kv/slab_bank.h; InfiniteHiP, HiP; all KV on the
 *      host, 16 slot pages) every token and the last step's logits are the all-GPU run's too,
 *      and the cache took slabs in (item 5: the cache never changes a result);
 *   4. a host tier larger than the host's memory is refused before anything is pinned.
 * Skips (exit 77) without a GPU, or when the GPU cannot map host memory (said why).
 */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "longctx.h"
#include "test_util.h"
#include "generated_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1u << 20)

static void pool_checks(lc_backend *b) {
    const size_t dev = b->tier_align, host = 3 * (size_t)b->tier_align, total = dev + host;
    uint8_t     *pool = b->alloc_tiered(b, dev, host, "test pool");
    CHECKF(pool, "alloc_tiered: %s", lc_last_error());
    uint8_t *h = malloc(total), *back = malloc(total), *ref = malloc(total);
    CHECK(h && back && ref);
    if (!pool || !h || !back || !ref) goto done;
    /* 1. poison, then a pattern across the boundary */
    memset(h, 0xee, total);
    CHECK(b->upload(b, pool, h, total) == LC_OK);
    for (size_t i = 0; i < total; i++) h[i] = (uint8_t)(i * 131 + (i >> 13));
    CHECK(b->upload(b, pool, h, total) == LC_OK);
    CHECK(b->download(b, back, pool, total) == LC_OK);
    CHECKF(!memcmp(h, back, total), "the tiered pool does not give back what was uploaded");

    /* 2. slabs of 16 KiB: host tier -> device tier and device tier -> host tier */
    {
        enum { SLAB = 16384 };
        const int64_t n_dev = (int64_t)(dev / SLAB), n_all = (int64_t)(total / SLAB);
        lc_slab_copy  c[40];
        int           n = 0;
        for (int i = 0; i < 20; i++) c[n++] = (lc_slab_copy){n_all - 1 - 2 * i, i}; /* H2D */
        for (int i = 0; i < 20; i++) c[n++] = (lc_slab_copy){20 + i, n_dev + 5 + 3 * i}; /* D2H */
        lc_slab_copy *dc = b->alloc(b, sizeof c, "copies");
        CHECK(dc && b->upload(b, dc, c, sizeof c) == LC_OK);
        /* within one buffer: sources and destinations apart (dst 0..19 and n_dev+5.., src
         * 20..39 and the top of the host tier) */
        CHECK(b->copy_slabs(b, pool, pool, dc, 20, SLAB) == LC_OK);
        CHECK(b->copy_slabs(b, pool, pool, dc + 20, 20, SLAB) == LC_OK);
        CHECK(b->download(b, back, pool, total) == LC_OK);
        memcpy(ref, h, total);
        CHECK(lc_cpu_copy_slabs(ref, ref, c, 20, SLAB) == LC_OK);
        CHECK(lc_cpu_copy_slabs(ref, ref, c + 20, 20, SLAB) == LC_OK);
        size_t wrong = 0;
        for (size_t i = 0; i < total; i++) wrong += back[i] != ref[i];
        CHECKF(wrong == 0, "copy_slabs on the GPU: %zu bytes differ from the CPU twin", wrong);
        CHECK(b->copy_slabs(b, pool, pool, dc, 3, 40) == LC_ERR_INVALID_ARG);
        b->dealloc(b, dc);
    }
done:
    if (pool) b->dealloc_tiered(b, pool);
    free(h), free(back), free(ref);
}

#define N_PROMPT 10000
#define N_OUT    12


static void engine_checks(void) {
    lc_model *m = load_generated("tiny-hd64", 9, LC_DEVICE_CUDA, 0);
    if (!m) return;
    lc_model_info info;
    lc_model_get_info(m, &info);
    int32_t *prompt = malloc(sizeof(int32_t) * N_PROMPT);
    float   *l0 = malloc(sizeof(float) * (size_t)info.n_vocab);
    float   *l1 = malloc(sizeof(float) * (size_t)info.n_vocab);
    float   *e0 = malloc(sizeof(float) * (size_t)info.n_vocab);
    float   *e1 = malloc(sizeof(float) * (size_t)info.n_vocab);
    CHECK(prompt && l0 && l1 && e0 && e1);
    if (!prompt || !l0 || !l1 || !e0 || !e1) goto done;
    for (int i = 0; i < N_PROMPT; i++)
        prompt[i] = 3 + (int32_t)((i * 37u + (unsigned)(i * i) % 23u) % (unsigned)(info.n_vocab - 3));
    static const char *methods[] = {"dense", "infinitehip", "hip", "tokenselect"};
    for (int mi = 0; mi < 4; mi++) {
        lc_context_params cp = lc_context_default_params();
        cp.n_ctx             = 16384;
        cp.n_batch           = 2048;
        cp.attn              = methods[mi];
        cp.sparse_always     = true;
        int32_t t0[N_OUT], t1[N_OUT];
        CHECKF(generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t0, l0, e0, NULL) == LC_OK, "%s: %s", cp.attn,
               lc_last_error());
        /* split: the GPU tier rounds up to one 2 MiB unit (128 pages of 16 KiB = 8192 tokens);
         * then everything in the host tier */
        const int64_t host[2] = {16384 - 4096, 16384};
        for (int hi = 0; hi < 2; hi++) {
            cp.kv_host_tokens = host[hi];
            lc_kv_usage u;
            memset(&u, 0, sizeof u);
            memset(l1, 0xff, sizeof(float) * (size_t)info.n_vocab); /* poison */
            const int st = generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t1, l1, NULL, &u);
            CHECKF(st == LC_OK, "%s, host tier %lld: %s", cp.attn, (long long)host[hi],
                   lc_last_error());
            if (st != LC_OK) continue;
            CHECKF(!memcmp(t0, t1, sizeof t0), "%s, host tier %lld tokens: other tokens",
                   cp.attn, (long long)host[hi]);
            CHECKF(!memcmp(l0, l1, sizeof(float) * (size_t)info.n_vocab),
                   "%s, host tier %lld tokens: other logits", cp.attn, (long long)host[hi]);
            /* 10,001 tokens in 64-token pages: 157 */
            const int64_t gpu = hi == 0 ? 128 : 0;
            CHECKF(u.gpu_pages == gpu && u.gpu_used == gpu && u.host_used == 157 - gpu &&
                       u.host_pages == 256 - gpu,
                   "%s: usage gpu %lld/%lld host %lld/%lld", cp.attn, (long long)u.gpu_used,
                   (long long)u.gpu_pages, (long long)u.host_used, (long long)u.host_pages);
        }
        /* the slot cache (kv/slab_bank.h) over the host tier: 16 slot pages; every token and the
         * last step's logits as all on the GPU, and the cache was used */
        if (mi == 1 || mi == 2) {
            /* (HiP's default keeps its first 3 layers dense: the model has 2) */
            cp.attn_settings  = mi == 2 ? "dense-layers=0" : NULL;
            cp.kv_host_tokens = 0;
            CHECKF(generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t0, l0, e0, NULL) == LC_OK, "%s: %s", cp.attn,
                   lc_last_error());
            cp.kv_host_tokens       = 16384;
            cp.kv_slot_cache_tokens = 1024;
            lc_kv_usage u;
            memset(&u, 0, sizeof u);
            memset(e1, 0xff, sizeof(float) * (size_t)info.n_vocab); /* poison */
            const int st = generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t1, l1, e1, &u);
            CHECKF(st == LC_OK, "%s, slot cache: %s", cp.attn, lc_last_error());
            CHECKF(st == LC_OK && !memcmp(t0, t1, sizeof t0), "%s, slot cache: other tokens", cp.attn);
            CHECKF(st == LC_OK && !memcmp(e0, e1, sizeof(float) * (size_t)info.n_vocab),
                   "%s, slot cache: other logits at the last step", cp.attn);
            CHECKF(u.cache_slots == 16 * info.n_head_kv && u.cache_misses > 0 && u.cache_used > 0,
                   "%s: %lld slots, %llu misses, %lld used", cp.attn, (long long)u.cache_slots,
                   (unsigned long long)u.cache_misses, (long long)u.cache_used);
            cp.kv_slot_cache_tokens = 0;
        }
    }
    /* 4. a host tier beyond the host's memory: refused, naming pinned host memory */
    {
        lc_context_params cp = lc_context_default_params();
        cp.n_ctx             = 16384;
        cp.kv_tokens         = 1LL << 30; /* 1 KiB a token: 1 TiB */
        cp.kv_host_tokens    = cp.kv_tokens;
        lc_context *c        = NULL;
        const int   st       = lc_context_create(m, &cp, &c);
        CHECKF(st == LC_ERR_NOMEM && !c && strstr(lc_last_error(), "pinned host memory"),
               "a 1 TiB host tier: %d, %s", st, lc_last_error());
        if (c) lc_context_free(c);
    }
done:
    free(prompt), free(l0), free(l1), free(e0), free(e1);
    lc_model_free(m);
}

int main(void) {
    lc_backend *b = NULL;
    if (lc_backend_cuda_create(0, &b) != LC_OK || !b) {
        fprintf(stderr, "no CUDA device: %s\n", lc_last_error());
        return 77;
    }
    if (!b->tier_align) {
        fprintf(stderr, "this GPU or driver cannot map host memory into its address space: "
                        "no host tier to test\n");
        b->free(b);
        return 77;
    }
    fprintf(stderr, "mapping granularity %zu bytes\n", b->tier_align);
    pool_checks(b);
    b->free(b);
    engine_checks();
    TEST_END();
}
