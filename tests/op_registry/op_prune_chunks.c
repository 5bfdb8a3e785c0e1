/*
 * op_prune_chunks.c — registry entry of the InfiniteHiP pruning stage (prune_chunks; prune_chunks.cu)
 * against its CPU twin and the double brute-force reference of prune_chunks_world.h, on the same
 * fp16 key values. The GPU multiplies fp16 queries and fp16 keys (rotated in fp32 and rounded,
 * or as stored) on the tensor cores, so its probe scores differ from the reference by up to
 * ~2·2^-11 of sum |q_i k_i|; the tolerance kept from the bf16 pools, 2e-3 of that, covers it: a
 * descent step closer than that may go either way, and kept chunks may swap with dropped ones
 * only within that tolerance. Every other output must match: out_n, segments that are exactly
 * chunks of the list, sorted by start. The shapes are case groups:
 *   grid: the CPU test's grid (first / later stages, 3 scan_rope modes, n_groups 1 and
 *     n_kv_head, q_stride 1/2/4 with 16-64-row blocks, head dims 64/128, GQA 1/3/4/8, NORM /
 *     NEOX, partial rotary, one descent per KV head in its odd quads), as launched; with the
 *     tuning stage_one_cta and stage_tiles 1; its plain cases with rotate_keys on;
 *   big blocks: 128 and 256 pooled queries (8 and 16 m-tiles per unit), 64-row blocks with one
 *     descent per KV head; plain again with rotated keys;
 *   decode rows: one-row blocks, with and without the transposed scoring (stage_transpose),
 *     chunks longer than a descent's cached page entries;
 *   ties: exact ties, keep-all, a stage on the tied output; refused: one descent per KV head
 *     over more than 256 pooled rows is refused by name;
 *   8B 128K (big): the Llama-3.1-8B shape at 128K keys (a decode row and two 64-row prefill
 *     blocks) through the 3k preset's three stages chained on the GPU's own outputs, relative
 *     RoPE (per query head and per KV head), chunk-indexed stage 1, plain RoPE (and with
 *     rotated keys); 8B decode (big): two decode rows at 128K and 70K keys, three stages, per
 *     query head, per KV head, 2 tiles a warp.
 * The "fp8 KV" shapes run groups over a key pool in the fp8 layout (backend.h LC_KV_E4M3): the
 * world's keys, offset by a random centre per KV head and dim, quantised on the host
 * (lc_kv_e4m3_quantize, kv_write's twin) and replaced by the values the codes stand for, which
 * the CPU twin and the reference then read.
 * Outputs are poisoned before each run; a second run must give the same bytes.
 */
#include "prune_chunks_world.h"
#include "op_registry.h"
#include "util/util.h"

static lc_tuning base_tuning; /* the command line's: put back after a pass changes it */

static const double tol_cpu = 1e-5, tol_gpu = 2e-3;
static int64_t      total_diff, total_kept;

static bool g_e8; /* the "fp8 KV" shapes: the key pool in the fp8 layout */

typedef struct dev_world {
    void          *k;
    float         *cen; /* g_e8: the key centres [H][D] */
    float         *q, *cs, *sn;
    lc_qblock *qb;
} dev_world;

/* g_e8: w's keys quantised into slabs (returned, malloc'd) and replaced by their values */
static unsigned char *e8_quantise(hs_world *w, float **cen_out, size_t *bytes) {
    const int32_t H = w->cs.H, D = w->cs.D;
    const size_t  slabs = (size_t)w->n_pages * (size_t)H;
    float        *cen   = malloc(sizeof(float) * (size_t)(H * D));
    unsigned char *k8   = NULL;
    if (cen) {
        for (int32_t i = 0; i < H * D; i++) cen[i] = 4.0f * test_frand(&hs_rng);
        k8 = op_e8_slabs(w->k, slabs, H, w->cs.P, D, cen);
    }
    CHECK(k8 && cen);
    if (!k8) return free(cen), NULL;
    *cen_out = cen, *bytes = slabs * lc_kv_slab_bytes(true, LC_TYPE_F16, w->cs.P, D);
    return k8;
}

static void dev_world_make(lc_backend *b, hs_world *w, dev_world *d) {
    const int64_t pool = (int64_t)w->n_pages * w->cs.H * w->cs.P * w->cs.D;
    const size_t  qn = (size_t)w->rows * w->n_head * w->cs.D, tn = (size_t)w->n_pos * (w->cs.n_rot / 2) + 1;
    d->cen = NULL;
    if (g_e8) {
        float         *cen = NULL;
        size_t         bytes = 0;
        unsigned char *k8 = e8_quantise(w, &cen, &bytes);
        d->k   = k8 ? op_to_device(b, k8, bytes, "k slabs") : NULL;
        d->cen = cen ? op_to_device(b, cen, sizeof(float) * (size_t)(w->cs.H * w->cs.D), "key centres") : NULL;
        CHECK(d->k && d->cen);
        free(k8), free(cen);
    } else {
        d->k = b->alloc(b, 2 * (size_t)pool, "k");
        if (d->k) b->upload(b, d->k, w->kb, 2 * (size_t)pool);
    }
    d->q  = b->alloc(b, sizeof(float) * qn, "q");
    d->cs = b->alloc(b, sizeof(float) * tn, "cos");
    d->sn = b->alloc(b, sizeof(float) * tn, "sin");
    d->qb = b->alloc(b, sizeof(lc_qblock) * (size_t)w->n_qb, "qb");
    CHECK(d->k && d->q && d->cs && d->sn && d->qb);
    b->upload(b, d->q, w->q, sizeof(float) * qn);
    b->upload(b, d->cs, w->rope.cos, sizeof(float) * (tn - 1));
    b->upload(b, d->sn, w->rope.sin, sizeof(float) * (tn - 1));
    b->upload(b, d->qb, w->qb, sizeof(lc_qblock) * (size_t)w->n_qb);
}

static void dev_world_free(lc_backend *b, dev_world *d) {
    b->dealloc(b, d->k), b->dealloc(b, d->q), b->dealloc(b, d->cs), b->dealloc(b, d->sn);
    b->dealloc(b, d->qb);
    if (d->cen) b->dealloc(b, d->cen);
}

/* Run the stage on the GPU (inputs of st), results into gout / gout_n (host). */
static int gpu_stage(lc_backend *b, const hs_world *w, const dev_world *d, const hs_stage *st,
                     lc_segment *gout, int32_t *gout_n) {
    const lc_prune_chunks_args *a       = &st->a;
    const int32_t            n_pairs = w->n_qb * a->n_groups;
    const size_t             ob = sizeof(lc_segment) * (size_t)n_pairs * a->n_keep, nb = sizeof(int32_t) * (size_t)n_pairs;
    const size_t             ib = a->in ? sizeof(lc_segment) * (size_t)n_pairs * (a->in_cap > 0 ? a->in_cap : 1) : 0;
    lc_segment              *din  = a->in ? b->alloc(b, ib, "in") : NULL;
    int32_t                 *din_n = a->in ? b->alloc(b, nb, "in_n") : NULL;
    lc_segment              *dout  = b->alloc(b, ob, "out");
    int32_t                 *dout_n = b->alloc(b, nb, "out_n");
    if (a->in) {
        if (a->in_cap > 0) b->upload(b, din, a->in, sizeof(lc_segment) * (size_t)n_pairs * a->in_cap);
        b->upload(b, din_n, a->in_n, nb);
    }
    lc_prune_chunks_args da = *a;
    lc_rotated_keys   rk = {0}; /* the caller's rotated keys (used with tuning.rotate_keys) */
    da.in = din, da.in_n = din_n, da.out = dout, da.out_n = dout_n, da.rot = &rk;
    lc_rope_table    rope = {w->rope.n_pos, w->rope.n_rot, w->rope.pairing, d->cs, d->sn, w->rope.mscale};
    lc_kv_layer_view kv   = {d->k, d->k, w->cs.P, w->cs.H, w->cs.D, NULL, d->cen != NULL, d->cen};
    int              rc   = LC_OK;
    for (int run = 0; run < 2 && rc == LC_OK; run++) {
        lc_segment *o  = malloc(ob);
        int32_t    *on = malloc(nb);
        memset(o, 0xff, ob), memset(on, 0xff, nb); /* poison */
        b->upload(b, dout, o, ob);
        b->upload(b, dout_n, on, nb);
        /* the second run: the same batch, so rotated keys the first one filled are reused (and
           must give the same bytes) */
        if (run == 0) CHECK(b->batch_begin(b, w->seqs, w->cs.n_seqs, w->cs.P) == LC_OK);
        rc = b->prune_chunks(b, &kv, w->seqs, w->cs.n_seqs, d->qb, w->n_qb, d->q, w->n_head, &rope, &da);
        if (rc == LC_OK) rc = lc_cuda_sync();
        if (rc == LC_OK) {
            b->download(b, o, dout, ob);
            b->download(b, on, dout_n, nb);
            if (run == 0) memcpy(gout, o, ob), memcpy(gout_n, on, nb);
            else {
                int same = memcmp(on, gout_n, nb) == 0;
                for (int32_t bg = 0; same && bg < n_pairs; bg++)
                    same = memcmp(o + (int64_t)bg * a->n_keep, gout + (int64_t)bg * a->n_keep,
                                  sizeof(lc_segment) * (size_t)(on[bg] > 0 ? on[bg] : 0)) == 0;
                CHECKF(same, "a second GPU run differs from the first");
            }
        }
        free(o), free(on);
    }
    b->dealloc(b, din), b->dealloc(b, din_n), b->dealloc(b, dout), b->dealloc(b, dout_n);
    lc_rotated_keys_release(b, &rk);
    return rc;
}

/* CPU twin and GPU on one stage; both checked against the reference; returns via gout the GPU's
 * result (for chaining). */
static void run_stage(lc_backend *b, const hs_world *w, const dev_world *d, hs_stage *st,
                      lc_segment *gout, int32_t *gout_n, const char *what, int exact) {
    const lc_prune_chunks_args *a       = &st->a;
    const int32_t            n_pairs = w->n_qb * a->n_groups;
    lc_kv_layer_view         kv      = {w->k, w->k, w->cs.P, w->cs.H, w->cs.D, NULL, false, NULL};
    double                   t0      = lc_time_s();
    const int rc = lc_cpu_prune_chunks(&kv, w->seqs, w->cs.n_seqs, w->qb, w->n_qb, w->q, w->n_head,
                                    &w->rope, a);
    CHECKF(rc == LC_OK, "%s: CPU: %s", what, lc_last_error());
    double t1 = lc_time_s();
    const int grc = gpu_stage(b, w, d, st, gout, gout_n);
    CHECKF(grc == LC_OK, "%s: GPU: %s", what, lc_last_error());
    double t2 = lc_time_s();
    if (rc != LC_OK || grc != LC_OK) return;
    hs_ref r;
    hs_reference(w, a, tol_gpu, &r);
    double t3 = lc_time_s();
    char   lbl[200];
    snprintf(lbl, sizeof lbl, "%s [CPU]", what);
    hs_check(w, a, &r, st->out, st->out_n, tol_cpu, exact, lbl);
    snprintf(lbl, sizeof lbl, "%s [GPU]", what);
    const int64_t sw = hs_check(w, a, &r, gout, gout_n, tol_gpu, exact, lbl);
    /* GPU vs CPU twin: kept chunks that differ */
    int64_t diff = 0, kept = 0;
    for (int32_t bg = 0; bg < n_pairs; bg++) {
        if (gout_n[bg] != st->out_n[bg]) continue;
        const lc_segment *x = gout + (int64_t)bg * a->n_keep, *y = st->out + (int64_t)bg * a->n_keep;
        int32_t           i = 0, j = 0, common = 0;
        while (i < gout_n[bg] && j < st->out_n[bg]) {
            if (x[i].start == y[j].start) common++, i++, j++;
            else if (x[i].start < y[j].start) i++;
            else j++;
        }
        diff += gout_n[bg] - common, kept += gout_n[bg];
    }
    total_diff += diff, total_kept += kept;
    if (getenv("LC_TEST_VERBOSE") || w->n_pos > 100000)
        printf("  %s: %lld of %lld kept chunks differ from the CPU twin (%lld from the reference "
               "point set), %lld ambiguous descent steps; CPU %.2fs GPU %.2fs ref %.2fs\n", what,
               (long long)diff, (long long)kept, (long long)sw, (long long)r.n_amb, t1 - t0,
               t2 - t1, t3 - t2);
    hs_ref_free(&r);
}

static const char *mode_name[] = {"plain", "relative", "chunk"};

/* The CPU test's grid. pass 1 runs it with tuning stage_one_cta (every chunk wave of a unit
 * in one CTA, the select reading global memory) and one 8-chunk tile per warp (stage_tiles 1);
 * pass 2 its plain-RoPE cases with the prefill sequences' keys rotated into fp16 tiles first
 * (rotate_keys on; the decode row's block still rotates its probes). */
static const char *pass_name[] = {"", "[one CTA per unit] ", "[rotated keys] "};
static void run_grid(lc_backend *b, int pass) {
    if (pass == 1) b->tuning.stage_one_cta = true, b->tuning.stage_tiles = 1;
    if (pass == 2) b->tuning.rotate_keys = LC_TUNE_ON;
    const int32_t dims[] = {64, 128}, gqa[][2] = {{4, 1}, {3, 3}, {2, 4}, {1, 8}};
    int           k = 0;
    for (int di = 0; di < 2; di++)
        for (int gi = 0; gi < 4; gi++)
            for (int mode = 0; mode < 3; mode++)
                for (int later = 0; later < 2; later++)
                    for (int gr = 0; gr < 2; gr++, k++) {
                        if (pass == 2 && mode != LC_SCAN_PLAIN) continue;
                        const int32_t bq = k % 3 == 0 ? 64 : (k % 3 == 1 ? 16 : 48);
                        hs_case cs = {dims[di], gqa[gi][0], gqa[gi][1], k % 2 ? 16 : 64, dims[di],
                                      k % 5 == 2 ? LC_ROPE_NEOX : LC_ROPE_NORM, bq, 8, 32, 0, 1, 0,
                                      3, {0, 300 + k, 700}, {150, 37 + k, 1}};
                        if (k % 7 == 3) cs.n_rot = dims[di] / 2; /* partial rotary */
                        hs_world w;
                        hs_world_make(&cs, &w);
                        dev_world d;
                        dev_world_make(b, &w, &d);
                        const int32_t ng = gr ? cs.H : 1, qs = k % 4 == 0 ? 1 : (k % 4 == 1 ? 4 : 2);
                        const int32_t chunk = later ? (k % 3 ? 5 : 4) : (k % 4 ? 16 : 13);
                        const int32_t keep  = later ? 3 + k % 4 : 4 + k % 5;
                        hs_stage      st;
                        hs_first_offset = k % 3 == 1 ? chunk / 2 : k % 3 == 2 ? 1 : 0;
                        hs_first_stride = (k / 3) % 2 ? chunk / 2 : 0; /* overlapping chunks */
                        /* one descent per KV head: its G heads' pooled rows together (at most
                         * 256 on CUDA: G 8 with 64 rows per block is refused, checked below) */
                        hs_kv_descent = (k / 4) % 2 && cs.G * ((bq + qs - 1) / qs) <= 256;
                        hs_stage_make(&w, &st, chunk, keep, qs, mode, ng, later, NULL, NULL, 0);
                        hs_first_offset = 0, hs_first_stride = 0, hs_kv_descent = 0;
                        char what[240];
                        snprintf(what, sizeof what, "%sD%d H%d G%d %s %s offset %d stride %d kv %d groups %d "
                                 "b_q %d q_stride %d l_c %d keep %d P%d rot%d %s", pass_name[pass],
                                 cs.D, cs.H, cs.G, mode_name[mode], later ? "later" : "first",
                                 st.a.first_offset, st.a.first_stride, st.a.kv_descent, ng, bq,
                                 qs, chunk, keep, cs.P, cs.n_rot,
                                 cs.pairing == LC_ROPE_NEOX ? "neox" : "norm");
                        const int32_t n_pairs = w.n_qb * ng;
                        lc_segment   *go  = malloc(sizeof(lc_segment) * (size_t)n_pairs * keep);
                        int32_t      *gon = malloc(sizeof(int32_t) * (size_t)n_pairs);
                        run_stage(b, &w, &d, &st, go, gon, what, 0);
                        free(go), free(gon);
                        hs_stage_free(&st);
                        dev_world_free(b, &d);
                        hs_world_free(&w);
                    }
    b->tuning = base_tuning;
}

/* One stage on a fresh world of case cs (first stage, or later = 1: random input lists), with
 * kv one descent per KV head: CPU twin, GPU and reference compared by run_stage. */
static void run_one_stage(lc_backend *b, const hs_case *cs, int32_t chunk, int32_t keep, int32_t qs,
                          int32_t mode, int32_t ng, int later, int kv, const char *what) {
    hs_world w;
    hs_world_make(cs, &w);
    dev_world d;
    dev_world_make(b, &w, &d);
    hs_stage st;
    hs_kv_descent = kv;
    hs_stage_make(&w, &st, chunk, keep, qs, mode, ng, later, NULL, NULL, 0);
    hs_kv_descent = 0;
    const int32_t n_pairs = w.n_qb * ng;
    lc_segment   *go  = malloc(sizeof(lc_segment) * (size_t)n_pairs * keep);
    int32_t      *gon = malloc(sizeof(int32_t) * (size_t)n_pairs);
    run_stage(b, &w, &d, &st, go, gon, what, 0);
    free(go), free(gon);
    hs_stage_free(&st);
    dev_world_free(b, &d);
    hs_world_free(&w);
}

/* Big blocks: 128 and 256 pooled queries (8 and 16 m-tiles per unit), all three modes; then
 * plain RoPE again with rotated keys (rot); then 64-row blocks with one descent per KV head
 * (G 4: 256 rows per unit, and 4 in the decode row's block). */
static void run_big_blocks(lc_backend *b, int rot) {
    if (rot) b->tuning.rotate_keys = LC_TUNE_ON;
    for (int big = 0; big < 3; big++)
        for (int mode = 0; mode < 3; mode++) {
            if (rot && mode != LC_SCAN_PLAIN) continue;
            const int32_t bq = big == 2 ? 64 : big ? 256 : 128;
            hs_case       cs = {128, 2, 4, 64, 128, mode == 2 ? LC_ROPE_NEOX : LC_ROPE_NORM, bq, 16, 64,
                                0, 1, 0, 2, {2000, 900}, {bq + 40, 1}};
            char          what[160];
            snprintf(what, sizeof what, "%s%d-row blocks, q_stride 1, %s, %s stage%s",
                     rot ? "[rotated keys] " : "", bq, mode_name[mode], big == 1 ? "later" : "first",
                     big == 2 ? ", one descent per KV head" : "");
            run_one_stage(b, &cs, 16, 9, 1, mode, big == 1 ? 2 : 1, big == 1, big == 2, what);
        }
    b->tuning = base_tuning;
}

/* Decode-only launches (every block one row: a batch of decode sequences of different lengths),
 * the sizes the transposed scoring (keys as the mma's A, at most 8 query columns as B) and the
 * chunk ranges taken several to a CTA serve: first and later stages, the 3 modes, per query
 * head and one descent per KV head (G 8 with relative RoPE is 16 columns: the other path),
 * n_groups 1 and n_kv_head; as launched (relative RoPE: keys straight into registers), then
 * with tuning stage_transpose smem (transposed through shared memory) and off (untransposed). */
static void run_decode_rows(lc_backend *b) {
    const int32_t gqa[][2] = {{2, 4}, {4, 1}, {1, 8}, {3, 2}};
    static const char *tr_name[] = {" [untransposed]", " [transposed in shared memory]", ""};
    for (int tr = 2; tr >= 0; tr--) {
        if (tr < 2)
            b->tuning.stage_transpose = tr ? LC_TUNE_TRANSPOSE_SMEM : LC_TUNE_TRANSPOSE_OFF;
        int k = 0;
        for (int di = 0; di < 2; di++)
            for (int gi = 0; gi < 4; gi++)
                for (int mode = 0; mode < 3; mode++)
                    for (int later = 0; later < 2; later++)
                        for (int kv = 0; kv < 2; kv++, k++) {
                            const int32_t D  = di ? 128 : 64;
                            hs_case       cs = {D, gqa[gi][0], gqa[gi][1], k % 2 ? 16 : 64, k % 5 == 2 ? D / 2 : D,
                                                k % 3 == 1 ? LC_ROPE_NEOX : LC_ROPE_NORM, 1, 8, 32, 0, 1, 0,
                                                3, {2400 + 7 * k, 900 + k, 1500}, {1, 1, 1}};
                            const int32_t ng = k % 3 == 2 ? cs.H : 1, chunk = later ? 5 + k % 4 : 16 + k % 3;
                            const int32_t keep = later ? 4 + k % 5 : 9 + k % 4;
                            char          what[200];
                            snprintf(what, sizeof what, "decode rows%s: D%d H%d G%d %s %s kv %d groups %d l_c %d "
                                     "keep %d P%d rot%d", tr_name[tr], D, cs.H, cs.G,
                                     mode_name[mode], later ? "later" : "first", kv, ng, chunk, keep, cs.P,
                                     cs.n_rot);
                            run_one_stage(b, &cs, chunk, keep, 4, mode, ng, later, kv, what);
                        }
    }
    b->tuning = base_tuning;
    /* chunks spanning more pages than a descent caches (16-token pages, 600-token chunks: 38
     * pages, 8 cached, the rest read from the page table per probe), relative RoPE */
    for (int kv = 0; kv < 2; kv++) {
        const hs_case cs = {128, 2, 4, 16, 128, LC_ROPE_NORM, 1, 8, 32, 0, 1, 0, 3, {5000, 3100, 4321}, {1, 1, 1}};
        run_one_stage(b, &cs, 600, 3, 4, LC_SCAN_RELATIVE, 1, 0, kv,
                      kv ? "decode rows: 600-token chunks on 16-token pages, kv 1"
                         : "decode rows: 600-token chunks on 16-token pages");
    }
}

/* exact ties (the later chunks are kept), then a stage on the tied output; keep-all */
static void run_ties(lc_backend *b) {
    for (int gr = 0; gr < 2; gr++) {
        hs_case  cs = {128, 2, 3, 16, 128, LC_ROPE_NORM, 64, 8, 16, 1, 1, 0, 2, {500, 0}, {70, 1}};
        hs_world w;
        hs_world_make(&cs, &w);
        dev_world d;
        dev_world_make(b, &w, &d);
        hs_stage st, s2, s3;
        const int32_t ng = gr ? 2 : 1;
        lc_segment   *go  = malloc(sizeof(lc_segment) * (size_t)w.n_qb * ng * 1000);
        int32_t      *gon = malloc(sizeof(int32_t) * (size_t)w.n_qb * ng);
        hs_stage_make(&w, &st, 32, 5, 4, LC_SCAN_RELATIVE, ng, 0, NULL, NULL, 0);
        run_stage(b, &w, &d, &st, go, gon, "ties, first stage", 1);
        hs_stage_make(&w, &s2, 8, 6, 1, LC_SCAN_RELATIVE, ng, 2, go, gon, 5);
        run_stage(b, &w, &d, &s2, go, gon, "ties, second stage", 1);
        hs_stage_make(&w, &s3, 7, 1000, 2, LC_SCAN_RELATIVE, ng, 0, NULL, NULL, 0);
        run_stage(b, &w, &d, &s3, go, gon, "keep everything", 1);
        hs_stage_free(&st), hs_stage_free(&s2), hs_stage_free(&s3);
        free(go), free(gon);
        dev_world_free(b, &d);
        hs_world_free(&w);
    }
}

/* one descent per KV head over more than 256 pooled rows (G 8 x 64) is refused, by name */
static void run_refused(lc_backend *b) {
        hs_case  cs = {64, 1, 8, 16, 64, LC_ROPE_NORM, 64, 8, 16, 0, 1, 0, 1, {300}, {64}};
        hs_world w;
        hs_world_make(&cs, &w);
        dev_world d;
        dev_world_make(b, &w, &d);
        hs_kv_descent = 1;
        hs_stage st;
        hs_stage_make(&w, &st, 16, 4, 1, LC_SCAN_RELATIVE, 1, 0, NULL, NULL, 0);
        hs_kv_descent = 0;
        lc_segment *go  = malloc(sizeof(lc_segment) * (size_t)w.n_qb * 4);
        int32_t    *gon = malloc(sizeof(int32_t) * (size_t)w.n_qb);
        CHECK(gpu_stage(b, &w, &d, &st, go, gon) == LC_ERR_UNSUPPORTED &&
              strstr(lc_last_error(), "KV head"));
        free(go), free(gon);
        hs_stage_free(&st);
        dev_world_free(b, &d);
        hs_world_free(&w);
    }

/* Llama-3.1-8B shape at 128K keys: the 3k preset's stages, chained on the GPU's outputs */
static void run_8b_chain(lc_backend *b) {
        const int32_t T  = 131072;
        hs_case       cs = {128, 8, 4, 64, 128, LC_ROPE_NORM, 64, 256, 1024, 0, 1, 1,
                            2, {T - 1, T - 128}, {1, 128}};
        hs_world      w;
        hs_world_make(&cs, &w);
        dev_world d;
        dev_world_make(b, &w, &d);
        hs_stage   s1, s2, s3;
        lc_segment *g1 = malloc(sizeof(lc_segment) * (size_t)w.n_qb * 128);
        lc_segment *g2 = malloc(sizeof(lc_segment) * (size_t)w.n_qb * 256);
        lc_segment *g3 = malloc(sizeof(lc_segment) * (size_t)w.n_qb * 256);
        int32_t    *n1 = malloc(sizeof(int32_t) * (size_t)w.n_qb), *n2 = malloc(sizeof(int32_t) * (size_t)w.n_qb);
        int32_t    *n3 = malloc(sizeof(int32_t) * (size_t)w.n_qb);
        /* relative RoPE, per query head and again with one descent per KV head (4 heads x 16
         * or 64 pooled rows a unit) */
        for (int kv = 0; kv < 2; kv++) {
            const char *sfx = kv ? ", one descent per KV head" : "";
            char        what[3][96];
            snprintf(what[0], sizeof what[0], "8B 128K stage 1 (l_c 256, keep 128)%s", sfx);
            snprintf(what[1], sizeof what[1], "8B 128K stage 2 (l_c 32, keep 256)%s", sfx);
            snprintf(what[2], sizeof what[2], "8B 128K stage 3 (l_c 8, keep 256)%s", sfx);
            hs_kv_descent = kv;
            hs_stage_make(&w, &s1, 256, 128, 4, LC_SCAN_RELATIVE, 1, 0, NULL, NULL, 0);
            run_stage(b, &w, &d, &s1, g1, n1, what[0], 0);
            hs_stage_make(&w, &s2, 32, 256, 4, LC_SCAN_RELATIVE, 1, 2, g1, n1, 128);
            run_stage(b, &w, &d, &s2, g2, n2, what[1], 0);
            hs_stage_make(&w, &s3, 8, 256, 1, LC_SCAN_RELATIVE, 1, 2, g2, n2, 256);
            run_stage(b, &w, &d, &s3, g3, n3, what[2], 0);
            hs_kv_descent = 0;
            hs_stage_free(&s1), hs_stage_free(&s2), hs_stage_free(&s3);
        }
        /* the chunk-indexed mode (layers 1-3) on stage 1 too */
        hs_stage s4;
        hs_stage_make(&w, &s4, 256, 128, 4, LC_SCAN_CHUNK, 1, 0, NULL, NULL, 0);
        run_stage(b, &w, &d, &s4, g1, n1, "8B 128K stage 1, chunk-indexed RoPE", 0);
        hs_stage_free(&s4);
        /* plain RoPE (a context inside the trained window): the three stages chained, then
         * again with the prefill sequence's keys rotated into fp16 tiles first (the decode
         * row's block rotates its probes in the same calls) */
        for (int rotated = 0; rotated < 3; rotated++) { /* 2: rotated, stages 1-2 per KV head */
            if (rotated) b->tuning.rotate_keys = LC_TUNE_ON;
            char what[3][80];
            for (int i = 0; i < 3; i++)
                snprintf(what[i], sizeof what[i], "8B 128K stage %d, plain RoPE%s%s", i + 1,
                         rotated ? ", rotated keys" : "",
                         rotated == 2 && i < 2 ? ", one descent per KV head" : "");
            hs_kv_descent = rotated == 2;
            hs_stage_make(&w, &s1, 256, 128, 4, LC_SCAN_PLAIN, 1, 0, NULL, NULL, 0);
            run_stage(b, &w, &d, &s1, g1, n1, what[0], 0);
            hs_stage_make(&w, &s2, 32, 256, 4, LC_SCAN_PLAIN, 1, 2, g1, n1, 128);
            hs_kv_descent = 0;
            run_stage(b, &w, &d, &s2, g2, n2, what[1], 0);
            hs_stage_make(&w, &s3, 8, 256, 1, LC_SCAN_PLAIN, 1, 2, g2, n2, 256);
            run_stage(b, &w, &d, &s3, g3, n3, what[2], 0);
            hs_stage_free(&s1), hs_stage_free(&s2), hs_stage_free(&s3);
        }
        b->tuning = base_tuning;
        free(g1), free(g2), free(g3), free(n1), free(n2), free(n3);
        dev_world_free(b, &d);
        hs_world_free(&w);
    }

/* Llama-3.1-8B shape, decode only (two rows at 128K and 70K keys, the transposed scoring
 * and several chunk ranges a CTA): the 3k preset's stages chained, relative RoPE, per
 * query head and one descent per KV head */
static void run_8b_decode(lc_backend *b) {
        const int32_t T  = 131072;
        hs_case       cs = {128, 8, 4, 64, 128, LC_ROPE_NORM, 1, 256, 1024, 0, 1, 1,
                            2, {T - 1, 70001}, {1, 1}};
        hs_world      w;
        hs_world_make(&cs, &w);
        dev_world d;
        dev_world_make(b, &w, &d);
        hs_stage   s1, s2, s3;
        lc_segment g1[2 * 128], g2[2 * 256], g3[2 * 256];
        int32_t    n1[2], n2[2], n3[2];
        for (int kv = 0; kv < 3; kv++) { /* 2: per query head, 2 tiles a warp (stage_tiles) */
            const char *sfx = kv == 1 ? ", one descent per KV head" : kv == 2 ? ", S 2" : "";
            char        what[3][96];
            if (kv == 2) b->tuning.stage_tiles = 2;
            for (int i = 0; i < 3; i++)
                snprintf(what[i], sizeof what[i], "8B decode rows stage %d%s", i + 1, sfx);
            hs_kv_descent = kv == 1;
            hs_stage_make(&w, &s1, 256, 128, 4, LC_SCAN_RELATIVE, 1, 0, NULL, NULL, 0);
            run_stage(b, &w, &d, &s1, g1, n1, what[0], 0);
            hs_stage_make(&w, &s2, 32, 256, 4, LC_SCAN_RELATIVE, 1, 2, g1, n1, 128);
            run_stage(b, &w, &d, &s2, g2, n2, what[1], 0);
            hs_stage_make(&w, &s3, 8, 256, 1, LC_SCAN_RELATIVE, 1, 2, g2, n2, 256);
            run_stage(b, &w, &d, &s3, g3, n3, what[2], 0);
            hs_kv_descent = 0;
            hs_stage_free(&s1), hs_stage_free(&s2), hs_stage_free(&s3);
        }
        b->tuning = base_tuning;
        dev_world_free(b, &d);
        hs_world_free(&w);
    }

/* n = {group, argument} */
enum { HS_GRID, HS_BIG_BLOCKS, HS_DECODE_ROWS, HS_TIES, HS_REFUSED, HS_8B_CHAIN, HS_8B_DECODE };
static const op_shape prune_chunks_shapes[] = {
    {"grid", {HS_GRID, 0}, false},
    {"grid, one CTA per unit, 8-chunk tiles", {HS_GRID, 1}, false},
    {"grid, rotated keys (plain RoPE)", {HS_GRID, 2}, false},
    {"big blocks (128 / 256 / 64 rows a block)", {HS_BIG_BLOCKS, 0}, false},
    {"big blocks, rotated keys", {HS_BIG_BLOCKS, 1}, false},
    {"decode rows (3 transpose modes, long chunks)", {HS_DECODE_ROWS, 0}, false},
    {"ties and keep-all", {HS_TIES, 0}, false},
    {"kv descent over 256 rows refused", {HS_REFUSED, 0}, false},
    {"8B 128K three stages chained", {HS_8B_CHAIN, 0}, true},
    {"8B decode rows 128K / 70K three stages", {HS_8B_DECODE, 0}, true},
    {"fp8 KV: grid", {HS_GRID, 0, 1}, false},
    {"fp8 KV: grid, rotated keys (plain RoPE)", {HS_GRID, 2, 1}, false},
    {"fp8 KV: decode rows", {HS_DECODE_ROWS, 0, 1}, false},
    {"fp8 KV: 8B 128K three stages chained", {HS_8B_CHAIN, 0, 1}, true},
    {"fp8 KV: 8B decode rows 128K / 70K three stages", {HS_8B_DECODE, 0, 1}, true},
};

static void prune_chunks_check(op_env *e, const op_shape *sh, op_result *r) {
    lc_backend *b = e->dev;
    base_tuning   = e->tuning;
    hs_rng        = e->rng;
    total_diff = total_kept = 0;
    g_e8 = sh->n[2] == 1;
    switch (sh->n[0]) {
    case HS_GRID: run_grid(b, (int)sh->n[1]); break;
    case HS_BIG_BLOCKS: run_big_blocks(b, (int)sh->n[1]); break;
    case HS_DECODE_ROWS: run_decode_rows(b); break;
    case HS_TIES: run_ties(b); break;
    case HS_REFUSED: run_refused(b); break;
    case HS_8B_CHAIN: run_8b_chain(b); break;
    default: run_8b_decode(b); break;
    }
    b->tuning = base_tuning;
    g_e8      = false;
    (void)r;
    if (total_kept)
        printf("  %lld of %lld kept chunks differ from the CPU twin (all within the tolerance)\n",
               (long long)total_diff, (long long)total_kept);
}

const op_entry op_prune_chunks = {"prune_chunks", "selected chunks vs the CPU twin and the double "
                               "reference's tolerance intervals", prune_chunks_shapes,
                               OP_N_SHAPES(prune_chunks_shapes), 0, false, NULL, NULL, NULL, NULL,
                               NULL, prune_chunks_check};
