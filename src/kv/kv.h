/*
 * kv.h — the paged KV cache (DESIGN.md "KV pages"): a pool of fixed-size pages shared by all
 * sequences, a free list, and a page table per sequence. A page holds page_size consecutive
 * tokens of one sequence for every layer: each layer has its own K and V pools laid out
 * [page][kv_head][token][head_dim], so one (layer, page, kv_head) slab is contiguous — the
 * unit a later tier moves between GPU and host. Keys are stored before RoPE.
 */
#ifndef LC_KV_H
#define LC_KV_H

#include "backend/backend.h"
#include "format/quant.h"

#include <stdint.h>

typedef struct lc_kv_cache {
    lc_backend *backend;
    int32_t     n_layer;
    int32_t     n_kv_head;
    int32_t     head_dim;
    int32_t     page_size;
    int64_t     n_pages;
    int32_t     elem_bytes; /* of the backend's kv_type */
    void      **k;          /* [n_layer] pools in backend memory */
    void      **v;
    int32_t    *free_pages; /* stack of free page ids */
    int64_t     n_free;
} lc_kv_cache;

/* Per-sequence page table. */
typedef struct lc_kv_seq {
    int32_t *pages;
    int64_t  n_pages;
    int64_t  cap;
} lc_kv_seq;

int  lc_kv_create(lc_backend *b, int32_t n_layer, int32_t n_kv_head, int32_t head_dim,
                  int32_t page_size, int64_t n_pages, lc_kv_cache **out);
void lc_kv_free(lc_kv_cache *kv);
/* Bytes of one page over all layers, K and V. */
uint64_t lc_kv_page_bytes(const lc_kv_cache *kv);
int64_t  lc_kv_pages_for(const lc_kv_cache *kv, int64_t n_tokens);

/* Make room for a sequence to hold n_tokens in total; LC_ERR_CONTEXT when the pool is out of
 * pages (nothing is allocated then). */
int  lc_kv_seq_reserve(lc_kv_cache *kv, lc_kv_seq *seq, int64_t n_tokens);
/* Return all pages of a sequence to the pool. */
void lc_kv_seq_release(lc_kv_cache *kv, lc_kv_seq *seq);

lc_kv_layer_view lc_kv_layer(const lc_kv_cache *kv, int32_t layer);

#endif
