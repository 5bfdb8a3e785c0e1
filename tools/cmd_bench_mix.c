/*
 * cmd_bench_mix.c — `longctx bench mix`: what a long prompt arriving at a busy context does to
 * the requests already decoding there, and how long it waits for its own first token, with
 * chunked prefill and with layer-segmented prefill at several token-layer budgets
 * (lc_context_params.prefill_token_layers; SparseServe's maxInjectToken,
 * spec/tokenselect-and-sparseserve.md B). D short requests decode; then one L-token prompt is
 * added and the steps are timed until its first token (the window) and a few after: the decode
 * tokens' inter-token latency in the window (median, p90, p99, max), the decode tokens/s there,
 * the long prompt's time to first token, how far its first-token logits are from those of the
 * prompt run alone and how many of its greedy tokens equal that run's (segmented prefill gives
 * exactly the alone run's; chunked prefill shares its forwards, and the matrices' shapes, with
 * the decode rows, so it may round differently). A table on stdout and
 * DIR/bench-mix-<device>-<model>-<date>.md, the per-step times as a TSV beside it
 * (scripts/plot_bench_mix.py draws them).
 */
#include "gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIX_MAX_SETTINGS 16
#define MIX_BASE_STEPS   16 /* decode steps timed before the long prompt arrives */
#define MIX_TOP          20 /* the reference's tokens the first-token logits are compared on */

static void help(void) {
    printf("usage: longctx bench mix -m FILE [--decoders D] [--decode-prompt P] [--long L]\n"
           "                         [--token-layers LIST] [--after N] [--max-dlogprob X]\n"
           "                         [--out DIR] [options]\n"
           "\n"
           "D requests of P-token prompts decode (greedy, EOS ignored); once each has three\n"
           "tokens and %d more steps are timed, one request of an L-token prompt arrives.\n"
           "The steps are timed until its first token (the window) and N after it. For each\n"
           "value of --token-layers (0: chunked prefill, the prompt's chunk through every layer\n"
           "in the step beside the decode tokens; T > 0: layer-segmented prefill, a chunk of R\n"
           "rows through max(1, T / R) layers a step, see --prefill-token-layers) one context:\n"
           "the decode tokens' inter-token latency in the window (median, p90, p99, max), the\n"
           "decode tokens/s in it and before it, the long prompt's time to first token, how\n"
           "far its first-token logits are from those of the prompt run alone (no decoders,\n"
           "chunked; max |delta log-prob| over that run's top %d) and how many of its N + 1\n"
           "greedy tokens equal that run's. Exit status 1 when a segmented setting's first\n"
           "token differs from the alone run's or its logits are further than\n"
           "--max-dlogprob (chunked prefill is reported: its forwards share matrix shapes\n"
           "with the decode rows). Prompts: random ordinary tokens (speed does not\n"
           "depend on the text for dense attention; sparse methods select on it). Writes\n"
           "DIR/bench-mix-<device>-<model>-<date>.md and the per-step times as .tsv\n"
           "(default DIR bench/results).\n"
           "\n"
           "  --decoders D         requests decoding when the long prompt arrives (default 4)\n"
           "  --decode-prompt P    their prompt length in tokens (default 256)\n"
           "  --long L             the long prompt in tokens (default 32768)\n"
           "  --token-layers LIST  comma-separated settings (default 0,512,2048,8192,32768)\n"
           "  --after N            the long request's tokens timed after its first (default 8)\n"
           "  --max-dlogprob X     the first-token logits bound (default 0.04, the GPU-vs-CPU\n"
           "                       bound of the forward tests; the CPU gives 0)\n"
           "  --out DIR            results directory (default bench/results)\n"
           "\n%s",
           MIX_BASE_STEPS, MIX_TOP, gen_opts_help());
}

typedef struct mix_row {
    long long token_layers;
    int32_t   layers_per_step; /* 0: all (chunked) */
    double    base_itl_ms;     /* median decode step before the long prompt */
    double    itl_ms[4];       /* window: median, p90, p99, max */
    double    window_s, ttft_s, window_tps;
    long long window_steps;
    long long n_same;   /* how many of the long request's tokens, from the first, equal its
                           tokens when alone */
    double    dlogprob; /* its first token's logits vs alone: max |delta log-prob| over the
                           alone run's top MIX_TOP tokens */
} mix_row;

static double pct(const double *sorted, long long n, double q) {
    if (n <= 0) return 0;
    long long i = (long long)(q * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

/* max |log_softmax(ref) - log_softmax(b)| over the MIX_TOP largest entries of ref */
static double top_logprob_diff(const float *ref, const float *b, int32_t n) {
    int32_t      top[MIX_TOP];
    int          nt = 0;
    const double la = cli_logsumexp_top(ref, n, MIX_TOP, top, &nt);
    const double lb = cli_logsumexp_top(b, n, 0, NULL, NULL);
    double       worst = 0;
    for (int k = 0; k < nt; k++) {
        const double d = fabs(((double)ref[top[k]] - la) - ((double)b[top[k]] - lb));
        if (d > worst) worst = d;
    }
    return worst;
}

/* One setting: its own context, the D decoders (none: the long prompt alone), then the long
 * prompt. tokens_out: the long request's first after + 1 tokens; logits_out: the logits its
 * first token was drawn from. The per-step times go to tsv (NULL: nowhere). */
static int run_setting(const gen_opts *o, lc_model *m, const lc_model_info *info,
                       const int32_t *dec_prompt, long long P, long long D, const int32_t *lp,
                       long long L, long long after, long long tl, FILE *tsv, mix_row *row,
                       int32_t *tokens_out, float *logits_out) {
    const long long chunks = (L + o->n_batch - 1) / o->n_batch;
    const long long R      = L < o->n_batch ? L : o->n_batch;
    long long       per    = tl > 0 ? tl / R : info->n_layer;
    if (per < 1) per = 1;
    if (per > info->n_layer) per = info->n_layer;
    const long long seg_steps = chunks * ((info->n_layer + per - 1) / per);
    /* the decoders run through their own prefills (segmented too: one after another, each
     * up to n_layer steps a chunk), the whole window and a margin */
    const long long dec_pre = D * ((P + o->n_batch - 1) / o->n_batch) * info->n_layer;
    const long long dec_gen = 3 + MIX_BASE_STEPS + dec_pre + seg_steps + after + 16;
    lc_context_params cp;
    if (gen_context_params("bench mix", o, m, L + after + 1 + P + dec_gen, &cp) != CLI_OK)
        return CLI_ERR;
    cp.n_seq_max            = (int32_t)(D + 1);
    cp.prefill_token_layers = (int32_t)tl;
    const int64_t need      = L + after + 2 + D * (P + dec_gen) + (D + 1) * o->page_size;
    if (cp.kv_tokens < need) cp.kv_tokens = need;
    lc_context *ctx = NULL;
    int         st  = lc_context_create(m, &cp, &ctx);
    if (st != LC_OK) {
        cli_fail("bench mix", "creating the context", st);
        return CLI_ERR;
    }
    memset(row, 0, sizeof *row);
    row->token_layers    = tl;
    row->layers_per_step = tl > 0 ? (int32_t)per : 0;
    int       rc   = CLI_OK;
    const size_t cap = (size_t)(D + 1);
    lc_event *ev   = calloc(cap, sizeof *ev);
    double   *itl  = malloc(sizeof(double) * (size_t)(seg_steps + MIX_BASE_STEPS + 64));
    int32_t   long_id = -1;
    if (!ev || !itl) {
        fprintf(stderr, "longctx bench mix: out of memory\n");
        rc = CLI_ERR;
        goto done;
    }
    for (long long d = 0; d < D; d++) {
        lc_request r = {.prompt = dec_prompt + d * P, .n_prompt = (size_t)P,
                        .max_tokens = (int32_t)dec_gen, .sampling = o->sampling,
                        .ignore_eos = true};
        int32_t    id;
        if ((st = lc_context_add(ctx, &r, &id)) != LC_OK) {
            cli_fail("bench mix", "a decoding request", st);
            rc = CLI_ERR;
            goto done;
        }
    }
    /* warm-up: until every decoder has three tokens; then MIX_BASE_STEPS timed steps */
    long long base_n = 0, min_gen = 0;
    for (int guard = 0; D > 0 && guard < 100000 && base_n < MIX_BASE_STEPS; guard++) {
        size_t       n  = 0;
        const double t0 = cli_now();
        if ((st = lc_context_step(ctx, ev, cap, &n)) != LC_OK) {
            cli_fail("bench mix", "a decode step", st);
            rc = CLI_ERR;
            goto done;
        }
        const double dt = cli_now() - t0;
        min_gen         = 1 << 30;
        for (size_t e = 0; e < n; e++)
            if (ev[e].n_generated < min_gen) min_gen = ev[e].n_generated;
        if ((long long)n == D && min_gen >= 3) {
            itl[base_n++] = dt * 1e3;
            if (tsv) fprintf(tsv, "%lld\tbefore\t%lld\t%.4f\t%zu\t0\n", tl, base_n, dt * 1e3, n);
        }
    }
    qsort(itl, (size_t)base_n, sizeof *itl, cli_cmp_double);
    row->base_itl_ms = pct(itl, base_n, 0.5);
    {
        lc_request r = {.prompt = lp, .n_prompt = (size_t)L, .max_tokens = (int32_t)(after + 1),
                        .sampling = o->sampling, .ignore_eos = true};
        if ((st = lc_context_add(ctx, &r, &long_id)) != LC_OK) {
            cli_fail("bench mix", "the long request", st);
            rc = CLI_ERR;
            goto done;
        }
    }
    cli_progress prog;
    char         label[96];
    snprintf(label, sizeof label, "bench mix: token-layers %lld", tl);
    cli_progress_begin(&prog, label);
    const double t_add = cli_now();
    long long    n_itl = 0, dec_tokens = 0, got = 0, step = 0;
    while (got < after + 1) {
        size_t       n  = 0;
        const double t0 = cli_now();
        if ((st = lc_context_step(ctx, ev, cap, &n)) != LC_OK) {
            cli_fail("bench mix", "a step", st);
            rc = CLI_ERR;
            break;
        }
        const double t1 = cli_now(), dt = t1 - t0;
        long long    dec = 0, done_p = 0;
        bool         first = false;
        for (size_t e = 0; e < n; e++) {
            if (ev[e].seq_id == long_id) {
                done_p = ev[e].n_prompt_done;
                if (ev[e].token >= 0) {
                    if (got == 0) first = true;
                    tokens_out[got++] = ev[e].token;
                }
                if (ev[e].finish != LC_FINISH_NONE && got < after + 1) {
                    fprintf(stderr, "longctx bench mix: the long request ended after %lld "
                            "tokens: %s\n", got, ev[e].error ? ev[e].error : "finished");
                    rc = CLI_ERR;
                }
            } else if (ev[e].token >= 0) {
                dec++;
            }
        }
        if (rc != CLI_OK) break;
        step++;
        const bool in_window = row->ttft_s == 0;
        if (tsv)
            fprintf(tsv, "%lld\t%s\t%lld\t%.4f\t%lld\t%lld\n", tl,
                    in_window ? "window" : "after", step, dt * 1e3, dec, done_p);
        if (in_window) {
            if (dec > 0) itl[n_itl++] = dt * 1e3;
            dec_tokens += dec;
            cli_progress_update(&prog, done_p, L, "prompt tokens");
        }
        if (first) {
            const float *lg = lc_context_logits(ctx, long_id);
            if (!lg) {
                fprintf(stderr, "longctx bench mix: the long request's first logits are not "
                        "readable: %s\n", lc_last_error());
                rc = CLI_ERR;
                break;
            }
            memcpy(logits_out, lg, sizeof(float) * (size_t)info->n_vocab);
            row->ttft_s       = t1 - t_add;
            row->window_s     = t1 - t_add;
            row->window_steps = step;
            cli_progress_end(&prog);
        }
        if (dec != D) {
            fprintf(stderr, "longctx bench mix: step %lld gave %lld of the %lld decode tokens\n",
                    step, dec, D);
            rc = CLI_ERR;
            break;
        }
    }
    if (rc == CLI_OK) {
        qsort(itl, (size_t)n_itl, sizeof *itl, cli_cmp_double);
        row->itl_ms[0]  = pct(itl, n_itl, 0.5);
        row->itl_ms[1]  = pct(itl, n_itl, 0.9);
        row->itl_ms[2]  = pct(itl, n_itl, 0.99);
        row->itl_ms[3]  = n_itl ? itl[n_itl - 1] : 0;
        row->window_tps = row->window_s > 0 ? (double)dec_tokens / row->window_s : 0;
    }
done:
    free(itl);
    free(ev);
    lc_context_free(ctx);
    return rc;
}

int cmd_bench_mix(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.temperature = 0.0f;
    long long   D = 4, P = 256, L = 32768, after = 8;
    long long   tls[MIX_MAX_SETTINGS] = {0, 512, 2048, 8192, 32768};
    int         n_tls   = 5;
    const char *out_dir = "bench/results";
    double      max_dlp = 4e-2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int         r = gen_opts_parse(&o, "bench mix", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--decoders")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_int("bench mix", a, v, 1, 1024, &D))
                return CLI_USAGE;
        } else if (!strcmp(a, "--decode-prompt")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_int("bench mix", a, v, 1, 1 << 20, &P))
                return CLI_USAGE;
        } else if (!strcmp(a, "--long")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_int("bench mix", a, v, 1, 1 << 30, &L))
                return CLI_USAGE;
        } else if (!strcmp(a, "--after")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_int("bench mix", a, v, 0, 100000, &after))
                return CLI_USAGE;
        } else if (!strcmp(a, "--token-layers")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_int_list("bench mix", a, v, 0, 1 << 30, tls, MIX_MAX_SETTINGS, &n_tls))
                return CLI_USAGE;
        } else if (!strcmp(a, "--max-dlogprob")) {
            if (!(v = cli_value("bench mix", argc, argv, &i)) ||
                !cli_float("bench mix", a, v, 0, 1e9, &max_dlp))
                return CLI_USAGE;
        } else if (!strcmp(a, "--out")) {
            if (!(v = cli_value("bench mix", argc, argv, &i))) return CLI_USAGE;
            out_dir = v;
        } else {
            fprintf(stderr, "longctx bench mix: unknown option '%s' (see --help)\n", a);
            return CLI_USAGE;
        }
    }
    if (!o.model) {
        fprintf(stderr, "longctx bench mix: -m FILE is required (see --help)\n");
        return CLI_USAGE;
    }
    lc_model *m  = NULL;
    int       rc = gen_load("bench mix", &o, &m);
    if (rc != CLI_OK) return rc;
    rc = CLI_ERR;
    lc_model_info info;
    lc_model_get_info(m, &info);
    char dev_name[256], commit[64], date[32], dslug[128], mslug[128], path[1024], tpath[1100];
    lc_model_device_name(m, dev_name, sizeof dev_name);
    cli_commit_name(commit, sizeof commit);
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    cli_slug(info.device == LC_DEVICE_CUDA ? dev_name : "cpu", dslug, sizeof dslug);
    const char *base = strrchr(o.model, '/');
    char        mbase[256];
    snprintf(mbase, sizeof mbase, "%s", base ? base + 1 : o.model);
    char *dot = strstr(mbase, ".gguf");
    if (dot) *dot = '\0';
    cli_slug(mbase, mslug, sizeof mslug);
    snprintf(path, sizeof path, "%s/bench-mix-%s-%s-%s.md", out_dir, dslug, mslug, date);
    snprintf(tpath, sizeof tpath, "%.*s.tsv", (int)(strlen(path) - 3), path);

    int32_t *dec_prompt = malloc(sizeof(int32_t) * (size_t)(D * P));
    int32_t *lp         = malloc(sizeof(int32_t) * (size_t)L);
    int32_t *ref_tok    = malloc(sizeof(int32_t) * (size_t)(after + 1));
    int32_t *tok        = malloc(sizeof(int32_t) * (size_t)(after + 1));
    float   *ref_lg     = malloc(sizeof(float) * (size_t)info.n_vocab);
    float   *lg         = malloc(sizeof(float) * (size_t)info.n_vocab);
    mix_row  rows[MIX_MAX_SETTINGS];
    FILE    *tsv = NULL, *f = NULL;
    if (!dec_prompt || !lp || !ref_tok || !tok || !ref_lg || !lg) {
        fprintf(stderr, "longctx bench mix: out of memory\n");
        goto done;
    }
    gen_random_prompt(lc_model_tokenizer(m), info.n_vocab, 777, dec_prompt, D * P);
    gen_random_prompt(lc_model_tokenizer(m), info.n_vocab, 0, lp, L);
    if (cli_mkdirs(out_dir) != 0 || !(tsv = fopen(tpath, "w"))) {
        fprintf(stderr, "longctx bench mix: cannot write %s: %s\n", tpath, strerror(errno));
        goto done;
    }
    fprintf(tsv, "token_layers\tphase\tstep\tms\tdecode_tokens\tprompt_done\n");
    /* the reference: the long prompt alone in its context (no decoders), chunked */
    mix_row alone;
    if (run_setting(&o, m, &info, dec_prompt, P, 0, lp, L, after, 0, NULL, &alone, ref_tok,
                    ref_lg) != CLI_OK)
        goto done;
    for (int k = 0; k < n_tls; k++) {
        if (run_setting(&o, m, &info, dec_prompt, P, D, lp, L, after, tls[k], tsv, &rows[k], tok,
                        lg) != CLI_OK)
            goto done;
        long long e = 0;
        while (e < after + 1 && tok[e] == ref_tok[e]) e++;
        rows[k].n_same   = e;
        rows[k].dlogprob = top_logprob_diff(ref_lg, lg, info.n_vocab);
    }
    char attn_desc[640], table[8192];
    gen_attn_describe(&o, attn_desc, sizeof attn_desc);
    size_t tn = 0;
    tn += (size_t)snprintf(table + tn, sizeof table - tn,
                           "| token-layers | layers/step | steps to 1st token | TTFT s | decode "
                           "ITL before ms | ITL p50 ms | p90 | p99 | max | decode tok/s in "
                           "window | 1st-token Δ log-prob vs alone | tokens = alone's |\n|---:|---:|---:|---:"
                           "|---:|---:|---:|---:|---:|---:|---:|:--:|\n");
    tn += (size_t)snprintf(table + tn, sizeof table - tn,
                           "| alone (chunked, no decoders) | all | %lld | %.3f | – | – | – | – | – "
                           "| – | (reference) | (reference) |\n", alone.window_steps, alone.ttft_s);
    for (int k = 0; k < n_tls && tn < sizeof table; k++) {
        const mix_row *r = &rows[k];
        char           lps[16], same[48];
        if (r->n_same == after + 1) snprintf(same, sizeof same, "yes");
        else snprintf(same, sizeof same, "first %lld of %lld", r->n_same, after + 1);
        if (r->layers_per_step) snprintf(lps, sizeof lps, "%d", r->layers_per_step);
        else snprintf(lps, sizeof lps, "all");
        tn += (size_t)snprintf(table + tn, sizeof table - tn,
                               "| %lld%s | %s | %lld | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | "
                               "%.1f | %.2g | %s |\n", r->token_layers,
                               r->token_layers ? "" : " (chunked)", lps, r->window_steps,
                               r->ttft_s, r->base_itl_ms, r->itl_ms[0], r->itl_ms[1],
                               r->itl_ms[2], r->itl_ms[3], r->window_tps, r->dlogprob, same);
    }
    char head[2048];
    snprintf(head, sizeof head,
             "- model: %s (%s, %d layers)\n- device: %s\n- date: %s\n- commit: %s\n- attention: "
             "%s\n- %lld decoding requests of %lld-token prompts; one long prompt of %lld tokens "
             "arrives, chunks of %lld rows (-b); greedy, EOS ignored; the window: from its "
             "arrival to its first token; ITL: the steps in the window that gave decode tokens; "
             "Δ log-prob: max |Δ| over the alone run's top %d at the prompt's last position "
             "(segmented prefill runs the prompt's rows in forwards of their own, as alone; "
             "chunked prefill shares its forwards with the decode rows, whose other matrix "
             "shapes may round differently, which a sparse method's selection can amplify)\n",
             info.name, o.model, info.n_layer, info.device == LC_DEVICE_CUDA ? dev_name : "cpu",
             date, commit, attn_desc, D, P, L, o.n_batch, MIX_TOP);
    printf("longctx bench mix\n\n%s\n%s", head, table);
    if ((f = fopen(path, "w"))) {
        fprintf(f, "# longctx bench mix — a long prefill beside decoding requests\n\n%s\n%s\n"
                "Per-step times: %s\n", head, table, tpath);
        fclose(f);
        fprintf(stderr, "bench mix: wrote %s and %s\n", path, tpath);
    } else {
        fprintf(stderr, "bench mix: could not write %s: %s (the table is printed above)\n", path,
                strerror(errno));
    }
    rc = CLI_OK;
    for (int k = 0; k < n_tls; k++) {
        const mix_row *r   = &rows[k];
        const bool     bad = r->n_same == 0 || r->dlogprob > max_dlp;
        if (bad && r->token_layers > 0) {
            fprintf(stderr, "longctx bench mix: token-layers %lld: the long prompt's first token "
                    "%s and its logits are %.3g in log-prob from the prompt's alone "
                    "(--max-dlogprob %.3g)\n", r->token_layers,
                    r->n_same ? "is the same" : "differs", r->dlogprob, max_dlp);
            rc = CLI_ERR;
        } else if (bad || r->n_same < after + 1) {
            fprintf(stderr, "bench mix: token-layers %lld%s: %lld of the long request's %lld "
                    "tokens equal its alone run's, first-token logits %.3g from it\n",
                    r->token_layers, r->token_layers ? "" : " (chunked)", r->n_same, after + 1,
                    r->dlogprob);
        }
    }
done:
    if (tsv) fclose(tsv);
    free(dec_prompt);
    free(lp);
    free(ref_tok);
    free(tok);
    free(ref_lg);
    free(lg);
    lc_model_free(m);
    return rc;
}
