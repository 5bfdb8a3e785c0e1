/*
 * sampler.h — token sampling from logits: repetition penalty, top-k, top-p, min-p,
 * temperature, seeded RNG (greedy when temperature is 0), in llama.cpp's order. The
 * per-sequence state (parameters, RNG) lives here; the arithmetic is the backend op `sample`
 * (backend/backend.h), so the engine can sample on the device with the same draws.
 */
#ifndef LC_SAMPLER_H
#define LC_SAMPLER_H

#include "backend/backend.h"
#include "longctx.h"

typedef struct lc_sampler {
    lc_sampling p;
    uint64_t    rng;    /* xorshift64* state */
    int32_t     n_vocab;
} lc_sampler;

/* Validate sampling parameters (message names the bad field). */
int  lc_sampling_check(const lc_sampling *p);
int  lc_sampler_init(lc_sampler *s, const lc_sampling *p, int32_t n_vocab);
void lc_sampler_free(lc_sampler *s);
/* The parameters of the next draw as one row of the backend op `sample`: draws the uniform
 * from the RNG (only when the draw is not greedy, so greedy steps leave the RNG alone) and
 * writes the distinct tokens of the penalty window (history: the tokens so far) to pen
 * (room for pen_cap = lc_sampler_pen_max(s, n_history)); row->pen_off is left 0 for the
 * caller to set. Returns the number of penalised tokens. */
int32_t lc_sampler_prepare(lc_sampler *s, const int32_t *history, int64_t n_history,
                           lc_sample_row *row, int32_t *pen, int32_t pen_cap);
/* An upper bound of the penalised tokens of a draw after n_history tokens. */
int32_t lc_sampler_pen_max(const lc_sampler *s, int64_t n_history);

#endif
