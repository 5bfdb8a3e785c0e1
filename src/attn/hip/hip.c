/*
 * hip.c — the HiP attention method (paper 004_b4c89dd3429c70a1.txt §3, Alg. 1–2; digest
 * spec/infinitehip-and-hip.md §1–2): per layer, each query block of block_q rows (one row per
 * decode sequence) estimates its top-k key blocks by the iterative hierarchical top-k (backend
 * op hip_mask: nodes split in two, the better half of the branches by their middle block's
 * score survives, until single key blocks), and block-sparse attention (attn_sparse) reads sink +
 * the selected blocks + the sliding window from the paged KV in place.
 *
 * Decode: each (sequence, layer) keeps its mask and re-estimates it every `refresh` steps (r_m,
 * Alg. 2); a prefill resets it. The first dense_layers layers (l_d) are dense. Masks are per KV
 * head (max over its query heads; HiP's own are per head, the same for MHA) or one for all
 * heads. RoPE: HiP scores rotated queries against rotated keys at their true positions; past the
 * model's trained context (rope=auto) we score at relative positions and re-index the attention
 * StreamingLLM-style as InfiniteHiP does (our addition: HiP itself has no extension).
 * Exactness: while every block's candidates fit in k the method calls dense attention.
 */
#include "attn/hip/hip.h"
#include "attn/select/query_blocks.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct hipa_impl {
    lc_backend       *b;
    lc_hipattn_params p;
    lc_attn_shape     shape;
    sel_ws            ws;
    bool              no_shortcut; /* lc_context_params.sparse_always (tests) */
    int64_t           selected, reused;
} hipa_impl;

typedef struct hipa_state {
    lc_backend *b;
    int64_t     step;
    bool        valid;
    lc_hip_seg *sel;   /* [n_groups][k / block_k] */
    int32_t    *sel_n; /* [n_groups] */
} hipa_state;

static int32_t hipa_win0(const void *params, int32_t pos0, int32_t n_rows) {
    (void)n_rows;
    const lc_hipattn_params *p = params;
    return sel_win0_stream(p->n_sink, p->n_stream, pos0);
}

static void hipa_state_free(const lc_attn_method *m, void *state) {
    (void)m;
    hipa_state *s = state;
    if (!s) return;
    if (s->sel) s->b->dealloc(s->b, s->sel);
    if (s->sel_n) s->b->dealloc(s->b, s->sel_n);
    free(s);
}

static int hipa_state_create(const lc_attn_method *m, int32_t layer, void **out) {
    (void)layer;
    const hipa_impl *h = m->impl;
    hipa_state      *s = lc_calloc(1, sizeof *s, "HiP layer state");
    if (!s) return LC_ERR_NOMEM;
    s->b     = h->b;
    s->sel   = h->b->alloc(h->b, sizeof(lc_hip_seg) * (size_t)h->ws.n_groups * (size_t)h->ws.sel_cap,
                           "HiP mask cache");
    s->sel_n = h->b->alloc(h->b, sizeof(int32_t) * (size_t)h->ws.n_groups, "HiP mask cache");
    if (!s->sel || !s->sel_n) {
        hipa_state_free(m, s);
        return LC_ERR_NOMEM;
    }
    *out = s;
    return LC_OK;
}

static int hipa_forward(const lc_attn_method *m, lc_backend *b, int32_t layer,
                        const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                        void *const *states, const float *q, const float *q_raw, int32_t n_head,
                        const lc_rope_table *rope, float scale, float *out) {
    hipa_impl               *h = m->impl;
    const lc_hipattn_params *p = &h->p;
    h->ws.last_sparse          = false;
    if (layer < p->dense_layers) return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
    if (!q_raw || !b->hip_mask || !b->attn_sparse)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip: the %s backend lacks the sparse ops", b->name);
    int32_t       n_pre = 0;
    const int32_t n_qb  = sel_blocks(&h->ws, seqs, n_seqs, p->block_q, p->tail_block, hipa_win0, p, &n_pre);
    if (n_qb < 0) return n_qb;
    int32_t pre_rows = 1, max_cand = 0, max_window = 1;
    int64_t max_end  = 0;
    bool    covered  = true;
    for (int32_t i = 0; i < n_qb; i++) {
        const lc_hip_qblock *qb   = &h->ws.h_qb[i];
        const int32_t        cand = qb->win0 > p->n_sink ? qb->win0 - p->n_sink : 0;
        if (cand > p->k) covered = false;
        if (cand > max_cand) max_cand = cand;
        if (i < n_pre && qb->n_rows > pre_rows) pre_rows = qb->n_rows;
        const int32_t w = qb->pos0 + qb->n_rows - qb->win0;
        if (w > max_window) max_window = w;
        if (qb->pos0 + qb->n_rows > max_end) max_end = qb->pos0 + qb->n_rows;
    }
    for (int32_t s = 0; s < n_seqs; s++) /* a prefill resets the masks of its sequences */
        if (seqs[s].n_rows > 1 && states && states[s]) ((hipa_state *)states[s])->valid = false;
    if (covered && !h->no_shortcut) return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);

    const bool extend = p->rope == LC_HIP_ROPE_EXTEND ||
                        ((p->rope == LC_HIP_ROPE_AUTO || p->rope == LC_HIP_ROPE_STREAM) &&
                         max_end > h->shape.n_ctx_train);
    int st = sel_upload_blocks(&h->ws, n_qb);
    if (st != LC_OK) return st;
    lc_hip_mask_args ma;
    memset(&ma, 0, sizeof ma);
    ma.k         = p->k;
    ma.block_k   = p->block_k;
    ma.q_stride  = p->q_stride;
    ma.k_stride  = p->k_stride;
    ma.n_sink    = p->n_sink;
    ma.n_stream  = p->n_stream;
    ma.scan_rope = extend && p->rope != LC_HIP_ROPE_STREAM ? LC_HIP_SCAN_RELATIVE : LC_HIP_SCAN_PLAIN;
    ma.n_groups  = h->ws.n_groups;
    ma.max_cand  = max_cand;
    ma.out_cap   = h->ws.sel_cap;
    lc_hip_sparse_args aa;
    memset(&aa, 0, sizeof aa);
    aa.n_sink     = p->n_sink;
    aa.attn_rope  = extend ? LC_HIP_ATTN_STREAMING : LC_HIP_ATTN_PLAIN;
    aa.n_groups   = h->ws.n_groups;
    aa.sel_cap    = h->ws.sel_cap;
    aa.max_sel    = p->k;
    aa.max_window = max_window;

    if (n_pre > 0) {
        ma.max_rows = pre_rows;
        ma.out      = h->ws.d_sel;
        ma.out_n    = h->ws.d_n;
        if ((st = b->hip_mask(b, kv, seqs, n_seqs, h->ws.d_qb, n_pre, q_raw, n_head, rope, &ma)) != LC_OK)
            return st;
        h->ws.last_sparse = true;
        h->ws.last_n_pre  = n_pre;
        aa.max_rows       = pre_rows;
        aa.sel            = h->ws.d_sel;
        aa.sel_n          = h->ws.d_n;
        if ((st = b->attn_sparse(b, kv, seqs, n_seqs, h->ws.d_qb, n_pre, q, n_head, rope, scale,
                                 &aa, out)) != LC_OK)
            return st;
    }
    for (int32_t j = n_pre; j < n_qb && st == LC_OK; j++) {
        const lc_hip_qblock *qb = &h->ws.h_qb[j];
        hipa_state          *hs = states ? states[qb->seq] : NULL;
        if (!hs) return lc_fail(LC_ERR_INTERNAL, "hip: a decode sequence has no state");
        if (!hs->valid || hs->step % p->refresh == 0) {
            ma.max_rows = 1;
            ma.out      = hs->sel;
            ma.out_n    = hs->sel_n;
            st = b->hip_mask(b, kv, seqs, n_seqs, h->ws.d_qb + j, 1, q_raw, n_head, rope, &ma);
            if (st != LC_OK) return st;
            if (!hs->valid) hs->step = 0;
            hs->valid = true;
            h->selected++;
        } else {
            h->reused++;
        }
        hs->step++;
        aa.max_rows   = 1;
        aa.max_window = qb->pos0 + 1 - qb->win0;
        aa.sel        = hs->sel;
        aa.sel_n      = hs->sel_n;
        st = b->attn_sparse(b, kv, seqs, n_seqs, h->ws.d_qb + j, 1, q, n_head, rope, scale, &aa, out);
    }
    return st;
}

static int hipa_last(const lc_attn_method *m, lc_hip_last *out) {
    return sel_ws_last(&((const hipa_impl *)m->impl)->ws, out);
}

static int hipa_stats(const lc_attn_method *m, lc_attn_stats *out) {
    const hipa_impl *h = m->impl;
    out->selected      = h->selected;
    out->reused        = h->reused;
    return LC_OK;
}

static void hipa_destroy(lc_attn_method *m) {
    if (!m) return;
    hipa_impl *h = m->impl;
    if (h) {
        sel_ws_release(&h->ws);
        free(h);
    }
    free(m);
}

int lc_attn_hipattn_create(lc_backend *b, const lc_attn_shape *shape, const lc_hipattn_params *p,
                           const lc_attn_diag *diag, lc_attn_method **out) {
    *out   = NULL;
    int st = lc_attn_settings_validate(&lc_attn_desc_hip, p);
    if (st != LC_OK) return st;
    if (!b->hip_mask || !b->attn_sparse)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip: the %s backend has no sparse attention", b->name);
    lc_attn_method *m = lc_calloc(1, sizeof *m, "attention method");
    hipa_impl      *h = lc_calloc(1, sizeof *h, "attention method");
    if (!m || !h) {
        free(m), free(h);
        return LC_ERR_NOMEM;
    }
    h->b           = b;
    h->p           = *p;
    h->shape       = *shape;
    h->ws.b        = b;
    h->ws.n_groups = p->per_group ? shape->n_kv_head : 1;
    h->ws.sel_cap  = p->k / p->block_k;
    h->ws.n_sink   = p->n_sink;
    h->no_shortcut = diag && diag->sparse_always;
    m->name         = "hip";
    m->impl         = h;
    m->needs_raw_q  = true;
    m->graph_safe   = false;
    m->state_create = hipa_state_create;
    m->state_free   = hipa_state_free;
    m->forward      = hipa_forward;
    m->destroy      = hipa_destroy;
    m->last         = hipa_last;
    m->stats        = hipa_stats;
    *out            = m;
    return LC_OK;
}
