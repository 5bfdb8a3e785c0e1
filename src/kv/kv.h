/*
 * kv.h — the paged KV cache (DESIGN.md "KV pages"): a pool of fixed-size pages shared by all
 * sequences, a free list, and a page table per sequence. A page holds page_size consecutive
 * tokens of one sequence for every layer: each layer has its own K and V pools laid out
 * [page][kv_head][token][head_dim], so one (layer, page, kv_head) slab is contiguous — the
 * unit a later tier moves between GPU and host. Keys are stored before RoPE.
 *
 * Two tiers (issue 24 item 1): page ids [0, n_dev_pages) live in the backend's memory, ids
 * [n_dev_pages, n_pages) in pinned host memory that the kernels read and write at the same
 * addresses (backend alloc_tiered: on CUDA one virtual range, device memory with host memory
 * mapped behind it), so a page id is an address in either tier and the kernels do not change.
 * Policy: spill — a sequence takes free device pages first, host pages when none is left; a
 * released page goes back to its tier's free stack.
 */
#ifndef LC_KV_H
#define LC_KV_H

#include "backend/backend.h"
#include "format/quant.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct lc_kv_cache {
    lc_backend *backend;
    int32_t     n_layer;
    int32_t     n_kv_head;
    int32_t     head_dim;
    int32_t     page_size;
    int64_t     n_pages;
    int64_t     n_dev_pages; /* of n_pages, those in backend memory (ids below it) */
    int32_t     elem_bytes;  /* of the backend's kv_type (unused where e4m3) */
    bool        e4m3;        /* the pools hold the fp8 layout (backend.h LC_KV_E4M3) */
    size_t      slab_bytes;  /* of one page of one KV head in one pool (lc_kv_slab_bytes) */
    /* e4m3: [n_layer] the layers' key centres ([n_kv_head][head_dim] in backend memory, NULL:
     * none; not owned: the model's key biases, lc_kv_set_key_centre) */
    const float **k_centre;
    bool        tiered;      /* pools from alloc_tiered (freed with dealloc_tiered) */
    void      **k;           /* [n_layer] pools: n_dev_pages in backend memory, then host pages */
    void      **v;
    int32_t    *free_pages;  /* [0, n_free_dev): free device page ids (a stack); from
                                n_dev_pages up, n_free_host free host page ids */
    int64_t     n_free_dev, n_free_host;
    int64_t     n_free;      /* n_free_dev + n_free_host */
    /* NULL, or the slot cache of host-tier slabs in device pages (kv/slab_bank.h): lc_kv_layer
     * gives its slab maps, lc_kv_seq_release drops the copies of released pages, lc_kv_free
     * frees it */
    struct lc_slab_bank *bank;
} lc_kv_cache;

/* Per-sequence page table. */
typedef struct lc_kv_seq {
    int32_t *pages;
    int64_t  n_pages;
    int64_t  cap;
} lc_kv_seq;

/* n_pages in all, n_host_pages of them in the host tier (0: one tier). The device tier is
 * rounded up to what the backend can map (lc_kv_dev_pages), so it may hold a few more. e4m3:
 * the fp8 layout (LC_ERR_UNSUPPORTED where the backend's kernels do not read it), else the
 * backend's kv_type. */
int  lc_kv_create(lc_backend *b, int32_t n_layer, int32_t n_kv_head, int32_t head_dim,
                  int32_t page_size, int64_t n_pages, int64_t n_host_pages, bool e4m3,
                  lc_kv_cache **out);
/* The key centre of a layer of an fp8 cache (see k_centre); ignored for other caches. */
void lc_kv_set_key_centre(lc_kv_cache *kv, int32_t layer, const float *centre);
/* The device pages of a pool of n_pages with n_host_pages asked for the host tier: n_pages -
 * n_host_pages rounded up to a multiple of the pages in one unit of b->tier_align bytes (one
 * page's pool bytes: page_bytes_one_layer), at most n_pages. */
int64_t lc_kv_dev_pages(const lc_backend *b, uint64_t page_bytes_one_layer, int64_t n_pages,
                        int64_t n_host_pages);
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
