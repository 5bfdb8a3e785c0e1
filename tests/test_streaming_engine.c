/*
 * test_streaming_engine.c — the StreamingLLM method (attn/streaming/, the papers' baseline)
 * inside the engine on the real model (CPU):
 *   1. with a window that holds every key, the sparse path (forced with sparse_always, so the
 *      block-sparse attention op really runs with empty selections) gives dense attention's
 *      logits and greedy tokens, with plain and re-indexed RoPE;
 *   2. with a real window (sink 4, window 128) the last prompt row's logits differ from dense,
 *      and two sequences batched in one context produce exactly the tokens each produces alone;
 *   3. a window smaller than a block is refused with a message naming the key and the method.
 */
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_run.h"

int main(void) {
    REQUIRE_MODEL(MODEL);
    engine_fixture f;
    if (!engine_fixture_init(&f)) TEST_END();
    lc_model *const         m = f.m;
    const int32_t           V = f.info.n_vocab;
    const lc_context_params dense = f.dense;
    const run_out           ref   = f.ref;
    run_out                 got   = f.got;

    /* 1. every key in the window, through the sparse path == dense */
    const char *full[2] = {"window=2048 block=64 rope=plain", "window=2048 block=64 rope=extend"};
    for (int mode = 0; mode < 2; mode++) {
        lc_context_params cp = dense;
        cp.sparse_always     = true;
        cp.attn              = "streaming";
        cp.attn_settings     = full[mode];
        CHECK(lc_attn_check(cp.attn, cp.attn_settings, NULL, 0) == LC_OK);
        memset(got.tokens, 0, sizeof got.tokens);
        CHECK(run(m, &cp, &f.pa, &f.n_a, 1, &got, NULL) == LC_OK);
        const double d = max_logprob_diff(ref.logits, got.logits, V);
        CHECKF(d < 1e-3, "streaming %s: max |d log-prob| %.3g vs dense", full[mode], d);
        CHECKF(memcmp(ref.tokens, got.tokens, sizeof ref.tokens) == 0,
               "streaming %s: greedy tokens differ from dense", full[mode]);
    }

    /* 2. a real window: not dense, and batched == alone */
    lc_context_params sp = dense;
    sp.n_batch           = 2048;
    sp.attn              = "streaming";
    sp.attn_settings     = "sink=4 window=128 block=32";
    float  *lg = malloc(sizeof(float) * (size_t)V);
    run_out w  = {{0}, 0, lg};
    CHECK(run(m, &sp, &f.pa, &f.n_a, 1, &w, NULL) == LC_OK);
    CHECKF(w.n == N_GEN && max_logprob_diff(ref.logits, lg, V) > 1e-3,
           "streaming window=128: the last prompt row's logits equal dense's");
    free(lg);
    int32_t *ps[2] = {f.pa, f.pb};
    size_t   ns[2] = {f.n_a, f.n_b};
    run_out  alone[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}}, both[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
    CHECK(run(m, &sp, &ps[0], &ns[0], 1, &alone[0], NULL) == LC_OK);
    CHECK(run(m, &sp, &ps[1], &ns[1], 1, &alone[1], NULL) == LC_OK);
    CHECK(run(m, &sp, ps, ns, 2, both, NULL) == LC_OK);
    for (int i = 0; i < 2; i++)
        CHECKF(alone[i].n == N_GEN && memcmp(alone[i].tokens, both[i].tokens, sizeof both[i].tokens) == 0,
               "streaming sequence %d: batched tokens differ from alone", i);

    /* 3. bad settings: one line naming the method and the key */
    CHECK(lc_attn_check("streaming", "window=16 block=32", NULL, 0) == LC_ERR_INVALID_ARG);
    CHECKF(strstr(lc_last_error(), "streaming") && strstr(lc_last_error(), "window=16"),
           "message: %s", lc_last_error());
    CHECK(lc_attn_check("streaming", "k=2048", NULL, 0) == LC_ERR_INVALID_ARG);
    char d[256];
    CHECK(lc_attn_check("streaming", NULL, d, sizeof d) == LC_OK && strstr(d, "window=4096") &&
          strstr(d, "sink=4"));

    engine_fixture_free(&f);
    TEST_END();
}
