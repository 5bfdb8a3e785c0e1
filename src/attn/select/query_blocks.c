/*
 * query_blocks.c — query blocks and prefill-selection workspace shared by the selecting
 * sparse methods (see query_blocks.h).
 */
#include "attn/select/query_blocks.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

void sel_ws_release(sel_ws *w) {
    lc_backend *b = w->b;
    free(w->h_qb);
    if (w->d_qb) b->dealloc(b, w->d_qb);
    if (w->d_sel) b->dealloc(b, w->d_sel);
    if (w->d_n) b->dealloc(b, w->d_n);
    w->h_qb = NULL, w->d_qb = NULL, w->d_sel = NULL, w->d_n = NULL;
    w->qb_cap = 0;
}

static int ws_reserve(sel_ws *w, int32_t n_qb) {
    if (n_qb <= w->qb_cap) return LC_OK;
    sel_ws_release(w);
    lc_backend   *b     = w->b;
    const int32_t cap   = n_qb < 64 ? 64 : n_qb + n_qb / 2;
    const size_t  lists = (size_t)cap * (size_t)w->n_groups;
    w->h_qb  = lc_malloc(sizeof(lc_hip_qblock) * (size_t)cap, "query blocks");
    w->d_qb  = b->alloc(b, sizeof(lc_hip_qblock) * (size_t)cap, "query blocks");
    w->d_sel = b->alloc(b, sizeof(lc_hip_seg) * lists * (size_t)w->sel_cap, "prefill selections");
    w->d_n   = b->alloc(b, sizeof(int32_t) * lists, "prefill selections");
    if (!w->h_qb || !w->d_qb || !w->d_sel || !w->d_n) return sel_ws_release(w), LC_ERR_NOMEM;
    w->qb_cap = cap;
    return LC_OK;
}

int32_t sel_block_len(int32_t pos, int32_t end, int32_t block_rows, int32_t prompt_end,
                      int32_t tail_block) {
    int32_t len = block_rows - pos % block_rows;
    if (tail_block > 0 && prompt_end > 0 && pos < prompt_end) {
        const int32_t t0 = prompt_end - block_rows > 0 ? prompt_end - block_rows : 0;
        if (pos >= t0) {
            len = tail_block - (pos - t0) % tail_block;
            if (len > prompt_end - pos) len = prompt_end - pos;
        } else if (pos + len > t0) {
            len = t0 - pos;
        }
    }
    return len < end - pos ? len : end - pos;
}

int32_t sel_count_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                         int32_t tail_block) {
    int32_t n_qb = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const lc_attn_seq *a = &seqs[s];
        if (a->n_rows <= 1) {
            n_qb += a->n_rows == 1;
            continue;
        }
        for (int32_t r = 0; r < a->n_rows; n_qb++)
            r += sel_block_len(a->pos0 + r, a->pos0 + a->n_rows, block_rows, a->prompt_end,
                               tail_block);
    }
    return n_qb;
}

int32_t sel_cut_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                       int32_t tail_block, sel_win0_fn win0, const void *params,
                       lc_hip_qblock *qbs, int32_t *n_pre) {
    int32_t idx = 0;
    *n_pre      = 0;
    for (int pass = 0; pass < 2; pass++) { /* prefill blocks, then one per decode sequence */
        for (int32_t s = 0; s < n_seqs; s++) {
            const lc_attn_seq *a = &seqs[s];
            if (a->n_rows < 1 || (a->n_rows > 1) != (pass == 0)) continue;
            for (int32_t r = 0; r < a->n_rows;) {
                lc_hip_qblock *qb = &qbs[idx++];
                qb->seq           = s;
                qb->row0          = a->row0 + r;
                qb->pos0          = a->pos0 + r;
                qb->n_rows = sel_block_len(qb->pos0, a->pos0 + a->n_rows, block_rows,
                                           a->prompt_end, tail_block);
                qb->win0   = win0(params, qb->pos0, qb->n_rows);
                r += qb->n_rows;
            }
        }
        if (pass == 0) *n_pre = idx;
    }
    return idx;
}

int32_t sel_blocks(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                   int32_t tail_block, sel_win0_fn win0, const void *params, int32_t *n_pre) {
    const int st = ws_reserve(w, sel_count_blocks(seqs, n_seqs, block_rows, tail_block));
    if (st != LC_OK) return st;
    return sel_cut_blocks(seqs, n_seqs, block_rows, tail_block, win0, params, w->h_qb, n_pre);
}

int sel_upload_blocks(sel_ws *w, int32_t n_qb) {
    lc_backend *b = w->b;
    int (*up)(lc_backend *, void *, const void *, size_t) = b->upload_async ? b->upload_async
                                                                            : b->upload;
    return up(b, w->d_qb, w->h_qb, sizeof(lc_hip_qblock) * (size_t)n_qb);
}

int sel_ws_last(const sel_ws *w, lc_hip_last *out) {
    memset(out, 0, sizeof *out);
    out->n_sink   = w->n_sink;
    out->n_groups = w->n_groups;
    out->sparse   = w->last_sparse;
    if (!w->last_sparse) return LC_OK;
    const int32_t n = w->last_n_pre, cap = w->sel_cap, G = w->n_groups;
    out->n_qb    = n;
    out->sel_cap = cap;
    out->qb      = lc_malloc(sizeof(lc_hip_qblock) * (size_t)n, "selection copy");
    out->sel     = lc_malloc(sizeof(lc_hip_seg) * (size_t)n * (size_t)G * (size_t)cap, "selection copy");
    out->sel_n   = lc_malloc(sizeof(int32_t) * (size_t)n * (size_t)G, "selection copy");
    if (!out->qb || !out->sel || !out->sel_n) return lc_attn_hip_last_free(out), LC_ERR_NOMEM;
    memcpy(out->qb, w->h_qb, sizeof(lc_hip_qblock) * (size_t)n);
    int st = w->b->download(w->b, out->sel, w->d_sel,
                            sizeof(lc_hip_seg) * (size_t)n * (size_t)G * (size_t)cap);
    if (st == LC_OK)
        st = w->b->download(w->b, out->sel_n, w->d_n, sizeof(int32_t) * (size_t)n * (size_t)G);
    if (st != LC_OK) lc_attn_hip_last_free(out);
    return st;
}
