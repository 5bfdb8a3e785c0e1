/*
 * prune_chunks_world.h — the harness (hs_*) of the InfiniteHiP pruning stage tests, shared by
 * test_prune_chunks.c (CPU twin vs the reference) and the op registry's prune_chunks entry (GPU vs CPU
 * twin vs the reference): random worlds of sequences, keys and queries cut into query blocks,
 * stage arguments (first / later stages, random input lists), the double brute-force
 * SelectRep reference with its tolerance intervals, and the check of one selection against it.
 */
#ifndef LC_TEST_HIP_STAGE_WORLD_H
#define LC_TEST_HIP_STAGE_WORLD_H

#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "model/model.h"
#include "rope_ref.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hs_rng = 0x2545F4914F6CDD1Dull;

/* One batch of sequences with their keys and un-rotated queries, cut into query blocks. */
typedef struct hs_case {
    int32_t         D, H, G, P, n_rot;
    lc_rope_pairing pairing;
    int32_t         b_q, n_sink, n_stream;
    int             ties;  /* every key the same vector: all chunk scores tie (RELATIVE) */
    int             f16;   /* keys rounded to fp16 values (what the CUDA pools hold) */
    int             share; /* all sequences read one page table (saves memory at 128K) */
    int32_t         n_seqs;
    int32_t         pos0[4], n_rows[4];
} hs_case;

typedef struct hs_world {
    hs_case        cs;
    int32_t        n_head, n_pages, n_pos, rows;
    lc_rope_table  rope; /* host table */
    float         *k;    /* [n_pages][H][P][D] */
    uint16_t      *kb;   /* the same values in fp16 (cs.f16) */
    int32_t       *perm;
    lc_attn_seq    seqs[4];
    float         *q; /* [rows][n_head][D] */
    lc_qblock *qb;
    int32_t        n_qb;
} hs_world;

static inline void hs_world_make(const hs_case *cs, hs_world *w) {
    memset(w, 0, sizeof *w);
    w->cs     = *cs;
    w->n_head = cs->H * cs->G;
    int32_t max_k = 1, pages = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++) {
        const int32_t k = cs->pos0[s] + cs->n_rows[s];
        if (k > max_k) max_k = k;
        pages += (k + cs->P - 1) / cs->P;
        w->rows += cs->n_rows[s];
    }
    if (cs->share) pages = (max_k + cs->P - 1) / cs->P;
    w->n_pages = pages + 3;
    w->n_pos   = max_k + 2 > cs->n_stream + 2 ? max_k + 2 : cs->n_stream + 2;
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = cs->n_rot, hp.rope_base = 10000.0f, hp.rope_pairing = cs->pairing;
    const size_t half = (size_t)cs->n_rot / 2;
    w->rope = (lc_rope_table){w->n_pos, cs->n_rot, cs->pairing,
                              malloc(sizeof(float) * (size_t)w->n_pos * half + 4),
                              malloc(sizeof(float) * (size_t)w->n_pos * half + 4), 1.0f};
    CHECK(lc_rope_table_fill(&hp, NULL, w->n_pos, w->rope.cos, w->rope.sin) == LC_OK);
    const int64_t pool = (int64_t)w->n_pages * cs->H * cs->P * cs->D;
    w->k               = malloc(sizeof(float) * (size_t)pool);
    if (cs->f16) w->kb = malloc(sizeof(uint16_t) * (size_t)pool);
    float tie[1024];
    for (int32_t d = 0; d < cs->D; d++) tie[d] = 2.0f * test_frand(&hs_rng);
    for (int64_t i = 0; i < pool; i++) {
        float x = cs->ties ? tie[i % cs->D] : 2.0f * test_frand(&hs_rng);
        if (cs->f16) {
            w->kb[i] = lc_fp32_to_fp16(x);
            x        = lc_fp16_to_fp32(w->kb[i]);
        }
        w->k[i] = x;
    }
    /* scattered page tables: a random permutation of the pool */
    w->perm = malloc(sizeof(int32_t) * (size_t)w->n_pages);
    for (int32_t i = 0; i < w->n_pages; i++) w->perm[i] = i;
    for (int32_t i = w->n_pages - 1; i > 0; i--) {
        const int32_t j = (int32_t)test_irand(&hs_rng, (uint32_t)i + 1), t = w->perm[i];
        w->perm[i] = w->perm[j], w->perm[j] = t;
    }
    int32_t row = 0, pg = 0, n_qb = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++) {
        w->seqs[s] = (lc_attn_seq){row, cs->n_rows[s], cs->pos0[s], w->perm + (cs->share ? 0 : pg), 0};
        row += cs->n_rows[s];
        pg += (cs->pos0[s] + cs->n_rows[s] + cs->P - 1) / cs->P;
        n_qb += (cs->n_rows[s] + cs->b_q - 1) / cs->b_q;
    }
    const int64_t qn = (int64_t)w->rows * w->n_head * cs->D;
    w->q             = malloc(sizeof(float) * (size_t)qn);
    for (int64_t i = 0; i < qn; i++) w->q[i] = test_frand(&hs_rng);
    w->qb   = malloc(sizeof(lc_qblock) * (size_t)n_qb);
    w->n_qb = n_qb;
    int32_t b = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++)
        for (int32_t r = 0; r < cs->n_rows[s]; r += cs->b_q) {
            const int32_t pos0 = cs->pos0[s] + r, n = cs->n_rows[s] - r < cs->b_q ? cs->n_rows[s] - r : cs->b_q;
            int32_t       win0 = pos0 + 1 < cs->n_sink ? pos0 + 1 : cs->n_sink;
            if (pos0 + 1 - cs->n_stream > win0) win0 = pos0 + 1 - cs->n_stream;
            w->qb[b++] = (lc_qblock){s, w->seqs[s].row0 + r, n, pos0, win0};
        }
}

static inline void hs_world_free(hs_world *w) {
    free(w->rope.cos), free(w->rope.sin), free(w->k), free(w->kb), free(w->perm), free(w->q);
    free(w->qb);
}

/* One stage's arguments with host arrays (in: NULL for the first stage). */
typedef struct hs_stage {
    lc_prune_chunks_args a;
    lc_segment       *in, *out;
    int32_t          *in_n, *out_n;
} hs_stage;

/* The first stage's offset (a staggered grid) and stride (overlapping chunks) hs_stage_make
 * gives first-stage cases. */
static int32_t hs_first_offset = 0, hs_first_stride = 0;
/* kv_descent (one SelectRep descent per KV head) hs_stage_make gives every stage it makes */
static int32_t hs_kv_descent = 0;

/* The first stage's chunks as the contract states them, by walking: a head chunk [n_sink,
 * n_sink + o) when a first_offset o > 0 leaves tokens past it, then chunks of l_c starting
 * every stride tokens until one reaches win0. Writes up to cap chunks, returns how many. */
static inline int32_t hs_first_chunks(const lc_prune_chunks_args *a, const lc_qblock *q,
                                      lc_segment *out, int32_t cap) {
    const int32_t lo = a->n_sink, hi = q->win0, o = a->first_offset;
    const int32_t s = a->first_stride > 0 ? a->first_stride : a->chunk;
    int32_t       n = 0, at = lo;
    if (hi <= lo) return 0;
    if (o > 0 && hi - lo > o) {
        if (n < cap) out[n] = (lc_segment){lo, o};
        n++, at = lo + o;
    }
    for (;; at += s) {
        const int32_t end = at + a->chunk < hi ? at + a->chunk : hi;
        if (n < cap) out[n] = (lc_segment){at, end - at};
        n++;
        if (end == hi) break;
    }
    return n;
}

/* in_src: 0 first stage; 1 random input lists; 2 the lists given in (given, given_n, cap). */
static inline void hs_stage_make(const hs_world *w, hs_stage *st, int32_t chunk, int32_t n_keep,
                                 int32_t q_stride, int32_t mode, int32_t n_groups, int in_src,
                                 const lc_segment *given, const int32_t *given_n, int32_t given_cap) {
    memset(st, 0, sizeof *st);
    lc_prune_chunks_args *a = &st->a;
    const int32_t      n_pairs = w->n_qb * n_groups;
    a->chunk = chunk, a->n_keep = n_keep, a->q_stride = q_stride, a->n_sink = w->cs.n_sink;
    a->n_stream = w->cs.n_stream, a->scan_rope = mode, a->n_groups = n_groups;
    a->max_rows = w->cs.b_q, a->kv_descent = hs_kv_descent;
    if (in_src == 1) {
        a->in_cap = 12;
        st->in    = malloc(sizeof(lc_segment) * (size_t)n_pairs * (size_t)a->in_cap);
        st->in_n  = malloc(sizeof(int32_t) * (size_t)n_pairs);
        for (int32_t bg = 0; bg < n_pairs; bg++) {
            const lc_qblock *q = &w->qb[bg / n_groups];
            int32_t              at = a->n_sink, n = 0;
            const int32_t        want = (int32_t)test_irand(&hs_rng, (uint32_t)a->in_cap + 1);
            /* random disjoint segments in [n_sink, win0), sorted, odd lengths and gaps */
            while (n < want && at < q->win0) {
                at += (int32_t)test_irand(&hs_rng, 9);
                if (at >= q->win0) break;
                int32_t len = 1 + (int32_t)test_irand(&hs_rng, 3 * (uint32_t)chunk + 2);
                if (at + len > q->win0) len = q->win0 - at;
                st->in[(int64_t)bg * a->in_cap + n++] = (lc_segment){at, len};
                at += len;
            }
            st->in_n[bg] = n;
        }
    } else if (in_src == 2 && given && given_n) {
        a->in_cap = given_cap;
        st->in    = malloc(sizeof(lc_segment) * (size_t)n_pairs * (size_t)given_cap);
        st->in_n  = malloc(sizeof(int32_t) * (size_t)n_pairs);
        memcpy(st->in, given, sizeof(lc_segment) * (size_t)n_pairs * (size_t)given_cap);
        memcpy(st->in_n, given_n, sizeof(int32_t) * (size_t)n_pairs);
    }
    a->in = st->in, a->in_n = st->in_n;
    if (!st->in) a->first_offset = hs_first_offset % chunk, a->first_stride = hs_first_stride;
    /* max_chunks: the exact largest chunk count */
    int32_t mx = 0;
    for (int32_t bg = 0; bg < n_pairs; bg++) {
        const lc_qblock *q = &w->qb[bg / n_groups];
        int32_t              n = 0;
        if (!st->in) n = hs_first_chunks(a, q, NULL, 0);
        else
            for (int32_t s = 0; s < st->in_n[bg]; s++)
                n += (st->in[(int64_t)bg * a->in_cap + s].len + chunk - 1) / chunk;
        if (n > mx) mx = n;
    }
    a->max_chunks = mx;
    st->out       = malloc(sizeof(lc_segment) * (size_t)n_pairs * (size_t)n_keep);
    st->out_n     = malloc(sizeof(int32_t) * (size_t)n_pairs);
    memset(st->out, 0xa5, sizeof(lc_segment) * (size_t)n_pairs * (size_t)n_keep); /* poison */
    memset(st->out_n, 0xa5, sizeof(int32_t) * (size_t)n_pairs);
    a->out = st->out, a->out_n = st->out_n;
}

static inline void hs_stage_free(hs_stage *st) {
    free(st->in), free(st->in_n), free(st->out), free(st->out_n);
}

/* ---- the reference ---- */

typedef struct hs_ref {
    int32_t  n_pairs;
    int64_t *off;                 /* [n_pairs + 1] */
    int32_t *start, *len;         /* chunks of all pairs */
    double  *pt, *lo, *hi, *mag;  /* point score, interval, |terms| magnitude of the point */
    int64_t  n_amb;               /* descent steps explored both ways */
} hs_ref;

typedef struct hs_desc {
    const hs_world          *w;
    const lc_prune_chunks_args *a;
    const int32_t           *pt;
    int32_t                  kvh, nq, c;
    const double            *q; /* [nq][D] pooled, rotated */
    double                   tol, lo, hi, pt_s, pt_mag;
    int                      budget;
    int64_t                  n_amb;
} hs_desc;

/* S(key, slot) in double; *mag = max over queries of sum |q_i k_i| (the error scale) */
static inline double hs_S(hs_desc *d, int32_t key, int right, double *mag) {
    const hs_world *w = d->w;
    const int32_t   D = w->cs.D, P = w->cs.P, H = w->cs.H;
    const int32_t   mode = d->a->scan_rope;
    const int32_t   pos  = mode == LC_SCAN_PLAIN ? key : mode == LC_SCAN_RELATIVE ? right : d->c;
    const float    *k    = w->k + (((int64_t)d->pt[key / P] * H + d->kvh) * P + key % P) * D;
    double          kr[1024], best = -INFINITY, bm = 0;
    rope_ref_rotate(k, kr, D, pos, &w->rope);
    for (int32_t u = 0; u < d->nq; u++) {
        double s = 0, m = 0;
        for (int32_t i = 0; i < D; i++) {
            const double t = d->q[(int64_t)u * D + i] * kr[i];
            s += t, m += fabs(t);
        }
        if (s > best) best = s;
        if (m > bm) bm = m;
    }
    *mag = bm;
    return best;
}

static inline void hs_descend(hs_desc *d, int32_t lo, int32_t hi, int known, double fin,
                              double fmag, int on_pt) {
    const int rel = d->a->scan_rope == LC_SCAN_RELATIVE;
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        double        mL, mR;
        const double  sL = hs_S(d, lo, 0, &mL), sR = hs_S(d, mid, 1, &mR);
        const int     right = sR > sL;
        if (fabs(sR - sL) <= d->tol * (mL > mR ? mL : mR) && d->budget > 0) {
            d->budget--, d->n_amb++; /* a float kernel may go the other way: follow it too */
            if (right) hs_descend(d, lo, mid, rel ? known : 1, rel ? fin : sL, rel ? fmag : mL, 0);
            else hs_descend(d, mid, hi, 1, sR, mR, 0);
        }
        if (right) lo = mid, fin = sR, fmag = mR, known = 1;
        else {
            hi = mid;
            if (!rel) fin = sL, fmag = mL, known = 1;
        }
    }
    if (!known) fin = hs_S(d, lo, 1, &fmag);
    if (fin < d->lo) d->lo = fin;
    if (fin > d->hi) d->hi = fin;
    if (on_pt) d->pt_s = fin, d->pt_mag = fmag;
}

/* The reference scores of every chunk of every (block, group) pair of stage a. */
static inline void hs_reference(const hs_world *w, const lc_prune_chunks_args *a, double tol, hs_ref *r) {
    const int32_t D = w->cs.D, G = w->cs.G, n_head = w->n_head, ng = a->n_groups;
    memset(r, 0, sizeof *r);
    r->n_pairs = w->n_qb * ng;
    r->off     = calloc((size_t)r->n_pairs + 1, sizeof(int64_t));
    for (int32_t bg = 0; bg < r->n_pairs; bg++) {
        const lc_qblock *q = &w->qb[bg / ng];
        int64_t              n = 0;
        if (!a->in) n = hs_first_chunks(a, q, NULL, 0);
        else
            for (int32_t s = 0; s < a->in_n[bg]; s++)
                n += (a->in[(int64_t)bg * a->in_cap + s].len + a->chunk - 1) / a->chunk;
        r->off[bg + 1] = r->off[bg] + n;
    }
    const int64_t total = r->off[r->n_pairs];
    r->start = malloc(sizeof(int32_t) * (size_t)(total + 1));
    r->len   = malloc(sizeof(int32_t) * (size_t)(total + 1));
    r->pt = malloc(sizeof(double) * (size_t)(total + 1)), r->lo = malloc(sizeof(double) * (size_t)(total + 1));
    r->hi = malloc(sizeof(double) * (size_t)(total + 1)), r->mag = malloc(sizeof(double) * (size_t)(total + 1));
    int32_t *cbg = malloc(sizeof(int32_t) * (size_t)(total + 1));
    for (int32_t bg = 0; bg < r->n_pairs; bg++) {
        const lc_qblock *q = &w->qb[bg / ng];
        int64_t              i = r->off[bg];
        if (!a->in) {
            const int32_t nf = (int32_t)(r->off[bg + 1] - i);
            lc_segment   *fc = malloc(sizeof(lc_segment) * (size_t)(nf + 1));
            hs_first_chunks(a, q, fc, nf);
            for (int32_t c = 0; c < nf; c++, i++)
                r->start[i] = fc[c].start, r->len[i] = fc[c].len, cbg[i] = bg;
            free(fc);
            continue;
        }
        for (int32_t s = 0; s < a->in_n[bg]; s++) {
            const lc_segment sg = a->in[(int64_t)bg * a->in_cap + s];
            for (int32_t o = 0; o < sg.len; o += a->chunk, i++) {
                r->start[i] = sg.start + o;
                r->len[i]   = sg.len - o < a->chunk ? sg.len - o : a->chunk;
                cbg[i]      = bg;
            }
        }
    }
    /* pooled queries in double: [b][h][u][D] */
    int64_t *qoff = malloc(sizeof(int64_t) * ((size_t)w->n_qb + 1));
    qoff[0]       = 0;
    for (int32_t b = 0; b < w->n_qb; b++)
        qoff[b + 1] = qoff[b] + (int64_t)n_head * ((w->qb[b].n_rows + a->q_stride - 1) / a->q_stride) * D;
    double *qd = calloc((size_t)qoff[w->n_qb] + 1, sizeof(double));
    for (int32_t b = 0; b < w->n_qb; b++) {
        const lc_qblock *q  = &w->qb[b];
        const int32_t        nq = (q->n_rows + a->q_stride - 1) / a->q_stride;
        for (int32_t h = 0; h < n_head; h++) {
            const int32_t g   = ng == 1 ? 0 : h / G;
            const int64_t nch = r->off[b * ng + g + 1] - r->off[b * ng + g];
            for (int32_t u = 0; u < nq; u++) {
                double       *dst = qd + qoff[b] + ((int64_t)h * nq + u) * D, rot[1024];
                const int32_t r0 = u * a->q_stride;
                const int32_t r1 = r0 + a->q_stride < q->n_rows ? r0 + a->q_stride : q->n_rows;
                for (int32_t rr = r0; rr < r1; rr++) {
                    const int32_t p   = q->pos0 + rr;
                    const int32_t pos = a->scan_rope == LC_SCAN_PLAIN      ? p
                                        : a->scan_rope == LC_SCAN_RELATIVE ? a->n_stream + 1
                                        : (p < nch + a->n_stream ? p : (int32_t)(nch + a->n_stream));
                    rope_ref_rotate(w->q + ((int64_t)(q->row0 + rr) * n_head + h) * D, rot, D, pos, &w->rope);
                    for (int32_t i = 0; i < D; i++) dst[i] += rot[i];
                }
                for (int32_t i = 0; i < D; i++) dst[i] /= (double)(r1 - r0);
            }
        }
    }
    int64_t n_amb = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : n_amb)
    for (int64_t i = 0; i < total; i++) {
        const int32_t        bg = cbg[i], b = bg / ng, g = bg % ng;
        const lc_qblock *q  = &w->qb[b];
        const int32_t        nq = (q->n_rows + a->q_stride - 1) / a->q_stride;
        const int32_t        h0 = ng == 1 ? 0 : g * G, h1 = ng == 1 ? n_head : (g + 1) * G;
        double               pt = -INFINITY, lo = -INFINITY, hi = -INFINITY, mag = 0;
        /* kv_descent: one descent per KV head over its G heads' queries (rows [h][u], so the
         * G heads from h on are G * nq consecutive rows) */
        const int32_t        hstep = a->kv_descent ? G : 1, nqd = a->kv_descent ? G * nq : nq;
        for (int32_t h = h0; h < h1; h += hstep) {
            hs_desc d = {w, a, w->seqs[q->seq].page_table, h / G, nqd, (int32_t)(i - r->off[bg]),
                         qd + qoff[b] + (int64_t)h * nq * D, tol, INFINITY, -INFINITY, 0, 0, 64, 0};
            hs_descend(&d, r->start[i], r->start[i] + r->len[i], 0, 0.0, 0.0, 1);
            if (d.pt_s > pt) pt = d.pt_s;
            if (d.lo > lo) lo = d.lo;
            if (d.hi > hi) hi = d.hi;
            if (d.pt_mag > mag) mag = d.pt_mag;
            n_amb += d.n_amb;
        }
        r->pt[i] = pt, r->lo[i] = lo, r->hi[i] = hi, r->mag[i] = mag;
    }
    r->n_amb = n_amb;
    free(cbg), free(qoff), free(qd);
}

static inline void hs_ref_free(hs_ref *r) {
    free(r->off), free(r->start), free(r->len), free(r->pt), free(r->lo), free(r->hi), free(r->mag);
}

typedef struct hs_rank {
    double  s;
    int32_t c;
} hs_rank;
static inline int hs_cmp_rank(const void *x, const void *y) {
    const hs_rank *p = x, *q = y;
    if (p->s != q->s) return p->s > q->s ? -1 : 1;
    return p->c > q->c ? -1 : (p->c < q->c);
}

/* Check one stage output against the reference (see the top of the file). exact: the kept set
 * must be the point scores' top n_keep (ties: the later chunk). Returns the number of kept
 * chunks outside that set (swaps within the tolerance). */
static inline int64_t hs_check(const hs_world *w, const lc_prune_chunks_args *a, const hs_ref *r,
                               const lc_segment *out, const int32_t *out_n, double tol, int exact,
                               const char *what) {
    int64_t swaps = 0;
    for (int32_t bg = 0; bg < r->n_pairs; bg++) {
        const int64_t  c0 = r->off[bg], n = r->off[bg + 1] - c0;
        const int32_t  expect = n < a->n_keep ? (int32_t)n : a->n_keep;
        const int32_t  b = bg / a->n_groups;
        CHECKF(out_n[bg] == expect, "%s: block %d (pos0 %d rows %d win0 %d) group %d: out_n %d, "
               "expected %d of %lld chunks", what, b, w->qb[b].pos0, w->qb[b].n_rows,
               w->qb[b].win0, bg % a->n_groups, out_n[bg], expect, (long long)n);
        if (out_n[bg] != expect) continue;
        uint8_t *kept = calloc((size_t)n + 1, 1);
        int32_t  prev = -1, bad = 0, prev_end = INT32_MIN;
        for (int32_t k = 0; k < expect; k++) {
            /* kept chunks in rank order, each starting where the kept one before it ends when
             * they overlap (chunk ends increase with rank, so a segment is found by its end) */
            const lc_segment s = out[(int64_t)bg * a->n_keep + k];
            const int32_t    s_end = s.start + s.len;
            int64_t          lo = 0, hi = n - 1, at = -1;
            while (lo <= hi) {
                const int64_t m = (lo + hi) / 2, e = (int64_t)r->start[c0 + m] + r->len[c0 + m];
                if (e == s_end) { at = m; break; }
                if (e < s_end) lo = m + 1; else hi = m - 1;
            }
            const int32_t want = at < 0 ? 0 : r->start[c0 + at] > prev_end ? r->start[c0 + at] : prev_end;
            prev_end = s_end;
            if (at < 0 || s.start != want || s.len <= 0 || at <= prev) {
                bad = 1;
                fprintf(stderr, "  %s: pair %d segment %d [%d, +%d) is not the next chunk of the "
                        "list (rank %lld after %d)\n", what, bg, k, s.start, s.len, (long long)at, prev);
                break;
            }
            kept[at] = 1, prev = (int32_t)at;
        }
        CHECKF(!bad, "%s: pair %d: output segments are not chunks sorted by start", what, bg);
        if (!bad && n > a->n_keep) {
            double  min_hi = INFINITY, max_lo = -INFINITY, scale = 0;
            int32_t c_hi = -1, c_lo = -1;
            for (int64_t c = 0; c < n; c++) {
                if (r->mag[c0 + c] > scale) scale = r->mag[c0 + c];
                if (kept[c] && r->hi[c0 + c] < min_hi) min_hi = r->hi[c0 + c], c_hi = (int32_t)c;
                if (!kept[c] && r->lo[c0 + c] > max_lo) max_lo = r->lo[c0 + c], c_lo = (int32_t)c;
            }
            CHECKF(min_hi >= max_lo - tol * scale, "%s: block %d group %d: kept chunk %d (score "
                   "<= %.6g) beaten by dropped chunk %d (score >= %.6g), tolerance %.3g", what, b,
                   bg % a->n_groups, c_hi, min_hi, c_lo, max_lo, tol * scale);
            hs_rank *rk = malloc(sizeof(hs_rank) * (size_t)n);
            for (int64_t c = 0; c < n; c++) rk[c] = (hs_rank){r->pt[c0 + c], (int32_t)c};
            qsort(rk, (size_t)n, sizeof(hs_rank), hs_cmp_rank);
            int64_t sw = 0;
            for (int32_t k = 0; k < a->n_keep; k++) sw += !kept[rk[k].c];
            if (exact)
                CHECKF(sw == 0, "%s: block %d group %d: %lld kept chunks differ from the exact "
                       "top %d", what, b, bg % a->n_groups, (long long)sw, a->n_keep);
            swaps += sw;
            free(rk);
        }
        free(kept);
    }
    return swaps;
}

#endif
