/*
 * cpu_select.c — the head-dim and per-block checks the CPU twins of the sparse ops share (see
 * cpu_select.h).
 */
#include "backend/cpu/cpu_select.h"
#include "util/util.h"

int lc_cpu_check_head_dim(const char *op, int32_t head_dim, int32_t max_d) {
    if (head_dim > max_d)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: head dim %d on the CPU (at most %d)", op,
                       head_dim, max_d);
    return LC_OK;
}

int lc_cpu_check_block_seq(const char *op, const lc_qblock *qb, int32_t b, int32_t n_seqs) {
    if (qb[b].seq < 0 || qb[b].seq >= n_seqs)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: block %d: sequence %d of %d", op, b, qb[b].seq,
                       n_seqs);
    return LC_OK;
}

int lc_cpu_check_blocks(const char *op, const lc_attn_seq *seqs, int32_t n_seqs,
                        const lc_qblock *qb, int32_t n_qb, int32_t max_rows, int32_t n_sink,
                        int32_t max_cand, const lc_rope_table *rope) {
    for (int32_t b = 0; b < n_qb; b++) {
        const int st = lc_cpu_check_block_seq(op, qb, b, n_seqs);
        if (st != LC_OK) return st;
        const lc_qblock *q = &qb[b];
        const lc_attn_seq   *s = &seqs[q->seq];
        if (q->n_rows < 1 || q->n_rows > max_rows || q->row0 < s->row0 ||
            q->row0 + q->n_rows > s->row0 + s->n_rows || q->pos0 != s->pos0 + (q->row0 - s->row0) ||
            q->win0 < 0 || q->win0 > q->pos0 + q->n_rows)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: block %d (rows %d+%d, pos0 %d, win0 %d) does "
                           "not fit its sequence or max_rows %d", op, b, q->row0, q->n_rows,
                           q->pos0, q->win0, max_rows);
        if (max_cand >= 0 && (int64_t)q->win0 - n_sink > max_cand)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: block %d has %lld candidates, max_cand is %d",
                           op, b, (long long)q->win0 - n_sink, max_cand);
        if (rope && q->pos0 + q->n_rows > rope->n_pos)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: block %d: position %d outside the RoPE table "
                           "(%d)", op, b, q->pos0 + q->n_rows - 1, rope->n_pos);
    }
    return LC_OK;
}
