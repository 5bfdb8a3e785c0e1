/*
 * engine_run.h — what the engine tests of the sparse methods (test_hip_engine.c,
 * test_select_engine.c) share: the passkey prompt, greedy generation of N_GEN tokens for a set
 * of prompts in one context (with the method's decode counters), the largest log-prob
 * difference of two logit rows, and the fixture both start from.
 */
#ifndef LC_TEST_ENGINE_RUN_H
#define LC_TEST_ENGINE_RUN_H

#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define N_GEN 8

typedef struct run_out {
    int32_t tokens[N_GEN];
    int32_t n;
    float  *logits; /* of the last prompt position */
} run_out;

/* the passkey prompt: filler with a key in the middle, then the question */
static int32_t *make_prompt(const lc_model *m, int n_fill, const char *key, size_t *n) {
    const char *filler = " The grass is green. The sky is blue. The sun is yellow. Here we go. "
                         "There and back again.";
    size_t cap = (size_t)n_fill * strlen(filler) + 512;
    char  *text = malloc(cap);
    text[0]     = 0;
    strcat(text, "There is an important piece of information hidden inside a lot of irrelevant "
                 "text. Find it and memorize it.\n");
    for (int i = 0; i < n_fill; i++) {
        if (i == n_fill / 2) {
            char needle[128];
            snprintf(needle, sizeof needle, " The pass key is %s. Remember it. %s is the pass key.",
                     key, key);
            strcat(text, needle);
        }
        strcat(text, filler);
    }
    strcat(text, "\nWhat is the pass key? The pass key is");
    int32_t *ids = NULL;
    CHECK(lc_tokenizer_encode(lc_model_tokenizer(m), text, strlen(text), true, false, &ids, n) ==
          LC_OK);
    free(text);
    return ids;
}

/* Generate N_GEN greedy tokens for each prompt, all in one context (batched). */
static int run(lc_model *m, const lc_context_params *cp, int32_t *const *prompts,
               const size_t *n_prompt, int n_req, run_out *outs, lc_attn_stats *stats) {
    lc_context *c = NULL;
    int         st = lc_context_create(m, cp, &c);
    if (st != LC_OK) return st;
    int32_t ids[4];
    for (int i = 0; i < n_req && st == LC_OK; i++) {
        lc_request r = {.prompt = prompts[i], .n_prompt = n_prompt[i], .max_tokens = N_GEN,
                        .sampling = lc_sampling_default(), .ignore_eos = true};
        r.sampling.temperature = 0;
        st = lc_context_add(c, &r, &ids[i]);
        outs[i].n = 0;
    }
    const int32_t V = lc_context_n_vocab(c);
    for (int guard = 0; guard < 1000 && st == LC_OK; guard++) {
        lc_event ev[8];
        size_t   n_ev = 0;
        if ((st = lc_context_step(c, ev, 8, &n_ev)) != LC_OK || n_ev == 0) break;
        for (size_t e = 0; e < n_ev; e++)
            for (int i = 0; i < n_req; i++) {
                if (ev[e].seq_id != ids[i]) continue;
                /* logits of the last prompt position: the step that sampled the first token */
                if (ev[e].token >= 0 && outs[i].n == 0 && outs[i].logits) {
                    const float *lg = lc_context_logits(c, ids[i]);
                    if (lg) memcpy(outs[i].logits, lg, sizeof(float) * (size_t)V);
                }
                if (ev[e].token >= 0 && outs[i].n < N_GEN) outs[i].tokens[outs[i].n++] = ev[e].token;
            }
    }
    if (stats && st == LC_OK) st = lc_context_attn_stats(c, stats);
    if (st != LC_OK) fprintf(stderr, "run: %s\n", lc_last_error());
    lc_context_free(c);
    return st;
}

static double max_logprob_diff(const float *a, const float *b, int32_t n) {
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, d = 0;
    for (int32_t i = 0; i < n; i++) ma = fmax(ma, a[i]), mb = fmax(mb, b[i]);
    for (int32_t i = 0; i < n; i++) sa += exp(a[i] - ma), sb += exp(b[i] - mb);
    for (int32_t i = 0; i < n; i++) {
        double x = fabs((a[i] - ma - log(sa)) - (b[i] - mb - log(sb)));
        if (x > d) d = x;
    }
    return d;
}

/* What both tests start from: SmolLM2 on the CPU, the passkey prompts a (~1K tokens) and b
 * (~800), a dense context for two sequences, dense attention's greedy tokens and last logits of
 * prompt a (ref), and room for another run's logits (got). */
typedef struct engine_fixture {
    lc_model         *m;
    lc_model_info     info;
    int32_t          *pa, *pb;
    size_t            n_a, n_b;
    lc_context_params dense;
    run_out           ref, got;
} engine_fixture;

/* false when the model did not load (the failed CHECK is counted) */
static bool engine_fixture_init(engine_fixture *f) {
    memset(f, 0, sizeof *f);
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    CHECK(lc_model_load(MODEL, &mp, &f->m) == LC_OK);
    if (!f->m) return false;
    lc_model_get_info(f->m, &f->info);
    f->pa = make_prompt(f->m, 48, "52817", &f->n_a); /* ~1K tokens */
    f->pb = make_prompt(f->m, 40, "40963", &f->n_b);
    CHECKF(f->n_a > 900 && f->n_b > 700, "prompts of %zu and %zu tokens", f->n_a, f->n_b);
    f->dense           = lc_context_default_params();
    f->dense.n_ctx     = 2048;
    f->dense.n_seq_max = 2;
    f->dense.n_batch   = 512;
    f->ref.logits      = malloc(sizeof(float) * (size_t)f->info.n_vocab);
    f->got.logits      = malloc(sizeof(float) * (size_t)f->info.n_vocab);
    CHECK(run(f->m, &f->dense, &f->pa, &f->n_a, 1, &f->ref, NULL) == LC_OK);
    CHECK(f->ref.n == N_GEN);
    return true;
}

static void engine_fixture_free(engine_fixture *f) {
    free(f->ref.logits), free(f->got.logits), free(f->pa), free(f->pb);
    lc_model_free(f->m);
}

#endif
