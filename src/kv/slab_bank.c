/*
 * slab_bank.c — the GPU slot cache of the sparse attention's reads (slab_bank.h; issue 24 item
 * 2, InfiniteHiP §3.3 SA bank + LRU, HiP §3.3 vector-map page table): slot pages taken from the
 * KV pools' device tier, one LRU (kv/slot_cache.c) and one slab map per layer, misses gathered
 * by copy_slabs.
 */
#include "kv/slab_bank.h"
#include "kv/slot_cache.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

struct lc_slab_bank {
    lc_kv_cache    *kv;
    lc_backend     *b;
    int32_t         n_layer, n_kv_head;
    int64_t         n_pages;      /* of the pool */
    int64_t         n_slot_pages; /* taken from the device free stack */
    int32_t        *slot_pages;   /* [n_slot_pages] their page ids */
    int32_t         n_slots;      /* per layer: n_slot_pages x n_kv_head */
    size_t          slab_bytes;
    lc_slot_cache **lru;          /* [n_layer], each over 1 layer x n_pages x n_kv_head */
    int32_t       **h_map;        /* [n_layer][n_pages x n_kv_head]: host mirror of d_map */
    int32_t       **d_map;        /* the maps in backend memory */
    int64_t        *lo, *hi;      /* [n_layer] changed range of h_map not yet uploaded (lo > hi: none) */
    int64_t       **pend;         /* [n_layer] slabs used this step, each once */
    uint32_t      **stamp;        /* [n_layer][n_pages x n_kv_head]: the step a slab was last pushed */
    uint32_t        epoch;        /* this step's stamp */
    int64_t        *n_pend, *cap_pend;
    lc_slab_copy   *h_copies;     /* a commit's copies, layer after layer (room n_layer x n_slots) */
    lc_slab_copy   *d_copies;
    int32_t        *n_copies;     /* [n_layer] of the commit under way */
    uint64_t        overflow, bytes_in, map_bytes;
    bool            warned; /* the overflow warning was logged */
};

static int64_t slot_slab(const lc_slab_bank *bk, int32_t slot) {
    return (int64_t)bk->slot_pages[slot / bk->n_kv_head] * bk->n_kv_head + slot % bk->n_kv_head;
}

static void mark(lc_slab_bank *bk, int32_t l, int64_t slab, int32_t to) {
    bk->h_map[l][slab] = to;
    if (slab < bk->lo[l]) bk->lo[l] = slab;
    if (slab > bk->hi[l]) bk->hi[l] = slab;
}

void lc_slab_bank_free(lc_slab_bank *bk) {
    if (!bk) return;
    lc_kv_cache *kv = bk->kv;
    lc_backend  *b  = bk->b;
    for (int32_t l = 0; l < bk->n_layer; l++) {
        if (bk->lru) lc_slot_cache_free(bk->lru[l]);
        if (bk->h_map) free(bk->h_map[l]);
        if (bk->d_map && bk->d_map[l]) b->dealloc(b, bk->d_map[l]);
        if (bk->pend) free(bk->pend[l]);
        if (bk->stamp) free(bk->stamp[l]);
    }
    free(bk->lru), free(bk->h_map), free(bk->d_map), free(bk->pend);
    free(bk->stamp);
    free(bk->lo), free(bk->hi), free(bk->n_pend), free(bk->cap_pend), free(bk->h_copies);
    free(bk->n_copies);
    if (bk->d_copies) b->dealloc(b, bk->d_copies);
    /* the slot pages go back to the device free stack */
    for (int64_t i = 0; i < bk->n_slot_pages && bk->slot_pages; i++) {
        kv->free_pages[kv->n_free_dev++] = bk->slot_pages[i];
        kv->n_free++;
    }
    free(bk->slot_pages);
    if (kv->bank == bk) kv->bank = NULL;
    free(bk);
}

int lc_slab_bank_create(lc_kv_cache *kv, int64_t n_slot_pages, lc_slab_bank **out) {
    *out          = NULL;
    lc_backend *b = kv->backend;
    if (kv->bank) return lc_fail(LC_ERR_INVALID_ARG, "slot cache: the KV cache has one already");
    if (!b->copy_slabs)
        return lc_fail(LC_ERR_UNSUPPORTED, "slot cache: the %s backend cannot copy slabs", b->name);
    const int64_t n_slots = n_slot_pages * kv->n_kv_head;
    if (n_slot_pages < 1 || n_slots > INT32_MAX || kv->n_pages * kv->n_kv_head > INT32_MAX)
        return lc_fail(LC_ERR_INVALID_ARG, "slot cache of %lld pages out of range",
                       (long long)n_slot_pages);
    if (n_slot_pages > kv->n_free_dev)
        return lc_fail(LC_ERR_CONTEXT, "slot cache: %lld pages asked for, %lld device pages free",
                       (long long)n_slot_pages, (long long)kv->n_free_dev);
    lc_slab_bank *bk = lc_calloc(1, sizeof *bk, "slot cache");
    if (!bk) return LC_ERR_NOMEM;
    const int32_t L = kv->n_layer, H = kv->n_kv_head;
    bk->kv = kv, bk->b = b, bk->n_layer = L, bk->n_kv_head = H, bk->n_pages = kv->n_pages;
    bk->n_slots    = (int32_t)n_slots;
    bk->epoch      = 1; /* (the stamps start at 0: no slab pushed yet) */
    bk->slab_bytes = kv->slab_bytes;
    bk->slot_pages = lc_malloc(sizeof(int32_t) * (size_t)n_slot_pages, "slot cache pages");
    if (!bk->slot_pages) {
        free(bk);
        return LC_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n_slot_pages; i++) {
        bk->slot_pages[i] = kv->free_pages[--kv->n_free_dev];
        kv->n_free--;
    }
    bk->n_slot_pages = n_slot_pages;
    int st = LC_OK;
    bk->lru      = lc_calloc((size_t)L, sizeof *bk->lru, "slot cache");
    bk->h_map    = lc_calloc((size_t)L, sizeof *bk->h_map, "slot cache");
    bk->d_map    = lc_calloc((size_t)L, sizeof *bk->d_map, "slot cache");
    bk->pend     = lc_calloc((size_t)L, sizeof *bk->pend, "slot cache");
    bk->stamp    = lc_calloc((size_t)L, sizeof *bk->stamp, "slot cache");
    bk->lo       = lc_calloc((size_t)L, sizeof *bk->lo, "slot cache");
    bk->hi       = lc_calloc((size_t)L, sizeof *bk->hi, "slot cache");
    bk->n_pend   = lc_calloc((size_t)L, sizeof *bk->n_pend, "slot cache");
    bk->cap_pend = lc_calloc((size_t)L, sizeof *bk->cap_pend, "slot cache");
    bk->n_copies = lc_calloc((size_t)L, sizeof *bk->n_copies, "slot cache");
    bk->h_copies = lc_malloc(sizeof(lc_slab_copy) * (size_t)L * (size_t)n_slots, "slot cache copies");
    bk->d_copies = b->alloc(b, sizeof(lc_slab_copy) * (size_t)L * (size_t)n_slots, "slot cache copies");
    if (!bk->lru || !bk->h_map || !bk->d_map || !bk->pend || !bk->stamp || !bk->lo || !bk->hi ||
        !bk->n_pend || !bk->cap_pend || !bk->n_copies || !bk->h_copies || !bk->d_copies)
        st = LC_ERR_NOMEM;
    const int64_t n_map = kv->n_pages * H;
    for (int32_t l = 0; l < L && st == LC_OK; l++) {
        st = lc_slot_cache_create(bk->n_slots, 1, kv->n_pages, H, &bk->lru[l]);
        if (st != LC_OK) break;
        bk->h_map[l] = lc_malloc(sizeof(int32_t) * (size_t)n_map, "slot cache slab map");
        bk->d_map[l] = b->alloc(b, sizeof(int32_t) * (size_t)n_map, "slot cache slab map");
        bk->stamp[l] = lc_calloc((size_t)n_map, sizeof(uint32_t), "slot cache step stamps");
        if (!bk->h_map[l] || !bk->d_map[l] || !bk->stamp[l]) {
            st = LC_ERR_NOMEM;
            break;
        }
        for (int64_t i = 0; i < n_map; i++) bk->h_map[l][i] = (int32_t)i; /* every slab home */
        st = b->upload(b, bk->d_map[l], bk->h_map[l], sizeof(int32_t) * (size_t)n_map);
        bk->lo[l] = n_map, bk->hi[l] = -1;
    }
    if (st != LC_OK) {
        kv->bank = bk; /* so that free finds it attached */
        lc_slab_bank_free(bk);
        return st;
    }
    kv->bank = bk;
    *out     = bk;
    return LC_OK;
}

const int32_t *lc_slab_bank_map(const lc_slab_bank *bk, int32_t layer) {
    return bk && layer >= 0 && layer < bk->n_layer ? bk->d_map[layer] : NULL;
}

void lc_slab_bank_step(lc_slab_bank *bk) {
    for (int32_t l = 0; l < bk->n_layer; l++) lc_slot_cache_step(bk->lru[l]);
    if (++bk->epoch == 0) { /* (after 2^32 steps) the stamps start over */
        for (int32_t l = 0; l < bk->n_layer; l++)
            memset(bk->stamp[l], 0, sizeof(uint32_t) * (size_t)(bk->n_pages * bk->n_kv_head));
        bk->epoch = 1;
    }
}

static int pend_push(lc_slab_bank *bk, int32_t l, int64_t slab) {
    if (bk->stamp[l][slab] == bk->epoch) return LC_OK; /* already asked for this step */
    bk->stamp[l][slab] = bk->epoch;
    if (bk->n_pend[l] == bk->cap_pend[l]) {
        const int64_t cap = bk->cap_pend[l] ? 2 * bk->cap_pend[l] : 1024;
        int64_t      *p   = realloc(bk->pend[l], sizeof(int64_t) * (size_t)cap);
        if (!p) return lc_fail(LC_ERR_NOMEM, "out of memory for the slot cache's step list");
        bk->pend[l] = p, bk->cap_pend[l] = cap;
    }
    bk->pend[l][bk->n_pend[l]++] = slab;
    return LC_OK;
}

int lc_slab_bank_use(lc_slab_bank *bk, int32_t layer, const int32_t *page_table,
                     int64_t n_full_pages, const lc_segment *segs, int32_t n_segs, int32_t head) {
    if (layer < 0 || layer >= bk->n_layer || head < -1 || head >= bk->n_kv_head)
        return lc_fail(LC_ERR_INVALID_ARG, "slot cache: layer %d / head %d out of range", layer,
                       head);
    const int32_t P = bk->kv->page_size, H = bk->n_kv_head;
    const int64_t n_dev = bk->kv->n_dev_pages;
    for (int32_t i = 0; i < n_segs; i++) {
        if (segs[i].len <= 0 || segs[i].start < 0) continue;
        const int64_t p0 = segs[i].start / P;
        int64_t       p1 = ((int64_t)segs[i].start + segs[i].len - 1) / P;
        if (p1 >= n_full_pages) p1 = n_full_pages - 1;
        for (int64_t p = p0; p <= p1; p++) {
            const int32_t pg = page_table[p];
            if (pg < n_dev || pg >= bk->n_pages) continue; /* GPU pages are read in place */
            for (int32_t h = head < 0 ? 0 : head; h < (head < 0 ? H : head + 1); h++) {
                const int st = pend_push(bk, layer, (int64_t)pg * H + h);
                if (st != LC_OK) return st;
            }
        }
    }
    return LC_OK;
}

int lc_slab_bank_commit(lc_slab_bank *bk) {
    lc_backend   *b = bk->b;
    const int32_t H = bk->n_kv_head;
    int32_t      *n_copies = bk->n_copies;
    int64_t       total    = 0;
    for (int32_t l = 0; l < bk->n_layer; l++) {
        n_copies[l]        = 0;
        const int64_t n    = bk->n_pend[l]; /* (each slab once: pend_push) */
        const int64_t *pend = bk->pend[l];
        lc_slab_copy *cp   = bk->h_copies + total; /* the layers' lists one after another */
        for (int64_t i = 0; i < n; i++) {
            const lc_slab s = {0, (int32_t)(pend[i] / H), (int32_t)(pend[i] % H)};
            int32_t       slot, nf = 0;
            lc_slab_fill  fill;
            const int     st = lc_slot_cache_map(bk->lru[l], &s, 1, 0, &slot, &fill, &nf);
            if (st == LC_ERR_CONTEXT) { /* every slot is in use by this step: read the rest in place */
                lc_clear_error();
                bk->overflow += (uint64_t)(n - i);
                if (!bk->warned) { /* once: what it would take */
                    bk->warned = true;
                    lc_log(LC_LOG_WARN, "the KV slot cache holds %d slabs a layer but a step read "
                           "%lld host slabs of layer %d: the other %lld are read from host memory "
                           "(slower, same results); a slot cache of %lld tokens would hold them",
                           bk->n_slots, (long long)n, l, (long long)(n - i),
                           (long long)((n + H - 1) / H) * bk->kv->page_size);
                }
                break;
            }
            if (st != LC_OK) return st;
            if (nf == 0) continue; /* a hit */
            const int64_t dst = slot_slab(bk, slot);
            if (fill.evicted.page >= 0) { /* the evicted slab reads from home again */
                const int64_t old = (int64_t)fill.evicted.page * H + fill.evicted.head;
                mark(bk, l, old, (int32_t)old);
            }
            mark(bk, l, pend[i], (int32_t)dst);
            cp[n_copies[l]++] = (lc_slab_copy){pend[i], dst};
        }
        bk->n_pend[l] = 0;
        total += n_copies[l];
    }
    int st = LC_OK;
    if (total > 0) {
        /* one upload of every layer's list, then one gather per pool */
        st = b->upload(b, bk->d_copies, bk->h_copies, sizeof(lc_slab_copy) * (size_t)total);
        size_t off = 0;
        for (int32_t l = 0; l < bk->n_layer && st == LC_OK; l++) {
            if (!n_copies[l]) continue;
            const lc_slab_copy *dc = bk->d_copies + off;
            off += (size_t)n_copies[l];
            st = b->copy_slabs(b, bk->kv->k[l], bk->kv->k[l], dc, n_copies[l], bk->slab_bytes);
            if (st == LC_OK)
                st = b->copy_slabs(b, bk->kv->v[l], bk->kv->v[l], dc, n_copies[l], bk->slab_bytes);
            bk->bytes_in += 2ull * (uint64_t)n_copies[l] * bk->slab_bytes;
        }
    }
    for (int32_t l = 0; l < bk->n_layer && st == LC_OK; l++) {
        if (bk->lo[l] > bk->hi[l]) continue;
        const size_t n = (size_t)(bk->hi[l] - bk->lo[l] + 1);
        st = b->upload(b, bk->d_map[l] + bk->lo[l], bk->h_map[l] + bk->lo[l], sizeof(int32_t) * n);
        bk->map_bytes += sizeof(int32_t) * n;
        bk->lo[l] = bk->n_pages * H, bk->hi[l] = -1;
    }
    return st;
}

int64_t lc_slab_bank_pending(const lc_slab_bank *bk, int32_t layer) {
    return bk && layer >= 0 && layer < bk->n_layer ? bk->n_pend[layer] : 0;
}

void lc_slab_bank_drop_pages(lc_slab_bank *bk, const int32_t *pages, int64_t n) {
    const int32_t H = bk->n_kv_head;
    for (int64_t i = 0; i < n; i++) {
        const int32_t pg = pages[i];
        if (pg < bk->kv->n_dev_pages || pg >= bk->n_pages) continue;
        for (int32_t l = 0; l < bk->n_layer; l++) {
            for (int32_t h = 0; h < H; h++) {
                if (lc_slot_cache_lookup(bk->lru[l], (lc_slab){0, pg, h}) < 0) continue;
                mark(bk, l, (int64_t)pg * H + h, pg * H + h);
            }
            lc_slot_cache_drop_page(bk->lru[l], pg);
        }
    }
}

void lc_slab_bank_get_stats(const lc_slab_bank *bk, lc_slab_bank_stats *out) {
    memset(out, 0, sizeof *out);
    if (!bk) return;
    out->slots = bk->n_slots;
    for (int32_t l = 0; l < bk->n_layer; l++) {
        lc_slot_cache_stats s;
        lc_slot_cache_get_stats(bk->lru[l], &s);
        out->hits += s.hits[0];
        out->misses += s.misses[0];
        out->evictions += s.evictions;
        out->used += s.n_used;
    }
    out->overflow  = bk->overflow;
    out->bytes_in  = bk->bytes_in;
    out->map_bytes = bk->map_bytes;
}
