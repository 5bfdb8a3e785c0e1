/*
 * engine.h — internal entry points of the engine beside the public lc_context API: a context
 * over a caller-made attention method (evaluation probes wrap a method to compare it with
 * dense attention on the same forward).
 */
#ifndef LC_ENGINE_H
#define LC_ENGINE_H

#include "attn/attn.h"
#include "longctx.h"

/* Like lc_context_create, with attention by method (not freed with the context; it must
 * outlive it). NULL method: params->attn decides, as in lc_context_create. */
int lc_context_create_with_method(lc_model *m, const lc_context_params *params,
                                  const lc_attn_method *method, lc_context **out);

/* The RoPE table (sized by the positions sequences reach, grown on demand): its rows now, and
 * making it cover positions [0, n_pos) at once (capped at n_ctx). For tests. */
int32_t lc_context_rope_rows(const lc_context *c);
int     lc_context_rope_reserve(lc_context *c, int64_t n_pos);

#endif
