/*
 * sampler.c — sampling state per sequence: parameters, the seeded xorshift64* generator that
 * draws the uniforms, and the repetition-penalty window (llama.cpp's penalty: divide positive
 * logits, multiply negative ones, each distinct token of the last repeat_last_n once). The
 * draw itself — penalty → top-k → top-p → min-p → temperature → inverse CDF, temperature 0
 * greedy — is the backend op `sample` (backend/cpu/cpu_sample.c and its CUDA twin; semantics
 * in backend/backend.h), so the same uniform gives the same token on either backend.
 */
#include "engine/sampler.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lc_sampling lc_sampling_default(void) {
    lc_sampling p = {.temperature    = 0.8f,
                     .top_k          = 40,
                     .top_p          = 0.95f,
                     .min_p          = 0.05f,
                     .repeat_penalty = 1.0f,
                     .repeat_last_n  = 64,
                     .seed           = 0};
    return p;
}

int lc_sampling_check(const lc_sampling *p) {
    if (!(p->temperature >= 0.0f && p->temperature <= 100.0f))
        return lc_fail(LC_ERR_INVALID_ARG, "temperature %g out of range [0, 100]", (double)p->temperature);
    if (p->top_k < 0) return lc_fail(LC_ERR_INVALID_ARG, "top_k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return lc_fail(LC_ERR_INVALID_ARG, "top_p %g out of range (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return lc_fail(LC_ERR_INVALID_ARG, "min_p %g out of range [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && p->repeat_penalty <= 10.0f))
        return lc_fail(LC_ERR_INVALID_ARG, "repeat_penalty %g out of range (0, 10]",
                       (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "repeat_last_n %d must be >= 0", p->repeat_last_n);
    return LC_OK;
}

int lc_sampler_init(lc_sampler *s, const lc_sampling *p, int32_t n_vocab) {
    memset(s, 0, sizeof *s);
    int st = lc_sampling_check(p);
    if (st != LC_OK) return st;
    s->p       = *p;
    s->n_vocab = n_vocab;
    /* splitmix64 of the seed so that small seeds give well-mixed states */
    uint64_t z = p->seed + 0x9E3779B97F4A7C15ull;
    z          = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z          = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    s->rng     = (z ^ (z >> 31)) | 1;
    return LC_OK;
}

void lc_sampler_free(lc_sampler *s) {
    (void)s; /* nothing owned today; kept so that callers pair init and free */
}

static double rng_uniform(lc_sampler *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

int32_t lc_sampler_pen_max(const lc_sampler *s, int64_t n_history) {
    if (s->p.repeat_penalty == 1.0f || s->p.repeat_last_n <= 0) return 0;
    int64_t n = n_history < s->p.repeat_last_n ? n_history : s->p.repeat_last_n;
    return (int32_t)(n < s->n_vocab ? n : s->n_vocab);
}

int32_t lc_sampler_prepare(lc_sampler *s, const int32_t *history, int64_t n_history,
                           lc_sample_row *row, int32_t *pen, int32_t pen_cap) {
    const int32_t V = s->n_vocab;
    memset(row, 0, sizeof *row);
    row->temperature    = s->p.temperature;
    row->top_k          = s->p.top_k;
    row->top_p          = s->p.top_p;
    row->min_p          = s->p.min_p;
    row->repeat_penalty = s->p.repeat_penalty;
    int32_t n = 0;
    if (s->p.repeat_penalty != 1.0f && s->p.repeat_last_n > 0) {
        const int64_t from = n_history > s->p.repeat_last_n ? n_history - s->p.repeat_last_n : 0;
        /* each distinct token once */
        for (int64_t i = from; i < n_history && n < pen_cap; i++) {
            const int32_t t = history[i];
            if (t < 0 || t >= V) continue;
            bool seen = false;
            for (int32_t j = 0; j < n && !seen; j++) seen = pen[j] == t;
            if (!seen) pen[n++] = t;
        }
    }
    row->pen_n = n;
    if (s->p.temperature > 0.0f) row->uniform = rng_uniform(s);
    return n;
}

