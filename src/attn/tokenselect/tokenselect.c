/*
 * tokenselect.c — the TokenSelect attention method (paper 001_823a2d0cdd44ac9c.txt §3; digest
 * spec/tokenselect-and-sparseserve.md A.3–A.6): per layer, every decode query and every prefill
 * chunk of `chunk` rows picks the k cached tokens of highest per-head-softmax soft vote (backend
 * op select_tokens, one selection shared by all heads), and block-sparse attention (attn_segments)
 * reads the n_init first tokens, the selection and the n_local most recent tokens from the paged
 * KV in place.
 *
 * Local window: a block of rows [pos0, pos0 + n) sees [N - n_local, its own position], N = pos0 +
 * n, as TokenSelect's code (a 512-row chunk with n_local 512 sees itself, causally); the
 * candidates are [n_init, N - n_local). (At the start of a sequence the window starts no later
 * than the block's first row, so the sink stays causal.)
 * Selection cache (Alg. 1): each (sequence, layer) keeps the last computed selection and the
 * fingerprint it came from in its slot of the layer's pool; a decode step whose fingerprint's
 * cosine with it is >= theta reuses it. The decision is the op's, per block on the backend (no
 * host round trip), so all decode sequences of a step share one selection launch and one
 * attention launch per layer, each block naming its slot (backend.h "Batched decode"); a
 * prefill resets its sequence's cache.
 * RoPE: the fingerprint scores unrotated keys with the query rotated at n_local (+ its row), as
 * the paper's code; the attention re-indexes positions StreamingLLM-style (the selected tokens
 * just before the window: the same relative distances as TokenSelect's compact positions) once
 * a sequence passes the model's trained context (rope=auto), always (extend), or never (plain).
 * Dense: while every block's candidates fit in k the method calls dense attention (the same
 * result), and in layers [0, dense_layers).
 */
#include "attn/select/query_blocks.h"
#include "attn/tokenselect/tokenselect.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct ts_impl {
    lc_backend           *b;
    lc_tokenselect_params p;
    lc_attn_shape         shape;
    sel_ws                ws;          /* blocks, plan image (decode slots), prefill selections */
    sel_pool              pool;        /* decode selections + fingerprints: a slot per (seq, layer) */
    bool                  no_shortcut; /* lc_context_params.sparse_always (tests) */
    int64_t              *d_counts;    /* [n_layer][2] hits, misses (with the cache) */
    int64_t               uncached;    /* decode selections made without the cache */
    /* the plan of the current forward (ts_plan): launch sizes and the dense shortcut */
    sel_sizes             sz;
    int32_t               max_cand;    /* sz.max_cand, rounded up in a decode-only forward */
    bool                  dense;
    lc_rotated_keys       rot; /* prefill keys rotated once per layer (plain RoPE) */
} ts_impl;

static int32_t ts_win0(const void *params, int32_t pos0, int32_t n_rows) {
    const lc_tokenselect_params *p = params;
    const int32_t                N = pos0 + n_rows;
    /* the sink never reaches past the block's first row (causal for every row) */
    const int32_t                a = p->n_init < pos0 + 1 ? p->n_init : pos0 + 1;
    const int32_t                w = N - p->n_local;
    return a > w ? a : w;
}

/* Per (sequence, layer): its slot of the layer's pool (selection, fingerprint). */
static void ts_state_free(const lc_attn_method *m, void *state) {
    sel_slot_state_free(&((ts_impl *)m->impl)->pool, state);
}

static int ts_state_create(const lc_attn_method *m, int32_t layer, void **out) {
    return sel_slot_state_create(&((ts_impl *)m->impl)->pool, "tokenselect",
                                 "TokenSelect layer state", layer, out);
}

/* The plan of a forward: the blocks, the launch sizes, the dense shortcut. */
static int plan_batch(ts_impl *t, const lc_attn_seq *seqs, int32_t n_seqs) {
    const lc_tokenselect_params *p = &t->p;
    const int st = sel_plan_blocks(&t->ws, seqs, n_seqs, p->chunk, p->tail_block, ts_win0, p);
    if (st != LC_OK) return st;
    sel_plan_sizes(&t->ws, p->n_init, &t->sz);
    /* a decode-only forward is sized by a bucket, so that its shape holds while sequences grow */
    t->max_cand = t->ws.n_pre == 0 && t->ws.n_qb > 0 ? t->sz.dec_cand : t->sz.max_cand;
    t->dense    = t->sz.max_cand <= p->k && !t->no_shortcut; /* every block's candidates fit */
    return LC_OK;
}

/* Decode selections made without the cache (theta > 1) in the layers of a forward. */
static void count_uncached(ts_impl *t, int32_t n_layers) {
    if (t->p.theta > 1.0f && !t->dense)
        t->uncached += (int64_t)(t->ws.n_qb - t->ws.n_pre) * n_layers;
}

/* The layer part: each decode block's slot of the layer's pool. */
static int plan_layer(void *impl, int32_t layer, const lc_attn_seq *seqs, int32_t n_seqs,
                      void *const *states) {
    (void)seqs, (void)n_seqs;
    ts_impl *t = impl;
    if (layer < t->p.dense_layers || t->dense) return LC_OK;
    int32_t *list = t->ws.h_list + (size_t)layer * (size_t)t->ws.qb_cap;
    for (int32_t j = t->ws.n_pre; j < t->ws.n_qb; j++) {
        const sel_slot_state *ss = states ? states[t->ws.h_qb[j].seq] : NULL;
        if (!ss) return lc_fail(LC_ERR_INTERNAL, "tokenselect: a decode sequence has no state");
        list[j - t->ws.n_pre] = ss->slot;
    }
    return LC_OK;
}

static int ts_plan(const lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                   void **const *states, uint64_t *key) {
    ts_impl *t  = m->impl;
    int      st = plan_batch(t, seqs, n_seqs);
    if (st == LC_OK) st = sel_plan_layers(&t->ws, seqs, n_seqs, states, plan_layer, t);
    if (st != LC_OK) return st;
    const int32_t sparse_layers = t->shape.n_layer - t->p.dense_layers;
    count_uncached(t, sparse_layers > 0 ? sparse_layers : 0);
    const uint64_t v[] = {(uint64_t)t->ws.n_qb, (uint64_t)t->ws.n_pre, (uint64_t)t->max_cand,
                          (uint64_t)t->dense, (uint64_t)(t->sz.max_end > t->shape.n_ctx_train),
                          t->ws.epoch, t->pool.epoch};
    *key = sel_key_mix_all(0x75e1ull, v, SEL_N_OF(v));
    return LC_OK;
}

static int ts_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    ts_impl                     *t = m->impl;
    const lc_tokenselect_params *p = &t->p;
    t->ws.last_sparse              = false;
    int st =
        sel_forward_check("tokenselect", b, call->q_raw && b->select_tokens && b->attn_segments,
                          call->layer, t->shape.n_layer, p->dense_layers);
    if (st == SEL_RUN_DENSE) return lc_attn_call_dense(b, call);
    if (st != LC_OK) return st;
    if (!sel_plan_take(&t->ws, call->layer)) { /* a caller that does not plan */
        st = plan_batch(t, call->seqs, call->n_seqs);
        if (st == LC_OK) st = plan_layer(t, call->layer, call->seqs, call->n_seqs, call->states);
        if (st == LC_OK) st = sel_plan_upload(&t->ws);
        if (st != LC_OK) return st;
        count_uncached(t, 1);
    }
    const int32_t n_qb = t->ws.n_qb, n_pre = t->ws.n_pre;
    /* a prefill resets the selection caches of its sequences (prefill forwards are never
       replayed from a graph, so this device write stays in the forward) */
    for (int32_t s = 0; s < call->n_seqs && st == LC_OK; s++)
        if (call->seqs[s].n_rows > 1 && call->states && call->states[s]) {
            const int32_t zero = 0;
            st = b->upload(b,
                           t->pool.q_valid[call->layer] + ((sel_slot_state *)call->states[s])->slot,
                           &zero, sizeof zero);
        }
    if (st != LC_OK) return st;
    if (t->dense) return lc_attn_call_dense(b, call);

    const bool extend = sel_rope_extends(p->rope, t->sz.max_end, t->shape.n_ctx_train);
    lc_select_tokens_args sa = {
        .n_init = p->n_init, .k = p->k, .fp_pos = p->n_local, .gqa_mod = p->gqa_mod,
        .max_cand = t->max_cand, .out_cap = p->k, .theta = p->theta};
    lc_attn_segments_args aa = {
        .n_sink = p->n_init, .attn_rope = extend ? LC_ATTN_ROPE_STREAMING : LC_ATTN_ROPE_PLAIN,
        .n_groups = 1, .sel_cap = p->k, .max_sel = p->k, .max_window = p->n_local};

    if (n_pre > 0) { /* the prefill chunks' selections into the workspace, then their attention */
        sa.max_rows = t->sz.pre_rows;
        sa.out      = t->ws.d_sel;
        sa.out_n    = t->ws.d_n;
        st = b->select_tokens(b, call->kv, call->seqs, call->n_seqs, t->ws.d_qb, n_pre, call->q_raw,
                              call->n_head, call->rope, &sa);
        aa.rot = &t->rot;
        if (st == LC_OK)
            st = sel_attend_prefill(&t->ws, b, call->kv, call->seqs, call->n_seqs, call->q,
                                    call->n_head, call->rope, call->scale, t->sz.pre_rows, &aa,
                                    call->out);
        if (st != LC_OK) return st;
    }
    const int32_t n_dec = n_qb - n_pre;
    if (n_dec == 0) return LC_OK;
    /* decode blocks: one selection launch and one attention launch for all of them, each block
       with its sequence's slot of the layer's pool (whose cache hit or miss the op decides per
       block on the device, so these launches replay from a graph as they are) */
    const lc_qblock *d_dec  = t->ws.d_qb + n_pre;
    const int32_t *d_list = t->ws.d_list + (size_t)call->layer * (size_t)t->ws.qb_cap;
    lc_segment *pseg = sel_pool_seg(&t->pool, call->layer, 0);
    int32_t *pn = sel_pool_n(&t->pool, call->layer, 0);
    const bool       cache  = p->theta <= 1.0f;
    sa.max_rows    = 1;
    sa.out         = pseg;
    sa.out_n       = pn;
    sa.list        = d_list;
    sa.cache_q = cache ? t->pool.q[call->layer] : NULL;
    sa.cache_valid = cache ? t->pool.q_valid[call->layer] : NULL;
    sa.counts = t->d_counts + 2 * (size_t)call->layer;
    st = b->select_tokens(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q_raw,
                          call->n_head, call->rope, &sa);
    if (st != LC_OK) return st;
    aa.rot      = NULL;
    aa.max_rows = 1;
    aa.sel      = pseg;
    aa.sel_n    = pn;
    aa.list     = d_list;
    return b->attn_segments(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q,
                            call->n_head, call->rope, call->scale, &aa, call->out);
}

static int ts_last(const lc_attn_method *m, lc_last_selection *out) {
    return sel_ws_last(&((const ts_impl *)m->impl)->ws, out);
}

static int ts_stats(const lc_attn_method *m, lc_attn_stats *out) {
    const ts_impl *t = m->impl;
    const int32_t  L = t->shape.n_layer;
    int64_t       *c = lc_malloc(sizeof(int64_t) * 2 * (size_t)L, "TokenSelect counters");
    if (!c) return LC_ERR_NOMEM;
    const int st = t->b->download(t->b, c, t->d_counts, sizeof(int64_t) * 2 * (size_t)L);
    memset(out, 0, sizeof *out);
    for (int32_t l = 0; st == LC_OK && l < L; l++) out->reused += c[2 * l], out->selected += c[2 * l + 1];
    out->selected += t->uncached;
    free(c);
    return st;
}

static void ts_destroy(lc_attn_method *m) {
    ts_impl *t = m ? m->impl : NULL;
    if (t) {
        sel_ws_release(&t->ws);
        sel_pool_release(&t->pool);
        lc_rotated_keys_release(t->b, &t->rot);
        if (t->d_counts) t->b->dealloc(t->b, t->d_counts);
    }
    sel_method_free(m);
}

static const lc_attn_method ts_ops = {
    .name = "tokenselect", .needs_raw_q = true, .graph_safe = true,
    .state_create = ts_state_create, .state_free = ts_state_free,
    .plan = ts_plan, .forward = ts_forward, .destroy = ts_destroy, .last = ts_last,
    .stats = ts_stats};

int lc_attn_tokenselect_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_tokenselect_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out) {
    *out   = NULL;
    int st = lc_attn_settings_validate(&lc_attn_desc_tokenselect, p);
    if (st != LC_OK) return st;
    lc_attn_method *m;
    st = sel_method_new(b, b->select_tokens && b->attn_segments, &ts_ops, sizeof(ts_impl), &m);
    if (st != LC_OK) return st;
    ts_impl *t     = m->impl;
    t->b           = b;
    t->p           = *p;
    t->shape       = *shape;
    t->no_shortcut = diag && diag->sparse_always;
    st             = sel_ws_init(&t->ws, b, shape->n_layer, true, 1, p->k, p->n_init);
    int32_t *caps  = st == LC_OK ? lc_malloc(sizeof(int32_t) * (size_t)(shape->n_layer > 0 ? shape->n_layer : 1),
                                             "TokenSelect plan") : NULL;
    if (st == LC_OK && !caps) st = LC_ERR_NOMEM;
    for (int32_t l = 0; st == LC_OK && l < shape->n_layer; l++) caps[l] = p->k;
    if (st == LC_OK) st = sel_pool_init(&t->pool, b, shape->n_layer, 1, 1, caps);
    if (st == LC_OK) st = sel_pool_keep_queries(&t->pool, shape->n_head * shape->head_dim);
    free(caps);
    const size_t cb    = sizeof(int64_t) * 2 * (size_t)(shape->n_layer > 0 ? shape->n_layer : 1);
    t->d_counts        = b->alloc(b, cb, "TokenSelect counters");
    int64_t *zeros     = lc_calloc(1, cb, "TokenSelect counters");
    if (st == LC_OK) st = t->d_counts && zeros ? b->upload(b, t->d_counts, zeros, cb) : LC_ERR_NOMEM;
    free(zeros);
    if (st != LC_OK) {
        ts_destroy(m);
        return st;
    }
    *out = m;
    return LC_OK;
}
