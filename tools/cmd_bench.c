/*
 * cmd_bench.c — `longctx bench`: prompt (prefill) and generation (decode) tokens/s at several
 * context lengths, on this machine, as a table on stdout and a Markdown file under
 * bench/results/ with the device, date and commit. With --compare-llamacpp it also runs
 * scripts/bench_llamacpp.py (llama.cpp through llama-cpp-python) in the same run and reports
 * our/llama.cpp ratios.
 */
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void help(void) {
    printf("usage: longctx bench -m FILE [--contexts 512,2048,8192] [--gen N] [--reps R]\n"
           "                     [--compare-llamacpp] [--out DIR] [options]\n"
           "\n"
           "For each context length L: evaluate an L-token prompt (prompt tokens/s), then\n"
           "generate N tokens after it (generation tokens/s at that context). The best of R\n"
           "repetitions is kept. Writes DIR/bench-<device>-<date>.md (default DIR bench/results).\n"
           "\n"
           "  --contexts LIST      comma-separated context lengths (default 512,2048,8192)\n"
           "  --gen N              tokens to generate per context (default 32)\n"
           "  --reps R             repetitions (default 1)\n"
           "  --compare-llamacpp   also measure llama.cpp (python3 scripts/bench_llamacpp.py)\n"
           "  --out DIR            results directory (default bench/results)\n"
           "\n%s",
           gen_opts_help());
}

static void cpu_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, cap, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static void run_cmd_line(const char *cmd, char *buf, size_t cap) {
    buf[0]  = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)cap, p)) buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

typedef struct bench_row {
    long long ctx;
    double    prompt_tps, decode_tps;
    double    ref_prompt_tps, ref_decode_tps; /* llama.cpp, 0 if not measured */
} bench_row;

int cmd_bench(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.temperature = 0.0f;
    long long   ctxs[16]   = {512, 2048, 8192};
    int         n_ctxs     = 3;
    long long   n_gen = 32, reps = 1;
    bool        compare = false;
    const char *out_dir = "bench/results";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int         r = gen_opts_parse(&o, "bench", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--contexts")) {
            if (!(v = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
            char *copy = strdup(v), *save = NULL;
            n_ctxs     = 0;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (n_ctxs == 16 || !cli_int("bench", a, t, 16, 1 << 30, &ctxs[n_ctxs])) {
                    free(copy);
                    return CLI_USAGE;
                }
                n_ctxs++;
            }
            free(copy);
            if (!n_ctxs) {
                fprintf(stderr, "longctx bench: --contexts: empty list\n");
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--gen")) {
            if (!(v = cli_value("bench", argc, argv, &i)) || !cli_int("bench", a, v, 2, 100000, &n_gen))
                return CLI_USAGE;
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_value("bench", argc, argv, &i)) || !cli_int("bench", a, v, 1, 100, &reps))
                return CLI_USAGE;
        } else if (!strcmp(a, "--compare-llamacpp")) {
            compare = true;
        } else if (!strcmp(a, "--out")) {
            if (!(out_dir = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
        } else {
            cli_unknown_option("bench", a);
            return CLI_USAGE;
        }
    }
    lc_model *m  = NULL;
    int       rc = gen_load("bench", &o, &m);
    if (rc != CLI_OK) return rc;
    rc = CLI_ERR;
    lc_model_info info;
    lc_model_get_info(m, &info);
    long long max_ctx = 0;
    for (int i = 0; i < n_ctxs; i++) max_ctx = ctxs[i] > max_ctx ? ctxs[i] : max_ctx;
    lc_context *ctx     = NULL;
    int32_t    *prompt  = NULL;
    bench_row   rows[16];
    memset(rows, 0, sizeof rows);
    if (gen_context("bench", &o, m, max_ctx + n_gen, &ctx) != CLI_OK) goto done;
    prompt = malloc(sizeof(int32_t) * (size_t)max_ctx);
    if (!prompt) goto done;
    /* a deterministic prompt of ordinary (non-control) tokens */
    const lc_tokenizer *tok = lc_model_tokenizer(m);
    uint64_t            s   = 12345;
    for (long long i = 0; i < max_ctx; i++) {
        int32_t id;
        do {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            id = (int32_t)(s % (uint64_t)info.n_vocab);
        } while (lc_tokenizer_is_eog(tok, id) || id == lc_tokenizer_bos(tok));
        prompt[i] = id;
    }
    for (int ci = 0; ci < n_ctxs; ci++) {
        rows[ci].ctx = ctxs[ci];
        for (long long r = 0; r < reps; r++) {
            lc_request req = {.prompt = prompt, .n_prompt = (size_t)ctxs[ci],
                              .max_tokens = (int32_t)n_gen, .sampling = o.sampling,
                              .ignore_eos = true};
            gen_result res;
            fprintf(stderr, "bench: context %lld, repetition %lld/%lld\n", ctxs[ci], r + 1, reps);
            if (gen_run("bench", ctx, &req, false, 2048, &res) != CLI_OK) {
                free(res.text);
                goto done;
            }
            free(res.text);
            const double ptps = res.prompt_s > 0 ? (double)res.n_prompt / res.prompt_s : 0;
            const double dtps = res.gen_s > 0 ? (double)(res.n_generated - 1) / res.gen_s : 0;
            if (ptps > rows[ci].prompt_tps) rows[ci].prompt_tps = ptps;
            if (dtps > rows[ci].decode_tps) rows[ci].decode_tps = dtps;
        }
    }
    if (compare) {
        char cmd[1024], list[256] = "";
        size_t n = 0;
        for (int i = 0; i < n_ctxs; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", i ? "," : "", ctxs[i]);
        char thr[32] = "";
        if (o.threads) snprintf(thr, sizeof thr, " --threads %d", o.threads);
        snprintf(cmd, sizeof cmd, "python3 scripts/bench_llamacpp.py --model '%s' --contexts %s "
                 "--gen %lld%s", o.model, list, n_gen, thr);
        fprintf(stderr, "bench: running llama.cpp: %s\n", cmd);
        FILE *p = popen(cmd, "r");
        char  line[512];
        while (p && fgets(line, sizeof line, p)) {
            long long c;
            double    pt, dt;
            if (sscanf(line, "llamacpp ctx=%lld prompt_tps=%lf decode_tps=%lf", &c, &pt, &dt) == 3)
                for (int i = 0; i < n_ctxs; i++)
                    if (rows[i].ctx == c) rows[i].ref_prompt_tps = pt, rows[i].ref_decode_tps = dt;
        }
        if (!p || pclose(p) != 0)
            fprintf(stderr, "bench: llama.cpp comparison failed (is llama-cpp-python installed?)\n");
    }

    char   cpu[256], commit[64], date[32], host_dev[300];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    cpu_name(cpu, sizeof cpu);
    run_cmd_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    if (!commit[0]) snprintf(commit, sizeof commit, "unknown");
    snprintf(host_dev, sizeof host_dev, "%s, %d threads, %s weights", cpu, info.n_threads,
             o.weights == LC_WEIGHTS_F16 ? "f16" : "f32");
    char table[8192];
    size_t tn = 0;
    tn += (size_t)snprintf(table + tn, sizeof table - tn,
                           "| context | prompt tok/s | gen tok/s | llama.cpp prompt tok/s | "
                           "llama.cpp gen tok/s | prompt ratio | gen ratio |\n"
                           "|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_ctxs; i++) {
        const bench_row *r = &rows[i];
        if (r->ref_decode_tps > 0)
            tn += (size_t)snprintf(table + tn, sizeof table - tn,
                                   "| %lld | %.1f | %.2f | %.1f | %.2f | %.2fx | %.2fx |\n", r->ctx,
                                   r->prompt_tps, r->decode_tps, r->ref_prompt_tps,
                                   r->ref_decode_tps, r->prompt_tps / r->ref_prompt_tps,
                                   r->decode_tps / r->ref_decode_tps);
        else
            tn += (size_t)snprintf(table + tn, sizeof table - tn,
                                   "| %lld | %.1f | %.2f | - | - | - | - |\n", r->ctx,
                                   r->prompt_tps, r->decode_tps);
    }
    printf("longctx bench: %s (%s), device %s, %s, commit %s, %s\n\n%s", info.name, o.model,
           info.device == LC_DEVICE_CPU ? "cpu" : "cuda", cpu, commit, date, table);
    char path[1024];
    snprintf(path, sizeof path, "%s/bench-%s-%s-%s.md", out_dir,
             info.device == LC_DEVICE_CPU ? "cpu" : "cuda",
             o.weights == LC_WEIGHTS_F16 ? "f16" : "f32", date);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# longctx bench — %s\n\n- model: %s (%s)\n- device: %s (%s)\n- date: %s\n"
                "- commit: %s\n- generated tokens per context: %lld, best of %lld\n- prompt: "
                "random ordinary tokens; generation greedy, EOS ignored\n\n%s",
                info.name, o.model, info.arch, info.device == LC_DEVICE_CPU ? "cpu" : "cuda",
                host_dev, date, commit, n_gen, reps, table);
        fclose(f);
        fprintf(stderr, "bench: wrote %s\n", path);
    } else {
        fprintf(stderr, "bench: could not write %s (table printed above)\n", path);
    }
    rc = CLI_OK;
done:
    free(prompt);
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}
