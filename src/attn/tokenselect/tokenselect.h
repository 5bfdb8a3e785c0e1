/*
 * tokenselect.h — TokenSelect's settings struct (spec/tokenselect-and-sparseserve.md A.3,
 * A.7), private to the library and its tests: the table and presets are in
 * tokenselect/settings.c, the method in tokenselect/tokenselect.c.
 */
#ifndef LC_ATTN_TOKENSELECT_H
#define LC_ATTN_TOKENSELECT_H

#include "attn/attn.h"

/* Every query (decode) or prefill chunk of `chunk` rows reads the n_init first tokens, the k
 * tokens of highest soft vote among the others and the n_local most recent; a decode step
 * reuses the previous selection of its (sequence, layer) while its query's cosine with the
 * cached one is >= theta. */
typedef struct lc_tokenselect_params {
    int32_t k;            /* tokens selected, >= 1 (2048) */
    int32_t n_init;       /* sink tokens (128) */
    int32_t n_local;      /* most recent tokens (512), >= chunk (a chunk sees itself) */
    int32_t chunk;        /* prefill rows sharing one selection (512), 1 .. 4096 */
    float   theta;        /* selection-cache threshold in [-1, 1] (0.9); > 1 (e.g. 2): no cache */
    int32_t gqa_mod;      /* 1: score query head h against KV head h mod n_kv_head (the paper's
                             code); 0: the model's own mapping h / group (default) */
    int32_t rope;         /* lc_hip_rope_mode: auto (re-index past the trained window), extend
                             (always), plain (never) */
    int32_t dense_layers; /* layers [0, dense_layers) run dense attention (0) */
    int32_t tail_block;   /* ours: the prompt's last `chunk` rows select in chunks of this many
                             rows, 1 .. chunk, so the question at a long prompt's end is not
                             averaged into one query with the text before it (16; 0: chunks of
                             `chunk` throughout, the paper's) */
} lc_tokenselect_params;

extern const lc_attn_desc lc_attn_desc_tokenselect; /* its registry entry */

/* An instance (tokenselect/tokenselect.c); p is validated here. */
int lc_attn_tokenselect_create(lc_backend *b, const lc_attn_shape *shape,
                               const lc_tokenselect_params *p, const lc_attn_diag *diag,
                               lc_attn_method **out);

#endif
