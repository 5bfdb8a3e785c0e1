/*
 * test_archs.c — end-to-end logits of tiny random-weight models of each supported
 * architecture on the CPU against Hugging Face transformers (fixtures in tests/fixtures/tiny/,
 * written by scripts/gen_tiny_models.py; llama.cpp agrees with them to ~4e-6, see the
 * fixture headers). DESIGN.md "Models": any llama/mistral/qwen2 GGUF must load and run.
 *
 *   qwen2.gguf         q/k/v biases, NEOX RoPE pairing, rope.freq_base 1e6, GQA 2, tied output
 *   mistral.gguf       GQA 4, head_dim 128 with hidden 64 (attention.key_length), base 1e6
 *   llama-untied.gguf  separate output.weight, no GQA, head_dim 32 with hidden 64,
 *                      llama.rope.scaling.type "linear", factor 2
 *
 * Public API only (include/longctx.h). For every model: the hyper-parameters reported by
 * lc_model_get_info match the file; for every fixture prompt (random ids, 20 and 70 long):
 *   1. prompt-only evaluation (max_tokens 0), in one chunk and with n_batch 16 (chunked
 *      prefill): same top-1 and max |d log-prob| over the reference's top 20 <= 1e-3 (the
 *      models are fp16-valued weights computed in fp32 on both sides: ~1e-5 is expected;
 *      the value reached is printed);
 *   2. a greedy run (max_tokens 8, temperature 0, ignore_eos): all 8 ids equal the reference
 *      (the reference's best-second gaps are all >= 2e-3, so there are no ties);
 *   3. both prompts' greedy runs with the two sequences live in one context at once: the same
 *      ids.
 */
#define FIXTURE_DIR LC_SOURCE_DIR "/tests/fixtures/tiny/"

#define MAX_TOP     32
#define MAX_GREEDY  16
#define MAX_PREFIX  0 /* the tiny fixtures have no prefix records */
#define MAX_PROMPTS 4
#define TOL_LOGPROB 1e-3
#define SMALL_BATCH 16
#define N_CTX       256

#include "logits_fixture.h"

/* What the model file states (checked through lc_model_get_info). */
typedef struct {
    const char *file; /* base name without extension: <file>.gguf, <file>.txt */
    const char *arch;
    int32_t     n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    float       rope_base;
} model_case;

static const model_case k_cases[] = {
    {"qwen2", "qwen2", 128, 4, 2, 32, 64, 272, 1e6f},
    {"mistral", "llama", 64, 4, 1, 128, 48, 272, 1e6f},
    {"llama-untied", "llama", 64, 4, 4, 32, 128, 272, 1e4f},
};

/* Returns the largest |d log-prob| seen for this model. */
static double run_case(const model_case *mc) {
    char path[512], fpath[512];
    snprintf(path, sizeof path, FIXTURE_DIR "%s.gguf", mc->file);
    snprintf(fpath, sizeof fpath, FIXTURE_DIR "%s.txt", mc->file);
    double worst = 0.0;

    fixture_t fx[MAX_PROMPTS];
    int       n_fx = read_fixtures(fpath, fx, MAX_PROMPTS);
    CHECKF(n_fx >= 2, "%s: %d fixture prompts", fpath, n_fx);
    if (n_fx < 1) return INFINITY;

    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1; /* tiny models: threads would only add noise */
    lc_model *m        = NULL;
    int       rc       = lc_model_load(path, &mp, &m);
    CHECKF(rc == LC_OK && m, "lc_model_load(%s): %s (%s)", path, lc_status_str(rc),
           lc_last_error());
    if (rc != LC_OK) {
        free_fixtures(fx, n_fx);
        return INFINITY;
    }
    lc_model_info info;
    CHECK(lc_model_get_info(m, &info) == LC_OK);
    CHECKF(!strcmp(info.arch, mc->arch), "%s: arch %s", mc->file, info.arch);
    CHECKF(info.n_layer == 2 && info.n_embd == mc->n_embd && info.n_head == mc->n_head &&
               info.n_head_kv == mc->n_head_kv && info.head_dim == mc->head_dim &&
               info.n_ff == mc->n_ff && info.n_vocab == mc->n_vocab,
           "%s: info layers %d embd %d heads %d/%d head_dim %d ff %d vocab %d", mc->file,
           info.n_layer, info.n_embd, info.n_head, info.n_head_kv, info.head_dim, info.n_ff,
           info.n_vocab);
    CHECKF(fabsf(info.rope_freq_base - mc->rope_base) <= 1e-6f * mc->rope_base,
           "%s: rope_freq_base %g", mc->file, (double)info.rope_freq_base);

    lc_context *c_one   = make_context(m, N_CTX, 0, MAX_PROMPTS);
    lc_context *c_small = make_context(m, N_CTX, SMALL_BATCH, MAX_PROMPTS);
    int32_t     n_vocab = c_one ? lc_context_n_vocab(c_one) : 0;
    double     *lp      = n_vocab > 0 ? malloc((size_t)n_vocab * sizeof *lp) : NULL;
    CHECK(n_vocab == mc->n_vocab);
    CHECK(lp != NULL);

    if (c_one && c_small && lp) {
        fixture_t *all[MAX_PROMPTS];
        for (int i = 0; i < n_fx; i++) {
            fixture_t *f = &fx[i];
            all[i]       = f;
            char what[160];
            for (int pass = 0; pass < 2; pass++) {
                lc_context *c = pass == 0 ? c_one : c_small;
                snprintf(what, sizeof what, "%.31s %.63s %s", mc->file, f->name,
                         pass == 0 ? "one chunk" : "n_batch 16");
                if (!eval_prompt(c, f->ids, f->n_ids, false, 0, lp, NULL)) continue;
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top, 0.0);
                if (d > worst) worst = d;
                fprintf(stderr, "%-13s %-18s %2d ids  %-10s  top-1 %3d  max|dlogprob| %.2e\n",
                        mc->file, f->name, f->n_ids, pass == 0 ? "one chunk" : "n_batch 16",
                        argmax(lp, n_vocab), d);
            }
            int32_t gen[1][MAX_GREEDY];
            int     n_gen[1] = {0};
            const bool ran = run_greedy(c_one, &all[i], 1, 0, false, gen, n_gen);
            CHECKF(ran, "%s %s: greedy run did not finish", mc->file, f->name);
            if (ran) {
                int k = greedy_match(f, gen[0], n_gen[0]);
                CHECKF(n_gen[0] == f->n_greedy && k == f->n_greedy,
                       "%s %s: greedy matches the reference for %d of %d ids (got %d)",
                       mc->file, f->name, k, f->n_greedy, n_gen[0]);
                fprintf(stderr, "%-13s %-18s greedy %d/%d equal\n", mc->file, f->name, k,
                        f->n_greedy);
            }
        }
        /* all prompts at once, with chunked prefill */
        int32_t gen[MAX_PROMPTS][MAX_GREEDY];
        int     n_gen[MAX_PROMPTS] = {0};
        const bool ran = run_greedy(c_small, all, n_fx, 0, false, gen, n_gen);
        CHECKF(ran, "%s: batched greedy runs did not finish", mc->file);
        if (ran) {
            int ok = 0;
            for (int i = 0; i < n_fx; i++) {
                int k = greedy_match(&fx[i], gen[i], n_gen[i]);
                CHECKF(n_gen[i] == fx[i].n_greedy && k == fx[i].n_greedy,
                       "%s %s (batched): greedy matches for %d of %d ids", mc->file,
                       fx[i].name, k, fx[i].n_greedy);
                ok += k == fx[i].n_greedy;
            }
            fprintf(stderr, "%-13s %d prompts batched, n_batch 16: %d/%d greedy runs equal\n",
                    mc->file, n_fx, ok, n_fx);
        }
    }
    free(lp);
    if (c_small) lc_context_free(c_small);
    if (c_one) lc_context_free(c_one);
    lc_model_free(m);
    free_fixtures(fx, n_fx);
    return worst;
}

int main(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        double d = run_case(&k_cases[i]);
        fprintf(stderr, "%-13s worst max|dlogprob| %.2e (tolerance %.0e)\n", k_cases[i].file, d,
                TOL_LOGPROB);
    }
    TEST_END();
}
