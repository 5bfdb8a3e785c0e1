/*
 * op_sample.c — registry entry of the device sampler (sample) against its CPU twin: 14
 * parameter sets x 8 rows (greedy, top-k 1 / 40 / clamped 5000, top-p, min-p, temperatures,
 * combinations, repetition penalty), each row with its own uniform, over vocabularies of 1 ..
 * 151936 with a row stride a little larger than V where V is odd; half of the rows hold
 * quantised values so that many logits tie (both twins rank equal values by index, lowest
 * first); some rows hold one NaN / +inf / -inf logit (both twins draw -1). Same uniforms, same
 * ids: exact.
 */
#include "op_registry.h"

#include <math.h>
#include <stdlib.h>

static const op_shape sample_shapes[] = {
    {"vocab 1", {1}, false},         {"vocab 63", {63}, false},         {"vocab 65", {65}, false},
    {"vocab 4097", {4097}, false},   {"vocab 49152", {49152}, true},    {"vocab 151936", {151936}, true},
};

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
#define N_ROWS (N_SETS * ROWS_PER_SET)
#define N_PEN 24

typedef struct sample_state {
    int32_t        V, n_pen;
    int64_t        ld;
    float         *x, *dx;
    lc_sample_row *rows, *drows;
    int32_t       *pen, *ref, *got, *dpen, *dids;
} sample_state;

static bool nonfinite_row(int r) { return r % 7 == 3 || r % 11 == 5 || r % 13 == 6; }

/* roughly normal */
static float nrand(uint64_t *rng) {
    return (float)(test_urand(rng) + test_urand(rng) + test_urand(rng) + test_urand(rng) - 2.0) * 1.7f;
}

static void sample_free(op_env *e, void *state) {
    sample_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dx), b->dealloc(b, s->drows), b->dealloc(b, s->dpen), b->dealloc(b, s->dids);
    free(s->x), free(s->rows), free(s->pen), free(s->ref), free(s->got), free(s);
}

static int sample_make(op_env *e, const op_shape *sh, void **state) {
    sample_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    const int32_t V = s->V = (int32_t)sh->n[0];
    s->ld   = V + (V % 2); /* a row stride a little larger than V where odd */
    s->x    = malloc(sizeof(float) * (size_t)N_ROWS * (size_t)s->ld);
    s->rows = calloc((size_t)N_ROWS, sizeof *s->rows);
    s->pen  = malloc(sizeof(int32_t) * (size_t)N_ROWS * N_PEN);
    s->ref = malloc(sizeof(int32_t) * N_ROWS), s->got = malloc(sizeof(int32_t) * N_ROWS);
    if (!s->x || !s->rows || !s->pen || !s->ref || !s->got) return LC_ERR_NOMEM;
    uint64_t *rng = &e->rng;
    for (int r = 0; r < N_ROWS; r++) {
        float     *xr   = s->x + (int64_t)r * s->ld;
        const bool ties = r % 2 == 1;
        for (int64_t i = 0; i < s->ld; i++) {
            const float v = nrand(rng) * (r % 3 == 0 ? 3.0f : 1.0f);
            xr[i]         = ties ? roundf(v * 2.0f) / 2.0f : v;
        }
        /* some rows hold one non-finite logit: both twins draw nothing (id -1) */
        if (r % 7 == 3) xr[(int64_t)(test_urand(rng) * V)] = NAN;
        if (r % 11 == 5) xr[(int64_t)(test_urand(rng) * V)] = INFINITY;
        if (r % 13 == 6) xr[(int64_t)(test_urand(rng) * V)] = -INFINITY;
        const pset    *ps = &sets[r / ROWS_PER_SET];
        lc_sample_row *sr = &s->rows[r];
        sr->uniform = test_urand(rng), sr->temperature = ps->temperature, sr->top_k = ps->top_k;
        sr->top_p = ps->top_p, sr->min_p = ps->min_p, sr->repeat_penalty = ps->repeat_penalty;
        sr->pen_off = s->n_pen;
        if (ps->repeat_penalty != 1.0f) { /* distinct ids, some of them among the row's largest */
            int32_t best = 0;
            for (int32_t i = 1; i < V; i++)
                if (xr[i] > xr[best]) best = i;
            s->pen[s->n_pen + sr->pen_n++] = best;
            for (int k = 1; k < N_PEN && k < V; k++) {
                const int32_t t    = (int32_t)(test_urand(rng) * V);
                bool          seen = false;
                for (int j = 0; j < sr->pen_n; j++) seen = seen || s->pen[s->n_pen + j] == t;
                if (!seen) s->pen[s->n_pen + sr->pen_n++] = t;
            }
            s->n_pen += sr->pen_n;
        }
    }
    const int rc = e->cpu->sample(e->cpu, s->x, s->ld, N_ROWS, V, s->rows, s->pen, s->ref);
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    s->dx    = op_to_device(b, s->x, sizeof(float) * (size_t)N_ROWS * (size_t)s->ld, "logits");
    s->drows = op_to_device(b, s->rows, sizeof *s->rows * N_ROWS, "rows");
    s->dpen  = op_to_device(b, s->pen, sizeof(int32_t) * (size_t)s->n_pen, "pen");
    s->dids  = b->alloc(b, sizeof(int32_t) * N_ROWS, "ids");
    return s->dx && s->drows && s->dpen && s->dids ? LC_OK : LC_ERR_NOMEM;
}

static int sample_reset(op_env *e, void *state) { /* poison: 0x7f7f7f7f is not an id, not -1 */
    sample_state *s = state;
    return op_fill_device(e->dev, s->dids, 0x7f, sizeof(int32_t) * N_ROWS);
}

static int sample_run(op_env *e, void *state) {
    sample_state *s = state;
    return e->dev->sample(e->dev, s->dx, s->ld, N_ROWS, s->V, s->drows, s->dpen, s->dids);
}

static int sample_compare(op_env *e, void *state, op_result *r) {
    sample_state *s  = state;
    const int     rc = e->dev->download(e->dev, s->got, s->dids, sizeof(int32_t) * N_ROWS);
    if (rc != LC_OK) return rc;
    for (int row = 0; row < N_ROWS; row++) {
        const bool nf = nonfinite_row(row);
        CHECKF(nf ? s->got[row] == -1 : s->got[row] >= 0 && s->got[row] < s->V, "sample V %d row %d: id %d (%s)",
               s->V, row, s->got[row], nf ? "a non-finite row must give -1" : "out of range");
        if (s->got[row] != s->ref[row]) {
            r->bad++;
            fprintf(stderr, "  V %d row %d (%s, %s, u %.6f): cuda %d, cpu %d\n", s->V, row,
                    sets[row / ROWS_PER_SET].name, row % 2 ? "ties" : "no ties", s->rows[row].uniform,
                    s->got[row], s->ref[row]);
        }
    }
    r->hash = op_hash(OP_HASH_START, s->got, sizeof(int32_t) * N_ROWS);
    return LC_OK;
}

const op_entry op_sample = {"sample", "112 rows under 14 parameter sets, ties and non-finite "
                            "rows: the same uniforms must draw the same ids",
                            sample_shapes, OP_N_SHAPES(sample_shapes), 0, true, sample_make,
                            sample_reset, sample_run, sample_compare, sample_free, NULL};
