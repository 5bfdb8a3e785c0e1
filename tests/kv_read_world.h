/*
 * kv_read_world.h — shared by test_kv_read.c (CPU) and test_kv_read_cuda.c: one sequence's
 * random keys and values ([n_pos][n_kv_head][head_dim] f32 rows), a shuffled page table (the
 * sequence's pages scattered over a larger pool), the pools laid out as DESIGN.md "KV pages"
 * says ([page][kv_head][page_size][head_dim]) in f32, fp16 or bf16 built on the host, the
 * reference read of one range written straight from that layout, a RoPE table, and the
 * (position range) cases every kv_read test runs: whole, inside a page, across pages, ragged.
 */
#ifndef LC_KV_READ_WORLD_H
#define LC_KV_READ_WORLD_H

#include "backend/backend.h"
#include "format/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct kv_world {
    int32_t  P, H, D;  /* page size, KV heads, head dim */
    int32_t  n_pos;    /* positions of the sequence */
    int32_t  n_pages;  /* pages of the pool (more than the sequence uses) */
    int32_t *table;    /* [ceil(n_pos / P)] page of each of the sequence's pages */
    float   *k, *v;    /* [n_pos][H][D]: what was written */
    uint64_t rng;
} kv_world;

static inline float kvw_uniform(kv_world *w) { /* in [-2, 2) */
    w->rng ^= w->rng << 13, w->rng ^= w->rng >> 7, w->rng ^= w->rng << 17;
    return (float)((double)(w->rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static inline uint32_t kvw_below(kv_world *w, uint32_t n) {
    w->rng ^= w->rng << 13, w->rng ^= w->rng >> 7, w->rng ^= w->rng << 17;
    return (uint32_t)(w->rng % n);
}

/* false: out of memory */
static inline bool kvw_init(kv_world *w, int32_t P, int32_t H, int32_t D, int32_t n_pos, uint64_t seed) {
    memset(w, 0, sizeof *w);
    w->P = P, w->H = H, w->D = D, w->n_pos = n_pos, w->rng = seed;
    const int32_t used = (n_pos + P - 1) / P;
    w->n_pages         = used + 3;
    w->table           = malloc(sizeof(int32_t) * (size_t)w->n_pages);
    const size_t n     = (size_t)n_pos * (size_t)H * (size_t)D;
    w->k               = malloc(sizeof(float) * n);
    w->v               = malloc(sizeof(float) * n);
    if (!w->table || !w->k || !w->v) return false;
    /* a random permutation of the pool's pages; the sequence takes the first `used` */
    for (int32_t i = 0; i < w->n_pages; i++) w->table[i] = i;
    for (int32_t i = w->n_pages - 1; i > 0; i--) {
        const int32_t j = (int32_t)kvw_below(w, (uint32_t)i + 1), t = w->table[i];
        w->table[i] = w->table[j], w->table[j] = t;
    }
    for (size_t i = 0; i < n; i++) w->k[i] = kvw_uniform(w), w->v[i] = kvw_uniform(w);
    return true;
}

static inline void kvw_free(kv_world *w) {
    free(w->table), free(w->k), free(w->v);
    memset(w, 0, sizeof *w);
}

static inline size_t kvw_elem_bytes(uint32_t type) { return type == LC_TYPE_F32 ? 4 : 2; }

static inline size_t kvw_pool_elems(const kv_world *w) {
    return (size_t)w->n_pages * (size_t)w->H * (size_t)w->P * (size_t)w->D;
}

/* The pool of one part in type (f32, f16, bf16), host memory; slots no position uses hold
 * noise. NULL: out of memory. */
static inline void *kvw_pool(kv_world *w, uint32_t type, int32_t part) {
    const size_t n   = kvw_pool_elems(w);
    void        *out = malloc(n * kvw_elem_bytes(type));
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        const float x = 100.0f + kvw_uniform(w);
        if (type == LC_TYPE_F32) ((float *)out)[i] = x;
        else ((uint16_t *)out)[i] = type == LC_TYPE_F16 ? lc_fp32_to_fp16(x) : lc_fp32_to_bf16(x);
    }
    const float *src = part == LC_KV_KEYS ? w->k : w->v;
    for (int32_t p = 0; p < w->n_pos; p++)
        for (int32_t h = 0; h < w->H; h++)
            for (int32_t d = 0; d < w->D; d++) {
                const size_t at = (((size_t)w->table[p / w->P] * w->H + h) * w->P + p % w->P) * w->D + d;
                const float  x  = src[((size_t)p * w->H + h) * w->D + d];
                if (type == LC_TYPE_F32) ((float *)out)[at] = x;
                else ((uint16_t *)out)[at] = type == LC_TYPE_F16 ? lc_fp32_to_fp16(x) : lc_fp32_to_bf16(x);
            }
    return out;
}

/* What kv_read of positions [pos0, pos0 + n) must give for the pool of type: each stored
 * element at its place in the page layout, widened (out: [n][H][D]). */
static inline void kvw_expect(const kv_world *w, const void *pool, uint32_t type, int64_t pos0, int64_t n,
                       float *out) {
    for (int64_t r = 0; r < n; r++)
        for (int32_t h = 0; h < w->H; h++)
            for (int32_t d = 0; d < w->D; d++) {
                const int64_t p  = pos0 + r;
                const size_t  at = (((size_t)w->table[p / w->P] * w->H + h) * w->P + p % w->P) * w->D + d;
                float        *o  = &out[((size_t)r * w->H + h) * w->D + d];
                *o = type == LC_TYPE_F32   ? ((const float *)pool)[at]
                     : type == LC_TYPE_F16 ? lc_fp16_to_fp32(((const uint16_t *)pool)[at])
                                           : lc_bf16_to_fp32(((const uint16_t *)pool)[at]);
            }
}

/* A RoPE table of n_pos rows on the host (theta 10000, rotated dims n_rot). false: memory. */
static inline bool kvw_rope(lc_rope_table *t, int32_t n_pos, int32_t n_rot, lc_rope_pairing pairing) {
    const int32_t half = n_rot / 2;
    t->n_pos = n_pos, t->n_rot = n_rot, t->pairing = pairing, t->mscale = 0;
    t->cos = malloc(sizeof(float) * (size_t)n_pos * (size_t)half);
    t->sin = malloc(sizeof(float) * (size_t)n_pos * (size_t)half);
    if (!t->cos || !t->sin) return false;
    for (int32_t p = 0; p < n_pos; p++)
        for (int32_t i = 0; i < half; i++) {
            const double a = p * pow(10000.0, -2.0 * i / n_rot);
            t->cos[(size_t)p * half + i] = (float)cos(a);
            t->sin[(size_t)p * half + i] = (float)sin(a);
        }
    return true;
}

/* The position ranges every test reads: {pos0, n_rows} (n_pos 70 or more, pages of 8). */
static const int64_t kvw_cases[][2] = {
    {0, 70},  /* everything */
    {0, 1},   /* the first row */
    {69, 1},  /* the last row */
    {9, 5},   /* inside one page */
    {6, 4},   /* across one page boundary */
    {3, 37},  /* ragged at both ends, across several pages */
    {16, 16}, /* whole pages */
    {33, 0},  /* nothing */
};

#endif
