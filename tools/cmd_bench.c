/*
 * cmd_bench.c — `longctx bench`: prompt (prefill) and generation (decode) tokens/s at several
 * context lengths, on this machine (the GPU's name in the header), as tables on stdout and a
 * Markdown file under bench/results/ with the device, date and commit. Also per context: the
 * memory the backend holds (weights, KV pool = pages x page bytes, the rest; the GPU's used
 * memory). With --profile, a second pass with the profiling backend splits a decode step (and
 * the prefill) into attention, GEMMs and the rest. With --compare-llamacpp it runs
 * scripts/bench_llamacpp.py (llama.cpp through llama-cpp-python), with --compare-transformers
 * bench/e2e_vs_transformers.py (Hugging Face transformers, SDPA, bf16, on the same GPU), in the
 * same run, and reports our/their ratios (issue 3, "CUDA backend", speed).
 */
#include "gen.h"

#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void help(void) {
    printf("usage: longctx bench -m FILE [--contexts 512,2048,8192] [--gen N] [--reps R] [--seqs N]\n"
           "                     [--profile] [--compare-llamacpp] [--compare-transformers]\n"
           "                     [--out DIR] [options]\n"
           "       longctx bench serve --url URL ...   (a server under load: bench serve --help)\n"
           "       longctx bench mix -m FILE ...       (decode beside a long prefill: bench mix --help)\n"
           "\n"
           "For each context length L: evaluate an L-token prompt (prompt tokens/s), then\n"
           "generate N tokens after it (generation tokens/s at that context: the N - 1 decode\n"
           "steps' mean, one-time costs of the first steps included, and one over the median\n"
           "step, the steady rate). The best of R repetitions is kept. One context, sized for\n"
           "the longest prompt + N (or --kv-tokens), serves every length: its KV pool is\n"
           "allocated once. Writes\n"
           "DIR/bench-<device>-<weights>-<model>-<date>.md (default DIR bench/results).\n"
           "\n"
           "  --contexts LIST      comma-separated context lengths (default 512,2048,8192)\n"
           "  --gen N              tokens to generate per context (default 32)\n"
           "  --reps R             repetitions (default 1)\n"
           "  --seqs N             also decode N sequences of each length together (one\n"
           "                       context holding all of them): aggregate generation tokens/s\n"
           "                       over --gen steps in which all N decode (after two warm-up\n"
           "                       steps) and its ratio to one sequence's (with --profile, the batched\n"
           "                       decode's per-op times on stderr too)\n"
           "  --profile            a second pass (the model loaded again) with every op timed\n"
           "                       (CUDA: events around each op; --tune profile-sync=on: the\n"
           "                       device synchronised around each): the share of a decode\n"
           "                       step (and of the prefill) in attention, GEMMs and the rest.\n"
           "                       CUDA graphs are off in that pass (ops are timed one by one)\n"
           "  --profile-gen N      tokens generated per context in the profiled pass (default: --gen)\n"
           "  --compare-llamacpp   also measure llama.cpp (python3 scripts/bench_llamacpp.py)\n"
           "  --compare-transformers  also measure Hugging Face transformers on the same GPU\n"
           "                       (python3 bench/e2e_vs_transformers.py; random bf16 weights of\n"
           "                       this model's shape), after our model is freed\n"
           "  --transformers-config NAME  config for transformers (default: the gen-model config\n"
           "                       with this model's dimensions)\n"
           "  --transformers-args S  extra arguments for e2e_vs_transformers.py (e.g. \"--chunk 8192\")\n"
           "  --python CMD         the Python interpreter for the comparisons (default python3)\n"
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

/* A growing text buffer (tables). */
typedef struct sbuf {
    char  *s;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const size_t room = b->cap - b->n;
        const int    k    = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap - b->n <= (size_t)k) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) return; /* out of memory: the table is cut short */
        b->s   = t;
        b->cap = cap;
    }
}

static const char *sb_str(const sbuf *b) { return b->s ? b->s : ""; }

typedef struct bench_row {
    long long ctx;
    double    prompt_tps, decode_tps;
    double    decode_med_tps; /* 1 / the median decode step (one-time costs left out) */
    double    lcpp_prompt_tps, lcpp_decode_tps; /* llama.cpp, 0 if not measured */
    double    hf_prompt_tps, hf_decode_tps, hf_peak_gib, hf_reserved_gib; /* transformers */
    char      hf_status[16];                    /* "" not run, "ok", "oom" */
    int       hf_chunk;
    bool      have_mem;
    lc_memory_report mem; /* after this context's runs */
    bool        have_kv;
    lc_kv_usage kv;       /* the KV tiers and slot cache after this context's runs (cumulative) */
    /* --profile: one decode step (ms) and the prefill (s), split */
    bool   have_prof;
    double prof_step_ms, dec_ms[LC_PROFILE_N_CAT];
    int64_t prof_steps;
    double prof_prefill_s, pre_s[LC_PROFILE_N_CAT];
    const char *prof_timing; /* how the ops were timed (static text from the library) */
} bench_row;

static const double GIB = 1073741824.0;

/* Batched decode: n_seqs requests of the same L-token prompt in one context (KV for all of
 * them), prefilled, then decoded together. *agg_tps: tokens generated per second over n_gen
 * steps in which all n_seqs sequences decode, after two such steps of warm-up (the first step
 * of a batch shape runs eagerly and the second is captured as a CUDA graph). The engine
 * prefills the sequences one after another, so the first ones decode while the later ones
 * prefill: each may generate up to n_gen + 2 tokens more than the prefill steps of the others
 * (bounded by n_seqs * ceil(L / n_batch)), so that n_gen steady steps of all of them come. */
static int run_batched(const gen_opts *o, lc_model *m, const int32_t *prompt, long long L,
                       long long n_seqs, long long n_gen, double *agg_tps) {
    *agg_tps = 0;
    const long long max_gen = n_gen + 2 + n_seqs * ((L + o->n_batch - 1) / o->n_batch + 1);
    lc_context_params cp;
    if (gen_context_params("bench", o, m, L + max_gen, &cp) != CLI_OK) return CLI_ERR;
    cp.n_seq_max              = (int32_t)n_seqs;
    const int64_t need_tokens = (L + max_gen + o->page_size) * n_seqs; /* KV for all of them */
    if (cp.kv_tokens < need_tokens) cp.kv_tokens = need_tokens;
    lc_context *ctx = NULL;
    int         st  = lc_context_create(m, &cp, &ctx);
    if (st != LC_OK) {
        cli_fail("bench", "creating the batched context", st);
        return CLI_ERR;
    }
    int       rc = CLI_OK;
    lc_event *ev = calloc((size_t)n_seqs, sizeof *ev);
    if (!ev) rc = CLI_ERR;
    for (long long i = 0; i < n_seqs && rc == CLI_OK; i++) {
        lc_request req = {.prompt = prompt, .n_prompt = (size_t)L, .max_tokens = (int32_t)max_gen,
                          .sampling = o->sampling, .ignore_eos = true};
        int32_t    id;
        if ((st = lc_context_add(ctx, &req, &id)) != LC_OK) {
            cli_fail("bench", "a batched request", st);
            rc = CLI_ERR;
        }
    }
    /* the steps in which every sequence decodes (none prefilling, none finished yet), after
       two of warm-up, until n_gen of them are counted; under --ws-batch-control, which lets
       only some decode in a step, the steps after every prompt is in in which any decodes */
    double    full_s = 0, prev = cli_now();
    long long tokens = 0, full = 0, started = 0;
    char     *begun  = calloc((size_t)n_seqs + 1, 1); /* by sequence id (ids are 1 .. n_seqs here) */
    if (!begun) rc = CLI_ERR;
    while (rc == CLI_OK && full < n_gen + 2) {
        size_t n_ev = 0;
        if ((st = lc_context_step(ctx, ev, (size_t)n_seqs, &n_ev)) != LC_OK) {
            cli_fail("bench", "batched generation", st);
            rc = CLI_ERR;
            break;
        }
        if (n_ev == 0) break;
        const double now = cli_now();
        long long    dec = 0;
        for (size_t e = 0; e < n_ev; e++) {
            if (ev[e].token >= 0 && ev[e].n_generated > 1 && ev[e].finish == LC_FINISH_NONE) dec++;
            if (ev[e].token >= 0 && ev[e].seq_id >= 1 && ev[e].seq_id <= n_seqs &&
                !begun[ev[e].seq_id]) {
                begun[ev[e].seq_id] = 1;
                started++;
            }
        }
        const bool counted = o->ws_batch_control ? started == n_seqs && dec > 0 : dec == n_seqs;
        if (counted && ++full > 2) full_s += now - prev, tokens += dec;
        prev = now;
    }
    if (full_s > 0) *agg_tps = (double)tokens / full_s;
    free(begun);
    free(ev);
    lc_context_free(ctx);
    return rc;
}

/* The per-step decode time of each op of the profile pr over nd decode steps, on stderr. */
static void print_decode_ops(const char *what, long long ctx, const lc_profile_report *pr, int64_t nd) {
    fprintf(stderr, "bench: context %lld, %s: %lld steps; per step:", ctx, what, (long long)nd);
    for (int i = 0; i < pr->n_ops; i++)
        if (pr->ops[i].calls[LC_PROFILE_DECODE] && nd)
            fprintf(stderr, " %s %.3f ms (%lld calls)", pr->ops[i].name,
                    1e3 * pr->ops[i].seconds[LC_PROFILE_DECODE] / (double)nd,
                    (long long)(pr->ops[i].calls[LC_PROFILE_DECODE] / nd));
    fprintf(stderr, "\n");
}

/* The profiled pass: load the model again with every op timed, run each context once (and
 * with n_seqs > 1 the batched decode too: its per-op decode times on stderr). */
static int profile_pass(gen_opts o, long long max_ctx, long long n_gen, const int32_t *prompt,
                        bench_row *rows, int n_rows, long long n_seqs) {
    /* (the library turns CUDA graphs off for it: a captured graph cannot be timed op by op) */
    o.profile       = LC_PROFILE_OPS;
    lc_model   *m   = NULL;
    lc_context *ctx = NULL;
    int         rc  = gen_load("bench", &o, &m);
    if (rc != CLI_OK) return rc;
    rc = CLI_ERR;
    if (gen_context("bench", &o, m, max_ctx + n_gen, &ctx) != CLI_OK) goto done;
    for (int ci = 0; ci < n_rows; ci++) {
        bench_row *r = &rows[ci];
        fprintf(stderr, "bench: context %lld, profiled pass\n", r->ctx);
        lc_request req = {.prompt = prompt, .n_prompt = (size_t)r->ctx,
                          .max_tokens = (int32_t)n_gen, .sampling = o.sampling,
                          .ignore_eos = true};
        gen_result res;
        lc_model_profile_reset(m);
        if (gen_run("bench", ctx, &req, false, 2048, &res) != CLI_OK) {
            free(res.text);
            goto done;
        }
        free(res.text);
        lc_profile_report pr;
        if (lc_model_profile(m, &pr) != LC_OK) {
            cli_fail("bench", "profile", LC_ERR_INTERNAL);
            goto done;
        }
        const int64_t nd = pr.n_forwards[LC_PROFILE_DECODE];
        if (nd > 0 && res.n_generated > 1) {
            r->have_prof     = true;
            r->prof_timing   = pr.timing;
            r->prof_steps    = nd;
            r->prof_step_ms  = 1e3 * res.gen_s / (double)(res.n_generated - 1);
            for (int c = 0; c < LC_PROFILE_N_CAT; c++)
                r->dec_ms[c] = 1e3 * pr.seconds[LC_PROFILE_DECODE][c] / (double)nd;
            r->prof_prefill_s = res.prompt_s;
            for (int c = 0; c < LC_PROFILE_N_CAT; c++)
                r->pre_s[c] = pr.seconds[LC_PROFILE_PREFILL][c];
        }
        /* per-op detail on stderr, for the notes */
        print_decode_ops("profiled decode", r->ctx, &pr, nd);
    }
    if (n_seqs > 1) {
        lc_context_free(ctx); /* room for the batched context's KV */
        ctx = NULL;
        for (int ci = 0; ci < n_rows; ci++) {
            double tps = 0;
            lc_model_profile_reset(m);
            if (run_batched(&o, m, prompt, rows[ci].ctx, n_seqs, n_gen, &tps) != CLI_OK) goto done;
            lc_profile_report pr;
            if (lc_model_profile(m, &pr) != LC_OK) goto done;
            char what[64];
            snprintf(what, sizeof what, "profiled decode of %lld sequences", n_seqs);
            /* (decode steps: the forwards whose rows all decode, some with fewer sequences) */
            print_decode_ops(what, rows[ci].ctx, &pr, pr.n_forwards[LC_PROFILE_DECODE]);
        }
    }
    rc = CLI_OK;
done:
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}

static void compare_llamacpp(const char *python, const gen_opts *o, const char *list,
                             long long n_gen, bench_row *rows, int n_rows) {
    char cmd[2048], thr[32] = "";
    if (o->threads) snprintf(thr, sizeof thr, " --threads %d", o->threads);
    snprintf(cmd, sizeof cmd, "%s scripts/bench_llamacpp.py --model '%s' --contexts %s --gen %lld%s",
             python, o->model, list, n_gen, thr);
    fprintf(stderr, "bench: running llama.cpp: %s\n", cmd);
    FILE *p = popen(cmd, "r");
    char  line[512];
    while (p && fgets(line, sizeof line, p)) {
        long long c;
        double    pt, dt;
        if (sscanf(line, "llamacpp ctx=%lld prompt_tps=%lf decode_tps=%lf", &c, &pt, &dt) == 3)
            for (int i = 0; i < n_rows; i++)
                if (rows[i].ctx == c) rows[i].lcpp_prompt_tps = pt, rows[i].lcpp_decode_tps = dt;
    }
    if (!p || pclose(p) != 0)
        fprintf(stderr, "bench: llama.cpp comparison failed (is llama-cpp-python installed?)\n");
}

static void compare_transformers(const char *python, const lc_model_info *info,
                                 const char *config, const char *extra, const char *list,
                                 long long n_gen, bench_row *rows, int n_rows) {
    char cmd[2048], model_arg[256];
    if (config)
        snprintf(model_arg, sizeof model_arg, "--config '%s'", config);
    else /* mistral is llama-shaped */
        snprintf(model_arg, sizeof model_arg, "--shape %s,%d,%d,%d,%d,%d,%d,%d",
                 strcmp(info->arch, "qwen2") == 0 ? "qwen2" : "llama", info->n_layer,
                 info->n_embd, info->n_ff, info->n_head, info->n_head_kv, info->head_dim,
                 info->n_vocab);
    snprintf(cmd, sizeof cmd, "%s bench/e2e_vs_transformers.py %s --contexts %s --gen %lld %s",
             python, model_arg, list, n_gen, extra ? extra : "");
    fprintf(stderr, "bench: running transformers: %s\n", cmd);
    FILE *p = popen(cmd, "r");
    char  line[512];
    while (p && fgets(line, sizeof line, p)) {
        long long c;
        double    pt, dt, pk, rs;
        char      st[16];
        int       ch;
        if (sscanf(line, "transformers ctx=%lld prompt_tps=%lf decode_tps=%lf peak_gib=%lf "
                   "reserved_gib=%lf status=%15s chunk=%d", &c, &pt, &dt, &pk, &rs, st, &ch) == 7)
            for (int i = 0; i < n_rows; i++)
                if (rows[i].ctx == c) {
                    bench_row *r       = &rows[i];
                    r->hf_prompt_tps   = pt;
                    r->hf_decode_tps   = dt;
                    r->hf_peak_gib     = pk;
                    r->hf_reserved_gib = rs;
                    r->hf_chunk        = ch;
                    snprintf(r->hf_status, sizeof r->hf_status, "%s", st);
                }
    }
    if (!p || pclose(p) != 0)
        fprintf(stderr, "bench: transformers comparison failed (torch and transformers "
                "installed? a GPU visible to PyTorch?)\n");
}

static void ratio(sbuf *b, double ours, double theirs) {
    if (theirs > 0) sb_printf(b, " %.2fx |", ours / theirs);
    else sb_printf(b, " - |");
}

static void tables(sbuf *t, const bench_row *rows, int n_rows, bool lcpp, bool hf, bool gpu,
                   const lc_model_info *info, long long page_size, lc_kv_type kv_type) {
    sb_printf(t, "| context | prompt tok/s | gen tok/s | gen tok/s (median step) |");
    if (lcpp)
        sb_printf(t, " llama.cpp prompt tok/s | llama.cpp gen tok/s | prompt ratio | gen ratio |");
    if (hf)
        sb_printf(t, " transformers prompt tok/s | transformers gen tok/s | prompt ratio | "
                  "gen ratio |");
    sb_printf(t, "\n|---:|---:|---:|---:|");
    if (lcpp) sb_printf(t, "---:|---:|---:|---:|");
    if (hf) sb_printf(t, "---:|---:|---:|---:|");
    sb_printf(t, "\n");
    for (int i = 0; i < n_rows; i++) {
        const bench_row *r = &rows[i];
        sb_printf(t, "| %lld | %.1f | %.2f | %.2f |", r->ctx, r->prompt_tps, r->decode_tps,
                  r->decode_med_tps);
        if (lcpp) {
            if (r->lcpp_decode_tps > 0)
                sb_printf(t, " %.1f | %.2f |", r->lcpp_prompt_tps, r->lcpp_decode_tps);
            else
                sb_printf(t, " - | - |");
            ratio(t, r->prompt_tps, r->lcpp_prompt_tps);
            ratio(t, r->decode_tps, r->lcpp_decode_tps);
        }
        if (hf) {
            if (!strcmp(r->hf_status, "ok")) {
                sb_printf(t, " %.1f%s | %.2f |", r->hf_prompt_tps,
                          r->hf_chunk ? " (chunked)" : "", r->hf_decode_tps);
                ratio(t, r->prompt_tps, r->hf_prompt_tps);
                ratio(t, r->decode_tps, r->hf_decode_tps);
            } else {
                const char *why = r->hf_status[0] ? r->hf_status : "not run";
                sb_printf(t, " %s | %s | - | - |", why, why);
            }
        }
        sb_printf(t, "\n");
    }

    /* memory */
    bool any_mem = false;
    for (int i = 0; i < n_rows; i++) any_mem |= rows[i].have_mem;
    if (any_mem) {
        const uint64_t page_bytes = (uint64_t)(gen_kv_bytes_per_token(info, kv_type) * (double)page_size);
        sb_printf(t, "\nMemory after each context's runs (backend allocations; KV pool = pages x "
                  "page bytes, %.3f MiB per %lld-token page over all layers, K and V):\n\n",
                  (double)page_bytes / 1048576.0, page_size);
        bool host_tier = false; /* a host KV tier in some row: its own column */
        for (int i = 0; i < n_rows; i++)
            if (rows[i].have_mem && rows[i].mem.kv_host_bytes) host_tier = true;
        sb_printf(t, "| context | weights GiB | KV pool GiB | KV pages | other GiB | backend peak GiB |");
        if (host_tier) sb_printf(t, " KV host tier GiB |");
        if (gpu) sb_printf(t, " GPU used GiB (peak seen) |");
        if (hf) sb_printf(t, " transformers peak allocated GiB | transformers reserved GiB |");
        sb_printf(t, "\n|---:|---:|---:|---:|---:|---:|");
        if (host_tier) sb_printf(t, "---:|");
        if (gpu) sb_printf(t, "---:|");
        if (hf) sb_printf(t, "---:|---:|");
        sb_printf(t, "\n");
        for (int i = 0; i < n_rows; i++) {
            const bench_row *r = &rows[i];
            if (!r->have_mem) continue;
            const lc_memory_report *m = &r->mem;
            char           pages[64];
            const uint64_t kv_all = m->kv_bytes + m->kv_host_bytes; /* pages of both tiers */
            if (page_bytes && kv_all % page_bytes == 0)
                snprintf(pages, sizeof pages, "%llu", (unsigned long long)(kv_all / page_bytes));
            else
                snprintf(pages, sizeof pages, "%.2f (not whole!)", (double)kv_all / (double)page_bytes);
            sb_printf(t, "| %lld | %.3f | %.3f | %s | %.3f | %.3f |", r->ctx,
                      m->weight_bytes / GIB, m->kv_bytes / GIB, pages, m->other_bytes / GIB,
                      m->peak_bytes / GIB);
            if (host_tier) sb_printf(t, " %.3f |", m->kv_host_bytes / GIB);
            if (gpu)
                sb_printf(t, " %.3f (%.3f) |", m->device_used_bytes / GIB,
                          m->device_peak_used_bytes / GIB);
            if (hf) {
                if (r->hf_status[0])
                    sb_printf(t, " %.2f%s | %.2f |", r->hf_peak_gib,
                              !strcmp(r->hf_status, "ok") ? "" : " (OOM)", r->hf_reserved_gib);
                else
                    sb_printf(t, " - | - |");
            }
            sb_printf(t, "\n");
        }
    }

    /* the slot cache of host reads (--kv-slot-cache-*): counters since the context began */
    bool any_cache = false;
    for (int i = 0; i < n_rows; i++) any_cache |= rows[i].have_kv && rows[i].kv.cache_slots > 0;
    if (any_cache) {
        sb_printf(t, "\nKV slot cache after each context's runs (counters since the first; a "
                  "lookup is a host-tier slab a recomputed decode selection read):\n\n"
                  "| context | slots a layer | slots used | hits | misses | evictions | overflow "
                  "| hit % | GiB gathered | map MiB uploaded |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < n_rows; i++) {
            const lc_kv_usage *u = &rows[i].kv;
            if (!rows[i].have_kv || !u->cache_slots) continue;
            const double n = (double)(u->cache_hits + u->cache_misses + u->cache_overflow);
            sb_printf(t, "| %lld | %lld | %lld | %llu | %llu | %llu | %llu | %.1f | %.3f | %.2f |\n",
                      rows[i].ctx, (long long)u->cache_slots, (long long)u->cache_used,
                      (unsigned long long)u->cache_hits, (unsigned long long)u->cache_misses,
                      (unsigned long long)u->cache_evictions,
                      (unsigned long long)u->cache_overflow,
                      n > 0 ? 100.0 * (double)u->cache_hits / n : 0.0,
                      (double)u->cache_bytes_in / GIB, (double)u->cache_map_bytes / 1048576.0);
        }
    }

    /* profile */
    const char *timing = NULL;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].have_prof) timing = rows[i].prof_timing;
    if (timing) {
        sb_printf(t, "\nOne decode step, split (a second, profiled pass with CUDA graphs off; ops "
                  "timed by %s; \"untimed\" = the profiled step minus its timed ops: host work "
                  "the device waited for, such as sampling and kernel launches, plus any "
                  "per-op timing overhead):\n\n"
                  "| context | step ms (unprofiled) | step ms (profiled) | attention ms | GEMM ms "
                  "| other ops ms | untimed ms | attention % | GEMM % | rest % |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", timing);
        for (int i = 0; i < n_rows; i++) {
            const bench_row *r = &rows[i];
            if (!r->have_prof) continue;
            const double a = r->dec_ms[LC_PROFILE_ATTENTION], g = r->dec_ms[LC_PROFILE_GEMM],
                         o = r->dec_ms[LC_PROFILE_REST], s = r->prof_step_ms;
            double u = s - a - g - o;
            if (u < 0) u = 0;
            const double tot = a + g + o + u;
            sb_printf(t, "| %lld | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n",
                      r->ctx, r->decode_tps > 0 ? 1e3 / r->decode_tps : 0.0, s, a, g, o, u,
                      100 * a / tot, 100 * g / tot, 100 * (o + u) / tot);
        }
        sb_printf(t, "\nThe prefill, split (same profiled pass):\n\n"
                  "| context | prefill s (profiled) | attention s | GEMM s | other ops s | "
                  "attention % | GEMM % | rest % |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < n_rows; i++) {
            const bench_row *r = &rows[i];
            if (!r->have_prof) continue;
            const double a = r->pre_s[LC_PROFILE_ATTENTION], g = r->pre_s[LC_PROFILE_GEMM],
                         o = r->pre_s[LC_PROFILE_REST];
            double tot = r->prof_prefill_s;
            if (tot < a + g + o) tot = a + g + o;
            if (tot <= 0) tot = 1;
            sb_printf(t, "| %lld | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n", r->ctx,
                      r->prof_prefill_s, a, g, o, 100 * a / tot, 100 * g / tot,
                      100 * (tot - a - g) / tot);
        }
    }
}

int cmd_bench(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "serve")) return cmd_bench_serve(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "mix")) return cmd_bench_mix(argc - 1, argv + 1);
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.temperature = 0.0f;
    long long   ctxs[16]   = {512, 2048, 8192};
    int         n_ctxs     = 3;
    long long   n_gen = 32, reps = 1, prof_gen = 0, n_seqs = 1;
    bool        compare = false, compare_hf = false, profile = false;
    const char *out_dir = "bench/results", *hf_config = NULL, *hf_args = NULL, *python = "python3";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int         r = gen_opts_parse(&o, "bench", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--contexts")) {
            if (!(v = cli_value("bench", argc, argv, &i)) ||
                !cli_int_list("bench", a, v, 16, 1 << 30, ctxs, 16, &n_ctxs))
                return CLI_USAGE;
        } else if (!strcmp(a, "--gen")) {
            if (!(v = cli_value("bench", argc, argv, &i)) || !cli_int("bench", a, v, 2, 100000, &n_gen))
                return CLI_USAGE;
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_value("bench", argc, argv, &i)) || !cli_int("bench", a, v, 1, 100, &reps))
                return CLI_USAGE;
        } else if (!strcmp(a, "--seqs")) {
            if (!(v = cli_value("bench", argc, argv, &i)) || !cli_int("bench", a, v, 1, 4096, &n_seqs))
                return CLI_USAGE;
        } else if (!strcmp(a, "--profile")) {
            profile = true;
        } else if (!strcmp(a, "--profile-gen")) {
            if (!(v = cli_value("bench", argc, argv, &i)) ||
                !cli_int("bench", a, v, 2, 100000, &prof_gen))
                return CLI_USAGE;
            profile = true;
        } else if (!strcmp(a, "--compare-llamacpp")) {
            compare = true;
        } else if (!strcmp(a, "--compare-transformers")) {
            compare_hf = true;
        } else if (!strcmp(a, "--transformers-config")) {
            if (!(hf_config = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
            compare_hf = true;
        } else if (!strcmp(a, "--transformers-args")) {
            if (!(hf_args = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
            compare_hf = true;
        } else if (!strcmp(a, "--python")) {
            if (!(python = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--out")) {
            if (!(out_dir = cli_value("bench", argc, argv, &i))) return CLI_USAGE;
        } else {
            cli_unknown_option("bench", a);
            return CLI_USAGE;
        }
    }
    if (!prof_gen) prof_gen = n_gen;
    o.profile    = LC_PROFILE_MEMORY; /* counts allocations only: no cost per op */
    lc_model *m  = NULL;
    int       rc = gen_load("bench", &o, &m);
    if (rc != CLI_OK) return rc;
    rc = CLI_ERR;
    lc_model_info info;
    lc_model_get_info(m, &info);
    { /* general.name comes from the file: printed escaped */
        char nm[sizeof info.name];
        lc_text_escape(nm, sizeof nm, info.name, strlen(info.name));
        memcpy(info.name, nm, sizeof nm);
    }
    const bool gpu = info.device == LC_DEVICE_CUDA;
    char       dev_name[256];
    lc_model_device_name(m, dev_name, sizeof dev_name);
    long long max_ctx = 0;
    for (int i = 0; i < n_ctxs; i++) max_ctx = ctxs[i] > max_ctx ? ctxs[i] : max_ctx;
    lc_context *ctx    = NULL;
    int32_t    *prompt = NULL;
    bench_row   rows[16];
    sbuf        table = {0};
    memset(rows, 0, sizeof rows);
    if (gen_context("bench", &o, m, max_ctx + n_gen, &ctx) != CLI_OK) goto done;
    prompt = malloc(sizeof(int32_t) * (size_t)max_ctx);
    if (!prompt) goto done;
    gen_random_prompt(lc_model_tokenizer(m), info.n_vocab, 0, prompt, max_ctx);
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
            const double mtps = res.step_median_s > 0 ? 1.0 / res.step_median_s : 0;
            if (mtps > rows[ci].decode_med_tps) rows[ci].decode_med_tps = mtps;
        }
        rows[ci].have_mem = lc_model_memory(m, &rows[ci].mem) == LC_OK;
        rows[ci].have_kv  = lc_context_kv_usage(ctx, &rows[ci].kv) == LC_OK;
        if (rows[ci].have_kv && rows[ci].kv.cache_slots > 0) {
            const lc_kv_usage *u = &rows[ci].kv;
            fprintf(stderr, "bench: context %lld, KV slot cache (so far): %lld slots a layer, "
                    "%lld used; %llu hits, %llu misses, %llu evictions, %llu overflow; %.3f GiB "
                    "gathered\n", ctxs[ci], (long long)u->cache_slots, (long long)u->cache_used,
                    (unsigned long long)u->cache_hits, (unsigned long long)u->cache_misses,
                    (unsigned long long)u->cache_evictions, (unsigned long long)u->cache_overflow,
                    (double)u->cache_bytes_in / GIB);
        }
    }
    /* batched decode: n_seqs sequences of each length decoding together */
    double batched_tps[16] = {0};
    if (n_seqs > 1) {
        lc_context_free(ctx); /* its KV pool makes room for the batched one */
        ctx = NULL;
        for (int ci = 0; ci < n_ctxs; ci++) {
            fprintf(stderr, "bench: context %lld, %lld sequences decoding together\n", ctxs[ci],
                    n_seqs);
            if (run_batched(&o, m, prompt, ctxs[ci], n_seqs, n_gen, &batched_tps[ci]) != CLI_OK)
                goto done;
        }
    }
    /* free the GPU for the next pass and for the peers */
    lc_context_free(ctx);
    ctx = NULL;
    lc_model_free(m);
    m = NULL;

    if (profile && profile_pass(o, max_ctx, prof_gen, prompt, rows, n_ctxs, n_seqs) != CLI_OK)
        goto done;

    char list[256] = "";
    for (int i = 0, n = 0; i < n_ctxs; i++)
        n += snprintf(list + n, sizeof list - (size_t)n, "%s%lld", i ? "," : "", ctxs[i]);
    if (compare) compare_llamacpp(python, &o, list, n_gen, rows, n_ctxs);
    if (compare_hf) compare_transformers(python, &info, hf_config, hf_args, list, n_gen, rows, n_ctxs);

    char   cpu[256], commit[64], date[32], host_dev[700];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    cpu_name(cpu, sizeof cpu);
    cli_commit_name(commit, sizeof commit);
    const char *wname = o.weights == LC_WEIGHTS_F16    ? "f16"
                        : o.weights == LC_WEIGHTS_BF16 ? "bf16"
                        : o.weights == LC_WEIGHTS_F32    ? "f32"
                                                         : "native";
    if (gpu)
        snprintf(host_dev, sizeof host_dev, "cuda: %s; host %s; weights %s%s, %s KV", dev_name, cpu,
                 wname, o.weights == LC_WEIGHTS_F16 || o.weights == LC_WEIGHTS_BF16
                            ? " (dequantised at load)"
                            : " (block types as stored, others in f16)",
                 o.kv_type == LC_KV_FP8 ? "fp8 (e4m3, a scale per token and head)" : "fp16");
    else
        snprintf(host_dev, sizeof host_dev, "cpu: %s, %d threads, %s weights", cpu,
                 info.n_threads, wname);
    tables(&table, rows, n_ctxs, compare, compare_hf, gpu, &info, o.page_size, o.kv_type);
    if (n_seqs > 1) {
        sb_printf(&table, "\nBatched decode: %lld sequences of each length decoding together "
                  "(aggregate generated tokens/s over --gen steps in which %s, after two "
                  "warm-up steps), against one sequence "
                  "(the generation tokens/s above):\n\n| context | sequences | aggregate tok/s | "
                  "one sequence tok/s | ratio |\n|---:|---:|---:|---:|---:|\n", n_seqs,
                  o.ws_batch_control ? "every prompt is in and the working-set control lets "
                                       "some decode"
                                     : "all of them decode");
        for (int ci = 0; ci < n_ctxs; ci++)
            sb_printf(&table, "| %lld | %lld | %.1f | %.1f | %.2f |\n", ctxs[ci], n_seqs,
                      batched_tps[ci], rows[ci].decode_tps,
                      rows[ci].decode_tps > 0 ? batched_tps[ci] / rows[ci].decode_tps : 0.0);
    }
    printf("longctx bench: %s (%s), device %s, commit %s, %s\n\n%s", info.name, o.model,
           host_dev, commit, date, sb_str(&table));

    char dslug[128], mslug[128], path[1024];
    cli_slug(gpu ? dev_name : "cpu", dslug, sizeof dslug);
    const char *base = strrchr(o.model, '/');
    base             = base ? base + 1 : o.model;
    char mbase[256];
    snprintf(mbase, sizeof mbase, "%s", base);
    char *dot = strstr(mbase, ".gguf");
    if (dot) *dot = '\0';
    cli_slug(mbase, mslug, sizeof mslug);
    char attn_desc[640], tune_desc[512];
    gen_attn_describe(&o, attn_desc, sizeof attn_desc);
    gen_tuning_describe(&o, tune_desc, sizeof tune_desc);
    printf("attention: %s\ntuning: %s\n", attn_desc, tune_desc);
    snprintf(path, sizeof path, "%s/bench-%s-%s-%s-%s%s%s.md", out_dir, dslug, wname, mslug,
             gen_attn_dense(&o) ? "" : o.attn, gen_attn_dense(&o) ? "" : "-", date);
    const int mk = cli_mkdirs(out_dir); /* created when missing */
    FILE     *f  = mk == 0 ? fopen(path, "w") : NULL;
    const int werr = mk != 0 ? mk : errno;
    if (f) {
        fprintf(f, "<!-- attention: %s -->\n<!-- tuning: %s -->\n", attn_desc, tune_desc);
        fprintf(f, "# longctx bench — %s\n\n- model: %s (%s, %d layers, %d/%d heads, head dim %d)\n"
                "- device: %s\n- date: %s\n- commit: %s\n- generated tokens per context: %lld, "
                "best of %lld\n- prompt: random ordinary tokens; generation greedy, EOS ignored; "
                "prompt evaluated in chunks of %lld tokens; one context (KV pool) sized for the "
                "longest prompt + %lld\n",
                info.name, o.model, info.arch, info.n_layer, info.n_head, info.n_head_kv,
                info.head_dim, host_dev, date, commit, n_gen, reps, o.n_batch, n_gen);
        if (compare_hf)
            fprintf(f, "- transformers: bench/e2e_vs_transformers.py in the same run on the same "
                    "GPU after our model was freed: SDPA attention, bf16, batch 1, random weights "
                    "of the same shape (speed does not depend on the values), whole-prompt "
                    "prefill (chunked only after an OOM), greedy decode with a DynamicCache; SDPA "
                    "backends flash / memory-efficient / math, cuDNN attention off (its per-call "
                    "planning dominates a decode step; see the script's header)\n");
        fprintf(f, "\n%s", sb_str(&table));
        fclose(f);
        fprintf(stderr, "bench: wrote %s\n", path);
    } else {
        fprintf(stderr, "bench: could not write %s: %s (the table is printed above)\n", path,
                strerror(werr));
    }
    rc = CLI_OK;
done:
    free(table.s);
    free(prompt);
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}
