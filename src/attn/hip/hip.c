/*
 * hip.c — the HiP attention method (paper 004_b4c89dd3429c70a1.txt §3, Alg. 1–2; digest
 * spec/infinitehip-and-hip.md §1–2): per layer, each query block of block_q rows (one row per
 * decode sequence) estimates its top-k key blocks by the iterative hierarchical top-k (backend
 * op hip_mask: nodes split in two, the better half of the branches by their middle block's
 * score survives, until single key blocks), and block-sparse attention (attn_sparse) reads sink +
 * the selected blocks + the sliding window from the paged KV in place.
 *
 * Decode: each (sequence, layer) keeps its mask and re-estimates it every `refresh` steps (r_m,
 * Alg. 2); a prefill resets it. The masks live in pools (a slot per sequence and layer), so all
 * decode sequences of a step share one mask launch and one attention launch per layer (backend.h
 * "Batched decode"); the host decides once per model forward, for every layer (hipa_plan). The first dense_layers layers (l_d) are dense. Masks are per KV
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
    sel_ws            ws;          /* blocks, plan image, prefill masks */
    sel_pool          pool;        /* decode masks: a slot per (sequence, layer) */
    bool              no_shortcut; /* lc_context_params.sparse_always (tests) */
    int64_t           selected, reused;
    lc_rotated_keys   rot;         /* prefill keys rotated once per layer (plain RoPE) */
    /* the plan: launch sizes, the dense shortcut, and per layer whether a decode block
       re-estimates its mask */
    int32_t           pre_rows, max_cand, dec_cand, max_window;
    int64_t           max_end;
    bool              dense;
    bool             *any_refresh; /* [n_layer] */
} hipa_impl;

/* Per (sequence, layer): its slot of the layer's mask pool and the refresh state. */
typedef struct hipa_state {
    int32_t layer, slot;
    int64_t step;
    bool    valid;
} hipa_state;

static int32_t hipa_win0(const void *params, int32_t pos0, int32_t n_rows) {
    (void)n_rows;
    const lc_hipattn_params *p = params;
    return sel_win0_stream(p->n_sink, p->n_stream, pos0);
}

static void hipa_state_free(const lc_attn_method *m, void *state) {
    hipa_state *s = state;
    if (!s) return;
    sel_pool_give(&((hipa_impl *)m->impl)->pool, s->layer, s->slot);
    free(s);
}

static int hipa_state_create(const lc_attn_method *m, int32_t layer, void **out) {
    hipa_impl *h = m->impl;
    if (layer < 0 || layer >= h->shape.n_layer)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: layer %d of %d", layer, h->shape.n_layer);
    hipa_state *s = lc_calloc(1, sizeof *s, "HiP layer state");
    if (!s) return LC_ERR_NOMEM;
    s->layer     = layer;
    const int st = sel_pool_take(&h->pool, layer, &s->slot);
    if (st != LC_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LC_OK;
}

static int plan_batch(hipa_impl *h, const lc_attn_seq *seqs, int32_t n_seqs) {
    const lc_hipattn_params *p = &h->p;
    const int st = sel_plan_blocks(&h->ws, seqs, n_seqs, p->block_q, p->tail_block, hipa_win0, p);
    if (st != LC_OK) return st;
    h->pre_rows = 1, h->max_cand = 0, h->dec_cand = 0, h->max_window = 1, h->max_end = 0;
    bool covered = true;
    for (int32_t i = 0; i < h->ws.n_qb; i++) {
        const lc_hip_qblock *qb   = &h->ws.h_qb[i];
        const int32_t        cand = qb->win0 > p->n_sink ? qb->win0 - p->n_sink : 0;
        if (cand > p->k) covered = false;
        if (cand > h->max_cand) h->max_cand = cand;
        if (i >= h->ws.n_pre && cand > h->dec_cand) h->dec_cand = cand;
        if (i < h->ws.n_pre && qb->n_rows > h->pre_rows) h->pre_rows = qb->n_rows;
        const int32_t w = qb->pos0 + qb->n_rows - qb->win0;
        if (w > h->max_window) h->max_window = w;
        if (qb->pos0 + qb->n_rows > h->max_end) h->max_end = qb->pos0 + qb->n_rows;
    }
    if (h->ws.n_qb > h->ws.n_pre) h->dec_cand = sel_launch_bucket(h->dec_cand);
    h->dense = covered && !h->no_shortcut;
    return LC_OK;
}

/* The layer part: a prefill resets its sequence's mask; each decode block's slot, and whether it
 * re-estimates its mask (every `refresh` steps, Alg. 2), its state advanced. */
static int plan_layer(hipa_impl *h, int32_t layer, const lc_attn_seq *seqs, int32_t n_seqs,
                      void *const *states) {
    const lc_hipattn_params *p = &h->p;
    h->any_refresh[layer] = false;
    if (layer < p->dense_layers) return LC_OK;
    for (int32_t s = 0; s < n_seqs; s++)
        if (seqs[s].n_rows > 1 && states && states[s]) ((hipa_state *)states[s])->valid = false;
    if (h->dense) return LC_OK;
    int32_t *list = h->ws.h_list + (size_t)layer * (size_t)h->ws.qb_cap;
    int32_t *from = h->ws.h_from + (size_t)layer * (size_t)h->ws.qb_cap;
    for (int32_t j = h->ws.n_pre; j < h->ws.n_qb; j++) {
        hipa_state *hs = states ? states[h->ws.h_qb[j].seq] : NULL;
        if (!hs) return lc_fail(LC_ERR_INTERNAL, "hip: a decode sequence has no state");
        const bool refresh = !hs->valid || hs->step % p->refresh == 0;
        if (refresh) {
            if (!hs->valid) hs->step = 0;
            hs->valid = true;
            h->selected++;
            h->any_refresh[layer] = true;
        } else {
            h->reused++;
        }
        hs->step++;
        list[j - h->ws.n_pre] = hs->slot;
        from[j - h->ws.n_pre] = refresh ? 0 : 1;
    }
    return LC_OK;
}

static int hipa_plan(const lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                     void **const *states, uint64_t *key) {
    hipa_impl *h  = m->impl;
    int        st = plan_batch(h, seqs, n_seqs);
    void      *stack[64];
    void     **ls = n_seqs <= 64 ? stack : lc_malloc(sizeof(void *) * (size_t)n_seqs, "states");
    if (!ls) return LC_ERR_NOMEM;
    for (int32_t l = 0; l < h->shape.n_layer && st == LC_OK; l++) {
        for (int32_t s = 0; s < n_seqs; s++) ls[s] = states ? states[s][l] : NULL;
        st = plan_layer(h, l, seqs, n_seqs, ls);
    }
    if (ls != stack) free(ls);
    if (st == LC_OK) st = sel_plan_upload(&h->ws);
    if (st != LC_OK) return st;
    sel_plan_mark(&h->ws);
    uint64_t k = sel_key_mix(0x41d7ull, (uint64_t)h->ws.n_qb);
    k          = sel_key_mix(k, (uint64_t)h->ws.n_pre);
    k          = sel_key_mix(k, (uint64_t)h->dec_cand);
    k          = sel_key_mix(k, (uint64_t)h->dense);
    k          = sel_key_mix(k, (uint64_t)(h->max_end > h->shape.n_ctx_train));
    k          = sel_key_mix(k, h->ws.epoch);
    k          = sel_key_mix(k, h->pool.epoch);
    for (int32_t l = 0; l < h->shape.n_layer; l++) k = sel_key_mix(k, (uint64_t)h->any_refresh[l]);
    *key = k;
    return LC_OK;
}

static int hipa_forward(const lc_attn_method *m, lc_backend *b, int32_t layer,
                        const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                        void *const *states, const float *q, const float *q_raw, int32_t n_head,
                        const lc_rope_table *rope, float scale, float *out) {
    hipa_impl               *h = m->impl;
    const lc_hipattn_params *p = &h->p;
    h->ws.last_sparse          = false;
    if (layer < 0 || layer >= h->shape.n_layer)
        return lc_fail(LC_ERR_INVALID_ARG, "hip: layer %d of %d", layer, h->shape.n_layer);
    if (layer < p->dense_layers) return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
    if (!q_raw || !b->hip_mask || !b->attn_sparse)
        return lc_fail(LC_ERR_UNSUPPORTED, "hip: the %s backend lacks the sparse ops", b->name);
    int st = LC_OK;
    if (!sel_plan_take(&h->ws, layer)) { /* a caller that does not plan: this layer's plan */
        st = plan_batch(h, seqs, n_seqs);
        if (st == LC_OK) st = plan_layer(h, layer, seqs, n_seqs, states);
        if (st == LC_OK) st = sel_plan_upload(&h->ws);
        if (st != LC_OK) return st;
    }
    if (h->dense) return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
    const int32_t n_qb = h->ws.n_qb, n_pre = h->ws.n_pre, n_dec = n_qb - n_pre;

    const bool extend = p->rope == LC_HIP_ROPE_EXTEND ||
                        ((p->rope == LC_HIP_ROPE_AUTO || p->rope == LC_HIP_ROPE_STREAM) &&
                         h->max_end > h->shape.n_ctx_train);
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
    ma.max_cand  = h->max_cand;
    ma.out_cap   = h->ws.sel_cap;
    lc_hip_sparse_args aa;
    memset(&aa, 0, sizeof aa);
    aa.n_sink     = p->n_sink;
    aa.attn_rope  = extend ? LC_HIP_ATTN_STREAMING : LC_HIP_ATTN_PLAIN;
    aa.n_groups   = h->ws.n_groups;
    aa.sel_cap    = h->ws.sel_cap;
    aa.max_sel    = p->k;
    aa.max_window = h->max_window;

    if (n_pre > 0) {
        ma.max_rows = h->pre_rows;
        ma.out      = h->ws.d_sel;
        ma.out_n    = h->ws.d_n;
        if ((st = b->hip_mask(b, kv, seqs, n_seqs, h->ws.d_qb, n_pre, q_raw, n_head, rope, &ma)) != LC_OK)
            return st;
        h->ws.last_sparse = true;
        h->ws.last_n_pre  = n_pre;
        aa.max_rows       = h->pre_rows;
        aa.sel            = h->ws.d_sel;
        aa.sel_n          = h->ws.d_n;
        aa.rot            = &h->rot;
        if ((st = b->attn_sparse(b, kv, seqs, n_seqs, h->ws.d_qb, n_pre, q, n_head, rope, scale,
                                 &aa, out)) != LC_OK)
            return st;
    }
    if (n_dec == 0) return LC_OK;
    /* decode blocks: one launch each op, every block with its sequence's slot of the layer's
       masks, re-estimating only where its from row says so (no launch where none does) */
    const lc_hip_qblock *d_dec  = h->ws.d_qb + n_pre;
    const int32_t       *d_list = h->ws.d_list + (size_t)layer * (size_t)h->ws.qb_cap;
    lc_hip_seg          *pseg   = sel_pool_seg(&h->pool, layer, 0);
    int32_t             *pn     = sel_pool_n(&h->pool, layer, 0);
    if (h->any_refresh[layer]) {
        ma.max_rows = 1;
        ma.max_cand = h->dec_cand;
        ma.out      = pseg;
        ma.out_n    = pn;
        ma.list     = d_list;
        ma.from     = h->ws.d_from + (size_t)layer * (size_t)h->ws.qb_cap;
        st          = b->hip_mask(b, kv, seqs, n_seqs, d_dec, n_dec, q_raw, n_head, rope, &ma);
    }
    if (st == LC_OK) {
        aa.rot        = NULL;
        aa.max_rows   = 1;
        aa.max_window = p->n_stream; /* >= pos + 1 - win0 of any decode row (hipa_win0) */
        aa.sel        = pseg;
        aa.sel_n      = pn;
        aa.list       = d_list;
        st = b->attn_sparse(b, kv, seqs, n_seqs, d_dec, n_dec, q, n_head, rope, scale, &aa, out);
    }
    if (st != LC_OK) /* a failed layer re-estimates its masks next time */
        for (int32_t j = n_pre; j < n_qb && states; j++)
            if (states[h->ws.h_qb[j].seq]) ((hipa_state *)states[h->ws.h_qb[j].seq])->valid = false;
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
        lc_rotated_keys_release(h->b, &h->rot);
        sel_pool_release(&h->pool);
        free(h->any_refresh);
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
    if (shape->n_layer < 1) return lc_fail(LC_ERR_INVALID_ARG, "hip: %d layers", shape->n_layer);
    lc_attn_method *m = lc_calloc(1, sizeof *m, "attention method");
    hipa_impl      *h = lc_calloc(1, sizeof *h, "attention method");
    if (!m || !h) {
        free(m), free(h);
        return LC_ERR_NOMEM;
    }
    h->b           = b;
    h->p           = *p;
    h->shape       = *shape;
    h->no_shortcut = diag && diag->sparse_always;
    m->name         = "hip";
    m->impl         = h;
    m->needs_raw_q  = true;
    m->graph_safe   = true;
    m->state_create = hipa_state_create;
    m->state_free   = hipa_state_free;
    m->forward      = hipa_forward;
    m->plan         = hipa_plan;
    m->destroy      = hipa_destroy;
    m->last         = hipa_last;
    m->stats        = hipa_stats;
    const int32_t L = shape->n_layer, G = p->per_group ? shape->n_kv_head : 1, cap = p->k / p->block_k;
    int32_t      *caps = lc_malloc(sizeof(int32_t) * (size_t)L, "HiP plan");
    h->any_refresh     = lc_calloc((size_t)L, sizeof(bool), "HiP plan");
    st                 = caps && h->any_refresh ? LC_OK : LC_ERR_NOMEM;
    for (int32_t l = 0; st == LC_OK && l < L; l++) caps[l] = cap;
    if (st == LC_OK) st = sel_ws_init(&h->ws, b, L, true, G, cap, p->n_sink);
    if (st == LC_OK) st = sel_pool_init(&h->pool, b, L, 1, G, caps);
    free(caps);
    if (st != LC_OK) {
        hipa_destroy(m);
        return st;
    }
    *out = m;
    return LC_OK;
}
