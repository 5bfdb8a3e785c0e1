/*
 * test_batched_decode.c — batched decode with every sparse method (issue 22 item 6; backend.h
 * "Batched decode"): three sequences in one context, joining 3 steps apart so that their
 * selection caches refresh at different steps (mixed prefill/decode steps, then decode steps in
 * which each block names its own cache slot and first recomputed stage), each generate exactly
 * the greedy tokens they generate alone — for InfiniteHiP, HiP, TokenSelect and StreamingLLM
 * forced onto their sparse paths with budgets that prune (CPU backend, SmolLM2-135M).
 */
#include "longctx.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL   "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define N_SEQ   3
#define N_GEN   16
#define STAGGER 3

typedef struct gen_out {
    int32_t tokens[N_GEN];
    int32_t n;
} gen_out;

/* Greedy N_GEN tokens for n prompts in one context, prompt i added at step i * stagger. */
static int generate(lc_model *m, const lc_context_params *cp, int32_t *const *prompts,
                    const size_t *n_prompt, int n, int stagger, gen_out *out) {
    lc_context *c  = NULL;
    int         st = lc_context_create(m, cp, &c);
    if (st != LC_OK) return st;
    int32_t ids[N_SEQ];
    int     added = 0;
    for (int i = 0; i < n; i++) out[i].n = 0;
    for (int step = 0; step < 2000 && st == LC_OK; step++) {
        for (; added < n && added * stagger <= step; added++) {
            lc_request r = {.prompt = prompts[added], .n_prompt = n_prompt[added],
                            .max_tokens = N_GEN, .sampling = lc_sampling_default(),
                            .ignore_eos = true};
            r.sampling.temperature = 0;
            st = lc_context_add(c, &r, &ids[added]);
        }
        lc_event ev[N_SEQ];
        size_t   n_ev = 0;
        if (st != LC_OK || (st = lc_context_step(c, ev, N_SEQ, &n_ev)) != LC_OK) break;
        if (n_ev == 0 && added == n) break;
        for (size_t e = 0; e < n_ev; e++)
            for (int i = 0; i < added; i++)
                if (ev[e].seq_id == ids[i] && ev[e].token >= 0 && out[i].n < N_GEN)
                    out[i].tokens[out[i].n++] = ev[e].token;
    }
    if (st != LC_OK) fprintf(stderr, "generate: %s\n", lc_last_error());
    lc_context_free(c);
    return st;
}

/* A prompt of about n_fill sentences with a fact in it, then a question. */
static int32_t *prompt(const lc_model *m, int n_fill, int seed, size_t *n) {
    static const char *const lines[] = {
        " The river ran past the old mill and under the stone bridge.",
        " Every morning the baker opened the shop before sunrise.",
        " The library kept its rarest maps in a locked room upstairs.",
        " A cold wind came down from the hills in the evening.",
        " The market sold apples, cheese and bread on Saturdays.",
    };
    char *text = malloc((size_t)n_fill * 80 + 256);
    if (!text) return NULL;
    strcpy(text, "Read the notes and answer the question.\n");
    for (int i = 0; i < n_fill; i++) {
        if (i == n_fill / 3) {
            char fact[96];
            snprintf(fact, sizeof fact, " The code for the blue door is %d.", 1000 + 37 * seed);
            strcat(text, fact);
        }
        strcat(text, lines[(i * 3 + seed) % 5]);
    }
    strcat(text, "\nWhat is the code for the blue door? The code is");
    int32_t *ids = NULL;
    CHECK(lc_tokenizer_encode(lc_model_tokenizer(m), text, strlen(text), true, false, &ids, n) ==
          LC_OK);
    free(text);
    return ids;
}

int main(void) {
    REQUIRE_MODEL(MODEL);
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    lc_model *m        = NULL;
    int       rc       = lc_model_load(MODEL, &mp, &m);
    CHECKF(rc == LC_OK, "load: %s", lc_last_error());
    if (rc != LC_OK) TEST_END();

    int32_t *ps[N_SEQ];
    size_t   ns[N_SEQ];
    const int fill[N_SEQ] = {16, 12, 8}; /* about 200, 160 and 110 tokens */
    for (int i = 0; i < N_SEQ; i++) ps[i] = prompt(m, fill[i], i, &ns[i]);

    static const char *const methods[][2] = {
        {"infinitehip", "preset=3k chunks=16,4 k=64,32 refresh=3,2 q-stride=4,1 sink=8 stream=32 "
                        "first-k=32 dense-layers=1"},
        {"hip", "preset=512 k=64 block-k=8 block-q=32 sink=8 stream=32 refresh=3 dense-layers=1"},
        {"tokenselect", "k=32 init=8 chunk=32 local=32 dense-layers=1"},
        {"streaming", "sink=4 window=32 block=32"},
    };
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        lc_context_params cp = lc_context_default_params();
        cp.n_ctx             = 1024;
        cp.n_seq_max         = N_SEQ;
        cp.attn              = methods[k][0];
        cp.attn_settings     = methods[k][1];
        cp.sparse_always     = true;
        CHECKF(lc_attn_check(cp.attn, cp.attn_settings, NULL, 0) == LC_OK, "%s: %s", cp.attn,
               lc_last_error());
        gen_out alone[N_SEQ], both[N_SEQ];
        for (int i = 0; i < N_SEQ; i++)
            CHECK(generate(m, &cp, &ps[i], &ns[i], 1, 0, &alone[i]) == LC_OK);
        CHECK(generate(m, &cp, ps, ns, N_SEQ, STAGGER, both) == LC_OK);
        fprintf(stderr, "%s: alone and batched generated\n", cp.attn);
        for (int i = 0; i < N_SEQ; i++)
            CHECKF(alone[i].n == N_GEN && both[i].n == N_GEN &&
                       memcmp(alone[i].tokens, both[i].tokens, sizeof alone[i].tokens) == 0,
                   "%s: sequence %d (joined at step %d) generates other tokens batched than alone",
                   cp.attn, i, i * STAGGER);
    }
    for (int i = 0; i < N_SEQ; i++) free(ps[i]);
    lc_model_free(m);
    TEST_END();
}
