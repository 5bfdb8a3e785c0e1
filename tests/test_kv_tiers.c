/*
 * test_kv_tiers.c — the KV cache's host tier (issue 24 item 1; kv.h, budget.c, the engine's
 * lc_context_params.kv_host_tokens) on the CPU, and the slab copy op's CPU twin:
 *   1. lc_kv_dev_pages rounds the device tier up to the backend's mapping granularity (a
 *      backend struct with tier_align set stands in for CUDA's 2 MiB);
 *   2. the page pool fills the device tier first and spills to host pages, a release returns
 *      each page to its tier's stack (a brute-force model of both stacks over random
 *      reserve / release steps), running out is refused and changes nothing;
 *   3. lc_cpu_copy_slabs moves exactly the listed slabs (poisoned destination, the others
 *      untouched) and refuses misaligned or odd-sized slabs;
 *   4. a context on a generated model with most of its KV in the host tier gives the same
 *      tokens and logits as with one tier, dense and InfiniteHiP, and lc_context_kv_usage
 *      counts the pages per tier; kv_host_tokens past the capacity is refused.
 * The GPU half (host memory mapped behind device memory, read by every kernel) is
 * test_kv_tiers_cuda.c.
 */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "kv/kv.h"
#include "longctx.h"
#include "test_util.h"
#include "generated_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void rounding(void) {
    lc_backend b;
    memset(&b, 0, sizeof b);
    /* no granularity: the split is exact */
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 300) == 700);
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 0) == 1000);
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 1000) == 0);
    b.tier_align = 2u << 20;
    /* 24 KiB pages: 6 MiB = 256 pages is the smallest whole number of both */
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 300) == 768);
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 999) == 256);
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 1000) == 0);  /* all in the host tier */
    CHECK(lc_kv_dev_pages(&b, 24576, 1000, 100) == 1000); /* rounded past the pool */
    CHECK(lc_kv_dev_pages(&b, 32768, 1000, 300) == 704);  /* 64 pages a unit */
    CHECK(lc_kv_dev_pages(&b, 32768, 1000, 0) == 1000);
}

/* the model: a set of free ids per tier, lowest first out of each (kv.c's order) */
typedef struct model_pool {
    int64_t n_pages, n_dev;
    uint8_t used[64];
} model_pool;

static int32_t model_take(model_pool *m) {
    for (int64_t i = 0; i < m->n_dev; i++)
        if (!m->used[i]) return m->used[i] = 1, (int32_t)i;
    for (int64_t i = m->n_dev; i < m->n_pages; i++)
        if (!m->used[i]) return m->used[i] = 1, (int32_t)i;
    return -1;
}

static void spill(lc_backend *b) {
    lc_kv_cache *kv = NULL;
    CHECK(lc_kv_create(b, 2, 2, 16, 16, 40, 41, false, &kv) == LC_ERR_INVALID_ARG && !kv);
    CHECK(lc_kv_create(b, 2, 2, 16, 16, 40, -1, false, &kv) == LC_ERR_INVALID_ARG && !kv);
    CHECK(lc_kv_create(b, 2, 2, 16, 16, 40, 25, false, &kv) == LC_OK && kv);
    if (!kv) return;
    CHECK(kv->n_dev_pages == 15 && kv->n_free_dev == 15 && kv->n_free_host == 25 &&
          kv->n_free == 40 && !kv->tiered);
    lc_kv_seq a = {0}, c = {0};
    CHECK(lc_kv_seq_reserve(kv, &a, 10 * 16) == LC_OK && a.n_pages == 10);
    for (int64_t i = 0; i < a.n_pages; i++) CHECK(a.pages[i] == i); /* device pages, in order */
    CHECK(lc_kv_seq_reserve(kv, &c, 8 * 16 - 3) == LC_OK && c.n_pages == 8);
    for (int64_t i = 0; i < 5; i++) CHECK(c.pages[i] == 10 + i);
    for (int64_t i = 5; i < 8; i++) CHECK(c.pages[i] == 15 + (i - 5)); /* spilled */
    CHECK(kv->n_free_dev == 0 && kv->n_free_host == 22 && kv->n_free == 22);
    /* too much: refused, nothing taken */
    CHECK(lc_kv_seq_reserve(kv, &c, 31 * 16) == LC_ERR_CONTEXT && c.n_pages == 8 &&
          kv->n_free == 22);
    lc_kv_seq_release(kv, &a);
    CHECK(kv->n_free_dev == 10 && kv->n_free_host == 22 && a.n_pages == 0 && !a.pages);
    lc_kv_seq d = {0};
    CHECK(lc_kv_seq_reserve(kv, &d, 12 * 16) == LC_OK);
    int dev = 0;
    for (int64_t i = 0; i < d.n_pages; i++) dev += d.pages[i] < 15;
    CHECKF(dev == 10, "after a release: %d of 12 new pages on the device tier, want 10", dev);
    lc_kv_seq_release(kv, &c);
    lc_kv_seq_release(kv, &d);
    CHECK(kv->n_free_dev == 15 && kv->n_free_host == 25 && kv->n_free == 40);

    /* random steps against the model: every page a sequence gets is the model's choice */
    uint64_t   rng = 7;
    model_pool mp  = {.n_pages = 40, .n_dev = 15};
    lc_kv_seq  s[4];
    memset(s, 0, sizeof s);
    int bad = 0;
    for (int step = 0; step < 2000; step++) {
        const int i = (int)(test_rng_next(&rng) % 4);
        if (test_rng_next(&rng) % 3 == 0) {
            for (int64_t p = 0; p < s[i].n_pages; p++) mp.used[s[i].pages[p]] = 0;
            lc_kv_seq_release(kv, &s[i]);
            continue;
        }
        const int64_t want = s[i].n_pages + 1 + (int64_t)(test_rng_next(&rng) % 4);
        const int64_t n0   = s[i].n_pages;
        const int     st   = lc_kv_seq_reserve(kv, &s[i], want * 16);
        if (st != LC_OK) {
            bad += st != LC_ERR_CONTEXT || s[i].n_pages != n0 || kv->n_free >= want - n0;
            continue;
        }
        /* a stack hands out the most recently freed page, the model the lowest: compare the
         * tier of each new page, and that it was free */
        for (int64_t p = n0; p < s[i].n_pages; p++) {
            const int32_t pg = s[i].pages[p], mine = model_take(&mp);
            bad += pg < 0 || pg >= 40 || (pg < 15) != (mine < 15);
            if (pg >= 0 && pg < 40 && pg != mine) { /* keep the model's set equal to kv's */
                mp.used[mine] = 0;
                bad += mp.used[pg];
                mp.used[pg] = 1;
            }
        }
        int64_t fd = 0, fh = 0;
        for (int64_t p = 0; p < 40; p++) fd += p < 15 && !mp.used[p], fh += p >= 15 && !mp.used[p];
        bad += fd != kv->n_free_dev || fh != kv->n_free_host || fd + fh != kv->n_free;
    }
    CHECKF(bad == 0, "random reserve/release: %d disagreements with the model", bad);
    for (int i = 0; i < 4; i++) lc_kv_seq_release(kv, &s[i]);
    CHECK(kv->n_free == 40);
    lc_kv_free(kv);
}

static void copy_slabs(void) {
    enum { SLAB = 48, N = 64 };
    uint8_t *src = aligned_alloc(64, SLAB * N), *dst = aligned_alloc(64, SLAB * N);
    CHECK(src && dst);
    if (!src || !dst) goto done;
    for (int i = 0; i < SLAB * N; i++) src[i] = (uint8_t)(i * 7 + 1);
    memset(dst, 0xa5, SLAB * N);
    lc_slab_copy c[3] = {{5, 0}, {63, 7}, {0, 63}};
    CHECK(lc_cpu_copy_slabs(src, dst, c, 3, SLAB) == LC_OK);
    int wrong = 0;
    for (int s = 0; s < N; s++) {
        int from = -1;
        for (int k = 0; k < 3; k++)
            if (c[k].dst == s) from = (int)c[k].src;
        for (int j = 0; j < SLAB; j++)
            wrong += dst[s * SLAB + j] != (from < 0 ? 0xa5 : src[from * SLAB + j]);
    }
    CHECKF(wrong == 0, "copy_slabs: %d bytes wrong", wrong);
    CHECK(lc_cpu_copy_slabs(src, dst, c, 3, 40) == LC_ERR_INVALID_ARG);     /* not 16 x */
    CHECK(lc_cpu_copy_slabs(src + 8, dst, c, 3, SLAB) == LC_ERR_INVALID_ARG); /* misaligned */
    CHECK(lc_cpu_copy_slabs(src, dst, NULL, 0, SLAB) == LC_OK);
done:
    free(src), free(dst);
}

#define N_PROMPT 700
#define N_OUT    12


static void engine(void) {
    lc_model *m = load_generated("tiny", 5, LC_DEVICE_CPU, 2);
    if (!m) return;
    lc_model_info info;
    lc_model_get_info(m, &info);
    int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = 3 + (i * 37 + (i * i) % 23) % (info.n_vocab - 3);
    float  *l1 = malloc(sizeof(float) * (size_t)info.n_vocab);
    float  *l2 = malloc(sizeof(float) * (size_t)info.n_vocab);
    static const struct {
        const char *attn, *settings;
    } methods[] = {{"dense", NULL},
                   {"infinitehip", "chunks=16,4 k=64,32 refresh=1,1 sink=4 stream=32 "
                                   "first-k=32 dense-layers=0"}};
    for (int mi = 0; mi < 2 && l1 && l2; mi++) {
        lc_context_params cp = tiny_context_params(methods[mi].attn, methods[mi].settings);
        int32_t t1[N_OUT], t2[N_OUT];
        CHECKF(generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t1, l1, NULL, NULL) == LC_OK, "%s: %s", cp.attn, lc_last_error());
        cp.kv_host_tokens = 1024 - 160; /* 10 pages on the first tier, 54 in the host tier */
        lc_kv_usage u;
        memset(&u, 0, sizeof u);
        CHECKF(generate_greedy(m, &cp, prompt, N_PROMPT, N_OUT, t2, l2, NULL, &u) == LC_OK, "%s: %s", cp.attn, lc_last_error());
        CHECKF(!memcmp(t1, t2, sizeof t1), "%s: other tokens with a host tier", cp.attn);
        CHECKF(!memcmp(l1, l2, sizeof(float) * (size_t)info.n_vocab),
               "%s: other logits with a host tier", cp.attn);
        /* at the end 711 tokens are written (700 + 11: the last sampled one is not): 45
         * 16-token pages, 10 of them on the first tier */
        CHECKF(u.page_size == 16 && u.gpu_pages == 10 && u.gpu_used == 10 &&
                   u.host_pages == 54 && u.host_used == 35,
               "%s: usage gpu %lld/%lld host %lld/%lld", cp.attn, (long long)u.gpu_used,
               (long long)u.gpu_pages, (long long)u.host_used, (long long)u.host_pages);
        cp.kv_host_tokens = 1025;
        lc_context *c     = NULL;
        CHECK(lc_context_create(m, &cp, &c) == LC_ERR_INVALID_ARG && !c &&
              strstr(lc_last_error(), "kv_host_tokens"));
    }
    free(l1), free(l2);
    lc_model_free(m);
}

int main(void) {
    rounding();
    lc_backend *b = NULL;
    CHECK(lc_backend_cpu_create(1, &b) == LC_OK && b);
    if (b) {
        spill(b);
        b->free(b);
    }
    copy_slabs();
    engine();
    TEST_END();
}
