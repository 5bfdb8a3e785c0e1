/*
 * test_sampler.c — sampling: greedy is argmax; a fixed seed repeats; top-k / top-p / min-p
 * never return a token outside their set; empirical frequencies follow the softmax at the
 * temperature; the repetition penalty changes the greedy choice; bad parameters are rejected.
 */
#include "engine/sampler.h"
#include "sampler_host.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

#define V 1000

int main(void) {
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = -0.01f * (float)i; /* token 0 best, then 1, ... */
    logits[500] = 3.0f;                                       /* the best */
    logits[501] = 2.9f;
    lc_sampling p = lc_sampling_default();
    lc_sampler  s;

    /* greedy */
    p.temperature = 0.0f;
    CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
    CHECK(sampler_host_draw(&s, logits, NULL, 0) == 500);
    /* repetition penalty: 500 was used, penalise it below 501 */
    int32_t hist[] = {500};
    lc_sampler_free(&s);
    p.repeat_penalty = 1.5f;
    CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
    CHECK(sampler_host_draw(&s, logits, hist, 1) == 501);
    lc_sampler_free(&s);
    p.repeat_penalty = 1.0f;

    /* top-k 2: only 500 and 501, in softmax proportion at temperature 1 */
    p.temperature = 1.0f, p.top_k = 2, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = 7;
    CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
    int n500 = 0, other = 0;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        int32_t t = sampler_host_draw(&s, logits, NULL, 0);
        n500 += t == 500;
        other += t != 500 && t != 501;
    }
    const double expect = 1.0 / (1.0 + exp(-0.1));
    CHECK(other == 0);
    CHECKF(fabs((double)n500 / N - expect) < 0.015, "share of 500: %g, expected %g",
           (double)n500 / N, expect);
    lc_sampler_free(&s);

    /* same seed, same sequence; another seed, another sequence */
    int32_t a[64], b[64], c[64];
    p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.temperature = 5.0f;
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 99 : 42;
        CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
        for (int i = 0; i < 64; i++) (run == 0 ? a : run == 1 ? b : c)[i] = sampler_host_draw(&s, logits, NULL, 0);
        lc_sampler_free(&s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);

    /* top-p 0.5 at temperature 1 keeps only the top token here (p(500) ~ 0.5+) */
    for (int i = 0; i < V; i++) logits[i] = -100.0f;
    logits[10] = 2.0f, logits[11] = 1.0f, logits[12] = 0.0f;
    p.temperature = 1.0f, p.top_p = 0.6f, p.seed = 1;
    CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
    for (int i = 0; i < 2000; i++) {
        int32_t t = sampler_host_draw(&s, logits, NULL, 0);
        CHECKF(t == 10 || t == 11, "top-p sampled %d", t); /* p = .665, .245, .09 */
        if (t != 10 && t != 11) break;
    }
    lc_sampler_free(&s);
    /* min-p 0.3: p(11)/p(10) = e^-1 = .37 kept, p(12)/p(10) = .135 dropped */
    p.top_p = 1.0f, p.min_p = 0.3f;
    CHECK(lc_sampler_init(&s, &p, V) == LC_OK);
    int seen11 = 0;
    for (int i = 0; i < 2000; i++) {
        int32_t t = sampler_host_draw(&s, logits, NULL, 0);
        seen11 += t == 11;
        CHECKF(t == 10 || t == 11, "min-p sampled %d", t);
        if (t != 10 && t != 11) break;
    }
    CHECK(seen11 > 0);
    lc_sampler_free(&s);

    /* bad parameters */
    lc_sampling bad = lc_sampling_default();
    bad.top_p       = 0.0f;
    CHECK(lc_sampler_init(&s, &bad, V) == LC_ERR_INVALID_ARG && strstr(lc_last_error(), "top_p"));
    bad       = lc_sampling_default();
    bad.top_k = -1;
    CHECK(lc_sampling_check(&bad) == LC_ERR_INVALID_ARG && strstr(lc_last_error(), "top_k"));
    bad             = lc_sampling_default();
    bad.temperature = NAN;
    CHECK(lc_sampling_check(&bad) == LC_ERR_INVALID_ARG);
    bad                = lc_sampling_default();
    bad.repeat_penalty = 0.0f;
    CHECK(lc_sampling_check(&bad) == LC_ERR_INVALID_ARG);
    TEST_END();
}
