/*
 * test_select_tokens.c — the TokenSelect selection (lc_cpu_select_tokens; contract in backend.h
 * "TokenSelect token-level selection", paper 001_823a2d0cdd44ac9c.txt Eq. 7, Alg. 1–2) against
 * a brute-force reference written here in double (own rotation, dots, softmax, a full sort by
 * score then position), over the random paged worlds of attn_segments_world.h (scattered page
 * tables, fp16-representable keys; n_sink plays n_init and n_stream n_local).
 * A selection passes when its segments are sorted, disjoint, maximal runs inside
 * [n_init, win0), hold min(k, candidates) tokens (all of them as one segment when there are no
 * more than k), every selected token's reference score is >= the reference k-th score - eps
 * and every dropped one's <= it + eps (eps relative, scores near the cut may swap); the tie
 * worlds (keys of three distinct rows only: exact ties) must match the reference exactly
 * (equal scores: the lower position first).
 * Cases: n_head 9/3 D 64 and 32/8 D 128, both GQA maps, NORM and NEOX (and partial rotary,
 * YaRN), decode blocks (1 row) and prefill blocks of up to 512 rows, candidates fewer than k,
 * empty candidate ranges, ties, and the selection cache (miss / hit / theta edges / zero norm /
 * counts NULL; a hit leaves the poisoned outputs untouched), and the batched cache (four decode
 * blocks in one call, each in its own slot: misses equal the uncached selection, hits leave
 * their slot alone, other slots untouched).
 * The harness (ts_*) is in select_tokens_world.h.
 */
#include "select_tokens_world.h"

static void test_specs(void) {
    for (int i = 0; i < TS_N_SPECS; i++)
        for (int gm = 0; gm < 2; gm++) {
            const ts_spec *s = &ts_specs[i];
            world          w;
            rng = 0x9E3779B97F4A7C15ull + 977u * (uint64_t)i;
            ts_world(&w, s);
            lc_select_tokens_args a = ts_args(&w, s->k, gm);
            lc_segment       *out   = malloc(sizeof(lc_segment) * (size_t)w.n_qb * a.out_cap);
            int32_t          *out_n = malloc(sizeof(int32_t) * (size_t)w.n_qb);
            const int         rc    = ts_run_cpu(&w, &a, out, out_n);
            CHECKF(rc == LC_OK, "%s: %s", s->name, lc_last_error());
            if (rc == LC_OK) {
                ts_ref r;
                ts_reference(&w, &a, &r);
                char lbl[160];
                snprintf(lbl, sizeof lbl, "%s (gqa_mod %d)", s->name, gm);
                ts_check(&w, &a, &r, out, out_n, 1e-4, s->ties, lbl);
                ts_ref_free(&r);
            }
            free(out), free(out_n);
            world_free(&w);
        }
}

/* The selection cache on one decode block. */
static void test_cache(void) {
    const ts_spec s = {"cache", 64, 3, 3, 16, 16, 64, 1, 64, LC_ROPE_NEOX, 64, 0, 0, 1,
                       {{2000, 1, 0, 0}}};
    world w;
    rng = 12345;
    ts_world(&w, &s);
    lc_select_tokens_args a  = ts_args(&w, s.k, 0);
    const int32_t     nf = w.n_head * s.D;
    float            *cq = calloc((size_t)nf, sizeof(float)), *f = malloc(sizeof(float) * nf);
    int32_t           valid = 0;
    int64_t           counts[2] = {0, 0};
    lc_segment       *out = malloc(sizeof(lc_segment) * a.out_cap), *ref_out = malloc(sizeof(lc_segment) * a.out_cap);
    int32_t           out_n, ref_n;
    CHECK(ts_run_cpu(&w, &a, ref_out, &ref_n) == LC_OK); /* no cache */
    ts_ref r;
    ts_reference(&w, &a, &r);
    for (int32_t i = 0; i < nf; i++) f[i] = (float)r.fp[i];
    a.cache_q = cq, a.cache_valid = &valid, a.counts = counts;
    /* 1: not valid -> a miss even at theta -1 */
    a.theta = -1.0f;
    CHECK(ts_run_cpu(&w, &a, out, &out_n) == LC_OK);
    CHECK(valid == 1 && counts[0] == 0 && counts[1] == 1);
    CHECK(out_n == ref_n && memcmp(out, ref_out, sizeof(lc_segment) * ref_n) == 0);
    double md = 0;
    for (int32_t i = 0; i < nf; i++) md = fmax(md, fabs(cq[i] - f[i]));
    CHECKF(md < 1e-5, "cache_q is not the fingerprint (max diff %g)", md);
    /* 2: the same query -> a hit: outputs stay poisoned, cache_q as it was */
    float *before = malloc(sizeof(float) * nf);
    memcpy(before, cq, sizeof(float) * nf);
    a.theta = 0.999f;
    CHECK(ts_run_cpu(&w, &a, out, &out_n) == LC_OK);
    CHECK(counts[0] == 1 && counts[1] == 1 && valid == 1 && out_n == -1);
    CHECK(((const int32_t *)out)[0] == -1 && memcmp(before, cq, sizeof(float) * nf) == 0);
    /* 3: theta edges around a cache_q of known cosine */
    for (int side = 0; side < 2; side++) {
        double dot = 0, n1 = 0, n2 = 0;
        for (int32_t i = 0; i < nf; i++) {
            cq[i] = f[i] + 0.6f * test_frand(&rng);
            dot += (double)cq[i] * f[i], n1 += (double)f[i] * f[i], n2 += (double)cq[i] * cq[i];
        }
        const double c = dot / sqrt(n1 * n2);
        a.theta        = (float)(side ? c + 1e-3 : c - 1e-3);
        const int64_t h0 = counts[0], m0 = counts[1];
        CHECK(ts_run_cpu(&w, &a, out, &out_n) == LC_OK);
        if (side) CHECKF(counts[1] == m0 + 1 && out_n == ref_n, "theta %g above cos %g: not a miss", a.theta, c);
        else CHECKF(counts[0] == h0 + 1 && out_n == -1, "theta %g below cos %g: not a hit", a.theta, c);
    }
    /* 4: a zero cache_q: cos taken as 0 */
    memset(cq, 0, sizeof(float) * nf);
    a.theta = 0.0f;
    CHECK(ts_run_cpu(&w, &a, out, &out_n) == LC_OK && out_n == -1);
    memset(cq, 0, sizeof(float) * nf);
    a.theta = 1e-6f, a.counts = NULL;
    CHECK(ts_run_cpu(&w, &a, out, &out_n) == LC_OK && out_n == ref_n);
    CHECK(memcmp(out, ref_out, sizeof(lc_segment) * ref_n) == 0);
    /* 5: the cache needs one block */
    a.counts = counts;
    lc_select_tokens_args bad = a;
    bad.out = out, bad.out_n = &out_n;
    CHECK(lc_cpu_select_tokens(&w.kv, w.seqs, w.n_seqs, w.qb, 0, w.q, w.n_head, &w.rope, &bad) != LC_OK);
    bad.cache_q = NULL, bad.max_cand = 3; /* fewer than the block has */
    CHECK(lc_cpu_select_tokens(&w.kv, w.seqs, w.n_seqs, w.qb, 1, w.q, w.n_head, &w.rope, &bad) != LC_OK);
    ts_ref_free(&r);
    free(cq), free(f), free(out), free(ref_out), free(before);
    world_free(&w);
}

/* host memory for the batched cache check */
static void *host_alloc(void *ctx, size_t n) { (void)ctx; return malloc(n); }
static void  host_free(void *ctx, void *p) { (void)ctx; free(p); }
static void  host_copy(void *ctx, void *dst, const void *src, size_t n) { (void)ctx; memcpy(dst, src, n); }
static int   host_run(void *ctx, const world *w, const lc_select_tokens_args *a) {
    (void)ctx;
    return lc_cpu_select_tokens(&w->kv, w->seqs, w->n_seqs, w->qb, w->n_qb, w->q, w->n_head, &w->rope, a);
}

/* Four decode blocks in one call, each with its slot's cache (select_tokens_world.h). */
static void test_batched_cache(void) {
    world w;
    rng = 4242;
    ts_world(&w, &ts_batched_spec);
    const lc_select_tokens_args a = ts_args(&w, ts_batched_spec.k, 0);
    lc_segment *ref = malloc(sizeof(lc_segment) * (size_t)w.n_qb * a.out_cap);
    int32_t    *ref_n = malloc(sizeof(int32_t) * (size_t)w.n_qb);
    CHECK(ts_run_cpu(&w, &a, ref, ref_n) == LC_OK);
    const ts_mem m = {NULL, host_alloc, host_free, host_copy, host_copy, host_run};
    ts_check_batched_cache(&m, &w, a, ref, ref_n, "batched cache (CPU)");
    /* several blocks with the cache need their slots */
    lc_select_tokens_args bad = a;
    float   cq[4 * 3 * 64] = {0};
    int32_t cv[4] = {0};
    bad.out = ref, bad.out_n = ref_n, bad.cache_q = cq, bad.cache_valid = cv;
    CHECK(lc_cpu_select_tokens(&w.kv, w.seqs, w.n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &bad) != LC_OK);
    free(ref), free(ref_n);
    world_free(&w);
}

int main(void) {
    test_specs();
    test_cache();
    test_batched_cache();
    TEST_END();
}
