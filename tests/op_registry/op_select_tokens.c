/*
 * op_select_tokens.c — registry entry of the TokenSelect selection (select_tokens; select_tokens.cu) against
 * its CPU twin and the double reference of select_tokens_world.h, on the same fp16 key values (the
 * worlds' keys are fp16-representable; the GPU reads them as an fp16 pool). The GPU's logits
 * differ from the CPU's by rounding, so a selection passes with the reference's tolerance check
 * (selected tokens' scores >= the k-th - eps, dropped ones <= it + eps, sorted disjoint maximal
 * runs inside [n_init, win0), min(k, candidates) tokens); the tie worlds (three distinct key
 * rows) must equal the CPU twin's output exactly (lower positions first at the threshold).
 * Every case: both GQA maps; each path of select_tokens.cu (ts_paths, chosen with the backend's
 * tuning: the 9-kernel path and the fused cooperative kernel with 3, 2 or 1 launches, some with
 * ts_select_group 1), every path's bytes equal to the 9-kernel path's; outputs poisoned before
 * each call; a second call must give the same bytes. The shapes: the CPU test's spec table;
 * the selection cache on the device on every path (a miss writes the selection, cache_q and
 * counts; a hit leaves the poisoned outputs alone; theta edges around a known cosine; a zero
 * cache_q); the batched cache (four decode blocks in one call, each in its own slot, on every
 * path: misses equal the uncached selection, hits leave their slot alone); and (big) 8B-shape worlds (32/8 heads, D 128, ~24K keys, decode and 512-row blocks).
 */
#include "op_registry.h"
#include "select_tokens_world.h"
#include "util/util.h"

static lc_tuning base_tuning; /* the command line's: put back after a path changes it */

typedef struct dev_world {
    void          *k;
    float         *q, *cs, *sn;
    lc_qblock *qb;
    lc_segment    *out;
    int32_t       *out_n;
} dev_world;

static void dev_make(lc_backend *b, const world *w, int32_t out_cap, dev_world *d) {
    const int64_t pool = (int64_t)w->n_pages * w->c.H * w->c.P * w->c.D;
    const size_t  qn = (size_t)w->rows * w->n_head * w->c.D, tn = (size_t)w->rope.n_pos * (w->c.n_rot / 2);
    uint16_t     *kb = malloc(2 * (size_t)pool);
    for (int64_t i = 0; i < pool; i++) kb[i] = lc_fp32_to_fp16(w->k[i]);
    d->k     = b->alloc(b, 2 * (size_t)pool, "k");
    d->q     = b->alloc(b, sizeof(float) * qn, "q");
    d->cs    = b->alloc(b, sizeof(float) * tn, "cos");
    d->sn    = b->alloc(b, sizeof(float) * tn, "sin");
    d->qb    = b->alloc(b, sizeof(lc_qblock) * (size_t)w->n_qb, "qb");
    d->out   = b->alloc(b, sizeof(lc_segment) * (size_t)w->n_qb * out_cap, "out");
    d->out_n = b->alloc(b, sizeof(int32_t) * (size_t)w->n_qb, "out_n");
    CHECK(d->k && d->q && d->cs && d->sn && d->qb && d->out && d->out_n);
    b->upload(b, d->k, kb, 2 * (size_t)pool);
    b->upload(b, d->q, w->q, sizeof(float) * qn);
    b->upload(b, d->cs, w->rope.cos, sizeof(float) * tn);
    b->upload(b, d->sn, w->rope.sin, sizeof(float) * tn);
    b->upload(b, d->qb, w->qb, sizeof(lc_qblock) * (size_t)w->n_qb);
    free(kb);
}

static void dev_free(lc_backend *b, dev_world *d) {
    b->dealloc(b, d->k), b->dealloc(b, d->q), b->dealloc(b, d->cs), b->dealloc(b, d->sn);
    b->dealloc(b, d->qb), b->dealloc(b, d->out), b->dealloc(b, d->out_n);
}

/* One GPU call (args a with host-side cache pointers replaced by the caller): poisoned
 * outputs, results into out / out_n (host). */
static int gpu_run(lc_backend *b, const world *w, const dev_world *d, const lc_select_tokens_args *a,
                   lc_segment *out, int32_t *out_n) {
    const size_t ob = sizeof(lc_segment) * (size_t)w->n_qb * a->out_cap, nb = sizeof(int32_t) * (size_t)w->n_qb;
    memset(out, 0xff, ob), memset(out_n, 0xff, nb);
    b->upload(b, d->out, out, ob);
    b->upload(b, d->out_n, out_n, nb);
    lc_select_tokens_args x = *a;
    x.out = d->out, x.out_n = d->out_n;
    lc_rope_table    rope = {w->rope.n_pos, w->rope.n_rot, w->rope.pairing, d->cs, d->sn, w->rope.mscale};
    lc_kv_layer_view kv   = {d->k, d->k, w->c.P, w->c.H, w->c.D, NULL, false, NULL};
    CHECK(b->batch_begin(b, w->seqs, w->n_seqs, w->c.P) == LC_OK);
    int rc = b->select_tokens(b, &kv, w->seqs, w->n_seqs, d->qb, w->n_qb, d->q, w->n_head, &rope, &x);
    if (rc == LC_OK) rc = lc_cuda_sync();
    if (rc == LC_OK) b->download(b, out, d->out, ob), b->download(b, out_n, d->out_n, nb);
    return rc;
}

/* The paths of select_tokens.cu: the 9-kernel one and the fused kernel with 3, 2 or 1 launches,
 * each also with one block a group (tuning ts_select_group 1); 0: as launched. */
typedef struct ts_path {
    const char *name;
    int32_t     path, launches, nb; /* lc_tuning's ts_select_path, _launches, _group */
} ts_path;
static const ts_path ts_paths[] = {
    {"9 kernels", LC_TUNE_TS_KERNELS, 0, 0},
    {"9 kernels, one block a group", LC_TUNE_TS_KERNELS, 0, 1},
    {"as launched", LC_TUNE_TS_AUTO, 0, 0},
    {"fused, 3 launches", LC_TUNE_TS_FUSED, 3, 0},
    {"fused, 2 launches", LC_TUNE_TS_FUSED, 2, 0},
    {"fused, 1 launch", LC_TUNE_TS_FUSED, 1, 0},
    {"fused, 1 launch, one block a group", LC_TUNE_TS_FUSED, 1, 1},
    {"fused, 3 launches, one block a group", LC_TUNE_TS_FUSED, 3, 1},
};
#define TS_N_PATHS ((int)(sizeof ts_paths / sizeof ts_paths[0]))

/* The backend's tuning for path p (NULL: the defaults). */
static void ts_path_set(lc_backend *b, const ts_path *p) {
    b->tuning = base_tuning;
    if (!p) return;
    b->tuning.ts_select_path     = p->path;
    b->tuning.ts_select_launches = p->launches;
    b->tuning.ts_select_group    = p->nb;
}

static int same_sel(const world *w, const lc_select_tokens_args *a, const lc_segment *x,
                    const int32_t *xn, const lc_segment *y, const int32_t *yn) {
    for (int32_t b = 0; b < w->n_qb; b++) {
        if (xn[b] != yn[b]) return 0;
        if (xn[b] > 0 && memcmp(x + (int64_t)b * a->out_cap, y + (int64_t)b * a->out_cap,
                                sizeof(lc_segment) * (size_t)xn[b]) != 0)
            return 0;
    }
    return 1;
}

static void run_spec(lc_backend *b, const ts_spec *s, uint64_t seed) {
    for (int gm = 0; gm < 2; gm++) {
        world w;
        rng = seed;
        ts_world(&w, s);
        lc_select_tokens_args a = ts_args(&w, s->k, gm);
        dev_world         d;
        dev_make(b, &w, a.out_cap, &d);
        const size_t ob = sizeof(lc_segment) * (size_t)w.n_qb * a.out_cap, nb = sizeof(int32_t) * (size_t)w.n_qb;
        lc_segment  *co = malloc(ob), *go = malloc(ob), *g2 = malloc(ob);
        int32_t     *cn = malloc(nb), *gn = malloc(nb), *g2n = malloc(nb);
        CHECKF(ts_run_cpu(&w, &a, co, cn) == LC_OK, "%s: CPU: %s", s->name, lc_last_error());
        ts_ref r;
        ts_reference(&w, &a, &r);
        /* the 9-kernel path first (its output kept in ko / kn), then the fused kernel's
         * variants, which must give the same bytes */
        lc_segment *ko = malloc(ob);
        int32_t    *kn = malloc(nb);
        for (int v = 0; v < TS_N_PATHS; v++) {
            const ts_path *pv = &ts_paths[v];
            ts_path_set(b, pv);
            char lbl[240];
            snprintf(lbl, sizeof lbl, "%s (gqa_mod %d, %s) [GPU]", s->name, gm, pv->name);
            int rc = gpu_run(b, &w, &d, &a, go, gn);
            CHECKF(rc == LC_OK, "%s: %s", lbl, lc_last_error());
            if (rc == LC_OK) {
                ts_check(&w, &a, &r, go, gn, 1e-3, s->ties, lbl);
                if (s->ties) CHECKF(same_sel(&w, &a, go, gn, co, cn), "%s: differs from the CPU twin", lbl);
                if (v == 0) memcpy(ko, go, ob), memcpy(kn, gn, nb);
                else CHECKF(same_sel(&w, &a, go, gn, ko, kn), "%s: differs from the 9-kernel path", lbl);
                rc = gpu_run(b, &w, &d, &a, g2, g2n);
                CHECKF(rc == LC_OK && same_sel(&w, &a, go, gn, g2, g2n), "%s: a second run differs", lbl);
            }
            ts_path_set(b, NULL);
        }
        free(ko), free(kn);
        /* differing tokens vs the CPU twin (information) */
        int64_t diff = 0, tot = 0;
        for (int32_t i = 0; i < w.n_qb; i++) {
            const lc_segment *x = go + (int64_t)i * a.out_cap, *y = co + (int64_t)i * a.out_cap;
            for (int32_t j = 0; j < gn[i] && gn[i] > 0; j++) tot += x[j].len;
            int64_t cx = 0, cy = 0;
            for (int32_t j = 0; j < gn[i]; j++) cx += x[j].len;
            for (int32_t j = 0; j < cn[i]; j++) cy += y[j].len;
            CHECKF(cx == cy, "%s: block %d: GPU %lld tokens, CPU %lld", s->name, i, (long long)cx, (long long)cy);
            diff += cx != cy || !same_sel(&w, &a, go, gn, co, cn);
        }
        printf("%-40s gqa_mod %d: %d blocks, %lld tokens selected, %lld blocks not byte-equal to the CPU twin\n",
               s->name, gm, w.n_qb, (long long)tot, (long long)diff);
        ts_ref_free(&r);
        free(co), free(go), free(g2), free(cn), free(gn), free(g2n);
        dev_free(b, &d);
        world_free(&w);
    }
}

static void test_cache(lc_backend *b, const char *path) {
    const ts_spec s = {"cache", 128, 8, 4, 16, 128, 512, 1, 256, LC_ROPE_NORM, 128, 0, 0, 1,
                       {{6000, 1, 0, 0}}};
    world w;
    rng = 777;
    ts_world(&w, &s);
    lc_select_tokens_args a = ts_args(&w, s.k, 0);
    dev_world         d;
    dev_make(b, &w, a.out_cap, &d);
    const int32_t nf = w.n_head * s.D;
    float        *dq = b->alloc(b, sizeof(float) * nf, "cache_q");
    int32_t      *dv = b->alloc(b, sizeof(int32_t), "cache_valid");
    int64_t      *dc = b->alloc(b, sizeof(int64_t) * 2, "counts");
    float        *hq = calloc((size_t)nf, sizeof(float)), *f = malloc(sizeof(float) * nf);
    int32_t       zero = 0, hv = 0;
    int64_t       hc[2] = {0, 0};
    b->upload(b, dq, hq, sizeof(float) * nf), b->upload(b, dv, &zero, 4), b->upload(b, dc, hc, 16);
    lc_segment *co = malloc(sizeof(lc_segment) * a.out_cap), *go = malloc(sizeof(lc_segment) * a.out_cap);
    int32_t     cn, gn;
    CHECK(ts_run_cpu(&w, &a, co, &cn) == LC_OK);
    ts_ref r;
    ts_reference(&w, &a, &r);
    for (int32_t i = 0; i < nf; i++) f[i] = (float)r.fp[i];
    lc_select_tokens_args x = a;
    x.cache_q = dq, x.cache_valid = dv, x.counts = dc, x.theta = -1.0f;
    /* miss */
    CHECK(gpu_run(b, &w, &d, &x, go, &gn) == LC_OK);
    b->download(b, &hv, dv, 4), b->download(b, hc, dc, 16), b->download(b, hq, dq, sizeof(float) * nf);
    CHECKF(hv == 1 && hc[0] == 0 && hc[1] == 1, "%s: miss: valid %d counts %lld %lld", path, hv, (long long)hc[0], (long long)hc[1]);
    ts_check(&w, &a, &r, go, &gn, 1e-3, 0, "cache miss [GPU]");
    double md = 0;
    for (int32_t i = 0; i < nf; i++) md = fmax(md, fabs(hq[i] - f[i]));
    CHECKF(md < 1e-4, "%s: cache_q is not the fingerprint (max diff %g)", path, md);
    /* hit */
    x.theta = 0.999f;
    CHECK(gpu_run(b, &w, &d, &x, go, &gn) == LC_OK);
    b->download(b, hc, dc, 16);
    CHECKF(gn == -1 && ((int32_t *)go)[0] == -1 && hc[0] == 1 && hc[1] == 1, "%s: hit: out_n %d counts %lld %lld", path, gn,
           (long long)hc[0], (long long)hc[1]);
    /* theta edges */
    for (int side = 0; side < 2; side++) {
        double dot = 0, n1 = 0, n2 = 0;
        for (int32_t i = 0; i < nf; i++) {
            hq[i] = f[i] + 0.6f * test_frand(&rng);
            dot += (double)hq[i] * f[i], n1 += (double)f[i] * f[i], n2 += (double)hq[i] * hq[i];
        }
        b->upload(b, dq, hq, sizeof(float) * nf);
        const double c = dot / sqrt(n1 * n2);
        x.theta        = (float)(side ? c + 1e-3 : c - 1e-3);
        int64_t h0[2];
        b->download(b, h0, dc, 16);
        CHECK(gpu_run(b, &w, &d, &x, go, &gn) == LC_OK);
        b->download(b, hc, dc, 16);
        if (side) CHECKF(hc[1] == h0[1] + 1 && gn == cn, "%s: theta %g above cos %g: not a miss", path, x.theta, c);
        else CHECKF(hc[0] == h0[0] + 1 && gn == -1, "%s: theta %g below cos %g: not a hit", path, x.theta, c);
    }
    /* zero cache_q: cos 0 */
    memset(hq, 0, sizeof(float) * nf);
    b->upload(b, dq, hq, sizeof(float) * nf);
    x.theta = 0.0f;
    CHECKF(gpu_run(b, &w, &d, &x, go, &gn) == LC_OK && gn == -1, "%s: zero cache_q, theta 0: not a hit", path);
    x.theta = 1e-6f, x.counts = NULL;
    CHECKF(gpu_run(b, &w, &d, &x, go, &gn) == LC_OK && gn > 0, "%s: zero cache_q, theta 1e-6: not a miss", path);
    char lbl[160];
    snprintf(lbl, sizeof lbl, "cache miss after a zero cache_q (%s) [GPU]", path);
    ts_check(&w, &a, &r, go, &gn, 1e-3, 0, lbl);
    ts_ref_free(&r);
    b->dealloc(b, dq), b->dealloc(b, dv), b->dealloc(b, dc);
    free(hq), free(f), free(co), free(go);
    dev_free(b, &d);
    world_free(&w);
}

/* the backend's memory for the batched cache check (select_tokens_world.h) */
typedef struct dev_ctx {
    lc_backend      *b;
    const dev_world *d;
} dev_ctx;
static void *dev_alloc(void *ctx, size_t n) { return ((dev_ctx *)ctx)->b->alloc(((dev_ctx *)ctx)->b, n, "batched cache"); }
static void  dev_dealloc(void *ctx, void *p) { ((dev_ctx *)ctx)->b->dealloc(((dev_ctx *)ctx)->b, p); }
static void  dev_put(void *ctx, void *dst, const void *src, size_t n) { ((dev_ctx *)ctx)->b->upload(((dev_ctx *)ctx)->b, dst, src, n); }
static void  dev_get(void *ctx, void *dst, const void *src, size_t n) { ((dev_ctx *)ctx)->b->download(((dev_ctx *)ctx)->b, dst, src, n); }
static int   dev_run(void *ctx, const world *w, const lc_select_tokens_args *a) {
    const dev_ctx   *c = ctx;
    const dev_world *d = c->d;
    lc_rope_table    rope = {w->rope.n_pos, w->rope.n_rot, w->rope.pairing, d->cs, d->sn, w->rope.mscale};
    lc_kv_layer_view kv   = {d->k, d->k, w->c.P, w->c.H, w->c.D, NULL, false, NULL};
    int rc = c->b->batch_begin(c->b, w->seqs, w->n_seqs, w->c.P);
    if (rc == LC_OK) rc = c->b->select_tokens(c->b, &kv, w->seqs, w->n_seqs, d->qb, w->n_qb, d->q, w->n_head, &rope, a);
    return rc == LC_OK ? lc_cuda_sync() : rc;
}

/* Four decode blocks in one call, each with its slot's cache, on path `path` (the CPU twin's
 * uncached selection as the reference: the world has no ties, so it checks with tolerance
 * first, and the slots must hold the device's own uncached selection exactly). */
static void test_batched_cache(lc_backend *b, const char *path) {
    world w;
    rng = 4242;
    ts_world(&w, &ts_batched_spec);
    const lc_select_tokens_args a = ts_args(&w, ts_batched_spec.k, 0);
    dev_world                   d;
    dev_make(b, &w, a.out_cap, &d);
    lc_segment *go = malloc(sizeof(lc_segment) * (size_t)w.n_qb * a.out_cap);
    int32_t    *gn = malloc(sizeof(int32_t) * (size_t)w.n_qb);
    ts_ref      r;
    ts_reference(&w, &a, &r);
    char lbl[160];
    snprintf(lbl, sizeof lbl, "batched cache, uncached reference (%s) [GPU]", path);
    CHECK(gpu_run(b, &w, &d, &a, go, gn) == LC_OK);
    ts_check(&w, &a, &r, go, gn, 1e-3, 0, lbl);
    dev_ctx      c = {b, &d};
    const ts_mem m = {&c, dev_alloc, dev_dealloc, dev_put, dev_get, dev_run};
    snprintf(lbl, sizeof lbl, "batched cache (%s) [GPU]", path);
    ts_check_batched_cache(&m, &w, a, go, gn, lbl);
    ts_ref_free(&r);
    free(go), free(gn);
    dev_free(b, &d);
    world_free(&w);
}

enum { TS_SPECS, TS_CACHE, TS_BIG, TS_BATCHED };
static const ts_spec ts_big_specs[] = {
    {"8B 24K decode", 128, 8, 4, 64, 128, 512, 1, 2048, LC_ROPE_NORM, 128, 0, 0, 2,
     {{24000, 1, 0, 0}, {17000, 1, 0, 0}}},
    {"8B 24K prefill", 128, 8, 4, 64, 128, 512, 512, 2048, LC_ROPE_NEOX, 128, 0, 0, 1,
     {{22000, 1024, 0, 0}}},
    {"smol 24K ties", 64, 3, 3, 64, 128, 512, 512, 2048, LC_ROPE_NEOX, 64, 0, 1, 1,
     {{22000, 700, 0, 0}}},
};
/* n = {group, index of ts_big_specs} */
static const op_shape select_tokens_shapes[] = {
    {"the CPU test's specs, every path", {TS_SPECS}, false},
    {"selection cache, every path", {TS_CACHE}, false},
    {"batched selection cache (4 blocks, own slots), every path", {TS_BATCHED}, false},
    {"8B 24K decode", {TS_BIG, 0}, true},
    {"8B 24K prefill (two 512-row blocks)", {TS_BIG, 1}, true},
    {"smol 24K ties", {TS_BIG, 2}, true},
};

static void select_tokens_check(op_env *e, const op_shape *sh, op_result *r) {
    lc_backend    *b     = e->dev;
    const uint64_t seed0 = e->rng;
    (void)r;
    base_tuning = e->tuning;
    if (sh->n[0] == TS_SPECS) {
        for (int i = 0; i < TS_N_SPECS; i++) run_spec(b, &ts_specs[i], seed0 * 2654435761u + (uint64_t)i + 1);
    } else if (sh->n[0] == TS_CACHE) {
        for (int v = 0; v < TS_N_PATHS; v++) {
            if (ts_paths[v].nb) continue; /* one block: groups change nothing */
            ts_path_set(b, &ts_paths[v]);
            test_cache(b, ts_paths[v].name);
            ts_path_set(b, NULL);
        }
    } else if (sh->n[0] == TS_BATCHED) {
        for (int v = 0; v < TS_N_PATHS; v++) {
            ts_path_set(b, &ts_paths[v]);
            test_batched_cache(b, ts_paths[v].name);
            ts_path_set(b, NULL);
        }
    } else {
        run_spec(b, &ts_big_specs[sh->n[1]], seed0 + 99u * (uint64_t)sh->n[1]);
    }
    b->tuning = base_tuning;
}

const op_entry op_select_tokens = {"select_tokens", "selected tokens vs the reference's tolerance check, "
                               "every path byte-equal to the 9-kernel one, ties exact",
                               select_tokens_shapes, OP_N_SHAPES(select_tokens_shapes), 0, false, NULL,
                               NULL, NULL, NULL, NULL, select_tokens_check};
