/*
 * sampler.c — sampling: repetition penalty (llama.cpp's: divide positive logits, multiply
 * negative ones, over the last repeat_last_n tokens) → top-k → top-p → min-p → temperature →
 * draw from the softmax with a seeded xorshift64* generator. temperature 0 is greedy (argmax,
 * after the penalty).
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
    s->idx     = lc_malloc(sizeof(int32_t) * (size_t)n_vocab, "sampler");
    s->val     = lc_malloc(sizeof(float) * (size_t)n_vocab, "sampler");
    if (!s->idx || !s->val) {
        lc_sampler_free(s);
        return LC_ERR_NOMEM;
    }
    return LC_OK;
}

void lc_sampler_free(lc_sampler *s) {
    free(s->idx);
    free(s->val);
    s->idx = NULL;
    s->val = NULL;
}

static double rng_uniform(lc_sampler *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_desc(const void *a, const void *b, void *v) {
    const float *val = v;
    const float  x = val[*(const int32_t *)a], y = val[*(const int32_t *)b];
    if (x > y) return -1;
    if (x < y) return 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* Move the k largest (by val) indices of idx[0..n) to the front, sorted descending. */
static void partial_sort(int32_t *idx, int64_t n, int64_t k, float *val) {
    if (k < n) {
        /* quickselect on idx by val, descending */
        int64_t lo = 0, hi = n - 1;
        while (lo < hi) {
            const float pivot = val[idx[(lo + hi) / 2]];
            int64_t     i = lo, j = hi;
            while (i <= j) {
                while (val[idx[i]] > pivot) i++;
                while (val[idx[j]] < pivot) j--;
                if (i <= j) {
                    int32_t t = idx[i];
                    idx[i++]  = idx[j];
                    idx[j--]  = t;
                }
            }
            if (k - 1 <= j) hi = j;
            else if (k - 1 >= i) lo = i;
            else break;
        }
    }
    qsort_r(idx, (size_t)(k < n ? k : n), sizeof(int32_t), cmp_desc, val);
}

int32_t lc_sampler_sample(lc_sampler *s, const float *logits, const int32_t *history,
                          int64_t n_history) {
    const int32_t V   = s->n_vocab;
    float        *val = s->val;
    memcpy(val, logits, sizeof(float) * (size_t)V);
    if (s->p.repeat_penalty != 1.0f && s->p.repeat_last_n > 0) {
        const int64_t from = n_history > s->p.repeat_last_n ? n_history - s->p.repeat_last_n : 0;
        /* penalise each distinct token once */
        for (int64_t i = from; i < n_history; i++) {
            const int32_t t = history[i];
            if (t < 0 || t >= V) continue;
            bool seen = false;
            for (int64_t j = from; j < i && !seen; j++) seen = history[j] == t;
            if (seen) continue;
            val[t] = val[t] > 0 ? val[t] / s->p.repeat_penalty : val[t] * s->p.repeat_penalty;
        }
    }
    if (s->p.temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (val[i] > val[best]) best = i;
        return best;
    }
    int64_t n = V;
    for (int32_t i = 0; i < V; i++) s->idx[i] = i;
    const int64_t k = (s->p.top_k > 0 && s->p.top_k < V) ? s->p.top_k : V;
    /* top-p / min-p need the candidates sorted; limit the sort to k (or a generous cut) */
    int64_t keep = k;
    if (keep == V) keep = V; /* full sort when top-k is off */
    partial_sort(s->idx, n, keep, val);
    n = keep;
    /* softmax over the candidates (with temperature applied after truncation, llama.cpp
     * applies top-k/p/min-p on the untempered distribution) */
    const float mx  = val[s->idx[0]];
    double      sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)(val[s->idx[i]] - mx));
    if (s->p.top_p < 1.0f) {
        double  cum = 0.0;
        int64_t cut = n;
        for (int64_t i = 0; i < n; i++) {
            cum += exp((double)(val[s->idx[i]] - mx)) / sum;
            if (cum >= s->p.top_p) {
                cut = i + 1;
                break;
            }
        }
        n = cut;
    }
    if (s->p.min_p > 0.0f) {
        const double thresh = log((double)s->p.min_p); /* p_i / p_max >= min_p */
        int64_t      cut    = 1;
        while (cut < n && (double)(val[s->idx[cut]] - mx) >= thresh) cut++;
        n = cut;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double e = exp((double)(val[s->idx[i]] - mx) / s->p.temperature);
        val[s->idx[i]] = (float)e;
        total += e;
    }
    double r = rng_uniform(s) * total;
    for (int64_t i = 0; i < n; i++) {
        r -= val[s->idx[i]];
        if (r <= 0.0) return s->idx[i];
    }
    return s->idx[n - 1];
}
