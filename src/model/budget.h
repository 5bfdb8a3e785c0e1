/*
 * budget.h — what a model and a context will need in memory, computed before anything is
 * allocated, and the checks that refuse a load or a context the machine cannot hold (DESIGN.md
 * "Memory is accounted"), with the numbers and what would fit. lc_model_load and
 * lc_context_create call them unless their params set overcommit.
 */
#ifndef LC_BUDGET_H
#define LC_BUDGET_H

#include "model/model.h"

#include <stdint.h>

/* Rows of the RoPE table a context starts with (then grown on demand, doubling, up to n_ctx):
 * min(n_ctx, max(LC_ROPE_MIN_ROWS, the positions the attention method reads at fixed offsets)). */
#define LC_ROPE_MIN_ROWS 4096
int32_t lc_budget_rope_rows0(const lc_context_params *p);

/* Bytes of the weights of a model as its backend will hold them (what lc_model_load's
 * weight_bytes will be): matrices 4 bytes an element when the backend's weight_type is f32,
 * else 2; vectors (norms, biases) f32. Reads the tensor table of m->gguf only. */
uint64_t lc_budget_weight_bytes(const lc_model *m);
/* Refuse (LC_ERR_NOMEM, message with the numbers) weights that do not fit the memory of m's
 * backend. */
int lc_budget_check_weights(const lc_model *m);

/* Pages of the KV slot cache (kv_slot_cache_tokens; device pages besides kv_tokens'). */
int64_t lc_budget_kv_slot_pages(const lc_context_params *p);
/* Pages asked for the KV host tier: kv_host_tokens in pages, at most the capacity's. */
int64_t lc_budget_kv_host_pages(const lc_context_params *p);

/* What a context with the (defaulted, validated) params p needs. */
typedef struct lc_ctx_budget {
    uint64_t kv_bytes;        /* KV page pools (backend memory) */
    uint64_t kv_per_token;    /* of them, per token of capacity */
    uint64_t kv_host_bytes;   /* of kv_bytes, the pinned host tier (kv_host_tokens; on the CPU
                                 backend counted in kv_bytes' host memory anyway) */
    uint64_t rope_bytes;      /* the RoPE table at its largest (backend memory) */
    uint64_t rope_per_row;
    uint64_t ws_bytes;        /* forward workspace (backend memory) */
    uint64_t host_bytes;      /* host buffers: logits and tokens per sequence, step scratch, and
                                 (backend not on the host) the RoPE table's staging copy */
    uint64_t backend_reserve; /* kept free on a GPU for scratch that grows with use */
} lc_ctx_budget;
void lc_budget_context(const lc_model *m, const lc_context_params *p, lc_ctx_budget *out);
/* Refuse (LC_ERR_NOMEM) a context that does not fit, naming the numbers and the most tokens
 * that would. */
int lc_budget_check_context(const lc_model *m, const lc_context_params *p);

#endif
