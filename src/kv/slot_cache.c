/*
 * slot_cache.c — the GPU slot cache's host side and CPU twin (slot_cache.h; issue 24 item 2,
 * HiP §3.3 vector-map page table, InfiniteHiP §3.3 LRU): a table of one int32 per slab, and the
 * slots in one doubly linked list, most recently used first. A hit moves its slot to the front;
 * a miss takes the list's last slot — free slots sit at the back — unless that slot was asked for
 * in this step, in which case every slot was and the step's working set does not fit.
 */
#include "kv/slot_cache.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot_meta {
    int64_t  key;  /* table index of the slab it holds; -1: free */
    uint64_t step; /* last step it was asked for (0: never / dropped) */
    int32_t  prev, next;
} slot_meta;

struct lc_slot_cache {
    int32_t    n_slots, n_layer, n_kv_head;
    int64_t    n_pages;
    int32_t   *table; /* [n_layer][n_pages][n_kv_head] -> slot or -1 */
    slot_meta *slot;
    int32_t    head, tail; /* most / least recently used */
    uint64_t   step;
    int32_t    n_used;
    uint64_t   hits[LC_SLOT_CACHE_STAGES], misses[LC_SLOT_CACHE_STAGES], evictions;
};

size_t lc_slot_cache_meta_bytes(int32_t n_slots, int32_t n_layer, int64_t n_pages,
                                int32_t n_kv_head) {
    return (size_t)n_layer * (size_t)n_pages * (size_t)n_kv_head * sizeof(int32_t) +
           (size_t)n_slots * sizeof(slot_meta) + sizeof(lc_slot_cache);
}

int lc_slot_cache_create(int32_t n_slots, int32_t n_layer, int64_t n_pages, int32_t n_kv_head,
                         lc_slot_cache **out) {
    if (!out) return lc_fail(LC_ERR_INVALID_ARG, "lc_slot_cache_create: NULL output");
    *out = NULL;
    if (n_slots < 1 || n_layer < 1 || n_pages < 1 || n_kv_head < 1 || n_pages > INT32_MAX)
        return lc_fail(LC_ERR_INVALID_ARG, "slot cache: %d slots over %d layers x %lld pages x "
                       "%d KV heads is out of range", n_slots, n_layer, (long long)n_pages,
                       n_kv_head);
    const int64_t n_slabs = (int64_t)n_layer * n_pages * n_kv_head;
    lc_slot_cache *c      = lc_calloc(1, sizeof *c, "slot cache");
    if (!c) return LC_ERR_NOMEM;
    c->table = lc_malloc(sizeof(int32_t) * (size_t)n_slabs, "slot cache page table");
    c->slot  = lc_malloc(sizeof(slot_meta) * (size_t)n_slots, "slot cache slots");
    if (!c->table || !c->slot) {
        lc_slot_cache_free(c);
        return LC_ERR_NOMEM;
    }
    memset(c->table, 0xff, sizeof(int32_t) * (size_t)n_slabs); /* every entry -1 */
    for (int32_t i = 0; i < n_slots; i++)
        c->slot[i] = (slot_meta){.key = -1, .step = 0, .prev = i - 1, .next = i + 1 < n_slots ? i + 1 : -1};
    c->n_slots = n_slots, c->n_layer = n_layer, c->n_pages = n_pages, c->n_kv_head = n_kv_head;
    c->head = 0, c->tail = n_slots - 1;
    c->step = 1;
    *out    = c;
    return LC_OK;
}

void lc_slot_cache_free(lc_slot_cache *c) {
    if (!c) return;
    free(c->table);
    free(c->slot);
    free(c);
}

void lc_slot_cache_step(lc_slot_cache *c) { c->step++; }

static void unlink_slot(lc_slot_cache *c, int32_t i) {
    slot_meta *s = &c->slot[i];
    if (s->prev >= 0) c->slot[s->prev].next = s->next; else c->head = s->next;
    if (s->next >= 0) c->slot[s->next].prev = s->prev; else c->tail = s->prev;
    s->prev = s->next = -1;
}

static void push_front(lc_slot_cache *c, int32_t i) {
    slot_meta *s = &c->slot[i];
    s->prev = -1, s->next = c->head;
    if (c->head >= 0) c->slot[c->head].prev = i; else c->tail = i;
    c->head = i;
}

static void push_back(lc_slot_cache *c, int32_t i) {
    slot_meta *s = &c->slot[i];
    s->next = -1, s->prev = c->tail;
    if (c->tail >= 0) c->slot[c->tail].next = i; else c->head = i;
    c->tail = i;
}

static int64_t slab_index(const lc_slot_cache *c, lc_slab s) {
    if (s.layer < 0 || s.layer >= c->n_layer || s.page < 0 || s.page >= c->n_pages || s.head < 0 ||
        s.head >= c->n_kv_head)
        return -1;
    return ((int64_t)s.layer * c->n_pages + s.page) * c->n_kv_head + s.head;
}

int32_t lc_slot_cache_lookup(const lc_slot_cache *c, lc_slab s) {
    const int64_t k = slab_index(c, s);
    return k < 0 ? -1 : c->table[k];
}

int lc_slot_cache_map(lc_slot_cache *c, const lc_slab *slabs, int32_t n, int32_t stage,
                      int32_t *slots, lc_slab_fill *fills, int32_t *n_fills) {
    if (!c || (n > 0 && (!slabs || !slots || !fills)) || !n_fills || n < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_slot_cache_map: NULL argument or negative count");
    if (stage < 0 || stage >= LC_SLOT_CACHE_STAGES)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_slot_cache_map: stage %d is not in 0..%d", stage,
                       LC_SLOT_CACHE_STAGES - 1);
    *n_fills = 0;
    for (int32_t i = 0; i < n; i++) {
        const int64_t k = slab_index(c, slabs[i]);
        if (k < 0)
            return lc_fail(LC_ERR_INVALID_ARG, "slot cache: slab (layer %d, page %d, head %d) is "
                           "outside %d layers x %lld pages x %d heads", slabs[i].layer,
                           slabs[i].page, slabs[i].head, c->n_layer, (long long)c->n_pages,
                           c->n_kv_head);
        int32_t s = c->table[k];
        if (s >= 0) {
            c->hits[stage]++;
        } else {
            s = c->tail;
            slot_meta *m = &c->slot[s];
            if (m->key >= 0 && m->step == c->step)
                return lc_fail(LC_ERR_CONTEXT, "the GPU slot cache holds %d slabs but this step's "
                               "working set needs more: all %d are in use by this step and slab "
                               "(layer %d, page %d, head %d) still has to come in (a larger GPU "
                               "KV cache, or smaller selection budgets, fit)", c->n_slots,
                               c->n_slots, slabs[i].layer, slabs[i].page, slabs[i].head);
            lc_slab evicted = {-1, -1, -1};
            if (m->key >= 0) {
                const int64_t per_layer = c->n_pages * c->n_kv_head;
                evicted = (lc_slab){(int32_t)(m->key / per_layer),
                                    (int32_t)(m->key % per_layer / c->n_kv_head),
                                    (int32_t)(m->key % c->n_kv_head)};
                c->table[m->key] = -1;
                c->evictions++;
            } else {
                c->n_used++;
            }
            m->key      = k;
            c->table[k] = s;
            c->misses[stage]++;
            fills[(*n_fills)++] = (lc_slab_fill){.slab = slabs[i], .slot = s, .evicted = evicted};
        }
        c->slot[s].step = c->step;
        unlink_slot(c, s);
        push_front(c, s);
        slots[i] = s;
    }
    return LC_OK;
}

void lc_slot_cache_drop_page(lc_slot_cache *c, int32_t page) {
    if (!c || page < 0 || page >= c->n_pages) return;
    for (int32_t l = 0; l < c->n_layer; l++)
        for (int32_t h = 0; h < c->n_kv_head; h++) {
            const int64_t k = ((int64_t)l * c->n_pages + page) * c->n_kv_head + h;
            const int32_t s = c->table[k];
            if (s < 0) continue;
            c->table[k]   = -1;
            c->slot[s].key  = -1;
            c->slot[s].step = 0;
            c->n_used--;
            unlink_slot(c, s);
            push_back(c, s);
        }
}

void lc_slot_cache_get_stats(const lc_slot_cache *c, lc_slot_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    memcpy(out->hits, c->hits, sizeof c->hits);
    memcpy(out->misses, c->misses, sizeof c->misses);
    out->evictions = c->evictions;
    out->n_slots   = c->n_slots;
    out->n_used    = c->n_used;
}

void lc_slot_cache_gather(const lc_slab_fill *fills, int32_t n_fills, const uint8_t *host_base,
                          size_t (*slab_offset)(lc_slab, const void *user), const void *user,
                          uint8_t *bank, size_t slab_bytes) {
    for (int32_t i = 0; i < n_fills; i++)
        memcpy(bank + (size_t)fills[i].slot * slab_bytes,
               host_base + slab_offset(fills[i].slab, user), slab_bytes);
}
