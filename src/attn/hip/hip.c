/*
 * hip.c — the HiP attention method (paper 004_b4c89dd3429c70a1.txt §3, Alg. 1–2; digest
 * spec/infinitehip-and-hip.md §1–2): per layer, each query block of block_q rows (one row per
 * decode sequence) estimates its top-k key blocks by the iterative hierarchical top-k (backend
 * op select_blocks: nodes split in two, the better half of the branches by their middle block's
 * score survives, until single key blocks), and block-sparse attention (attn_segments) reads sink +
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
    sel_sizes         sz;
    bool              dense;
    bool             *any_refresh; /* [n_layer] */
} hipa_impl;

static int32_t hipa_win0(const void *params, int32_t pos0, int32_t n_rows) {
    (void)n_rows;
    const lc_hipattn_params *p = params;
    return sel_win0_stream(p->n_sink, p->n_stream, pos0);
}

/* Per (sequence, layer): its slot of the layer's mask pool and the refresh state (valid[0]:
 * the mask). */
static void hipa_state_free(const lc_attn_method *m, void *state) {
    sel_slot_state_free(&((hipa_impl *)m->impl)->pool, state);
}

static int hipa_state_create(const lc_attn_method *m, int32_t layer, void **out) {
    return sel_slot_state_create(&((hipa_impl *)m->impl)->pool, "hip", "HiP layer state", layer,
                                 out);
}

static int plan_batch(hipa_impl *h, const lc_attn_seq *seqs, int32_t n_seqs) {
    const lc_hipattn_params *p = &h->p;
    const int st = sel_plan_blocks(&h->ws, seqs, n_seqs, p->block_q, p->tail_block, hipa_win0, p);
    if (st != LC_OK) return st;
    sel_plan_sizes(&h->ws, p->n_sink, &h->sz);
    h->dense = h->sz.max_cand <= p->k && !h->no_shortcut; /* every block's candidates fit */
    return LC_OK;
}

/* The layer part: a prefill resets its sequence's mask; each decode block's slot, and whether it
 * re-estimates its mask (every `refresh` steps, Alg. 2), its state advanced. */
static int plan_layer(void *impl, int32_t layer, const lc_attn_seq *seqs, int32_t n_seqs,
                      void *const *states) {
    hipa_impl               *h = impl;
    const lc_hipattn_params *p = &h->p;
    h->any_refresh[layer] = false;
    for (int32_t s = 0; s < n_seqs && states; s++)
        if (states[s]) ((sel_slot_state *)states[s])->fresh = false;
    if (layer < p->dense_layers) return LC_OK;
    for (int32_t s = 0; s < n_seqs; s++)
        if (seqs[s].n_rows > 1 && states && states[s]) ((sel_slot_state *)states[s])->valid[0] = false;
    if (h->dense) return LC_OK;
    int32_t *list = h->ws.h_list + (size_t)layer * (size_t)h->ws.qb_cap;
    int32_t *from = h->ws.h_from + (size_t)layer * (size_t)h->ws.qb_cap;
    for (int32_t j = h->ws.n_pre; j < h->ws.n_qb; j++) {
        sel_slot_state *hs = states ? states[h->ws.h_qb[j].seq] : NULL;
        if (!hs) return lc_fail(LC_ERR_INTERNAL, "hip: a decode sequence has no state");
        const bool refresh = !hs->valid[0] || hs->step % p->refresh == 0;
        if (refresh) {
            if (!hs->valid[0]) hs->step = 0;
            hs->valid[0] = true;
            h->selected++;
            h->any_refresh[layer] = true;
        } else {
            h->reused++;
        }
        hs->step++;
        hs->fresh = refresh;
        list[j - h->ws.n_pre] = hs->slot;
        from[j - h->ws.n_pre] = refresh ? 0 : 1;
    }
    return LC_OK;
}

static int hipa_plan(const lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                     void **const *states, uint64_t *key) {
    hipa_impl *h  = m->impl;
    int        st = plan_batch(h, seqs, n_seqs);
    if (st == LC_OK) st = sel_plan_layers(&h->ws, seqs, n_seqs, states, plan_layer, h);
    if (st != LC_OK) return st;
    const uint64_t v[] = {(uint64_t)h->ws.n_qb, (uint64_t)h->ws.n_pre, (uint64_t)h->sz.dec_cand,
                          (uint64_t)h->dense, (uint64_t)(h->sz.max_end > h->shape.n_ctx_train),
                          h->ws.epoch, h->pool.epoch};
    uint64_t k = sel_key_mix_all(0x41d7ull, v, SEL_N_OF(v));
    for (int32_t l = 0; l < h->shape.n_layer; l++) k = sel_key_mix(k, (uint64_t)h->any_refresh[l]);
    *key = k;
    return LC_OK;
}

static int hipa_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    hipa_impl               *h = m->impl;
    const lc_hipattn_params *p = &h->p;
    h->ws.last_sparse          = false;
    int st = sel_forward_check("hip", b, call->q_raw && b->select_blocks && b->attn_segments,
                               call->layer, h->shape.n_layer, p->dense_layers);
    if (st == SEL_RUN_DENSE) return lc_attn_call_dense(b, call);
    if (st != LC_OK) return st;
    if (!sel_plan_take(&h->ws, call->layer)) { /* a caller that does not plan: this layer's plan */
        st = plan_batch(h, call->seqs, call->n_seqs);
        if (st == LC_OK) st = plan_layer(h, call->layer, call->seqs, call->n_seqs, call->states);
        if (st == LC_OK) st = sel_plan_upload(&h->ws);
        if (st != LC_OK) return st;
    }
    if (h->dense) return lc_attn_call_dense(b, call);
    const int32_t n_qb = h->ws.n_qb, n_pre = h->ws.n_pre, n_dec = n_qb - n_pre;

    const bool extend = sel_rope_extends(p->rope, h->sz.max_end, h->shape.n_ctx_train);
    lc_select_blocks_args ma = {
        .k = p->k, .block_k = p->block_k, .q_stride = p->q_stride, .k_stride = p->k_stride,
        .n_sink = p->n_sink, .n_stream = p->n_stream,
        .scan_rope = extend && p->rope != LC_HIP_ROPE_STREAM ? LC_SCAN_RELATIVE : LC_SCAN_PLAIN,
        .n_groups = h->ws.n_groups, .max_cand = h->sz.max_cand, .out_cap = h->ws.sel_cap};
    lc_attn_segments_args aa = {
        .n_sink = p->n_sink, .attn_rope = extend ? LC_ATTN_ROPE_STREAMING : LC_ATTN_ROPE_PLAIN,
        .n_groups = h->ws.n_groups, .sel_cap = h->ws.sel_cap, .max_sel = p->k,
        .max_window = h->sz.max_window};

    if (n_pre > 0) { /* the masks of the prefill blocks into the workspace, then their attention */
        ma.max_rows = h->sz.pre_rows;
        ma.out      = h->ws.d_sel;
        ma.out_n    = h->ws.d_n;
        st = b->select_blocks(b, call->kv, call->seqs, call->n_seqs, h->ws.d_qb, n_pre, call->q_raw,
                              call->n_head, call->rope, &ma);
        aa.rot = &h->rot;
        if (st == LC_OK)
            st = sel_attend_prefill(&h->ws, b, call->kv, call->seqs, call->n_seqs, call->q,
                                    call->n_head, call->rope, call->scale, h->sz.pre_rows, &aa,
                                    call->out);
        if (st != LC_OK) return st;
    }
    if (n_dec == 0) return LC_OK;
    /* decode blocks: one launch each op, every block with its sequence's slot of the layer's
       masks, re-estimating only where its from row says so (no launch where none does) */
    const lc_qblock *d_dec  = h->ws.d_qb + n_pre;
    const int32_t *d_list = h->ws.d_list + (size_t)call->layer * (size_t)h->ws.qb_cap;
    lc_segment *pseg = sel_pool_seg(&h->pool, call->layer, 0);
    int32_t *pn = sel_pool_n(&h->pool, call->layer, 0);
    if (h->any_refresh[call->layer]) {
        ma.max_rows = 1;
        ma.max_cand = h->sz.dec_cand;
        ma.out      = pseg;
        ma.out_n    = pn;
        ma.list     = d_list;
        ma.from = h->ws.d_from + (size_t)call->layer * (size_t)h->ws.qb_cap;
        st = b->select_blocks(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q_raw,
                              call->n_head, call->rope, &ma);
    }
    if (st == LC_OK) {
        aa.rot        = NULL;
        aa.max_rows   = 1;
        aa.max_window = p->n_stream; /* >= pos + 1 - win0 of any decode row (hipa_win0) */
        aa.sel        = pseg;
        aa.sel_n      = pn;
        aa.list       = d_list;
        st = b->attn_segments(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q,
                              call->n_head, call->rope, call->scale, &aa, call->out);
    }
    if (st != LC_OK) /* a failed layer re-estimates its masks next time */
        for (int32_t j = n_pre; j < n_qb && call->states; j++)
            if (call->states[h->ws.h_qb[j].seq])
                ((sel_slot_state *)call->states[h->ws.h_qb[j].seq])->valid[0] = false;
    return st;
}

static int hipa_last(const lc_attn_method *m, lc_last_selection *out) {
    return sel_ws_last(&((const hipa_impl *)m->impl)->ws, out);
}

static int hipa_stats(const lc_attn_method *m, lc_attn_stats *out) {
    const hipa_impl *h = m->impl;
    out->selected      = h->selected;
    out->reused        = h->reused;
    return LC_OK;
}

static void hipa_destroy(lc_attn_method *m) {
    hipa_impl *h = m ? m->impl : NULL;
    if (h) {
        sel_ws_release(&h->ws);
        lc_rotated_keys_release(h->b, &h->rot);
        sel_pool_release(&h->pool);
        free(h->any_refresh);
    }
    sel_method_free(m);
}

/* The decode attention reads sink, window and the block mask (list 0 of the pool). */
static int hipa_decode_reads(const lc_attn_method *m, int32_t layer, const void *state,
                             lc_decode_reads *r) {
    hipa_impl *h = m->impl;
    (void)layer;
    return sel_decode_reads(&h->pool, 0, state, h->p.n_sink, h->p.n_stream, r);
}

static const lc_attn_method hipa_ops = {
    .name = "hip", .needs_raw_q = true, .graph_safe = true,
    .state_create = hipa_state_create, .state_free = hipa_state_free,
    .plan = hipa_plan, .forward = hipa_forward, .destroy = hipa_destroy,
    .last = hipa_last, .stats = hipa_stats, .decode_reads = hipa_decode_reads};

int lc_attn_hipattn_create(lc_backend *b, const lc_attn_shape *shape, const lc_hipattn_params *p,
                           const lc_attn_diag *diag, lc_attn_method **out) {
    *out   = NULL;
    int st = lc_attn_settings_validate(&lc_attn_desc_hip, p);
    if (st != LC_OK) return st;
    lc_attn_method *m;
    st = sel_method_new(b, b->select_blocks && b->attn_segments, &hipa_ops, sizeof(hipa_impl), &m);
    if (st != LC_OK) return st;
    if (shape->n_layer < 1) {
        sel_method_free(m);
        return lc_fail(LC_ERR_INVALID_ARG, "hip: %d layers", shape->n_layer);
    }
    hipa_impl *h   = m->impl;
    h->b           = b;
    h->p           = *p;
    h->shape       = *shape;
    h->no_shortcut = diag && diag->sparse_always;
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
