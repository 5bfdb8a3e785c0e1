/*
 * test_score.c — teacher-forced scoring (lc_context_score, behind `longctx eval ppl`) on the
 * real model (CPU) against Hugging Face transformers' per-token log-probs of the same token
 * ids (tests/fixtures/logits/score.txt, from scripts/gen_score_fixture.py):
 *   1. every log-prob of a 410-token text within 1e-3 of the reference, mean NLL within 1e-4;
 *   2. other chunkings (37-row prefill chunks) and split ranges give the same numbers, and
 *      positions outside the ranges are left alone;
 *   3. more scored rows in one prefill chunk than a forward takes (the context's score_rows
 *      lowers the limit of 512) are cut into several forwards with the same result;
 *   4. a sequence generating in the same context gives the same tokens with a scoring call in
 *      the middle of its generation;
 *   5. bad ranges, too many tokens, out-of-vocabulary ids and a score_rows out of range are
 *      refused with the right code.
 */
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL   "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define FIXTURE "tests/fixtures/logits/score.txt"
#define MAXN    1024
#define UNTOUCHED 12345.0

static int32_t ids[MAXN];
static double  ref[MAXN];
static int32_t n_ids;
static double  ref_nll;

static int read_fixture(void) {
    FILE *f = fopen(FIXTURE, "r");
    if (!f) return 0;
    char key[64];
    int  ok = 0;
    while (fscanf(f, "%63s", key) == 1) {
        if (key[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
        } else if (!strcmp(key, "ids")) {
            if (fscanf(f, "%d", &n_ids) != 1 || n_ids < 2 || n_ids > MAXN / 2) break;
            for (int i = 0; i < n_ids; i++)
                if (fscanf(f, "%d", &ids[i]) != 1) goto out;
            ok |= 1;
        } else if (!strcmp(key, "logprob")) {
            int m = 0;
            if (fscanf(f, "%d", &m) != 1 || m != n_ids - 1) break;
            for (int t = 1; t <= m; t++)
                if (fscanf(f, "%lf", &ref[t]) != 1) goto out;
            ok |= 2;
        } else if (!strcmp(key, "nll")) {
            if (fscanf(f, "%lf", &ref_nll) == 1) ok |= 4;
        } else {
            int ch; /* model / source lines */
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
        }
    }
out:
    fclose(f);
    return ok == 7;
}

/* score_rows: the context's cap on logit rows per scoring forward (0: 512) */
static lc_context *make_ctx_rows(lc_model *m, int32_t n_ctx, int32_t n_batch, int32_t score_rows) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = n_ctx;
    cp.n_batch           = n_batch;
    cp.n_seq_max         = 2;
    cp.score_rows        = score_rows;
    lc_context *c        = NULL;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK);
    return c;
}

static lc_context *make_ctx(lc_model *m, int32_t n_ctx, int32_t n_batch) {
    return make_ctx_rows(m, n_ctx, n_batch, 0);
}

static void fill(double *x, int n) {
    for (int i = 0; i < n; i++) x[i] = UNTOUCHED;
}

/* n greedy tokens of prompt p; with score_ids, a scoring call after the second token */
static void greedy(lc_model *m, const int32_t *p, int np, int n, int32_t *out,
                   const int32_t *score_ids, int n_score) {
    lc_context *c = make_ctx(m, MAXN, 64);
    if (!c) return;
    lc_request r = {.prompt = p, .n_prompt = (size_t)np, .max_tokens = n,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    int32_t id = -1, got = 0;
    CHECK(lc_context_add(c, &r, &id) == LC_OK);
    for (int guard = 0; guard < 1000 && got < n; guard++) {
        lc_event ev[4];
        size_t   ne = 0;
        if (lc_context_step(c, ev, 4, &ne) != LC_OK || ne == 0) break;
        for (size_t e = 0; e < ne; e++)
            if (ev[e].token >= 0) out[got++] = ev[e].token;
        if (score_ids && got == 2) {
            static double lp[MAXN];
            lc_score_range rr = {1, n_score};
            CHECK(lc_context_score(c, score_ids, n_score, &rr, 1, lp) == LC_OK);
        }
    }
    CHECK(got == n);
    lc_context_free(c);
}

int main(void) {
    REQUIRE_MODEL(MODEL);
    if (!read_fixture()) {
        fprintf(stderr, "cannot read %s\n", FIXTURE);
        return 1;
    }
    lc_model_params mp = lc_model_default_params();
    lc_model       *m  = NULL;
    CHECK(lc_model_load(MODEL, &mp, &m) == LC_OK);
    if (!m) return 1;
    static double a[MAXN], b[MAXN], c2[MAXN];

    /* 1. against transformers */
    lc_context *c = make_ctx(m, MAXN, 512);
    fill(a, MAXN);
    lc_score_range all = {1, n_ids};
    CHECK(lc_context_score(c, ids, n_ids, &all, 1, a) == LC_OK);
    CHECK(a[0] == UNTOUCHED);
    double worst = 0, nll = 0;
    for (int t = 1; t < n_ids; t++) {
        const double e = fabs(a[t] - ref[t]);
        worst = e > worst || isnan(e) ? e : worst;
        nll -= a[t];
    }
    nll /= n_ids - 1;
    printf("score vs transformers: %d log-probs, max |d| %.2e, nll %.6f (ref %.6f), ppl %.3f\n",
           n_ids - 1, worst, nll, ref_nll, exp(nll));
    CHECKF(worst <= 1e-3, "max |d log-prob| %.3e > 1e-3", worst);
    CHECKF(fabs(nll - ref_nll) <= 1e-4, "nll %.6f vs %.6f", nll, ref_nll);

    /* 2. 37-row chunks, two ranges */
    lc_context *c37 = make_ctx(m, MAXN, 37);
    fill(b, MAXN);
    lc_score_range two[2] = {{1, 100}, {230, n_ids}};
    CHECK(lc_context_score(c37, ids, n_ids, two, 2, b) == LC_OK);
    worst = 0;
    for (int t = 0; t < n_ids; t++) {
        const bool in = (t >= 1 && t < 100) || t >= 230;
        if (!in) {
            CHECKF(b[t] == UNTOUCHED, "position %d outside the ranges was written", t);
            continue;
        }
        const double e = fabs(b[t] - a[t]);
        worst = e > worst || isnan(e) ? e : worst;
    }
    printf("37-row chunks, two ranges: max |d| %.2e vs 512-row chunks\n", worst);
    CHECKF(worst <= 1e-4, "chunking changed a log-prob by %.3e", worst);

    /* 3. at most 100 logit rows per forward (the context's score_rows): a 512-row chunk that
     *    scores 409 rows is cut into several forwards with the same result */
    lc_context *c100 = make_ctx_rows(m, MAXN, 512, 100);
    fill(c2, MAXN);
    CHECK(c100 && lc_context_score(c100, ids, n_ids, &all, 1, c2) == LC_OK);
    lc_context_free(c100);
    worst = 0;
    for (int t = 1; t < n_ids; t++) {
        const double e = fabs(c2[t] - a[t]);
        worst = e > worst || isnan(e) ? e : worst;
    }
    printf("100 logit rows per forward vs 512: max |d| %.2e\n", worst);
    CHECKF(worst <= 1e-4, "the logit-row cut changed a log-prob by %.3e", worst);

    /* 4. scoring between decode steps leaves a generating sequence alone */
    int32_t g1[8], g2[8];
    greedy(m, ids, 40, 8, g1, NULL, 0);
    greedy(m, ids, 40, 8, g2, ids, n_ids);
    CHECK(memcmp(g1, g2, sizeof g1) == 0);

    /* 5. bad input */
    lc_score_range bad1[2] = {{5, 10}, {8, 12}}, bad2 = {0, 3}, bad3 = {3, n_ids + 1};
    CHECK(lc_context_score(c, ids, n_ids, bad1, 2, a) == LC_ERR_INVALID_ARG);
    CHECK(lc_context_score(c, ids, n_ids, &bad2, 1, a) == LC_ERR_INVALID_ARG);
    CHECK(lc_context_score(c, ids, n_ids, &bad3, 1, a) == LC_ERR_INVALID_ARG);
    static int32_t many[MAXN + 1];
    CHECK(lc_context_score(c, many, MAXN + 1, &all, 1, a) == LC_ERR_CONTEXT);
    int32_t oov[3] = {1, 2, 1 << 30};
    lc_score_range r3 = {1, 3};
    CHECK(lc_context_score(c, oov, 3, &r3, 1, a) == LC_ERR_INVALID_ARG);
    printf("last error: %s\n", lc_last_error());
    for (int i = 0; i < 2; i++) { /* a cap on logit rows outside 0 .. 512 */
        lc_context_params cp = lc_context_default_params();
        cp.n_ctx             = MAXN;
        cp.score_rows        = i ? 513 : -1;
        lc_context *bad      = NULL;
        CHECK(lc_context_create(m, &cp, &bad) == LC_ERR_INVALID_ARG && !bad &&
              strstr(lc_last_error(), "score_rows"));
    }

    lc_context_free(c), lc_context_free(c37);
    lc_model_free(m);
    TEST_END();
}
