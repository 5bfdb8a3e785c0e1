/*
 * test_attn_segments.c — the CPU InfiniteHiP block-sparse attention (lc_cpu_attn_segments,
 * backend/backend.h "Sparse attention") against a naive per-row reference written here from
 * the contract: for every token t <= p decide whether it is a sink, selected or window key,
 * give it its rope position (PLAIN: t; STREAMING: sinks and selected tokens renumbered to sit
 * just before the window; GAPS: as STREAMING with the gaps between them kept in proportion),
 * rotate with lc_cpu_rope_vec, softmax in double.
 * Cases: scattered page tables (page sizes 16 and 64), several sequences in one call, decode
 * blocks (1 row) and prefill blocks up to 64 rows, the three attn_rope modes, n_groups 1 and
 * n_kv_head, head dims 64 and 128, GQA 1/3/4/8, both pairings, partial rotary with a YaRN
 * factor, empty selections, odd-length segments, positions before n_sink, rows left out of
 * every block (must stay untouched). Full coverage (one segment [n_sink, win0)) must equal
 * lc_cpu_attn_dense in both rope modes. With a slab map (the slot cache's) moving about half
 * the slabs elsewhere, NaN at home, the same bits. Malformed selections must be refused.
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "model/model.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_segments_world.h"

/* The naive reference for block b, block row r, query head qh (double). */
static void naive_row(const world *w, int32_t b, int32_t r, int32_t qh, float scale, double *out) {
    const tcase         *c = &w->c;
    const lc_qblock *B = &w->qb[b];
    const int32_t        D = c->D, P = c->P, H = c->H, G = c->G, kh = qh / G;
    const int32_t        g = c->n_groups == 1 ? 0 : kh;
    const int32_t        ns = w->sel_n[b * c->n_groups + g];
    const lc_segment    *s  = w->sel + ((int64_t)b * c->n_groups + g) * w->sel_cap;
    const int32_t        p  = B->pos0 + r;
    const int32_t        n_s = c->n_sink < B->win0 ? c->n_sink : B->win0;
    int32_t              n_sel = 0;
    for (int32_t i = 0; i < ns; i++) n_sel += s[i].len;
    const float *qv  = w->q + ((int64_t)B->row0 + r) * w->n_head * D + (int64_t)qh * D;
    double      *sc  = malloc(sizeof(double) * (p + 1));
    bool        *use = malloc(sizeof(bool) * (p + 1));
    bool        *in  = calloc((size_t)p + 1, sizeof(bool)); /* selected */
    for (int32_t i = 0; i < ns; i++)
        for (int32_t t = s[i].start; t < s[i].start + s[i].len && t <= p; t++) in[t] = true;
    double       mx  = -INFINITY;
    int32_t      rank = 0;
    float        kr[512];
    /* GAPS: the positions of the tokens not attended before the window, `gone`, shrink to
       `kept` of them, spread in proportion to the gaps after each attended key */
    const int32_t last = B->pos0 + B->n_rows - 1, gone = B->win0 - n_sel - n_s;
    int32_t       kept = c->attn_rope != LC_ATTN_ROPE_GAPS
                             ? 0
                             : w->a.gap_span - (n_s + n_sel) - (last - B->win0 + 1);
    kept = kept < 0 ? 0 : kept > gone ? gone : kept;
    for (int32_t t = 0; t <= p; t++) {
        const bool in_sel = in[t];
        int32_t    pos    = -1;
        const int32_t idx = t < n_s ? t : n_s + rank; /* index among the attended before win0 */
        if (t < n_s || in_sel) {
            const int32_t after = gone - (t - idx); /* tokens not attended after t, before win0 */
            pos = c->attn_rope == LC_ATTN_ROPE_PLAIN ? t
                  : gone == 0 ? idx
                              : B->win0 - (n_s + n_sel - idx) -
                                    (int32_t)floor((double)kept * after / gone);
        } else if (t >= B->win0)
            pos = t;
        if (in_sel) rank++;
        use[t] = pos >= 0;
        if (!use[t]) continue;
        const float *k = w->k + (((int64_t)w->seqs[B->seq].page_table[t / P] * H + kh) * P + t % P) * D;
        memcpy(kr, k, sizeof(float) * D);
        lc_cpu_rope_vec(kr, pos, &w->rope);
        double d = 0;
        for (int32_t i = 0; i < D; i++) d += (double)qv[i] * kr[i];
        sc[t] = d * scale;
        if (sc[t] > mx) mx = sc[t];
    }
    double sum = 0;
    for (int32_t i = 0; i < D; i++) out[i] = 0;
    for (int32_t t = 0; t <= p; t++) {
        if (!use[t]) continue;
        const double e = exp(sc[t] - mx);
        sum += e;
        const float *v = w->v + (((int64_t)w->seqs[B->seq].page_table[t / P] * H + kh) * P + t % P) * D;
        for (int32_t i = 0; i < D; i++) out[i] += e * v[i];
    }
    for (int32_t i = 0; i < D; i++) out[i] = sum > 0 ? out[i] / sum : 0.0;
    free(sc), free(use), free(in);
}

static double worst_naive, worst_dense;

static void run_case(const char *what, const tcase *c, const tseq *ts, int32_t n_seqs) {
    world w;
    build(&w, c, ts, n_seqs);
    const int32_t D     = c->D;
    const float   scale = 1.0f / sqrtf((float)D);
    const int64_t qn    = (int64_t)w.rows * w.n_head * D;
    float        *out   = malloc(sizeof(float) * qn);
    memset(out, 0xff, sizeof(float) * qn); /* poison: NaN */
    int st = lc_cpu_attn_segments(&w.kv, w.seqs, w.n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope,
                                scale, &w.a, out);
    CHECKF(st == LC_OK, "%s: %s", what, lc_last_error());
    double ref[512];
    int    bad = 0;
    for (int32_t b = 0; b < w.n_qb && !bad; b++)
        for (int32_t r = 0; r < w.qb[b].n_rows && !bad; r++)
            for (int32_t qh = 0; qh < w.n_head; qh++) {
                naive_row(&w, b, r, qh, scale, ref);
                const float *got = out + ((int64_t)(w.qb[b].row0 + r) * w.n_head + qh) * D;
                double       num = 0, den = 0;
                int          nonfinite = 0;
                for (int32_t i = 0; i < D; i++) {
                    if (!isfinite(got[i])) nonfinite++;
                    num += (got[i] - ref[i]) * (got[i] - ref[i]);
                    den += ref[i] * ref[i];
                }
                const double e = den > 0 ? num / den : num;
                if (e > worst_naive) worst_naive = e;
                if (!(nonfinite == 0 && e < 1e-9)) {
                    bad = 1;
                    CHECKF(0, "%s D%d H%d G%d P%d groups %d rope %s %s sel %d: block %d (pos0 %d, "
                           "rows %d, win0 %d) row %d head %d: nmse %.3g vs naive, %d non-finite",
                           what, D, c->H, c->G, c->P, c->n_groups,
                           rope_name(c->attn_rope),
                           c->pairing == LC_ROPE_NEOX ? "neox" : "norm", c->sel_mode, b,
                           w.qb[b].pos0, w.qb[b].n_rows, w.qb[b].win0, r, qh, e, nonfinite);
                    break;
                }
            }
    CHECK(!bad);
    /* through a slab map (the slot cache's, kv/slab_bank.h): about half the slabs moved to
     * pages past the pool, NaN at home; the same bits */
    if (c->sel_mode == SEL_MIXED) {
        const int64_t slabs = (int64_t)w.n_pages * c->H, se = (int64_t)c->P * D;
        float        *k2 = malloc(sizeof(float) * 2 * slabs * se), *v2 = malloc(sizeof(float) * 2 * slabs * se);
        int32_t      *map  = malloc(sizeof(int32_t) * 2 * slabs);
        float        *out2 = malloc(sizeof(float) * qn);
        memset(k2, 0xff, sizeof(float) * 2 * slabs * se), memset(v2, 0xff, sizeof(float) * 2 * slabs * se);
        for (int64_t sl = 0; sl < 2 * slabs; sl++) map[sl] = (int32_t)sl;
        for (int64_t sl = 0; sl < slabs; sl++) {
            const bool    moved = (((uint64_t)sl * 2654435761u) >> 7 & 1) != 0;
            const int64_t to    = moved ? slabs + (slabs - 1 - sl) : sl;
            memcpy(k2 + to * se, (const float *)w.kv.k + sl * se, sizeof(float) * se);
            memcpy(v2 + to * se, (const float *)w.kv.v + sl * se, sizeof(float) * se);
            map[sl] = (int32_t)to;
        }
        lc_kv_layer_view kv2 = w.kv;
        kv2.k = k2, kv2.v = v2, kv2.slab_map = map;
        memset(out2, 0xff, sizeof(float) * qn);
        CHECK(lc_cpu_attn_segments(&kv2, w.seqs, w.n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope,
                                   scale, &w.a, out2) == LC_OK);
        CHECKF(!memcmp(out, out2, sizeof(float) * qn), "%s D%d H%d G%d: other bits through a "
               "slab map", what, D, c->H, c->G);
        free(k2), free(v2), free(map), free(out2);
    }
    /* rows in no block: untouched */
    for (int32_t row = 0; row < w.rows; row++)
        if (!row_covered(&w, row)) {
            const unsigned char *p = (const unsigned char *)(out + (int64_t)row * w.n_head * D);
            bool                 untouched = true;
            for (size_t i = 0; i < sizeof(float) * w.n_head * D; i++) untouched &= p[i] == 0xff;
            CHECKF(untouched, "%s: row %d is in no block but was written", what, row);
        }
    /* full coverage: exactly dense attention */
    if (c->sel_mode == SEL_FULL) {
        float *dense = malloc(sizeof(float) * qn);
        CHECK(lc_cpu_attn_dense(&w.kv, w.seqs, w.n_seqs, w.q, w.n_head, &w.rope, scale, dense) ==
              LC_OK);
        int dbad = 0;
        for (int32_t b = 0; b < w.n_qb && !dbad; b++)
            for (int32_t r = 0; r < w.qb[b].n_rows && !dbad; r++)
                for (int32_t qh = 0; qh < w.n_head && !dbad; qh++) {
                    const int64_t off = ((int64_t)(w.qb[b].row0 + r) * w.n_head + qh) * D;
                    double        mx = 0, md = 0;
                    for (int32_t i = 0; i < D; i++) {
                        mx = fmax(mx, fabs(dense[off + i]));
                        md = fmax(md, fabs((double)dense[off + i] - out[off + i]));
                    }
                    const double rel = md / (mx > 0 ? mx : 1);
                    if (rel > worst_dense) worst_dense = rel;
                    if (!(rel <= 1e-5)) {
                        dbad = 1;
                        CHECKF(0, "%s D%d H%d G%d rope %s: full selection differs from dense at "
                               "block %d row %d head %d: max rel %.3g", what, D, c->H, c->G,
                               rope_name(c->attn_rope), b, r, qh, rel);
                    }
                }
        free(dense);
    }
    free(out);
    world_free(&w);
}

/* A malformed selection (unsorted, overlapping, outside the candidates, over max_sel) is
 * refused with LC_ERR_INVALID_ARG. */
static void test_refusals(void) {
    tcase c = {64, 2, 2, 16, 1, LC_ATTN_ROPE_PLAIN, 8, 32, 16, SEL_RANDOM, LC_ROPE_NORM, 64, false, 0};
    tseq  ts[1] = {{200, 1, 0, 0}};
    world w;
    build(&w, &c, ts, 1);
    float *out = malloc(sizeof(float) * w.rows * w.n_head * c.D);
    const float scale = 0.125f;
    /* the block's candidates are [8, win0 = 169) */
    lc_segment  bad[][2] = {{{20, 4}, {10, 4}},   /* unsorted */
                            {{20, 4}, {22, 4}},   /* overlapping */
                            {{4, 4}, {20, 4}},    /* in the sink */
                            {{20, 4}, {168, 4}},  /* into the window */
                            {{20, -1}, {30, 1}}}; /* negative length */
    for (int i = 0; i < 5; i++) {
        memcpy(w.sel, bad[i], sizeof bad[i]);
        w.sel_n[0] = 2;
        w.a.max_sel = 1000;
        CHECKF(lc_cpu_attn_segments(&w.kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, scale,
                                  &w.a, out) == LC_ERR_INVALID_ARG, "malformed selection %d accepted", i);
    }
    w.sel[0] = (lc_segment){20, 40}, w.sel_n[0] = 1, w.a.max_sel = 39;
    CHECK(lc_cpu_attn_segments(&w.kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, scale, &w.a,
                             out) == LC_ERR_INVALID_ARG);
    w.a.max_sel = 40;
    CHECK(lc_cpu_attn_segments(&w.kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, scale, &w.a,
                             out) == LC_OK);
    w.a.max_window = 31; /* the window is 32 keys */
    CHECK(lc_cpu_attn_segments(&w.kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, scale, &w.a,
                             out) == LC_ERR_INVALID_ARG);
    free(out);
    world_free(&w);
}

/* lc_gap_pos over random attended lists: strictly increasing, inside [base - keep, win0), the
 * list index shifted (STREAMING) at keep 0 and the true position (PLAIN) at keep = base; and
 * lc_gap_keep's clamps. */
static void test_gap_positions(void) {
    CHECK(lc_gap_keep(100, 30, 10, 50) == 50 && lc_gap_keep(60, 30, 10, 50) == 20 &&
          lc_gap_keep(40, 30, 10, 50) == 0 && lc_gap_keep(1, 30, 10, 50) == 0);
    int bad = 0;
    for (int it = 0; it < 200 && !bad; it++) {
        const int32_t win0 = 1 + (int32_t)test_irand(&rng, 5000);
        int32_t       tok[512], n = 0;
        for (int32_t t = 0; t < win0 && n < 512; t++)
            if (test_irand(&rng, 7) == 0) tok[n++] = t;
        const int32_t base = win0 - n;
        for (int32_t keep = 0; keep <= base && !bad; keep += base / 3 + 1) {
            int32_t prev = -1;
            for (int32_t i = 0; i < n; i++) {
                const int32_t pos = lc_gap_pos(base, keep, i, tok[i]);
                const bool ok = pos > prev && pos >= base - keep && pos < win0 &&
                                (keep > 0 || pos == base + i) && (keep < base || pos == tok[i]);
                if (!ok) {
                    bad = 1;
                    CHECKF(0, "gap positions: win0 %d, %d keys, keep %d: entry %d (token %d) at %d "
                           "after %d", win0, n, keep, i, tok[i], pos, prev);
                    break;
                }
                prev = pos;
            }
        }
        for (int32_t i = 0; i < n && !bad; i++) /* keep = base exactly: the true positions */
            if (lc_gap_pos(base, base, i, tok[i]) != tok[i]) {
                bad = 1;
                CHECKF(0, "gap positions: keep = base %d: entry %d not at its token %d", base, i,
                       tok[i]);
            }
    }
    CHECK(!bad);
}

int main(void) {
    rng = 0x9e3779b97f4a7c15ull; /* fixed: the CPU reference cases repeat run to run */
    const int32_t dims[] = {64, 128}, gqa[][2] = {{3, 1}, {2, 3}, {2, 4}, {1, 8}};
    /* one call: a decode row late, a prefill chunk after a history (a full 64-row block and a
     * 36-row one), a sequence starting before n_sink (pos0 < n_sink), a decode row at a
     * position before n_sink, a chunk with rows left out of every block */
    const tseq mix[] = {{700, 1, 0, 0}, {300, 100, 0, 0}, {3, 20, 0, 0}, {10, 1, 0, 0},
                        {150, 90, 10, 40}};
    for (int di = 0; di < 2; di++)
        for (int gi = 0; gi < 4; gi++)
            for (int rope = 0; rope < 3; rope++)
                for (int grp = 0; grp < 2; grp++) {
                    const int32_t H = gqa[gi][0], G = gqa[gi][1], D = dims[di];
                    const lc_rope_pairing pr = (gi + rope) % 2 ? LC_ROPE_NEOX : LC_ROPE_NORM;
                    const int modes[] = {SEL_RANDOM, SEL_FULL, SEL_MIXED}; /* MIXED: empty,
                                                                  odd-length and 8-token lists */
                    for (int mi = 0; mi < 3; mi++) {
                        tcase c = {D, H, G, (gi % 2) ? 64 : 16, grp ? H : 1, rope, 16, 64, 64,
                                   modes[mi], pr, D, false, 0};
                        run_case("mix", &c, mix, 5);
                    }
                    /* decode-only batches and smaller query blocks */
                    const tseq dec[] = {{1000, 1, 0, 0}, {77, 1, 0, 0}, {0, 1, 0, 0}};
                    tcase c = {D, H, G, 16, grp ? H : 1, rope, 16, 64, 1, SEL_MIXED, pr, D, false, 0};
                    run_case("decode", &c, dec, 3);
                    c.bq = 7, c.sel_mode = SEL_RANDOM;
                    run_case("bq7", &c, mix, 5);
                }
    /* partial rotary with a YaRN factor; n_sink 0; a stream window longer than the history */
    for (int rope = 0; rope < 3; rope++) {
        const tseq mix2[] = {{500, 70, 0, 0}, {90, 1, 0, 0}};
        for (int sm = SEL_RANDOM; sm <= SEL_MIXED; sm++) {
            tcase c = {128, 2, 4, 64, 2, rope, 16, 64, 64, sm, LC_ROPE_NORM, 64, true, 0};
            run_case("partial-yarn", &c, mix2, 2);
            tcase c0 = {64, 2, 2, 16, 1, rope, 0, 48, 32, sm, LC_ROPE_NEOX, 64, false, 0};
            run_case("no-sink", &c0, mix2, 2);
            tcase cl = {64, 2, 2, 16, 1, rope, 4, 4096, 32, sm, LC_ROPE_NORM, 64, false, 0};
            run_case("all-window", &cl, mix2, 2);
        }
    }
    test_refusals();
    test_gap_positions();
    fprintf(stderr, "largest nmse vs naive %.3g, largest relative difference from dense %.3g\n",
            worst_naive, worst_dense);
    TEST_END();
}
