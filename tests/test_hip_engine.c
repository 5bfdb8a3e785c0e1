/*
 * test_hip_engine.c — the InfiniteHiP method inside the engine on the real model (CPU):
 *   1. with budgets that keep every candidate, the sparse path (forced with
 *      LONGCTX_HIP_SPARSE_ALWAYS=1, so the stages and the sparse attention really run) gives
 *      dense attention's logits and greedy tokens, with plain and with re-indexed RoPE;
 *   2. with real pruning (a quarter of the candidates kept) two sequences batched in one
 *      context produce exactly the tokens each produces alone (per-sequence mask caches,
 *      mixed prefill/decode blocks), and the stage caches refresh in decode.
 * How well pruning keeps the model's answers is measured by `longctx eval`, not here.
 */
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
               const size_t *n_prompt, int n_req, run_out *outs) {
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

int main(void) {
    REQUIRE_MODEL(MODEL);
    lc_model       *m  = NULL;
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    CHECK(lc_model_load(MODEL, &mp, &m) == LC_OK);
    if (!m) TEST_END();
    lc_model_info info;
    lc_model_get_info(m, &info);
    const int32_t V = info.n_vocab;

    size_t   n_a = 0, n_b = 0;
    int32_t *pa = make_prompt(m, 48, "52817", &n_a); /* ~1K tokens */
    int32_t *pb = make_prompt(m, 40, "40963", &n_b);
    CHECKF(n_a > 900 && n_b > 700, "prompts of %zu and %zu tokens", n_a, n_b);

    lc_context_params dense = lc_context_default_params();
    dense.n_ctx             = 2048;
    dense.n_seq_max         = 2;
    dense.n_batch           = 512;
    run_out ref = {0}, got = {0};
    ref.logits  = malloc(sizeof(float) * (size_t)V);
    got.logits  = malloc(sizeof(float) * (size_t)V);
    CHECK(run(m, &dense, &pa, &n_a, 1, &ref) == LC_OK);
    CHECK(ref.n == N_GEN);

    /* 1. full budgets through the sparse path == dense, plain and re-indexed RoPE */
    setenv("LONGCTX_HIP_SPARSE_ALWAYS", "1", 1);
    for (int mode = 0; mode < 2; mode++) {
        lc_context_params hp = dense;
        hp.attn              = LC_ATTN_INFINITEHIP;
        CHECK(lc_infinitehip_preset("3k", &hp.hip) == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "chunks", "64,16") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "k", "2048,2048") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "refresh", "4,2") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "q-stride", "4,1") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "sink", "32") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "stream", "128") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "first-k", "2048") == LC_OK);
        CHECK(lc_infinitehip_set(&hp.hip, "rope", mode ? "extend" : "plain") == LC_OK);
        memset(got.tokens, 0, sizeof got.tokens);
        CHECK(run(m, &hp, &pa, &n_a, 1, &got) == LC_OK);
        const double d = max_logprob_diff(ref.logits, got.logits, V);
        CHECKF(d < 1e-3, "rope %s: max |d log-prob| %.3g vs dense", mode ? "extend" : "plain", d);
        CHECKF(memcmp(ref.tokens, got.tokens, sizeof ref.tokens) == 0,
               "rope %s: greedy tokens differ from dense", mode ? "extend" : "plain");
    }

    /* 2. real pruning: batched == alone (decode refreshes every 2/1 steps) */
    lc_context_params sp = dense;
    sp.attn              = LC_ATTN_INFINITEHIP;
    CHECK(lc_infinitehip_preset("3k", &sp.hip) == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "chunks", "32,8") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "k", "512,256") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "refresh", "3,2") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "q-stride", "4,1") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "sink", "32") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "stream", "128") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "first-k", "256") == LC_OK);
    CHECK(lc_infinitehip_set(&sp.hip, "dense-layers", "2") == LC_OK);
    run_out alone[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}}, both[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
    int32_t *ps[2] = {pa, pb};
    size_t   ns[2] = {n_a, n_b};
    CHECK(run(m, &sp, &ps[0], &ns[0], 1, &alone[0]) == LC_OK);
    CHECK(run(m, &sp, &ps[1], &ns[1], 1, &alone[1]) == LC_OK);
    CHECK(run(m, &sp, ps, ns, 2, both) == LC_OK);
    for (int i = 0; i < 2; i++)
        CHECKF(alone[i].n == N_GEN && memcmp(alone[i].tokens, both[i].tokens, sizeof both[i].tokens) == 0,
               "sequence %d: batched tokens differ from alone", i);

    unsetenv("LONGCTX_HIP_SPARSE_ALWAYS");

    free(ref.logits), free(got.logits), free(pa), free(pb);
    lc_model_free(m);
    TEST_END();
}
