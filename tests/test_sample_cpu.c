/*
 * test_sample_cpu.c — the sampling op's CPU twin (lc_cpu_sample), the reference the CUDA
 * sampler is tested against: greedy is the argmax with the lowest index on ties (and after
 * the repetition penalty); NaN ranks last; with no truncation the draw walks the vocabulary
 * in index order (u = 0 gives the first id, u near 1 the last); top-k keeps the k largest
 * (lowest indices among equal values), and a top_k past LC_SAMPLE_MAX_K is clamped to it;
 * top-p and min-p cut where backend.h says; several rows each follow their own parameters;
 * a host draw (sampler_host_draw, tests/sampler_host.h) is lc_cpu_sample on the row
 * lc_sampler_prepare makes, with the same RNG draws.
 */
#include "backend/cpu/cpu.h"
#include "engine/sampler.h"
#include "sampler_host.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static lc_sample_row row(float t, int32_t k, float p, float m, double u) {
    lc_sample_row r = {0};
    r.uniform = u, r.temperature = t, r.top_k = k, r.top_p = p, r.min_p = m;
    r.repeat_penalty = 1.0f;
    return r;
}

static int32_t one(const float *x, int32_t V, lc_sample_row r, const int32_t *pen) {
    int32_t id = -2; /* neither an id nor the "no draw" -1 */
    CHECK(lc_cpu_sample(x, V, 1, V, &r, pen, &id) == LC_OK);
    return id;
}

#define V 3000

int main(void) {
    static float x[V];
    for (int i = 0; i < V; i++) x[i] = -1.0f - 0.001f * (float)i;
    x[7] = 2.0f, x[9] = 2.0f, x[11] = 1.5f; /* a tie for the best */

    /* greedy: lowest index of the maxima */
    CHECK(one(x, V, row(0, 0, 1, 0, 0), NULL) == 7);
    /* a row with a non-finite value draws nothing (-1), in every mode */
    const float nonfinite[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        x[0] = nonfinite[k];
        CHECK(one(x, V, row(0, 0, 1, 0, 0), NULL) == -1);
        CHECK(one(x, V, row(1, 40, 0.95f, 0.05f, 0.5), NULL) == -1);
        CHECK(one(x, V, row(1, 0, 1, 0, 0.5), NULL) == -1);
    }
    x[0] = -1.0f;
    /* -0 and +0 are equal: the lower index wins */
    {
        float z[4] = {-5.0f, 0.0f, -0.0f, -3.0f};
        z[1] = -0.0f, z[2] = 0.0f;
        CHECK(one(z, 4, row(0, 0, 1, 0, 0), NULL) == 1);
    }
    /* penalty: 7 and 9 penalised (2 / 2 = 1), 11 is the best */
    {
        int32_t       pen[2] = {9, 7};
        lc_sample_row r      = row(0, 0, 1, 0, 0);
        r.repeat_penalty = 2.0f, r.pen_n = 2;
        CHECK(one(x, V, r, pen) == 11);
        /* a negative logit is multiplied: 11 (1.5 / 2 = .75) beats nothing else here */
        r.pen_n = 1; /* only 9: 7 wins again */
        CHECK(one(x, V, r, pen) == 7);
    }
    /* top-k 1 is the argmax whatever the uniform */
    CHECK(one(x, V, row(1, 1, 1, 0, 0.999), NULL) == 7);
    /* top-k 2 keeps 7 and 9 (equal): u below one half draws 7, above draws 9 */
    CHECK(one(x, V, row(1, 2, 1, 0, 0.25), NULL) == 7);
    CHECK(one(x, V, row(1, 2, 1, 0, 0.75), NULL) == 9);
    /* top-k 3 with u ~ 1: the third candidate, 11 */
    CHECK(one(x, V, row(1, 3, 1, 0, 0.999999), NULL) == 11);
    /* no truncation: index order */
    CHECK(one(x, V, row(1, 0, 1, 0, 0.0), NULL) == 0);
    CHECK(one(x, V, row(1, 0, 1, 0, 0.9999999999), NULL) == V - 1);
    /* top-p: p(7) = p(9) ~ .41 each, p(11) ~ .25 (the rest is tiny here at temperature 0.1
     * but top-p works on the untempered p) */
    {
        float y[V];
        for (int i = 0; i < V; i++) y[i] = -30.0f;
        y[7] = 2.0f, y[9] = 2.0f, y[11] = 1.5f;
        /* top_p 0.5: 7 and 9 */
        for (int i = 0; i < 50; i++) {
            const int32_t id = one(y, V, row(1, 0, 0.5f, 0, i / 50.0), NULL);
            CHECKF(id == 7 || id == 9, "top-p drew %d", id);
        }
        /* top_p 0.95: 11 too (u ~ 1 draws it) */
        CHECK(one(y, V, row(1, 0, 0.95f, 0, 0.999999), NULL) == 11);
        /* min-p 0.7: p(11) / p(7) = e^-.5 = .61 < .7: 11 dropped */
        CHECK(one(y, V, row(1, 0, 1, 0.7f, 0.999999), NULL) == 9);
        CHECK(one(y, V, row(1, 0, 1, 0.5f, 0.999999), NULL) == 11);
    }
    /* top_k past the cap: clamped to LC_SAMPLE_MAX_K candidates (the largest values) */
    {
        static float y[V];
        for (int i = 0; i < V; i++) y[i] = (float)(V - i) * 1e-6f; /* nearly flat, decreasing */
        CHECK(one(y, V, row(1, 2500, 1, 0, 0.9999999), NULL) == LC_SAMPLE_MAX_K - 1);
        CHECK(one(y, V, row(1, 0, 0.9999f, 0, 0.9999999), NULL) == LC_SAMPLE_MAX_K - 1);
    }
    /* several rows, each with its own parameters, in one call (row stride > V) */
    {
        const int32_t W = 10, LD = 12;
        float         m[3 * 12];
        for (int i = 0; i < 3 * LD; i++) m[i] = 0.0f;
        m[0 * LD + 4] = 5.0f, m[1 * LD + 6] = 5.0f, m[2 * LD + 8] = 5.0f;
        lc_sample_row rs[3] = {row(0, 0, 1, 0, 0), row(1, 1, 1, 0, 0.5), row(0.5f, 0, 1, 0.5f, 0.3)};
        int32_t       ids[3];
        CHECK(lc_cpu_sample(m, LD, 3, W, rs, NULL, ids) == LC_OK);
        CHECK(ids[0] == 4 && ids[1] == 6 && ids[2] == 8);
        CHECK(lc_cpu_sample(m, 9, 3, W, rs, NULL, ids) == LC_ERR_INVALID_ARG); /* ld < n_vocab */
    }
    /* the engine's sampler = lc_cpu_sample on the prepared row, same RNG */
    {
        lc_sampling p = lc_sampling_default();
        p.seed = 5, p.repeat_penalty = 1.3f, p.repeat_last_n = 8;
        lc_sampler a, c;
        CHECK(lc_sampler_init(&a, &p, V) == LC_OK);
        CHECK(lc_sampler_init(&c, &p, V) == LC_OK);
        float y[V];
        for (int i = 0; i < V; i++) y[i] = sinf((float)i * 0.37f) * 3.0f;
        int32_t hist[32] = {7, 9, 7, 11, 5};
        int32_t n_hist   = 5;
        for (int step = 0; step < 20; step++) {
            const int32_t t1 = sampler_host_draw(&a, y, hist, n_hist);
            lc_sample_row r;
            int32_t       pen[16];
            CHECK(lc_sampler_pen_max(&c, n_hist) <= 16);
            const int32_t np = lc_sampler_prepare(&c, hist, n_hist, &r, pen, 16);
            CHECK(np <= 8);
            const int32_t t2 = one(y, V, r, pen);
            CHECKF(t1 == t2, "step %d: sampler %d, op %d", step, t1, t2);
            if (n_hist < 32) hist[n_hist++] = t1;
        }
        lc_sampler_free(&a);
        lc_sampler_free(&c);
    }
    TEST_END();
}
