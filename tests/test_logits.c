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
#define FIXTURE_PATH LC_SOURCE_DIR "/tests/fixtures/logits/transformers.txt"

#define MAX_TOP      64
#define MAX_GREEDY   64
#define MAX_PREFIX   32
#define MAX_PROMPTS  16
#define N_CTX        1024 /* the longest fixture prompt + 32 fits; keeps the KV small */
#define TOL_LOGPROB  1e-2
#define GREEDY_N     32
#define GREEDY_MUST  16
#define TIE_MARGIN   (2 * TOL_LOGPROB)

#include "logits_fixture.h"

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
    lc_context    *c_def        = make_context(m, N_CTX, 0, 0);
    lc_context    *c_small      = make_context(m, N_CTX, small_batch, 0);
    lc_context    *c_prefix     = make_context(m, N_CTX, prefix_batch, 0);
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
            if (eval_prompt(c_def, f->ids, f->n_ids, true, def_batch, lp, &steps)) {
                snprintf(what, sizeof what, "%.63s n_batch=%d", f->name, def_batch);
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top, TIE_MARGIN);
                fprintf(stderr, "%-14s %4d ids  n_batch %4d (%3d steps)  max|dlogprob| %.2e\n",
                        f->name, f->n_ids, def_batch, steps, d);
            }
            /* 1b. several chunks */
            if (eval_prompt(c_small, f->ids, f->n_ids, true, small_batch, lp, &steps)) {
                snprintf(what, sizeof what, "%.63s n_batch=%d", f->name, small_batch);
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top, TIE_MARGIN);
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
                if (!eval_prompt(c_prefix, f->ids, p->len, true, prefix_batch, lp, &steps))
                    continue;
                snprintf(what, sizeof what, "%.63s prefix %d n_batch=%d", f->name, p->len,
                         prefix_batch);
                double d = compare_top(what, lp, n_vocab, p->top, p->k, TIE_MARGIN);
                if (d > pmax) pmax = d;
            }
            if (f->n_prefix > 0)
                fprintf(stderr, "%-14s %d prefixes (n_batch %d)        max|dlogprob| %.2e\n",
                        f->name, f->n_prefix, prefix_batch, pmax);

            /* 3. greedy continuation */
            int32_t gen_buf[1][MAX_GREEDY];
            int     n_gen_buf[1];
            run_greedy(c_def, &f, 1, GREEDY_N, true, gen_buf, n_gen_buf);
            const int32_t *gen   = gen_buf[0];
            int            n_gen = n_gen_buf[0];
            CHECKF(n_gen == GREEDY_N, "%s: %d tokens generated, want %d", f->name, n_gen,
                   GREEDY_N);
            int n_cmp    = n_gen < f->n_greedy ? n_gen : f->n_greedy;
            int n_prefix = greedy_match(f, gen, n_gen); /* leading ids equal to the reference */
            int n_same   = 0;                           /* positions equal, anywhere */
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
