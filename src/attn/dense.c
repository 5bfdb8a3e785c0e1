/*
 * dense.c — the dense attention method: every query reads every earlier key of its sequence,
 * rotated with its true position. The baseline that sparse methods are measured against. Also
 * what every method shares: the factory that builds the method a context names, and free.
 */
#include "attn/attn.h"

#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static int dense_forward(const lc_attn_method *m, lc_backend *b, int32_t layer,
                         const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                         void *const *states, const float *q, const float *q_raw,
                         int32_t n_head, const lc_rope_table *rope, float scale, float *out) {
    (void)m, (void)layer, (void)states, (void)q_raw;
    return b->attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
}

const lc_attn_method lc_attn_dense = {
    .name         = "dense",
    .impl         = NULL,
    .needs_raw_q  = false,
    .graph_safe   = true,
    .state_create = NULL,
    .state_free   = NULL,
    .forward      = dense_forward,
    .destroy      = NULL,
};

void lc_attn_method_free(lc_attn_method *m) {
    if (m && m->destroy) m->destroy(m);
}

int lc_attn_last(const lc_attn_method *m, lc_hip_last *out) {
    memset(out, 0, sizeof *out);
    if (!m || !m->last)
        return lc_fail(LC_ERR_UNSUPPORTED, "attention method %s keeps no selections",
                       m ? m->name : "(null)");
    return m->last(m, out);
}

int lc_attn_create(lc_backend *b, const lc_attn_shape *shape, const lc_context_params *p,
                   lc_attn_method **out) {
    *out                    = NULL;
    const lc_attn_diag diag = {p->sparse_always, p->trace_begin, p->trace_end};
    switch (p->attn) {
    case LC_ATTN_DENSE: *out = (lc_attn_method *)&lc_attn_dense; return LC_OK;
    case LC_ATTN_INFINITEHIP: return lc_attn_infinitehip_create(b, shape, &p->hip, &diag, out);
    case LC_ATTN_HIP: return lc_attn_hipattn_create(b, shape, &p->hipattn, &diag, out);
    case LC_ATTN_TOKENSELECT:
        return lc_attn_tokenselect_create(b, shape, &p->tokenselect, &diag, out);
    }
    return lc_fail(LC_ERR_INVALID_ARG, "unknown attention method %d", (int)p->attn);
}
