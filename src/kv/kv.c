/*
 * kv.c — paged KV cache: page pool, free list, per-sequence page tables (see kv.h).
 */
#include "kv/kv.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

int lc_kv_create(lc_backend *b, int32_t n_layer, int32_t n_kv_head, int32_t head_dim,
                 int32_t page_size, int64_t n_pages, lc_kv_cache **out) {
    *out = NULL;
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
    kv->k          = lc_calloc((size_t)n_layer, sizeof(void *), "kv pools");
    kv->v          = lc_calloc((size_t)n_layer, sizeof(void *), "kv pools");
    kv->free_pages = lc_malloc(sizeof(int32_t) * (size_t)n_pages, "kv free list");
    if (!kv->k || !kv->v || !kv->free_pages) {
        lc_kv_free(kv);
        return LC_ERR_NOMEM;
    }
    size_t pool_bytes;
    if (!lc_mul_size((size_t)n_pages, (size_t)page_size * (size_t)n_kv_head * (size_t)head_dim *
                     (size_t)kv->elem_bytes, &pool_bytes)) {
        lc_kv_free(kv);
        return lc_fail(LC_ERR_CONTEXT, "KV pool of %lld pages overflows", (long long)n_pages);
    }
    for (int32_t l = 0; l < n_layer; l++) {
        kv->k[l] = b->alloc(b, pool_bytes, "kv pool (K)");
        kv->v[l] = b->alloc(b, pool_bytes, "kv pool (V)");
        if (!kv->k[l] || !kv->v[l]) {
            lc_kv_free(kv);
            return lc_fail(LC_ERR_NOMEM, "out of memory for the KV cache: %d layers x %zu bytes "
                           "x 2 (%lld pages of %d tokens); lower --ctx or --kv-tokens",
                           n_layer, pool_bytes, (long long)n_pages, page_size);
        }
    }
    for (int64_t i = 0; i < n_pages; i++) kv->free_pages[i] = (int32_t)(n_pages - 1 - i);
    kv->n_free = n_pages;
    *out       = kv;
    return LC_OK;
}

void lc_kv_free(lc_kv_cache *kv) {
    if (!kv) return;
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->k) kv->backend->dealloc(kv->backend, kv->k[l]);
        if (kv->v) kv->backend->dealloc(kv->backend, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->free_pages);
    free(kv);
}

uint64_t lc_kv_page_bytes(const lc_kv_cache *kv) {
    return 2ull * (uint64_t)kv->n_layer * (uint64_t)kv->page_size * (uint64_t)kv->n_kv_head *
           (uint64_t)kv->head_dim * (uint64_t)kv->elem_bytes;
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
    while (seq->n_pages < need) seq->pages[seq->n_pages++] = kv->free_pages[--kv->n_free];
    return LC_OK;
}

void lc_kv_seq_release(lc_kv_cache *kv, lc_kv_seq *seq) {
    for (int64_t i = seq->n_pages - 1; i >= 0; i--) kv->free_pages[kv->n_free++] = seq->pages[i];
    free(seq->pages);
    memset(seq, 0, sizeof *seq);
}

lc_kv_layer_view lc_kv_layer(const lc_kv_cache *kv, int32_t layer) {
    lc_kv_layer_view v = {kv->k[layer], kv->v[layer], kv->page_size, kv->n_kv_head,
                          kv->head_dim};
    return v;
}
