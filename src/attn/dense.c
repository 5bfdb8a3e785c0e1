/*
 * dense.c — the dense attention method: every query reads every earlier key of its sequence,
 * rotated with its true position. The baseline that sparse methods are measured against.
 */
#include "attn/attn.h"

#include <string.h>

static int dense_forward(const lc_attn_method *m, lc_backend *b, int32_t layer,
                         const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                         void *const *states, const float *q, int32_t n_head,
                         const lc_rope_table *rope, float scale, float *out) {
    (void)m, (void)layer, (void)states;
    return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
}

const lc_attn_method lc_attn_dense = {
    .name         = "dense",
    .state_create = NULL,
    .state_free   = NULL,
    .forward      = dense_forward,
};

static const lc_attn_method *const methods[] = {&lc_attn_dense};

const lc_attn_method *lc_attn_method_find(const char *name) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i]->name, name) == 0) return methods[i];
    return NULL;
}
