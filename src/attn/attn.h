/*
 * attn.h — the attention-method interface (DESIGN.md "Attention methods"): one struct of
 * function pointers per method, with per-(sequence, layer) state owned by the sequence. The
 * model forward calls method->forward for every layer with the batch's rotated queries (and,
 * for methods that re-assign positions, the same queries before RoPE); the method decides
 * which keys each query reads and calls the backend's kernels. Methods (registry.c): dense (a
 * static instance); infinitehip, hip, tokenselect and streaming (an instance per context,
 * holding its settings, workspace and per-layer decode-cache pools; select/query_blocks.h).
 */
#ifndef LC_ATTN_H
#define LC_ATTN_H

#include "attn/settings.h"
#include "backend/backend.h"

struct lc_last_selection;

/* One layer's attention of a batch, as the model forward hands it to a method. */
typedef struct lc_attn_call {
    int32_t                 layer;
    const lc_kv_layer_view *kv;     /* the layer's paged keys and values */
    const lc_attn_seq      *seqs;   /* [n_seqs] the batch's sequences and their rows */
    int32_t                 n_seqs;
    void *const            *states; /* [n_seqs] each sequence's state of this layer (or NULL) */
    const float            *q;      /* [rows][n_head][head_dim], rotated at the true positions */
    const float            *q_raw;  /* the same before RoPE (NULL unless needs_raw_q) */
    int32_t                 n_head;
    const lc_rope_table    *rope;
    float                   scale;
    float                  *out; /* [rows][n_head][head_dim] */
} lc_attn_call;

/* Dense attention over every earlier key for a call (every method's fallback). */
static inline int lc_attn_call_dense(lc_backend *b, const lc_attn_call *c) {
    return b->attn_dense(b, c->kv, c->seqs, c->n_seqs, c->q, c->n_head, c->rope, c->scale, c->out);
}

/* What the decode attention of the last forward read for one sequence at one layer
 * (lc_attn_method.decode_reads): the slot cache of host-tier slabs learns a sequence's reads
 * from it (kv/slab_bank.h). */
typedef struct lc_decode_reads {
    bool              fresh;    /* its selection was recomputed in that forward; false: nothing
                                   else is set (the reads are those reported before) */
    int32_t           n_groups; /* lists: 1 (every KV head reads list 0) or n_kv_head (head g
                                   reads list g) */
    int32_t           cap;      /* segments a list has room for */
    const lc_segment *sel;      /* [n_groups][cap] host copies, valid until the next call
                                   (NULL: no lists, sink and window only) */
    const int32_t    *sel_n;    /* [n_groups] */
    int32_t           n_sink;   /* besides the lists: keys [0, n_sink) and the n_stream last */
    int32_t           n_stream;
} lc_decode_reads;

typedef struct lc_attn_method {
    const char *name;
    void       *impl;        /* the method's settings and workspace; NULL for dense */
    bool        needs_raw_q; /* forward must pass the queries before RoPE too */
    bool        graph_safe;  /* a decode step may be captured and replayed as a graph (its
                                forwards issue device work only, fixed by plan's key) */
    bool        kv_fp8;      /* every op it runs reads the fp8 KV layout (backend.h
                                LC_KV_E4M3): an fp8 KV cache may serve it */
    /* Per-(sequence, layer) state; may be NULL for stateless methods. */
    int (*state_create)(const struct lc_attn_method *m, int32_t layer, void **state);
    void (*state_free)(const struct lc_attn_method *m, void *state);
    /* call->out = attention of the batch's queries over the layer's paged KV. */
    int (*forward)(const struct lc_attn_method *m, lc_backend *b, const lc_attn_call *call);
    /* Once per model forward, before any layer's ops (and before a decode step is captured or
     * replayed as a graph): the host's part of every layer's forward of this batch — cut the
     * query blocks, decide per layer the dense shortcut and which cached selections each
     * decode sequence recomputes, advance the sequences' decode state, upload what the kernels
     * read. forward then issues device work only, fixed by *key (a hash of those decisions and
     * launch sizes): a graph captured under one key is right for any batch planned to it.
     * states[s][l]: sequence s's state of layer l (NULL: none). NULL: nothing to plan (dense).
     * A forward of a layer the last plan did not cover (a caller that does not plan) plans
     * that layer itself. */
    int (*plan)(const struct lc_attn_method *m, const lc_attn_seq *seqs, int32_t n_seqs,
                void **const *states, uint64_t *key);
    void (*destroy)(struct lc_attn_method *m); /* NULL for static instances */
    /* The last forward's prefill selections (evaluation); NULL for dense. */
    int (*last)(const struct lc_attn_method *m, struct lc_last_selection *out);
    /* Decode selection counters since creation; NULL: none kept. */
    int (*stats)(const struct lc_attn_method *m, lc_attn_stats *out);
    /* *r = what the last forward's decode attention read for the sequence whose state of
     * layer is `state` (lc_decode_reads; a download when fresh). NULL: the method's decode
     * reads are not known ahead (dense reads every key). */
    int (*decode_reads)(const struct lc_attn_method *m, int32_t layer, const void *state,
                        lc_decode_reads *r);
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

/* The query blocks and final selections of a sparse method's last forward (prefill blocks
 * only), as host copies (evaluation: recall of the true attention mass). */
typedef struct lc_last_selection {
    bool           sparse;   /* false: that forward fell back to dense (every key read) */
    int32_t        n_sink, n_groups, n_qb, sel_cap;
    lc_qblock *qb;       /* [n_qb] */
    lc_segment    *sel;      /* [n_qb][n_groups][sel_cap] */
    int32_t       *sel_n;    /* [n_qb][n_groups] */
    /* InfiniteHiP: every stage's output (stage n_stages - 1 is sel); 0 stages for the others */
    int32_t        n_stages;
    int32_t        stage_cap[LC_HIP_MAX_STAGES];
    lc_segment    *stage_sel[LC_HIP_MAX_STAGES]; /* [n_qb][n_groups][stage_cap[i]] */
    int32_t       *stage_n[LC_HIP_MAX_STAGES];   /* [n_qb][n_groups] */
} lc_last_selection;
int  lc_attn_infinitehip_last(const lc_attn_method *m, lc_last_selection *out);
/* Any method: its last() (LC_ERR_UNSUPPORTED for dense). */
int  lc_attn_last(const lc_attn_method *m, lc_last_selection *out);
void lc_attn_last_free(lc_last_selection *l);


/* The RoPE policy of the sparse methods' selection and attention (their "rope" setting). */
typedef enum lc_hip_rope_mode {
    LC_HIP_ROPE_AUTO   = 0, /* plain RoPE while a sequence fits the model's trained context,
                               the re-indexing strategies past it */
    LC_HIP_ROPE_EXTEND = 1, /* always re-index (chunk-indexed / relative in pruning,
                               StreamingLLM in attention) */
    LC_HIP_ROPE_PLAIN  = 2, /* always the true positions */
    LC_HIP_ROPE_STREAM = 3, /* ours: pruning always scores at the true positions; the attention
                               re-indexes StreamingLLM-style past the trained context */
} lc_hip_rope_mode;

/* One attention method as the registry (attn/registry.c) lists it. */
typedef struct lc_attn_desc {
    const char             *name;     /* as --attn takes it: "infinitehip" */
    const char             *summary;  /* one line */
    const lc_settings_table settings; /* its settings struct, table and presets */
    /* checks across keys (lc_settings_check has checked each key's range); NULL: none */
    int (*validate)(const void *settings);
    /* an instance with these settings (validated) */
    int (*create)(lc_backend *b, const lc_attn_shape *shape, const void *settings,
                  const lc_attn_diag *diag, lc_attn_method **out);
    /* RoPE table rows read at fixed offsets (relative scoring past the window, fingerprints
     * past the local window), for the memory estimate; NULL: none */
    int64_t (*fixed_rope_rows)(const void *settings, int32_t n_batch);
} lc_attn_desc;

/* lc_attn_desc.create for a method whose own create takes its settings struct T (typed, for
 * direct callers such as the benchmarks): defines the static function `name`. */
#define LC_ATTN_TYPED_CREATE(name, create_fn, T)                                                  \
    static int name(lc_backend *b, const lc_attn_shape *shape, const void *settings,              \
                    const lc_attn_diag *diag, lc_attn_method **out) {                             \
        return create_fn(b, shape, (const T *)settings, diag, out);                               \
    }
/* lc_attn_desc.fixed_rope_rows of a method whose relative scoring reads the RoPE row
 * n_stream + 1 (T: its settings struct, with n_stream): defines the static function `name`. */
#define LC_ATTN_ROPE_ROWS_PAST_STREAM(name, T)                                                    \
    static int64_t name(const void *settings, int32_t n_batch) {                                  \
        (void)n_batch;                                                                            \
        return (int64_t)((const T *)settings)->n_stream + 2;                                      \
    }

/* The registered method of that name (NULL or "dense": dense); NULL with an error naming the
 * known methods if none. */
const lc_attn_desc *lc_attn_find(const char *name);
/* A method's settings from a settings string (NULL: its default preset; else "preset=NAME
 * key=value ...", over the default preset when it names none): a malloc'd struct of
 * d->settings.size bytes (caller frees), each key in range and validated. */
int lc_attn_settings_parse(const lc_attn_desc *d, const char *settings, void **out);
/* Every key of settings in range (lc_settings_check), then d->validate. */
int lc_attn_settings_validate(const lc_attn_desc *d, const void *settings);
/* RoPE rows a context's method reads at fixed offsets (0: none, or settings that do not parse:
 * lc_attn_create reports those). */
int64_t lc_attn_fixed_rope_rows(const lc_context_params *p);

/* The method a context's settings name (p->attn with p->attn_settings, and its diagnostics):
 * the static dense instance or a new one (free with lc_attn_method_free). */
int lc_attn_create(lc_backend *b, const lc_attn_shape *shape, const lc_context_params *p,
                   lc_attn_method **out);

/* Free an instance made by a *_create (static instances are left alone). */
void lc_attn_method_free(lc_attn_method *m);

#endif
