/*
 * gen.h — the generation driver shared by run, eval and bench: options common to commands
 * that load a model, and one call that feeds a prompt through a context and collects (or
 * streams) the answer with progress and timings.
 */
#ifndef LC_GEN_H
#define LC_GEN_H

#include "cli.h"

typedef struct gen_opts {
    const char      *model;
    lc_device        device;
    lc_weight_format weights;
    int              threads;
    long long        n_ctx;
    long long        n_batch;
    long long        page_size;
    long long        kv_tokens; /* KV capacity; 0: from kv_gb or n_ctx */
    double           kv_gb;     /* KV capacity in GiB; 0: unset */
    bool             overcommit; /* --overcommit: skip the memory checks of load and context */
    lc_sampling      sampling;
    lc_chat_template chat_template; /* NONE: the model's */
    int              profile;       /* lc_profile_mode for the load (bench) */
    bool             check_numerics; /* --check-numerics */
    lc_tuning        tuning;         /* --tune NAME=VALUE (the backend's kernel choices) */
    int64_t          trace_begin, trace_end; /* InfiniteHiP's traced span for the contexts
                                                made from these options (eval --trace sets it
                                                per trial); empty: none */
    const char *attn;               /* --attn: a registered method (lc_attn_methods) */
    char        attn_settings[2048]; /* its settings string ("preset=NAME key=value ..."),
                                       built by gen_opts_check from the options below */
    /* --preset / --attn-set / --hip-* / --ts-* as given, applied by gen_opts_check once the
     * method is known (so their order relative to --attn does not matter); --hip-NAME=VALUE
     * and --ts-NAME=VALUE are --attn-set NAME=VALUE for the methods that have them */
    const char *preset;
    int         n_knobs;
    const char *knob_prefix[64], *knob_name[64], *knob_val[64]; /* prefix "hip", "ts" or "" */
    char        knob_buf[64][64];
} gen_opts;

void gen_opts_default(gen_opts *o);
/* Try to parse argv[*i] as a common option. Returns 1 if consumed, 0 if not ours, -1 on a
 * bad value (message printed). */
int  gen_opts_parse(gen_opts *o, const char *cmd, int argc, char **argv, int *i);
const char *gen_opts_help(void);
/* Whether the options' method is dense. */
bool gen_attn_dense(const gen_opts *o);
/* Build the chosen method's settings string from the method options and check it (e.g.
 * --hip-* without a method that has them). Returns false after printing a message. Idempotent. */
bool gen_opts_check(gen_opts *o, const char *cmd);
/* "dense" or "infinitehip (chunks=... )" for reports. */
void gen_attn_describe(const gen_opts *o, char *buf, size_t cap);
/* The tuning's non-default knobs ("cuda-graphs=off ...") or "default", for reports. */
void gen_tuning_describe(const gen_opts *o, char *buf, size_t cap);

int gen_load(const char *cmd, gen_opts *o, lc_model **model);
/* The attention method settings (and diagnostics) of the options into context parameters. */
void gen_context_attn(const gen_opts *o, lc_context_params *cp);
int gen_context(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                lc_context **ctx);
/* The same, with the context's prefill progress going to progress(user). */
/* The context parameters gen_context uses (for a caller that changes some first). */
int gen_context_params(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                       lc_context_params *out);
int gen_context_progress(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                         lc_progress_fn progress, void *user, lc_context **ctx);

typedef struct gen_result {
    char     *text; /* malloc'd, NUL-terminated */
    size_t    len;
    int64_t   n_prompt;
    int32_t   n_generated;
    double    prompt_s, gen_s;
    double    step_median_s; /* the median time between two generated tokens (0 with fewer
                                than 2): the steady decode step, without one-time costs */
    lc_finish finish;
} gen_result;

/* Run one request to completion. stream: write text to stdout as it comes. progress: show
 * prompt progress on stderr when the prompt is longer than progress_min tokens. */
int gen_run(const char *cmd, lc_context *ctx, const lc_request *req, bool stream,
            int64_t progress_min, gen_result *res);

#endif
