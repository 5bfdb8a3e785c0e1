/*
 * sampler.h — token sampling from logits: repetition penalty, top-k, top-p, min-p,
 * temperature, seeded RNG (greedy when temperature is 0), in llama.cpp's order.
 */
#ifndef LC_SAMPLER_H
#define LC_SAMPLER_H

#include "longctx.h"

typedef struct lc_sampler {
    lc_sampling p;
    uint64_t    rng;    /* xorshift64* state */
    int32_t     n_vocab;
    int32_t    *idx;    /* scratch [n_vocab] */
    float      *val;    /* scratch [n_vocab] */
} lc_sampler;

/* Validate sampling parameters (message names the bad field). */
int  lc_sampling_check(const lc_sampling *p);
int  lc_sampler_init(lc_sampler *s, const lc_sampling *p, int32_t n_vocab);
void lc_sampler_free(lc_sampler *s);
/* Sample from logits (not modified); history: the tokens so far (for the repetition
 * penalty). */
int32_t lc_sampler_sample(lc_sampler *s, const float *logits, const int32_t *history,
                          int64_t n_history);

#endif
