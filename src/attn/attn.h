/*
 * attn.h — the attention-method interface (DESIGN.md "Attention methods"): one struct of
 * function pointers per method, with per-(sequence, layer) state owned by the sequence. The
 * model forward calls method->forward for every layer with the batch's rotated queries (and,
 * for methods that re-assign positions, the same queries before RoPE); the method decides
 * which keys each query reads and calls the backend's kernels. Methods: dense (a static
 * instance) and infinitehip (an instance per context, holding its settings and workspace).
 */
#ifndef LC_ATTN_H
#define LC_ATTN_H

#include "backend/backend.h"

struct lc_hip_last;

typedef struct lc_attn_method {
    const char *name;
    void       *impl;        /* the method's settings and workspace; NULL for dense */
    bool        needs_raw_q; /* forward must pass the queries before RoPE too */
    bool        graph_safe;  /* a decode step may be captured and replayed as a graph */
    /* Per-(sequence, layer) state; may be NULL for stateless methods. */
    int (*state_create)(const struct lc_attn_method *m, int32_t layer, void **state);
    void (*state_free)(const struct lc_attn_method *m, void *state);
    /* out[n_rows][n_head][head_dim] = attention of the batch's queries over the paged KV.
     * q: rotated at the true positions; q_raw: before RoPE (NULL unless needs_raw_q). */
    int (*forward)(const struct lc_attn_method *m, lc_backend *b, int32_t layer,
                   const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                   void *const *states, const float *q, const float *q_raw, int32_t n_head,
                   const lc_rope_table *rope, float scale, float *out);
    void (*destroy)(struct lc_attn_method *m); /* NULL for static instances */
    /* The last forward's prefill selections (evaluation); NULL for dense. */
    int (*last)(const struct lc_attn_method *m, struct lc_hip_last *out);
    /* Decode selection counters since creation; NULL: none kept. */
    int (*stats)(const struct lc_attn_method *m, lc_attn_stats *out);
} lc_attn_method;

extern const lc_attn_method lc_attn_dense;

/* The model shape a method instance is built for. */
typedef struct lc_attn_shape {
    int32_t n_layer, n_head, n_kv_head, head_dim, n_ctx_train;
} lc_attn_shape;

/* The diagnostics of a context (lc_context_params) a sparse method instance follows; a NULL
 * pointer where one is taken: none. */
typedef struct lc_attn_diag {
    bool    sparse_always;          /* never fall back to dense attention where the budget
                                       covers every key */
    int64_t trace_begin, trace_end; /* InfiniteHiP: the traced span (begin < end), else none */
} lc_attn_diag;

/* An InfiniteHiP instance (attn/infinitehip.c); p is validated here. */
int lc_attn_infinitehip_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_infinitehip_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out);

/* The query blocks and final selections of a sparse method's last forward (prefill blocks
 * only), as host copies (evaluation: recall of the true attention mass). */
typedef struct lc_hip_last {
    bool           sparse;   /* false: that forward fell back to dense (every key read) */
    int32_t        n_sink, n_groups, n_qb, sel_cap;
    lc_hip_qblock *qb;       /* [n_qb] */
    lc_hip_seg    *sel;      /* [n_qb][n_groups][sel_cap] */
    int32_t       *sel_n;    /* [n_qb][n_groups] */
    /* InfiniteHiP: every stage's output (stage n_stages - 1 is sel); 0 stages for the others */
    int32_t        n_stages;
    int32_t        stage_cap[LC_HIP_MAX_STAGES];
    lc_hip_seg    *stage_sel[LC_HIP_MAX_STAGES]; /* [n_qb][n_groups][stage_cap[i]] */
    int32_t       *stage_n[LC_HIP_MAX_STAGES];   /* [n_qb][n_groups] */
} lc_hip_last;
int  lc_attn_infinitehip_last(const lc_attn_method *m, lc_hip_last *out);
/* Any method: its last() (LC_ERR_UNSUPPORTED for dense). */
int  lc_attn_last(const lc_attn_method *m, lc_hip_last *out);
void lc_attn_hip_last_free(lc_hip_last *l);

/* HiP (attn/hip.c) and TokenSelect (attn/tokenselect.c) instances; p validated here. */
int lc_attn_hipattn_create(lc_backend *b, const lc_attn_shape *shape, const lc_hipattn_params *p,
                           const lc_attn_diag *diag, lc_attn_method **out);
int lc_attn_tokenselect_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_tokenselect_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out);
/* The method a context's settings name (p->attn with its settings, and its diagnostics): the
 * static dense instance or a new one (free with lc_attn_method_free). */
int lc_attn_create(lc_backend *b, const lc_attn_shape *shape, const lc_context_params *p,
                   lc_attn_method **out);

/* Free an instance made by a *_create (static instances are left alone). */
void lc_attn_method_free(lc_attn_method *m);

#endif
