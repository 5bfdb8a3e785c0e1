/*
 * test_util.h — a tiny assertion harness for the C tests: CHECK prints file:line and the
 * failed expression and counts failures; TEST_END returns 1 if anything failed.
 */
#ifndef LC_TEST_UTIL_H
#define LC_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int lc_test_failures = 0;
static int lc_test_checks   = 0;

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        lc_test_checks++;                                                                     \
        if (!(cond)) {                                                                        \
            lc_test_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
        }                                                                                     \
    } while (0)

#define CHECKF(cond, ...)                                                                     \
    do {                                                                                      \
        lc_test_checks++;                                                                     \
        if (!(cond)) {                                                                        \
            lc_test_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

#define TEST_END()                                                                            \
    do {                                                                                      \
        fprintf(stderr, "%d checks, %d failed\n", lc_test_checks, lc_test_failures);          \
        return lc_test_failures ? 1 : 0;                                                      \
    } while (0)

/* Exit 77 (ctest: skipped) unless the model file exists; with LC_REQUIRE_MODEL=1 in the
 * environment (make test-release / test-asan, after make test installed every model) a missing
 * model is a failure instead. `how` says how to install it. */
#define REQUIRE_MODEL_FILE(path, how)                                                         \
    do {                                                                                      \
        FILE *f_ = fopen(path, "rb");                                                         \
        if (!f_) {                                                                            \
            const char *req_ = getenv("LC_REQUIRE_MODEL");                                    \
            const bool  rq_  = req_ && req_[0] == '1';                                        \
            fprintf(stderr, "model %s not found (run %s)%s\n", path, how,                     \
                    rq_ ? ": a failure, LC_REQUIRE_MODEL=1" : ": skipped");                   \
            return rq_ ? 1 : 77;                                                              \
        }                                                                                     \
        fclose(f_);                                                                           \
    } while (0)

/* SmolLM2-135M-Instruct (every model test but the Qwen ones). */
#define REQUIRE_MODEL(path) REQUIRE_MODEL_FILE(path, "scripts/get-model.sh")

/* In a CUDA test (includes backend/backend.h): create the CUDA backend into b, or exit 77
 * (ctest: skipped) where there is no GPU. */
#define REQUIRE_CUDA_BACKEND(b)                                                               \
    do {                                                                                      \
        if (lc_backend_cuda_create(0, &(b)) != LC_OK) {                                       \
            fprintf(stderr, "no CUDA device: %s\n", lc_last_error());                         \
            return 77;                                                                        \
        }                                                                                     \
    } while (0)

#endif
