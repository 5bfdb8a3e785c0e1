/*
 * qwen_model.h — shared by the tests of the second reference model, Qwen2.5-Coder-1.5B-Instruct
 * Q4_K_M (test_qwen_logits_slow.c on the CPU, test_qwen_logits_cuda.c on the GPU): where the
 * model file and its transformers fixture are, the skip-or-fail on a missing model file, the
 * hyper-parameters the model must report, and the greedy comparison with the reference.
 *
 * The including test defines logits_fixture.h's macros (MAX_TOP ... TOL_LOGPROB) first.
 */
#ifndef LC_QWEN_MODEL_H
#define LC_QWEN_MODEL_H

#include "logits_fixture.h"

/* models/ is filled by `make model-qwen` (scripts/get-model-qwen.sh, 1.1 GB), which `make test`
 * runs; the fixture is from scripts/gen_logits_fixtures.py --preset qwen. */
#define QWEN_MODEL_PATH   LC_SOURCE_DIR "/models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf"
#define QWEN_FIXTURE_PATH LC_SOURCE_DIR "/tests/fixtures/logits/qwen/transformers.txt"

/* Exit 77 (ctest: skipped) without the model file, 1 (a failure) with LC_REQUIRE_MODEL=1 (as
 * make test-release sets, make test having installed the model first). */
#define REQUIRE_QWEN_MODEL() REQUIRE_MODEL_FILE(QWEN_MODEL_PATH, "make model-qwen")

/* The hyper-parameters lc_model_get_info must report for this model; *info gets them. */
static void check_qwen_info(const lc_model *m, lc_model_info *info) {
    CHECK(lc_model_get_info(m, info) == LC_OK);
    CHECKF(!strcmp(info->arch, "qwen2") && info->n_layer == 28 && info->n_embd == 1536 &&
               info->n_head == 12 && info->n_head_kv == 2 && info->head_dim == 128 &&
               info->n_vocab == 151936 && info->n_ctx_train == 32768,
           "info: %s layers %d embd %d heads %d/%d head_dim %d vocab %d ctx %d", info->arch,
           info->n_layer, info->n_embd, info->n_head, info->n_head_kv, info->head_dim,
           info->n_vocab, info->n_ctx_train);
    CHECKF(fabsf(info->rope_freq_base - 1e6f) <= 1.0f, "rope_freq_base %g",
           (double)info->rope_freq_base);
}

/* A greedy continuation gen[0..n_gen) (n_want tokens asked for) against the reference's:
 * equal, or equal up to a step where the reference's best two log-probs are less than
 * tie_margin apart (a near tie, after which the runs may part). Prints the agreement under
 * label; returns the number of leading ids equal to the reference. */
static int check_greedy_ref(const char *label, const fixture_t *f, const int32_t *gen, int n_gen,
                            int n_want, double tie_margin) {
    CHECKF(n_gen == n_want, "%s %s: %d tokens generated, want %d", label, f->name, n_gen,
           n_want);
    const int n_cmp = n_gen < f->n_greedy ? n_gen : f->n_greedy;
    const int k     = greedy_match(f, gen, n_gen);
    bool      tie   = false;
    if (k < n_cmp) {
        const double mg = k < f->n_gmargin ? f->gmargin[k] : 1e9;
        tie             = mg < tie_margin;
        fprintf(stderr,
                "%-13s %s greedy diverges at step %d: %d vs reference %d (reference "
                "best-second gap %.4f%s)\n",
                f->name, label, k, gen[k], f->greedy[k], mg, tie ? ", a near tie" : "");
    }
    CHECKF(k == n_cmp || tie, "%s %s: greedy ids equal the reference for %d of %d steps", label,
           f->name, k, n_cmp);
    fprintf(stderr, "%-13s %s greedy: %d of %d ids equal the reference\n", f->name, label, k,
            n_want);
    return k;
}

#endif
