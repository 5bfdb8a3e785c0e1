/*
 * logits_fixture.h — shared by the end-to-end logits tests (test_logits.c, test_archs.c):
 * the parser of the reference fixture files written by scripts/gen_logits_fixtures.py and
 * scripts/gen_tiny_models.py (one format: `prompt`/`ids`/`top`/`greedy`/`gmargin`/`prefix`/
 * `end` records), and helpers that evaluate a prompt, compare its last log-probs with a
 * reference and run greedy continuations, over the public API (include/longctx.h) only.
 *
 * The including test defines, before the #include:
 *   MAX_TOP      most (id, log-prob) pairs in a `top` or `prefix` record
 *   MAX_GREEDY   most ids in a `greedy` / values in a `gmargin` record
 *   MAX_PREFIX   most `prefix` records per prompt (0: a `prefix` record is an error)
 *   MAX_PROMPTS  most sequences run_greedy runs at once
 *   TOL_LOGPROB  largest |d log-prob| compare_top accepts
 */
#ifndef LC_LOGITS_FIXTURE_H
#define LC_LOGITS_FIXTURE_H

#if !defined(MAX_TOP) || !defined(MAX_GREEDY) || !defined(MAX_PREFIX) || \
    !defined(MAX_PROMPTS) || !defined(TOL_LOGPROB)
#error "define MAX_TOP, MAX_GREEDY, MAX_PREFIX, MAX_PROMPTS and TOL_LOGPROB first"
#endif

#include "longctx.h"
#include "test_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP_COMPARE   20     /* reference top ids compared (every `top` record has >= 20) */
#define IDS_LIMIT     100000 /* a prompt has fewer ids than this */

typedef struct {
    int32_t id;
    double  lp;
} pair_t;

#if MAX_PREFIX > 0
typedef struct {
    int    len; /* prefix length in tokens */
    int    k;
    pair_t top[MAX_TOP];
} prefix_t;
#endif

typedef struct {
    char     name[64];
    int32_t *ids;
    int      n_ids;
    pair_t   top[MAX_TOP];
    int      n_top;
    int32_t  greedy[MAX_GREEDY];
    int      n_greedy;
    double   gmargin[MAX_GREEDY]; /* reference best - second-best log-prob per greedy step */
    int      n_gmargin;
#if MAX_PREFIX > 0
    prefix_t prefix[MAX_PREFIX];
    int      n_prefix;
#endif
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

/* Returns the number of prompts read, or -1 on a malformed file (nothing left allocated). */
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
        if (word[0] == '#' || !strcmp(word, "model") || !strcmp(word, "source")) {
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
            ok    = fscanf(f, "%d", &k) == 1 && k > 0 && k < IDS_LIMIT && !cur->ids;
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
#if MAX_PREFIX > 0
        } else if (!strcmp(word, "prefix")) {
            ok = cur->n_prefix < MAX_PREFIX;
            if (ok) {
                prefix_t *p = &cur->prefix[cur->n_prefix];
                ok          = fscanf(f, "%d", &p->len) == 1 && p->len > 0 &&
                     read_pairs(f, p->top, &p->k);
                if (ok) cur->n_prefix++;
            }
#endif
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

/* Log-softmax of n float logits into out (double). False if any logit is not finite. */
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

/* The top n ids of lp (n_vocab values), best first. */
static inline void top_n(const double *lp, int n_vocab, pair_t *top, int n) {
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int v = 0; v < n_vocab; v++) {
            if (best >= 0 && lp[v] <= lp[best]) continue;
            bool taken = false;
            for (int j = 0; j < k && !taken; j++) taken = top[j].id == v;
            if (!taken) best = v;
        }
        top[k].id = best, top[k].lp = lp[best];
    }
}

static void remove_seq(lc_context *c, int32_t seq) {
    int rc = lc_context_remove(c, seq);
    /* A finished sequence may already be gone; anything else is an error. */
    CHECKF(rc == LC_OK || rc == LC_ERR_NOT_FOUND, "lc_context_remove: %s (%s)",
           lc_status_str(rc), lc_last_error());
}

/* Greedy (temperature 0), ignore_eos; max_tokens 0 evaluates the prompt only. */
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

/* n_ctx, and n_batch / n_seq_max where > 0 (else the defaults). */
static lc_context *make_context(lc_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_seq) {
    lc_context_params p = lc_context_default_params();
    p.n_ctx             = n_ctx;
    if (n_batch > 0) p.n_batch = n_batch;
    if (n_seq > 0) p.n_seq_max = n_seq;
    lc_context *c  = NULL;
    int         rc = lc_context_create(m, &p, &c);
    CHECKF(rc == LC_OK && c, "lc_context_create (n_batch %d): %s (%s)", p.n_batch,
           lc_status_str(rc), lc_last_error());
    return rc == LC_OK ? c : NULL;
}

/* Evaluate ids as a prompt (max_tokens 0) in c; on success the log-softmax of the last
 * position is in lp (n_vocab doubles) and the number of steps taken in *n_steps_out (if not
 * NULL). Always checked: the status codes, that no token is sampled, that the prompt is done
 * within n_ids + 8 steps, and finite logits. With check_progress also: no logits before the
 * first step, an event at every step, each event's n_prompt, n_prompt_done never going back
 * nor advancing by more than n_batch (the context's chunk size) in one step, and all n_ids
 * done at the end. */
static bool eval_prompt(lc_context *c, const int32_t *ids, int n_ids, bool check_progress,
                        int32_t n_batch, double *lp, int *n_steps_out) {
    lc_request r   = make_request(ids, n_ids, 0);
    int32_t    seq = -1;
    int        rc  = lc_context_add(c, &r, &seq);
    CHECKF(rc == LC_OK, "lc_context_add (%d ids): %s (%s)", n_ids, lc_status_str(rc),
           lc_last_error());
    if (rc != LC_OK) return false;
    if (check_progress) CHECK(lc_context_logits(c, seq) == NULL); /* nothing evaluated yet */

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
        if (check_progress)
            CHECKF(n_ev > 0, "step %d: no event while the sequence is live", n_steps);
        if (n_ev == 0) {
            ok = false;
            break;
        }
        for (size_t e = 0; e < n_ev; e++) {
            if (ev[e].seq_id != seq) continue;
            if (check_progress) {
                CHECK(ev[e].n_prompt == n_ids);
                CHECKF(ev[e].n_prompt_done - prev_done <= n_batch,
                       "one step evaluated %lld prompt tokens, n_batch is %d",
                       (long long)(ev[e].n_prompt_done - prev_done), n_batch);
                CHECK(ev[e].n_prompt_done >= prev_done);
            }
            prev_done = ev[e].n_prompt_done;
            CHECKF(ev[e].token == -1, "max_tokens 0 but token %d sampled", ev[e].token);
            if (ev[e].finish != LC_FINISH_NONE || ev[e].n_prompt_done == ev[e].n_prompt)
                done = true;
        }
    }
    CHECKF(done, "prompt of %d ids not evaluated after %d steps", n_ids, n_steps);
    if (check_progress) CHECK(prev_done == n_ids);
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

/* Compare lp to a reference top list (n_ref pairs, best first): the same top-1 (or, where
 * the reference's best two are less than tie_margin apart, the second) and max |d| over the
 * first TOP_COMPARE <= TOL_LOGPROB. Returns max |d| (INFINITY for an id out of range). */
static double compare_top(const char *what, const double *lp, int n_vocab, const pair_t *ref,
                          int n_ref, double tie_margin) {
    double maxd  = 0.0;
    int    worst = ref[0].id;
    for (int i = 0; i < TOP_COMPARE && i < n_ref; i++) {
        const int32_t id = ref[i].id;
        CHECK(id >= 0 && id < n_vocab);
        if (id < 0 || id >= n_vocab) return INFINITY;
        const double d = fabs(lp[id] - ref[i].lp);
        if (d > maxd) {
            maxd  = d;
            worst = id;
        }
    }
    const int  am  = argmax(lp, n_vocab);
    const bool tie = tie_margin > 0 && n_ref > 1 && ref[0].lp - ref[1].lp < tie_margin;
    CHECKF(am == ref[0].id || (tie && am == ref[1].id),
           "%s: top-1 %d (lp %.5f), reference %d (lp %.5f; ours %.5f)", what, am, lp[am],
           ref[0].id, ref[0].lp, lp[ref[0].id]);
    CHECKF(maxd <= TOL_LOGPROB, "%s: max |dlogprob| %.3e at token %d > %.0e", what, maxd, worst,
           TOL_LOGPROB);
    return maxd;
}

/* Greedy runs of the n prompts f[0..n) admitted together into c, max_tokens each (0: each
 * prompt's reference length n_greedy); out[i] gets the n_out[i] ids of prompt i. Always
 * checked: the status codes, at most max_tokens ids, and that each run finishes by length
 * (within its ids + max_tokens + 8 steps). With check_progress also each token event's
 * n_generated and n_prompt_done. Returns whether every run finished. */
static bool run_greedy(lc_context *c, fixture_t *const *f, int n, int max_tokens,
                       bool check_progress, int32_t out[][MAX_GREEDY], int *n_out) {
    int32_t   seq[MAX_PROMPTS];
    int       max_out[MAX_PROMPTS];
    lc_finish fin[MAX_PROMPTS];
    int       max_steps = 0;
    for (int i = 0; i < n; i++) n_out[i] = 0;
    if (n < 1 || n > MAX_PROMPTS) {
        CHECKF(false, "run_greedy: %d prompts (1 .. %d)", n, MAX_PROMPTS);
        return false;
    }
    for (int i = 0; i < n; i++) {
        max_out[i] = max_tokens > 0 ? max_tokens : f[i]->n_greedy;
        if (max_out[i] > MAX_GREEDY) {
            CHECKF(false, "run_greedy: %d tokens > MAX_GREEDY %d", max_out[i], MAX_GREEDY);
            for (int j = 0; j < i; j++) remove_seq(c, seq[j]);
            return false;
        }
        lc_request r  = make_request(f[i]->ids, f[i]->n_ids, max_out[i]);
        int        rc = lc_context_add(c, &r, &seq[i]);
        CHECKF(rc == LC_OK, "lc_context_add (greedy): %s (%s)", lc_status_str(rc),
               lc_last_error());
        if (rc != LC_OK) {
            for (int j = 0; j < i; j++) remove_seq(c, seq[j]);
            return false;
        }
        fin[i] = LC_FINISH_NONE;
        max_steps += f[i]->n_ids + max_out[i] + 8;
    }
    int n_live = n;
    for (int steps = 0; n_live > 0 && steps < max_steps; steps++) {
        lc_event ev[8];
        size_t   n_ev = 0;
        int      rc   = lc_context_step(c, ev, sizeof ev / sizeof ev[0], &n_ev);
        CHECKF(rc == LC_OK, "lc_context_step: %s (%s)", lc_status_str(rc), lc_last_error());
        if (rc != LC_OK || n_ev == 0) break;
        for (size_t e = 0; e < n_ev; e++) {
            for (int i = 0; i < n; i++) {
                if (fin[i] != LC_FINISH_NONE || ev[e].seq_id != seq[i]) continue;
                if (ev[e].token >= 0) {
                    CHECK(n_out[i] < max_out[i]);
                    if (n_out[i] < max_out[i]) out[i][n_out[i]++] = ev[e].token;
                    if (check_progress) {
                        CHECK(ev[e].n_generated == n_out[i]);
                        CHECK(ev[e].n_prompt_done == f[i]->n_ids);
                    }
                }
                fin[i] = ev[e].finish;
                if (fin[i] != LC_FINISH_NONE) n_live--;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        CHECKF(fin[i] == LC_FINISH_LENGTH, "%s: greedy run finished with %d after %d tokens",
               f[i]->name, (int)fin[i], n_out[i]);
        remove_seq(c, seq[i]);
    }
    return n_live == 0;
}

/* Number of leading ids equal to the reference. */
static inline int greedy_match(const fixture_t *f, const int32_t *gen, int n_gen) {
    int k = 0;
    while (k < n_gen && k < f->n_greedy && gen[k] == f->greedy[k]) k++;
    return k;
}

#endif
