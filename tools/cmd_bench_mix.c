/*
 * cmd_bench_mix.c — `longctx bench mix`: what a long prompt arriving at a busy context does to
 * the requests already decoding there, and how long it waits for its own first token, with
 * chunked prefill and with layer-segmented prefill at several token-layer budgets
 * (lc_context_params.prefill_token_layers; SparseServe's maxInjectToken,
 * spec/tokenselect-and-sparseserve.md B). D short requests decode; then one L-token prompt is
 * added and the steps are timed until its first token (the window) and a few after: the decode
 * tokens' inter-token latency in the window (median, p90, p99, max), the decode tokens/s there,
 * the long prompt's time to first token, and whether its greedy tokens equal chunked
 * prefill's. A table on stdout and DIR/bench-mix-<device>-<model>-<date>.md, the per-step times
 * as a TSV beside it (scripts/plot_bench_mix.py draws them).
 */
#include "gen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIX_MAX_SETTINGS 16
#define MIX_BASE_STEPS   16 /* decode steps timed before the long prompt arrives */

static void help(void) {
    printf("usage: longctx bench mix -m FILE [--decoders D] [--decode-prompt P] [--long L]\n"
           "                         [--token-layers LIST] [--after N] [--out DIR] [options]\n"
           "\n"
           "D requests of P-token prompts decode (greedy, EOS ignored); once each has three\n"
           "tokens and %d more steps are timed, one request of an L-token prompt arrives.\n"
           "The steps are timed until its first token (the window) and N after it. For each\n"
           "value of --token-layers (0: chunked prefill, the prompt's chunk through every layer\n"
           "in the step beside the decode tokens; T > 0: layer-segmented prefill, a chunk of R\n"
           "rows through max(1, T / R) layers a step, see --prefill-token-layers) one context:\n"
           "the decode tokens' inter-token latency in the window (median, p90, p99, max), the\n"
           "decode tokens/s in it and before it, the long prompt's time to first token, and\n"
           "whether its N + 1 greedy tokens equal the first setting's. Prompts: random\n"
           "ordinary tokens (speed does not depend on the text for dense attention; sparse\n"
           "methods select on it). Writes DIR/bench-mix-<device>-<model>-<date>.md and the\n"
           "per-step times as .tsv (default DIR bench/results).\n"
           "\n"
           "  --decoders D         requests decoding when the long prompt arrives (default 4)\n"
           "  --decode-prompt P    their prompt length in tokens (default 256)\n"
           "  --long L             the long prompt in tokens (default 32768)\n"
           "  --token-layers LIST  comma-separated settings (default 0,512,2048,8192,32768)\n"
           "  --after N            the long request's tokens timed after its first (default 8)\n"
           "  --out DIR            results directory (default bench/results)\n"
           "\n%s",
           MIX_BASE_STEPS, gen_opts_help());
}

typedef struct mix_row {
    long long token_layers;
    int32_t   layers_per_step; /* 0: all (chunked) */
    double    base_itl_ms;     /* median decode step before the long prompt */
    double    itl_ms[4];       /* window: median, p90, p99, max */
    double    window_s, ttft_s, window_tps;
    long long window_steps;
    bool      same;            /* the long request's tokens equal the first setting's */
} mix_row;

static double pct(const double *sorted, long long n, double q) {
    if (n <= 0) return 0;
    long long i = (long long)(q * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

/* One setting: its own context, the decoders, then the long prompt. tokens_out: the long
 * request's first after + 1 tokens. The per-step times go to tsv. */
static int run_setting(const gen_opts *o, lc_model *m, const lc_model_info *info,
                       const int32_t *dec_prompt, long long P, long long D, const int32_t *lp,
                       long long L, long long after, long long tl, FILE *tsv, mix_row *row,
                       int32_t *tokens_out) {
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
    for (int guard = 0; guard < 100000 && base_n < MIX_BASE_STEPS; guard++) {
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
            fprintf(tsv, "%lld\tbefore\t%lld\t%.4f\t%zu\t0\n", tl, base_n, dt * 1e3, n);
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
        fprintf(tsv, "%lld\t%s\t%lld\t%.4f\t%lld\t%lld\n", tl, in_window ? "window" : "after",
                step, dt * 1e3, dec, done_p);
        if (in_window) {
            if (dec > 0) itl[n_itl++] = dt * 1e3;
            dec_tokens += dec;
            cli_progress_update(&prog, done_p, L, "prompt tokens");
        }
        if (first) {
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
    mix_row  rows[MIX_MAX_SETTINGS];
    FILE    *tsv = NULL, *f = NULL;
    if (!dec_prompt || !lp || !ref_tok || !tok) {
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
    for (int k = 0; k < n_tls; k++) {
        if (run_setting(&o, m, &info, dec_prompt, P, D, lp, L, after, tls[k], tsv, &rows[k],
                        k ? tok : ref_tok) != CLI_OK)
            goto done;
        rows[k].same = !k || !memcmp(tok, ref_tok, sizeof(int32_t) * (size_t)(after + 1));
    }
    char attn_desc[640], table[8192];
    gen_attn_describe(&o, attn_desc, sizeof attn_desc);
    size_t tn = 0;
    tn += (size_t)snprintf(table + tn, sizeof table - tn,
                           "| token-layers | layers/step | steps to 1st token | TTFT s | decode "
                           "ITL before ms | ITL p50 ms | p90 | p99 | max | decode tok/s in "
                           "window | same tokens |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:"
                           "|---:|:--:|\n");
    for (int k = 0; k < n_tls && tn < sizeof table; k++) {
        const mix_row *r = &rows[k];
        char           lps[16];
        if (r->layers_per_step) snprintf(lps, sizeof lps, "%d", r->layers_per_step);
        else snprintf(lps, sizeof lps, "all");
        tn += (size_t)snprintf(table + tn, sizeof table - tn,
                               "| %lld%s | %s | %lld | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | "
                               "%.1f | %s |\n", r->token_layers, r->token_layers ? "" : " (chunked)",
                               lps, r->window_steps, r->ttft_s, r->base_itl_ms, r->itl_ms[0],
                               r->itl_ms[1], r->itl_ms[2], r->itl_ms[3], r->window_tps,
                               r->same ? "yes" : "NO");
    }
    char head[2048];
    snprintf(head, sizeof head,
             "- model: %s (%s, %d layers)\n- device: %s\n- date: %s\n- commit: %s\n- attention: "
             "%s\n- %lld decoding requests of %lld-token prompts; one long prompt of %lld tokens "
             "arrives, chunks of %lld rows (-b); greedy, EOS ignored; the window: from its "
             "arrival to its first token; ITL: the steps in the window that gave decode tokens\n",
             info.name, o.model, info.n_layer, info.device == LC_DEVICE_CUDA ? dev_name : "cpu",
             date, commit, attn_desc, D, P, L, o.n_batch);
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
    for (int k = 0; k < n_tls; k++)
        if (!rows[k].same) {
            fprintf(stderr, "longctx bench mix: token-layers %lld gave other tokens than %lld\n",
                    rows[k].token_layers, rows[0].token_layers);
            rc = CLI_ERR;
        }
done:
    if (tsv) fclose(tsv);
    free(dec_prompt);
    free(lp);
    free(ref_tok);
    free(tok);
    lc_model_free(m);
    return rc;
}
