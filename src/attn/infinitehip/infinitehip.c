/*
 * infinitehip.c — the InfiniteHiP attention method (paper 000_ced830aa0d9eb0ea.txt §3;
 * digest spec/infinitehip-and-hip.md §3–4): per layer, the batch's query rows are cut into
 * blocks of b_q; the pruning stages (backend op prune_chunks) narrow each block's candidate keys
 * [n_sink, win0) from chunks of l_c(1) down to the final selection; block-sparse attention
 * (backend op attn_segments) reads sink + selection + streaming window from the paged KV.
 *
 * Prefill: every stage runs for every block (Alg. 1). Decode: each sequence keeps the output
 * of every stage per layer and recomputes stage i every refresh[i] steps, and every later
 * stage with it (Alg. 4, stage-wise mask caching). The caches live in pools (a slot per
 * sequence and layer), so every decode sequence of a step goes through one launch per stage
 * and one sparse-attention launch per layer, each block naming its slot and its first
 * recomputed stage as device data (backend.h "Batched decode"). The host's decisions are made
 * once per model forward for every layer by hip_plan, before a decode step is captured or
 * replayed as a CUDA graph.
 *
 * RoPE (§4): past the model's trained context (or always, with rope=extend) pruning scores
 * with chunk-indexed positions in the first `first_layers` layers and relative positions in
 * the others, and the attention re-indexes positions StreamingLLM-style (or, with attn-span,
 * keeps the gaps between the selected keys compressed to fit a span); within the trained
 * context (or always, with rope=plain) everything uses the true positions. Keys are stored
 * before RoPE (DESIGN.md), so every policy is a choice of rotation inside the kernels.
 *
 * Exactness: when every block's candidates fit in its final budget the selection would keep
 * all of them, and the method calls dense attention (the same result; cheaper).
 */
#include "attn/infinitehip/infinitehip.h"
#include "attn/select/query_blocks.h"
#include "util/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one layer's forward does with the planned batch. */
typedef struct hip_layer_plan {
    bool    dense;    /* every block's candidates fit its budget: dense attention */
    int32_t min_from; /* the first stage any decode block recomputes (n_stages: none) */
} hip_layer_plan;

typedef struct hip_impl {
    lc_backend *b;
    lc_infinitehip_params p;
    lc_attn_shape shape;
    int32_t n_groups;                    /* selections per block: 1, or n_kv_head (heads=group) */
    int32_t keep_max[LC_HIP_MAX_STAGES]; /* most chunks any layer keeps */
    bool no_shortcut;                    /* lc_context_params.sparse_always: never fall back to
                                            dense (tests and diagnosis of the sparse path) */
    int64_t trace_begin, trace_end;      /* the traced span (lc_context_params.trace_*); empty:
                                            no trace */
    /* the blocks and plan image (decode blocks' cache slots and first recomputed stage per
       layer), the prefill blocks' stage outputs */
    sel_ws ws;
    lc_segment *d_seg[LC_HIP_MAX_STAGES]; /* [qb_cap][n_groups][keep_max[i]] */
    int32_t *d_n[LC_HIP_MAX_STAGES];      /* [qb_cap][n_groups] */
    int32_t seg_cap;                      /* blocks d_seg has room for */
    /* every stage's output per (decode sequence, layer): pools of slots */
    sel_pool pool;
    /* the prefill sequences' keys rotated once per layer for its stages and attention */
    lc_rotated_keys rot;
    /* the plan: the batch's launch sizes and each layer's decisions */
    int32_t pre_rows, pre_cand, dec_cand, max_window;
    int64_t max_end;
    hip_layer_plan *lp; /* [n_layer] */
    /* the last forward, for lc_attn_infinitehip_last (evaluation) */
    bool last_sparse;
    int32_t last_n_pre, last_layer;
    /* a forward without prefill blocks: its last decode block and that block's cache slot */
    int32_t last_dec_slot;
    lc_qblock last_dec_qb;
} hip_impl;

/* chunks stage i keeps in layer l */
static int32_t keep_of(const hip_impl *h, int32_t layer, int32_t i) {
    const lc_infinitehip_params *p = &h->p;
    if (i == p->n_stages - 1 && layer < p->first_layers) return p->first_k / p->chunk[i];
    return p->k[i] / p->chunk[i];
}

/* where a block's window starts (sel_win0_fn): n_stream positions back from its first row,
 * not inside the sink */
static int32_t win0_cut(const void *params, int32_t pos0, int32_t n_rows) {
    const lc_infinitehip_params *p = params;
    (void)n_rows;
    return sel_win0_stream(p->n_sink, p->n_stream, pos0);
}

static void seg_release(hip_impl *h) {
    lc_backend *b = h->b;
    for (int i = 0; i < LC_HIP_MAX_STAGES; i++) {
        if (h->d_seg[i]) b->dealloc(b, h->d_seg[i]);
        if (h->d_n[i]) b->dealloc(b, h->d_n[i]);
        h->d_seg[i] = NULL, h->d_n[i] = NULL;
    }
    h->seg_cap = 0;
}

/* room for n_pre prefill blocks' stage outputs */
static int seg_reserve(hip_impl *h, int32_t n_pre) {
    if (n_pre <= h->seg_cap) return LC_OK;
    seg_release(h);
    lc_backend *b = h->b;
    const int32_t cap = n_pre < 64 ? 64 : n_pre + n_pre / 2;
    for (int32_t i = 0; i < h->p.n_stages; i++) {
        const size_t lists = (size_t)cap * (size_t)h->n_groups;
        h->d_seg[i] = b->alloc(b, sizeof(lc_segment) * lists * (size_t)h->keep_max[i],
                               "InfiniteHiP stage output");
        h->d_n[i] = b->alloc(b, sizeof(int32_t) * lists, "InfiniteHiP stage output");
        if (!h->d_seg[i] || !h->d_n[i]) return seg_release(h), LC_ERR_NOMEM;
    }
    h->seg_cap = cap;
    return LC_OK;
}

/* Per (sequence, layer): its slot of the layer's caches, and their refresh state (valid[i]:
 * stage i's output; step: decode steps since the state was last fully valid). */
static void hip_state_free(const lc_attn_method *m, void *state) {
    sel_slot_state_free(&((hip_impl *)m->impl)->pool, state);
}

static int hip_state_create(const lc_attn_method *m, int32_t layer, void **out) {
    return sel_slot_state_create(&((hip_impl *)m->impl)->pool, "infinitehip",
                                 "InfiniteHiP layer state", layer, out);
}

static int32_t ceil_div(int64_t a, int64_t b) {
    return (int32_t)((a + b - 1) / b);
}

/* The traced span [a, b) of lc_context_params.trace_begin / trace_end (diagnosis; `eval
 * --trace` sets it to a needle's tokens): after the stages of a forward, trace_block prints to
 * stderr per layer how many of the positions [a, b) each stage's output keeps for one query
 * block — the forward's last prefill block, or a decode block whose stages were recomputed.
 * Off (no cost) when the span is empty. */
static bool trace_range(const hip_impl *h, int64_t *a, int64_t *b) {
    if (h->trace_begin >= h->trace_end) return false;
    *a = h->trace_begin, *b = h->trace_end;
    return true;
}

/* Positions of [a, b) covered by the n segments of one stage output. */
static int64_t trace_cover(const lc_segment *seg, int32_t n, int64_t a, int64_t b) {
    int64_t c = 0;
    for (int32_t j = 0; j < n; j++) {
        const int64_t s = seg[j].start > a ? seg[j].start : a;
        const int64_t e = seg[j].start + seg[j].len < b ? seg[j].start + seg[j].len : b;
        if (e > s) c += e - s;
    }
    return c;
}

/* Mark in mask[0 .. b-a) the positions of [a, b) the n segments cover. */
static void trace_mask(const lc_segment *seg, int32_t n, int64_t a, int64_t b, char *mask) {
    for (int32_t j = 0; j < n; j++) {
        const int64_t s = seg[j].start > a ? seg[j].start : a;
        const int64_t e = seg[j].start + seg[j].len < b ? seg[j].start + seg[j].len : b;
        for (int64_t x = s; x < e; x++)
            mask[x - a] = '#';
    }
}

/* Print the coverage line of one block: stage i's output lists (group g at seg[i] + g * cap_i
 * segments, counts at n[i] + g) on the device. For a span of at most 64 tokens the line ends
 * with which of its tokens the last stage keeps ('#' kept, '.' not; the group that keeps most),
 * so a lost answer can be told from a lost sentence. */
static void trace_block(const hip_impl *h, int32_t layer, const char *what, int32_t pos,
                        lc_segment *const *seg, int32_t *const *n, int32_t first) {
    int64_t a, b;
    if (!trace_range(h, &a, &b) || pos < b) return;
    lc_backend *be = h->b;
    int32_t cap_max = 0;
    for (int32_t i = first; i < h->p.n_stages; i++)
        if (keep_of(h, layer, i) > cap_max) cap_max = keep_of(h, layer, i);
    lc_segment *tmp = lc_malloc(sizeof(lc_segment) * (size_t)(cap_max > 0 ? cap_max : 1), "trace");
    if (!tmp) return;
    char line[512], mask[65] = "";
    const bool masked = b - a <= 64;
    int at = snprintf(line, sizeof line,
                      "hip-trace layer %d %s pos %d needle [%" PRId64 ", %" PRId64 "):", layer,
                      what, pos, a, b);
    for (int32_t i = first; i < h->p.n_stages && at < (int)sizeof line; i++) {
        const int32_t cap = keep_of(h, layer, i);
        int64_t best = 0;
        for (int32_t g = 0; g < h->n_groups; g++) { /* the group that keeps most of it */
            int32_t cnt = 0;
            if (be->download(be, &cnt, n[i] + g, sizeof cnt) == LC_OK && cnt >= 0 && cnt <= cap &&
                be->download(be, tmp, seg[i] + (size_t)g * (size_t)cap,
                             sizeof(lc_segment) * (size_t)cnt) == LC_OK) {
                const int64_t c = trace_cover(tmp, cnt, a, b);
                if (c > best || (g == 0 && masked && i == h->p.n_stages - 1)) {
                    if (masked && i == h->p.n_stages - 1) {
                        memset(mask, '.', (size_t)(b - a));
                        mask[b - a] = '\0';
                        trace_mask(tmp, cnt, a, b, mask);
                    }
                }
                if (c > best) best = c;
            }
        }
        at += snprintf(line + at, sizeof line - (size_t)at, " s%d %" PRId64 "/%" PRId64, i + 1,
                       best, b - a);
    }
    free(tmp);
    if (masked && mask[0] && at < (int)sizeof line)
        snprintf(line + at, sizeof line - (size_t)at, " [%s]", mask);
    fprintf(stderr, "%s\n", line);
}

/* candidate keys of a block: [n_sink, win0) */
static int32_t cand_of(const lc_infinitehip_params *p, const lc_qblock *qb) {
    return qb->win0 > p->n_sink ? qb->win0 - p->n_sink : 0;
}

/* The per-stage part of a stage call's arguments (the caller sets in / out): stage i of layer,
 * blocks of at most max_rows rows with at most max_cand candidates each (first stage). */
static void stage_setup(const hip_impl *h, int32_t layer, int32_t i, int32_t max_rows,
                        int32_t max_cand, lc_prune_chunks_args *sa) {
    const lc_infinitehip_params *p = &h->p;
    sa->chunk = p->chunk[i];
    sa->n_keep = keep_of(h, layer, i);
    sa->q_stride = p->q_stride[i];
    sa->kv_descent = p->kv_descent[i];
    sa->max_rows = max_rows;
    sa->in_cap = i ? keep_of(h, layer, i - 1) : 0;
    /* stagger: odd layers start the first stage's grid half a chunk later (one more chunk) */
    sa->first_offset = !i && p->stagger && (layer & 1) ? p->chunk[0] / 2 : 0;
    /* overlap: the first stage's chunks start every half chunk */
    sa->first_stride = !i && p->overlap ? p->chunk[0] / 2 : 0;
    sa->max_chunks = i ? keep_of(h, layer, i - 1) * (p->chunk[i - 1] / p->chunk[i])
                       : ceil_div(max_cand, sa->first_stride ? sa->first_stride : p->chunk[0]) +
                             (sa->first_offset > 0);
    if (sa->max_chunks < 1) sa->max_chunks = 1;
}

/* The batch part of a plan: the blocks and the launch sizes. */
static int plan_batch(hip_impl *h, const lc_attn_seq *seqs, int32_t n_seqs) {
    const lc_infinitehip_params *p = &h->p;
    int st = sel_plan_blocks(&h->ws, seqs, n_seqs, p->block_q, p->tail_block, win0_cut, p);
    if (st == LC_OK) st = seg_reserve(h, h->ws.n_pre);
    if (st != LC_OK) return st;
    /* (decode launches are sized by buckets, so that a step's shape holds while sequences grow) */
    sel_sizes z;
    sel_plan_sizes(&h->ws, p->n_sink, &z);
    h->pre_rows = z.pre_rows, h->pre_cand = z.pre_cand, h->dec_cand = z.dec_cand;
    h->max_window = z.max_window, h->max_end = z.max_end;
    return LC_OK;
}

/* The layer part of a plan (states: the batch's sequences' states of this layer): a prefill
 * resets its sequence's caches; the dense shortcut; for each decode block its cache slot and the
 * first stage it recomputes (stage i every refresh[i] steps, and every later stage with it:
 * Alg. 4), the sequence's state advanced as if the forward ran (it runs from a graph). */
static int plan_layer(void *impl, int32_t layer, const lc_attn_seq *seqs, int32_t n_seqs,
                      void *const *states) {
    hip_impl *h = impl;
    const lc_infinitehip_params *p = &h->p;
    const int32_t N = p->n_stages;
    hip_layer_plan *lp = &h->lp[layer];
    lp->dense = true, lp->min_from = N;
    for (int32_t s = 0; s < n_seqs && states; s++)
        if (states[s]) ((sel_slot_state *)states[s])->fresh = false;
    if (layer < p->dense_layers) return LC_OK;
    for (int32_t s = 0; s < n_seqs; s++)
        if (seqs[s].n_rows > 1 && states && states[s]) {
            sel_slot_state *hs = states[s];
            memset(hs->valid, 0, sizeof hs->valid);
            hs->step = 0;
        }
    const int64_t budget = (int64_t)keep_of(h, layer, N - 1) * p->chunk[N - 1];
    bool all_covered = true;
    for (int32_t i = 0; i < h->ws.n_qb && all_covered; i++)
        if (cand_of(p, &h->ws.h_qb[i]) > budget) all_covered = false;
    lp->dense = all_covered && !h->no_shortcut;
    if (lp->dense) return LC_OK;
    int32_t *list = h->ws.h_list + (size_t)layer * (size_t)h->ws.qb_cap;
    int32_t *from = h->ws.h_from + (size_t)layer * (size_t)h->ws.qb_cap;
    for (int32_t j = h->ws.n_pre; j < h->ws.n_qb; j++) {
        sel_slot_state *hs = states ? states[h->ws.h_qb[j].seq] : NULL;
        if (!hs) return lc_fail(LC_ERR_INTERNAL, "infinitehip: a decode sequence has no state");
        int32_t f = N;
        for (int32_t i = 0; i < N && f == N; i++)
            if (!hs->valid[i] || hs->step % p->refresh[i] == 0) f = i;
        for (int32_t i = f; i < N; i++) hs->valid[i] = true;
        hs->step++;
        hs->fresh = f < N; /* every stage from f on, the last (the attention's list) too */
        list[j - h->ws.n_pre] = hs->slot;
        from[j - h->ws.n_pre] = f;
        if (f < lp->min_from) lp->min_from = f;
    }
    return LC_OK;
}

/* After a failed forward of a layer: its decode sequences recompute every stage next time. */
static void invalidate_layer(hip_impl *h, void *const *states) {
    for (int32_t j = h->ws.n_pre; j < h->ws.n_qb && states; j++) {
        sel_slot_state *hs = states[h->ws.h_qb[j].seq];
        if (hs) memset(hs->valid, 0, sizeof hs->valid);
    }
}

static uint64_t plan_key(const hip_impl *h) {
    const uint64_t v[] = {(uint64_t)h->ws.n_qb, (uint64_t)h->ws.n_pre, (uint64_t)h->dec_cand,
                          (uint64_t)(h->max_end > h->shape.n_ctx_train), h->ws.epoch,
                          h->pool.epoch};
    uint64_t k = sel_key_mix_all(0x1f1e5ull, v, SEL_N_OF(v));
    for (int32_t l = 0; l < h->shape.n_layer; l++)
        k = sel_key_mix(k, (uint64_t)h->lp[l].dense << 8 | (uint64_t)h->lp[l].min_from);
    return k;
}

static int hip_plan(const lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                    void **const *states, uint64_t *key) {
    hip_impl *h = m->impl;
    int st = plan_batch(h, seqs, n_seqs);
    if (st == LC_OK) st = sel_plan_layers(&h->ws, seqs, n_seqs, states, plan_layer, h);
    if (st != LC_OK) return st;
    *key = plan_key(h);
    return LC_OK;
}

static int hip_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    hip_impl *h = m->impl;
    const lc_infinitehip_params *p = &h->p;
    const int32_t N = p->n_stages;
    h->last_sparse = false;
    h->last_n_pre = 0;
    int st = sel_forward_check("infinitehip", b,
                               call->q_raw && b->prune_chunks && b->attn_segments && b->copy,
                               call->layer, h->shape.n_layer, p->dense_layers);
    if (st == SEL_RUN_DENSE) return lc_attn_call_dense(b, call);
    if (st != LC_OK) return st;
    if (!sel_plan_take(&h->ws,
                       call->layer)) { /* not planned (a direct caller): this layer's plan */
        st = plan_batch(h, call->seqs, call->n_seqs);
        if (st == LC_OK) st = plan_layer(h, call->layer, call->seqs, call->n_seqs, call->states);
        if (st == LC_OK) st = sel_plan_upload(&h->ws);
        if (st != LC_OK) return st;
    }
    const hip_layer_plan *lp = &h->lp[call->layer];
    if (lp->dense) return lc_attn_call_dense(b, call);
    const int32_t n_qb = h->ws.n_qb, n_pre = h->ws.n_pre, n_dec = n_qb - n_pre;
    const int32_t last_keep = keep_of(h, call->layer, N - 1);
    const int64_t budget = (int64_t)last_keep * p->chunk[N - 1];

    const bool extend = p->rope == LC_HIP_ROPE_EXTEND ||
                        ((p->rope == LC_HIP_ROPE_AUTO || p->rope == LC_HIP_ROPE_STREAM) &&
                         h->max_end > h->shape.n_ctx_train);
    const int32_t scan_rope = !extend || p->rope == LC_HIP_ROPE_STREAM ? LC_SCAN_PLAIN
                              : call->layer < p->first_layers          ? LC_SCAN_CHUNK
                                                                       : LC_SCAN_RELATIVE;
    lc_prune_chunks_args sa;
    memset(&sa, 0, sizeof sa);
    sa.n_sink = p->n_sink;
    sa.n_stream = p->n_stream;
    sa.n_groups = h->n_groups;
    sa.scan_rope = scan_rope;
    lc_attn_segments_args aa;
    memset(&aa, 0, sizeof aa);
    aa.n_sink = p->n_sink;
    aa.attn_rope = !extend           ? LC_ATTN_ROPE_PLAIN
                   : p->attn_span > 0 ? LC_ATTN_ROPE_GAPS
                                      : LC_ATTN_ROPE_STREAMING;
    aa.gap_span = p->attn_span;
    aa.n_groups = h->n_groups;
    aa.max_sel = (int32_t)budget;
    aa.max_window = h->max_window;
    aa.sel_cap = last_keep;

    /* prefill blocks: every stage, outputs in the workspace */
    if (n_pre > 0) {
        sa.rot = &h->rot, aa.rot = &h->rot;
        for (int32_t i = 0; i < N && st == LC_OK; i++) {
            stage_setup(h, call->layer, i, h->pre_rows, h->pre_cand, &sa);
            sa.in = i ? h->d_seg[i - 1] : NULL;
            sa.in_n = i ? h->d_n[i - 1] : NULL;
            sa.out = h->d_seg[i];
            sa.out_n = h->d_n[i];
            st = b->prune_chunks(b, call->kv, call->seqs, call->n_seqs, h->ws.d_qb, n_pre,
                                 call->q_raw, call->n_head, call->rope, &sa);
        }
        if (st != LC_OK) return st;
        {
            const int32_t lb = n_pre - 1;
            const lc_qblock *qb = &h->ws.h_qb[lb];
            lc_segment *segs[LC_HIP_MAX_STAGES];
            int32_t *ns[LC_HIP_MAX_STAGES];
            for (int32_t i = 0; i < N; i++) {
                segs[i] = h->d_seg[i] +
                          (size_t)lb * (size_t)h->n_groups * (size_t)keep_of(h, call->layer, i);
                ns[i] = h->d_n[i] + (size_t)lb * (size_t)h->n_groups;
            }
            trace_block(h, call->layer, "prefill", qb->pos0 + qb->n_rows - 1, segs, ns, 0);
        }
        h->last_sparse = true;
        h->last_layer = call->layer;
        h->last_n_pre = n_pre;
        aa.max_rows = h->pre_rows;
        aa.sel = h->d_seg[N - 1];
        aa.sel_n = h->d_n[N - 1];
        if ((st =
                 b->attn_segments(b, call->kv, call->seqs, call->n_seqs, h->ws.d_qb, n_pre, call->q,
                                  call->n_head, call->rope, call->scale, &aa, call->out)) != LC_OK)
            return st;
    }
    if (n_dec == 0) return LC_OK;

    /* decode blocks, all in one launch per op: each reads and writes its sequence's slot of the
       layer's caches, and recomputes only the stages from its own first one on (the plan's
       from row); a stage none of them recomputes is not launched */
    const lc_qblock *d_dec = h->ws.d_qb + n_pre;
    const int32_t *d_list = h->ws.d_list + (size_t)call->layer * (size_t)h->ws.qb_cap;
    const int32_t *d_from = h->ws.d_from + (size_t)call->layer * (size_t)h->ws.qb_cap;
    sa.rot = NULL, aa.rot = NULL; /* (one-row blocks read keys as stored) */
    for (int32_t i = lp->min_from; i < N && st == LC_OK; i++) {
        stage_setup(h, call->layer, i, 1, h->dec_cand, &sa);
        sa.in = i ? sel_pool_seg(&h->pool, call->layer, i - 1) : NULL;
        sa.in_n = i ? sel_pool_n(&h->pool, call->layer, i - 1) : NULL;
        sa.out = sel_pool_seg(&h->pool, call->layer, i);
        sa.out_n = sel_pool_n(&h->pool, call->layer, i);
        sa.list = d_list, sa.from = d_from, sa.stage = i;
        st = b->prune_chunks(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q_raw,
                             call->n_head, call->rope, &sa);
    }
    if (st != LC_OK) return invalidate_layer(h, call->states), st;
    const int32_t *h_list = h->ws.h_list + (size_t)call->layer * (size_t)h->ws.qb_cap;
    const int32_t *h_from = h->ws.h_from + (size_t)call->layer * (size_t)h->ws.qb_cap;
    for (int32_t j = 0; j < n_dec; j++) { /* (a no-op unless a span is traced) */
        if (h_from[j] >= N) continue;
        lc_segment *segs[LC_HIP_MAX_STAGES];
        int32_t *ns[LC_HIP_MAX_STAGES];
        for (int32_t i = 0; i < N; i++) {
            segs[i] = sel_pool_seg(&h->pool, call->layer, i) +
                      (size_t)h_list[j] * (size_t)h->n_groups * (size_t)keep_of(h, call->layer, i);
            ns[i] = sel_pool_n(&h->pool, call->layer, i) + (size_t)h_list[j] * (size_t)h->n_groups;
        }
        trace_block(h, call->layer, "decode", h->ws.h_qb[n_pre + j].pos0, segs, ns, h_from[j]);
    }
    if (n_pre == 0) { /* for lc_attn_infinitehip_last */
        h->last_sparse = true;
        h->last_layer = call->layer;
        h->last_dec_slot = h_list[n_dec - 1];
        h->last_dec_qb = h->ws.h_qb[n_qb - 1];
    }
    aa.max_rows = 1;
    aa.max_window = p->n_stream; /* >= pos + 1 - win0 of any decode row (win0_cut) */
    aa.sel = sel_pool_seg(&h->pool, call->layer, N - 1);
    aa.sel_n = sel_pool_n(&h->pool, call->layer, N - 1);
    aa.list = d_list;
    st = b->attn_segments(b, call->kv, call->seqs, call->n_seqs, d_dec, n_dec, call->q,
                          call->n_head, call->rope, call->scale, &aa, call->out);
    if (st != LC_OK) invalidate_layer(h, call->states);
    return st;
}

/* lc_attn_infinitehip_last's host copies: n_blocks query blocks and every stage's outputs,
 * seg[i] / cnt[i] on the backend ([n_blocks][n_groups][keep_of(layer, i)] segments and
 * [n_blocks][n_groups] counts); the final selection is the last stage's. */
static int copy_last(const hip_impl *h, const lc_qblock *qb, int32_t n_blocks,
                     lc_segment *const *seg, int32_t *const *cnt, lc_last_selection *out) {
    const int32_t N = h->p.n_stages;
    const size_t ng = (size_t)n_blocks * (size_t)h->n_groups;
    int st = LC_OK;
    out->n_qb = n_blocks;
    out->qb = lc_malloc(sizeof(lc_qblock) * (size_t)n_blocks, "selection copy");
    if (!out->qb)
        st = LC_ERR_NOMEM;
    else
        memcpy(out->qb, qb, sizeof(lc_qblock) * (size_t)n_blocks);
    /* every stage's output, to see where a followed span of tokens was dropped */
    for (int32_t i = 0; i < N && st == LC_OK; i++) {
        const int32_t c = keep_of(h, h->last_layer, i);
        out->stage_cap[i] = c;
        out->stage_sel[i] =
            lc_malloc(sizeof(lc_segment) * ng * (size_t)(c > 0 ? c : 1), "selection copy");
        out->stage_n[i] = lc_malloc(sizeof(int32_t) * ng, "selection copy");
        out->n_stages = i + 1;
        if (!out->stage_sel[i] || !out->stage_n[i]) st = LC_ERR_NOMEM;
        if (st == LC_OK && c > 0)
            st = h->b->download(h->b, out->stage_sel[i], seg[i],
                                sizeof(lc_segment) * ng * (size_t)c);
        if (st == LC_OK) st = h->b->download(h->b, out->stage_n[i], cnt[i], sizeof(int32_t) * ng);
    }
    if (st == LC_OK) { /* the selection read: the last stage's, copied on the host */
        const int32_t cap = out->stage_cap[N - 1];
        out->sel_cap = cap;
        out->sel =
            lc_malloc(sizeof(lc_segment) * ng * (size_t)(cap > 0 ? cap : 1), "selection copy");
        out->sel_n = lc_malloc(sizeof(int32_t) * ng, "selection copy");
        if (!out->sel || !out->sel_n) {
            st = LC_ERR_NOMEM;
        } else {
            memcpy(out->sel, out->stage_sel[N - 1], sizeof(lc_segment) * ng * (size_t)cap);
            memcpy(out->sel_n, out->stage_n[N - 1], sizeof(int32_t) * ng);
        }
    }
    if (st != LC_OK) lc_attn_last_free(out);
    return st;
}

int lc_attn_infinitehip_last(const lc_attn_method *m, lc_last_selection *out) {
    memset(out, 0, sizeof *out);
    if (!m || m->forward != hip_forward)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_attn_infinitehip_last: not an infinitehip method");
    const hip_impl *h = m->impl;
    out->n_sink = h->p.n_sink;
    out->n_groups = h->n_groups;
    out->sparse = h->last_sparse;
    if (!h->last_sparse) return LC_OK;
    if (h->last_n_pre > 0) return copy_last(h, h->ws.h_qb, h->last_n_pre, h->d_seg, h->d_n, out);
    /* a forward of decode blocks only: its last one, with its sequence's cached stage outputs */
    lc_segment *segs[LC_HIP_MAX_STAGES];
    int32_t *ns[LC_HIP_MAX_STAGES];
    for (int32_t i = 0; i < h->p.n_stages; i++) {
        segs[i] = sel_pool_seg(&h->pool, h->last_layer, i) +
                  (size_t)h->last_dec_slot * (size_t)h->n_groups * (size_t)keep_of(h, h->last_layer, i);
        ns[i] = sel_pool_n(&h->pool, h->last_layer, i) + (size_t)h->last_dec_slot * (size_t)h->n_groups;
    }
    return copy_last(h, &h->last_dec_qb, 1, segs, ns, out);
}

void lc_attn_last_free(lc_last_selection *l) {
    free(l->qb), free(l->sel), free(l->sel_n);
    l->qb = NULL, l->sel = NULL, l->sel_n = NULL;
    for (int32_t i = 0; i < l->n_stages; i++) {
        free(l->stage_sel[i]), free(l->stage_n[i]);
        l->stage_sel[i] = NULL, l->stage_n[i] = NULL;
    }
    l->n_stages = 0;
}

static void hip_destroy(lc_attn_method *m) {
    hip_impl *h = m ? m->impl : NULL;
    if (h) {
        sel_ws_release(&h->ws);
        lc_rotated_keys_release(h->b, &h->rot);
        seg_release(h);
        sel_pool_release(&h->pool);
        free(h->lp);
    }
    sel_method_free(m);
}

/* The decode attention reads sink, window and the last stage's list (hip_forward). */
static int hip_decode_reads(const lc_attn_method *m, int32_t layer, const void *state,
                            lc_decode_reads *r) {
    hip_impl *h = m->impl;
    (void)layer; /* the state knows its layer */
    return sel_decode_reads(&h->pool, h->p.n_stages - 1, state, h->p.n_sink, h->p.n_stream, r);
}

/* (graph_safe: set per instance) */
static const lc_attn_method hip_ops = {
    .name = "infinitehip", .needs_raw_q = true, .kv_fp8 = true, /* prune_chunks, attn_segments */
    .state_create = hip_state_create, .state_free = hip_state_free,
    .plan = hip_plan, .forward = hip_forward, .destroy = hip_destroy,
    .last = lc_attn_infinitehip_last, .decode_reads = hip_decode_reads};

int lc_attn_infinitehip_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_infinitehip_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out) {
    *out = NULL;
    int st = lc_attn_settings_validate(&lc_attn_desc_infinitehip, p);
    if (st != LC_OK) return st;
    lc_attn_method *m;
    st = sel_method_new(b, b->prune_chunks && b->attn_segments && b->copy, &hip_ops, sizeof(hip_impl),
                        &m);
    if (st != LC_OK) return st;
    hip_impl *h = m->impl;
    h->b = b;
    h->p = *p;
    h->shape = *shape;
    h->n_groups = p->per_group ? shape->n_kv_head : 1;
    h->no_shortcut = diag && diag->sparse_always;
    if (diag && diag->trace_begin < diag->trace_end)
        h->trace_begin = diag->trace_begin, h->trace_end = diag->trace_end;
    for (int32_t i = 0; i < p->n_stages; i++) {
        h->keep_max[i] = p->k[i] / p->chunk[i];
        if (i == p->n_stages - 1 && p->first_layers > 0 &&
            p->first_k / p->chunk[i] > h->keep_max[i])
            h->keep_max[i] = p->first_k / p->chunk[i];
    }
    /* a traced forward downloads its selections (host work between its launches) */
    m->graph_safe = h->trace_begin >= h->trace_end;
    int32_t caps[LC_HIP_MAX_STAGES * 256];
    const int32_t L = shape->n_layer;
    int st2 = L > 0 && L <= 256 ? LC_OK
                                : lc_fail(LC_ERR_INVALID_ARG, "infinitehip: %d layers (1..256)", L);
    for (int32_t l = 0; l < L && st2 == LC_OK; l++)
        for (int32_t i = 0; i < p->n_stages; i++) caps[l * p->n_stages + i] = keep_of(h, l, i);
    h->lp = st2 == LC_OK ? lc_calloc((size_t)L, sizeof(hip_layer_plan), "InfiniteHiP plan") : NULL;
    if (st2 == LC_OK && !h->lp) st2 = LC_ERR_NOMEM;
    if (st2 == LC_OK) st2 = sel_ws_init(&h->ws, b, L, true, h->n_groups, 0, p->n_sink);
    if (st2 == LC_OK) st2 = sel_pool_init(&h->pool, b, L, p->n_stages, h->n_groups, caps);
    if (st2 != LC_OK) {
        hip_destroy(m);
        return st2;
    }
    *out = m;
    return LC_OK;
}
