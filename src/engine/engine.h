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

#endif
