/*
 * cpu_prune_chunks.c — one InfiniteHiP pruning stage, the CPU reference (contract: backend.h,
 * "InfiniteHiP selection and block-sparse attention"). For every query block and head group:
 * cut the candidate list into chunks of l_c tokens (the first stage on its grid: an optional
 * head chunk, then chunks every first_stride tokens, overlapping below l_c — the kept ones are
 * clipped to start where the previous kept one ends), score each chunk per query head (or,
 * with kv_descent, per KV head over its query heads' queries together) with
 * SelectRep (a binary descent with two probes per step, keys rotated at the branch slot's
 * position of the stage's scan_rope), take the max over the group's heads, keep the n_keep
 * best chunks and write them as segments sorted by start.
 * Paper: InfiniteHiP (seeds/000_ced830aa0d9eb0ea.txt) §3.1–3.2, Alg. 2–3; digest
 * spec/infinitehip-and-hip.md §3.2 and §4.1.
 *
 * Layouts: q_raw [n_rows][n_head][head_dim] (un-rotated); pages [page][kv_head][P][head_dim]
 * fp32, keys before RoPE. Work: the chunks of all (block, group) pairs form one flat list that
 * OpenMP threads score in parallel; selection is a sort of (score key, rank) per pair.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_select.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HIP_MAX_D 1024 /* stack buffer of one rotated key */

typedef struct stage_job {
    const lc_kv_layer_view  *kv;
    const lc_rope_table     *rope;
    const lc_prune_chunks_args *a;
    const lc_attn_seq       *seqs;
    const lc_qblock     *qb;
    int32_t                  n_head, G; /* query heads, query heads per KV head */
    /* flat chunk list: chunk i = [cstart[i], cstart[i] + clen[i]), rank crank[i] in the list
     * of pair cbg[i] = b * n_groups + g */
    int32_t *cstart, *clen, *crank, *cbg;
    float   *cscore;
    int64_t *coff;  /* [n_pairs + 1] first chunk of each pair */
    /* pooled rotated queries: block b, head h at qp + qoff[b] + (h * nq[b]) * D */
    float   *qp;
    int64_t *qoff;
    int32_t *nq;
} stage_job;

static const float *key_at(const stage_job *j, const int32_t *pt, int32_t kvh, int32_t pos) {
    const lc_kv_layer_view *kv = j->kv;
    const int64_t           P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
    const int64_t           page = pt[pos / P];
    return (const float *)kv->k + ((page * H + kvh) * P + pos % P) * D;
}

/* S(key, slot) of the contract: max over the pooled queries of q · rot(k, pos). */
static float probe(const stage_job *j, const float *k, int32_t pos, const float *q, int32_t nq,
                   float *kr) {
    const int32_t D = j->kv->head_dim;
    lc_cpu_rope_copy(k, kr, D, pos, j->rope);
    float best = -INFINITY;
    for (int32_t u = 0; u < nq; u++) {
        const float *qu = q + (int64_t)u * D;
        float        s  = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int32_t d = 0; d < D; d++) s += qu[d] * kr[d];
        if (s > best) best = s;
    }
    return best;
}

/* The score of chunk i (max over the heads of its group of SelectRep's final probe). */
static float score_chunk(const stage_job *j, int64_t i) {
    const lc_prune_chunks_args *a  = j->a;
    const int32_t            bg = j->cbg[i], b = bg / a->n_groups, g = bg % a->n_groups;
    const lc_qblock     *qb = &j->qb[b];
    const int32_t           *pt = j->seqs[qb->seq].page_table;
    const int32_t            h0 = a->n_groups == 1 ? 0 : g * j->G;
    const int32_t            h1 = a->n_groups == 1 ? j->n_head : (g + 1) * j->G;
    const int32_t            f = j->cstart[i], len = j->clen[i], c = j->crank[i];
    const int32_t            mode = a->scan_rope, D = j->kv->head_dim, nq = j->nq[b];
    float                    kr[HIP_MAX_D];
    float                    best = -INFINITY;
    /* kv_descent: one descent per KV head over its G heads' pooled queries (contiguous) */
    const int32_t step = a->kv_descent ? j->G : 1, nqd = a->kv_descent ? j->G * nq : nq;
    for (int32_t h = h0; h < h1; h += step) {
        const int32_t kvh = h / j->G;
        const float  *q   = j->qp + j->qoff[b] + (int64_t)h * nq * D;
        int32_t       lo = f, hi = f + len;
        float         fin   = -INFINITY;
        int           known = 0; /* fin holds S(lo, RIGHT) */
        while (hi - lo > 1) {
            const int32_t mid = lo + (hi - lo) / 2;
            int32_t       pl, pr; /* key positions of the left / right slot */
            if (mode == LC_SCAN_PLAIN) pl = lo, pr = mid;
            else if (mode == LC_SCAN_RELATIVE) pl = 0, pr = 1;
            else pl = pr = c;
            const float sL = probe(j, key_at(j, pt, kvh, lo), pl, q, nqd, kr);
            const float sR = probe(j, key_at(j, pt, kvh, mid), pr, q, nqd, kr);
            if (sR > sL) {
                lo = mid, fin = sR, known = 1;
            } else {
                hi = mid;
                /* the slot is ignored outside RELATIVE: S(lo, RIGHT) = S(lo, LEFT) */
                if (mode != LC_SCAN_RELATIVE) fin = sL, known = 1;
            }
        }
        if (!known) {
            const int32_t pr = mode == LC_SCAN_PLAIN ? lo : mode == LC_SCAN_RELATIVE ? 1 : c;
            fin = probe(j, key_at(j, pt, kvh, lo), pr, q, nqd, kr);
        }
        if (fin > best) best = fin;
    }
    return best;
}

typedef struct ranked {
    uint32_t key;
    int32_t  rank;
} ranked;

static int cmp_ranked_desc(const void *x, const void *y) {
    const ranked *p = x, *q = y;
    if (p->key != q->key) return p->key > q->key ? -1 : 1;
    return p->rank > q->rank ? -1 : (p->rank < q->rank); /* equal scores: the later chunk first */
}

/* The first stage's chunks of a block (contract in backend.h, first_offset / first_stride):
 * a head chunk [n_sink, n_sink + o) when o > 0 leaves tokens past it, then chunks of l_c every
 * s tokens from there (s = first_stride, 0: l_c), the last one ending at win0. first_grid_of:
 * the grid and its chunk count n; first_chunk: chunk c. */
typedef struct first_grid {
    int32_t lo, hi, head, base, stride, n;
} first_grid;

static first_grid first_grid_of(const lc_prune_chunks_args *a, const lc_qblock *qb) {
    first_grid g = {a->n_sink, qb->win0, 0, a->n_sink, a->first_stride > 0 ? a->first_stride : a->chunk, 0};
    const int64_t cand = (int64_t)g.hi - g.lo;
    if (cand <= 0) return g;
    g.head = a->first_offset > 0 && cand > a->first_offset;
    g.base = g.lo + (g.head ? a->first_offset : 0);
    const int64_t rest = (int64_t)g.hi - g.base;
    g.n = g.head + (rest <= a->chunk ? 1 : 1 + (int32_t)((rest - a->chunk + g.stride - 1) / g.stride));
    return g;
}

static lc_segment first_chunk(const lc_prune_chunks_args *a, const first_grid *g, int64_t c) {
    if (g->head && c == 0) return (lc_segment){g->lo, g->base - g->lo};
    const int64_t start = g->base + (c - g->head) * (int64_t)g->stride;
    const int64_t end   = start + a->chunk < g->hi ? start + a->chunk : g->hi;
    return (lc_segment){(int32_t)start, (int32_t)(end - start)};
}

/* Where block b's (block, group) lists are (a->list: batched decode, backend.h), and whether
 * this call computes block b (a->from). */
static int64_t list_pair(const lc_prune_chunks_args *a, int32_t b, int32_t g) {
    return (int64_t)(a->list ? a->list[b] : b) * a->n_groups + g;
}
static bool block_runs(const lc_prune_chunks_args *a, int32_t b) {
    return !a->from || a->from[b] <= a->stage;
}

/* Count the chunks of a (block, group) pair's input list, validating it (none for a block this
 * call does not compute). */
static int count_chunks(const lc_prune_chunks_args *a, const lc_qblock *qb, int32_t b, int32_t g,
                        int64_t *n_out) {
    int64_t n = 0;
    if (!block_runs(a, b)) {
        n = 0;
    } else if (!a->in) {
        n = first_grid_of(a, qb).n;
    } else {
        const int64_t bg = list_pair(a, b, g);
        const int32_t nin = a->in_n[bg];
        if (nin < 0 || nin > a->in_cap)
            return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: block %d group %d: %d input segments "
                           "(capacity %d)", b, g, nin, a->in_cap);
        for (int32_t s = 0; s < nin; s++) {
            const lc_segment *sg = &a->in[bg * a->in_cap + s];
            if (sg->len < 0 || sg->start < a->n_sink || (int64_t)sg->start + sg->len > qb->win0)
                return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: block %d group %d: segment "
                               "[%d, +%d) outside the candidates [%d, %d)", b, g, sg->start,
                               sg->len, a->n_sink, qb->win0);
            n += ((int64_t)sg->len + a->chunk - 1) / a->chunk;
        }
    }
    if (n > a->max_chunks)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: block %d group %d has %lld chunks, "
                       "max_chunks is %d", b, g, (long long)n, a->max_chunks);
    *n_out = n;
    return LC_OK;
}

int lc_cpu_prune_chunks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                     const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                     const lc_rope_table *rope, const lc_prune_chunks_args *a) {
    int st = lc_prune_chunks_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st == LC_OK) st = lc_cpu_check_head_dim("prune_chunks", kv->head_dim, HIP_MAX_D);
    if (st == LC_OK) /* the stage scores at the true positions unless scan_rope is relative */
        st = lc_cpu_check_blocks("prune_chunks", seqs, n_seqs, qb, n_qb, a->max_rows, a->n_sink, -1,
                                 a->scan_rope != LC_SCAN_RELATIVE ? rope : NULL);
    if (st != LC_OK || n_qb == 0) return st;
    const int32_t D = kv->head_dim, n_pairs = n_qb * a->n_groups;
    stage_job     j;
    memset(&j, 0, sizeof j);
    j.kv = kv, j.rope = rope, j.a = a, j.seqs = seqs, j.qb = qb, j.n_head = n_head;
    j.G    = n_head / kv->n_kv_head;
    j.coff = lc_malloc(sizeof(int64_t) * ((size_t)n_pairs + 1), "prune_chunks chunk offsets");
    j.qoff = lc_malloc(sizeof(int64_t) * ((size_t)n_qb + 1), "prune_chunks query offsets");
    j.nq   = lc_malloc(sizeof(int32_t) * (size_t)n_qb, "prune_chunks query counts");
    ranked  *rk   = NULL;
    uint8_t *kept = NULL;
    if (!j.coff || !j.qoff || !j.nq) {
        st = LC_ERR_NOMEM;
        goto done;
    }
    /* the chunk lists */
    j.coff[0] = 0;
    int64_t max_n = 0;
    for (int32_t bg = 0; bg < n_pairs; bg++) {
        int64_t n = 0;
        st = count_chunks(a, &qb[bg / a->n_groups], bg / a->n_groups, bg % a->n_groups, &n);
        if (st != LC_OK) goto done;
        j.coff[bg + 1] = j.coff[bg] + n;
        if (n > max_n) max_n = n;
    }
    const int64_t total = j.coff[n_pairs];
    j.cstart = lc_malloc(sizeof(int32_t) * (size_t)(total + 1), "prune_chunks chunks");
    j.clen   = lc_malloc(sizeof(int32_t) * (size_t)(total + 1), "prune_chunks chunks");
    j.crank  = lc_malloc(sizeof(int32_t) * (size_t)(total + 1), "prune_chunks chunks");
    j.cbg    = lc_malloc(sizeof(int32_t) * (size_t)(total + 1), "prune_chunks chunks");
    j.cscore = lc_malloc(sizeof(float) * (size_t)(total + 1), "prune_chunks chunk scores");
    rk       = lc_malloc(sizeof(ranked) * (size_t)(max_n + 1), "prune_chunks ranking");
    kept     = lc_malloc((size_t)(max_n + 1), "prune_chunks ranking");
    if (!j.cstart || !j.clen || !j.crank || !j.cbg || !j.cscore || !rk || !kept) {
        st = LC_ERR_NOMEM;
        goto done;
    }
    for (int32_t bg = 0; bg < n_pairs; bg++) {
        const lc_qblock *q = &qb[bg / a->n_groups];
        int64_t              i = j.coff[bg];
        if (!block_runs(a, bg / a->n_groups)) continue;
        if (!a->in) {
            const first_grid fg = first_grid_of(a, q);
            for (int32_t c = 0; c < fg.n; c++, i++) {
                const lc_segment ch = first_chunk(a, &fg, c);
                j.cstart[i] = ch.start, j.clen[i] = ch.len;
                j.crank[i] = c, j.cbg[i] = bg;
            }
            continue;
        }
        const int64_t lbg = list_pair(a, bg / a->n_groups, bg % a->n_groups);
        for (int32_t s = 0; s < a->in_n[lbg]; s++) {
            const lc_segment sg = a->in[lbg * a->in_cap + s];
            for (int32_t off = 0; off < sg.len; off += a->chunk, i++) {
                j.cstart[i] = sg.start + off;
                j.clen[i]   = sg.len - off < a->chunk ? sg.len - off : a->chunk;
                j.crank[i]  = (int32_t)(i - j.coff[bg]);
                j.cbg[i]    = bg;
            }
        }
    }
    /* pooled queries: mean of the rows of each stride, each row rotated first */
    j.qoff[0] = 0;
    for (int32_t b = 0; b < n_qb; b++) {
        j.nq[b]       = (qb[b].n_rows + a->q_stride - 1) / a->q_stride;
        j.qoff[b + 1] = j.qoff[b] + (int64_t)n_head * j.nq[b] * D;
    }
    j.qp = lc_malloc(sizeof(float) * (size_t)(j.qoff[n_qb] + 1), "prune_chunks pooled queries");
    if (!j.qp) {
        st = LC_ERR_NOMEM;
        goto done;
    }
#pragma omp parallel for schedule(dynamic)
    for (int32_t b = 0; b < n_qb; b++) {
        const lc_qblock *q = &qb[b];
        float                rot[HIP_MAX_D];
        for (int32_t h = 0; h < n_head; h++)
            for (int32_t u = 0; u < j.nq[b]; u++) {
                float        *dst = j.qp + j.qoff[b] + ((int64_t)h * j.nq[b] + u) * D;
                const int32_t r0  = u * a->q_stride;
                const int32_t r1  = r0 + a->q_stride < q->n_rows ? r0 + a->q_stride : q->n_rows;
                /* CHUNK: the chunk count of the head's group */
                const int32_t g   = a->n_groups == 1 ? 0 : h / j.G;
                const int64_t nch = j.coff[(int64_t)b * a->n_groups + g + 1] -
                                    j.coff[(int64_t)b * a->n_groups + g];
                memset(dst, 0, sizeof(float) * (size_t)D);
                for (int32_t r = r0; r < r1; r++) {
                    const int32_t p = q->pos0 + r;
                    int32_t       pos;
                    if (a->scan_rope == LC_SCAN_PLAIN) pos = p;
                    else if (a->scan_rope == LC_SCAN_RELATIVE) pos = a->n_stream + 1;
                    else pos = (int64_t)p < nch + a->n_stream ? p : (int32_t)(nch + a->n_stream);
                    lc_cpu_rope_copy(q_raw + ((int64_t)(q->row0 + r) * n_head + h) * D, rot, D,
                                     pos, rope);
                    for (int32_t d = 0; d < D; d++) dst[d] += rot[d];
                }
                const float inv = 1.0f / (float)(r1 - r0);
                for (int32_t d = 0; d < D; d++) dst[d] *= inv;
            }
    }
    /* score every chunk */
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < total; i++) j.cscore[i] = score_chunk(&j, i);
    /* keep the n_keep best of each pair, written in position order */
    for (int32_t bg = 0; bg < n_pairs; bg++) {
        if (!block_runs(a, bg / a->n_groups)) continue; /* its cached output stands */
        const int64_t c0 = j.coff[bg], n = j.coff[bg + 1] - c0;
        const int64_t lbg = list_pair(a, bg / a->n_groups, bg % a->n_groups);
        lc_segment   *out = a->out + lbg * a->n_keep;
        int32_t       w   = 0;
        if (n <= a->n_keep) {
            for (int64_t c = 0; c < n; c++) out[w++] = (lc_segment){j.cstart[c0 + c], j.clen[c0 + c]};
        } else {
            for (int64_t c = 0; c < n; c++) rk[c] = (ranked){lc_cpu_score_key(j.cscore[c0 + c]), (int32_t)c};
            qsort(rk, (size_t)n, sizeof(ranked), cmp_ranked_desc);
            /* mark the kept ranks, then write them in rank order */
            for (int64_t c = 0; c < n; c++) kept[c] = 0;
            for (int32_t k = 0; k < a->n_keep; k++) kept[rk[k].rank] = 1;
            for (int64_t c = 0; c < n; c++)
                if (kept[c]) out[w++] = (lc_segment){j.cstart[c0 + c], j.clen[c0 + c]};
        }
        /* overlapping first-stage chunks: each kept one starts where the one before it ends (the
         * ends rise with rank, so the output stays sorted and disjoint) */
        for (int32_t k = 1; k < w; k++) {
            const int32_t prev_end = out[k - 1].start + out[k - 1].len, end = out[k].start + out[k].len;
            if (out[k].start < prev_end) out[k].start = prev_end, out[k].len = end - prev_end;
        }
        a->out_n[lbg] = w;
    }
done:
    free(j.coff), free(j.qoff), free(j.nq), free(j.cstart), free(j.clen), free(j.crank);
    free(j.cbg), free(j.cscore), free(j.qp), free(rk), free(kept);
    return st;
}
