/*
 * kv.c — paged KV cache: page pool in one or two tiers, free lists, per-sequence page tables
 * (see kv.h; DESIGN.md "KV pages", issue 24 item 1).
 */
#include "kv/kv.h"
#include "kv/slab_bank.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
    while (b) {
        const uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

int64_t lc_kv_dev_pages(const lc_backend *b, uint64_t page_bytes_one_layer, int64_t n_pages,
                        int64_t n_host_pages) {
    int64_t dev = n_pages - n_host_pages;
    if (n_host_pages <= 0 || dev <= 0) return n_host_pages <= 0 ? n_pages : 0;
    const uint64_t align = b->tier_align > 1 ? (uint64_t)b->tier_align : 1;
    const uint64_t unit  = align / gcd_u64(align, page_bytes_one_layer ? page_bytes_one_layer : 1);
    dev = (int64_t)(((uint64_t)dev + unit - 1) / unit * unit);
    return dev > n_pages ? n_pages : dev;
}

int lc_kv_create(lc_backend *b, int32_t n_layer, int32_t n_kv_head, int32_t head_dim,
                 int32_t page_size, int64_t n_pages, int64_t n_host_pages, bool e4m3,
                 lc_kv_cache **out) {
    *out = NULL;
    if (e4m3 && !b->kv_e4m3)
        return lc_fail(LC_ERR_UNSUPPORTED, "an fp8 KV cache (--kv-type fp8) needs a backend "
                       "whose kernels read it (CUDA); the %s backend keeps its KV in its own "
                       "type", b->name);
    if (n_host_pages < 0 || n_host_pages > n_pages)
        return lc_fail(LC_ERR_INVALID_ARG, "KV host tier of %lld pages out of range (0 .. %lld)",
                       (long long)n_host_pages, (long long)n_pages);
    if (page_size <= 0 || (page_size & (page_size - 1)) != 0)
        return lc_fail(LC_ERR_INVALID_ARG, "KV page size %d is not a power of two", page_size);
    if (n_pages <= 0 || n_pages > INT32_MAX)
        return lc_fail(LC_ERR_INVALID_ARG, "KV page count %lld out of range", (long long)n_pages);
    lc_kv_cache *kv = lc_calloc(1, sizeof *kv, "kv cache");
    if (!kv) return LC_ERR_NOMEM;
    kv->backend    = b;
    kv->n_layer    = n_layer;
    kv->n_kv_head  = n_kv_head;
    kv->head_dim   = head_dim;
    kv->page_size  = page_size;
    kv->n_pages    = n_pages;
    kv->elem_bytes = b->kv_type == LC_TYPE_BF16 || b->kv_type == LC_TYPE_F16 ? 2 : 4;
    kv->e4m3       = e4m3;
    kv->slab_bytes = lc_kv_slab_bytes(e4m3, b->kv_type, page_size, head_dim);
    kv->k          = lc_calloc((size_t)n_layer, sizeof(void *), "kv pools");
    kv->v          = lc_calloc((size_t)n_layer, sizeof(void *), "kv pools");
    kv->k_centre   = lc_calloc((size_t)n_layer, sizeof(float *), "kv key centres");
    kv->free_pages = lc_malloc(sizeof(int32_t) * (size_t)n_pages, "kv free list");
    if (!kv->k || !kv->v || !kv->k_centre || !kv->free_pages) {
        lc_kv_free(kv);
        return LC_ERR_NOMEM;
    }
    size_t pool_bytes;
    if (!lc_mul_size((size_t)n_pages, kv->slab_bytes * (size_t)n_kv_head, &pool_bytes)) {
        lc_kv_free(kv);
        return lc_fail(LC_ERR_CONTEXT, "KV pool of %lld pages overflows", (long long)n_pages);
    }
    const size_t page_bytes = pool_bytes / (size_t)n_pages;
    kv->n_dev_pages         = lc_kv_dev_pages(b, page_bytes, n_pages, n_host_pages);
    kv->tiered              = kv->n_dev_pages < n_pages && b->alloc_tiered;
    const size_t dev_bytes  = (size_t)kv->n_dev_pages * page_bytes;
    for (int32_t l = 0; l < n_layer; l++) {
        if (kv->tiered) {
            kv->k[l] = b->alloc_tiered(b, dev_bytes, pool_bytes - dev_bytes, "kv pool (K)");
            kv->v[l] = kv->k[l] ? b->alloc_tiered(b, dev_bytes, pool_bytes - dev_bytes,
                                                  "kv pool (V)") : NULL;
        } else {
            kv->k[l] = b->alloc(b, pool_bytes, "kv pool (K)");
            kv->v[l] = kv->k[l] ? b->alloc(b, pool_bytes, "kv pool (V)") : NULL;
        }
        if (!kv->k[l] || !kv->v[l]) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", lc_last_error());
            lc_kv_free(kv);
            return lc_fail(LC_ERR_NOMEM, "out of memory for the KV cache: %d layers x %zu bytes "
                           "x 2 (%lld pages of %d tokens, %lld of them in host memory); lower "
                           "--ctx or --kv-tokens (%s)", n_layer, pool_bytes, (long long)n_pages,
                           page_size, (long long)(n_pages - kv->n_dev_pages), msg);
        }
    }
    /* two stacks, lowest id on top: device pages [0, n_dev), host pages from n_dev up */
    const int64_t nd = kv->n_dev_pages, nh = n_pages - nd;
    for (int64_t i = 0; i < nd; i++) kv->free_pages[i] = (int32_t)(nd - 1 - i);
    for (int64_t i = 0; i < nh; i++) kv->free_pages[nd + i] = (int32_t)(n_pages - 1 - i);
    kv->n_free_dev  = nd;
    kv->n_free_host = nh;
    kv->n_free      = n_pages;
    *out       = kv;
    return LC_OK;
}

void lc_kv_free(lc_kv_cache *kv) {
    if (!kv) return;
    lc_slab_bank_free(kv->bank);
    lc_backend *b = kv->backend;
    for (int32_t l = 0; l < kv->n_layer; l++)
        for (int part = 0; part < 2; part++) {
            void **pools = part ? kv->v : kv->k;
            if (!pools || !pools[l]) continue;
            if (kv->tiered)
                b->dealloc_tiered(b, pools[l]);
            else
                b->dealloc(b, pools[l]);
        }
    free(kv->k);
    free(kv->v);
    free(kv->k_centre);
    free(kv->free_pages);
    free(kv);
}

uint64_t lc_kv_page_bytes(const lc_kv_cache *kv) {
    return 2ull * (uint64_t)kv->n_layer * (uint64_t)kv->n_kv_head * (uint64_t)kv->slab_bytes;
}

void lc_kv_set_key_centre(lc_kv_cache *kv, int32_t layer, const float *centre) {
    if (kv->e4m3 && layer >= 0 && layer < kv->n_layer) kv->k_centre[layer] = centre;
}

int64_t lc_kv_pages_for(const lc_kv_cache *kv, int64_t n_tokens) {
    return (n_tokens + kv->page_size - 1) / kv->page_size;
}

int lc_kv_seq_reserve(lc_kv_cache *kv, lc_kv_seq *seq, int64_t n_tokens) {
    const int64_t need = lc_kv_pages_for(kv, n_tokens);
    if (need <= seq->n_pages) return LC_OK;
    const int64_t extra = need - seq->n_pages;
    if (extra > kv->n_free)
        return lc_fail(LC_ERR_CONTEXT, "KV cache full: %lld more pages of %d tokens needed, %lld "
                       "free of %lld", (long long)extra, kv->page_size, (long long)kv->n_free,
                       (long long)kv->n_pages);
    if (need > seq->cap) {
        int64_t cap = seq->cap ? seq->cap : 16;
        while (cap < need) cap *= 2;
        int32_t *p = realloc(seq->pages, sizeof(int32_t) * (size_t)cap);
        if (!p) return lc_fail(LC_ERR_NOMEM, "out of memory growing a page table");
        seq->pages = p;
        seq->cap   = cap;
    }
    while (seq->n_pages < need) { /* device pages first (spill policy) */
        seq->pages[seq->n_pages++] =
            kv->n_free_dev > 0 ? kv->free_pages[--kv->n_free_dev]
                               : kv->free_pages[kv->n_dev_pages + --kv->n_free_host];
        kv->n_free--;
    }
    return LC_OK;
}

void lc_kv_seq_release(lc_kv_cache *kv, lc_kv_seq *seq) {
    if (kv->bank) lc_slab_bank_drop_pages(kv->bank, seq->pages, seq->n_pages);
    for (int64_t i = seq->n_pages - 1; i >= 0; i--) {
        const int32_t pg = seq->pages[i];
        if (pg < kv->n_dev_pages)
            kv->free_pages[kv->n_free_dev++] = pg;
        else
            kv->free_pages[kv->n_dev_pages + kv->n_free_host++] = pg;
        kv->n_free++;
    }
    free(seq->pages);
    memset(seq, 0, sizeof *seq);
}

lc_kv_layer_view lc_kv_layer(const lc_kv_cache *kv, int32_t layer) {
    lc_kv_layer_view v = {kv->k[layer], kv->v[layer], kv->page_size, kv->n_kv_head,
                          kv->head_dim, lc_slab_bank_map(kv->bank, layer), kv->e4m3,
                          kv->e4m3 ? kv->k_centre[layer] : NULL};
    return v;
}
