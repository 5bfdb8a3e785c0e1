/*
 * streaming.c — StreamingLLM (Xiao et al. 2023, "Efficient Streaming Language Models with
 * Attention Sinks"; the baseline of the HiP, InfiniteHiP and TokenSelect papers: InfiniteHiP's
 * SLLM rows, digest spec/infinitehip-and-hip.md §4.2 and §6): every query reads the first `sink`
 * tokens and the `window` most recent ones, and nothing else. Past the model's trained context
 * the sink is re-indexed to sit just before the window (rolling positions: the distances a
 * query sees never exceed sink + window), which is the attention's StreamingLLM re-indexing
 * (backend op attn_segments with no selected segments).
 *
 * Prefill rows go in blocks of `block` rows that share one key list: a block [pos0, pos0 + n)
 * reads the sink and [pos0 + n - window, its own position] (causal), so its last row reads
 * exactly `window` recent keys and its first row at least window - block + 1. Decode rows read
 * exactly the sink and `window` keys. While a block's keys all fit the method calls dense
 * attention (the same keys, the same result).
 *
 * The method is also what issue 22 item 2 asks of the method seam: its settings table,
 * descriptor and forward are this file; the registry (attn/registry.c) names it once.
 */
#include "attn/select/query_blocks.h"
#include "util/util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct streaming_params {
    int32_t n_sink;   /* first tokens always read (4, the StreamingLLM paper's) */
    int32_t n_window; /* most recent tokens read, >= block */
    int32_t block;    /* prefill rows sharing one key list */
    int32_t rope;     /* lc_hip_rope_mode: auto (re-index past the trained window), extend, plain */
} streaming_params;

#define MAX_TOKENS (1 << 30)
#define OFF(f) offsetof(streaming_params, f)


static const lc_setting keys[] = {
    {"sink", LC_SETTING_INT, OFF(n_sink), 0, 0, 0, MAX_TOKENS, NULL,
     "first tokens always read (attention sinks)", NULL},
    {"window", LC_SETTING_INT, OFF(n_window), 0, 0, 1, MAX_TOKENS, NULL,
     "most recent tokens read, at least block", NULL},
    {"block", LC_SETTING_INT, OFF(block), 0, 0, 1, 512, NULL,
     "prefill rows sharing one key list", NULL},
    {"rope", LC_SETTING_ENUM, OFF(rope), 0, 0, 0, 0, lc_rope_names,
     "positions: auto re-indexes the sink before the window past the trained window, extend "
     "always, plain never", NULL},
};

/* 4 sinks as the StreamingLLM paper; a 4096-token window (InfiniteHiP's 3k reads ~3.3K keys,
 * TokenSelect's default ~2.7K): not tuned on real text yet */
static const streaming_params base = {
    .n_sink   = 4,
    .n_window = 4096,
    .block    = 64,
    .rope     = LC_HIP_ROPE_AUTO,
};

static const lc_settings_preset presets[] = {
    {"default", "", "4 sinks, a 4096-token window"},
};

static int validate(const void *settings) {
    const streaming_params *p = settings;
    if (p->n_window < p->block)
        return lc_fail(LC_ERR_INVALID_ARG, "streaming: window=%d; allowed block (%d)..%d: a "
                       "prefill block's own rows are part of its window", p->n_window, p->block,
                       MAX_TOKENS);
    return LC_OK;
}

typedef struct streaming_impl {
    streaming_params p;
    lc_attn_shape    shape;
    sel_ws           ws; /* the query blocks; its selections stay empty */
    bool             no_shortcut; /* lc_context_params.sparse_always (tests) */
    int32_t          zeroed_cap;  /* ws.qb_cap when its selection counts were zeroed */
    /* the plan of the current forward: launch sizes and the dense shortcut */
    sel_sizes        sz;
    int32_t          max_window;  /* sz.max_window; a decode step's bound in a decode-only one */
    bool             dense;
    lc_rotated_keys  rot; /* prefill keys rotated once per layer (plain RoPE) */
} streaming_impl;

static int32_t streaming_win0(const void *params, int32_t pos0, int32_t n_rows) {
    const streaming_params *p = params;
    const int32_t           a = p->n_sink < pos0 + 1 ? p->n_sink : pos0 + 1;
    const int32_t           w = pos0 + n_rows - p->n_window;
    return a > w ? a : w;
}

/* The plan of a forward: the blocks, the launch sizes, the dense shortcut. */
static int plan_batch(streaming_impl *t, const lc_attn_seq *seqs, int32_t n_seqs) {
    const streaming_params *p = &t->p;
    int st = sel_plan_blocks(&t->ws, seqs, n_seqs, p->block, 0, streaming_win0, p);
    if (st != LC_OK) return st;
    sel_plan_sizes(&t->ws, p->n_sink, &t->sz);
    /* a decode step's bound (its shape holds) */
    t->max_window = t->ws.n_pre == 0 ? p->n_window : t->sz.max_window;
    /* every block reads every earlier key: no key between the sink and its window */
    t->dense = t->sz.max_cand == 0 && !t->no_shortcut;
    if (t->dense) return LC_OK;
    /* no selected segments: every block's count is zero. Nothing writes the counts, so they
     * are zeroed once each time the workspace grows (its capacity only rises), not per call */
    if (t->zeroed_cap != t->ws.qb_cap) {
        int32_t *z = lc_calloc((size_t)t->ws.qb_cap, sizeof(int32_t), "streaming block counts");
        st = z ? t->ws.b->upload(t->ws.b, t->ws.d_n, z, sizeof(int32_t) * (size_t)t->ws.qb_cap)
               : LC_ERR_NOMEM;
        free(z);
        if (st == LC_OK) t->zeroed_cap = t->ws.qb_cap;
    }
    if (st == LC_OK) st = sel_plan_upload(&t->ws);
    return st;
}

static int streaming_plan(const lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                          void **const *states, uint64_t *key) {
    (void)states;
    streaming_impl *t  = m->impl;
    const int       st = plan_batch(t, seqs, n_seqs);
    if (st != LC_OK) return st;
    sel_plan_mark(&t->ws);
    const uint64_t v[] = {(uint64_t)t->ws.n_qb, (uint64_t)t->sz.max_rows, (uint64_t)t->max_window,
                          (uint64_t)t->dense, (uint64_t)(t->sz.max_end > t->shape.n_ctx_train),
                          t->ws.epoch};
    *key = sel_key_mix_all(0x57e4ull, v, SEL_N_OF(v));
    return LC_OK;
}

static int streaming_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    streaming_impl         *t = m->impl;
    const streaming_params *p = &t->p;
    t->ws.last_sparse         = false;
    int st = sel_check_layer("streaming", call->layer, t->shape.n_layer);
    if (st != LC_OK) return st;
    if (!sel_plan_take(&t->ws, call->layer) &&
        (st = plan_batch(t, call->seqs, call->n_seqs)) != LC_OK)
        return st;
    if (t->dense) return lc_attn_call_dense(b, call);
    const bool extend = sel_rope_extends(p->rope, t->sz.max_end, t->shape.n_ctx_train);
    lc_attn_segments_args aa;
    memset(&aa, 0, sizeof aa);
    aa.n_sink     = p->n_sink;
    aa.attn_rope  = extend ? LC_ATTN_ROPE_STREAMING : LC_ATTN_ROPE_PLAIN;
    aa.n_groups   = 1;
    aa.sel        = t->ws.d_sel;
    aa.sel_n      = t->ws.d_n;
    aa.sel_cap    = t->ws.sel_cap;
    aa.max_sel    = 0;
    aa.max_rows   = t->sz.max_rows;
    aa.max_window = t->max_window;
    aa.rot        = t->ws.n_pre > 0 ? &t->rot : NULL;
    st = b->attn_segments(b, call->kv, call->seqs, call->n_seqs, t->ws.d_qb, t->ws.n_qb, call->q,
                          call->n_head, call->rope, call->scale, &aa, call->out);
    if (st == LC_OK) {
        t->ws.last_sparse = t->ws.n_pre > 0;
        t->ws.last_n_pre  = t->ws.n_pre;
    }
    return st;
}

static int streaming_last(const lc_attn_method *m, lc_last_selection *out) {
    return sel_ws_last(&((const streaming_impl *)m->impl)->ws, out);
}

static void streaming_destroy(lc_attn_method *m) {
    streaming_impl *t = m ? m->impl : NULL;
    if (t) {
        if (t->ws.b) lc_rotated_keys_release(t->ws.b, &t->rot);
        sel_ws_release(&t->ws);
    }
    sel_method_free(m);
}

/* Every decode step reads the sink and the window, nothing else: always fresh, no lists. */
static int streaming_decode_reads(const lc_attn_method *m, int32_t layer, const void *state,
                                  lc_decode_reads *r) {
    static const int32_t no_segments = 0;
    const streaming_impl *t          = m->impl;
    (void)layer, (void)state;
    memset(r, 0, sizeof *r);
    r->fresh    = true;
    r->n_groups = 1;
    r->sel_n    = &no_segments;
    r->n_sink   = t->p.n_sink;
    r->n_stream = t->p.n_window;
    return LC_OK;
}

static const lc_attn_method streaming_ops = {
    .name = "streaming", .needs_raw_q = false, .graph_safe = true, .kv_fp8 = true, /* attn_segments */
    .plan = streaming_plan,
    .forward = streaming_forward, .destroy = streaming_destroy, .last = streaming_last,
    .decode_reads = streaming_decode_reads};

static int create(lc_backend *b, const lc_attn_shape *shape, const void *settings,
                  const lc_attn_diag *diag, lc_attn_method **out) {
    lc_attn_method *m;
    int st = sel_method_new(b, b->attn_segments != NULL, &streaming_ops, sizeof(streaming_impl), &m);
    if (st != LC_OK) return st;
    streaming_impl *t = m->impl;
    t->p              = *(const streaming_params *)settings;
    t->shape          = *shape;
    t->no_shortcut    = diag && diag->sparse_always;
    /* room for one segment per block; none is ever written */
    st = sel_ws_init(&t->ws, b, shape->n_layer, false, 1, 1, t->p.n_sink);
    if (st != LC_OK) {
        streaming_destroy(m);
        return st;
    }
    *out = m;
    return LC_OK;
}

const lc_attn_desc lc_attn_desc_streaming = {
    .name     = "streaming",
    .summary  = "StreamingLLM: attention sinks + a window of recent tokens, positions rolled past "
                "the trained window (the papers' baseline)",
    .settings = LC_SETTINGS_TABLE("streaming", streaming_params, base, keys, presets),
    .validate = validate,
    .create   = create,
};
