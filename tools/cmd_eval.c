/*
 * cmd_eval.c — `longctx eval passkey`: the passkey-retrieval test (a random 5-digit key hidden
 * at a chosen depth of filler text, then asked back) and, with --task, RULER-style synthetic
 * tasks (single needle, multi-key, multi-value, variable tracking; RULER, Hsieh et al. 2024),
 * accuracy per depth and overall; `longctx eval fidelity`: a sparse method vs dense attention on
 * the same queries and keys (lc_eval_attn_fidelity); `longctx eval ppl`: perplexity of a long
 * text against context length (teacher-forced scoring, lc_context_score).
 */
#include "eval_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf(
        "usage: longctx eval suite -m FILE [--tasks LIST] [--len N[,N...]] [--quick] ...\n"
        "                            (natural-text long-context tasks: longctx eval suite --help)\n"
        "       longctx eval passkey -m FILE --len N[,N...] [--depths D,D,...] [--trials K]\n"
        "                            [--chat] [--out FILE.tsv] [options]\n"
        "       longctx eval fidelity -m FILE -f TEXT --len N[,N...] [--mass-k K] [--rows R]\n"
        "                            [--attn METHOD] [--preset NAME] [--hip-NAME=VALUE]\n"
        "                            [--ts-NAME=VALUE] [--out FILE.tsv]\n"
        "       longctx eval ppl -m FILE -f TEXT --len N[,N...] [--window W] [--attn ...]\n"
        "                            [-v] [--out FILE.tsv]\n"
        "\n"
        "ppl: perplexity of TEXT against context length: for each N, the mean negative log-\n"
        "likelihood (and its exp) of tokens N-W .. N-1 given everything before them\n"
        "(--window W, default 1024). One pass over the longest N serves every length (the\n"
        "model is causal); --attn METHOD runs the method as generation does. -v shows\n"
        "where each window starts in the text.\n"
        "\n"
        "fidelity: run the model densely over the first N tokens of TEXT and, on the last R\n"
        "positions (default 64), run the sparse method (--attn infinitehip (default), hip or\n"
        "tokenselect) on the same queries and keys of every\n"
        "layer: the share of the true top-K attention mass (--mass-k, default 2048) on the keys "
        "it\n"
        "reads, and the relative L2 error of its output vs dense.\n"
        "\npasskey: (and RULER-style tasks with --task)\n"
        "Hide a random 5-digit pass key at each depth (0 = start, 1 = end) of N tokens of\n"
        "filler text, ask for it back (greedy), and report the share of trials whose answer\n"
        "contains the key, per depth and overall.\n"
        "\n"
        "  --len N[,N...]     prompt lengths in tokens (default 2048)\n"
        "  --depths LIST      comma-separated depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
        "  --trials K         trials per depth (default 5)\n"
        "  --task NAME        passkey (default), or RULER-style: niah (one needle),\n"
        "                     multikey (4 needles, ask one), multivalue (4 values of one key,\n"
        "                     score = the share found), vt (variable tracking: a chain of 4\n"
        "                     assignments, score = the share of the variables named); needles\n"
        "                     are spread in order from the depth to the end\n"
        "  --chat             ask through the model's chat template\n"
        "  --out FILE         also write the results as TSV (len, depth, trials, correct)\n"
        "  -v, --verbose      print each answer\n"
        "  --trace            (InfiniteHiP) print per layer how many of the first needle's\n"
        "                     tokens each selection stage keeps (stderr); each trial then\n"
        "                     runs in a context of its own (the span is a context setting)\n"
        "  --dump-prompts FILE  append each prompt's token ids (one line per trial) to FILE,\n"
        "                     to replay them in another engine\n"
        "\n%s",
        gen_opts_help());
}

static bool parse_list(const char *opt, const char *s, double lo, double hi, double *out, int *n,
                       int max) {
    *n = 0;
    char *copy = strdup(s);
    char *save = NULL;
    bool ok = copy != NULL;
    for (char *tok = ok ? strtok_r(copy, ",", &save) : NULL; tok && ok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            fprintf(stderr, "longctx eval: %s: at most %d values\n", opt, max);
            ok = false;
        } else {
            ok = cli_float("eval", opt, tok, lo, hi, &out[*n]);
            (*n)++;
        }
    }
    if (ok && *n == 0) {
        fprintf(stderr, "longctx eval: %s: empty list\n", opt);
        ok = false;
    }
    free(copy);
    return ok;
}

static int encode(const lc_tokenizer *t, const char *s, bool special, int32_t **ids, size_t *n) {
    int st = lc_tokenizer_encode(t, s, strlen(s), false, special, ids, n);
    if (st != LC_OK) cli_fail("eval", "tokenizing", st);
    return st;
}

/* `longctx eval fidelity`: InfiniteHiP vs dense on the same queries and keys, per layer */
static int eval_fidelity(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    double lens[32] = {32768};
    int n_lens = 1;
    long long top_k = 2048, rows = 64;
    const char *file = NULL, *out_path = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = strcmp(a, "--mass-k") ? gen_opts_parse(&o, "eval", argc, argv, &i) : 0;
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--len")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !parse_list(a, v, 128, 1 << 30, lens, &n_lens, 32))
                return CLI_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--mass-k")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !cli_int("eval", a, v, 1, 1 << 30, &top_k))
                return CLI_USAGE;
        } else if (!strcmp(a, "--rows")) {
            if (!(v = cli_value("eval", argc, argv, &i)) || !cli_int("eval", a, v, 1, 4096, &rows))
                return CLI_USAGE;
        } else if (!strcmp(a, "--out")) {
            if (!(out_path = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else {
            cli_unknown_option("eval", a);
            return CLI_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "longctx eval fidelity: give a long natural text with -f FILE\n");
        return CLI_USAGE;
    }
    if (gen_attn_dense(&o)) o.attn = "infinitehip"; /* the method under test */
    if (!gen_opts_check(&o, "eval")) return CLI_USAGE;
    lc_context_params mp = lc_context_default_params();
    gen_context_attn(&o, &mp);
    size_t text_len = 0;
    char *text = cli_read_file("eval", file, &text_len);
    if (!text) return CLI_ERR;
    lc_model *m = NULL;
    int rc = gen_load("eval", &o, &m);
    if (rc != CLI_OK) return free(text), rc;
    rc = CLI_ERR;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    FILE *out = NULL;
    lc_attn_fidelity *res = NULL;
    lc_model_info info;
    lc_model_get_info(m, &info);
    int st = lc_tokenizer_encode(lc_model_tokenizer(m), text, text_len, true, false, &ids, &n_ids);
    if (st != LC_OK) {
        cli_fail("eval", file, st);
        goto done;
    }
    res = calloc((size_t)info.n_layer, sizeof *res);
    if (!res) goto done;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "longctx eval: cannot write %s\n", out_path);
        goto done;
    }
    char desc[600];
    gen_attn_describe(&o, desc, sizeof desc);
    printf("attention fidelity: %s vs dense, top-%lld mass recall and output error over the "
           "last %lld positions of %s\n",
           desc, top_k, rows, file);
    if (out) fprintf(out, "len\tlayer\trecall\tout_rel_l2\tkeys_read\tsparse\n");
    for (int li = 0; li < n_lens; li++) {
        const int64_t len = (int64_t)lens[li];
        if ((size_t)len > n_ids) {
            fprintf(stderr, "longctx eval: %s has %zu tokens, fewer than --len %lld\n", file, n_ids,
                    (long long)len);
            goto done;
        }
        cli_progress pr;
        cli_progress_begin(&pr, "prefill");
        lc_fidelity_params fp = lc_fidelity_default_params();
        fp.top_k = (int32_t)top_k;
        fp.n_rows = (int32_t)rows;
        fp.n_batch = (int32_t)o.n_batch;
        fp.progress = eval_progress_tokens;
        fp.progress_user = &pr;
        st = lc_eval_attn_fidelity(m, ids, len, &mp, &fp, res);
        cli_progress_end(&pr);
        if (st != LC_OK) {
            cli_fail("eval", "fidelity", st);
            goto done;
        }
        printf("\n%8s %6s %8s %10s %10s\n", "len", "layer", "recall", "rel L2", "keys read");
        double sr = 0, se = 0;
        int ns = 0;
        for (int32_t l = 0; l < info.n_layer; l++) {
            printf("%8lld %6d %8.4f %10.4f %10.1f%s\n", (long long)len, l, res[l].recall,
                   res[l].out_rel_l2, res[l].keys_read, res[l].sparse ? "" : "  (dense)");
            if (out)
                fprintf(out, "%lld\t%d\t%.6f\t%.6f\t%.1f\t%d\n", (long long)len, l, res[l].recall,
                        res[l].out_rel_l2, res[l].keys_read, res[l].sparse);
            if (res[l].sparse) sr += res[l].recall, se += res[l].out_rel_l2, ns++;
        }
        if (ns)
            printf("mean over %d sparse layers: recall %.4f, rel L2 %.4f\n", ns, sr / ns, se / ns);
        fflush(stdout);
    }
    rc = CLI_OK;
done:
    if (out) fclose(out);
    free(res), free(ids), free(text);
    lc_model_free(m);
    return rc;
}

/* `longctx eval ppl`: perplexity of a text's windows ending at each length, in one pass */
static int eval_ppl(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    double lens[64] = {8192};
    int n_lens = 1;
    long long window = 1024;
    bool verbose = false;
    const char *file = NULL, *out_path = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = gen_opts_parse(&o, "eval", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--len")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !parse_list(a, v, 2, 1 << 30, lens, &n_lens, 64))
                return CLI_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--window")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !cli_int("eval", a, v, 1, 1 << 30, &window))
                return CLI_USAGE;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "--out")) {
            if (!(out_path = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else {
            cli_unknown_option("eval", a);
            return CLI_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "longctx eval ppl: give a long natural text with -f FILE\n");
        return CLI_USAGE;
    }
    if (!gen_opts_check(&o, "eval")) return CLI_USAGE;
    qsort(lens, (size_t)n_lens, sizeof lens[0], cli_cmp_double);
    for (int i = 0; i < n_lens; i++)
        if (window >= (long long)lens[i]) {
            fprintf(stderr,
                    "longctx eval ppl: --window %lld must be below every --len (%lld): "
                    "the first token has no prediction\n",
                    window, (long long)lens[i]);
            return CLI_USAGE;
        }
    const int64_t max_len = (int64_t)lens[n_lens - 1];
    size_t text_len = 0;
    char *text = cli_read_file("eval", file, &text_len);
    if (!text) return CLI_ERR;
    lc_model *m = NULL;
    int rc = gen_load("eval", &o, &m);
    if (rc != CLI_OK) return free(text), rc;
    rc = CLI_ERR;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    FILE *out = NULL;
    double *lp = NULL;
    lc_score_range *rg = calloc((size_t)n_lens, sizeof *rg);
    lc_context *c = NULL;
    cli_progress pr;
    cli_progress_begin(&pr, "scoring");
    int st = lc_tokenizer_encode(lc_model_tokenizer(m), text, text_len, true, false, &ids, &n_ids);
    if (st != LC_OK) {
        cli_fail("eval", file, st);
        goto done;
    }
    if ((size_t)max_len > n_ids) {
        fprintf(stderr, "longctx eval ppl: %s has %zu tokens, fewer than --len %lld\n", file, n_ids,
                (long long)max_len);
        goto done;
    }
    lp = malloc(sizeof(double) * (size_t)max_len);
    if (!rg || !lp) {
        fprintf(stderr, "longctx eval ppl: out of memory\n");
        goto done;
    }
    /* the windows, merged where they overlap */
    int32_t n_rg = 0;
    for (int i = 0; i < n_lens; i++) {
        const int64_t b = (int64_t)lens[i] - window, e = (int64_t)lens[i];
        if (n_rg && b <= rg[n_rg - 1].end) {
            if (e > rg[n_rg - 1].end) rg[n_rg - 1].end = e;
        } else {
            rg[n_rg].begin = b, rg[n_rg].end = e, n_rg++;
        }
    }
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "longctx eval: cannot write %s\n", out_path);
        goto done;
    }
    if (gen_context_progress("eval", &o, m, max_len, eval_progress_tokens, &pr, &c) != CLI_OK)
        goto done;
    char desc[600];
    gen_attn_describe(&o, desc, sizeof desc);
    printf("perplexity of %s (%zu tokens), attention %s: the last %lld tokens before each "
           "length\n",
           file, n_ids, desc, window);
    fflush(stdout);
    cli_progress_begin(&pr, "scoring");
    const double t0 = cli_now();
    st = lc_context_score(c, ids, max_len, rg, n_rg, lp);
    const double dt = cli_now() - t0;
    cli_progress_end(&pr);
    if (st != LC_OK) {
        cli_fail("eval", "scoring", st);
        goto done;
    }
    printf("\n%10s %8s %10s %12s\n", "len", "window", "nll", "perplexity");
    if (out) fprintf(out, "attn\tlen\twindow\tnll\tppl\n");
    for (int i = 0; i < n_lens; i++) {
        const int64_t e = (int64_t)lens[i];
        double s = 0;
        for (int64_t t = e - window; t < e; t++)
            s -= lp[t];
        const double nll = s / (double)window;
        printf("%10lld %8lld %10.4f %12.3f", (long long)e, window, nll, exp(nll));
        if (verbose) { /* where the window starts in the text */
            fputs("   \"", stdout);
            int shown = 0;
            for (int64_t t = e - window; t < e && shown < 60; t++) {
                size_t nb = 0;
                const char *tb = lc_tokenizer_token_bytes(lc_model_tokenizer(m), ids[t], &nb);
                char esc[512]; /* control and invalid bytes as \xHH */
                lc_text_escape(esc, sizeof esc, tb, tb ? nb : 0);
                for (const char *q = esc; *q && shown < 60; q++, shown++)
                    putchar(*q);
            }
            fputs("\"", stdout);
        }
        putchar('\n');
        if (out)
            fprintf(out, "%s\t%lld\t%lld\t%.6f\t%.4f\n", o.attn, (long long)e,
                    window, nll, exp(nll));
    }
    printf("one pass over %lld tokens in %.1f s (%.0f tokens/s)\n", (long long)max_len, dt,
           dt > 0 ? (double)max_len / dt : 0.0);
    rc = CLI_OK;
done:
    cli_progress_end(&pr);
    if (out) fclose(out);
    lc_context_free(c);
    free(lp), free(rg), free(ids), free(text);
    lc_model_free(m);
    return rc;
}

/* ---- the tasks: passkey and RULER-style needles (RULER: Hsieh et al. 2024, niah_single,
 * niah_multikey, niah_multivalue, vt) ------------------------------------------------------ */

typedef enum eval_task { T_PASSKEY, T_NIAH, T_MULTIKEY, T_MULTIVALUE, T_VT } eval_task;

static const char *const k_task_names[] = {"passkey", "niah", "multikey", "multivalue", "vt"};

#define MAX_NEEDLES 4

/* One trial's texts: the needles (in prompt order), the question (with the answer's start in
 * completion mode) and the strings the answer must contain (score = the share found). */
typedef struct trial_text {
    int n_needles, n_expect, max_tokens;
    char needle[MAX_NEEDLES][256];
    char question[512];
    char expect[MAX_NEEDLES][64];
} trial_text;

static const char *const k_words[] = {"apple",   "river",  "violin", "lantern", "falcon", "marble",
                                      "canyon",  "pepper", "orchid", "glacier", "harbor", "saddle",
                                      "thimble", "walnut", "quartz", "meadow"};

static void make_trial(eval_task task, bool chat, uint64_t *rng, trial_text *t) {
    memset(t, 0, sizeof *t);
    char num[MAX_NEEDLES][16];
    for (int k = 0; k < MAX_NEEDLES; k++)
        snprintf(num[k], sizeof num[k], "%07u",
                 (unsigned)(eval_rng_next(rng) % 9000000u + 1000000u));
    const size_t nw = sizeof k_words / sizeof k_words[0];
    const char *word[MAX_NEEDLES];
    const size_t w0 = (size_t)(eval_rng_next(rng) % nw);
    for (int k = 0; k < MAX_NEEDLES; k++)
        word[k] = k_words[(w0 + 3 * (size_t)k) % nw];
    switch (task) {
    case T_PASSKEY:
        snprintf(num[0], sizeof num[0], "%05u", (unsigned)(eval_rng_next(rng) % 90000u + 10000u));
        t->n_needles = t->n_expect = 1;
        snprintf(t->needle[0], sizeof t->needle[0],
                 " The pass key is %s. Remember it. %s is the pass key.", num[0], num[0]);
        snprintf(t->question, sizeof t->question, "%s",
                 chat ? "\nWhat is the pass key? Answer with the number only."
                      : "\nWhat is the pass key? The pass key is");
        snprintf(t->expect[0], sizeof t->expect[0], "%s", num[0]);
        t->max_tokens = chat ? 24 : 8;
        return;
    case T_NIAH:
    case T_MULTIKEY:
        t->n_needles = task == T_NIAH ? 1 : MAX_NEEDLES;
        t->n_expect = 1;
        for (int k = 0; k < t->n_needles; k++)
            snprintf(t->needle[k], sizeof t->needle[k],
                     " One of the special magic numbers for %s is: %s.", word[k], num[k]);
        {
            /* ask for one of the keys (the first for niah) */
            const int q = task == T_NIAH ? 0 : (int)(eval_rng_next(rng) % MAX_NEEDLES);
            snprintf(
                t->question, sizeof t->question,
                chat ? "\nWhat is the special magic number for %s mentioned in the provided "
                       "text? Answer with the number only."
                     : "\nWhat is the special magic number for %s mentioned in the provided "
                       "text? The special magic number for %s mentioned in the provided text is",
                word[q], word[q]);
            snprintf(t->expect[0], sizeof t->expect[0], "%s", num[q]);
        }
        t->max_tokens = chat ? 24 : 12;
        return;
    case T_MULTIVALUE:
        t->n_needles = t->n_expect = MAX_NEEDLES;
        for (int k = 0; k < MAX_NEEDLES; k++) {
            snprintf(t->needle[k], sizeof t->needle[k],
                     " One of the special magic numbers for %s is: %s.", word[0], num[k]);
            snprintf(t->expect[k], sizeof t->expect[k], "%s", num[k]);
        }
        snprintf(t->question, sizeof t->question,
                 chat ? "\nWhat are all the special magic numbers for %s mentioned in the provided "
                        "text? Answer with the numbers only."
                      : "\nWhat are all the special magic numbers for %s mentioned in the provided "
                        "text? The special magic numbers for %s mentioned in the provided text are",
                 word[0], word[0]);
        t->max_tokens = 48;
        return;
    case T_VT: {
        /* a chain of 4 variables: VAR A = num, VAR B = VAR A, ... */
        char var[MAX_NEEDLES][8];
        for (int k = 0; k < MAX_NEEDLES; k++) {
            for (int c = 0; c < 5; c++)
                var[k][c] = (char)('A' + eval_rng_next(rng) % 26);
            var[k][5] = 0;
            snprintf(t->expect[k], sizeof t->expect[k], "%s", var[k]);
        }
        t->n_needles = t->n_expect = MAX_NEEDLES;
        snprintf(t->needle[0], sizeof t->needle[0], " VAR %s = %s.", var[0], num[0]);
        for (int k = 1; k < MAX_NEEDLES; k++)
            snprintf(t->needle[k], sizeof t->needle[k], " VAR %s = VAR %s.", var[k], var[k - 1]);
        snprintf(t->question, sizeof t->question,
                 chat ? "\nFind all variables that are assigned the value %s in the text above."
                      : "\nFind all variables that are assigned the value %s in the text above. "
                        "Answer: According to the chain(s) of variable assignment in the text "
                        "above, 4 variables are assigned the value %s, they are:",
                 num[0], num[0]);
        t->max_tokens = 32;
        return;
    }
    }
}

/* The decode selection counters of the method (TokenSelect: selection-cache misses and hits;
 * HiP: mask estimations and the steps that reused one) between two readings, one line; nothing
 * for methods that do not count (dense, InfiniteHiP). len 0: the whole run. */
static void print_selection_stats(int64_t len, const lc_attn_stats *a, const lc_attn_stats *b) {
    const long long sel = (long long)(b->selected - a->selected);
    const long long reu = (long long)(b->reused - a->reused);
    if (sel + reu <= 0) return;
    char where[48];
    if (len > 0)
        snprintf(where, sizeof where, "%lld", (long long)len);
    else
        snprintf(where, sizeof where, "all");
    printf("decode selections (%s, per sequence and layer): %lld computed, %lld reused = %.1f%% "
           "reused\n",
           where, sel, reu, 100.0 * (double)reu / (double)(sel + reu));
}

int cmd_eval(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help();
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (strcmp(argv[1], "fidelity") == 0) return eval_fidelity(argc, argv);
    if (strcmp(argv[1], "ppl") == 0) return eval_ppl(argc, argv);
    if (strcmp(argv[1], "suite") == 0) return cmd_eval_suite(argc, argv);
    if (strcmp(argv[1], "passkey") != 0) {
        fprintf(stderr, "longctx eval: unknown task '%s' (known: suite, passkey, fidelity, ppl)\n",
                argv[1]);
        return CLI_USAGE;
    }
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.temperature = 0.0f;
    double lens[32] = {2048};
    int n_lens = 1;
    double depths[64] = {0, 0.25, 0.5, 0.75, 1};
    int n_depths = 5;
    long long trials = 5;
    bool chat = false, verbose = false, trace = false;
    eval_task task = T_PASSKEY;
    const char *out_path = NULL, *dump_path = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = gen_opts_parse(&o, "eval", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--len")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !parse_list(a, v, 64, 1 << 30, lens, &n_lens, 32))
                return CLI_USAGE;
        } else if (!strcmp(a, "--depths")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !parse_list(a, v, 0, 1, depths, &n_depths, 64))
                return CLI_USAGE;
        } else if (!strcmp(a, "--trials")) {
            if (!(v = cli_value("eval", argc, argv, &i)) ||
                !cli_int("eval", a, v, 1, 100000, &trials))
                return CLI_USAGE;
        } else if (!strcmp(a, "--task")) {
            if (!(v = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
            int found = -1;
            for (int k = 0; k < (int)(sizeof k_task_names / sizeof k_task_names[0]); k++)
                if (!strcmp(v, k_task_names[k])) found = k;
            if (found < 0) {
                fprintf(stderr,
                        "longctx eval: --task: unknown task '%s' (known: passkey, niah, "
                        "multikey, multivalue, vt)\n",
                        v);
                return CLI_USAGE;
            }
            task = (eval_task)found;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (!strcmp(a, "--out")) {
            if (!(out_path = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--dump-prompts")) {
            if (!(dump_path = cli_value("eval", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else {
            cli_unknown_option("eval", a);
            return CLI_USAGE;
        }
    }
    lc_model *m = NULL;
    int rc = gen_load("eval", &o, &m);
    if (rc != CLI_OK) return rc;
    rc = CLI_ERR;
    const lc_tokenizer *tok = lc_model_tokenizer(m);
    lc_context *ctx = NULL;
    FILE *out = NULL, *dump = NULL;
    int32_t *t_intro = NULL, *t_fill = NULL, *t_pre = NULL, *t_post = NULL;
    size_t n_intro = 0, n_fill = 0, n_pre = 0, n_post = 0;
    tokbuf prompt = {0};
    const char *intro = "There is an important piece of information hidden inside a lot of "
                        "irrelevant text. Find it and memorize it. I will quiz you about the "
                        "important information there.\n";
    const char *filler = " The grass is green. The sky is blue. The sun is yellow. Here we go. "
                         "There and back again.";
    /* chat: the prompt is wrapped as a user turn, assembled between the template's ids */
    if (chat && eval_chat_split("eval", m, o.chat_template, "leave out --chat", &t_pre, &n_pre,
                                &t_post, &n_post))
        goto done;
    if (encode(tok, intro, false, &t_intro, &n_intro) ||
        encode(tok, filler, false, &t_fill, &n_fill))
        goto done;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "longctx eval: cannot write %s\n", out_path);
        goto done;
    }
    if (out) fprintf(out, "len\tdepth\ttrials\tcorrect\n"), fflush(out);
    if (dump_path && !(dump = fopen(dump_path, "a"))) {
        fprintf(stderr, "longctx eval: cannot write %s\n", dump_path);
        goto done;
    }
    int64_t max_len = 0;
    for (int li = 0; li < n_lens; li++)
        max_len = (int64_t)lens[li] > max_len ? (int64_t)lens[li] : max_len;
    if (gen_context("eval", &o, m, max_len + 64, &ctx) != CLI_OK) goto done;
    uint64_t rng = 0x5EED ^ o.sampling.seed;
    printf("%s (%s)\n%8s %8s %8s %8s\n", k_task_names[task], chat ? "chat" : "completion", "len",
           "depth", "correct", "acc");
    double all_ok = 0;
    int64_t all_n = 0;
    /* the counters of the contexts freed so far (--trace: one context per trial) */
    lc_attn_stats st_base = {0, 0}, st_all0 = {0, 0};
    if (eval_attn_stats(ctx, &st_base, &st_all0) != LC_OK) goto done;
    for (int li = 0; li < n_lens; li++) {
        const int64_t len = (int64_t)lens[li];
        lc_attn_stats st0 = {0, 0};
        if (eval_attn_stats(ctx, &st_base, &st0) != LC_OK) goto done;
        for (int di = 0; di < n_depths; di++) {
            double ok = 0;
            for (long long tr = 0; tr < trials; tr++) {
                trial_text tt;
                make_trial(task, chat, &rng, &tt);
                int32_t *t_nd[MAX_NEEDLES] = {0}, *t_qq = NULL;
                size_t n_nd[MAX_NEEDLES] = {0}, n_qq = 0, n_nd_all = 0;
                bool enc_ok = true;
                for (int k = 0; k < tt.n_needles && enc_ok; k++) {
                    enc_ok = encode(tok, tt.needle[k], false, &t_nd[k], &n_nd[k]) == LC_OK;
                    n_nd_all += n_nd[k];
                }
                enc_ok = enc_ok && encode(tok, tt.question, false, &t_qq, &n_qq) == LC_OK;
                if (!enc_ok) {
                    for (int k = 0; k < MAX_NEEDLES; k++)
                        free(t_nd[k]);
                    free(t_qq);
                    goto done;
                }
                const int64_t fixed = (int64_t)(n_pre + n_intro + n_nd_all + n_qq + n_post) +
                                      (lc_tokenizer_add_bos(tok) ? 1 : 0);
                int64_t units = (len - fixed) / (int64_t)n_fill;
                if (units < 1) units = 1;
                int64_t at[MAX_NEEDLES];
                for (int k = 0; k < tt.n_needles; k++) {
                    /* needle k: spread after the depth (in order, so chains read forwards) */
                    const double d = depths[di] + (1.0 - depths[di]) * k / tt.n_needles;
                    at[k] = (int64_t)(d * (double)units + 0.5);
                }
                prompt.n = 0;
                size_t needle0 = 0; /* the first needle's first token */
                bool okb = true;
                if (lc_tokenizer_add_bos(tok)) {
                    int32_t bos = lc_tokenizer_bos(tok);
                    okb = tb_push(&prompt, &bos, 1);
                }
                okb = okb && tb_push(&prompt, t_pre, n_pre) && tb_push(&prompt, t_intro, n_intro);
                for (int64_t u = 0; u <= units && okb; u++) {
                    for (int k = 0; k < tt.n_needles && okb; k++)
                        if (at[k] == u) {
                            if (k == 0) needle0 = prompt.n;
                            okb = tb_push(&prompt, t_nd[k], n_nd[k]);
                        }
                    if (u < units) okb = okb && tb_push(&prompt, t_fill, n_fill);
                }
                okb = okb && tb_push(&prompt, t_qq, n_qq) && tb_push(&prompt, t_post, n_post);
                for (int k = 0; k < MAX_NEEDLES; k++)
                    free(t_nd[k]);
                free(t_qq);
                if (!okb) {
                    fprintf(stderr, "longctx eval: out of memory\n");
                    goto done;
                }
                if (dump) {
                    fprintf(dump, "%s", tt.expect[0]);
                    for (size_t t = 0; t < prompt.n; t++)
                        fprintf(dump, " %d", prompt.ids[t]);
                    fputc('\n', dump);
                }
                lc_request req = {.prompt = prompt.ids,
                                  .n_prompt = prompt.n,
                                  .max_tokens = tt.max_tokens,
                                  .sampling = o.sampling};
                req.sampling.temperature = 0.0f;
                if (trace) { /* InfiniteHiP's diagnosis (attn/infinitehip.c): the traced span
                              * is a context parameter, so this trial gets a context of its own */
                    o.trace_begin = (int64_t)needle0;
                    o.trace_end   = (int64_t)(needle0 + n_nd[0]);
                    if (eval_context_renew("eval", &o, m, max_len + 64, &ctx, &st_base) != CLI_OK)
                        goto done;
                    fprintf(stderr, "trace: len %zu depth %.2f trial %lld needle tokens "
                            "[%zu,%zu)\n", prompt.n, depths[di], tr, needle0, needle0 + n_nd[0]);
                }
                gen_result res;
                if (gen_run("eval", ctx, &req, false, 1 << 30, &res) != CLI_OK) {
                    free(res.text);
                    goto done;
                }
                int found = 0;
                for (int k = 0; k < tt.n_expect; k++)
                    found += res.text && strstr(res.text, tt.expect[k]) != NULL;
                const double score = (double)found / tt.n_expect;
                ok += score;
                if (verbose)
                    fprintf(stderr, "len %lld depth %.2f trial %lld expect %s%s: %d/%d -> \"%s\"\n",
                            (long long)prompt.n, depths[di], tr, tt.expect[0],
                            tt.n_expect > 1 ? ",..." : "", found, tt.n_expect,
                            res.text ? res.text : "");
                free(res.text);
            }
            printf("%8lld %8.2f %6.4g/%-3lld %7.1f%%\n", (long long)len, depths[di], ok, trials,
                   100.0 * ok / (double)trials);
            fflush(stdout);
            if (out) { /* flushed per row: a run cut short keeps the rows it finished */
                fprintf(out, "%lld\t%.4f\t%lld\t%.4g\n", (long long)len, depths[di], trials, ok);
                fflush(out);
            }
            all_ok += ok;
            all_n += trials;
        }
        lc_attn_stats st1 = {0, 0};
        if (eval_attn_stats(ctx, &st_base, &st1) != LC_OK) goto done;
        print_selection_stats(len, &st0, &st1);
    }
    printf("overall: %.4g/%lld = %.1f%%\n", all_ok, (long long)all_n,
           100.0 * all_ok / (double)all_n);
    lc_attn_stats st_all1 = {0, 0};
    if (eval_attn_stats(ctx, &st_base, &st_all1) != LC_OK) goto done;
    print_selection_stats(0, &st_all0, &st_all1);
    rc = CLI_OK;
done:
    if (out) fclose(out);
    if (dump) fclose(dump);
    free(prompt.ids);
    free(t_intro), free(t_fill), free(t_pre), free(t_post);
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}
