/*
 * generated_model.h — what the engine tests over a generated model share (test_kv_tiers.c,
 * test_kv_tiers_cuda.c, test_slab_bank.c): a model of a gen-model config with random bf16
 * weights (lc_model_generate), written to a temporary file, loaded on a device and the file
 * removed at once.
 */
#ifndef LC_TEST_GENERATED_MODEL_H
#define LC_TEST_GENERATED_MODEL_H

#include "longctx.h"
#include "test_util.h"

#include <stdlib.h>
#include <unistd.h>

/* The loaded model, or NULL after a failed CHECK. n_threads 0: the default. */
static lc_model *load_generated(const char *config, uint64_t seed, lc_device device,
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

#endif
