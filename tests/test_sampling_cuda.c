/*
 * test_sampling_cuda.c — the device sampler (lc_cuda_sample) against its CPU twin
 * (lc_cpu_sample): random logit rows over odd vocabulary sizes (1 .. 151936), every row with
 * its own parameters (greedy, top-k 1 / 40 / clamped 5000, top-p 0.9, min-p 0.05, temperature
 * 0.7 / 1.5, temperature alone, combinations, repetition penalty) and its own uniform; the
 * same uniforms must give the same ids. Half of the rows hold quantised values, so that many
 * logits tie: both twins rank equal values by index, lowest first (backend/backend.h). Also
 * prints the device sampler's time per call at the largest vocabulary. Skips (exit 77)
 * without a GPU. LC_SAMPLING_QUICK=1 limits it to the vocabularies up to 4097 (for
 * compute-sanitizer).
 */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "test_util.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t rng;
static double   urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float nrand(void) { /* roughly normal */
    return (float)(urand() + urand() + urand() + urand() - 2.0) * 1.7f;
}

typedef struct pset {
    const char *name;
    float       temperature;
    int32_t     top_k;
    float       top_p, min_p, repeat_penalty;
} pset;

static const pset sets[] = {
    {"greedy", 0.0f, 0, 1.0f, 0.0f, 1.0f},
    {"greedy+penalty", 0.0f, 0, 1.0f, 0.0f, 1.5f},
    {"top-k 1", 0.7f, 1, 1.0f, 0.0f, 1.0f},
    {"top-k 40 t0.7", 0.7f, 40, 1.0f, 0.0f, 1.0f},
    {"top-k 40 t1.5", 1.5f, 40, 1.0f, 0.0f, 1.0f},
    {"top-p 0.9", 1.0f, 0, 0.9f, 0.0f, 1.0f},
    {"min-p 0.05 t0.7", 0.7f, 0, 1.0f, 0.05f, 1.0f},
    {"temperature 1.5", 1.5f, 0, 1.0f, 0.0f, 1.0f},
    {"temperature 0.7", 0.7f, 0, 1.0f, 0.0f, 1.0f},
    {"defaults", 0.8f, 40, 0.95f, 0.05f, 1.0f},
    {"k100 p0.9 m0.05 t1.5 pen", 1.5f, 100, 0.9f, 0.05f, 1.2f},
    {"k5000 (clamped) p0.99", 1.0f, 5000, 0.99f, 0.0f, 1.0f},
    {"top-p 0.5 t0.7 pen", 0.7f, 0, 0.5f, 0.0f, 1.3f},
    {"temperature 1 pen", 1.0f, 0, 1.0f, 0.0f, 1.1f},
};
#define N_SETS ((int)(sizeof sets / sizeof sets[0]))
#define ROWS_PER_SET 8
#define N_PEN 24

int main(void) {
    lc_backend *b;
    REQUIRE_CUDA_BACKEND(b);
    rng = (uint64_t)time(NULL) | 1;
    fprintf(stderr, "seed %llu\n", (unsigned long long)rng);
    const int32_t vocabs[] = {1, 63, 65, 4097, 49152, 151936};
    const int     n_rows   = N_SETS * ROWS_PER_SET;
    /* LC_SAMPLING_QUICK=1: the small vocabularies only (for compute-sanitizer) */
    const char   *quick    = getenv("LC_SAMPLING_QUICK");
    const size_t  n_vocabs = quick && quick[0] == '1' ? 4 : sizeof vocabs / sizeof vocabs[0];
    for (size_t vi = 0; vi < n_vocabs; vi++) {
        const int32_t V  = vocabs[vi];
        const int64_t ld = V + (V % 2); /* a row stride a little larger than V where odd */
        float         *x    = malloc(sizeof(float) * (size_t)n_rows * (size_t)ld);
        lc_sample_row *rows = calloc((size_t)n_rows, sizeof *rows);
        int32_t       *pen  = malloc(sizeof(int32_t) * (size_t)n_rows * N_PEN);
        int32_t *ref = malloc(sizeof(int32_t) * (size_t)n_rows), *got = malloc(sizeof(int32_t) * (size_t)n_rows);
        CHECK(x && rows && pen && ref && got);
        if (!x || !rows || !pen || !ref || !got) break;
        int32_t n_pen = 0;
        for (int r = 0; r < n_rows; r++) {
            float *xr = x + (int64_t)r * ld;
            const bool ties = r % 2 == 1;
            for (int64_t i = 0; i < ld; i++) {
                float v = nrand() * (r % 3 == 0 ? 3.0f : 1.0f);
                xr[i]   = ties ? roundf(v * 2.0f) / 2.0f : v;
            }
            /* some rows hold one non-finite logit: both twins draw nothing (id -1) */
            if (r % 7 == 3) xr[(int64_t)(urand() * V)] = NAN;
            if (r % 11 == 5) xr[(int64_t)(urand() * V)] = INFINITY;
            if (r % 13 == 6) xr[(int64_t)(urand() * V)] = -INFINITY;
            const pset *ps    = &sets[r / ROWS_PER_SET];
            lc_sample_row *sr = &rows[r];
            sr->uniform        = urand();
            sr->temperature    = ps->temperature;
            sr->top_k          = ps->top_k;
            sr->top_p          = ps->top_p;
            sr->min_p          = ps->min_p;
            sr->repeat_penalty = ps->repeat_penalty;
            sr->pen_off        = n_pen;
            if (ps->repeat_penalty != 1.0f) {
                /* distinct ids, some of them among the row's largest */
                int32_t best = 0;
                for (int32_t i = 1; i < V; i++)
                    if (xr[i] > xr[best]) best = i;
                pen[n_pen + sr->pen_n++] = best;
                for (int k = 1; k < N_PEN && k < V; k++) {
                    const int32_t t = (int32_t)(urand() * V);
                    bool          seen = false;
                    for (int j = 0; j < sr->pen_n; j++) seen = seen || pen[n_pen + j] == t;
                    if (!seen) pen[n_pen + sr->pen_n++] = t;
                }
                n_pen += sr->pen_n;
            }
        }
        CHECK(lc_cpu_sample(x, ld, n_rows, V, rows, pen, ref) == LC_OK);
        float         *dx    = b->alloc(b, sizeof(float) * (size_t)n_rows * (size_t)ld, "logits");
        lc_sample_row *drows = b->alloc(b, sizeof *rows * (size_t)n_rows, "rows");
        int32_t       *dpen  = b->alloc(b, sizeof(int32_t) * (size_t)(n_pen + 1), "pen");
        int32_t       *dids  = b->alloc(b, sizeof(int32_t) * (size_t)n_rows, "ids");
        CHECK(dx && drows && dpen && dids);
        if (dx && drows && dpen && dids) {
            CHECK(b->upload(b, dx, x, sizeof(float) * (size_t)n_rows * (size_t)ld) == LC_OK);
            CHECK(b->upload(b, drows, rows, sizeof *rows * (size_t)n_rows) == LC_OK);
            if (n_pen) CHECK(b->upload(b, dpen, pen, sizeof(int32_t) * (size_t)n_pen) == LC_OK);
            memset(got, 0x7f, sizeof(int32_t) * (size_t)n_rows); /* poison: not an id, not -1 */
            CHECK(b->upload(b, dids, got, sizeof(int32_t) * (size_t)n_rows) == LC_OK);
            CHECK(b->sample(b, dx, ld, n_rows, V, drows, dpen, dids) == LC_OK);
            CHECK(lc_cuda_sync() == LC_OK);
            CHECK(b->download(b, got, dids, sizeof(int32_t) * (size_t)n_rows) == LC_OK);
            int bad = 0;
            for (int r = 0; r < n_rows; r++) {
                const bool nonfinite = r % 7 == 3 || r % 11 == 5 || r % 13 == 6;
                CHECKF(nonfinite ? got[r] == -1 : got[r] >= 0 && got[r] < V,
                       "V %d row %d: id %d (%s)", V, r, got[r],
                       nonfinite ? "a non-finite row must give -1" : "out of range");
                if (got[r] != ref[r]) {
                    bad++;
                    fprintf(stderr, "V %d row %d (%s, %s, u %.6f): cuda %d, cpu %d\n", V, r,
                            sets[r / ROWS_PER_SET].name, r % 2 ? "ties" : "no ties",
                            rows[r].uniform, got[r], ref[r]);
                }
            }
            CHECKF(bad == 0, "V %d: %d of %d rows differ", V, bad, n_rows);
            /* the same rows again: the device sampler is deterministic */
            int32_t *again = malloc(sizeof(int32_t) * (size_t)n_rows);
            CHECK(b->sample(b, dx, ld, n_rows, V, drows, dpen, dids) == LC_OK);
            if (again && b->download(b, again, dids, sizeof(int32_t) * (size_t)n_rows) == LC_OK)
                CHECK(memcmp(again, got, sizeof(int32_t) * (size_t)n_rows) == 0);
            free(again);
            if (V == 151936) { /* time: one row and all rows, per parameter set kind */
                const int    reps = 50;
                const int    which[] = {0, 9, 5, 8}; /* greedy, defaults, top-p, temperature */
                for (int w = 0; w < 4; w++) {
                    const int r0 = which[w] * ROWS_PER_SET;
                    lc_cuda_sync();
                    double t0 = lc_time_s();
                    for (int i = 0; i < reps; i++)
                        b->sample(b, dx + (int64_t)r0 * ld, ld, 1, V, drows + r0, dpen, dids);
                    lc_cuda_sync();
                    double t1 = lc_time_s();
                    for (int i = 0; i < reps; i++)
                        b->sample(b, dx + (int64_t)r0 * ld, ld, ROWS_PER_SET, V, drows + r0, dpen, dids);
                    lc_cuda_sync();
                    double t2 = lc_time_s();
                    fprintf(stderr, "V %d %-16s: %.1f us per row (1 row), %.1f us per call (%d rows)\n",
                            V, sets[which[w]].name, (t1 - t0) / reps * 1e6, (t2 - t1) / reps * 1e6,
                            ROWS_PER_SET);
                }
            }
        }
        b->dealloc(b, dx), b->dealloc(b, drows), b->dealloc(b, dpen), b->dealloc(b, dids);
        free(x), free(rows), free(pen), free(ref), free(got);
    }
    b->free(b);
    TEST_END();
}
