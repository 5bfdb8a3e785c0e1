/*
 * test_slot_cache.c — the GPU slot cache's host side / CPU twin (src/kv/slot_cache.h, issue 24
 * items 2 and 5): against a brute-force LRU written here (a last-use counter per slab, the
 * smallest one evicted, free slots taken first), over random steps with locality, every slab's
 * cached-or-not state and every hit/miss/eviction count agree; data gathered into a bank so small
 * that every step evicts reads back byte for byte as the host tier holds it (the cache never
 * changes what a kernel reads); a slab asked for twice in a step is one miss then a hit; a
 * working set larger than the bank is refused naming the bank's size; dropping a page frees its
 * slots without evictions; bad slabs and stages are refused; the table size at 10M tokens.
 */
#include "kv/slot_cache.h"
#include "longctx.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

enum { NL = 3, NP = 20, NH = 2, NSLAB = NL * NP * NH, SLAB_BYTES = 48 };

typedef struct ref_lru {
    bool     present[NSLAB];
    uint64_t last[NSLAB], step_of[NSLAB];
    int      n_slots, n_used;
    uint64_t clock, step, hits, misses, evictions;
} ref_lru;

static int sidx(lc_slab s) { return (s.layer * NP + s.page) * NH + s.head; }

/* 0: ok; -1: the working set does not fit */
static int ref_access(ref_lru *r, lc_slab s) {
    const int k = sidx(s);
    r->clock++;
    if (r->present[k]) {
        r->hits++;
    } else {
        if (r->n_used == r->n_slots) {
            int victim = -1;
            for (int i = 0; i < NSLAB; i++)
                if (r->present[i] && (victim < 0 || r->last[i] < r->last[victim])) victim = i;
            if (r->step_of[victim] == r->step) return -1;
            r->present[victim] = false;
            r->evictions++;
            r->n_used--;
        }
        r->present[k] = true;
        r->n_used++;
        r->misses++;
    }
    r->last[k]    = r->clock;
    r->step_of[k] = r->step;
    return 0;
}

static size_t host_offset(lc_slab s, const void *user) {
    (void)user;
    return (size_t)sidx(s) * SLAB_BYTES;
}

static bool err_has(const char *needle) {
    const char *e = lc_last_error();
    return e && strstr(e, needle);
}

/* random steps against the reference; a bank of n_slots, each step asking for ws slabs */
static void run_against_reference(int n_slots, int ws, int n_steps, uint64_t seed) {
    lc_slot_cache *c = NULL;
    CHECK(lc_slot_cache_create(n_slots, NL, NP, NH, &c) == LC_OK);
    if (!c) return;
    ref_lru *r = calloc(1, sizeof *r);
    r->n_slots = n_slots;
    uint8_t *host = malloc((size_t)NSLAB * SLAB_BYTES), *bank = malloc((size_t)n_slots * SLAB_BYTES);
    for (size_t i = 0; i < (size_t)NSLAB * SLAB_BYTES; i++) host[i] = (uint8_t)test_rng_next(&seed);
    memset(bank, 0xA5, (size_t)n_slots * SLAB_BYTES); /* poison */
    lc_slab      *req   = malloc(sizeof(lc_slab) * (size_t)ws);
    int32_t      *slots = malloc(sizeof(int32_t) * (size_t)ws);
    lc_slab_fill *fills = malloc(sizeof(lc_slab_fill) * (size_t)ws);
    int           center = 0, state_bad = 0, data_bad = 0, steps_evicting = 0;
    for (int step = 0; step < n_steps; step++) {
        lc_slot_cache_step(c);
        r->step = (uint64_t)step + 2;
        /* a selection with locality: pages near a drifting centre, some far ones */
        center = (center + (int)(test_rng_next(&seed) % 3)) % NP;
        for (int i = 0; i < ws; i++) {
            const uint64_t u = test_rng_next(&seed);
            const int      far = (u & 7) == 0;
            const int      pg  = far ? (int)((u >> 8) % NP) : (center + (int)((u >> 8) % 4)) % NP;
            req[i] = (lc_slab){.layer = (int32_t)((u >> 20) % NL), .page = pg,
                               .head = (int32_t)((u >> 30) % NH)};
        }
        const uint64_t ev0 = r->evictions;
        int32_t        nf  = -1;
        int            st  = lc_slot_cache_map(c, req, ws, step % 2, slots, fills, &nf);
        int            rst = 0;
        for (int i = 0; i < ws && rst == 0; i++) rst = ref_access(r, req[i]);
        CHECKF((st == LC_OK) == (rst == 0), "step %d: cache %d, reference %d", step, st, rst);
        if (st != LC_OK) break;
        steps_evicting += r->evictions > ev0;
        /* each fill names what its slot held: gone from the table now, or a free slot */
        int32_t n_evicted = 0;
        for (int32_t f = 0; f < nf; f++) {
            const lc_slab e = fills[f].evicted;
            if (e.page < 0) continue;
            n_evicted++;
            state_bad += lc_slot_cache_lookup(c, e) >= 0 && lc_slot_cache_lookup(c, e) == fills[f].slot;
        }
        CHECKF((uint64_t)n_evicted == r->evictions - ev0, "step %d: %d fills name an evicted "
               "slab, the reference evicted %llu", step, n_evicted,
               (unsigned long long)(r->evictions - ev0));
        lc_slot_cache_gather(fills, nf, host, host_offset, NULL, bank, SLAB_BYTES);
        for (int i = 0; i < ws; i++)
            data_bad += memcmp(bank + (size_t)slots[i] * SLAB_BYTES,
                               host + host_offset(req[i], NULL), SLAB_BYTES) != 0;
        for (int k = 0; k < NSLAB; k++) {
            const lc_slab s = {.layer = k / (NP * NH), .page = (k / NH) % NP, .head = k % NH};
            state_bad += (lc_slot_cache_lookup(c, s) >= 0) != r->present[k];
        }
    }
    CHECKF(state_bad == 0, "%d slab states differ from the reference LRU", state_bad);
    CHECKF(data_bad == 0, "%d slabs read from the bank differ from the host tier", data_bad);
    lc_slot_cache_stats st;
    lc_slot_cache_get_stats(c, &st);
    const uint64_t hits = st.hits[0] + st.hits[1], misses = st.misses[0] + st.misses[1];
    CHECKF(hits == r->hits && misses == r->misses && st.evictions == r->evictions,
           "hits %llu/%llu misses %llu/%llu evictions %llu/%llu", (unsigned long long)hits,
           (unsigned long long)r->hits, (unsigned long long)misses, (unsigned long long)r->misses,
           (unsigned long long)st.evictions, (unsigned long long)r->evictions);
    CHECK(st.n_used == r->n_used && st.n_slots == n_slots);
    CHECK(st.hits[0] > 0 && st.hits[1] > 0 && st.misses[0] > 0 && st.misses[1] > 0);
    if (n_slots <= ws) /* the small bank: (nearly) every step evicts */
        CHECKF(steps_evicting >= n_steps * 3 / 4, "only %d of %d steps evicted", steps_evicting,
               n_steps);
    free(req), free(slots), free(fills), free(host), free(bank), free(r);
    lc_slot_cache_free(c);
}

int main(void) {
    /* a bank larger than a step's working set, and one exactly a step's size (a step's slabs
     * may repeat, so its distinct count is at most ws) */
    run_against_reference(40, 16, 400, 0x9E3779B97F4A7C15ull);
    run_against_reference(16, 16, 400, 0x1234567ull);
    run_against_reference(NSLAB, 24, 200, 0xABCDEFull);

    /* repeats within a step: one miss, then hits; a bank of one slot suffices */
    lc_slot_cache *c = NULL;
    CHECK(lc_slot_cache_create(1, NL, NP, NH, &c) == LC_OK);
    lc_slab      a[10], b = {.layer = 1, .page = 3, .head = 1};
    int32_t      slots[10], nf = 0;
    lc_slab_fill fills[10];
    for (int i = 0; i < 10; i++) a[i] = (lc_slab){.layer = 2, .page = 7, .head = 0};
    lc_slot_cache_step(c);
    CHECK(lc_slot_cache_map(c, a, 10, 0, slots, fills, &nf) == LC_OK && nf == 1 &&
          fills[0].slot == 0);
    lc_slot_cache_stats st;
    lc_slot_cache_get_stats(c, &st);
    CHECK(st.misses[0] == 1 && st.hits[0] == 9 && st.evictions == 0 && st.n_used == 1);
    /* a second distinct slab in the same step does not fit: refused, naming the size */
    CHECK(lc_slot_cache_map(c, &b, 1, 0, slots, fills, &nf) == LC_ERR_CONTEXT);
    CHECK(err_has("holds 1 slabs") && err_has("page 3"));
    CHECK(lc_slot_cache_lookup(c, a[0]) == 0 && lc_slot_cache_lookup(c, b) == -1);
    /* in the next step it evicts the first */
    lc_slot_cache_step(c);
    CHECK(lc_slot_cache_map(c, &b, 1, 0, slots, fills, &nf) == LC_OK && nf == 1);
    lc_slot_cache_get_stats(c, &st);
    CHECK(st.evictions == 1 && lc_slot_cache_lookup(c, a[0]) == -1 && lc_slot_cache_lookup(c, b) == 0);
    /* dropping the page frees the slot: the next miss takes it without an eviction */
    lc_slot_cache_drop_page(c, 3);
    lc_slot_cache_get_stats(c, &st);
    CHECK(st.n_used == 0 && lc_slot_cache_lookup(c, b) == -1);
    CHECK(lc_slot_cache_map(c, a, 1, 0, slots, fills, &nf) == LC_OK && nf == 1);
    lc_slot_cache_get_stats(c, &st);
    CHECK(st.evictions == 1 && st.n_used == 1);
    /* bad input */
    lc_slab bad = {.layer = NL, .page = 0, .head = 0};
    CHECK(lc_slot_cache_map(c, &bad, 1, 0, slots, fills, &nf) == LC_ERR_INVALID_ARG &&
          err_has("outside 3 layers"));
    CHECK(lc_slot_cache_map(c, a, 1, LC_SLOT_CACHE_STAGES, slots, fills, &nf) == LC_ERR_INVALID_ARG);
    CHECK(lc_slot_cache_lookup(c, bad) == -1);
    lc_slot_cache_drop_page(c, -1); /* ignored */
    lc_slot_cache_drop_page(c, NP);
    lc_slot_cache_free(c);
    lc_slot_cache *none = NULL;
    CHECK(lc_slot_cache_create(0, NL, NP, NH, &none) == LC_ERR_INVALID_ARG && none == NULL);

    /* the table at 10M tokens of SmolLM2 (30 layers, 3 KV heads, 64-token pages): 56 MB */
    const size_t mb = lc_slot_cache_meta_bytes(4096, 30, 10000000 / 64, 3);
    CHECKF(mb > 56000000u && mb < 56400000u, "%zu bytes", mb);
    TEST_END();
}
