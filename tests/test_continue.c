/*
 * test_continue.c — lc_context_continue (multi-turn chat, a document read once): a sequence
 * evaluated as P1 and continued with P2 generates exactly the greedy tokens of one prompt
 * P1 P2; continuing with n_keep = |P1| after a generation drops what followed (the same tokens
 * again); the last sampled token is not in the KV cache (lc_context_seq_length); refusals
 * (unknown id, n_keep past what is held, a context too small) leave the sequence unchanged.
 * And lc_sampling.repeat_generated_only: a penalty over generated tokens only leaves the first
 * draw as it is without one, a penalty over the prompt too does not. And a sequence cut back
 * (n_keep below what it holds) with a sparse method starts its decode caches afresh. CPU, SmolLM2.
 */
#include "longctx.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define N_GEN 8

static int32_t *encode(const lc_model *m, const char *text, bool bos, size_t *n) {
    int32_t *ids = NULL;
    CHECK(lc_tokenizer_encode(lc_model_tokenizer(m), text, strlen(text), bos, false, &ids, n) ==
          LC_OK);
    return ids;
}

/* Step until the sequence reports its finish; the sampled tokens into out. */
static int drain(lc_context *c, int32_t *out, int cap) {
    int n = 0;
    for (int guard = 0; guard < 10000; guard++) {
        lc_event ev[2];
        size_t   n_ev = 0;
        if (lc_context_step(c, ev, 2, &n_ev) != LC_OK || n_ev == 0) break;
        if (ev[0].token >= 0 && n < cap) out[n++] = ev[0].token;
        if (ev[0].finish != LC_FINISH_NONE) break;
    }
    return n;
}

static lc_request greedy(const int32_t *p, size_t n, int32_t max_tokens) {
    lc_request r = {.prompt = p, .n_prompt = n, .max_tokens = max_tokens,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    return r;
}

int main(void) {
    REQUIRE_MODEL(LC_MODEL_PATH);
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1;
    lc_model *m        = NULL;
    CHECK(lc_model_load(LC_MODEL_PATH, &mp, &m) == LC_OK);
    if (!m) TEST_END();
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 256;
    cp.n_batch           = 16; /* P1 and P2 span several chunks either way */
    lc_context *c        = NULL;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK);
    if (!c) {
        lc_model_free(m);
        TEST_END();
    }
    size_t   n1, n2;
    int32_t *p1 = encode(m, "The history of the river town begins with a mill and a bridge, "
                            "built by farmers who came from the hills in spring.", true, &n1);
    int32_t *p2 = encode(m, " Years later the town had a market, and", false, &n2);
    int32_t *p12 = malloc((n1 + n2) * sizeof *p12);
    memcpy(p12, p1, n1 * sizeof *p12);
    memcpy(p12 + n1, p2, n2 * sizeof *p12);

    /* the reference: one prompt P1 P2 */
    int32_t    want[N_GEN], got[N_GEN];
    int32_t    ref;
    lc_request r = greedy(p12, n1 + n2, N_GEN);
    CHECK(lc_context_add(c, &r, &ref) == LC_OK);
    CHECK(drain(c, want, N_GEN) == N_GEN);
    /* every generated token but the last is in the KV cache */
    CHECK(lc_context_seq_length(c, ref) == (int64_t)(n1 + n2 + N_GEN - 1));
    CHECK(lc_context_remove(c, ref) == LC_OK);

    /* P1 alone (max_tokens 0: evaluated, nothing drawn), then P2 */
    int32_t s;
    r = greedy(p1, n1, 0);
    CHECK(lc_context_add(c, &r, &s) == LC_OK);
    CHECK(drain(c, got, N_GEN) == 0);
    CHECK(lc_context_seq_length(c, s) == (int64_t)n1);
    r = greedy(p2, n2, N_GEN);
    CHECK(lc_context_continue(c, s, -1, &r) == LC_OK);
    CHECK(drain(c, got, N_GEN) == N_GEN);
    CHECK(memcmp(got, want, sizeof want) == 0);

    /* back to P1 (what followed dropped) and P2 again: the same tokens */
    r = greedy(p2, n2, N_GEN);
    CHECK(lc_context_continue(c, s, (int64_t)n1, &r) == LC_OK);
    memset(got, 0, sizeof got);
    CHECK(drain(c, got, N_GEN) == N_GEN);
    CHECK(memcmp(got, want, sizeof want) == 0);
    const int64_t held = lc_context_seq_length(c, s);
    CHECK(held == (int64_t)(n1 + n2 + N_GEN - 1));

    /* refusals leave the sequence as it was */
    CHECK(lc_context_continue(c, s + 100, -1, &r) == LC_ERR_NOT_FOUND);
    CHECK(lc_context_continue(c, s, held + 1, &r) == LC_ERR_INVALID_ARG);
    int32_t *big = calloc(256, sizeof *big);
    r            = greedy(big, 256 - (size_t)held + 1, 4);
    CHECK(lc_context_continue(c, s, -1, &r) == LC_ERR_CONTEXT);
    CHECKF(strstr(lc_last_error(), "do not fit") != NULL, "%s", lc_last_error());
    r = greedy(big, 0, 4);
    CHECK(lc_context_continue(c, s, -1, &r) == LC_ERR_INVALID_ARG);
    CHECK(lc_context_continue(NULL, s, -1, &r) == LC_ERR_INVALID_ARG);
    CHECK(lc_context_seq_length(c, s) == held);
    CHECK(lc_context_seq_length(c, s + 100) == -1);
    CHECK(lc_context_seq_length(NULL, s) == -1);
    /* and it goes on after them: the last sampled token first, then more */
    int32_t last = want[N_GEN - 1];
    r            = greedy(&last, 1, 2);
    CHECK(lc_context_continue(c, s, -1, &r) == LC_OK);
    CHECK(drain(c, got, N_GEN) == 2);
    CHECK(lc_context_seq_length(c, s) == held + 2);

    /* the penalty's scope: the first greedy token of P1 P2 (want[0]) under a strong penalty
     * (in the pages s held) */
    CHECK(lc_context_remove(c, s) == LC_OK);
    bool in_prompt = false;
    for (size_t i = n1 + n2 > 64 ? n1 + n2 - 64 : 0; i < n1 + n2; i++) in_prompt |= p12[i] == want[0];
    for (int scope = 0; scope < 2; scope++) {
        r                                = greedy(p12, n1 + n2, 1);
        r.sampling.repeat_penalty        = 10.0f;
        r.sampling.repeat_generated_only = scope == 1;
        int32_t q;
        CHECK(lc_context_add(c, &r, &q) == LC_OK);
        int32_t first = -1;
        CHECK(drain(c, &first, 1) == 1);
        if (scope == 1) CHECKF(first == want[0], "generated-only: %d, want %d", first, want[0]);
        else if (in_prompt) CHECKF(first != want[0], "prompt penalised: %d", first);
        lc_context_remove(c, q);
    }
    CHECKF(in_prompt, "the test wants the first answer token inside the prompt's window");

    /* a sparse method's decode caches do not outlive the tokens they were selected over: a
     * sequence cut back to P1 and continued with one token (a decode step, which would reuse a
     * cached selection: theta -1 always reuses a valid one) generates what P1 then that token
     * generates on a sequence that never went further */
    lc_context_params sp = cp;
    sp.attn              = "tokenselect";
    sp.attn_settings     = "k=16 init=4 local=16 chunk=16 theta=-1";
    sp.sparse_always     = true;
    lc_context *sc       = NULL;
    CHECK(lc_context_create(m, &sp, &sc) == LC_OK);
    if (sc) {
        const int32_t tok = p2[0];
        int32_t       x, y, want1[N_GEN], got1[N_GEN];
        r = greedy(p1, n1, 0);
        CHECK(lc_context_add(sc, &r, &y) == LC_OK);
        CHECK(drain(sc, want1, N_GEN) == 0);
        r = greedy(&tok, 1, N_GEN);
        CHECK(lc_context_continue(sc, y, -1, &r) == LC_OK);
        CHECK(drain(sc, want1, N_GEN) == N_GEN);
        CHECK(lc_context_remove(sc, y) == LC_OK);
        r = greedy(p1, n1, 0);
        CHECK(lc_context_add(sc, &r, &x) == LC_OK);
        CHECK(drain(sc, got1, N_GEN) == 0);
        r = greedy(p2, n2, 3 * N_GEN);
        CHECK(lc_context_continue(sc, x, -1, &r) == LC_OK);
        int32_t scratch[3 * N_GEN];
        CHECK(drain(sc, scratch, 3 * N_GEN) == 3 * N_GEN);
        r = greedy(&tok, 1, N_GEN);
        CHECK(lc_context_continue(sc, x, (int64_t)n1, &r) == LC_OK);
        CHECK(drain(sc, got1, N_GEN) == N_GEN);
        CHECK(memcmp(got1, want1, sizeof want1) == 0);
        lc_context_free(sc);
    }

    free(big);
    free(p1);
    free(p2);
    free(p12);
    lc_context_free(c);
    lc_model_free(m);
    TEST_END();
}
