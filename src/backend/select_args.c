/*
 * select_args.c — the argument checks of the sparse-attention backend ops (InfiniteHiP prune_chunks,
 * attn_segments; TokenSelect select_tokens; HiP select_blocks;
 * contract in backend.h, paper 000_ced830aa0d9eb0ea.txt Alg. 1–3) that the CPU twins and the
 * CUDA kernels share, so both refuse the same calls with the same message. Each backend adds
 * what only it needs (head dims it has kernels for, page sizes, per-block checks).
 */
#include "backend/backend.h"
#include "util/util.h"

int lc_prune_chunks_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                       const lc_rope_table *rope, const lc_prune_chunks_args *a) {
    if (!kv || !rope || !a || n_qb < 0 || (n_qb > 0 && (!qb || !seqs || !q_raw)) || !a->out ||
        !a->out_n)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: missing argument");
    const int32_t H = kv->n_kv_head, D = kv->head_dim;
    if (H < 1 || D < 1 || kv->page_size < 1 || n_head < H || n_head % H)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: bad shape (%d heads, %d KV heads, dim %d, "
                       "page %d)", n_head, H, D, kv->page_size);
    if (a->chunk < 1 || a->n_keep < 1 || a->q_stride < 1 || a->n_sink < 0 || a->n_stream < 0 ||
        a->scan_rope < LC_SCAN_PLAIN || a->scan_rope > LC_SCAN_CHUNK ||
        (a->n_groups != 1 && a->n_groups != H) || a->max_rows < 1 || a->max_chunks < 0 ||
        (a->in && (!a->in_n || a->in_cap < 0)) || a->first_offset < 0 ||
        a->first_offset >= a->chunk || (a->in && a->first_offset != 0) || a->first_stride < 0 ||
        a->first_stride > a->chunk || (a->in && a->first_stride != 0) ||
        (a->kv_descent != 0 && a->kv_descent != 1))
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: bad stage arguments (chunk %d, keep %d, "
                       "q_stride %d, groups %d, scan_rope %d, first_offset %d, first_stride %d, "
                       "kv_descent %d)", a->chunk, a->n_keep, a->q_stride, a->n_groups,
                       a->scan_rope, a->first_offset, a->first_stride, a->kv_descent);
    if (rope->n_rot > D || rope->n_rot < 0 || rope->n_rot % 2 || rope->n_pos < 1)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: n_rot %d with head dim %d", rope->n_rot, D);
    if (a->scan_rope == LC_SCAN_RELATIVE && (int64_t)a->n_stream + 1 >= rope->n_pos)
        return lc_fail(LC_ERR_INVALID_ARG, "prune_chunks: relative RoPE needs position %d, the "
                       "table has %d", a->n_stream + 1, rope->n_pos);
    return LC_OK;
}

int lc_attn_segments_check(const lc_kv_layer_view *kv, int32_t n_head, const lc_attn_segments_args *a) {
    if (!kv || !a) return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: missing argument");
    const int32_t H = kv->n_kv_head, D = kv->head_dim;
    if (H <= 0 || n_head <= 0 || n_head % H != 0 || D <= 0 || kv->page_size <= 0)
        return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: bad head layout (%d query heads, %d kv "
                       "heads, head dim %d, page size %d)", n_head, H, D, kv->page_size);
    if (a->n_groups != 1 && a->n_groups != H)
        return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: n_groups %d (1 or n_kv_head %d)",
                       a->n_groups, H);
    if (a->n_sink < 0 || a->sel_cap < 0 || a->max_sel < 0 || a->max_window < 0 ||
        a->max_rows < 1 || (a->attn_rope != LC_ATTN_ROPE_PLAIN &&
                            a->attn_rope != LC_ATTN_ROPE_STREAMING &&
                            a->attn_rope != LC_ATTN_ROPE_GAPS) ||
        (a->attn_rope == LC_ATTN_ROPE_GAPS && a->gap_span < 1))
        return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: bad arguments (n_sink %d, sel_cap %d, "
                       "max_sel %d, max_window %d, max_rows %d, attn_rope %d, gap_span %d)",
                       a->n_sink, a->sel_cap, a->max_sel, a->max_window, a->max_rows,
                       a->attn_rope, a->gap_span);
    return LC_OK;
}

/* the checks select_tokens and select_blocks share: shapes, the blocks' presence, the RoPE table */
static int select_common_check(const char *op, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                               const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                               int32_t n_head, const lc_rope_table *rope) {
    if (!kv || !rope || n_qb < 0 || (n_qb > 0 && (!qb || !seqs || !q_raw)))
        return lc_fail(LC_ERR_INVALID_ARG, "%s: missing argument", op);
    const int32_t H = kv->n_kv_head, D = kv->head_dim;
    if (H < 1 || D < 1 || kv->page_size < 1 || n_head < H || n_head % H)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: bad shape (%d heads, %d KV heads, dim %d, page %d)",
                       op, n_head, H, D, kv->page_size);
    if (rope->n_rot > D || rope->n_rot < 0 || rope->n_rot % 2 || rope->n_pos < 1)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: n_rot %d with head dim %d", op, rope->n_rot, D);
    return LC_OK;
}

int lc_select_tokens_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                       const lc_rope_table *rope, const lc_select_tokens_args *a) {
    if (!a || !a->out || !a->out_n) return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: missing argument");
    int st = select_common_check("select_tokens", kv, seqs, qb, n_qb, q_raw, n_head, rope);
    if (st != LC_OK) return st;
    if (a->n_init < 0 || a->k < 1 || a->fp_pos < 0 || (a->gqa_mod != 0 && a->gqa_mod != 1) ||
        a->max_rows < 1 || a->max_cand < 0 || a->out_cap < (a->k < a->max_cand ? a->k : a->max_cand))
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: bad arguments (n_init %d, k %d, fp_pos %d, "
                       "gqa_mod %d, max_rows %d, max_cand %d, out_cap %d)", a->n_init, a->k,
                       a->fp_pos, a->gqa_mod, a->max_rows, a->max_cand, a->out_cap);
    if ((int64_t)a->fp_pos + a->max_rows > rope->n_pos)
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: fingerprint positions up to %d, the RoPE "
                       "table has %d", a->fp_pos + a->max_rows - 1, rope->n_pos);
    if (a->cache_q && ((n_qb != 1 && !a->list) || !a->cache_valid))
        return lc_fail(LC_ERR_INVALID_ARG, "select_tokens: the selection cache needs cache_valid and, "
                       "for %d blocks, their slots (list)", n_qb);
    return LC_OK;
}

int lc_select_blocks_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                      const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                      const lc_rope_table *rope, const lc_select_blocks_args *a) {
    if (!a || !a->out || !a->out_n) return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: missing argument");
    int st = select_common_check("select_blocks", kv, seqs, qb, n_qb, q_raw, n_head, rope);
    if (st != LC_OK) return st;
    if (a->block_k < 1 || a->k < a->block_k || a->k % a->block_k || a->q_stride < 1 ||
        a->k_stride < 1 || a->k_stride > a->block_k || a->n_sink < 0 || a->n_stream < 0 ||
        (a->scan_rope != LC_SCAN_PLAIN && a->scan_rope != LC_SCAN_RELATIVE) ||
        (a->n_groups != 1 && a->n_groups != kv->n_kv_head) || a->max_rows < 1 ||
        a->max_cand < 0 || a->out_cap < a->k / a->block_k)
        return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: bad arguments (k %d, block_k %d, q_stride %d, "
                       "k_stride %d, groups %d, scan_rope %d, out_cap %d)", a->k, a->block_k,
                       a->q_stride, a->k_stride, a->n_groups, a->scan_rope, a->out_cap);
    if (a->scan_rope == LC_SCAN_RELATIVE && (int64_t)a->n_stream + 1 >= rope->n_pos)
        return lc_fail(LC_ERR_INVALID_ARG, "select_blocks: relative RoPE needs position %d, the table "
                       "has %d", a->n_stream + 1, rope->n_pos);
    return LC_OK;
}
