/*
 * infinitehip.h — InfiniteHiP's settings struct (spec/infinitehip-and-hip.md §3.6; paper
 * 000_ced830aa0d9eb0ea.txt), private to the library and its tests: the table and presets that
 * fill it are in infinitehip/settings.c, the method in infinitehip/infinitehip.c.
 */
#ifndef LC_ATTN_INFINITEHIP_H
#define LC_ATTN_INFINITEHIP_H

#include "attn/attn.h"

/* Stage i keeps k[i] tokens as k[i] / chunk[i] chunks of its input; the last stage's k is the
 * selection the attention reads, besides the n_sink first and the n_stream most recent tokens.
 * In decode, stage i is recomputed every refresh[i] steps (and whenever an earlier stage is). */
typedef struct lc_infinitehip_params {
    int32_t n_stages;                     /* 1 .. LC_HIP_MAX_STAGES */
    int32_t chunk[LC_HIP_MAX_STAGES];     /* l_c: powers of two, each dividing the previous */
    int32_t k[LC_HIP_MAX_STAGES];         /* tokens kept: multiples of the stage's chunk,
                                             non-increasing */
    int32_t refresh[LC_HIP_MAX_STAGES];   /* decode steps between recomputations, >= 1 */
    int32_t q_stride[LC_HIP_MAX_STAGES];  /* query rows mean-pooled per scoring query */
    int32_t block_q;                      /* b_q: query rows per block in prefill, 1 .. 64 */
    int32_t n_sink;                       /* first tokens always attended */
    int32_t n_stream;                     /* most recent tokens always attended, >= 1 */
    int32_t first_layers;                 /* layers [0, first_layers) use chunk-indexed RoPE
                                             in pruning and keep first_k tokens */
    int32_t first_k;                      /* multiple of the last chunk */
    int32_t dense_layers;                 /* layers [0, dense_layers) run dense attention */
    int32_t rope;                         /* lc_hip_rope_mode */
    int32_t per_group;                    /* 0: one selection for all heads (chunk scores
                                             max-pooled over every query head, the paper's and
                                             the reference's default); 1: one per KV head */
    int32_t stagger;                      /* ours: 1 = odd layers start the first stage's chunk
                                             grid half a chunk later, so a passage that
                                             straddles a chunk border in one layer lies whole
                                             in the next (0: the paper's grid in every layer) */
    int32_t overlap;                      /* ours: 1 = the first stage's chunks start every half
                                             chunk (2x its work), so a passage across a chunk
                                             border lies whole in the chunk between; kept
                                             chunks are merged (0: the paper's disjoint chunks) */
    int32_t kv_descent[LC_HIP_MAX_STAGES]; /* ours, per stage: 1 = SelectRep descends once per
                                             KV head, the branch chosen by the max over all its
                                             query heads' queries (one probe per KV head and step
                                             instead of one per query head; the chunk score is
                                             still the max over heads); 0: one descent per query
                                             head (the paper's) */
    int32_t tail_block;                   /* ours: the prompt's last block_q rows (where a
                                             long prompt's question is) select in blocks of
                                             this many rows, 1 .. block_q, so the question's
                                             rows are not outvoted by the text before it in
                                             their block (0: blocks of block_q throughout) */
    int32_t attn_span;                    /* ours: where the attention re-indexes positions
                                             (past the window), 0 = StreamingLLM's (the sink and
                                             the selected keys given consecutive positions just
                                             before the window: the paper's); N > 0 = the gaps
                                             between them kept, compressed so that the attended
                                             span fits N positions (backend.h GAPS) */
} lc_infinitehip_params;

extern const lc_attn_desc lc_attn_desc_infinitehip; /* its registry entry */

/* Cross-key checks (infinitehip/settings.c). */
int lc_infinitehip_validate(const void *settings);
/* An instance (infinitehip/infinitehip.c); p is validated here. */
int lc_attn_infinitehip_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_infinitehip_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out);

#endif
