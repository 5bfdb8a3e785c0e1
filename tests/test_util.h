/*
 * test_util.h — a tiny assertion harness for the C tests: CHECK prints file:line and the
 * failed expression and counts failures; TEST_END returns 1 if anything failed. Also the one
 * random stream every test draws its inputs from (xorshift64 over a state the caller owns and
 * seeds) and the normalised mean squared error the CUDA-vs-CPU comparisons use.
 */
#ifndef LC_TEST_UTIL_H
#define LC_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The counts of CHECKs and of failed ones. A test of one source file keeps them in it; a test
 * of several (the op registry) defines LC_TEST_SHARED_COUNTERS for all of them and one file,
 * the one with main, defines the two variables. */
#ifdef LC_TEST_SHARED_COUNTERS
extern int lc_test_failures, lc_test_checks;
#else
static int lc_test_failures = 0;
static int lc_test_checks   = 0;
#endif

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

/* The next state of the xorshift64 stream *s (seed it odd / non-zero). */
static inline uint64_t test_rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
/* uniform in [-1, 1) */
static inline float test_frand(uint64_t *s) {
    return (float)((double)(test_rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
/* uniform in [0, 1) */
static inline double test_urand(uint64_t *s) {
    return (double)(test_rng_next(s) >> 11) / 9007199254740992.0;
}
/* in [0, n) */
static inline uint32_t test_irand(uint64_t *s, uint32_t n) { return (uint32_t)(test_rng_next(s) % n); }
/* 32 random bits */
static inline uint32_t test_u32(uint64_t *s) { return (uint32_t)(test_rng_next(s) >> 16); }

/* sum (ref - got)^2 / sum ref^2 in double (the plain sum where ref is all zero); *nonfinite
 * (may be NULL) counts the non-finite values of got. */
static inline double test_nmse(const float *ref, const float *got, size_t n, int64_t *nonfinite) {
    double  num = 0, den = 0;
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) bad++;
        const double d = (double)ref[i] - got[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    if (nonfinite) *nonfinite = bad;
    return den > 0 ? num / den : num;
}

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
