/*
 * test_logits.c — end-to-end logits of SmolLM2-135M-Instruct on the CPU against reference
 * fixtures (tests/fixtures/logits/transformers.txt, written by scripts/gen_logits_fixtures.py
 * from a Hugging Face transformers fp32 forward of the same GGUF, dequantised to fp32).
 *
 * Public API only (include/longctx.h). For every fixture prompt:
 *   1. prompt-only evaluation (max_tokens 0) with the default n_batch (one chunk) and with
 *      n_batch 32 (several prefill chunks): same top-1 as the reference and
 *      max |d log-prob| over the reference's top 20 <= 1e-2;
 *   2. where the fixture has `prefix` records (the paragraph prompt), each prefix evaluated on
 *      its own with n_batch 5, so prefixes 6..8 and the long ones are chunked prefill;
 *   3. a greedy run (max_tokens 32, temperature 0, ignore_eos): the first 16 generated ids
 *      must equal the reference's (a mismatch at a step where the reference's best and
 *      second-best log-probs are within 2e-2 counts as a tie, not a failure); prints how many
 *      of the 32 match.
 * Skips (exit 77) when the model file is absent.
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

#define FIXTURE_PATH LC_SOURCE_DIR "/tests/fixtures/logits/transformers.txt"

#define MAX_TOP      64
#define MAX_GREEDY   64
#define MAX_PREFIX   32
#define MAX_PROMPTS  16
#define TOL_LOGPROB  1e-2
#define TOP_COMPARE  20
#define GREEDY_N     32
#define GREEDY_MUST  16
#define TIE_MARGIN   (2 * TOL_LOGPROB)

typedef struct {
    int32_t id;
    double  lp;
} pair_t;

typedef struct {
    int    len; /* prefix length in tokens */
    int    k;
    pair_t top[MAX_TOP];
} prefix_t;

typedef struct {
    char     name[64];
    int32_t *ids;
    int      n_ids;
    pair_t   top[MAX_TOP];
    int      n_top;
    int32_t  greedy[MAX_GREEDY];
    int      n_greedy;
    double   gmargin[MAX_GREEDY];
    int      n_gmargin;
    prefix_t prefix[MAX_PREFIX];
    int      n_prefix;
} fixture_t;

/* ---- fixture parsing -------------------------------------------------------------------- */

static void skip_line(FILE *f) {
    int ch;
    while ((ch = fgetc(f)) != EOF && ch != '\n') {
    }
}

static bool read_pairs(FILE *f, pair_t *out, int *n_out) {
    int k = 0;
    if (fscanf(f, "%d", &k) != 1 || k < 1 || k > MAX_TOP) return false;
    for (int i = 0; i < k; i++) {
        if (fscanf(f, "%" SCNd32 " %lf", &out[i].id, &out[i].lp) != 2) return false;
    }
    *n_out = k;
    return true;
}

/* Returns the number of prompts read, or -1 on a malformed file. */
static int read_fixtures(const char *path, fixture_t *fx, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    int       n   = 0;
    fixture_t *cur = NULL;
    char      word[128];
    bool      ok = true;
    while (ok && fscanf(f, "%127s", word) == 1) {
        if (word[0] == '#') {
            skip_line(f);
        } else if (!strcmp(word, "model") || !strcmp(word, "source")) {
            skip_line(f);
        } else if (!strcmp(word, "prompt")) {
            if (n >= cap) {
                ok = false;
                break;
            }
            cur = &fx[n++];
            memset(cur, 0, sizeof *cur);
            ok = fscanf(f, "%63s", cur->name) == 1;
        } else if (!cur) {
            ok = false;
        } else if (!strcmp(word, "ids")) {
            int k = 0;
            ok = fscanf(f, "%d", &k) == 1 && k > 0 && k < 1000000 && !cur->ids;
            if (ok) {
                cur->ids = malloc((size_t)k * sizeof *cur->ids);
                ok       = cur->ids != NULL;
                for (int i = 0; ok && i < k; i++) ok = fscanf(f, "%" SCNd32, &cur->ids[i]) == 1;
                cur->n_ids = k;
            }
        } else if (!strcmp(word, "top")) {
            ok = read_pairs(f, cur->top, &cur->n_top);
        } else if (!strcmp(word, "greedy")) {
            int k = 0;
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k <= MAX_GREEDY;
            for (int i = 0; ok && i < k; i++) ok = fscanf(f, "%" SCNd32, &cur->greedy[i]) == 1;
            cur->n_greedy = k;
        } else if (!strcmp(word, "gmargin")) {
            int k = 0;
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k <= MAX_GREEDY;
            for (int i = 0; ok && i < k; i++) ok = fscanf(f, "%lf", &cur->gmargin[i]) == 1;
            cur->n_gmargin = k;
        } else if (!strcmp(word, "prefix")) {
            ok = cur->n_prefix < MAX_PREFIX;
            if (ok) {
                prefix_t *p = &cur->prefix[cur->n_prefix];
                ok          = fscanf(f, "%d", &p->len) == 1 && p->len > 0 &&
                     read_pairs(f, p->top, &p->k);
                if (ok) cur->n_prefix++;
            }
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
        return -1;
    }
    return n;
}

static void free_fixtures(fixture_t *fx, int n) {
    for (int i = 0; i < n; i++) free(fx[i].ids);
}

/* ---- engine helpers --------------------------------------------------------------------- */

/* Log-softmax of n float logits into out (double). False if any logit is not finite. */
static bool log_softmax(const float *logits, int n, double *out) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(logits[i])) return false;
        if (logits[i] > mx) mx = logits[i];
    }
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    double lse = mx + log(s);
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
    /* A finished sequence may already be gone; anything else is an error. */
    CHECKF(rc == LC_OK || rc == LC_ERR_NOT_FOUND, "lc_context_remove: %s (%s)",
           lc_status_str(rc), lc_last_error());
}

/* Evaluate ids as a prompt (max_tokens 0) in c; on success the log-softmax of the last
 * position is in lp (n_vocab doubles). n_batch is the context's chunk size (to check that no
 * step did more than that). */
static bool eval_prompt(lc_context *c, int32_t n_batch, const int32_t *ids, int n_ids,
                        double *lp, int *n_steps_out) {
    lc_request r = {0};
    r.prompt     = ids;
    r.n_prompt   = (size_t)n_ids;
    r.max_tokens = 0;
    r.sampling   = lc_sampling_default();
    r.sampling.temperature = 0.0f;
    int32_t seq = -1;
    int     rc  = lc_context_add(c, &r, &seq);
    CHECKF(rc == LC_OK, "lc_context_add (%d ids): %s (%s)", n_ids, lc_status_str(rc),
           lc_last_error());
    if (rc != LC_OK) return false;
    CHECK(lc_context_logits(c, seq) == NULL); /* nothing evaluated yet */

    lc_event ev[8];
    bool     done = false, ok = true;
    int64_t  prev_done = 0;
    int      n_steps   = 0;
    int      max_steps = n_ids + 8; /* >= one token per step, plus slack */
    while (!done && n_steps < max_steps) {
        size_t n_ev = 0;
        rc          = lc_context_step(c, ev, sizeof ev / sizeof ev[0], &n_ev);
        n_steps++;
        CHECKF(rc == LC_OK, "lc_context_step: %s (%s)", lc_status_str(rc), lc_last_error());
        if (rc != LC_OK) {
            ok = false;
            break;
        }
        CHECKF(n_ev > 0, "step %d: no event while the sequence is live", n_steps);
        if (n_ev == 0) {
            ok = false;
            break;
        }
        for (size_t e = 0; e < n_ev; e++) {
            if (ev[e].seq_id != seq) continue;
            CHECK(ev[e].n_prompt == n_ids);
            CHECKF(ev[e].n_prompt_done - prev_done <= n_batch,
                   "one step evaluated %lld prompt tokens, n_batch is %d",
                   (long long)(ev[e].n_prompt_done - prev_done), n_batch);
            CHECK(ev[e].n_prompt_done >= prev_done);
            prev_done = ev[e].n_prompt_done;
            CHECKF(ev[e].token == -1, "max_tokens 0 but token %d sampled", ev[e].token);
            if (ev[e].finish != LC_FINISH_NONE || ev[e].n_prompt_done == ev[e].n_prompt)
                done = true;
        }
    }
    CHECKF(done, "prompt of %d ids not evaluated after %d steps", n_ids, n_steps);
    CHECK(prev_done == n_ids);
    if (done && ok) {
        const float *logits = lc_context_logits(c, seq);
        CHECK(logits != NULL);
        if (logits) {
            bool fin = log_softmax(logits, lc_context_n_vocab(c), lp);
            CHECKF(fin, "non-finite logits (%d ids)", n_ids);
            ok = fin;
        } else {
            ok = false;
        }
    }
    remove_seq(c, seq);
    if (n_steps_out) *n_steps_out = n_steps;
    return done && ok;
}

/* Compare lp to a reference top list: same top-1 (unless the reference's best two are within
 * TIE_MARGIN, then one of them) and max |d| over the first TOP_COMPARE. Returns max |d|. */
static double compare_top(const char *what, const double *lp, int n_vocab, const pair_t *ref,
                          int n_ref) {
    int    am   = argmax(lp, n_vocab);
    double maxd = 0.0;
    int    worst = ref[0].id;
    for (int i = 0; i < TOP_COMPARE && i < n_ref; i++) {
        CHECK(ref[i].id >= 0 && ref[i].id < n_vocab);
        if (ref[i].id < 0 || ref[i].id >= n_vocab) continue;
        double d = fabs(lp[ref[i].id] - ref[i].lp);
        if (d > maxd) {
            maxd  = d;
            worst = ref[i].id;
        }
    }
    bool tie = n_ref > 1 && ref[0].lp - ref[1].lp < TIE_MARGIN;
    CHECKF(am == ref[0].id || (tie && am == ref[1].id),
           "%s: top-1 %d (lp %.4f), reference %d (lp %.4f; ours %.4f)", what, am, lp[am],
           ref[0].id, ref[0].lp, lp[ref[0].id]);
    CHECKF(maxd <= TOL_LOGPROB, "%s: max |dlogprob| %.5f at token %d > %.0e", what, maxd, worst,
           TOL_LOGPROB);
    return maxd;
}

/* Greedy run: returns the number of generated ids written to out. */
static int run_greedy(lc_context *c, const int32_t *ids, int n_ids, int max_tokens,
                      int32_t *out, lc_finish *finish_out) {
    lc_request r = {0};
    r.prompt     = ids;
    r.n_prompt   = (size_t)n_ids;
    r.max_tokens = max_tokens;
    r.sampling   = lc_sampling_default();
    r.sampling.temperature = 0.0f;
    r.ignore_eos           = true;
    int32_t seq            = -1;
    int     rc             = lc_context_add(c, &r, &seq);
    CHECKF(rc == LC_OK, "lc_context_add (greedy): %s (%s)", lc_status_str(rc), lc_last_error());
    if (rc != LC_OK) return 0;

    lc_event  ev[8];
    int       n_out = 0, n_steps = 0;
    lc_finish fin   = LC_FINISH_NONE;
    int       max_steps = n_ids + max_tokens + 8;
    while (fin == LC_FINISH_NONE && n_steps < max_steps) {
        size_t n_ev = 0;
        rc          = lc_context_step(c, ev, sizeof ev / sizeof ev[0], &n_ev);
        n_steps++;
        CHECKF(rc == LC_OK, "lc_context_step: %s (%s)", lc_status_str(rc), lc_last_error());
        if (rc != LC_OK || n_ev == 0) break;
        for (size_t e = 0; e < n_ev; e++) {
            if (ev[e].seq_id != seq) continue;
            if (ev[e].token >= 0) {
                CHECK(n_out < max_tokens);
                if (n_out < max_tokens) out[n_out++] = ev[e].token;
                CHECK(ev[e].n_generated == n_out);
                CHECK(ev[e].n_prompt_done == n_ids);
            }
            fin = ev[e].finish;
        }
    }
    CHECKF(fin == LC_FINISH_LENGTH, "greedy run finished with %d after %d tokens", (int)fin,
           n_out);
    remove_seq(c, seq);
    *finish_out = fin;
    return n_out;
}

static lc_context *make_context(lc_model *m, int32_t n_batch) {
    lc_context_params p = lc_context_default_params();
    p.n_ctx             = 1024; /* the longest fixture prompt + 32 fits; keeps the KV small */
    if (n_batch > 0) p.n_batch = n_batch;
    lc_context *c  = NULL;
    int         rc = lc_context_create(m, &p, &c);
    CHECKF(rc == LC_OK && c, "lc_context_create (n_batch %d): %s (%s)", p.n_batch,
           lc_status_str(rc), lc_last_error());
    return rc == LC_OK ? c : NULL;
}

int main(void) {
    REQUIRE_MODEL(LC_MODEL_PATH);

    static fixture_t fx[MAX_PROMPTS];
    int              n_fx = read_fixtures(FIXTURE_PATH, fx, MAX_PROMPTS);
    CHECK(n_fx >= 4);
    if (n_fx < 1) TEST_END();

    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    lc_model *m        = NULL;
    int       rc       = lc_model_load(LC_MODEL_PATH, &mp, &m);
    CHECKF(rc == LC_OK && m, "lc_model_load: %s (%s)", lc_status_str(rc), lc_last_error());
    if (rc != LC_OK) {
        free_fixtures(fx, n_fx);
        TEST_END();
    }

    const int32_t  small_batch  = 32;
    const int32_t  prefix_batch = 5;
    lc_context    *c_def        = make_context(m, 0);
    lc_context    *c_small      = make_context(m, small_batch);
    lc_context    *c_prefix     = make_context(m, prefix_batch);
    int32_t        n_vocab      = c_def ? lc_context_n_vocab(c_def) : 0;
    double        *lp           = n_vocab > 0 ? malloc((size_t)n_vocab * sizeof *lp) : NULL;
    CHECK(n_vocab == 49152);
    CHECK(lp != NULL);
    int32_t def_batch = lc_context_default_params().n_batch;

    if (c_def && c_small && c_prefix && lp) {
        for (int i = 0; i < n_fx; i++) {
            fixture_t *f = &fx[i];
            char       what[128];
            int        steps = 0;

            /* 1a. one chunk (default n_batch) */
            if (eval_prompt(c_def, def_batch, f->ids, f->n_ids, lp, &steps)) {
                snprintf(what, sizeof what, "%.63s n_batch=%d", f->name, def_batch);
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top);
                fprintf(stderr, "%-14s %4d ids  n_batch %4d (%3d steps)  max|dlogprob| %.2e\n",
                        f->name, f->n_ids, def_batch, steps, d);
            }
            /* 1b. several chunks */
            if (eval_prompt(c_small, small_batch, f->ids, f->n_ids, lp, &steps)) {
                snprintf(what, sizeof what, "%.63s n_batch=%d", f->name, small_batch);
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top);
                fprintf(stderr, "%-14s %4d ids  n_batch %4d (%3d steps)  max|dlogprob| %.2e\n",
                        f->name, f->n_ids, small_batch, steps, d);
                CHECKF(steps >= (f->n_ids + small_batch - 1) / small_batch,
                       "%s: %d ids in %d steps with n_batch %d", f->name, f->n_ids, steps,
                       small_batch);
            }

            /* 2. prefixes, chunked with a tiny n_batch */
            double pmax = 0.0;
            for (int j = 0; j < f->n_prefix; j++) {
                const prefix_t *p = &f->prefix[j];
                CHECK(p->len <= f->n_ids);
                if (p->len > f->n_ids) continue;
                if (!eval_prompt(c_prefix, prefix_batch, f->ids, p->len, lp, &steps)) continue;
                snprintf(what, sizeof what, "%.63s prefix %d n_batch=%d", f->name, p->len,
                         prefix_batch);
                double d = compare_top(what, lp, n_vocab, p->top, p->k);
                if (d > pmax) pmax = d;
            }
            if (f->n_prefix > 0)
                fprintf(stderr, "%-14s %d prefixes (n_batch %d)        max|dlogprob| %.2e\n",
                        f->name, f->n_prefix, prefix_batch, pmax);

            /* 3. greedy continuation */
            int32_t   gen[GREEDY_N];
            lc_finish fin   = LC_FINISH_NONE;
            int       n_gen = run_greedy(c_def, f->ids, f->n_ids, GREEDY_N, gen, &fin);
            CHECKF(n_gen == GREEDY_N, "%s: %d tokens generated, want %d", f->name, n_gen,
                   GREEDY_N);
            int n_cmp    = n_gen < f->n_greedy ? n_gen : f->n_greedy;
            int n_prefix = 0; /* leading ids equal to the reference */
            int n_same   = 0; /* positions equal, anywhere */
            while (n_prefix < n_cmp && gen[n_prefix] == f->greedy[n_prefix]) n_prefix++;
            for (int k = 0; k < n_cmp; k++) n_same += gen[k] == f->greedy[k];
            bool tie = false;
            if (n_prefix < n_cmp) {
                double mg = n_prefix < f->n_gmargin ? f->gmargin[n_prefix] : 1e9;
                tie       = mg < TIE_MARGIN;
                fprintf(stderr,
                        "%-14s greedy diverges at step %d: %d vs reference %d (reference "
                        "best-second gap %.4f%s)\n",
                        f->name, n_prefix, gen[n_prefix], f->greedy[n_prefix], mg,
                        tie ? ", a near tie" : "");
            }
            int must = GREEDY_MUST < n_cmp ? GREEDY_MUST : n_cmp;
            CHECKF(n_prefix >= must || tie, "%s: greedy ids match the reference for %d steps, "
                                             "want %d", f->name, n_prefix, must);
            fprintf(stderr, "%-14s greedy: first %d of %d match, %d of %d positions equal\n",
                    f->name, n_prefix, GREEDY_N, n_same, GREEDY_N);
        }
    }

    free(lp);
    if (c_prefix) lc_context_free(c_prefix);
    if (c_small) lc_context_free(c_small);
    if (c_def) lc_context_free(c_def);
    lc_model_free(m);
    free_fixtures(fx, n_fx);
    TEST_END();
}
