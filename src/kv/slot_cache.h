/*
 * slot_cache.h — the GPU slot cache over a host-resident KV tier (issue 24 item 2; HiP §3.3's
 * "vector map" page table with InfiniteHiP §3.3's LRU, spec/infinitehip-and-hip.md §5): a bank
 * of n_slots slots, each holding one (layer, page, kv_head) slab of the paged KV cache (kv.h),
 * and a page table that maps every slab to its slot or to "not cached". A step asks for the
 * slabs it will read (lc_slot_cache_map); hits are answered from the table, misses get a slot —
 * a free one, else the least recently used one not asked for in this step — and come back as a
 * list of fills (slab -> slot) for one gather transfer per layer (FlashH2D) to carry out before
 * the kernels read the bank. A slab asked for twice in a step is one miss and then a hit.
 *
 * This file is the host side, which is also the CPU twin: the same table and LRU drive the CPU
 * backend's copy (lc_slot_cache_gather) and, later, the CUDA gather kernel, so the order of hits,
 * misses and evictions is the same on both. A bank is one instance: InfiniteHiP keeps one for the
 * keys its pruning stages read and one for the K+V the sparse attention reads, each with its own
 * hit and miss counters, split by a caller-given stage index (Table 20's mask / SA hit ratios).
 *
 * Memory: the table is one int32 per slab, n_layer · n_pages · n_kv_head · 4 bytes, plus 24
 * bytes per slot (reverse map, LRU links, last step). SmolLM2 (30 layers, 3 KV heads) at 10M
 * tokens in 64-token pages: 156,250 pages → 14.1M slabs → 56 MB of table.
 */
#ifndef LC_SLOT_CACHE_H
#define LC_SLOT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LC_SLOT_CACHE_STAGES 8 /* stage indices 0..7 counted apart (pruning stages, attention) */

typedef struct lc_slab {
    int32_t layer, page, head;
} lc_slab;

/* One slab to bring into the bank: its host page/layer/head, the slot it goes to, and the slab
 * that slot held until now (evicted; page -1: the slot was free). */
typedef struct lc_slab_fill {
    lc_slab slab;
    int32_t slot;
    lc_slab evicted;
} lc_slab_fill;

typedef struct lc_slot_cache_stats {
    uint64_t hits[LC_SLOT_CACHE_STAGES], misses[LC_SLOT_CACHE_STAGES];
    uint64_t evictions;    /* misses that displaced a cached slab */
    int32_t  n_slots, n_used;
} lc_slot_cache_stats;

typedef struct lc_slot_cache lc_slot_cache;

/* A bank of n_slots slots over slabs of n_layer layers x n_pages pages x n_kv_head heads. */
int  lc_slot_cache_create(int32_t n_slots, int32_t n_layer, int64_t n_pages, int32_t n_kv_head,
                          lc_slot_cache **out);
void lc_slot_cache_free(lc_slot_cache *c);
/* Bytes of host memory the cache's table and slot metadata take. */
size_t lc_slot_cache_meta_bytes(int32_t n_slots, int32_t n_layer, int64_t n_pages,
                                int32_t n_kv_head);

/* A new step: slots asked for from here on are protected from eviction until the next. */
void lc_slot_cache_step(lc_slot_cache *c);

/* The slots of n slabs (slots[i] for slabs[i]); misses are appended to fills (room for n),
 * *n_fills counts them. Counted as hits/misses of `stage`. LC_ERR_CONTEXT, naming both sizes,
 * when the step asks for more distinct slabs than the bank has slots: then nothing of this call
 * is changed except that the slabs it had mapped before failing stay mapped (their data is
 * still to be filled: every fill already appended is valid). */
int lc_slot_cache_map(lc_slot_cache *c, const lc_slab *slabs, int32_t n, int32_t stage,
                      int32_t *slots, lc_slab_fill *fills, int32_t *n_fills);

/* The slot holding a slab, or -1 (no LRU update, no counting). */
int32_t lc_slot_cache_lookup(const lc_slot_cache *c, lc_slab s);

/* Forget every slab of a page (its sequence released it; a new owner writes new data). */
void lc_slot_cache_drop_page(lc_slot_cache *c, int32_t page);

void lc_slot_cache_get_stats(const lc_slot_cache *c, lc_slot_cache_stats *out);

/* The CPU twin of the per-layer gather (FlashH2D): for each fill, copy slab_bytes from the
 * host tier at host_base + slab_offset(slab) into bank + slot * slab_bytes. slab_offset is the
 * host tier's layout (kv.h: [layer][page][kv_head] slabs of page_size x head_dim elements). */
void lc_slot_cache_gather(const lc_slab_fill *fills, int32_t n_fills, const uint8_t *host_base,
                          size_t (*slab_offset)(lc_slab, const void *user), const void *user,
                          uint8_t *bank, size_t slab_bytes);

#endif
