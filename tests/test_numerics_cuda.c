/*
 * test_numerics_cuda.c — the NaN scenarios of tests/numerics_run.h (issue 20 item 6) on the
 * CUDA backend: the sampling kernels' non-finite check (-1), the diagnostic re-run, and a
 * NaN that first appears in a replayed decode graph. The model is generated here (config
 * tiny-hd64: head dim 64, untied output head). Skips (77) without a GPU.
 */
#include "numerics_run.h"

#include <stdlib.h>

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/lc-numerics-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char src[128];
    snprintf(src, sizeof src, "%s/tiny-hd64.gguf", dir);
    lc_gen_params gp = {.config = "tiny-hd64", .path = src, .type = LC_GEN_BF16, .seed = 7};
    CHECKF(lc_model_generate(&gp) == LC_OK, "generate: %s", lc_last_error());
    const numerics_cfg cuda = {LC_DEVICE_CUDA, 64};
    lc_model          *m    = NULL;
    if (numerics_load(&cuda, src, &m) != LC_OK) {
        fprintf(stderr, "no CUDA device: %s\n", lc_last_error());
        unlink(src);
        rmdir(dir);
        return 77;
    }
    lc_model_free(m);
    numerics_scenarios(&cuda, src, dir);
    /* the CPU on the same file agrees on the reference tokens' fate */
    const numerics_cfg cpu = {LC_DEVICE_CPU, 64};
    numerics_scenarios(&cpu, src, dir);
    unlink(src);
    rmdir(dir);
    TEST_END();
}
