/*
 * test_select_engine.c — the HiP and TokenSelect methods inside the engine on the real model
 * (CPU):
 *   1. with budgets that keep every candidate, the sparse path (forced with the context's
 *      sparse_always, so the selection ops and the sparse attention really run) gives dense
 *      attention's logits and greedy tokens, with plain and re-indexed RoPE;
 *   2. with real pruning two sequences batched in one context produce exactly the tokens each
 *      produces alone (HiP; per-sequence masks, prefill blocks of two sequences in one call), or
 *      (TokenSelect, whose token-level top-k amplifies the last-bit differences of batched
 *      GEMMs) a batched run repeats exactly;
 *   3. the decode counters: HiP estimates its mask every `refresh` steps; TokenSelect's cache
 *      never hits with theta above 1, always hits after the first step with theta -1, and every
 *      decode step of every sparse layer is counted once.
 * How well the selections keep the model's answers is measured by `longctx eval`, not here.
 */
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_run.h"

/* cp names the method with its settings string in buf[256] */
static void set_method(lc_context_params *cp, const char *kind, bool full, const char *rope,
                       char *buf) {
    cp->attn = kind;
    if (!strcmp(kind, "hip"))
        snprintf(buf, 256, "preset=512 k=%s block-q=32 sink=32 stream=128 refresh=3 "
                 "dense-layers=%s rope=%s", full ? "2048" : "256", full ? "0" : "2", rope);
    else
        snprintf(buf, 256, "k=%s init=32 chunk=128 local=128 dense-layers=%s rope=%s",
                 full ? "2048" : "256", full ? "0" : "2", rope);
    cp->attn_settings = buf;
    CHECK(lc_attn_check(cp->attn, cp->attn_settings, NULL, 0) == LC_OK);
}

/* sp's settings string with one more key=value, in buf[300] */
static void add_setting(lc_context_params *cp, const lc_context_params *sp, const char *kv,
                        char *buf) {
    *cp = *sp;
    snprintf(buf, 300, "%s %s", sp->attn_settings, kv);
    cp->attn_settings = buf;
}

int main(void) {
    REQUIRE_MODEL(MODEL);
    engine_fixture f;
    if (!engine_fixture_init(&f)) TEST_END();
    lc_model *const         m     = f.m;
    const int32_t           V = f.info.n_vocab, L = f.info.n_layer;
    int32_t                *pa = f.pa, *pb = f.pb;
    size_t                  n_a = f.n_a, n_b = f.n_b;
    const lc_context_params dense = f.dense;
    const run_out           ref   = f.ref;
    run_out                 got   = f.got;

    const char *kinds[2] = {"hip", "tokenselect"};
    for (int ki = 0; ki < 2; ki++) {
        const char *kind = kinds[ki], *name = kind;
        const bool  is_hip = !strcmp(kind, "hip");
        char        buf[256], sbuf[256], tbuf[300];
        /* 1. full budgets through the sparse path == dense */
        for (int mode = 0; mode < 2; mode++) {
            lc_context_params cp = dense;
            cp.sparse_always     = true;
            set_method(&cp, kind, true, mode ? "extend" : "plain", buf);
            memset(got.tokens, 0, sizeof got.tokens);
            CHECK(run(m, &cp, &pa, &n_a, 1, &got, NULL) == LC_OK);
            const double d = max_logprob_diff(ref.logits, got.logits, V);
            CHECKF(d < 1e-3, "%s rope %s: max |d log-prob| %.3g vs dense", name,
                   mode ? "extend" : "plain", d);
            CHECKF(memcmp(ref.tokens, got.tokens, sizeof ref.tokens) == 0,
                   "%s rope %s: greedy tokens differ from dense", name, mode ? "extend" : "plain");
        }

        /* 2. real pruning: batched == alone. A block's selection depends on its rows (a
         * prefill block's fingerprint is the mean of the rows it has), so the batch holds both
         * prompts whole: the blocks are then the same alone and batched */
        lc_context_params sp = dense;
        sp.n_batch           = 2048;
        set_method(&sp, kind, false, "auto", sbuf);
        run_out alone[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}}, both[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
        int32_t      *ps[2] = {pa, pb};
        size_t        ns[2] = {n_a, n_b};
        lc_attn_stats st_a = {0}, st_both = {0};
        CHECK(run(m, &sp, &ps[0], &ns[0], 1, &alone[0], &st_a) == LC_OK);
        CHECK(run(m, &sp, &ps[1], &ns[1], 1, &alone[1], NULL) == LC_OK);
        CHECK(run(m, &sp, ps, ns, 2, both, &st_both) == LC_OK);
        /* HiP: exactly. TokenSelect's token-level top-k turns the last-bit differences of a
         * batched GEMM (other row counts) into other selections, so there: the batched run
         * repeats exactly, and every sequence gets its tokens */
        run_out again[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}};
        if (!is_hip) CHECK(run(m, &sp, ps, ns, 2, again, NULL) == LC_OK);
        for (int i = 0; i < 2; i++) {
            if (is_hip)
                CHECKF(alone[i].n == N_GEN &&
                           memcmp(alone[i].tokens, both[i].tokens, sizeof both[i].tokens) == 0,
                       "%s sequence %d: batched tokens differ from alone", name, i);
            else
                CHECKF(alone[i].n == N_GEN && both[i].n == N_GEN &&
                           memcmp(again[i].tokens, both[i].tokens, sizeof both[i].tokens) == 0,
                       "%s sequence %d: a batched run does not repeat", name, i);
        }

        /* 2b. tail blocks (--hip-tail-block / --ts-tail-block): the engine tells the method
         * where each prompt ends, so the last block's rows select in blocks of their own: the
         * last prompt row's logits change, and (HiP) batched still equals alone */
        {
            lc_context_params tp;
            add_setting(&tp, &sp, "tail-block=1", tbuf);
            float  *lg_off = malloc(sizeof(float) * (size_t)V), *lg_on = malloc(sizeof(float) * (size_t)V);
            run_out off = {{0}, 0, lg_off}, on = {{0}, 0, lg_on};
            CHECK(run(m, &sp, &ps[0], &ns[0], 1, &off, NULL) == LC_OK);
            CHECK(run(m, &tp, &ps[0], &ns[0], 1, &on, NULL) == LC_OK);
            CHECKF(on.n == N_GEN && max_logprob_diff(lg_off, lg_on, V) > 0,
                   "%s tail-block=1: the last prompt row's logits did not change", name);
            if (is_hip) {
                run_out tb[2] = {{{0}, 0, NULL}, {{0}, 0, NULL}}, ta = {{0}, 0, NULL};
                CHECK(run(m, &tp, ps, ns, 2, tb, NULL) == LC_OK);
                CHECK(run(m, &tp, &ps[1], &ns[1], 1, &ta, NULL) == LC_OK);
                CHECKF(memcmp(on.tokens, tb[0].tokens, sizeof on.tokens) == 0 &&
                           memcmp(ta.tokens, tb[1].tokens, sizeof ta.tokens) == 0,
                       "hip tail-block=1: batched tokens differ from alone");
            }
            free(lg_off), free(lg_on);
        }

        /* 3. counters: N_GEN - 1 decode forwards per sequence, each layer past the dense ones */
        const int64_t steps = (int64_t)(N_GEN - 1) * (L - 2);
        CHECKF(st_a.selected + st_a.reused == steps, "%s: %lld + %lld decode selections, want %lld",
               name, (long long)st_a.selected, (long long)st_a.reused, (long long)steps);
        CHECKF(st_both.selected + st_both.reused == 2 * steps, "%s batched: %lld + %lld, want %lld",
               name, (long long)st_both.selected, (long long)st_both.reused, (long long)(2 * steps));
        if (is_hip) {
            /* refresh 3: steps 0, 3, 6 of 7 estimate */
            CHECKF(st_a.selected == 3 * (L - 2), "hip: %lld estimations, want %d",
                   (long long)st_a.selected, 3 * (L - 2));
        } else {
            CHECKF(st_a.selected >= L - 2, "tokenselect: %lld misses, want >= %d (the first step)",
                   (long long)st_a.selected, L - 2);
            for (int t = 0; t < 2; t++) {
                lc_context_params cp;
                add_setting(&cp, &sp, t ? "theta=-1" : "theta=2", tbuf);
                lc_attn_stats s = {0};
                run_out       o = {{0}, 0, NULL};
                CHECK(run(m, &cp, &ps[0], &ns[0], 1, &o, &s) == LC_OK);
                const int64_t want_sel = t ? L - 2 : steps;
                CHECKF(s.selected == want_sel && s.reused == steps - want_sel,
                       "tokenselect theta %s: %lld misses %lld hits, want %lld / %lld",
                       t ? "-1" : "2", (long long)s.selected, (long long)s.reused,
                       (long long)want_sel, (long long)(steps - want_sel));
            }
        }
    }
    /* dense keeps no counters */
    lc_attn_stats s = {1, 1};
    CHECK(run(m, &dense, &pa, &n_a, 1, &got, &s) == LC_OK);
    CHECK(s.selected == 0 && s.reused == 0);

    engine_fixture_free(&f);
    TEST_END();
}
