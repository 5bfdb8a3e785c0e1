/*
 * attn.h — the attention-method interface (DESIGN.md "Attention methods"): one struct of
 * function pointers per method, with per-(sequence, layer) state owned by the sequence. The
 * model forward calls method->forward for every layer with the batch's rotated queries; the
 * method decides which keys each query reads (dense: all of them) and calls the backend's
 * kernels. Sparse methods (hip, infinitehip, tokenselect) plug in here.
 */
#ifndef LC_ATTN_H
#define LC_ATTN_H

#include "backend/backend.h"

typedef struct lc_attn_method {
    const char *name;
    /* Per-(sequence, layer) state; may be NULL for stateless methods. */
    int (*state_create)(const struct lc_attn_method *m, int32_t layer, void **state);
    void (*state_free)(void *state);
    /* out[n_rows][n_head][head_dim] = attention of the batch's queries over the paged KV. */
    int (*forward)(const struct lc_attn_method *m, lc_backend *b, int32_t layer,
                   const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                   void *const *states, const float *q, int32_t n_head,
                   const lc_rope_table *rope, float scale, float *out);
} lc_attn_method;

/* The methods. NULL for an unknown name. */
const lc_attn_method *lc_attn_method_find(const char *name);
extern const lc_attn_method lc_attn_dense;

#endif
