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
    long long        prefill_token_layers; /* 0: chunked prefill; N: layer-segmented */
    long long        page_size;
    long long        kv_tokens; /* KV capacity; 0: from kv_gb or n_ctx */
    double           kv_gb;     /* KV capacity in GiB; 0: unset */
    lc_kv_type       kv_type;   /* --kv-type (LC_KV_AUTO: the backend's) */
    const char      *kv_type_name; /* as given (NULL: not given), checked against the device */
    long long        kv_host_tokens, kv_gpu_tokens; /* the KV tiers (--kv-host-*, --kv-gpu-*); */
    double           kv_host_gb, kv_gpu_gb;          /* 0: unset */
    long long        kv_slot_tokens; /* the slot cache (--kv-slot-cache-*); 0: unset */
    double           kv_slot_gb;
    int              n_seq_max; /* sequences of the context (serve: --parallel); 0: 1 */
    bool             overcommit; /* --overcommit: skip the memory checks of load and context */
    bool             ws_batch_control; /* --ws-batch-control */
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
/* KV bytes one token takes over all layers, K and V, in kv_type: fp16 on the GPU and fp32 on the
 * CPU (LC_KV_AUTO), or the fp8 layout's code per element plus a 4-byte scale per head */
double gen_kv_bytes_per_token(const lc_model_info *info, lc_kv_type kv_type);
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
    bool      interrupted; /* gen_run_opts.interrupt stopped it (finish is then NONE) */
    int32_t   last_token;  /* the last token sampled (-1: none) */
    int       status;      /* the library's status when the request was refused */
} gen_result;

/* Run one request to completion. stream: write text to stdout as it comes. progress: show
 * prompt progress on stderr when the prompt is longer than progress_min tokens. */
/* The repetition penalty `run` and `chat` start from (bench/results/loop-rate-*.md: greedy
 * SmolLM2 answers loop in 12% of 50 prompts without it, 2% with it over the generated tokens
 * only, which run and chat also default to: answers copied from a document stay right;
 * bench/NOTES.md).
 * eval and bench keep 1 (off): their tasks and speeds are measured without it. */
#define GEN_CHAT_REPEAT_PENALTY 1.1f

int gen_run(const char *cmd, lc_context *ctx, const lc_request *req, bool stream,
            int64_t progress_min, gen_result *res);

typedef struct gen_run_opts {
    bool    stream;          /* write the text to stdout as it comes */
    int64_t progress_min;    /* prompt progress for prompts of at least this many tokens */
    bool    decode_progress; /* "generating N/TOTAL tokens, tok/s" on stderr: on a terminal
                                (not when the answer streams to the same terminal), in a log
                                only when the prompt's progress shows */
    const lc_model_info *cpu_note; /* non-NULL: after the first prompt chunk, one line with the
                                      expected prompt time (CPU runs of long prompts) */
    bool    cpu_note_sparse; /* the method is a sparse one (the note's hint says so) */
    volatile const int *interrupt; /* non-NULL: checked before each step; nonzero stops the
                                      request (res->interrupted) */
    int32_t *keep_seq; /* non-NULL: the sequence stays in the context after the request (for
                          the next turn); *keep_seq >= 0 goes on with that sequence
                          (lc_context_continue, keeping n_keep tokens), -1 adds one and
                          writes its id */
    int64_t  n_keep;
    bool     quiet_fail; /* a refused request prints nothing (res->status says why) */
} gen_run_opts;
/* gen_run with every option. */
int gen_run_ex(const char *cmd, lc_context *ctx, const lc_request *req, const gen_run_opts *o,
               gen_result *res);

/* n ordinary (non-control) token ids from a fixed xorshift stream (seed 0: the benchmarks'
 * usual one), the same on every run: prompts for speed measurements. */
void gen_random_prompt(const lc_tokenizer *tok, int32_t n_vocab, uint64_t seed, int32_t *prompt,
                       long long n);

#endif
