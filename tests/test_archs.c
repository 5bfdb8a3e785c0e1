/*
 * test_archs.c — end-to-end logits of tiny random-weight models of each supported
 * architecture on the CPU against Hugging Face transformers (fixtures in tests/fixtures/tiny/,
 * written by scripts/gen_tiny_models.py; llama.cpp agrees with them to ~4e-6, see the
 * fixture headers). DESIGN.md "Models": any llama/mistral/qwen2 GGUF must load and run.
 *
 *   qwen2.gguf         q/k/v biases, NEOX RoPE pairing, rope.freq_base 1e6, GQA 2, tied output
 *   mistral.gguf       GQA 4, head_dim 128 with hidden 64 (attention.key_length), base 1e6
 *   llama-untied.gguf  separate output.weight, no GQA, head_dim 32 with hidden 64,
 *                      llama.rope.scaling.type "linear", factor 2
 *
 * Public API only (include/longctx.h). For every model: the hyper-parameters reported by
 * lc_model_get_info match the file; for every fixture prompt (random ids, 20 and 70 long):
 *   1. prompt-only evaluation (max_tokens 0), in one chunk and with n_batch 16 (chunked
 *      prefill): same top-1 and max |d log-prob| over the reference's top 20 <= 1e-3 (the
 *      models are fp16-valued weights computed in fp32 on both sides: ~1e-5 is expected;
 *      the value reached is printed);
 *   2. a greedy run (max_tokens 8, temperature 0, ignore_eos): all 8 ids equal the reference
 *      (the reference's best-second gaps are all >= 2e-3, so there are no ties);
 *   3. both prompts' greedy runs with the two sequences live in one context at once: the same
 *      ids.
 */
#include "longctx.h"
#include "test_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_DIR LC_SOURCE_DIR "/tests/fixtures/tiny/"

#define MAX_TOP     32
#define MAX_GREEDY  16
#define MAX_PROMPTS 4
#define TOP_COMPARE 20
#define TOL_LOGPROB 1e-3
#define SMALL_BATCH 16

typedef struct {
    int32_t id;
    double  lp;
} pair_t;

typedef struct {
    char     name[64];
    int32_t *ids;
    int      n_ids;
    pair_t   top[MAX_TOP];
    int      n_top;
    int32_t  greedy[MAX_GREEDY];
    int      n_greedy;
} fixture_t;

/* What the model file states (checked through lc_model_get_info). */
typedef struct {
    const char *file; /* base name without extension: <file>.gguf, <file>.txt */
    const char *arch;
    int32_t     n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    float       rope_base;
} model_case;

static const model_case k_cases[] = {
    {"qwen2", "qwen2", 128, 4, 2, 32, 64, 272, 1e6f},
    {"mistral", "llama", 64, 4, 1, 128, 48, 272, 1e6f},
    {"llama-untied", "llama", 64, 4, 4, 32, 128, 272, 1e4f},
};

/* ---- fixture parsing (format: scripts/gen_tiny_models.py) ------------------------------- */

static void skip_line(FILE *f) {
    int ch;
    while ((ch = fgetc(f)) != EOF && ch != '\n') {
    }
}

/* Returns the number of prompts read, or -1 on a malformed file. */
static int read_fixtures(const char *path, fixture_t *fx, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    int        n   = 0;
    fixture_t *cur = NULL;
    char       word[128];
    bool       ok = true;
    while (ok && fscanf(f, "%127s", word) == 1) {
        if (word[0] == '#' || !strcmp(word, "model") || !strcmp(word, "source") ||
            !strcmp(word, "gmargin")) {
            skip_line(f);
        } else if (!strcmp(word, "prompt")) {
            ok = n < cap && !cur;
            if (!ok) break;
            cur = &fx[n++];
            memset(cur, 0, sizeof *cur);
            ok = fscanf(f, "%63s", cur->name) == 1;
        } else if (!cur) {
            ok = false;
        } else if (!strcmp(word, "ids")) {
            int k = 0;
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k < 100000 && !cur->ids;
            if (ok) {
                cur->ids = malloc((size_t)k * sizeof *cur->ids);
                ok       = cur->ids != NULL;
                for (int i = 0; ok && i < k; i++) ok = fscanf(f, "%" SCNd32, &cur->ids[i]) == 1;
                cur->n_ids = k;
            }
        } else if (!strcmp(word, "top")) {
            int k = 0;
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k <= MAX_TOP;
            for (int i = 0; ok && i < k; i++)
                ok = fscanf(f, "%" SCNd32 " %lf", &cur->top[i].id, &cur->top[i].lp) == 2;
            cur->n_top = k;
        } else if (!strcmp(word, "greedy")) {
            int k = 0;
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k <= MAX_GREEDY;
            for (int i = 0; ok && i < k; i++) ok = fscanf(f, "%" SCNd32, &cur->greedy[i]) == 1;
            cur->n_greedy = k;
        } else if (!strcmp(word, "end")) {
            ok  = cur->n_ids > 0 && cur->n_top >= TOP_COMPARE && cur->n_greedy > 0;
            cur = NULL;
        } else {
            fprintf(stderr, "%s: unknown record '%s'\n", path, word);
            ok = false;
        }
    }
    fclose(f);
    if (!ok || cur) {
        fprintf(stderr, "%s: malformed fixture file\n", path);
        for (int i = 0; i < n; i++) free(fx[i].ids);
        return -1;
    }
    return n;
}

static void free_fixtures(fixture_t *fx, int n) {
    for (int i = 0; i < n; i++) free(fx[i].ids);
}

/* ---- engine helpers --------------------------------------------------------------------- */

static bool log_softmax(const float *logits, int n, double *out) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(logits[i])) return false;
        if (logits[i] > mx) mx = logits[i];
    }
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    const double lse = mx + log(s);
    for (int i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
    return true;
}

static int argmax(const double *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static void remove_seq(lc_context *c, int32_t seq) {
    int rc = lc_context_remove(c, seq);
    CHECKF(rc == LC_OK || rc == LC_ERR_NOT_FOUND, "lc_context_remove: %s (%s)",
           lc_status_str(rc), lc_last_error());
}

static lc_request make_request(const int32_t *ids, int n_ids, int max_tokens) {
    lc_request r           = {0};
    r.prompt               = ids;
    r.n_prompt             = (size_t)n_ids;
    r.max_tokens           = max_tokens;
    r.sampling             = lc_sampling_default();
    r.sampling.temperature = 0.0f;
    r.ignore_eos           = true;
    return r;
}

/* Evaluate ids as a prompt (max_tokens 0); the last position's log-softmax goes to lp. */
static bool eval_prompt(lc_context *c, const int32_t *ids, int n_ids, double *lp) {
    lc_request r   = make_request(ids, n_ids, 0);
    int32_t    seq = -1;
    int        rc  = lc_context_add(c, &r, &seq);
    CHECKF(rc == LC_OK, "lc_context_add (%d ids): %s (%s)", n_ids, lc_status_str(rc),
           lc_last_error());
    if (rc != LC_OK) return false;
    bool done = false, ok = true;
    for (int steps = 0; !done && ok && steps < n_ids + 8; steps++) {
        lc_event ev[4];
        size_t   n_ev = 0;
        rc            = lc_context_step(c, ev, 4, &n_ev);
        CHECKF(rc == LC_OK, "lc_context_step: %s (%s)", lc_status_str(rc), lc_last_error());
        ok = rc == LC_OK && n_ev > 0;
        for (size_t e = 0; ok && e < n_ev; e++) {
            if (ev[e].seq_id != seq) continue;
            CHECK(ev[e].token == -1);
            if (ev[e].finish != LC_FINISH_NONE || ev[e].n_prompt_done == ev[e].n_prompt)
                done = true;
        }
    }
    CHECKF(done, "prompt of %d ids not evaluated", n_ids);
    if (done && ok) {
        const float *logits = lc_context_logits(c, seq);
        CHECK(logits != NULL);
        ok = logits && log_softmax(logits, lc_context_n_vocab(c), lp);
        CHECKF(ok, "no or non-finite logits (%d ids)", n_ids);
    }
    remove_seq(c, seq);
    return done && ok;
}

/* Compare to the reference's top list: same top-1, returns max |d| over TOP_COMPARE ids. */
static double compare_top(const char *what, const double *lp, int n_vocab, const fixture_t *f) {
    double maxd  = 0.0;
    int    worst = f->top[0].id;
    for (int i = 0; i < TOP_COMPARE; i++) {
        const int32_t id = f->top[i].id;
        CHECK(id >= 0 && id < n_vocab);
        if (id < 0 || id >= n_vocab) return INFINITY;
        const double d = fabs(lp[id] - f->top[i].lp);
        if (d > maxd) {
            maxd  = d;
            worst = id;
        }
    }
    const int am = argmax(lp, n_vocab);
    CHECKF(am == f->top[0].id, "%s: top-1 %d (lp %.5f), reference %d (lp %.5f; ours %.5f)", what,
           am, lp[am], f->top[0].id, f->top[0].lp, lp[f->top[0].id]);
    CHECKF(maxd <= TOL_LOGPROB, "%s: max |dlogprob| %.3e at token %d > %.0e", what, maxd, worst,
           TOL_LOGPROB);
    return maxd;
}

/* Greedy runs of n prompts admitted together into c; out[i] gets the ids of prompt i.
 * Returns false on an engine error. */
static bool run_greedy(lc_context *c, fixture_t *const *f, int n, int32_t out[][MAX_GREEDY],
                       int *n_out) {
    int32_t seq[MAX_PROMPTS];
    bool    live[MAX_PROMPTS];
    int     total = 0;
    for (int i = 0; i < n; i++) {
        lc_request r = make_request(f[i]->ids, f[i]->n_ids, f[i]->n_greedy);
        int        rc = lc_context_add(c, &r, &seq[i]);
        CHECKF(rc == LC_OK, "lc_context_add (greedy): %s (%s)", lc_status_str(rc),
               lc_last_error());
        if (rc != LC_OK) return false;
        live[i]  = true;
        n_out[i] = 0;
        total += f[i]->n_ids + f[i]->n_greedy;
    }
    int n_live = n;
    for (int steps = 0; n_live > 0 && steps < total + 16; steps++) {
        lc_event ev[8];
        size_t   n_ev = 0;
        int      rc   = lc_context_step(c, ev, 8, &n_ev);
        CHECKF(rc == LC_OK, "lc_context_step: %s (%s)", lc_status_str(rc), lc_last_error());
        if (rc != LC_OK || n_ev == 0) break;
        for (size_t e = 0; e < n_ev; e++) {
            for (int i = 0; i < n; i++) {
                if (!live[i] || ev[e].seq_id != seq[i]) continue;
                if (ev[e].token >= 0) {
                    CHECK(n_out[i] < f[i]->n_greedy);
                    if (n_out[i] < f[i]->n_greedy) out[i][n_out[i]++] = ev[e].token;
                }
                if (ev[e].finish != LC_FINISH_NONE) {
                    CHECKF(ev[e].finish == LC_FINISH_LENGTH, "greedy run ended with %d",
                           (int)ev[e].finish);
                    live[i] = false;
                    n_live--;
                }
            }
        }
    }
    CHECKF(n_live == 0, "%d greedy sequences did not finish", n_live);
    for (int i = 0; i < n; i++) remove_seq(c, seq[i]);
    return n_live == 0;
}

/* Number of leading ids equal to the reference. */
static int greedy_match(const fixture_t *f, const int32_t *gen, int n_gen) {
    int k = 0;
    while (k < n_gen && k < f->n_greedy && gen[k] == f->greedy[k]) k++;
    return k;
}

static lc_context *make_context(lc_model *m, int32_t n_batch, int32_t n_seq) {
    lc_context_params p = lc_context_default_params();
    p.n_ctx             = 256;
    p.n_seq_max         = n_seq;
    if (n_batch > 0) p.n_batch = n_batch;
    lc_context *c  = NULL;
    int         rc = lc_context_create(m, &p, &c);
    CHECKF(rc == LC_OK && c, "lc_context_create (n_batch %d): %s (%s)", p.n_batch,
           lc_status_str(rc), lc_last_error());
    return rc == LC_OK ? c : NULL;
}

/* Returns the largest |d log-prob| seen for this model. */
static double run_case(const model_case *mc) {
    char path[512], fpath[512];
    snprintf(path, sizeof path, FIXTURE_DIR "%s.gguf", mc->file);
    snprintf(fpath, sizeof fpath, FIXTURE_DIR "%s.txt", mc->file);
    double worst = 0.0;

    fixture_t fx[MAX_PROMPTS];
    int       n_fx = read_fixtures(fpath, fx, MAX_PROMPTS);
    CHECKF(n_fx >= 2, "%s: %d fixture prompts", fpath, n_fx);
    if (n_fx < 1) return INFINITY;

    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1; /* tiny models: threads would only add noise */
    lc_model *m        = NULL;
    int       rc       = lc_model_load(path, &mp, &m);
    CHECKF(rc == LC_OK && m, "lc_model_load(%s): %s (%s)", path, lc_status_str(rc),
           lc_last_error());
    if (rc != LC_OK) {
        free_fixtures(fx, n_fx);
        return INFINITY;
    }
    lc_model_info info;
    CHECK(lc_model_get_info(m, &info) == LC_OK);
    CHECKF(!strcmp(info.arch, mc->arch), "%s: arch %s", mc->file, info.arch);
    CHECKF(info.n_layer == 2 && info.n_embd == mc->n_embd && info.n_head == mc->n_head &&
               info.n_head_kv == mc->n_head_kv && info.head_dim == mc->head_dim &&
               info.n_ff == mc->n_ff && info.n_vocab == mc->n_vocab,
           "%s: info layers %d embd %d heads %d/%d head_dim %d ff %d vocab %d", mc->file,
           info.n_layer, info.n_embd, info.n_head, info.n_head_kv, info.head_dim, info.n_ff,
           info.n_vocab);
    CHECKF(fabsf(info.rope_freq_base - mc->rope_base) <= 1e-6f * mc->rope_base,
           "%s: rope_freq_base %g", mc->file, (double)info.rope_freq_base);

    lc_context *c_one   = make_context(m, 0, MAX_PROMPTS);
    lc_context *c_small = make_context(m, SMALL_BATCH, MAX_PROMPTS);
    int32_t     n_vocab = c_one ? lc_context_n_vocab(c_one) : 0;
    double     *lp      = n_vocab > 0 ? malloc((size_t)n_vocab * sizeof *lp) : NULL;
    CHECK(n_vocab == mc->n_vocab);
    CHECK(lp != NULL);

    if (c_one && c_small && lp) {
        fixture_t *all[MAX_PROMPTS];
        for (int i = 0; i < n_fx; i++) {
            fixture_t *f = &fx[i];
            all[i]       = f;
            char what[160];
            for (int pass = 0; pass < 2; pass++) {
                lc_context *c = pass == 0 ? c_one : c_small;
                snprintf(what, sizeof what, "%.31s %.63s %s", mc->file, f->name,
                         pass == 0 ? "one chunk" : "n_batch 16");
                if (!eval_prompt(c, f->ids, f->n_ids, lp)) continue;
                double d = compare_top(what, lp, n_vocab, f);
                if (d > worst) worst = d;
                fprintf(stderr, "%-13s %-18s %2d ids  %-10s  top-1 %3d  max|dlogprob| %.2e\n",
                        mc->file, f->name, f->n_ids, pass == 0 ? "one chunk" : "n_batch 16",
                        argmax(lp, n_vocab), d);
            }
            int32_t gen[1][MAX_GREEDY];
            int     n_gen[1] = {0};
            if (run_greedy(c_one, &all[i], 1, gen, n_gen)) {
                int k = greedy_match(f, gen[0], n_gen[0]);
                CHECKF(n_gen[0] == f->n_greedy && k == f->n_greedy,
                       "%s %s: greedy matches the reference for %d of %d ids (got %d)",
                       mc->file, f->name, k, f->n_greedy, n_gen[0]);
                fprintf(stderr, "%-13s %-18s greedy %d/%d equal\n", mc->file, f->name, k,
                        f->n_greedy);
            }
        }
        /* all prompts at once, with chunked prefill */
        int32_t gen[MAX_PROMPTS][MAX_GREEDY];
        int     n_gen[MAX_PROMPTS] = {0};
        if (run_greedy(c_small, all, n_fx, gen, n_gen)) {
            int ok = 0;
            for (int i = 0; i < n_fx; i++) {
                int k = greedy_match(&fx[i], gen[i], n_gen[i]);
                CHECKF(n_gen[i] == fx[i].n_greedy && k == fx[i].n_greedy,
                       "%s %s (batched): greedy matches for %d of %d ids", mc->file,
                       fx[i].name, k, fx[i].n_greedy);
                ok += k == fx[i].n_greedy;
            }
            fprintf(stderr, "%-13s %d prompts batched, n_batch 16: %d/%d greedy runs equal\n",
                    mc->file, n_fx, ok, n_fx);
        }
    }
    free(lp);
    if (c_small) lc_context_free(c_small);
    if (c_one) lc_context_free(c_one);
    lc_model_free(m);
    free_fixtures(fx, n_fx);
    return worst;
}

int main(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        double d = run_case(&k_cases[i]);
        fprintf(stderr, "%-13s worst max|dlogprob| %.2e (tolerance %.0e)\n", k_cases[i].file, d,
                TOL_LOGPROB);
    }
    TEST_END();
}
