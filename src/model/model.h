/*
 * model.h — llama-family transformer (llama, mistral, qwen2): hyper-parameters read from GGUF
 * metadata, weights held by a backend, the RoPE table (with none/linear/yarn/llama3 scaling
 * and rope_freqs factors), and the batched forward over a paged KV cache.
 */
#ifndef LC_MODEL_H
#define LC_MODEL_H

#include "attn/attn.h"
#include "backend/backend.h"
#include "kv/kv.h"
#include "longctx.h"

#include <stdatomic.h>

typedef enum lc_rope_scaling {
    LC_ROPE_SCALING_NONE   = 0,
    LC_ROPE_SCALING_LINEAR = 1,
    LC_ROPE_SCALING_YARN   = 2,
    LC_ROPE_SCALING_LLAMA3 = 3,
} lc_rope_scaling;

typedef struct lc_hparams {
    char            arch[32];
    int32_t         n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    int32_t         n_rot;
    float           norm_eps;
    float           rope_base;
    lc_rope_pairing rope_pairing;
    lc_rope_scaling rope_scaling;
    float           rope_factor;      /* scaling factor (context extension) */
    int32_t         rope_orig_ctx;    /* original context length for yarn / llama3 */
    float           yarn_ext_factor;  /* default 1 when yarn */
    float           yarn_attn_factor; /* default 1 */
    float           yarn_beta_fast;   /* default 32 */
    float           yarn_beta_slow;   /* default 1 */
    float           llama3_low_freq;  /* default 1 */
    float           llama3_high_freq; /* default 4 */
} lc_hparams;

typedef struct lc_layer_weights {
    lc_weight attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
    lc_weight bq, bk, bv; /* data NULL when absent */
} lc_layer_weights;

struct lc_model {
    lc_hparams        hp;
    lc_gguf          *gguf;
    lc_tokenizer     *tokenizer;
    lc_chat_template  chat_template;
    char             *default_system; /* from the chat template, may be NULL */
    char              chat_template_why[256]; /* why the template was not recognised ("" when
                                                it was, or there is none) */
    lc_backend       *backend;
    lc_weight         tok_embd, output_norm, output; /* output.data == tok_embd.data if tied */
    bool              output_tied;
    float            *rope_freq_factors; /* host, [n_rot/2] or NULL */
    lc_layer_weights *layers;
    uint64_t          n_params, weight_bytes;
    _Atomic int32_t   refs; /* the caller's handle (until lc_model_free) + one per context */
};

/* A context holds its model: lc_model_retain when it is made, lc_model_release when it is
 * freed; the model is freed when the last holder lets go (lc_model_free is the caller's). */
void lc_model_retain(lc_model *m);
void lc_model_release(lc_model *m);

/* Read and validate hyper-parameters (exposed for tests). */
int lc_hparams_read(const lc_gguf *g, lc_hparams *hp);

/* The attention factor the table folds into cos/sin (YaRN's mscale; 1 otherwise). */
double lc_rope_mscale(const lc_hparams *hp);

/* Compute the RoPE table for positions [0, n_pos) into host arrays cos/sin [n_pos][n_rot/2]
 * (the CPU reference of the rotation angles; freq_factors may be NULL). */
int lc_rope_table_fill(const lc_hparams *hp, const float *freq_factors, int32_t n_pos,
                       float *cos_out, float *sin_out);
/* The rows of positions [p0, p1) of that table (row p at cos/sin + (p - p0) * n_rot/2): the
 * same values, bit for bit, as the whole table's rows (a row depends on its position only), so
 * a table can be extended without recomputing the rows it has. Threads over the rows. */
int lc_rope_table_fill_rows(const lc_hparams *hp, const float *freq_factors, int32_t p0,
                            int32_t p1, float *cos_out, float *sin_out);

/* Scratch for one forward of up to n_batch rows, in backend memory. */
typedef struct lc_forward_ws {
    int32_t n_batch, n_logits_max;
    float  *x, *h, *q, *q_raw, *k, *v, *att, *o, *gate, *up, *logits_h;
    float  *logits; /* [n_logits_max][n_vocab]: the last forward's logit rows */
    int32_t *ids, *pos; /* backend copies of the batch's ids / positions */
    int32_t *lrows;     /* backend copy of the logit rows */
    lc_sample_row *srows; /* backend copy of the sampling rows */
    int32_t       *sampled; /* [n_logits_max] sampled ids */
    int32_t       *pen;     /* penalised tokens, pen_cap of them (grown on demand) */
    int64_t        pen_cap;
    uint64_t       serial;  /* unique per workspace (part of the graph key) */
    int32_t        bad_row; /* batch row of the last LC_ERR_NUMERIC from check_numerics */
} lc_forward_ws;

int  lc_forward_ws_create(const lc_model *m, int32_t n_batch, int32_t n_logits_max,
                          lc_forward_ws **out);
void lc_forward_ws_free(const lc_model *m, lc_forward_ws *ws);

/* A batch: n_rows tokens (ids, pos), grouped by sequence (seqs[i] describe contiguous rows),
 * and the rows whose logits are wanted. */
typedef struct lc_batch {
    int32_t            n_rows;
    const int32_t     *ids;
    const int32_t     *pos;
    int32_t            n_seqs;
    const lc_attn_seq *seqs;
    void **const      *attn_states; /* [n_seqs][n_layer] method state, may be NULL */
    int32_t            n_logit_rows;
    const int32_t     *logit_rows;
    /* sampling (may be NULL): one row of parameters per logit row, their penalised tokens */
    const lc_sample_row *sample_rows;
    const int32_t       *pen_tokens;
    int32_t              n_pen;
    /* debug: download and scan the hidden state after each block of each layer; the forward
     * fails with LC_ERR_NUMERIC naming the first layer, block and row holding NaN/Inf (no
     * graph) */
    bool check_numerics;
    /* layer-segmented prefill (SparseServe's, engine.c): with layer_end > 0 only layers
     * [layer_begin, layer_end) run. layer_begin > 0: the residual stream starts from x_in
     * ([n_rows][n_embd], backend memory; the embeddings are not looked up); layer_end <
     * n_layer: it is saved to x_out (the same layout) and no logits are made (n_logit_rows 0).
     * 0 / 0: every layer, as before. */
    int32_t      layer_begin, layer_end;
    const float *x_in;
    float       *x_out;
} lc_batch;

/* Run the forward: writes the KV of every row, leaves the logits of the requested rows in
 * ws->logits (backend memory, read them with lc_forward_logits) and, with sample_rows, draws
 * one token per logit row on the backend into sampled_out (host, [n_logit_rows]). A decode
 * step (one row per sequence, every row sampled) on a backend with graphs runs as one graph
 * (the backend's graph_begin / graph_end; tuning.no_cuda_graphs turns them off); then the
 * only host synchronisation is reading the sampled ids. */
int lc_model_forward(lc_model *m, lc_forward_ws *ws, lc_kv_cache *kv, const lc_rope_table *rope,
                     const lc_attn_method *attn, const lc_batch *batch, int32_t *sampled_out);
/* Copy logit row i (< the last forward's n_logit_rows) to dst (host, n_vocab floats). */
int lc_forward_logits(const lc_model *m, const lc_forward_ws *ws, int32_t i, float *dst);

#endif
