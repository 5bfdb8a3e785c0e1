/*
 * forward.c — the llama-family transformer forward over a batch of tokens from several
 * sequences (DESIGN.md "One step function"): embedding, per layer RMSNorm → Q/K/V (+ qwen2
 * biases) → RoPE on queries (keys are stored pre-RoPE in the paged KV) → attention method →
 * output projection + residual → RMSNorm → SwiGLU FFN + residual; final norm and logits for
 * the requested rows only, then (when asked) sampling on the backend. All compute goes through
 * the backend's op table. Inputs are uploaded first (asynchronously where the backend can);
 * a decode step runs as one backend graph where the backend has them (lc_model_forward).
 */
#include "model/model.h"
#include "kv/slab_bank.h"
#include "util/util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t g_ws_serial = 1;

int lc_forward_ws_create(const lc_model *m, int32_t n_batch, int32_t n_logits_max,
                         lc_forward_ws **out) {
    *out = NULL;
    const lc_hparams *hp = &m->hp;
    lc_backend       *b  = m->backend;
    lc_forward_ws    *ws = lc_calloc(1, sizeof *ws, "forward workspace");
    if (!ws) return LC_ERR_NOMEM;
    ws->n_batch      = n_batch;
    ws->n_logits_max = n_logits_max;
    const size_t n = (size_t)n_batch, f = sizeof(float);
    const size_t q = (size_t)hp->n_head * (size_t)hp->head_dim;
    const size_t kv = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    ws->x        = b->alloc(b, n * (size_t)hp->n_embd * f, "activations");
    ws->h        = b->alloc(b, n * (size_t)hp->n_embd * f, "activations");
    ws->q        = b->alloc(b, n * q * f, "queries");
    ws->k        = b->alloc(b, n * kv * f, "keys");
    ws->v        = b->alloc(b, n * kv * f, "values");
    ws->att      = b->alloc(b, n * q * f, "attention output");
    ws->q_raw    = b->alloc(b, n * q * f, "queries before RoPE");
    ws->o        = b->alloc(b, n * (size_t)hp->n_embd * f, "activations");
    ws->gate     = b->alloc(b, n * (size_t)hp->n_ff * f, "ffn gate");
    ws->up       = b->alloc(b, n * (size_t)hp->n_ff * f, "ffn up");
    ws->logits_h = b->alloc(b, (size_t)n_logits_max * (size_t)hp->n_embd * f, "final hidden");
    ws->logits   = b->alloc(b, (size_t)n_logits_max * (size_t)hp->n_vocab * f, "logits");
    ws->ids      = b->alloc(b, n * sizeof(int32_t), "batch ids");
    ws->pos      = b->alloc(b, n * sizeof(int32_t), "batch positions");
    ws->lrows    = b->alloc(b, (size_t)n_logits_max * sizeof(int32_t), "logit rows");
    ws->srows    = b->alloc(b, (size_t)n_logits_max * sizeof(lc_sample_row), "sampling rows");
    ws->sampled  = b->alloc(b, (size_t)n_logits_max * sizeof(int32_t), "sampled ids");
    ws->serial   = atomic_fetch_add(&g_ws_serial, 1);
    if (!ws->x || !ws->h || !ws->q || !ws->q_raw || !ws->k || !ws->v || !ws->att || !ws->o || !ws->gate ||
        !ws->up || !ws->logits_h || !ws->logits || !ws->ids || !ws->pos || !ws->lrows ||
        !ws->srows || !ws->sampled) {
        lc_forward_ws_free(m, ws);
        return LC_ERR_NOMEM;
    }
    *out = ws;
    return LC_OK;
}

void lc_forward_ws_free(const lc_model *m, lc_forward_ws *ws) {
    if (!ws) return;
    lc_backend *b      = m->backend;
    if (b->graph_reset) b->graph_reset(b); /* graphs may point into these buffers */
    void       *bufs[] = {ws->x, ws->h, ws->q, ws->q_raw, ws->k, ws->v, ws->att, ws->o, ws->gate, ws->up,
                          ws->logits_h, ws->logits, ws->ids, ws->pos, ws->lrows, ws->srows,
                          ws->sampled, ws->pen};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) b->dealloc(b, bufs[i]);
    free(ws);
}

#define TRY(expr)                                                                             \
    do {                                                                                      \
        int st_ = (expr);                                                                     \
        if (st_ != LC_OK) return st_;                                                         \
    } while (0)

/* With batch->check_numerics: download rows x [n_rows][width] (backend memory) and fail with
 * LC_ERR_NUMERIC naming the layer (-1: none), the block and the first row holding NaN/Inf. */
static int check_finite(lc_backend *b, lc_forward_ws *ws, const float *x, int64_t n_rows,
                        int64_t width, const lc_batch *batch, int32_t layer, const char *block,
                        bool by_pos) {
    float *h = lc_malloc(sizeof(float) * (size_t)(n_rows * width), "numeric check");
    if (!h) return LC_ERR_NOMEM;
    int st = b->download(b, h, x, sizeof(float) * (size_t)(n_rows * width));
    for (int64_t i = 0; st == LC_OK && i < n_rows * width; i++) {
        if (isfinite(h[i])) continue;
        const int64_t r   = i / width;
        const int32_t row = by_pos ? (int32_t)r : batch->logit_rows[r];
        ws->bad_row = row;
        char where[48] = "";
        if (layer >= 0) snprintf(where, sizeof where, "layer %d, ", layer);
        st = lc_fail(LC_ERR_NUMERIC, "%s first at %s%s (batch row %d, position %d, element "
                     "%lld)", isnan(h[i]) ? "NaN" : "Inf", where, block, row, batch->pos[row],
                     (long long)(i % width));
    }
    free(h);
    return st;
}

/* The ops of one forward, from the embedding to the sampled ids (inputs already uploaded). */
static int forward_ops(lc_model *m, lc_forward_ws *ws, lc_kv_cache *kv, const lc_rope_table *rope,
                       const lc_attn_method *attn, const lc_batch *batch) {
    const lc_hparams *hp = &m->hp;
    lc_backend       *b  = m->backend;
    const int64_t     n  = batch->n_rows;
    const int64_t E = hp->n_embd, QD = (int64_t)hp->n_head * hp->head_dim,
                  KVD = (int64_t)hp->n_head_kv * hp->head_dim;
    const float scale = 1.0f / sqrtf((float)hp->head_dim);

    const bool    chk = batch->check_numerics;
    const int32_t l0  = batch->layer_end > 0 ? batch->layer_begin : 0;
    const int32_t l1  = batch->layer_end > 0 ? batch->layer_end : hp->n_layer;
    if (l0 > 0) {
        TRY(b->copy(b, ws->x, batch->x_in, sizeof(float) * (size_t)(n * E)));
    } else {
        TRY(b->embed(b, &m->tok_embd, ws->ids, n, ws->x));
        if (chk) TRY(check_finite(b, ws, ws->x, n, E, batch, -1, "the token embeddings", true));
    }

    void *states_stack[64];
    void **states = batch->n_seqs <= 64 ? states_stack
                                        : lc_malloc(sizeof(void *) * (size_t)batch->n_seqs, "states");
    if (!states) return LC_ERR_NOMEM;
    int st = LC_OK;
    for (int32_t l = l0; l < l1 && st == LC_OK; l++) {
        const lc_layer_weights *L  = &m->layers[l];
        lc_kv_layer_view        kl = lc_kv_layer(kv, l);
        for (int32_t s = 0; s < batch->n_seqs; s++)
            states[s] = batch->attn_states ? batch->attn_states[s][l] : NULL;
#define STEP(expr)                                                                            \
    if (st == LC_OK) st = (expr)
        STEP(b->rmsnorm(b, ws->x, L->attn_norm.data, ws->h, n, E, hp->norm_eps));
        STEP(b->matmul(b, &L->wq, ws->h, ws->q, n));
        STEP(b->matmul(b, &L->wk, ws->h, ws->k, n));
        STEP(b->matmul(b, &L->wv, ws->h, ws->v, n));
        if (L->bq.data) STEP(b->add_bias(b, ws->q, L->bq.data, n, QD));
        if (L->bk.data) STEP(b->add_bias(b, ws->k, L->bk.data, n, KVD));
        if (L->bv.data) STEP(b->add_bias(b, ws->v, L->bv.data, n, KVD));
        if (attn->needs_raw_q)
            STEP(b->copy(b, ws->q_raw, ws->q, sizeof(float) * (size_t)(n * QD)));
        STEP(b->rope(b, ws->q, ws->pos, n, hp->n_head, hp->head_dim, rope));
        STEP(b->kv_write(b, &kl, batch->seqs, batch->n_seqs, ws->k, ws->v));
        const lc_attn_call call = {.layer = l,
                                   .kv = &kl,
                                   .seqs = batch->seqs,
                                   .n_seqs = batch->n_seqs,
                                   .states = states,
                                   .q = ws->q,
                                   .q_raw = attn->needs_raw_q ? ws->q_raw : NULL,
                                   .n_head = hp->n_head,
                                   .rope = rope,
                                   .scale = scale,
                                   .out = ws->att};
        STEP(attn->forward(attn, b, &call));
        if (chk) STEP(check_finite(b, ws, ws->att, n, QD, batch, l, "attention output", true));
        STEP(b->matmul(b, &L->wo, ws->att, ws->o, n));
        STEP(b->add(b, ws->x, ws->o, n * E));
        if (chk) STEP(check_finite(b, ws, ws->x, n, E, batch, l, "attention block (output "
                                   "projection and residual)", true));
        STEP(b->rmsnorm(b, ws->x, L->ffn_norm.data, ws->h, n, E, hp->norm_eps));
        STEP(b->matmul(b, &L->w_gate, ws->h, ws->gate, n));
        STEP(b->matmul(b, &L->w_up, ws->h, ws->up, n));
        STEP(b->silu_mul(b, ws->gate, ws->up, ws->gate, n * hp->n_ff));
        STEP(b->matmul(b, &L->w_down, ws->gate, ws->o, n));
        STEP(b->add(b, ws->x, ws->o, n * E));
        if (chk) STEP(check_finite(b, ws, ws->x, n, E, batch, l, "feed-forward block", true));
#undef STEP
    }
    if (states != states_stack) free(states);
    if (st != LC_OK) return st;
    if (l1 < hp->n_layer) return b->copy(b, batch->x_out, ws->x, sizeof(float) * (size_t)(n * E));

    const int32_t nl = batch->n_logit_rows;
    if (nl == 0) return LC_OK;
    /* gather the wanted rows of the residual stream (an embedding lookup into x) */
    const lc_weight rows_of_x = {.rows = n, .cols = E, .type = LC_TYPE_F32, .data = ws->x};
    TRY(b->embed(b, &rows_of_x, ws->lrows, nl, ws->logits_h));
    TRY(b->rmsnorm(b, ws->logits_h, m->output_norm.data, ws->logits_h, nl, E, hp->norm_eps));
    if (chk) TRY(check_finite(b, ws, ws->logits_h, nl, E, batch, -1, "the output norm", false));
    TRY(b->matmul(b, &m->output, ws->logits_h, ws->logits, nl));
    if (chk) TRY(check_finite(b, ws, ws->logits, nl, hp->n_vocab, batch, -1, "the output head "
                              "(logits)", false));
    if (batch->sample_rows)
        TRY(b->sample(b, ws->logits, hp->n_vocab, nl, hp->n_vocab, ws->srows, ws->pen, ws->sampled));
    return LC_OK;
}

static uint64_t key_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xBF58476D1CE4E5B9ull;
}

int lc_model_forward(lc_model *m, lc_forward_ws *ws, lc_kv_cache *kv, const lc_rope_table *rope,
                     const lc_attn_method *attn, const lc_batch *batch, int32_t *sampled_out) {
    lc_backend   *b  = m->backend;
    const int64_t n  = batch->n_rows;
    const int32_t nl = batch->n_logit_rows;
    if (n <= 0 || n > ws->n_batch || nl > ws->n_logits_max || nl > n || nl < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "forward: batch of %lld rows / %d logit rows exceeds "
                       "the workspace (%d / %d)", (long long)n, nl, ws->n_batch,
                       ws->n_logits_max);
    if (batch->layer_end != 0) {
        const int32_t l0 = batch->layer_begin, l1 = batch->layer_end, NL = m->hp.n_layer;
        if (l0 < 0 || l1 <= l0 || l1 > NL || (l0 > 0 && !batch->x_in) ||
            (l1 < NL && (!batch->x_out || nl > 0)))
            return lc_fail(LC_ERR_INVALID_ARG, "forward: layers [%d, %d) of %d (residual in %s, "
                           "out %s, %d logit rows): a segment needs 0 <= begin < end <= the "
                           "layers, x_in when it starts past 0, x_out and no logits when it "
                           "ends before the last", l0, l1, NL, batch->x_in ? "given" : "none",
                           batch->x_out ? "given" : "none", nl);
    }
    for (int32_t i = 0; i < nl; i++)
        if (batch->logit_rows[i] < 0 || batch->logit_rows[i] >= n)
            return lc_fail(LC_ERR_INVALID_ARG, "forward: logit row %d out of range",
                           batch->logit_rows[i]);
    const bool sampling = batch->sample_rows && nl > 0;
    if (sampling && (!b->sample || !sampled_out))
        return lc_fail(LC_ERR_INVALID_ARG, "forward: sampling asked without %s",
                       b->sample ? "an output" : "a backend sample op");
    if (sampling)
        for (int32_t i = 0; i < nl; i++) {
            const lc_sample_row *r = &batch->sample_rows[i];
            if (r->pen_n < 0 || r->pen_off < 0 || (int64_t)r->pen_off + r->pen_n > batch->n_pen)
                return lc_fail(LC_ERR_INVALID_ARG, "forward: sampling row %d names penalty "
                               "tokens past the %d given", i, batch->n_pen);
        }

    /* the slot cache's maps up to date first: copies of released pages must not be read */
    if (kv->bank) TRY(lc_slab_bank_commit(kv->bank));
    /* inputs: the batch's sequences, ids, positions, logit rows, sampling rows */
    int (*up)(lc_backend *, void *, const void *, size_t) =
        b->upload_async ? b->upload_async : b->upload;
    if (b->batch_begin) TRY(b->batch_begin(b, batch->seqs, batch->n_seqs, kv->page_size));
    TRY(up(b, ws->ids, batch->ids, sizeof(int32_t) * (size_t)n));
    TRY(up(b, ws->pos, batch->pos, sizeof(int32_t) * (size_t)n));
    if (nl > 0) TRY(up(b, ws->lrows, batch->logit_rows, sizeof(int32_t) * (size_t)nl));
    if (sampling) {
        if (batch->n_pen > ws->pen_cap || !ws->pen) {
            int64_t cap = ws->pen_cap ? ws->pen_cap : 256;
            while (cap < batch->n_pen) cap *= 2;
            if (ws->pen) b->dealloc(b, ws->pen);
            ws->pen_cap = 0;
            ws->pen     = b->alloc(b, sizeof(int32_t) * (size_t)cap, "penalised tokens");
            if (!ws->pen) return LC_ERR_NOMEM;
            ws->pen_cap = cap;
        }
        TRY(up(b, ws->srows, batch->sample_rows, sizeof(lc_sample_row) * (size_t)nl));
        if (batch->n_pen > 0)
            TRY(up(b, ws->pen, batch->pen_tokens, sizeof(int32_t) * (size_t)batch->n_pen));
    }

    /* the attention method's host decisions for every layer of this forward (before a graph
       is captured or replayed: a replay runs no host code of the method) */
    uint64_t attn_key = 0;
    if (attn->plan) TRY(attn->plan(attn, batch->seqs, batch->n_seqs, batch->attn_states, &attn_key));

    /* a decode step (one row per sequence, each sampled) runs as a graph where there are */
    bool decode = sampling && b->graph_begin && attn->graph_safe && nl == n &&
                  !batch->layer_end && batch->n_seqs == n && !batch->check_numerics;
    for (int32_t i = 0; i < batch->n_seqs && decode; i++) decode = batch->seqs[i].n_rows == 1;
    int mode = LC_GRAPH_OFF;
    if (decode) {
        uint64_t key = key_mix(0, ws->serial);
        key          = key_mix(key, (uint64_t)(uintptr_t)m);
        key          = key_mix(key, (uint64_t)(uintptr_t)kv);
        key          = key_mix(key, (uint64_t)(uintptr_t)rope);
        key          = key_mix(key, (uint64_t)(uintptr_t)attn);
        key          = key_mix(key, (uint64_t)(uintptr_t)ws->pen);
        key          = key_mix(key, (uint64_t)n);
        key          = key_mix(key, (uint64_t)batch->n_seqs);
        key          = key_mix(key, attn_key);
        TRY(b->graph_begin(b, key, &mode));
    }
    int st = LC_OK;
    if (mode != LC_GRAPH_REPLAYED) {
        st = forward_ops(m, ws, kv, rope, attn, batch);
        if (mode == LC_GRAPH_CAPTURING) {
            bool launched = false;
            st            = b->graph_end(b, st, &launched);
            if (st == LC_OK && !launched) st = forward_ops(m, ws, kv, rope, attn, batch);
        }
    }
    if (st != LC_OK) return st;
    if (sampling) TRY(b->download(b, sampled_out, ws->sampled, sizeof(int32_t) * (size_t)nl));
    return LC_OK;
}

int lc_forward_logits(const lc_model *m, const lc_forward_ws *ws, int32_t i, float *dst) {
    if (i < 0 || i >= ws->n_logits_max)
        return lc_fail(LC_ERR_INVALID_ARG, "logit row %d out of range", i);
    lc_backend   *b = m->backend;
    const int64_t V = m->hp.n_vocab;
    return b->download(b, dst, ws->logits + (int64_t)i * V, sizeof(float) * (size_t)V);
}
