/*
 * test_slab_bank.c — the slot cache of the sparse attention's host reads (kv/slab_bank.h, issue
 * 24 items 2 and 5) on the CPU twin:
 *   1. the bank over a two-tier pool, random steps against the invariants after every commit:
 *      each slab maps home or to one slot, no two slabs share a slot, a slot holds its slab's
 *      exact bytes (K and V), only full host-tier pages are cached, a slab used in every step
 *      stays cached, hits + misses + overflow count the distinct slabs
 *      asked for, a step past the slots overflows (counted, not an error) and released pages
 *      point home again;
 *   2. the engine: infinitehip, hip and streaming on a generated model with most of the KV in the host tier
 *      and a slot cache so small that every refresh evicts, and one that holds the working set:
 *      the greedy tokens and every step's logits are those without a cache (bit for bit), the
 *      cache was used (hits, misses and evictions counted), a second request on pages a first
 *      one released gives what it gives in a new context, and a conversation rewound by
 *      lc_context_continue over cached pages gives what it gives without (no stale copy is read);
 *   3. the settings: a slot cache without a host tier, or for a method whose decode keeps no
 *      selection (dense), is refused with a message naming it;
 *   4. SparseServe's working-set batch control (ws_batch_control): with slots for less than two
 *      requests' working sets, three requests decode one at a time and finish in arrival
 *      order; with slots for all, or with the control off, together, with the tokens of the
 *      run without a cache.
 */
#include "kv/slab_bank.h"
#include "backend/cpu/cpu.h"
#include "longctx.h"
#include "test_util.h"
#include "generated_model.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- 1. the bank -------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Every invariant of the maps against the pools (CPU backend: its memory is host memory). */
static void check_maps(const lc_kv_cache *kv, const lc_slab_bank *bk, int64_t n_full_host_min,
                       const char *when) {
    const int32_t H = kv->n_kv_head;
    const size_t  sb = kv->slab_bytes;
    const int64_t n  = kv->n_pages * H;
    int64_t       cached = 0;
    uint8_t      *taken  = calloc((size_t)n, 1);
    if (!taken) return;
    for (int32_t l = 0; l < kv->n_layer; l++) {
        memset(taken, 0, (size_t)n);
        const int32_t *map = lc_slab_bank_map(bk, l);
        for (int64_t s = 0; s < n; s++) {
            const int32_t to = map[s];
            if (to == s) continue;
            cached++;
            CHECKF(to >= 0 && to < n && !taken[to], "%s: layer %d slab %lld -> %d (taken twice "
                   "or out of range)", when, l, (long long)s, to);
            if (to < 0 || to >= n) continue;
            taken[to] = 1;
            CHECKF(s / H >= kv->n_dev_pages && to / H < kv->n_dev_pages,
                   "%s: slab %lld (page %lld) cached at %d: only host slabs, into device pages",
                   when, (long long)s, (long long)(s / H), to);
            CHECKF(!memcmp((uint8_t *)kv->k[l] + (size_t)to * sb, (uint8_t *)kv->k[l] + (size_t)s * sb, sb) &&
                   !memcmp((uint8_t *)kv->v[l] + (size_t)to * sb, (uint8_t *)kv->v[l] + (size_t)s * sb, sb),
                   "%s: layer %d slot slab %d does not hold slab %lld", when, l, to, (long long)s);
        }
    }
    free(taken);
    lc_slab_bank_stats st;
    lc_slab_bank_get_stats(bk, &st);
    CHECKF(st.used == cached, "%s: %lld slots in use, %lld map entries redirected", when,
           (long long)st.used, (long long)cached);
    (void)n_full_host_min;
}

static void bank_model(void) {
    lc_backend *b = NULL;
    CHECK(lc_backend_cpu_create(1, &b) == LC_OK && b);
    if (!b) return;
    const int32_t L = 2, H = 2, D = 8, P = 16;
    const int64_t n_pages = 40, n_host = 30; /* pages 0..9 device, 10..39 host */
    lc_kv_cache *kv = NULL;
    CHECKF(lc_kv_create(b, L, H, D, P, n_pages, n_host, false, &kv) == LC_OK, "%s", lc_last_error());
    if (!kv) {
        b->free(b);
        return;
    }
    /* every element distinct, so a wrong copy shows */
    const size_t pool = (size_t)n_pages * (size_t)H * (size_t)P * (size_t)D;
    for (int32_t l = 0; l < L; l++)
        for (size_t i = 0; i < pool; i++) {
            ((float *)kv->k[l])[i] = (float)(i + 1) + 0.25f * (float)l;
            ((float *)kv->v[l])[i] = -(float)(i + 1) - 0.5f * (float)l;
        }
    lc_slab_bank *bk = NULL;
    CHECK(lc_slab_bank_create(kv, 11, &bk) == LC_ERR_CONTEXT && !bk); /* 10 device pages */
    lc_clear_error();
    const int64_t free0 = kv->n_free;
    CHECKF(lc_slab_bank_create(kv, 3, &bk) == LC_OK && bk, "%s", lc_last_error());
    if (!bk) goto done;
    CHECK(kv->bank == bk && kv->n_free == free0 - 3 && kv->n_free_dev == 7);
    /* a sequence of 30 pages: its first 7 on the device tier (3 went to the bank), then host pages */
    lc_kv_seq seq = {0};
    CHECK(lc_kv_seq_reserve(kv, &seq, 30 * P) == LC_OK && seq.n_pages == 30);
    CHECK(seq.pages[6] < kv->n_dev_pages && seq.pages[7] >= kv->n_dev_pages);
    const int32_t slots = 3 * H; /* per layer */

    /* a host page's slabs of head 1 are cached, its head 0 is not; device pages and pages past
     * the full ones never */
    lc_slab_bank_step(bk);
    const lc_segment s1[2] = {{8 * P + 3, 1}, {0, 2 * P}}; /* page 8; pages 0-1 (device) */
    CHECK(lc_slab_bank_use(bk, 0, seq.pages, 30, s1, 2, 1) == LC_OK);
    const lc_segment s2[1] = {{20 * P, P}}; /* page 20, but only 20 pages are full */
    CHECK(lc_slab_bank_use(bk, 1, seq.pages, 20, s2, 1, -1) == LC_OK);
    CHECK(lc_slab_bank_commit(bk) == LC_OK);
    const int32_t *m0 = lc_slab_bank_map(bk, 0);
    CHECK(m0[seq.pages[8] * H + 1] != seq.pages[8] * H + 1 && m0[seq.pages[8] * H] == seq.pages[8] * H);
    CHECK(m0[seq.pages[0] * H] == seq.pages[0] * H);
    lc_slab_bank_stats st;
    lc_slab_bank_get_stats(bk, &st);
    CHECKF(st.misses == 1 && st.hits == 0 && st.used == 1 && st.slots == slots,
           "misses %llu hits %llu used %lld", (unsigned long long)st.misses,
           (unsigned long long)st.hits, (long long)st.used);
    check_maps(kv, bk, 0, "first step");

    /* random steps: a "hot" page used every step is never evicted; the counts add up */
    uint64_t asked = st.misses + st.hits;
    for (int step = 0; step < 300; step++) {
        lc_slab_bank_step(bk);
        const int32_t l  = (int32_t)(next_u32() % (uint32_t)L);
        const int32_t ns = 1 + (int32_t)(next_u32() % 3);
        lc_segment    sg[4];
        sg[0] = (lc_segment){9 * P, 1}; /* the hot page 9, both heads */
        for (int32_t i = 1; i <= ns; i++)
            sg[i] = (lc_segment){(int32_t)(next_u32() % (30 * P)), 1 + (int32_t)(next_u32() % 20)};
        /* distinct host slabs this step asks for, counted here by a model */
        uint8_t want[40 * 2] = {0};
        for (int32_t i = 0; i <= ns; i++)
            for (int32_t p = sg[i].start / P; p <= (sg[i].start + sg[i].len - 1) / P && p < 30; p++)
                if (seq.pages[p] >= kv->n_dev_pages)
                    for (int32_t h = 0; h < H; h++) want[seq.pages[p] * H + h] = 1;
        int32_t n_want = 0;
        for (int i = 0; i < 80; i++) n_want += want[i];
        CHECK(lc_slab_bank_use(bk, l, seq.pages, 30, sg, ns + 1, -1) == LC_OK);
        lc_slab_bank_stats before;
        lc_slab_bank_get_stats(bk, &before);
        CHECK(lc_slab_bank_commit(bk) == LC_OK);
        lc_slab_bank_get_stats(bk, &st);
        const uint64_t served = (st.hits - before.hits) + (st.misses - before.misses) +
                                (st.overflow - before.overflow);
        CHECKF(served == (uint64_t)n_want, "step %d: %llu slabs served, %d asked", step,
               (unsigned long long)served, n_want);
        asked += (uint64_t)n_want;
        if (n_want <= slots) CHECK(st.overflow == before.overflow);
        const int32_t *ml = lc_slab_bank_map(bk, l);
        if (n_want <= slots) /* (past the slots, the step's own misses may take its slots) */
            CHECKF(ml[seq.pages[9] * H] != seq.pages[9] * H &&
                       ml[seq.pages[9] * H + 1] != seq.pages[9] * H + 1,
                   "step %d: the hot page is not cached", step);
        if (step % 25 == 0) check_maps(kv, bk, 0, "random steps");
    }
    check_maps(kv, bk, 0, "after the random steps");
    CHECK(st.evictions > 0 && st.overflow > 0 && st.hits > 0);
    CHECK(st.bytes_in == 2ull * st.misses * (uint64_t)P * (uint64_t)D * sizeof(float));

    /* released: every copy goes, every map entry points home, the pages are free again */
    lc_kv_seq_release(kv, &seq);
    CHECK(lc_slab_bank_commit(bk) == LC_OK);
    lc_slab_bank_get_stats(bk, &st);
    CHECKF(st.used == 0, "%lld slots still used after the release", (long long)st.used);
    for (int32_t l = 0; l < L; l++) {
        const int32_t *ml   = lc_slab_bank_map(bk, l);
        bool           home = true;
        for (int64_t s = 0; s < n_pages * H; s++) home &= ml[s] == s;
        CHECKF(home, "layer %d: a map entry still points away after the release", l);
    }
    CHECK(kv->n_free == free0 - 3);
    lc_slab_bank_free(bk);
    CHECK(kv->bank == NULL && kv->n_free == free0 && kv->n_free_dev == 10);
done:
    lc_kv_free(kv);
    b->free(b);
}

/* ---- 2. the engine ------------------------------------------------------------------------- */

#define N_PROMPT 700
#define N_OUT    24

typedef struct run_out {
    int32_t     toks[N_OUT];
    float      *logits; /* [N_OUT][n_vocab] */
    lc_kv_usage usage;
} run_out;

/* Greedy tokens and every step's logits of one prompt, in context c (which stays). */
static int generate_in(lc_context *c, const int32_t *prompt, int32_t n_vocab, run_out *o) {
    lc_request r = {.prompt = prompt, .n_prompt = N_PROMPT, .max_tokens = N_OUT,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    int32_t id, n = 0;
    int     st = lc_context_add(c, &r, &id);
    for (int guard = 0; st == LC_OK && guard < 400 && n < N_OUT; guard++) {
        lc_event ev[2];
        size_t   ne = 0;
        if ((st = lc_context_step(c, ev, 2, &ne)) != LC_OK || ne == 0) break;
        for (size_t e = 0; e < ne; e++)
            if (ev[e].token >= 0 && n < N_OUT) {
                memcpy(o->logits + (size_t)n * (size_t)n_vocab, lc_context_logits(c, id),
                       sizeof(float) * (size_t)n_vocab);
                o->toks[n++] = ev[e].token;
            }
    }
    lc_context_kv_usage(c, &o->usage);
    if (st == LC_OK) st = lc_context_remove(c, id);
    return st == LC_OK && n == N_OUT ? LC_OK : st != LC_OK ? st : LC_ERR_INTERNAL;
}

/* A conversation that rewinds: the prompt and N_OUT tokens, then lc_context_continue keeping
 * the first n_keep tokens with 200 new ones, and N_OUT tokens more; all 2 x N_OUT tokens. */
static int rewind_run(lc_model *m, const lc_context_params *cp, const int32_t *prompt,
                      const int32_t *more, int64_t n_keep, int32_t toks[2 * N_OUT]) {
    lc_context *c  = NULL;
    int         st = lc_context_create(m, cp, &c);
    if (st != LC_OK) return st;
    lc_request r = {.prompt = prompt, .n_prompt = N_PROMPT, .max_tokens = N_OUT,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    int32_t id, n = 0;
    st = lc_context_add(c, &r, &id);
    for (int part = 0; part < 2 && st == LC_OK; part++) {
        if (part == 1) {
            lc_request r2 = r;
            r2.prompt     = more;
            r2.n_prompt   = 200;
            st            = lc_context_continue(c, id, n_keep, &r2);
        }
        for (int guard = 0; st == LC_OK && guard < 400 && n < (part + 1) * N_OUT; guard++) {
            lc_event ev[2];
            size_t   ne = 0;
            if ((st = lc_context_step(c, ev, 2, &ne)) != LC_OK || ne == 0) break;
            for (size_t e = 0; e < ne; e++)
                if (ev[e].token >= 0 && n < (part + 1) * N_OUT) toks[n++] = ev[e].token;
        }
    }
    lc_context_free(c);
    return st == LC_OK && n == 2 * N_OUT ? LC_OK : st != LC_OK ? st : LC_ERR_INTERNAL;
}

static bool same(const run_out *a, const run_out *b, int32_t n_vocab) {
    return !memcmp(a->toks, b->toks, sizeof a->toks) &&
           !memcmp(a->logits, b->logits, sizeof(float) * (size_t)N_OUT * (size_t)n_vocab);
}

/* Three requests in one context: each one's greedy tokens, the step each got its last token
 * in, and the most sequences that got a decode token in one step (past their first three). */
#define N_REQ 3
static int run_three(lc_model *m, const lc_context_params *cp, int32_t *const *prompts,
                     int32_t toks[N_REQ][N_OUT], int done_at[N_REQ], int *most_decoding,
                     int *most_held) {
    lc_context *c  = NULL;
    int         st = lc_context_create(m, cp, &c);
    if (st != LC_OK) return st;
    int32_t ids[N_REQ], n[N_REQ] = {0};
    for (int i = 0; i < N_REQ && st == LC_OK; i++) {
        lc_request r = {.prompt = prompts[i], .n_prompt = N_PROMPT, .max_tokens = N_OUT,
                        .sampling = lc_sampling_default(), .ignore_eos = true};
        r.sampling.temperature = 0;
        st = lc_context_add(c, &r, &ids[i]);
    }
    *most_decoding = 0, *most_held = 0;
    for (int step = 0; st == LC_OK && step < 1000; step++) {
        lc_event ev[N_REQ];
        size_t   ne = 0;
        if ((st = lc_context_step(c, ev, N_REQ, &ne)) != LC_OK || ne == 0) break;
        int decoding = 0;
        for (size_t e = 0; e < ne; e++)
            for (int i = 0; i < N_REQ; i++)
                if (ev[e].seq_id == ids[i] && ev[e].token >= 0 && n[i] < N_OUT) {
                    toks[i][n[i]++] = ev[e].token;
                    if (n[i] > 3) decoding++;
                    if (n[i] == N_OUT) done_at[i] = step;
                }
        if (decoding > *most_decoding) *most_decoding = decoding;
        lc_kv_usage u;
        if (lc_context_kv_usage(c, &u) == LC_OK && u.ws_held > *most_held) *most_held = u.ws_held;
    }
    lc_context_free(c);
    for (int i = 0; i < N_REQ; i++)
        if (st == LC_OK && n[i] != N_OUT) st = LC_ERR_INTERNAL;
    return st;
}

/* SparseServe's batch control. (The engine is not batch-invariant — a request batched with
 * others may get other tokens than alone — so runs are compared under the same schedule.) With
 * slots for less than two working sets the requests decode one at a time and finish in arrival
 * order, none starved; with slots for all they decode together, as with the control off, and
 * get the tokens of that run; the slot cache gives the tokens of no cache in either schedule;
 * without a slot cache the control is refused. */
static void ws_control(lc_model *m, int32_t V) {
    int32_t *prompts[N_REQ];
    bool     ok = true;
    for (int i = 0; i < N_REQ; i++) {
        prompts[i] = malloc(sizeof(int32_t) * N_PROMPT);
        ok &= prompts[i] != NULL;
        for (int t = 0; t < N_PROMPT && prompts[i]; t++)
            prompts[i][t] = 3 + (t * (13 + 6 * i) + (t * t) % (29 + i)) % (V - 3);
    }
    lc_context_params cp = tiny_context_params("infinitehip", "chunks=16,4 k=64,32 refresh=1,1 "
                                               "sink=4 stream=32 first-k=32 dense-layers=0");
    cp.n_seq_max         = N_REQ;
    cp.kv_tokens         = N_REQ * 1024;
    cp.kv_host_tokens    = N_REQ * 1024 - 64;
    int32_t together[N_REQ][N_OUT], got[N_REQ][N_OUT];
    int     done_at[N_REQ], most = 0, held = 0;
    /* the reference schedule: no cache, every request each step */
    CHECKF(ok && run_three(m, &cp, prompts, together, done_at, &most, &held) == LC_OK, "%s",
           lc_last_error());
    CHECK(most == N_REQ && held == 0);
    const struct {
        int64_t slot_tokens;
        bool    control;
        bool    one_at_a_time;
    } cases[] = {{64, false, false}, {N_REQ * 1024, true, false}, {64, true, true}};
    int32_t one_at_a_time_ref[N_REQ][N_OUT];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0] && ok; k++) {
        cp.kv_slot_cache_tokens = cases[k].slot_tokens;
        cp.ws_batch_control     = cases[k].control;
        const int st = run_three(m, &cp, prompts, got, done_at, &most, &held);
        CHECKF(st == LC_OK, "case %zu: %s", k, lc_last_error());
        if (st != LC_OK) continue;
        if (cases[k].one_at_a_time) {
            CHECKF(most == 1 && held >= 1, "case %zu: %d requests decoded together, %d held",
                   k, most, held);
            CHECKF(done_at[0] < done_at[1] && done_at[1] < done_at[2],
                   "case %zu: finished at steps %d, %d, %d: not in arrival order", k, done_at[0],
                   done_at[1], done_at[2]);
            memcpy(one_at_a_time_ref, got, sizeof got);
        } else {
            CHECKF(most == N_REQ && held == 0, "case %zu: at most %d requests decoded together, "
                   "%d held", k, most, held);
            CHECKF(!memcmp(got, together, sizeof got), "case %zu (slots %lld, control %d): other "
                   "tokens than without a cache under the same schedule", k,
                   (long long)cases[k].slot_tokens, cases[k].control);
        }
    }
    /* the one-at-a-time schedule without the cache's slots: not possible (the control needs
     * them), so the same schedule is the same run again: deterministic */
    cp.kv_slot_cache_tokens = 64;
    cp.ws_batch_control     = true;
    CHECK(run_three(m, &cp, prompts, got, done_at, &most, &held) == LC_OK &&
          !memcmp(got, one_at_a_time_ref, sizeof got));
    cp.kv_slot_cache_tokens = 0;
    lc_context *c           = NULL;
    CHECK(lc_context_create(m, &cp, &c) == LC_ERR_INVALID_ARG && !c &&
          strstr(lc_last_error(), "slot cache"));
    for (int i = 0; i < N_REQ; i++) free(prompts[i]);
}

static void engine(void) {
    lc_model *m = load_generated("tiny", 11, LC_DEVICE_CPU, 2);
    if (!m) return;
    lc_model_info info;
    lc_model_get_info(m, &info);
    const int32_t V = info.n_vocab;
    int32_t prompt[N_PROMPT], prompt2[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) {
        prompt[i]  = 3 + (i * 37 + (i * i) % 23) % (V - 3);
        prompt2[i] = 3 + (i * 11 + (i * i) % 31) % (V - 3);
    }
    run_out ref, got, ref2, got2;
    ref.logits  = malloc(sizeof(float) * (size_t)N_OUT * (size_t)V);
    got.logits  = malloc(sizeof(float) * (size_t)N_OUT * (size_t)V);
    ref2.logits = malloc(sizeof(float) * (size_t)N_OUT * (size_t)V);
    got2.logits = malloc(sizeof(float) * (size_t)N_OUT * (size_t)V);
    static const struct {
        const char *attn, *settings;
    } methods[] = {
        {"infinitehip", "chunks=16,4 k=64,32 refresh=3,3 sink=4 stream=32 first-k=32 dense-layers=0"},
        {"infinitehip", "chunks=16,4 k=64,32 refresh=1,1 sink=4 stream=32 first-k=32 dense-layers=0"},
        {"hip", "k=32 block-k=8 sink=4 stream=32 dense-layers=0 refresh=4"},
        {"streaming", "sink=4 window=64 block=16"},
    };
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0] && ref.logits && got.logits &&
                        ref2.logits && got2.logits; mi++) {
        lc_context_params cp = tiny_context_params(methods[mi].attn, methods[mi].settings);
        cp.kv_host_tokens    = 1024 - 64; /* 4 pages on the GPU tier, the rest on the host */
        /* the reference: the same tiers, no cache; then the second prompt in a fresh context */
        lc_context *c = NULL;
        CHECKF(lc_context_create(m, &cp, &c) == LC_OK, "%s", lc_last_error());
        if (!c) continue;
        CHECKF(generate_in(c, prompt, V, &ref) == LC_OK, "%s: %s", cp.attn, lc_last_error());
        lc_context_free(c);
        CHECK(lc_context_create(m, &cp, &c) == LC_OK && c);
        if (c) CHECKF(generate_in(c, prompt2, V, &ref2) == LC_OK, "%s", lc_last_error());
        lc_context_free(c);
        CHECK(ref.usage.cache_slots == 0 && ref.usage.cache_hits == 0);
        /* 1 slot page (2 slabs a layer: every refresh evicts), then 40 (the working set fits) */
        const int64_t sizes[2] = {16, 40 * 16};
        for (int si = 0; si < 2; si++) {
            cp.kv_slot_cache_tokens = sizes[si];
            c                       = NULL;
            CHECKF(lc_context_create(m, &cp, &c) == LC_OK, "%s: %s", cp.attn, lc_last_error());
            if (!c) continue;
            CHECKF(generate_in(c, prompt, V, &got) == LC_OK, "%s: %s", cp.attn, lc_last_error());
            CHECKF(same(&ref, &got, V), "%s %s, slot cache of %lld tokens: other tokens or "
                   "logits than without", cp.attn, methods[mi].settings, (long long)sizes[si]);
            const lc_kv_usage *u = &got.usage;
            CHECKF(u->cache_slots == (sizes[si] / 16) * info.n_head_kv && u->cache_misses > 0 &&
                       u->cache_bytes_in > 0 && u->cache_map_bytes > 0,
                   "%s: slots %lld misses %llu bytes in %llu", cp.attn, (long long)u->cache_slots,
                   (unsigned long long)u->cache_misses, (unsigned long long)u->cache_bytes_in);
            if (si == 0)
                CHECKF(u->cache_evictions > 0 && u->cache_overflow > 0, "%s: a 2-slot cache "
                       "never evicted (%llu) or overflowed (%llu)", cp.attn,
                       (unsigned long long)u->cache_evictions, (unsigned long long)u->cache_overflow);
            else
                CHECKF(u->cache_hits > 0 && u->cache_overflow == 0 && u->cache_evictions == 0,
                       "%s: a cache holding the working set: hits %llu evictions %llu overflow %llu",
                       cp.attn, (unsigned long long)u->cache_hits,
                       (unsigned long long)u->cache_evictions, (unsigned long long)u->cache_overflow);
            /* the second prompt on the pages the first released: as in a fresh context */
            CHECKF(generate_in(c, prompt2, V, &got2) == LC_OK, "%s: %s", cp.attn, lc_last_error());
            CHECKF(same(&ref2, &got2, V), "%s, slot cache of %lld tokens: a request after another "
                   "differs from the same request alone", cp.attn, (long long)sizes[si]);
            CHECK(got2.usage.cache_used > 0);
            lc_context_free(c);
        }
        /* a rewound conversation rewrites pages that held copies: as without the cache */
        int32_t rw_ref[2 * N_OUT], rw_got[2 * N_OUT];
        cp.kv_slot_cache_tokens = 0;
        CHECKF(rewind_run(m, &cp, prompt, prompt2, 300, rw_ref) == LC_OK, "%s", lc_last_error());
        cp.kv_slot_cache_tokens = 40 * 16;
        CHECKF(rewind_run(m, &cp, prompt, prompt2, 300, rw_got) == LC_OK, "%s", lc_last_error());
        CHECKF(!memcmp(rw_ref, rw_got, sizeof rw_ref), "%s: a rewound conversation differs with "
               "the slot cache", cp.attn);
        cp.kv_slot_cache_tokens = 0;
    }
    /* 4. the working-set batch control */
    ws_control(m, V);
    /* 3. refusals */
    lc_context_params cp    = lc_context_default_params();
    cp.n_ctx                = 1024;
    cp.page_size            = 16;
    cp.kv_slot_cache_tokens = 64;
    lc_context *c           = NULL;
    cp.attn                 = "infinitehip";
    CHECK(lc_context_create(m, &cp, &c) == LC_ERR_INVALID_ARG && !c &&
          strstr(lc_last_error(), "host tier"));
    cp.kv_host_tokens = 512;
    cp.attn           = "dense";
    CHECK(lc_context_create(m, &cp, &c) == LC_ERR_INVALID_ARG && !c &&
          strstr(lc_last_error(), "dense"));
    free(ref.logits), free(got.logits), free(ref2.logits), free(got2.logits);
    lc_model_free(m);
}

int main(void) {
    bank_model();
    engine();
    TEST_END();
}
