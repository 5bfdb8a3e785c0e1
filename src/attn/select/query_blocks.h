/*
 * query_blocks.h — what the sparse methods (InfiniteHiP, HiP, TokenSelect, StreamingLLM) share
 * around their selection and attention ops: cutting a batch into query blocks (prefill blocks
 * first, then one block per decode sequence), the plan image a forward's kernels read (the
 * blocks, and for batched decode each decode block's cache slot and refresh stage per layer;
 * backend.h "Batched decode"), the pools of per-sequence decode caches, the workspace of the
 * prefill selections, the copy of the last prefill selections for evaluation (lc_last_selection), and
 * the scaffolding every sparse method's instance repeats (its creation, the layer check, the
 * per-(sequence, layer) state that holds a pool slot, the plan over every layer, the launch
 * sizes of a planned batch, the prefill blocks' sparse attention).
 */
#ifndef LC_ATTN_QUERY_BLOCKS_H
#define LC_ATTN_QUERY_BLOCKS_H

#include "attn/attn.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct sel_ws {
    lc_backend    *b;
    int32_t        n_groups; /* selections per block */
    int32_t        sel_cap;  /* segments per (block, group) prefill list; 0: no prefill lists */
    int32_t        n_sink;   /* for lc_last_selection */
    int32_t        n_layer;  /* layers of the plan */
    bool           lists;    /* the image keeps list / from rows */
    /* The plan image of a forward (lc_attn_method.plan): the blocks [qb_cap], then per layer
     * the decode blocks' list and from rows ([n_layer][qb_cap] each, decode block j at j;
     * backend.h "Batched decode"). Host copy, backend copy, the bytes last uploaded. */
    unsigned char *h_img, *d_img, *up_img;
    size_t         img_bytes;
    bool           up_valid;   /* up_img is what d_img holds */
    lc_qblock *h_qb, *d_qb;
    int32_t       *h_list, *h_from, *d_list, *d_from;
    int32_t        qb_cap;
    uint64_t       epoch;      /* bumped when the images move (graphs point into d_img) */
    lc_segment    *d_sel;      /* [qb_cap][n_groups][sel_cap] prefill selections */
    int32_t       *d_n;        /* [qb_cap][n_groups] */
    /* the plan of the current forward: its blocks, and which layers' forwards it is for (a
       forward that finds its layer unplanned — a caller that does not plan — plans itself) */
    int32_t        n_qb, n_pre;
    bool          *planned;    /* [n_layer] */
    bool           last_sparse;
    int32_t        last_n_pre;
} sel_ws;

/* Ready w for a method over n_layer layers (rows of list / from only with lists). */
int sel_ws_init(sel_ws *w, lc_backend *b, int32_t n_layer, bool lists, int32_t n_groups,
                int32_t sel_cap, int32_t n_sink);

/* The decode caches of a selecting method: per layer, n_lists lists (InfiniteHiP: one per
 * stage's output; HiP: the mask; TokenSelect: the selection) of cap[layer][i] segments per
 * (slot, group), with their counts, and optionally (sel_pool_keep_queries) per slot the query
 * fingerprint its selection came from and whether it holds one (TokenSelect's selection cache).
 * A (sequence, layer) state takes a slot of its layer and keeps it while it lives; the pools grow
 * by doubling (the caches copied over, epoch bumped). */
typedef struct sel_pool {
    lc_backend  *b;
    int32_t      n_layer, n_lists, n_groups;
    int32_t     *cap;     /* [n_layer][n_lists] */
    int32_t      n_slots; /* of every layer */
    lc_segment **seg;     /* [n_layer][n_lists] -> [n_slots][n_groups][cap] */
    int32_t    **n;       /* [n_layer][n_lists] -> [n_slots][n_groups] */
    uint8_t     *used;    /* [n_layer][n_slots] */
    uint64_t     epoch;
    int32_t      q_len;   /* floats of a slot's fingerprint (0: none kept) */
    float      **q;       /* [n_layer] -> [n_slots][q_len] */
    int32_t    **q_valid; /* [n_layer] -> [n_slots]: the slot holds a fingerprint (zeroed on take) */
    lc_segment  *h_reads;   /* sel_decode_reads' host copy: [n_groups][cap] */
    int32_t     *h_reads_n; /* [n_groups] */
    size_t       h_reads_cap;
} sel_pool;
int  sel_pool_init(sel_pool *p, lc_backend *b, int32_t n_layer, int32_t n_lists,
                   int32_t n_groups, const int32_t *cap);
/* Keep a fingerprint of q_len floats per slot too (after sel_pool_init, before any take). */
int  sel_pool_keep_queries(sel_pool *p, int32_t q_len);
/* A free slot of layer's pools (growing them), its counts (and fingerprint flag) zeroed. */
int  sel_pool_take(sel_pool *p, int32_t layer, int32_t *slot);
void sel_pool_give(sel_pool *p, int32_t layer, int32_t slot);
void sel_pool_release(sel_pool *p);
static inline lc_segment *sel_pool_seg(const sel_pool *p, int32_t layer, int32_t i) {
    return p->seg[(size_t)layer * (size_t)p->n_lists + (size_t)i];
}
static inline int32_t *sel_pool_n(const sel_pool *p, int32_t layer, int32_t i) {
    return p->n[(size_t)layer * (size_t)p->n_lists + (size_t)i];
}
static inline int32_t sel_pool_cap(const sel_pool *p, int32_t layer, int32_t i) {
    return p->cap[(size_t)layer * (size_t)p->n_lists + (size_t)i];
}

/* A launch size (a candidate count) rounded up to one of 8 steps per power of two, so that a
 * decode step keeps its launch shape (and graph) while its sequences grow by up to 1/8. */
int32_t sel_launch_bucket(int32_t x);

/* Mix v into the hash h (graph keys). */
static inline uint64_t sel_key_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xBF58476D1CE4E5B9ull;
}
/* sel_key_mix of v[0], ..., v[n - 1] in turn into h. */
static inline uint64_t sel_key_mix_all(uint64_t h, const uint64_t *v, int32_t n) {
    for (int32_t i = 0; i < n; i++) h = sel_key_mix(h, v[i]);
    return h;
}
#define SEL_N_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

/* The sink + streaming-window rule of InfiniteHiP and HiP (backend.h): the first window key of a
 * block whose first row is at pos0. */
static inline int32_t sel_win0_stream(int32_t n_sink, int32_t n_stream, int32_t pos0) {
    const int32_t a = n_sink < pos0 + 1 ? n_sink : pos0 + 1;
    const int32_t w = pos0 + 1 - n_stream;
    return a > w ? a : w;
}

/* win0 of a block of n_rows rows from pos0 (the method's sink / window rule) */
typedef int32_t (*sel_win0_fn)(const void *params, int32_t pos0, int32_t n_rows);

/* The rows of the query block that starts at position pos of a prefill slice ending at end
 * (exclusive). Blocks end at multiples of block_rows in position, so they do not depend on how
 * the scheduler cut the prompt into forwards. With tail_block > 0 and a known prompt end
 * (prompt_end > 0), the prompt's last block_rows rows [prompt_end - block_rows, prompt_end)
 * are cut instead into blocks of tail_block rows counted from their start: the question at
 * the end of a long prompt gets selections of its own, not ones shared with (and outvoted by)
 * the text before it (issue 21 part 4: the question's block never selected the answer). */
int32_t sel_block_len(int32_t pos, int32_t end, int32_t block_rows, int32_t prompt_end,
                      int32_t tail_block);

/* How many blocks sel_cut_blocks makes of the batch. */
int32_t sel_count_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                         int32_t tail_block);
/* Cut the batch into qbs (room for sel_count_blocks): prefill sequences as sel_block_len cuts
 * them, then one block per decode sequence; *n_pre = prefill blocks. Returns the block count. */
int32_t sel_cut_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                       int32_t tail_block, sel_win0_fn win0, const void *params,
                       lc_qblock *qbs, int32_t *n_pre);
/* The two into w->h_qb (growing the workspace): the plan's n_qb and n_pre. */
int     sel_plan_blocks(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                        int32_t tail_block, sel_win0_fn win0, const void *params);
/* Upload the plan image (asynchronously when the backend can) unless the backend holds it. */
int     sel_plan_upload(sel_ws *w);
/* Mark every layer planned (after a whole plan). */
void    sel_plan_mark(sel_ws *w);
/* Whether layer's forward has a plan; clears the mark (the next forward of it needs another). */
bool    sel_plan_take(sel_ws *w, int32_t layer);
void    sel_ws_release(sel_ws *w);
/* the last forward's prefill selections (lc_attn_method.last) */
int     sel_ws_last(const sel_ws *w, lc_last_selection *out);

/* ---- what every sparse method's instance does alike ---- */

/* A new instance: *out = a copy of ops (name, flags, functions) whose impl is impl_size zeroed
 * bytes (freed with sel_method_free). has_ops: the backend has the kernels the method needs;
 * else LC_ERR_UNSUPPORTED "<name>: the <backend> backend has no sparse attention". */
int  sel_method_new(lc_backend *b, bool has_ops, const lc_attn_method *ops, size_t impl_size,
                    lc_attn_method **out);
/* Free what sel_method_new allocated (the caller has released what its impl holds). */
void sel_method_free(lc_attn_method *m);

/* LC_OK for 0 <= layer < n_layer, else LC_ERR_INVALID_ARG "<method>: layer L of N". */
int sel_check_layer(const char *method, int32_t layer, int32_t n_layer);

/* The checks that open a sparse method's forward of layer, in this order: sel_check_layer; then
 * SEL_RUN_DENSE for the first dense_layers layers (the caller runs b->attn_dense); then, where
 * the backend lacks the method's ops (has_ops false), LC_ERR_UNSUPPORTED "<method>: the
 * <backend> backend lacks the sparse ops". LC_OK: the layer runs sparse. */
#define SEL_RUN_DENSE 1
int sel_forward_check(const char *method, const lc_backend *b, bool has_ops, int32_t layer,
                      int32_t n_layer, int32_t dense_layers);

/* Per (sequence, layer) state of a method whose decode caches live in a sel_pool: its slot of
 * the layer's pool, and the refresh state of the slot's lists (InfiniteHiP: one per stage;
 * HiP: valid[0], its mask). */
typedef struct sel_slot_state {
    int32_t layer, slot;
    int64_t step;                  /* decode steps since the lists were last (re)computed */
    bool    valid[LC_HIP_MAX_STAGES];
    bool    fresh;                 /* the last plan recomputes its final list in a decode forward
                                      (lc_decode_reads.fresh) */
} sel_slot_state;
/* A state holding a slot of layer's pool (what: the allocation's name in a failure message);
 * LC_ERR_INVALID_ARG "<method>: layer L of N" for a layer the pool does not have. */
int  sel_slot_state_create(sel_pool *pool, const char *method, const char *what, int32_t layer,
                           void **out);
/* Give its slot back and free it (NULL: nothing). */
void sel_slot_state_free(sel_pool *pool, void *state);
/* lc_attn_method.decode_reads over a pool: list `list` of the state's slot (the list its decode
 * attention reads), downloaded into the pool's host buffer when the state is fresh. */
int  sel_decode_reads(sel_pool *pool, int32_t list, const sel_slot_state *state, int32_t n_sink,
                      int32_t n_stream, lc_decode_reads *r);

/* A method's plan of one layer of the planned batch (states: the batch's sequences' states of
 * that layer, NULL where none). */
typedef int (*sel_plan_layer_fn)(void *impl, int32_t layer, const lc_attn_seq *seqs,
                                 int32_t n_seqs, void *const *states);
/* The layer part of lc_attn_method.plan: plan_layer for every layer of w (states[s][l]:
 * sequence s's state of layer l; states NULL: none), then upload the plan image and mark every
 * layer planned. */
int  sel_plan_layers(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, void **const *states,
                     sel_plan_layer_fn plan_layer, void *impl);

/* The launch sizes of the planned blocks of w (sel_plan_blocks). Candidates of a block: the
 * keys [n_sink, win0) between the sink and its window. */
typedef struct sel_sizes {
    int32_t pre_rows;   /* most rows of a prefill block (at least 1) */
    int32_t max_rows;   /* most rows of any block (at least 1) */
    int32_t pre_cand;   /* most candidates of a prefill block */
    int32_t dec_cand;   /* most candidates of a decode block, rounded up by sel_launch_bucket
                           (decode launch shapes hold while sequences grow) */
    int32_t max_cand;   /* most candidates of any block (not rounded) */
    int32_t max_window; /* most keys of a block's window [win0, pos0 + n_rows) (at least 1) */
    int64_t max_end;    /* the last block row's position + 1 */
} sel_sizes;
void sel_plan_sizes(const sel_ws *w, int32_t n_sink, sel_sizes *out);

/* Whether attention re-indexes positions StreamingLLM-style (and selection scores at relative
 * ones) under the rope setting (lc_hip_rope_mode) for a batch reaching max_end: always with
 * extend, past the model's trained context with auto and stream, never with plain. */
static inline bool sel_rope_extends(int32_t rope, int64_t max_end, int32_t n_ctx_train) {
    return rope == LC_HIP_ROPE_EXTEND ||
           ((rope == LC_HIP_ROPE_AUTO || rope == LC_HIP_ROPE_STREAM) && max_end > n_ctx_train);
}

/* The sparse attention of the plan's prefill blocks (w->d_qb[0, n_pre)) over their selections
 * in w->d_sel / d_n (aa's other fields set by the caller; max_rows: the most rows of a prefill
 * block); they become the selections sel_ws_last copies. */
int sel_attend_prefill(sel_ws *w, lc_backend *b, const lc_kv_layer_view *kv,
                       const lc_attn_seq *seqs, int32_t n_seqs, const float *q, int32_t n_head,
                       const lc_rope_table *rope, float scale, int32_t max_rows,
                       lc_attn_segments_args *aa, float *out);

#endif
