/*
 * eval_common.h — pieces shared by the evaluation commands (cmd_eval.c: passkey, fidelity,
 * ppl; cmd_eval_suite.c: the natural-text suite): a growable token buffer, the xorshift
 * generator the trials draw from, a chat prompt split around the user's text so that a
 * prompt can be assembled from token ids, and a context made anew for a traced trial.
 */
#ifndef LC_EVAL_COMMON_H
#define LC_EVAL_COMMON_H

#include "gen.h"

typedef struct tokbuf {
    int32_t *ids;
    size_t n, cap;
} tokbuf;

/* Append n ids (ids may be NULL when n is 0). false: out of memory. */
bool tb_push(tokbuf *b, const int32_t *ids, size_t n);

/* An lc_progress_fn: done/total tokens to the cli_progress in user. */
void eval_progress_tokens(int64_t done, int64_t total, void *user);

/* xorshift64; *s must not be 0 */
uint64_t eval_rng_next(uint64_t *s);
/* uniform in [0, 1) */
double eval_rng_unit(uint64_t *s);

/* The model's chat template (tmpl, or the model's own when LC_CHAT_NONE) around one user
 * message, as the ids before and after the message text: the template's markers as special
 * tokens, its other text (e.g. a default system prompt) as plain text. *pre and *post are
 * malloc'd (NULL when empty). Prints the failure and returns its status; no_chat_option (may
 * be NULL): the command's option for prompts without a template, named when the model has
 * none. */
int eval_chat_split(const char *cmd, const lc_model *m, lc_chat_template tmpl,
                    const char *no_chat_option, int32_t **pre, size_t *n_pre, int32_t **post,
                    size_t *n_post);

/* Free *ctx and make a new context of o (gen_context with need_ctx) in its place: how --trace
 * gives each trial its traced span (o->trace_begin / trace_end, a context parameter). base (may
 * be NULL) accumulates the freed context's decode selection counters, so that base plus the
 * new context's counters (eval_attn_stats) count the whole run. CLI_OK or CLI_ERR (printed). */
int eval_context_renew(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                       lc_context **ctx, lc_attn_stats *base);
/* base + ctx's decode selection counters. */
int eval_attn_stats(const lc_context *ctx, const lc_attn_stats *base, lc_attn_stats *out);

#endif
