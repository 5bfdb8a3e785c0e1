/*
 * select_blocks_world.h — the harness (hm_*) of the HiP mask estimation tests, shared by
 * test_select_blocks.c (CPU twin vs the reference) and the op registry's select_blocks entry (GPU vs CPU
 * twin vs the reference): random and planted-key worlds, mask arguments, the double
 * brute-force reference per (block, group) pair with its ambiguity flag, the check of one
 * pair against it, and the case grid both run.
 */
#ifndef LC_TEST_HIP_MASK_WORLD_H
#define LC_TEST_HIP_MASK_WORLD_H

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

static uint64_t hm_rng = 0x9E3779B97F4A7C15ull;

enum { HM_RANDOM = 0, HM_LEVELS = 1, HM_EQUAL = 2 };

typedef struct hm_case {
    int32_t         D, H, G, P, n_rot;
    lc_rope_pairing pairing;
    int32_t         b_q, n_sink, n_stream;
    int             keys; /* HM_RANDOM, HM_LEVELS, HM_EQUAL */
    int             mode; /* scan_rope (HM_LEVELS: PLAIN keys live in the un-rotated dims) */
    int32_t         n_seqs;
    int32_t         pos0[4], n_rows[4];
} hm_case;

typedef struct hm_world {
    hm_case        cs;
    int32_t        n_head, n_pages, n_pos, rows, max_rows, max_cand;
    lc_rope_table  rope;
    float         *k;  /* [n_pages][H][P][D], fp16 values */
    uint16_t      *kb; /* the same in fp16 */
    int32_t       *perm;
    lc_attn_seq    seqs[4];
    float         *q; /* [rows][n_head][D] */
    lc_qblock *qb;
    int32_t        n_qb;
} hm_world;

static inline void hm_world_make(const hm_case *cs, hm_world *w) {
    memset(w, 0, sizeof *w);
    w->cs     = *cs;
    w->n_head = cs->H * cs->G;
    const int32_t H = cs->H, D = cs->D, P = cs->P;
    int32_t       max_k = 1, pages = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++) {
        const int32_t k = cs->pos0[s] + cs->n_rows[s];
        if (k > max_k) max_k = k;
        pages += (k + P - 1) / P;
        w->rows += cs->n_rows[s];
    }
    w->n_pages = pages + 3;
    w->n_pos   = (max_k > cs->n_stream ? max_k : cs->n_stream) + 2;
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = cs->n_rot, hp.rope_base = 10000.0f, hp.rope_pairing = cs->pairing;
    const size_t half = (size_t)cs->n_rot / 2;
    w->rope = (lc_rope_table){w->n_pos, cs->n_rot, cs->pairing,
                              malloc(sizeof(float) * (size_t)w->n_pos * half + 4),
                              malloc(sizeof(float) * (size_t)w->n_pos * half + 4), 1.0f};
    CHECK(lc_rope_table_fill(&hp, NULL, w->n_pos, w->rope.cos, w->rope.sin) == LC_OK);
    const int64_t pool = (int64_t)w->n_pages * H * P * D;
    w->k               = malloc(sizeof(float) * (size_t)pool);
    w->kb              = malloc(sizeof(uint16_t) * (size_t)pool);
    /* one vector per KV head for planted keys: +-0.5 / +-0.25 (with PLAIN only past n_rot) */
    float vec[8][1024];
    for (int32_t h = 0; h < H && h < 8; h++)
        for (int32_t d = 0; d < D; d++) {
            const float m = (test_irand(&hm_rng, 2) ? 0.5f : 0.25f) * (test_irand(&hm_rng, 2) ? 1.0f : -1.0f);
            vec[h][d] = cs->keys != HM_RANDOM && cs->mode == LC_SCAN_PLAIN && d < cs->n_rot ? 0.0f : m;
        }
    /* planted keys: one level per stored token (page, slot), shared by its KV heads */
    for (int64_t i = 0; i < pool; i++) {
        const int32_t d = (int32_t)(i % D), h = (int32_t)(i / ((int64_t)P * D) % H) % 8;
        float         x = 2.0f * test_frand(&hm_rng);
        if (cs->keys == HM_EQUAL) x = vec[h][d];
        w->kb[i] = lc_fp32_to_fp16(x);
        w->k[i]  = lc_fp16_to_fp32(w->kb[i]);
    }
    if (cs->keys == HM_LEVELS) {
        float *lv = malloc(sizeof(float) * (size_t)w->n_pages * P);
        for (int64_t i = 0; i < (int64_t)w->n_pages * P; i++) lv[i] = (float)test_irand(&hm_rng, 8);
        for (int64_t row = 0; row < pool / D; row++) {
            const int64_t page = row / P / H, slot = row % P;
            const int32_t h    = (int32_t)(row / P % H) % 8;
            for (int32_t d = 0; d < D; d++) {
                w->kb[row * D + d] = lc_fp32_to_fp16(lv[page * P + slot] * vec[h][d]);
                w->k[row * D + d]  = lc_fp16_to_fp32(w->kb[row * D + d]);
            }
        }
        free(lv);
    }
    /* scattered page tables: a random permutation of the pool */
    w->perm = malloc(sizeof(int32_t) * (size_t)w->n_pages);
    for (int32_t i = 0; i < w->n_pages; i++) w->perm[i] = i;
    for (int32_t i = w->n_pages - 1; i > 0; i--) {
        const int32_t j = (int32_t)test_irand(&hm_rng, (uint32_t)i + 1), t = w->perm[i];
        w->perm[i] = w->perm[j], w->perm[j] = t;
    }
    int32_t row = 0, pg = 0, n_qb = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++) {
        w->seqs[s] = (lc_attn_seq){row, cs->n_rows[s], cs->pos0[s], w->perm + pg, 0};
        row += cs->n_rows[s];
        pg += (cs->pos0[s] + cs->n_rows[s] + P - 1) / P;
        n_qb += (cs->n_rows[s] + cs->b_q - 1) / cs->b_q;
    }
    const int64_t qn = (int64_t)w->rows * w->n_head * D;
    w->q             = malloc(sizeof(float) * (size_t)qn);
    for (int64_t i = 0; i < qn; i++) w->q[i] = test_frand(&hm_rng);
    w->qb   = malloc(sizeof(lc_qblock) * (size_t)n_qb);
    w->n_qb = n_qb;
    int32_t b = 0;
    for (int32_t s = 0; s < cs->n_seqs; s++)
        for (int32_t r = 0; r < cs->n_rows[s]; r += cs->b_q) {
            const int32_t pos0 = cs->pos0[s] + r;
            const int32_t n    = cs->n_rows[s] - r < cs->b_q ? cs->n_rows[s] - r : cs->b_q;
            int32_t       win0 = pos0 + 1 < cs->n_sink ? pos0 + 1 : cs->n_sink;
            if (pos0 + 1 - cs->n_stream > win0) win0 = pos0 + 1 - cs->n_stream;
            w->qb[b++] = (lc_qblock){s, w->seqs[s].row0 + r, n, pos0, win0};
            if (n > w->max_rows) w->max_rows = n;
            if (win0 - cs->n_sink > w->max_cand) w->max_cand = win0 - cs->n_sink;
        }
}

static inline void hm_world_free(hm_world *w) {
    free(w->rope.cos), free(w->rope.sin), free(w->k), free(w->kb), free(w->perm), free(w->q);
    free(w->qb);
}

/* The op's arguments over host arrays (out poisoned). */
typedef struct hm_args {
    lc_select_blocks_args a;
    lc_segment      *out;
    int32_t         *out_n;
} hm_args;

static inline void hm_args_make(const hm_world *w, hm_args *x, int32_t k, int32_t block_k,
                                int32_t q_stride, int32_t k_stride, int32_t n_groups) {
    memset(x, 0, sizeof *x);
    lc_select_blocks_args *a = &x->a;
    a->k = k, a->block_k = block_k, a->q_stride = q_stride, a->k_stride = k_stride;
    a->n_sink = w->cs.n_sink, a->n_stream = w->cs.n_stream, a->scan_rope = w->cs.mode;
    a->n_groups = n_groups, a->max_rows = w->max_rows, a->max_cand = w->max_cand;
    a->out_cap  = k / block_k + 1;
    const size_t n_pairs = (size_t)w->n_qb * n_groups;
    x->out   = malloc(sizeof(lc_segment) * n_pairs * (size_t)a->out_cap);
    x->out_n = malloc(sizeof(int32_t) * n_pairs);
    memset(x->out, 0xa5, sizeof(lc_segment) * n_pairs * (size_t)a->out_cap);
    memset(x->out_n, 0xa5, sizeof(int32_t) * n_pairs);
    a->out = x->out, a->out_n = x->out_n;
}

static inline void hm_args_free(hm_args *x) { free(x->out), free(x->out_n); }

/* ---- the reference ---- */

/* One pair's reference: the selected block indices (sorted) and whether a cut was close. */
typedef struct hm_ref {
    int32_t  n;         /* expected out_n */
    int32_t *blk;       /* [n] selected blocks (or the one whole-range segment when trivial) */
    int      trivial;   /* NB <= n_nodes */
    int      ambiguous; /* some cut within the tolerance */
} hm_ref;

typedef struct hm_pair_ctx {
    const hm_world         *w;
    const lc_select_blocks_args *a;
    const lc_qblock    *q;
    int32_t                 g, nsr;
    double                 *qr;   /* [n_head][nsr][D] rotated (group's heads only filled) */
    double                 *memo, *mag;
    uint8_t                *have;
} hm_pair_ctx;

static inline double hm_block_score(hm_pair_ctx *c, int32_t r, double *mag) {
    if (c->have[r]) {
        *mag = c->mag[r];
        return c->memo[r];
    }
    const hm_world         *w = c->w;
    const lc_select_blocks_args *a = c->a;
    const int32_t           D = w->cs.D, P = w->cs.P, H = w->cs.H, G = w->cs.G;
    const int32_t          *pt = w->seqs[c->q->seq].page_table;
    const int32_t           h0 = a->n_groups == 1 ? 0 : c->g * G, h1 = a->n_groups == 1 ? w->n_head : h0 + G;
    double                  best = -INFINITY, bm = 0, kr[1024];
    for (int32_t j = 0; j < a->block_k; j += a->k_stride) {
        const int32_t t = a->n_sink + r * a->block_k + j;
        if (t >= c->q->win0) break;
        for (int32_t h = h0; h < h1; h++) {
            const float *k = w->k + (((int64_t)pt[t / P] * H + h / G) * P + t % P) * D;
            rope_ref_rotate(k, kr, D, a->scan_rope == LC_SCAN_PLAIN ? t : 0, &w->rope);
            for (int32_t i = 0; i < c->nsr; i++) {
                const double *qv = c->qr + ((int64_t)h * c->nsr + i) * D;
                double        s = 0, m = 0;
                for (int32_t d = 0; d < D; d++) s += qv[d] * kr[d], m += fabs(qv[d] * kr[d]);
                if (s > best) best = s;
                if (m > bm) bm = m;
            }
        }
    }
    c->have[r] = 1, c->memo[r] = best, c->mag[r] = bm;
    *mag = bm;
    return best;
}

static inline void hm_reference_pair(const hm_world *w, const lc_select_blocks_args *a, int32_t bg,
                                     double tol, hm_ref *ref) {
    const int32_t        b = bg / a->n_groups, D = w->cs.D;
    const lc_qblock *q = &w->qb[b];
    memset(ref, 0, sizeof *ref);
    const int32_t n_nodes = a->k / a->block_k, cand = q->win0 - a->n_sink;
    if (cand <= 0) return;
    const int32_t NB = (cand + a->block_k - 1) / a->block_k;
    if (NB <= n_nodes) {
        ref->n = 1, ref->trivial = 1;
        return;
    }
    hm_pair_ctx c = {w, a, q, bg % a->n_groups, (q->n_rows + a->q_stride - 1) / a->q_stride,
                     NULL, NULL, NULL, NULL};
    c.qr   = calloc((size_t)w->n_head * c.nsr * D, sizeof(double));
    c.memo = malloc(sizeof(double) * (size_t)NB), c.mag = malloc(sizeof(double) * (size_t)NB);
    c.have = calloc((size_t)NB, 1);
    for (int32_t h = 0; h < w->n_head; h++)
        for (int32_t i = 0; i < c.nsr; i++) {
            const int32_t row = q->row0 + i * a->q_stride;
            const int32_t pos = a->scan_rope == LC_SCAN_PLAIN ? q->pos0 + i * a->q_stride : a->n_stream + 1;
            rope_ref_rotate(w->q + ((int64_t)row * w->n_head + h) * D, c.qr + ((int64_t)h * c.nsr + i) * D, D, pos, &w->rope);
        }
    int32_t *nf = malloc(sizeof(int32_t) * (size_t)n_nodes), *nl = malloc(sizeof(int32_t) * (size_t)n_nodes);
    int32_t *bf = malloc(sizeof(int32_t) * 2 * (size_t)n_nodes), *bl = malloc(sizeof(int32_t) * 2 * (size_t)n_nodes);
    double  *bs = malloc(sizeof(double) * 2 * (size_t)n_nodes), *bm = malloc(sizeof(double) * 2 * (size_t)n_nodes);
    int32_t *rank = malloc(sizeof(int32_t) * 2 * (size_t)n_nodes);
    for (int32_t j = 0; j < n_nodes; j++)
        nf[j] = (int32_t)((int64_t)j * NB / n_nodes), nl[j] = (int32_t)((int64_t)(j + 1) * NB / n_nodes);
    for (;;) {
        int32_t nb = 0, more = 0;
        for (int32_t j = 0; j < n_nodes; j++) {
            if (nl[j] - nf[j] > 1) {
                const int32_t m = nf[j] + (nl[j] - nf[j]) / 2;
                bf[nb] = nf[j], bl[nb++] = m, bf[nb] = m, bl[nb++] = nl[j], more = 1;
            } else {
                bf[nb] = nf[j], bl[nb++] = nl[j];
            }
        }
        if (!more) break;
        for (int32_t i = 0; i < nb; i++) bs[i] = hm_block_score(&c, bf[i] + (bl[i] - bf[i] - 1) / 2, &bm[i]);
        /* rank = branches that beat it (higher score, or equal with a lower start) */
        for (int32_t i = 0; i < nb; i++) {
            rank[i] = 0;
            for (int32_t j = 0; j < nb; j++)
                if (bs[j] > bs[i] || (bs[j] == bs[i] && bf[j] < bf[i])) rank[i]++;
        }
        int32_t last = -1, first_out = -1, n = 0;
        for (int32_t i = 0; i < nb; i++) {
            if (rank[i] == n_nodes - 1) last = i;
            if (rank[i] == n_nodes) first_out = i;
        }
        if (last >= 0 && first_out >= 0 && bs[last] != bs[first_out] &&
            bs[last] - bs[first_out] <= tol * (bm[last] > bm[first_out] ? bm[last] : bm[first_out]))
            ref->ambiguous = 1;
        /* the kept branches in start order (branches are generated in start order) */
        for (int32_t i = 0; i < nb; i++)
            if (rank[i] < n_nodes) nf[n] = bf[i], nl[n] = bl[i], n++;
    }
    ref->n   = n_nodes;
    ref->blk = malloc(sizeof(int32_t) * (size_t)n_nodes);
    memcpy(ref->blk, nf, sizeof(int32_t) * (size_t)n_nodes);
    free(nf), free(nl), free(bf), free(bl), free(bs), free(bm), free(rank);
    free(c.qr), free(c.memo), free(c.mag), free(c.have);
}

/* Check one pair's output against the invariants and the reference; returns the number of
 * selected blocks that differ from the reference (0 when exact). *ambig counts ambiguous pairs. */
static inline int32_t hm_check_pair(const hm_world *w, const lc_select_blocks_args *a, int32_t bg,
                                    const lc_segment *out, int32_t out_n, const hm_ref *ref,
                                    const char *what) {
    const lc_qblock *q = &w->qb[bg / a->n_groups];
    CHECKF(out_n == ref->n, "%s: pair %d: out_n %d, expected %d", what, bg, out_n, ref->n);
    if (out_n != ref->n) return ref->n;
    if (ref->n == 0) return 0;
    if (ref->trivial) {
        CHECKF(out[0].start == a->n_sink && out[0].len == q->win0 - a->n_sink,
               "%s: pair %d: [%d, +%d), expected the whole range [%d, %d)", what, bg,
               out[0].start, out[0].len, a->n_sink, q->win0);
        return 0;
    }
    int ok = 1;
    for (int32_t i = 0; i < out_n && ok; i++) {
        const int32_t s = out[i].start, len = out[i].len;
        const int32_t want = q->win0 - s < a->block_k ? q->win0 - s : a->block_k;
        ok = s >= a->n_sink && s < q->win0 && (s - a->n_sink) % a->block_k == 0 && len == want &&
             (i == 0 || out[i - 1].start + out[i - 1].len <= s);
        CHECKF(ok, "%s: pair %d: segment %d [%d, +%d) breaks the invariants", what, bg, i, s, len);
    }
    if (!ok) return ref->n;
    /* overlap with the reference */
    int32_t i = 0, j = 0, common = 0;
    while (i < out_n && j < ref->n) {
        const int32_t x = (out[i].start - a->n_sink) / a->block_k, y = ref->blk[j];
        if (x == y) common++, i++, j++;
        else if (x < y) i++;
        else j++;
    }
    const int32_t diff = ref->n - common;
    if (!ref->ambiguous)
        CHECKF(diff == 0, "%s: pair %d: %d of %d blocks differ from the reference (no close cut)",
               what, bg, diff, ref->n);
    else
        CHECKF(common * 20 >= ref->n * 19, "%s: pair %d: overlap %d of %d with the reference",
               what, bg, common, ref->n);
    return diff;
}

static const char *hm_mode_name[] = {"plain", "relative"};
static const char *hm_keys_name[] = {"random", "levels", "equal"};

/* The case grid the CPU and the GPU test both run: head dims 64 and 128, GQA 3:3 and 8:4, plain
 * and relative scans, the three key worlds, one mask or one per KV head; run(ctx, case, k,
 * block_k, q_stride, k_stride, n_groups) for each. */
typedef void (*hm_grid_run)(void *ctx, const hm_case *cs, int32_t k, int32_t block_k,
                            int32_t q_stride, int32_t k_stride, int32_t n_groups);
static void hm_case_grid(hm_grid_run run, void *ctx) {
    const int32_t dims[] = {64, 128}, gqa[][2] = {{3, 3}, {8, 4}};
    int           n = 0;
    for (int di = 0; di < 2; di++)
        for (int gi = 0; gi < 2; gi++)
            for (int mode = 0; mode < 2; mode++)
                for (int keys = 0; keys < 3; keys++)
                    for (int gr = 0; gr < 2; gr++, n++) {
                        if (keys == HM_EQUAL && (gr || di)) continue;
                        const int32_t D = dims[di];
                        /* a decode row far out, a prefill run of 32-row blocks (the last one
                         * ragged), a short sequence (NB <= n_nodes) and one with no candidates */
                        hm_case cs = {D, gqa[gi][0], gqa[gi][1], n % 2 ? 16 : 32, D,
                                      n % 3 == 1 ? LC_ROPE_NEOX : LC_ROPE_NORM, 32, 4 + n % 13,
                                      16 + 8 * (n % 5), keys, mode, 4,
                                      {1500 + 37 * n, 900 + 11 * n, 40 + n % 7, 2}, {1, 45, 3, 2}};
                        if (n % 4 == 3 || (keys == HM_LEVELS && mode == LC_SCAN_PLAIN))
                            cs.n_rot = D / 2; /* partial rotary */
                        const int32_t block_k  = n % 3 == 0 ? 2 : (n % 3 == 1 ? 1 : 4);
                        const int32_t n_nodes  = n % 4 == 0 ? 64 : (n % 4 == 1 ? 16 : (n % 4 == 2 ? 4 : 40));
                        const int32_t q_stride = n % 2 ? 2 : 1, k_stride = block_k > 1 && n % 5 < 2 ? 2 : 1;
                        run(ctx, &cs, n_nodes * block_k, block_k, q_stride, k_stride, gr ? cs.H : 1);
                    }
}

#endif
