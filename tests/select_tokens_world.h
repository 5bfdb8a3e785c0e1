/*
 * select_tokens_world.h — the harness (ts_*) of the TokenSelect selection tests, shared by
 * test_select_tokens.c (CPU twin vs the reference) and the op registry's select_tokens entry (GPU vs CPU
 * twin vs the reference): worlds from attn_segments_world.h (with tie worlds), the selection
 * arguments, the double brute-force reference (rotation, dots, softmax, full sort) and the
 * check of a selection against it, the spec table both run, and the CPU twin's call.
 */
#ifndef LC_TEST_TS_SELECT_WORLD_H
#define LC_TEST_TS_SELECT_WORLD_H

#include "attn_segments_world.h"
#include "rope_ref.h"

#include <math.h>
#include <stdio.h>

/* ---- reference ---- */

typedef struct ts_ref {
    double *score; /* [cand] per block, concatenated: block b at score + off[b] */
    int64_t *off;
    double  *fp;   /* [n_qb][n_head][D] fingerprints */
} ts_ref;

static void ts_ref_free(ts_ref *r) { free(r->score), free(r->off), free(r->fp); }

/* Reference scores of every block (candidates [n_init, win0)). */
static void ts_reference(const world *w, const lc_select_tokens_args *a, ts_ref *r) {
    const int32_t D = w->c.D, H = w->c.H, P = w->c.P, nh = w->n_head, G = nh / H;
    r->off = malloc(sizeof(int64_t) * (size_t)(w->n_qb + 1));
    r->off[0] = 0;
    for (int32_t b = 0; b < w->n_qb; b++) {
        const int32_t n = w->qb[b].win0 - a->n_init;
        r->off[b + 1] = r->off[b] + (n > 0 ? n : 0);
    }
    r->score = malloc(sizeof(double) * (size_t)(r->off[w->n_qb] + 1));
    r->fp    = calloc((size_t)w->n_qb * nh * D + 1, sizeof(double));
    double *rot = malloc(sizeof(double) * D), *lg = NULL;
    for (int32_t b = 0; b < w->n_qb; b++) {
        const lc_qblock *q  = &w->qb[b];
        double              *fp = r->fp + (int64_t)b * nh * D;
        for (int32_t i = 0; i < q->n_rows; i++)
            for (int32_t h = 0; h < nh; h++) {
                rope_ref_rotate(w->q + ((int64_t)(q->row0 + i) * nh + h) * D, rot, D, a->fp_pos + i, &w->rope);
                for (int32_t d = 0; d < D; d++) fp[(int64_t)h * D + d] += rot[d] / q->n_rows;
            }
        const int32_t n = q->win0 - a->n_init;
        if (n <= 0) continue;
        lg = realloc(lg, sizeof(double) * (size_t)n);
        double        *sc = r->score + r->off[b];
        const int32_t *pt = w->seqs[q->seq].page_table;
        for (int32_t t = 0; t < n; t++) sc[t] = 0.0;
        for (int32_t h = 0; h < nh; h++) {
            const int32_t kvh = a->gqa_mod ? h % H : h / G;
            double        m   = -INFINITY, z = 0.0;
            for (int32_t t = 0; t < n; t++) {
                const int32_t pos = a->n_init + t;
                const float  *k   = w->k + (((int64_t)pt[pos / P] * H + kvh) * P + pos % P) * D;
                double        s   = 0.0;
                for (int32_t d = 0; d < D; d++) s += fp[(int64_t)h * D + d] * k[d];
                lg[t] = s;
                m     = s > m ? s : m;
            }
            for (int32_t t = 0; t < n; t++) z += exp(lg[t] - m);
            for (int32_t t = 0; t < n; t++) sc[t] += exp(lg[t] - m) / z;
        }
    }
    free(rot), free(lg);
}

static const double *cmp_base;
static int cmp_desc(const void *x, const void *y) {
    const int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    if (cmp_base[i] != cmp_base[j]) return cmp_base[i] > cmp_base[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* Check one selection (out, out_n host copies) against the reference; exact: the reference's
 * own order (ties: lower position first) must be reproduced exactly. */
static void ts_check(const world *w, const lc_select_tokens_args *a, const ts_ref *r,
                     const lc_segment *out, const int32_t *out_n, double tol, int exact,
                     const char *what) {
    for (int32_t b = 0; b < w->n_qb; b++) {
        const lc_qblock *q = &w->qb[b];
        const int32_t        n = q->win0 - a->n_init, nseg = out_n[b];
        const lc_segment    *o = out + (int64_t)b * a->out_cap;
        const int32_t        want = n <= 0 ? 0 : (n < a->k ? n : a->k);
        if (nseg < 0 || nseg > a->out_cap || (want > 0 && nseg < 1) || (want == 0 && nseg != 0)) {
            CHECKF(0, "%s: block %d: %d segments (cap %d, %d to select)", what, b, nseg,
                   a->out_cap, want);
            continue;
        }
        int ok = 1;
        int64_t tot = 0;
        for (int32_t s = 0; s < nseg && ok; s++) {
            ok = o[s].len >= 1 && o[s].start >= a->n_init && (int64_t)o[s].start + o[s].len <= q->win0 &&
                 (s == 0 || o[s].start > o[s - 1].start + o[s - 1].len);
            tot += o[s].len;
        }
        CHECKF(ok && tot == want, "%s: block %d: segments not sorted maximal runs inside [%d, %d) "
               "or %lld tokens (want %d)", what, b, a->n_init, q->win0, (long long)tot, want);
        if (!ok || tot != want || n <= 0) continue;
        if (n <= a->k) {
            CHECKF(nseg == 1 && o[0].start == a->n_init && o[0].len == n, "%s: block %d: not the "
                   "whole range", what, b);
            continue;
        }
        const double *sc  = r->score + r->off[b];
        int32_t      *idx = malloc(sizeof(int32_t) * (size_t)n);
        uint8_t      *sel = calloc((size_t)n, 1);
        for (int32_t t = 0; t < n; t++) idx[t] = t;
        cmp_base = sc;
        qsort(idx, (size_t)n, sizeof(int32_t), cmp_desc);
        for (int32_t s = 0; s < nseg; s++)
            for (int32_t t = o[s].start; t < o[s].start + o[s].len; t++) sel[t - a->n_init] = 1;
        const double kth = sc[idx[a->k - 1]], eps = tol * kth + 1e-300;
        int32_t      bad = 0, first = -1;
        for (int32_t i = 0; i < n; i++) {
            const int32_t t = idx[i];
            int           wrong;
            if (exact) wrong = sel[t] != (i < a->k);
            else wrong = sel[t] ? sc[t] < kth - eps : sc[t] > kth + eps;
            if (wrong) {
                if (first < 0) first = t;
                bad++;
            }
        }
        CHECKF(bad == 0, "%s: block %d: %d tokens on the wrong side of the k-th score %.9g (first "
               "at %d: score %.9g, selected %d)", what, b, bad, kth, first + a->n_init,
               first >= 0 ? sc[first] : 0.0, first >= 0 ? sel[first] : -1);
        free(idx), free(sel);
    }
}

/* Keys of three distinct rows only (per KV head): every score ties with a third of the rest. */
static void make_ties(world *w) {
    const int32_t D = w->c.D, H = w->c.H, P = w->c.P;
    float        *base = malloc(sizeof(float) * (size_t)H * D);
    memcpy(base, w->k, sizeof(float) * (size_t)H * D); /* page 0's first rows */
    for (int32_t pg = 0; pg < w->n_pages; pg++)
        for (int32_t h = 0; h < H; h++)
            for (int32_t s = 0; s < P; s++) {
                const int32_t cls = (pg * 7 + s * 5) % 3;
                for (int32_t d = 0; d < D; d++)
                    w->k[(((int64_t)pg * H + h) * P + s) * D + d] =
                        base[(int64_t)h * D + d] * (cls == 0 ? 0.5f : cls == 1 ? 1.0f : 2.0f);
            }
    free(base);
}

/* The args of a world: k tokens, all blocks' launch sizes. */
static lc_select_tokens_args ts_args(const world *w, int32_t k, int32_t gqa_mod) {
    lc_select_tokens_args a;
    memset(&a, 0, sizeof a);
    a.n_init = w->c.n_sink, a.k = k, a.fp_pos = w->c.n_stream, a.gqa_mod = gqa_mod;
    a.max_rows = 1, a.max_cand = 0;
    for (int32_t b = 0; b < w->n_qb; b++) {
        a.max_rows = w->qb[b].n_rows > a.max_rows ? w->qb[b].n_rows : a.max_rows;
        const int32_t n = w->qb[b].win0 - a.n_init;
        a.max_cand = n > a.max_cand ? n : a.max_cand;
    }
    a.out_cap = k < a.max_cand ? k : a.max_cand;
    if (a.out_cap < 1) a.out_cap = 1;
    return a;
}

typedef struct ts_spec {
    const char     *name;
    int32_t         D, H, G, P, n_init, n_local, bq, k;
    lc_rope_pairing pairing;
    int32_t         n_rot;
    int             yarn, ties;
    int32_t         n_seqs;
    tseq            seqs[4];
} ts_spec;

static void ts_world(world *w, const ts_spec *s) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.D = s->D, c.H = s->H, c.G = s->G, c.P = s->P, c.n_groups = 1, c.n_sink = s->n_init;
    c.n_stream = s->n_local, c.bq = s->bq, c.sel_mode = SEL_EMPTY, c.pairing = s->pairing;
    c.n_rot = s->n_rot, c.yarn = s->yarn != 0;
    build(w, &c, s->seqs, s->n_seqs);
    (void)row_covered; /* (the world header's helper for the attention tests) */
    if (s->ties) make_ties(w);
}

/* Cases shared with the CUDA test (keep them small enough for the double reference). */
static const ts_spec ts_specs[] = {
    {"smol decode", 64, 3, 3, 16, 16, 64, 1, 64, LC_ROPE_NEOX, 64, 0, 0, 3,
     {{1500, 1, 0, 0}, {700, 1, 0, 0}, {2999, 1, 0, 0}}},
    {"smol prefill", 64, 3, 3, 16, 16, 512, 512, 256, LC_ROPE_NEOX, 64, 0, 0, 2,
     {{600, 1300, 0, 0}, {0, 900, 100, 200}}},
    {"8B decode", 128, 8, 4, 16, 128, 512, 1, 512, LC_ROPE_NORM, 128, 1, 0, 2,
     {{5000, 1, 0, 0}, {2100, 1, 0, 0}}},
    {"8B prefill", 128, 8, 4, 16, 128, 512, 512, 512, LC_ROPE_NORM, 128, 0, 0, 1,
     {{1200, 1100, 0, 0}}},
    {"partial rotary, ragged 37-row blocks", 128, 2, 2, 8, 4, 32, 37, 100, LC_ROPE_NORM, 64, 0,
     0, 2, {{300, 120, 0, 0}, {50, 61, 0, 0}}},
    {"k above the candidates", 64, 4, 2, 16, 16, 64, 64, 5000, LC_ROPE_NEOX, 64, 0, 0, 2,
     {{1000, 200, 0, 0}, {5, 10, 0, 0}}},
    {"no candidates", 64, 2, 1, 16, 64, 16, 8, 10, LC_ROPE_NORM, 64, 0, 0, 1, {{10, 40, 0, 0}}},
    {"ties decode", 64, 3, 3, 16, 16, 64, 1, 300, LC_ROPE_NEOX, 64, 0, 1, 2,
     {{1500, 1, 0, 0}, {900, 1, 0, 0}}},
    {"ties prefill", 128, 8, 4, 16, 128, 512, 256, 400, LC_ROPE_NORM, 128, 0, 1, 1,
     {{800, 600, 0, 0}}},
};
#define TS_N_SPECS ((int)(sizeof ts_specs / sizeof ts_specs[0]))

/* The CPU twin on a world: poisoned outputs, results into out/out_n. */
static int ts_run_cpu(const world *w, const lc_select_tokens_args *a, lc_segment *out, int32_t *out_n) {
    memset(out, 0xff, sizeof(lc_segment) * (size_t)w->n_qb * a->out_cap);
    memset(out_n, 0xff, sizeof(int32_t) * (size_t)w->n_qb);
    lc_select_tokens_args x = *a;
    x.out = out, x.out_n = out_n;
    return lc_cpu_select_tokens(&w->kv, w->seqs, w->n_seqs, w->qb, w->n_qb, w->q, w->n_head, &w->rope, &x);
}

/* ---- the batched selection cache (backend.h "Batched decode"): several decode blocks in one
 * call, each with its own slot (list[b]) of out / out_n / cache_q / cache_valid ---- */

/* Where a twin's arrays live and how it is called: host memory for the CPU twin, a backend's
 * for the device. run: the op on the world with a (pointers in that memory). */
typedef struct ts_mem {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes);
    void  (*dealloc)(void *ctx, void *p);
    void  (*put)(void *ctx, void *dst, const void *src, size_t bytes);
    void  (*get)(void *ctx, void *dst, const void *src, size_t bytes);
    int   (*run)(void *ctx, const world *w, const lc_select_tokens_args *a);
} ts_mem;

/* The world's decode blocks (n_qb <= 8) in one call with slots list[b] of 2 n_qb: a first call
 * (no slot valid, theta -1) misses everywhere and writes each block's slot exactly as the same
 * call without cache or slots writes index b (ref_out / ref_n: host, [n_qb][a.out_cap] /
 * [n_qb]), leaves the other slots alone and counts n_qb misses; a second call with the odd
 * blocks' slots made invalid recomputes those alone (the even blocks hit: their poisoned lists
 * stay poisoned) and writes the same fingerprints again. */
static void ts_check_batched_cache(const ts_mem *m, const world *w, lc_select_tokens_args a,
                                   const lc_segment *ref_out, const int32_t *ref_n, const char *what) {
    const int32_t n = w->n_qb, S = 2 * n, cap = a.out_cap, nf = w->n_head * w->c.D;
    if (n < 2 || n > 8) {
        CHECKF(0, "%s: the batched cache check takes 2..8 blocks, not %d", what, n);
        return;
    }
    int32_t list[8];
    for (int32_t b = 0; b < n; b++) list[b] = (2 * b + 3) % S; /* distinct, not in order */
    const size_t ob = sizeof(lc_segment) * (size_t)S * cap, nb = sizeof(int32_t) * (size_t)S,
                 qb = sizeof(float) * (size_t)S * nf;
    lc_segment  *out = malloc(ob);
    int32_t     *out_n = malloc(nb), *valid = malloc(nb);
    float       *cq = calloc((size_t)S * nf, sizeof(float)), *cq1 = malloc(qb);
    int64_t      counts[2] = {0, 0};
    void *d_out = m->alloc(m->ctx, ob), *d_n = m->alloc(m->ctx, nb), *d_v = m->alloc(m->ctx, nb);
    void *d_q = m->alloc(m->ctx, qb), *d_c = m->alloc(m->ctx, sizeof counts), *d_l = m->alloc(m->ctx, sizeof list);
    CHECK(out && out_n && valid && cq && cq1 && d_out && d_n && d_v && d_q && d_c && d_l);
    memset(valid, 0, nb);
    m->put(m->ctx, d_q, cq, qb), m->put(m->ctx, d_v, valid, nb);
    m->put(m->ctx, d_c, counts, sizeof counts), m->put(m->ctx, d_l, list, sizeof list);
    a.out = d_out, a.out_n = d_n, a.cache_q = d_q, a.cache_valid = d_v, a.counts = d_c;
    a.list = d_l, a.theta = -1.0f;
    for (int call = 0; call < 2; call++) {
        memset(out, 0xff, ob), memset(out_n, 0xff, nb);
        m->put(m->ctx, d_out, out, ob), m->put(m->ctx, d_n, out_n, nb);
        if (call == 1) {
            for (int32_t b = 1; b < n; b += 2) valid[list[b]] = 0;
            m->put(m->ctx, d_v, valid, nb);
        }
        const int rc = m->run(m->ctx, w, &a);
        CHECKF(rc == LC_OK, "%s: call %d: %s", what, call + 1, lc_last_error());
        if (rc != LC_OK) break;
        m->get(m->ctx, out, d_out, ob), m->get(m->ctx, out_n, d_n, nb);
        m->get(m->ctx, valid, d_v, nb), m->get(m->ctx, counts, d_c, sizeof counts);
        m->get(m->ctx, cq, d_q, qb);
        uint8_t used[16] = {0};
        for (int32_t b = 0; b < n; b++) {
            const int32_t     sl   = list[b];
            const bool        miss = call == 0 || (b & 1);
            const lc_segment *o    = out + (int64_t)sl * cap;
            used[sl] = 1;
            CHECKF(valid[sl] == 1, "%s: call %d: block %d's slot %d not valid after it", what, call + 1, b, sl);
            if (miss)
                CHECKF(out_n[sl] == ref_n[b] && (ref_n[b] <= 0 ||
                       memcmp(o, ref_out + (int64_t)b * cap, sizeof(lc_segment) * (size_t)ref_n[b]) == 0),
                       "%s: call %d: block %d (slot %d, a miss): %d segments, not its selection without the "
                       "cache (%d)", what, call + 1, b, sl, out_n[sl], ref_n[b]);
            else
                CHECKF(out_n[sl] == -1 && ((const int32_t *)o)[0] == -1,
                       "%s: call 2: block %d (slot %d, a hit) was written", what, b, sl);
            if (call == 1)
                CHECKF(memcmp(cq + (int64_t)sl * nf, cq1 + (int64_t)sl * nf, sizeof(float) * (size_t)nf) == 0,
                       "%s: call 2: block %d's fingerprint differs from call 1's", what, b);
        }
        for (int32_t sl = 0; sl < S; sl++)
            if (!used[sl]) {
                float z = 0.0f;
                for (int32_t i = 0; i < nf; i++) z = fmaxf(z, fabsf(cq[(int64_t)sl * nf + i]));
                CHECKF(out_n[sl] == -1 && valid[sl] == 0 && z == 0.0f,
                       "%s: call %d: slot %d of no block was touched", what, call + 1, sl);
            }
        const int64_t want_h = call == 0 ? 0 : n / 2, want_m = call == 0 ? n : n + n / 2;
        CHECKF(counts[0] == want_h && counts[1] == want_m, "%s: call %d: counts %lld hits %lld misses, "
               "want %lld %lld", what, call + 1, (long long)counts[0], (long long)counts[1],
               (long long)want_h, (long long)want_m);
        if (call == 0) memcpy(cq1, cq, qb);
    }
    m->dealloc(m->ctx, d_out), m->dealloc(m->ctx, d_n), m->dealloc(m->ctx, d_v);
    m->dealloc(m->ctx, d_q), m->dealloc(m->ctx, d_c), m->dealloc(m->ctx, d_l);
    free(out), free(out_n), free(valid), free(cq), free(cq1);
}

/* The world of the batched cache checks: four decode sequences, one with fewer candidates
 * than k (its whole range). */
static const ts_spec ts_batched_spec = {"batched cache", 64, 3, 3, 16, 16, 64, 1, 64, LC_ROPE_NEOX,
                                        64, 0, 0, 4, {{1500, 1, 0, 0}, {700, 1, 0, 0}, {40, 1, 0, 0},
                                                      {2999, 1, 0, 0}}};

#endif
