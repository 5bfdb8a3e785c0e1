/*
 * cpu_sample.c — the CPU twin of the sampling op (lc_cpu_sample; contract and semantics in
 * backend/backend.h): repetition penalty, greedy argmax, top-k (capped at LC_SAMPLE_MAX_K),
 * top-p, min-p and temperature, then the inverse-CDF draw with the host's uniform, in
 * llama.cpp's order. The engine's sampler (engine/sampler.c) calls it for one row at a time;
 * lc_cuda_sample (backend/cuda/sampling.cu) computes the same thing on the device and the
 * tests compare the two.
 *
 * Values are ranked by an order-preserving 32-bit key (sample_key): -0 equals +0 and NaN
 * ranks below everything, so "largest value, lowest index on ties" is one integer order.
 */
#include "backend/cpu/cpu.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t sample_key(float x) {
    if (x != x) return 0; /* NaN */
    if (x == 0.0f) x = 0.0f;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

typedef struct cand {
    uint32_t key;
    int32_t  idx;
} cand;

/* a ranks before b: larger value, then lower index */
static inline bool before(cand a, cand b) {
    return a.key > b.key || (a.key == b.key && a.idx < b.idx);
}

/* Min-heap on "before" (the root is the worst kept candidate). */
static void heap_down(cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(h[w], h[l])) w = l;
        if (r < n && before(h[w], h[r])) w = r;
        if (w == i) return;
        cand t = h[i];
        h[i]   = h[w];
        h[w]   = t;
        i      = w;
    }
}

static int cmp_cand(const void *a, const void *b) {
    const cand x = *(const cand *)a, y = *(const cand *)b;
    return before(x, y) ? -1 : before(y, x) ? 1 : 0;
}

typedef struct row_view {
    const float    *x;
    const uint32_t *pen_bits; /* NULL: no penalty */
    float           rp;
} row_view;

static inline float row_val(const row_view *r, int32_t i) {
    const float v = r->x[i];
    if (r->pen_bits && ((r->pen_bits[i >> 5] >> (i & 31)) & 1u)) return v > 0 ? v / r->rp : v * r->rp;
    return v;
}

static int32_t sample_one(const row_view *rv, int32_t V, const lc_sample_row *p, cand *c, float *v) {
    if (p->temperature <= 0.0f) { /* greedy */
        int32_t  best = 0;
        uint32_t bk   = sample_key(row_val(rv, 0));
        for (int32_t i = 1; i < V; i++) {
            const uint32_t k = sample_key(row_val(rv, i));
            if (k > bk) bk = k, best = i;
        }
        return best;
    }
    const bool topk_on = p->top_k > 0 && p->top_k < V;
    if (!topk_on && !(p->top_p < 1.0f) && !(p->min_p > 0.0f)) {
        /* no truncation: the whole vocabulary in index order */
        uint32_t mk = 0;
        for (int32_t i = 0; i < V; i++) {
            const uint32_t k = sample_key(row_val(rv, i));
            if (k > mk) mk = k;
        }
        float mx;
        {
            uint32_t u = (mk & 0x80000000u) ? (mk & 0x7fffffffu) : ~mk;
            memcpy(&mx, &u, sizeof mx);
        }
        double total = 0.0;
        for (int32_t i = 0; i < V; i++) total += (double)expf((row_val(rv, i) - mx) / p->temperature);
        const double r   = p->uniform * total;
        double       cum = 0.0;
        for (int32_t i = 0; i < V; i++) {
            cum += (double)expf((row_val(rv, i) - mx) / p->temperature);
            if (cum >= r) return i;
        }
        return V - 1;
    }
    int32_t K = topk_on ? p->top_k : V;
    if (K > LC_SAMPLE_MAX_K) K = LC_SAMPLE_MAX_K;
    /* the K best (value desc, index asc) through a heap of the worst kept */
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        const cand e = {sample_key(row_val(rv, i)), i};
        if (n < K) {
            c[n++] = e;
            if (n == K)
                for (int32_t j = K / 2 - 1; j >= 0; j--) heap_down(c, K, j);
        } else if (before(e, c[0])) {
            c[0] = e;
            heap_down(c, K, 0);
        }
    }
    qsort(c, (size_t)K, sizeof *c, cmp_cand);
    for (int32_t j = 0; j < K; j++) v[j] = row_val(rv, c[j].idx);
    const float mx = v[0];
    n              = K;
    if (p->top_p < 1.0f) {
        double z = 0.0;
        if (topk_on)
            for (int32_t j = 0; j < K; j++) z += exp((double)(v[j] - mx));
        else
            for (int32_t i = 0; i < V; i++) z += (double)expf(row_val(rv, i) - mx);
        double cum = 0.0;
        for (int32_t j = 0; j < K; j++) {
            cum += exp((double)(v[j] - mx)) / z;
            if (cum >= (double)p->top_p) {
                n = j + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        const double thresh = log((double)p->min_p); /* p_j / p_max >= min_p */
        int32_t      cut    = 1;
        while (cut < n && (double)(v[cut] - mx) >= thresh) cut++;
        n = cut;
    }
    double total = 0.0;
    for (int32_t j = 0; j < n; j++) total += exp((double)(v[j] - mx) / (double)p->temperature);
    const double r   = p->uniform * total;
    double       cum = 0.0;
    int32_t      out = c[n - 1].idx;
    for (int32_t j = 0; j < n; j++) {
        cum += exp((double)(v[j] - mx) / (double)p->temperature);
        if (cum >= r) {
            out = c[j].idx;
            break;
        }
    }
    return out;
}

int lc_cpu_sample(const float *logits, int64_t ld, int32_t n_rows, int32_t n_vocab,
                  const lc_sample_row *rows, const int32_t *pen_tokens, int32_t *ids) {
    if (n_rows <= 0) return LC_OK;
    if (n_vocab <= 0 || ld < n_vocab)
        return lc_fail(LC_ERR_INVALID_ARG, "sample: %d-token vocabulary in rows of %lld",
                       n_vocab, (long long)ld);
    const size_t words = ((size_t)n_vocab + 31) / 32;
    uint32_t    *bits  = NULL;
    cand        *c     = lc_malloc(sizeof(cand) * LC_SAMPLE_MAX_K, "sampling candidates");
    float       *v     = lc_malloc(sizeof(float) * LC_SAMPLE_MAX_K, "sampling candidates");
    if (!c || !v) {
        free(c), free(v);
        return LC_ERR_NOMEM;
    }
    int st = LC_OK;
    for (int32_t r = 0; r < n_rows && st == LC_OK; r++) {
        const lc_sample_row *p  = &rows[r];
        row_view             rv = {logits + (int64_t)r * ld, NULL, p->repeat_penalty};
        if (p->repeat_penalty != 1.0f && p->pen_n > 0) {
            if (!bits && !(bits = lc_calloc(words, sizeof(uint32_t), "sampling penalty set"))) {
                st = LC_ERR_NOMEM;
                break;
            }
            for (int32_t j = 0; j < p->pen_n; j++) {
                const int32_t t = pen_tokens[p->pen_off + j];
                if (t >= 0 && t < n_vocab) bits[t >> 5] |= 1u << (t & 31);
            }
            rv.pen_bits = bits;
        }
        bool finite = true; /* a row holding NaN or +-Inf has no distribution to draw from */
        for (int32_t i = 0; i < n_vocab; i++) finite &= isfinite(rv.x[i]) != 0;
        ids[r] = finite ? sample_one(&rv, n_vocab, p, c, v) : -1;
        if (rv.pen_bits) memset(bits, 0, words * sizeof(uint32_t));
    }
    free(bits);
    free(c), free(v);
    return st;
}
