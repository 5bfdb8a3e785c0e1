/*
 * test_hip_engine.c — the InfiniteHiP method inside the engine on the real model (CPU):
 *   1. with budgets that keep every candidate, the sparse path (forced with the context's
 *      sparse_always, so the stages and the sparse attention really run) gives dense
 *      attention's logits and greedy tokens, with plain and with re-indexed RoPE;
 *   2. with real pruning (a quarter of the candidates kept) two sequences batched in one
 *      context produce exactly the tokens each produces alone (per-sequence mask caches,
 *      mixed prefill/decode blocks), and the stage caches refresh in decode;
 *   3. tail blocks change the last prompt row's logits, batched still equal to alone
 * (2 and 3 with sparse_always too).
 * How well pruning keeps the model's answers is measured by `longctx eval`, not here.
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
    lc_model *const         m     = f.m;
    const int32_t           V     = f.info.n_vocab;
    int32_t                *pa = f.pa, *pb = f.pb;
    size_t                  n_a = f.n_a, n_b = f.n_b;
    const lc_context_params dense = f.dense;
    const run_out           ref   = f.ref;
    run_out                 got   = f.got;

    /* 1. full budgets through the sparse path == dense, plain and re-indexed RoPE */
    for (int mode = 0; mode < 2; mode++) {
        lc_context_params hp = dense;
        hp.attn              = "infinitehip";
        hp.sparse_always     = true;
        hp.attn_settings     = mode ? "preset=3k chunks=64,16 k=2048,2048 refresh=4,2 q-stride=4,1 "
                                      "sink=32 stream=128 first-k=2048 rope=extend"
                                    : "preset=3k chunks=64,16 k=2048,2048 refresh=4,2 q-stride=4,1 "
                                      "sink=32 stream=128 first-k=2048 rope=plain";
        CHECK(lc_attn_check(hp.attn, hp.attn_settings, NULL, 0) == LC_OK);
        memset(got.tokens, 0, sizeof got.tokens);
        CHECK(run(m, &hp, &pa, &n_a, 1, &got, NULL) == LC_OK);
        const double d = max_logprob_diff(ref.logits, got.logits, V);
        CHECKF(d < 1e-3, "rope %s: max |d log-prob| %.3g vs dense", mode ? "extend" : "plain", d);
        CHECKF(memcmp(ref.tokens, got.tokens, sizeof ref.tokens) == 0,
               "rope %s: greedy tokens differ from dense", mode ? "extend" : "plain");
    }

    /* 2. real pruning: batched == alone (decode refreshes every 2/1 steps) */
    lc_context_params sp = dense;
    sp.attn              = "infinitehip";
    sp.sparse_always     = true;
#define SP_SETTINGS                                                                           \
    "preset=3k chunks=32,8 k=512,256 refresh=3,2 q-stride=4,1 sink=32 stream=128 first-k=256 " \
    "dense-layers=2"
    sp.attn_settings = SP_SETTINGS;
    CHECK(lc_attn_check(sp.attn, sp.attn_settings, NULL, 0) == LC_OK);
    run_out alone[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}}, both[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
    int32_t *ps[2] = {pa, pb};
    size_t   ns[2] = {n_a, n_b};
    CHECK(run(m, &sp, &ps[0], &ns[0], 1, &alone[0], NULL) == LC_OK);
    CHECK(run(m, &sp, &ps[1], &ns[1], 1, &alone[1], NULL) == LC_OK);
    CHECK(run(m, &sp, ps, ns, 2, both, NULL) == LC_OK);
    for (int i = 0; i < 2; i++)
        CHECKF(alone[i].n == N_GEN && memcmp(alone[i].tokens, both[i].tokens, sizeof both[i].tokens) == 0,
               "sequence %d: batched tokens differ from alone", i);

    /* 3. tail blocks (--hip-tail-block): the engine tells the method where each prompt ends, so
     * the prompt's last block_q rows select one row at a time: the last prompt row's logits
     * change, and batched still equals alone */
    {
        lc_context_params tp = sp;
        tp.attn_settings     = SP_SETTINGS " tail-block=1";
        float  *lg_off = malloc(sizeof(float) * (size_t)f.info.n_vocab);
        float  *lg_on  = malloc(sizeof(float) * (size_t)f.info.n_vocab);
        run_out off = {{0}, 0, lg_off}, on = {{0}, 0, lg_on}, tb[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
        run_out ta = {{0}, 0, NULL};
        CHECK(run(m, &sp, &ps[0], &ns[0], 1, &off, NULL) == LC_OK);
        CHECK(run(m, &tp, &ps[0], &ns[0], 1, &on, NULL) == LC_OK);
        CHECKF(on.n == N_GEN && max_logprob_diff(lg_off, lg_on, f.info.n_vocab) > 0,
               "tail-block=1: the last prompt row's logits did not change");
        CHECK(run(m, &tp, ps, ns, 2, tb, NULL) == LC_OK);
        CHECK(run(m, &tp, &ps[1], &ns[1], 1, &ta, NULL) == LC_OK);
        CHECKF(memcmp(on.tokens, tb[0].tokens, sizeof on.tokens) == 0 &&
                   memcmp(ta.tokens, tb[1].tokens, sizeof ta.tokens) == 0,
               "tail-block=1: batched tokens differ from alone");
        free(lg_off), free(lg_on);
    }

    engine_fixture_free(&f);
    TEST_END();
}
