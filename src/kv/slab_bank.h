/*
 * slab_bank.h — the GPU slot cache of the sparse attention's reads over the host KV tier (issue
 * 24 item 2; InfiniteHiP §3.3's SA bank with its LRU, HiP §3.3's vector-map page table,
 * spec/infinitehip-and-hip.md §5). A set of GPU pages of the KV pools is set aside as slots; a
 * slot holds a copy of one (layer, page, kv_head) slab of a host-tier page, and each layer's
 * slab map (lc_kv_layer_view.slab_map, in GPU memory) sends attn_segments to the copy. Every
 * other read, and every miss, reads the page in place over PCIe, as the host tier always did, so
 * the cache changes where bytes come from and never what they are.
 *
 * Driving it (the engine, after each decode forward): for each decode sequence and layer whose
 * selection was recomputed in that forward (lc_attn_method.decode_reads), lc_slab_bank_use
 * names the slabs its attention read — sink, selected segments and window — and
 * lc_slab_bank_commit brings the missing ones in, one copy_slabs launch per pool and layer (the
 * FlashH2D gather), evicting the least recently used slots (kv/slot_cache.h, one LRU a layer),
 * and uploads the changed range of each layer's map. The next steps read the copies (a
 * selection is reused between refreshes: InfiniteHiP recomputes its last stage every 4 steps
 * by default). One step behind, by design: the forward itself issues device work only, so it
 * stays graph-capturable, and the host learns a selection only after the forward.
 *
 * Only slabs of full pages (every token written) of the host tier are cached: a full page never
 * changes while its sequence holds it, so a copy cannot go stale; a page's copies are dropped
 * when its sequence releases it (lc_kv_seq_release calls lc_slab_bank_drop_pages). A step whose
 * slabs outnumber a layer's slots caches what fits (the rest is read in place and counted as
 * overflow): the cache is an optimisation, so a small one is slower, never wrong.
 *
 * Memory: GPU: the slot pages (n_pages of the pool each) and a map of one int32 per slab of
 * every layer (n_layer x n_pages x n_kv_head x 4 bytes); host: the map's mirror, the step
 * stamps that keep a slab asked for twice in a step one lookup, and the LRU's table (the same
 * again, three times) plus 24 bytes a slot. Llama-3.1-8B at 1M tokens in 64-token pages: 16,384
 * pages x 8 heads x 32 layers = 4.2M slabs: 16 MiB on the GPU, 48 MiB on the host.
 */
#ifndef LC_SLAB_BANK_H
#define LC_SLAB_BANK_H

#include "kv/kv.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct lc_slab_bank lc_slab_bank;

typedef struct lc_slab_bank_stats {
    int64_t  slots;     /* per layer: slot pages x n_kv_head */
    int64_t  used;      /* slots holding a copy, all layers */
    uint64_t hits;      /* slabs asked for that were cached */
    uint64_t misses;    /* slabs brought in */
    uint64_t evictions; /* misses that displaced a copy */
    uint64_t overflow;  /* slabs asked for past a layer's slots in one step (read in place) */
    uint64_t bytes_in;  /* bytes gathered into slots (K and V) */
    uint64_t map_bytes; /* bytes of slab map uploaded */
} lc_slab_bank_stats;

/* A bank of n_slot_pages pages taken from kv's free device pages (LC_ERR_CONTEXT when fewer are
 * free), attached to kv (kv->bank: lc_kv_layer passes its maps, lc_kv_seq_release drops
 * copies). Needs the backend's copy_slabs. Freed with lc_slab_bank_free (before lc_kv_free,
 * which frees an attached bank itself). */
int  lc_slab_bank_create(lc_kv_cache *kv, int64_t n_slot_pages, lc_slab_bank **out);
void lc_slab_bank_free(lc_slab_bank *bk);

/* Layer's slab map in backend memory (lc_kv_layer_view.slab_map). */
const int32_t *lc_slab_bank_map(const lc_slab_bank *bk, int32_t layer);

/* A new step: slabs used from here on are protected from eviction until the next. */
void lc_slab_bank_step(lc_slab_bank *bk);

/* The slabs a sequence's attention read at layer: the tokens of n_segs segments, for KV head
 * `head` (-1: every head), through its page table; only its first n_full_pages pages (full) and
 * only host-tier pages are taken. Pending until lc_slab_bank_commit. */
int lc_slab_bank_use(lc_slab_bank *bk, int32_t layer, const int32_t *page_table,
                     int64_t n_full_pages, const lc_segment *segs, int32_t n_segs, int32_t head);

/* Distinct slabs pending at layer in this step (lc_slab_bank_use so far). */
int64_t lc_slab_bank_pending(const lc_slab_bank *bk, int32_t layer);

/* Map every pending slab (hits refresh the LRU), gather the misses into their slots and upload
 * the maps' changed ranges. */
int lc_slab_bank_commit(lc_slab_bank *bk);

/* Forget the copies of n pages (their sequence released them); their map entries point home. */
void lc_slab_bank_drop_pages(lc_slab_bank *bk, const int32_t *pages, int64_t n);

void lc_slab_bank_get_stats(const lc_slab_bank *bk, lc_slab_bank_stats *out);

#endif
