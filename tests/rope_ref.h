/* rope_ref.h — the double-precision RoPE reference the selection tests (prune_chunks, select_blocks,
 * select_tokens; InfiniteHiP §3.2, HiP §3, TokenSelect §3.2) rotate their query and key rows with:
 * y = x rotated to position pos by the table's cos/sin (both pairings, partial rotary). */
#ifndef LONGCTX_TESTS_ROPE_REF_H
#define LONGCTX_TESTS_ROPE_REF_H

#include "backend/backend.h"

#include <stdint.h>

static inline void rope_ref_rotate(const float *x, double *y, int32_t D, int32_t pos,
                                   const lc_rope_table *r) {
    const int32_t half = r->n_rot / 2;
    const float  *c = r->cos + (int64_t)pos * half, *s = r->sin + (int64_t)pos * half;
    for (int32_t i = 0; i < D; i++) y[i] = x[i];
    for (int32_t i = 0; i < half; i++) {
        const int32_t i0 = r->pairing == LC_ROPE_NORM ? 2 * i : i;
        const int32_t i1 = r->pairing == LC_ROPE_NORM ? 2 * i + 1 : i + half;
        const double  x0 = x[i0], x1 = x[i1];
        y[i0]            = x0 * c[i] - x1 * s[i];
        y[i1]            = x0 * s[i] + x1 * c[i];
    }
}

#endif
