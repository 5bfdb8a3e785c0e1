/*
 * generated_model.h — what the engine tests over a generated model share (test_kv_tiers.c,
 * test_kv_tiers_cuda.c, test_slab_bank.c): a model of a gen-model config with random bf16
 * weights (lc_model_generate), written to a temporary file, loaded on a device and the file
 * removed at once; small-context settings for them; greedy generation of one prompt in a new
 * context.
 */
#ifndef LC_TEST_GENERATED_MODEL_H
#define LC_TEST_GENERATED_MODEL_H

#include "longctx.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The loaded model, or NULL after a failed CHECK. n_threads 0: the default. */
static inline lc_model *load_generated(const char *config, uint64_t seed, lc_device device,
                                int32_t n_threads) {
    char path[] = "/tmp/lc_test_model_XXXXXX";
    int  fd     = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    close(fd);
    lc_gen_params gp = {.config = config, .path = path, .type = LC_GEN_BF16, .seed = seed};
    CHECKF(lc_model_generate(&gp) == LC_OK, "%s", lc_last_error());
    lc_model_params mp = lc_model_default_params();
    mp.device          = device;
    if (n_threads > 0) mp.n_threads = n_threads;
    lc_model *m = NULL;
    CHECKF(lc_model_load(path, &mp, &m) == LC_OK, "%s", lc_last_error());
    unlink(path);
    return m;
}

/* Context settings for the generated tiny models: a 1024-token context in 16-token pages,
 * 128-row batches, the method and its settings, never the dense shortcut. */
static inline lc_context_params tiny_context_params(const char *attn, const char *settings) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 1024;
    cp.page_size         = 16;
    cp.n_batch           = 128;
    cp.attn              = attn;
    cp.attn_settings     = settings;
    cp.sparse_always     = true;
    return cp;
}

/* n_out greedy tokens of one prompt (EOS ignored) in a new context with cp: toks[n_out], the
 * logits at the first generated token (first) and at the last (last), and the KV usage at the
 * end (each NULL: not kept). */
static inline int generate_greedy(lc_model *m, const lc_context_params *cp, const int32_t *prompt,
                           int32_t n_prompt, int32_t n_out, int32_t *toks, float *first,
                           float *last, lc_kv_usage *usage) {
    lc_context *c  = NULL;
    int         st = lc_context_create(m, cp, &c);
    if (st != LC_OK) return st;
    lc_request r = {.prompt = prompt, .n_prompt = (size_t)n_prompt, .max_tokens = n_out,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    const size_t row = sizeof(float) * (size_t)lc_context_n_vocab(c);
    int32_t      id, n = 0;
    st = lc_context_add(c, &r, &id);
    for (int guard = 0; st == LC_OK && guard < 4 * n_out + 400 && n < n_out; guard++) {
        lc_event ev[2];
        size_t   ne = 0;
        if ((st = lc_context_step(c, ev, 2, &ne)) != LC_OK || ne == 0) break;
        for (size_t e = 0; e < ne; e++)
            if (ev[e].token >= 0 && n < n_out) {
                if (n == 0 && first) memcpy(first, lc_context_logits(c, id), row);
                if (n == n_out - 1 && last) memcpy(last, lc_context_logits(c, id), row);
                toks[n++] = ev[e].token;
            }
    }
    if (usage) lc_context_kv_usage(c, usage);
    lc_context_free(c);
    return st == LC_OK && n == n_out ? LC_OK : st != LC_OK ? st : LC_ERR_INTERNAL;
}

#endif
