/*
 * dense.c — the dense attention method: every query reads every earlier key of its sequence,
 * rotated with its true position. The baseline that sparse methods are measured against.
 */
#include "attn/attn.h"

#include "util/util.h"

static int dense_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    (void)m;
    return lc_attn_call_dense(b, call);
}

const lc_attn_method lc_attn_dense = {
    .name         = "dense",
    .impl         = NULL,
    .needs_raw_q  = false,
    .graph_safe   = true,
    .kv_fp8       = true, /* attn_dense */
    .state_create = NULL,
    .state_free   = NULL,
    .forward      = dense_forward,
    .destroy      = NULL,
};

/* no settings */
const lc_attn_desc lc_attn_desc_dense = {
    .name     = "dense",
    .summary  = "every query reads every earlier key (no settings)",
    .settings = {"dense", 0, NULL, NULL, 0, NULL, 0, NULL},
    .validate = NULL,
    .create   = NULL, /* lc_attn_create hands out the static lc_attn_dense */
};
