/*
 * sampler_host.h — a draw on the host for the sampling tests: the engine's sampler state
 * (lc_sampler_prepare: penalty window, uniform) and the CPU backend's sample op
 * (lc_cpu_sample) on one row of logits in host memory. The engine itself draws through the
 * backend's op table; this pairing is for tests that have no backend instance.
 */
#ifndef LC_TESTS_SAMPLER_HOST_H
#define LC_TESTS_SAMPLER_HOST_H

#include "backend/cpu/cpu.h"
#include "engine/sampler.h"
#include "util/util.h"

#include <stdlib.h>

/* The token drawn from logits (host, n_vocab of s; not modified); history: the tokens so far
 * (for the repetition penalty). -1 on failure. */
static inline int32_t sampler_host_draw(lc_sampler *s, const float *logits,
                                        const int32_t *history, int64_t n_history) {
    const int32_t cap = lc_sampler_pen_max(s, n_history);
    int32_t      *pen = malloc(sizeof(int32_t) * (size_t)(cap > 0 ? cap : 1));
    if (!pen) return -1;
    lc_sample_row row;
    lc_sampler_prepare(s, history, n_history, &row, pen, cap);
    int32_t id = -1;
    if (lc_cpu_sample(logits, s->n_vocab, 1, s->n_vocab, &row, pen, &id) != LC_OK) id = -1;
    free(pen);
    return id;
}

#endif
