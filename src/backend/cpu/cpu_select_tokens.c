/*
 * cpu_select_tokens.c — TokenSelect token-level selection, the CPU reference twin of select_tokens
 * (contract: backend.h, "TokenSelect token-level selection"). Per query block: the fingerprint
 * f_h (rows rotated at fp_pos + i, then mean), the logits f_h · k_t against the stored
 * (pre-RoPE) keys of the candidates [n_init, win0), the per-head softmax soft vote, and the
 * top-k by a radix select on the score bits (equal scores: the lower position first), written
 * as maximal runs. The decode selection cache (cos(f, cache_q) >= theta: keep the previous
 * selection) is decided first, per block in its slot (list[b], batched decode).
 * Paper: TokenSelect (001_823a2d0cdd44ac9c.txt) Eq. 7, Alg. 1–2; digest
 * spec/tokenselect-and-sparseserve.md A.2–A.5.
 *
 * Layouts: q_raw [rows][n_head][head_dim] (un-rotated); pages [page][kv_head][P][head_dim] fp32.
 * Work: the logits of a block are computed in parallel over the candidates (every key row
 * dotted with the query heads that read it); scores fp32, Z_h summed in double.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_select.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TS_MAX_D 1024 /* stack buffer of one rotated query row */

/* The radix key of a score (scores are >= 0, so the float bits order them; NaN counts as 0). */
static uint32_t ts_key(float s) {
    uint32_t u;
    if (!(s >= 0.0f)) s = 0.0f;
    memcpy(&u, &s, sizeof u);
    return u;
}

static int check_blocks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                        const lc_qblock *qb, int32_t n_qb, const lc_select_tokens_args *a) {
    const int st = lc_cpu_check_head_dim("select_tokens", kv->head_dim, TS_MAX_D);
    if (st != LC_OK) return st;
    return lc_cpu_check_blocks("select_tokens", seqs, n_seqs, qb, n_qb, a->max_rows, a->n_init,
                               a->max_cand, NULL);
}

/* f[n_head][D] of block q: its rows rotated at fp_pos + i, then the mean. */
static void fingerprint(const lc_qblock *q, const float *q_raw, int32_t n_head, int32_t D,
                        const lc_rope_table *rope, int32_t fp_pos, float *f) {
    float rot[TS_MAX_D];
    memset(f, 0, sizeof(float) * (size_t)n_head * D);
    for (int32_t i = 0; i < q->n_rows; i++)
        for (int32_t h = 0; h < n_head; h++) {
            lc_cpu_rope_copy(q_raw + ((int64_t)(q->row0 + i) * n_head + h) * D, rot, D, fp_pos + i,
                             rope);
            float *dst = f + (int64_t)h * D;
            for (int32_t d = 0; d < D; d++) dst[d] += rot[d];
        }
    const float inv = 1.0f / (float)q->n_rows;
    for (int64_t i = 0; i < (int64_t)n_head * D; i++) f[i] *= inv;
}

/* Selection of one block with n > k candidates: scores -> segments; returns the count. */
static int32_t select_block(const lc_kv_layer_view *kv, const int32_t *pt, int32_t n_init,
                            int32_t n, int32_t k, const float *f, int32_t n_head, int32_t gqa_mod,
                            float *logit, double *mz, float *score, lc_segment *out) {
    const int64_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
    const int32_t G = n_head / (int32_t)H;
    /* logits [t][n_head] */
#pragma omp parallel for schedule(static)
    for (int32_t t = 0; t < n; t++) {
        const int64_t pos = (int64_t)n_init + t, page = pt[pos / P];
        for (int32_t h = 0; h < n_head; h++) {
            const int64_t kvh = gqa_mod ? h % H : h / G;
            const float  *kr  = (const float *)kv->k + ((page * H + kvh) * P + pos % P) * D;
            const float  *fh  = f + (int64_t)h * D;
            float         s   = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int64_t d = 0; d < D; d++) s += fh[d] * kr[d];
            logit[(int64_t)t * n_head + h] = s;
        }
    }
    /* per-head max and sum of exp */
    for (int32_t h = 0; h < n_head; h++) {
        float m = -INFINITY;
        for (int32_t t = 0; t < n; t++) m = fmaxf(m, logit[(int64_t)t * n_head + h]);
        double z = 0.0;
        for (int32_t t = 0; t < n; t++) z += exp((double)logit[(int64_t)t * n_head + h] - m);
        mz[2 * h] = m, mz[2 * h + 1] = z;
    }
    /* soft vote */
#pragma omp parallel for schedule(static)
    for (int32_t t = 0; t < n; t++) {
        float s = 0.0f;
        for (int32_t h = 0; h < n_head; h++)
            s += (float)(exp((double)logit[(int64_t)t * n_head + h] - mz[2 * h]) / mz[2 * h + 1]);
        score[t] = s;
    }
    /* radix select of the k-th largest key: 11, 11, 10 bits */
    static const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
    uint32_t         prefix = 0, pmask = 0;
    int64_t          krem = k; /* still to take among the keys matching the prefix */
    int64_t          hist[2048];
    for (int p = 0; p < 3; p++) {
        const int      nb = 1 << widths[p];
        const uint32_t bm = (uint32_t)nb - 1u;
        memset(hist, 0, sizeof hist);
        for (int32_t t = 0; t < n; t++) {
            const uint32_t key = ts_key(score[t]);
            if ((key & pmask) == prefix) hist[(key >> shifts[p]) & bm]++;
        }
        int64_t above = 0;
        int     bin   = nb - 1;
        for (; bin > 0; bin--) {
            if (above + hist[bin] >= krem) break;
            above += hist[bin];
        }
        krem -= above;
        prefix |= (uint32_t)bin << shifts[p];
        pmask |= bm << shifts[p];
    }
    /* position order: keys above the threshold, and the first krem ties */
    int32_t nseg = 0, prev = -2;
    int64_t ties = 0;
    for (int32_t t = 0; t < n; t++) {
        const uint32_t key = ts_key(score[t]);
        int            sel = key > prefix;
        if (key == prefix && ties < krem) sel = 1, ties++;
        if (!sel) continue;
        const int32_t pos = n_init + t;
        if (pos == prev + 1) out[nseg - 1].len++;
        else out[nseg++] = (lc_segment){pos, 1};
        prev = pos;
    }
    return nseg;
}

int lc_cpu_select_tokens(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                     const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                     const lc_rope_table *rope, const lc_select_tokens_args *a) {
    int st = lc_select_tokens_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st != LC_OK) return st;
    st = check_blocks(kv, seqs, n_seqs, qb, n_qb, a);
    if (st != LC_OK || n_qb == 0) return st;
    const int32_t D = kv->head_dim;
    const int64_t nf = (int64_t)n_head * D;
    int32_t       max_n = 0;
    for (int32_t b = 0; b < n_qb; b++) {
        const int32_t n = qb[b].win0 - a->n_init;
        if (n > a->k && n > max_n) max_n = n;
    }
    float  *f     = lc_malloc(sizeof(float) * (size_t)nf, "select_tokens fingerprint");
    double *mz    = lc_malloc(sizeof(double) * 2 * (size_t)n_head, "select_tokens softmax");
    float  *logit = max_n ? lc_malloc(sizeof(float) * (size_t)max_n * n_head, "select_tokens logits") : NULL;
    float  *score = max_n ? lc_malloc(sizeof(float) * (size_t)max_n, "select_tokens scores") : NULL;
    if (!f || !mz || (max_n && (!logit || !score))) {
        st = LC_ERR_NOMEM;
        goto done;
    }
    for (int32_t b = 0; b < n_qb; b++) {
        const lc_qblock *q    = &qb[b];
        const int64_t    slot = a->list ? a->list[b] : b; /* batched decode: the block's slot */
        fingerprint(q, q_raw, n_head, D, rope, a->fp_pos, f);
        if (a->cache_q) { /* the slot's selection cache */
            float        *cq  = a->cache_q + slot * nf;
            double        dot = 0.0, nf2 = 0.0, nc2 = 0.0;
            for (int64_t i = 0; i < nf; i++) {
                dot += (double)f[i] * cq[i];
                nf2 += (double)f[i] * f[i];
                nc2 += (double)cq[i] * cq[i];
            }
            const double c = nf2 > 0.0 && nc2 > 0.0 ? dot / sqrt(nf2 * nc2) : 0.0;
            if (a->cache_valid[slot] != 0 && c >= (double)a->theta) {
                if (a->counts) a->counts[0] += 1;
                continue;
            }
            memcpy(cq, f, sizeof(float) * (size_t)nf);
            a->cache_valid[slot] = 1;
            if (a->counts) a->counts[1] += 1;
        }
        const int32_t n   = q->win0 - a->n_init;
        lc_segment   *out = a->out + slot * a->out_cap;
        if (n <= 0) a->out_n[slot] = 0;
        else if (n <= a->k) out[0] = (lc_segment){a->n_init, n}, a->out_n[slot] = 1;
        else
            a->out_n[slot] = select_block(kv, seqs[q->seq].page_table, a->n_init, n, a->k, f, n_head,
                                          a->gqa_mod, logit, mz, score, out);
    }
done:
    free(f), free(mz), free(logit), free(score);
    return st;
}
