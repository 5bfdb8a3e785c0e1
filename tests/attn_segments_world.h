/*
 * attn_segments_world.h — the test world shared by test_attn_segments.c (CPU twin vs a naive
 * reference) and test_attn_segments_cuda.c (GPU vs CPU twin): a random case of the sparse
 * attention op (backend/backend.h "Sparse attention") — RoPE table, fp16-representable fp32
 * K/V pools behind scattered (optionally aliased) page tables, sequences cut into query blocks
 * (some rows in none), and selections of the kinds SEL_*; the caller seeds rng.
 */
#ifndef LC_TEST_HIP_SPARSE_WORLD_H
#define LC_TEST_HIP_SPARSE_WORLD_H

#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "model/model.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng; /* the worlds' random stream (test_util.h); the caller seeds it */


enum { SEL_RANDOM, SEL_EMPTY, SEL_FULL, SEL_SEG8, SEL_MIXED, SEL_LONG };

typedef struct tseq {
    int32_t pos0, n_rows;
    int32_t skip_from, skip_to; /* rows [skip_from, skip_to) are in no block */
} tseq;

typedef struct tcase {
    int32_t         D, H, G, P, n_groups, attn_rope, n_sink, n_stream, bq, sel_mode;
    lc_rope_pairing pairing;
    int32_t         n_rot;
    bool            yarn;
    int32_t         phys_cap; /* > 0: at most this many physical pages (page tables alias) */
} tcase;

/* Random sorted disjoint segments inside [lo, hi), about `want` tokens; odd lengths 1..9 or
 * aligned 8-token segments. */
static int32_t make_segments(int32_t lo, int32_t hi, int32_t want, bool seg8, lc_segment *out,
                             int32_t cap) {
    int32_t n = 0, t = lo;
    if (hi <= lo) return 0;
    const int32_t span = hi - lo;
    const int32_t gap  = want > 0 ? (span > want ? (span - want) / (want / 5 + 1) + 1 : 1) : 1;
    while (t < hi && n < cap) {
        t += (int32_t)test_irand(&rng, (uint32_t)(2 * gap));
        int32_t len = seg8 ? 8 : 1 + 2 * (int32_t)test_irand(&rng, 5);
        if (seg8) t = (t + 7) / 8 * 8;
        if (t >= hi) break;
        if (t + len > hi) len = hi - t;
        out[n++] = (lc_segment){t, len};
        t += len + (seg8 ? 0 : 1);
    }
    return n;
}

typedef struct world {
    tcase          c;
    int32_t        n_head, n_seqs, rows, n_qb, sel_cap, max_pos, n_pages;
    lc_rope_table  rope;
    float         *k, *v, *q;
    int32_t       *perm;
    lc_attn_seq   *seqs;
    lc_qblock *qb;
    lc_segment    *sel;
    int32_t       *sel_n;
    lc_attn_segments_args a;
    lc_kv_layer_view   kv;
} world;

static void world_free(world *w) {
    free(w->rope.cos), free(w->rope.sin), free(w->k), free(w->v), free(w->q), free(w->perm);
    free(w->seqs), free(w->qb), free(w->sel), free(w->sel_n);
}

static void build(world *w, const tcase *c, const tseq *ts, int32_t n_seqs) {
    memset(w, 0, sizeof *w);
    w->c = *c;
    const int32_t P = c->P, H = c->H, D = c->D;
    w->n_head = H * c->G, w->n_seqs = n_seqs;
    int32_t total_pages = 0, max_k = 1, n_qb = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const int32_t k = ts[s].pos0 + ts[s].n_rows;
        max_k = k > max_k ? k : max_k;
        total_pages += (k + P - 1) / P;
        w->rows += ts[s].n_rows;
        n_qb += ts[s].n_rows; /* upper bound */
    }
    w->max_pos = max_k;
    /* RoPE table */
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = c->n_rot, hp.rope_base = 10000.0f, hp.rope_pairing = c->pairing;
    if (c->yarn) {
        hp.rope_scaling = LC_ROPE_SCALING_YARN, hp.rope_factor = 4.0f, hp.rope_orig_ctx = 256;
        hp.yarn_ext_factor = 1.0f, hp.yarn_attn_factor = 1.0f, hp.yarn_beta_fast = 32.0f;
        hp.yarn_beta_slow = 1.0f;
    }
    const size_t half = (size_t)c->n_rot / 2;
    w->rope = (lc_rope_table){max_k, c->n_rot, c->pairing, malloc(sizeof(float) * max_k * half),
                              malloc(sizeof(float) * max_k * half), (float)lc_rope_mscale(&hp)};
    CHECK(lc_rope_table_fill(&hp, NULL, max_k, w->rope.cos, w->rope.sin) == LC_OK);
    /* pools (fp16-representable values, as the CUDA test uses), scattered page tables */
    const int32_t n_pages = c->phys_cap > 0 && c->phys_cap < total_pages + 3 ? c->phys_cap
                                                                              : total_pages + 3;
    const int64_t pool    = (int64_t)n_pages * H * P * D;
    w->k = malloc(sizeof(float) * pool), w->v = malloc(sizeof(float) * pool);
    for (int64_t i = 0; i < pool; i++) {
        w->k[i] = lc_fp16_to_fp32(lc_fp32_to_fp16(2.0f * test_frand(&rng)));
        w->v[i] = lc_fp16_to_fp32(lc_fp32_to_fp16(test_frand(&rng)));
    }
    w->n_pages = n_pages;
    w->perm    = malloc(sizeof(int32_t) * (total_pages + 3));
    if (n_pages == total_pages + 3) {
        for (int32_t i = 0; i < n_pages; i++) w->perm[i] = i;
        for (int32_t i = n_pages - 1; i > 0; i--) {
            const int32_t j = (int32_t)test_irand(&rng, (uint32_t)i + 1), t = w->perm[i];
            w->perm[i] = w->perm[j], w->perm[j] = t;
        }
    } else { /* aliased: random physical pages */
        for (int32_t i = 0; i < total_pages + 3; i++) w->perm[i] = (int32_t)test_irand(&rng, (uint32_t)n_pages);
    }
    w->seqs = malloc(sizeof(lc_attn_seq) * n_seqs);
    int32_t row = 0, pg = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        w->seqs[s] = (lc_attn_seq){row, ts[s].n_rows, ts[s].pos0, w->perm + pg, 0};
        row += ts[s].n_rows;
        pg += (ts[s].pos0 + ts[s].n_rows + P - 1) / P;
    }
    const int64_t qn = (int64_t)w->rows * w->n_head * D;
    w->q = malloc(sizeof(float) * qn);
    for (int64_t i = 0; i < qn; i++) w->q[i] = test_frand(&rng);
    w->kv = (lc_kv_layer_view){w->k, w->v, P, H, D, NULL, false, NULL};
    /* blocks of up to bq rows; rows [skip_from, skip_to) of a sequence in none */
    w->qb = malloc(sizeof(lc_qblock) * n_qb);
    int32_t max_rows = 1, max_window = 0;
    n_qb = 0;
    for (int32_t s = 0; s < n_seqs; s++)
        for (int32_t r = 0; r < ts[s].n_rows;) {
            if (r >= ts[s].skip_from && r < ts[s].skip_to) {
                r = ts[s].skip_to;
                continue;
            }
            int32_t n = ts[s].n_rows - r < c->bq ? ts[s].n_rows - r : c->bq;
            if (r < ts[s].skip_from && r + n > ts[s].skip_from) n = ts[s].skip_from - r;
            const int32_t pos0 = ts[s].pos0 + r;
            const int32_t a0 = c->n_sink < pos0 + 1 ? c->n_sink : pos0 + 1;
            const int32_t a1 = pos0 + 1 - c->n_stream;
            const int32_t win0 = a0 > a1 ? a0 : a1;
            w->qb[n_qb++] = (lc_qblock){s, w->seqs[s].row0 + r, n, pos0, win0};
            max_rows = n > max_rows ? n : max_rows;
            const int32_t win = pos0 + n - win0;
            max_window = win > max_window ? win : max_window;
            r += n;
        }
    w->n_qb = n_qb;
    /* selections */
    const int32_t G_ = c->n_groups;
    int32_t       max_sel = 0;
    w->sel_cap = 0;
    for (int32_t b = 0; b < n_qb; b++) {
        const int32_t span = w->qb[b].win0 - c->n_sink;
        const int32_t cap  = span > 0 ? span + 1 : 1;
        w->sel_cap = cap > w->sel_cap ? cap : w->sel_cap;
    }
    w->sel   = malloc(sizeof(lc_segment) * (size_t)n_qb * G_ * w->sel_cap);
    w->sel_n = malloc(sizeof(int32_t) * (size_t)n_qb * G_);
    for (int32_t b = 0; b < n_qb; b++)
        for (int32_t g = 0; g < G_; g++) {
            lc_segment   *o  = w->sel + ((int64_t)b * G_ + g) * w->sel_cap;
            const int32_t lo = c->n_sink, hi = w->qb[b].win0;
            int32_t       mode = c->sel_mode, n = 0;
            if (mode == SEL_MIXED) mode = (b + g) % 4 == 3 ? SEL_EMPTY : (b + g) % 2 ? SEL_SEG8 : SEL_RANDOM;
            if (mode == SEL_LONG) { /* 256 segments of 8 at random 8-aligned slots */
                const int32_t slots = (hi - lo) / 8;
                bool         *take  = calloc((size_t)(slots > 0 ? slots : 1), sizeof(bool));
                for (int32_t k = 0; k < 256 && k < slots;) {
                    const int32_t sl = (int32_t)test_irand(&rng, (uint32_t)slots);
                    if (!take[sl]) take[sl] = true, k++;
                }
                for (int32_t sl = 0; sl < slots && n < w->sel_cap; sl++)
                    if (take[sl]) o[n++] = (lc_segment){lo + 8 * sl, 8};
                free(take);
            } else if (mode == SEL_FULL) {
                if (hi > lo) o[n++] = (lc_segment){lo, hi - lo};
            } else if (mode == SEL_RANDOM || mode == SEL_SEG8) {
                n = make_segments(lo, hi, (hi - lo) / 3, mode == SEL_SEG8, o, w->sel_cap);
            }
            w->sel_n[(int64_t)b * G_ + g] = n;
            int32_t tot = 0;
            for (int32_t i = 0; i < n; i++) tot += o[i].len;
            max_sel = tot > max_sel ? tot : max_sel;
        }
    memset(&w->a, 0, sizeof w->a); /* fields not set here keep their zero defaults */
    w->a.n_sink = c->n_sink, w->a.attn_rope = c->attn_rope, w->a.n_groups = G_;
    /* GAPS: a span of half the longest history, so that the blocks of one call keep every gap
       (early ones), part of them, or none (long windows) */
    w->a.gap_span = c->attn_rope == LC_ATTN_ROPE_GAPS ? w->max_pos / 2 + 1 : 0;
    w->a.sel_cap = w->sel_cap, w->a.max_rows = max_rows, w->a.max_sel = max_sel;
    w->a.max_window = max_window, w->a.sel = w->sel, w->a.sel_n = w->sel_n;
}


static inline const char *rope_name(int32_t attn_rope) {
    return attn_rope == LC_ATTN_ROPE_GAPS ? "gaps" : attn_rope ? "streaming" : "plain";
}

static bool row_covered(const world *w, int32_t row) {
    for (int32_t b = 0; b < w->n_qb; b++)
        if (row >= w->qb[b].row0 && row < w->qb[b].row0 + w->qb[b].n_rows) return true;
    return false;
}

#endif
