/*
 * op_pointwise.c — registry entries of the row-wise and element-wise ops (rmsnorm, silu_mul,
 * add, add_bias), the embedding gather, RoPE (both pairings) and the KV page write, each on the
 * CUDA backend against the CPU backend's twin: odd row counts (1, 63, 65, 4097) over model
 * widths, NMSE limits near float rounding, embed and kv_write exact (kv_write: the CUDA pools
 * hold fp16, compared with the CPU pool saturated and rounded to fp16, bit for bit).
 */
#include "format/quant.h"
#include "op_registry.h"

#include <math.h>
#include <stdlib.h>

/* ---- rmsnorm, silu_mul, add, add_bias: n = {rows, dim} ---- */

#define ROWS_BY_DIMS(R) {"rows " #R " dim 64", {R, 64}, false}, {"rows " #R " dim 576", {R, 576}, false}, \
                        {"rows " #R " dim 4096", {R, 4096}, R > 1000}
static const op_shape rows_dims[] = {ROWS_BY_DIMS(1), ROWS_BY_DIMS(63), ROWS_BY_DIMS(65), ROWS_BY_DIMS(4097)};

typedef enum { PW_RMSNORM, PW_SILU_MUL, PW_ADD, PW_ADD_BIAS } pw_op;

typedef struct pw_state {
    pw_op   op;
    int64_t R, D, N;
    float  *x, *y, *w, *ref, *got;   /* host */
    float  *dx, *dy, *dw, *dout;     /* device; add and add_bias write into dout (a copy of x) */
} pw_state;

static void pw_free(op_env *e, void *state) {
    pw_state *s = state;
    if (!s) return;
    e->dev->dealloc(e->dev, s->dx), e->dev->dealloc(e->dev, s->dy), e->dev->dealloc(e->dev, s->dw);
    e->dev->dealloc(e->dev, s->dout);
    free(s->x), free(s->y), free(s->w), free(s->ref), free(s->got), free(s);
}

static int pw_make(op_env *e, const op_shape *sh, pw_op op, void **state) {
    pw_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->op = op, s->R = sh->n[0], s->D = sh->n[1], s->N = s->R * s->D;
    const size_t nb = sizeof(float) * (size_t)s->N, db = sizeof(float) * (size_t)s->D;
    s->x = malloc(nb), s->y = malloc(nb), s->w = malloc(db), s->ref = malloc(nb), s->got = malloc(nb);
    if (!s->x || !s->y || !s->w || !s->ref || !s->got) return LC_ERR_NOMEM;
    for (int64_t i = 0; i < s->N; i++) s->x[i] = 3 * test_frand(&e->rng), s->y[i] = test_frand(&e->rng);
    for (int64_t i = 0; i < s->D; i++) s->w[i] = test_frand(&e->rng);
    lc_backend *c = e->cpu;
    int         rc;
    switch (op) {
    case PW_RMSNORM: rc = c->rmsnorm(c, s->x, s->w, s->ref, s->R, s->D, 1e-5f); break;
    case PW_SILU_MUL: rc = c->silu_mul(c, s->x, s->y, s->ref, s->N); break;
    case PW_ADD: memcpy(s->ref, s->x, nb), rc = c->add(c, s->ref, s->y, s->N); break;
    default: memcpy(s->ref, s->x, nb), rc = c->add_bias(c, s->ref, s->w, s->R, s->D); break;
    }
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    s->dx = op_to_device(b, s->x, nb, "x"), s->dy = op_to_device(b, s->y, nb, "y");
    s->dw = op_to_device(b, s->w, db, "w"), s->dout = b->alloc(b, nb, "out");
    return s->dx && s->dy && s->dw && s->dout ? LC_OK : LC_ERR_NOMEM;
}

static int pw_reset(op_env *e, void *state) {
    pw_state    *s  = state;
    const size_t nb = sizeof(float) * (size_t)s->N;
    if (s->op == PW_ADD || s->op == PW_ADD_BIAS) return e->dev->upload(e->dev, s->dout, s->x, nb);
    return op_fill_device(e->dev, s->dout, 0xff, nb);
}

static int pw_run(op_env *e, void *state) {
    pw_state   *s = state;
    lc_backend *b = e->dev;
    switch (s->op) {
    case PW_RMSNORM: return b->rmsnorm(b, s->dx, s->dw, s->dout, s->R, s->D, 1e-5f);
    case PW_SILU_MUL: return b->silu_mul(b, s->dx, s->dy, s->dout, s->N);
    case PW_ADD: return b->add(b, s->dout, s->dy, s->N);
    default: return b->add_bias(b, s->dout, s->dw, s->R, s->D);
    }
}

static int pw_compare(op_env *e, void *state, op_result *r) {
    pw_state *s = state;
    return op_compare_floats(e->dev, s->ref, s->dout, s->got, (size_t)s->N, r);
}

static int rmsnorm_make(op_env *e, const op_shape *s, void **st) { return pw_make(e, s, PW_RMSNORM, st); }
static int silu_mul_make(op_env *e, const op_shape *s, void **st) { return pw_make(e, s, PW_SILU_MUL, st); }
static int add_make(op_env *e, const op_shape *s, void **st) { return pw_make(e, s, PW_ADD, st); }
static int add_bias_make(op_env *e, const op_shape *s, void **st) { return pw_make(e, s, PW_ADD_BIAS, st); }

#define PW_ENTRY(op, what, limit)                                                             \
    const op_entry op_##op = {#op, what, rows_dims, OP_N_SHAPES(rows_dims), limit, true,     \
                              op##_make, pw_reset, pw_run, pw_compare, pw_free, NULL}
PW_ENTRY(rmsnorm, "y = x / rms(x) * w per row, eps 1e-5", 1e-10);
PW_ENTRY(silu_mul, "out = silu(gate) * up over rows x dim", 1e-10);
PW_ENTRY(add, "x += y over rows x dim", 1e-12);
PW_ENTRY(add_bias, "y[r] += bias per row", 1e-12);

/* ---- embed: n = {rows, vocab, dim}; exact ---- */

static const op_shape embed_shapes[] = {
    {"rows 1 vocab 1000 dim 576", {1, 1000, 576}, false},
    {"rows 63 vocab 1000 dim 576", {63, 1000, 576}, false},
    {"rows 65 vocab 1000 dim 576", {65, 1000, 576}, false},
    {"rows 4097 vocab 1000 dim 576", {4097, 1000, 576}, false},
};

typedef struct embed_state {
    int64_t  R, V, E;
    float   *tab, *ref, *got, *dtab, *dout;
    int32_t *ids, *dids;
} embed_state;

static void embed_free(op_env *e, void *state) {
    embed_state *s = state;
    if (!s) return;
    e->dev->dealloc(e->dev, s->dtab), e->dev->dealloc(e->dev, s->dout), e->dev->dealloc(e->dev, s->dids);
    free(s->tab), free(s->ref), free(s->got), free(s->ids), free(s);
}

static int embed_make(op_env *e, const op_shape *sh, void **state) {
    embed_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->R = sh->n[0], s->V = sh->n[1], s->E = sh->n[2];
    const size_t tb = sizeof(float) * (size_t)(s->V * s->E), ob = sizeof(float) * (size_t)(s->R * s->E);
    s->tab = malloc(tb), s->ref = malloc(ob), s->got = malloc(ob), s->ids = malloc(sizeof(int32_t) * (size_t)s->R);
    if (!s->tab || !s->ref || !s->got || !s->ids) return LC_ERR_NOMEM;
    for (int64_t i = 0; i < s->V * s->E; i++) s->tab[i] = test_frand(&e->rng);
    for (int64_t i = 0; i < s->R; i++) s->ids[i] = (int32_t)((test_frand(&e->rng) + 1.0f) * 0.5f * (s->V - 1));
    lc_weight wt = {.rows = s->V, .cols = s->E, .type = 0, .data = s->tab};
    const int rc = e->cpu->embed(e->cpu, &wt, s->ids, s->R, s->ref);
    if (rc != LC_OK) return rc;
    s->dtab = op_to_device(e->dev, s->tab, tb, "table"), s->dout = e->dev->alloc(e->dev, ob, "out");
    s->dids = op_to_device(e->dev, s->ids, sizeof(int32_t) * (size_t)s->R, "ids");
    return s->dtab && s->dout && s->dids ? LC_OK : LC_ERR_NOMEM;
}

static int embed_reset(op_env *e, void *state) {
    embed_state *s = state;
    return op_fill_device(e->dev, s->dout, 0xff, sizeof(float) * (size_t)(s->R * s->E));
}

static int embed_run(op_env *e, void *state) {
    embed_state *s  = state;
    lc_weight    dw = {.rows = s->V, .cols = s->E, .type = 0, .data = s->dtab};
    return e->dev->embed(e->dev, &dw, s->dids, s->R, s->dout);
}

static int embed_compare(op_env *e, void *state, op_result *r) {
    embed_state *s  = state;
    const size_t ob = sizeof(float) * (size_t)(s->R * s->E);
    const int    rc = e->dev->download(e->dev, s->got, s->dout, ob);
    if (rc != LC_OK) return rc;
    for (int64_t i = 0; i < s->R * s->E; i++) r->bad += memcmp(&s->ref[i], &s->got[i], sizeof(float)) != 0;
    r->hash = op_hash(OP_HASH_START, s->got, ob);
    return LC_OK;
}

const op_entry op_embed = {"embed", "out[r] = table[ids[r]] (fp32 table), bit for bit",
                           embed_shapes, OP_N_SHAPES(embed_shapes), 0, true, embed_make,
                           embed_reset, embed_run, embed_compare, embed_free, NULL};

/* ---- rope: n = {rows, heads, head_dim, pairing}; a table of 5000 random cos/sin rows ---- */

#define ROPE_ROWS_H(R, H)                                                                    \
    {"rows " #R " heads " #H " dim 64 norm", {R, H, 64, LC_ROPE_NORM}, false},                \
    {"rows " #R " heads " #H " dim 64 neox", {R, H, 64, LC_ROPE_NEOX}, false},                \
    {"rows " #R " heads " #H " dim 128 norm", {R, H, 128, LC_ROPE_NORM}, false},              \
    {"rows " #R " heads " #H " dim 128 neox", {R, H, 128, LC_ROPE_NEOX}, false}
#define ROPE_ROWS(R) ROPE_ROWS_H(R, 3), ROPE_ROWS_H(R, 8), ROPE_ROWS_H(R, 32)
static const op_shape rope_shapes[] = {ROPE_ROWS(1), ROPE_ROWS(63), ROPE_ROWS(65), ROPE_ROWS(4097)};

typedef struct rope_state {
    int64_t  R, N;
    int32_t  H, D, NP;
    int      pairing;
    float   *cs, *sn, *x, *ref, *got, *dx, *dc, *ds;
    int32_t *pos, *dpos;
} rope_state;

static void rope_free(op_env *e, void *state) {
    rope_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dx), b->dealloc(b, s->dc), b->dealloc(b, s->ds), b->dealloc(b, s->dpos);
    free(s->cs), free(s->sn), free(s->x), free(s->ref), free(s->got), free(s->pos), free(s);
}

static int rope_make(op_env *e, const op_shape *sh, void **state) {
    rope_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->R = sh->n[0], s->H = (int32_t)sh->n[1], s->D = (int32_t)sh->n[2], s->pairing = (int)sh->n[3];
    s->NP = 5000, s->N = s->R * s->H * s->D;
    const size_t tb = sizeof(float) * (size_t)s->NP * (size_t)(s->D / 2), xb = sizeof(float) * (size_t)s->N;
    s->cs = malloc(tb), s->sn = malloc(tb), s->x = malloc(xb), s->ref = malloc(xb), s->got = malloc(xb);
    s->pos = malloc(sizeof(int32_t) * (size_t)s->R);
    if (!s->cs || !s->sn || !s->x || !s->ref || !s->got || !s->pos) return LC_ERR_NOMEM;
    for (int64_t i = 0; i < (int64_t)s->NP * (s->D / 2); i++) s->cs[i] = test_frand(&e->rng), s->sn[i] = test_frand(&e->rng);
    for (int64_t i = 0; i < s->N; i++) s->x[i] = s->ref[i] = test_frand(&e->rng);
    for (int64_t i = 0; i < s->R; i++) s->pos[i] = (int32_t)((test_frand(&e->rng) + 1.0f) * 0.5f * (s->NP - 1));
    lc_rope_table ht = {s->NP, s->D, (lc_rope_pairing)s->pairing, s->cs, s->sn, 1.0f};
    const int     rc = e->cpu->rope(e->cpu, s->ref, s->pos, s->R, s->H, s->D, &ht);
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    s->dx = b->alloc(b, xb, "x"), s->dc = op_to_device(b, s->cs, tb, "cos");
    s->ds = op_to_device(b, s->sn, tb, "sin"), s->dpos = op_to_device(b, s->pos, sizeof(int32_t) * (size_t)s->R, "pos");
    return s->dx && s->dc && s->ds && s->dpos ? LC_OK : LC_ERR_NOMEM;
}

static int rope_reset(op_env *e, void *state) { /* in place: the un-rotated input again */
    rope_state *s = state;
    return e->dev->upload(e->dev, s->dx, s->x, sizeof(float) * (size_t)s->N);
}

static int rope_run(op_env *e, void *state) {
    rope_state   *s  = state;
    lc_rope_table dt = {s->NP, s->D, (lc_rope_pairing)s->pairing, s->dc, s->ds, 1.0f};
    return e->dev->rope(e->dev, s->dx, s->dpos, s->R, s->H, s->D, &dt);
}

static int rope_compare(op_env *e, void *state, op_result *r) {
    rope_state *s = state;
    return op_compare_floats(e->dev, s->ref, s->dx, s->got, (size_t)s->N, r);
}

const op_entry op_rope = {"rope", "rotate rows x heads x dim in place at random positions of a "
                          "random table, adjacent (norm) and split-half (neox) pairs",
                          rope_shapes, OP_N_SHAPES(rope_shapes), 1e-12, true, rope_make,
                          rope_reset, rope_run, rope_compare, rope_free, NULL};

/* ---- kv_write: n = {rows of sequence 0, page size, kv heads, head dim}; sequence 0 writes
 * its rows after 100 positions, sequence 1 five rows after 3, into scattered distinct pages;
 * some values past fp16's range (saturated at +-65504) ---- */

static const op_shape kv_write_shapes[] = {
    {"rows 1+5 P64 kv 3 dim 64", {1, 64, 3, 64}, false},
    {"rows 63+5 P16 kv 3 dim 128", {63, 16, 3, 128}, false},
    {"rows 65+5 P64 kv 8 dim 64", {65, 64, 8, 64}, false},
    {"rows 4097+5 P16 kv 8 dim 128", {4097, 16, 8, 128}, false},
};

typedef struct kvw_state {
    int32_t      R, P, KH, D, n_pages;
    int64_t      pool, rows;
    float       *k, *v;
    uint16_t    *want_k, *want_v, *got; /* the CPU pools as fp16 bits; a downloaded pool */
    int32_t     *pt;
    uint16_t    *dk, *dv;
    float       *dks, *dvs;
    lc_attn_seq  seqs[2]; /* host: what batch_begin announces */
} kvw_state;

static void kvw_free(op_env *e, void *state) {
    kvw_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dk), b->dealloc(b, s->dv), b->dealloc(b, s->dks), b->dealloc(b, s->dvs);
    free(s->k), free(s->v), free(s->want_k), free(s->want_v), free(s->got), free(s->pt), free(s);
}

static int kvw_make(op_env *e, const op_shape *sh, void **state) {
    kvw_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->R = (int32_t)sh->n[0], s->P = (int32_t)sh->n[1], s->KH = (int32_t)sh->n[2], s->D = (int32_t)sh->n[3];
    s->n_pages = 2 * ((s->R + 100 + s->P - 1) / s->P) + 2;
    s->pool = (int64_t)s->n_pages * s->KH * s->P * s->D, s->rows = s->R + 5;
    const int64_t KD = (int64_t)s->KH * s->D;
    float *kc = calloc((size_t)s->pool, sizeof(float)), *vc = calloc((size_t)s->pool, sizeof(float));
    s->pt = malloc(sizeof(int32_t) * (size_t)s->n_pages);
    s->k = malloc(sizeof(float) * (size_t)(s->rows * KD)), s->v = malloc(sizeof(float) * (size_t)(s->rows * KD));
    s->want_k = malloc(2 * (size_t)s->pool), s->want_v = malloc(2 * (size_t)s->pool), s->got = malloc(2 * (size_t)s->pool);
    int rc = kc && vc && s->pt && s->k && s->v && s->want_k && s->want_v && s->got ? LC_OK : LC_ERR_NOMEM;
    if (rc == LC_OK) {
        for (int32_t i = 0; i < s->n_pages; i++) s->pt[i] = s->n_pages - 1 - i; /* scattered, distinct */
        for (int64_t i = 0; i < s->rows * KD; i++) s->k[i] = test_frand(&e->rng), s->v[i] = test_frand(&e->rng);
        s->k[0] = 1e6f, s->k[1] = -65520.0f, s->v[2] = -3e9f; /* past fp16's range */
        const int32_t half = s->n_pages / 2;
        s->seqs[0] = (lc_attn_seq){0, s->R, 100, s->pt, 0};
        s->seqs[1] = (lc_attn_seq){s->R, 5, 3, s->pt + half, 0};
        lc_kv_layer_view hv = {kc, vc, s->P, s->KH, s->D, NULL, false, NULL};
        rc = e->cpu->kv_write(e->cpu, &hv, s->seqs, 2, s->k, s->v);
        for (int64_t i = 0; rc == LC_OK && i < s->pool; i++) {
            s->want_k[i] = lc_fp32_to_fp16(fmaxf(-65504.0f, fminf(65504.0f, kc[i])));
            s->want_v[i] = lc_fp32_to_fp16(fmaxf(-65504.0f, fminf(65504.0f, vc[i])));
        }
    }
    free(kc), free(vc);
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    s->dk = b->alloc(b, 2 * (size_t)s->pool, "k pool"), s->dv = b->alloc(b, 2 * (size_t)s->pool, "v pool");
    s->dks = op_to_device(b, s->k, sizeof(float) * (size_t)(s->rows * KD), "k");
    s->dvs = op_to_device(b, s->v, sizeof(float) * (size_t)(s->rows * KD), "v");
    if (!s->dk || !s->dv || !s->dks || !s->dvs) return LC_ERR_NOMEM;
    return b->batch_begin(b, s->seqs, 2, s->P); /* the page tables to the device */
}

static int kvw_reset(op_env *e, void *state) { /* pages nobody writes stay zero, as on the CPU */
    kvw_state *s  = state;
    int        rc = op_fill_device(e->dev, s->dk, 0, 2 * (size_t)s->pool);
    if (rc == LC_OK) rc = op_fill_device(e->dev, s->dv, 0, 2 * (size_t)s->pool);
    return rc == LC_OK ? e->dev->batch_begin(e->dev, s->seqs, 2, s->P) : rc;
}

static int kvw_run(op_env *e, void *state) {
    kvw_state       *s  = state;
    lc_kv_layer_view dv = {s->dk, s->dv, s->P, s->KH, s->D, NULL, false, NULL};
    return e->dev->kv_write(e->dev, &dv, s->seqs, 2, s->dks, s->dvs);
}

static int kvw_compare(op_env *e, void *state, op_result *r) {
    kvw_state   *s = state;
    const size_t pb = 2 * (size_t)s->pool;
    r->hash         = OP_HASH_START;
    for (int kv = 0; kv < 2; kv++) {
        const int rc = e->dev->download(e->dev, s->got, kv ? s->dv : s->dk, pb);
        if (rc != LC_OK) return rc;
        const uint16_t *want = kv ? s->want_v : s->want_k;
        for (int64_t i = 0; i < s->pool; i++) r->bad += s->got[i] != want[i];
        r->hash = op_hash(r->hash, s->got, pb);
    }
    return LC_OK;
}

const op_entry op_kv_write = {"kv_write", "two sequences' rows into scattered pages; fp16 pools "
                              "vs the CPU pool saturated and rounded to fp16, bit for bit",
                              kv_write_shapes, OP_N_SHAPES(kv_write_shapes), 0, true, kvw_make,
                              kvw_reset, kvw_run, kvw_compare, kvw_free, NULL};

/* ---- kv_write into the fp8 layout (backend.h LC_KV_E4M3): n = {rows of sequence 0, page
 * size, kv heads, head dim}, sequences as kv_write's; keys around a centre of up to +-40 per
 * (head, dim), some values past fp16's range, one key row equal to its centre (scale 0). The
 * slabs (codes and scales) must equal the CPU twin's bit for bit (CUDA's e4m3 conversion
 * against lc_fp32_to_e4m3), and kv_read of both (the CUDA dequantisation against
 * lc_kv_e4m3_value) agree within one fp16 rounding ---- */

static const op_shape kv_e8_shapes[] = {
    {"e4m3 rows 1+5 P64 kv 3 dim 64", {1, 64, 3, 64}, false},
    {"e4m3 rows 63+5 P16 kv 3 dim 128", {63, 16, 3, 128}, false},
    {"e4m3 rows 65+5 P64 kv 8 dim 64", {65, 64, 8, 64}, false},
    {"e4m3 rows 4097+5 P64 kv 2 dim 128", {4097, 64, 2, 128}, false},
};

typedef struct kv8_state {
    int32_t       R, P, KH, D, n_pages;
    size_t        pool_bytes;
    int64_t       rows;
    float        *k, *v, *cen, *want_k, *want_v, *got_f; /* want: CPU kv_read of sequence 0 */
    unsigned char *hk, *hv, *got;                       /* the CPU twin's pools; a download */
    int32_t      *pt;
    void         *dk, *dv, *dks, *dvs, *dcen, *dpt, *dout;
    lc_attn_seq   seqs[2];
} kv8_state;

static void kv8_free(op_env *e, void *state) {
    kv8_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dk), b->dealloc(b, s->dv), b->dealloc(b, s->dks), b->dealloc(b, s->dvs);
    b->dealloc(b, s->dcen), b->dealloc(b, s->dpt), b->dealloc(b, s->dout);
    free(s->k), free(s->v), free(s->cen), free(s->want_k), free(s->want_v), free(s->got_f);
    free(s->hk), free(s->hv), free(s->got), free(s->pt), free(s);
}

static int kv8_make(op_env *e, const op_shape *sh, void **state) {
    kv8_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->R = (int32_t)sh->n[0], s->P = (int32_t)sh->n[1], s->KH = (int32_t)sh->n[2], s->D = (int32_t)sh->n[3];
    s->n_pages    = 2 * ((s->R + 100 + s->P - 1) / s->P) + 2;
    s->pool_bytes = (size_t)s->n_pages * (size_t)s->KH * lc_kv_slab_bytes(true, LC_TYPE_F16, s->P, s->D);
    s->rows       = s->R + 5;
    const int64_t KD = (int64_t)s->KH * s->D, n0 = (int64_t)(100 + s->R) * KD; /* sequence 0 read back */
    s->pt  = malloc(sizeof(int32_t) * (size_t)s->n_pages);
    s->k   = malloc(sizeof(float) * (size_t)(s->rows * KD)), s->v = malloc(sizeof(float) * (size_t)(s->rows * KD));
    s->cen = malloc(sizeof(float) * (size_t)KD);
    s->hk  = calloc(s->pool_bytes, 1), s->hv = calloc(s->pool_bytes, 1), s->got = malloc(s->pool_bytes);
    s->want_k = malloc(sizeof(float) * (size_t)n0), s->want_v = malloc(sizeof(float) * (size_t)n0);
    s->got_f  = malloc(sizeof(float) * (size_t)n0);
    if (!s->pt || !s->k || !s->v || !s->cen || !s->hk || !s->hv || !s->got || !s->want_k || !s->want_v || !s->got_f)
        return LC_ERR_NOMEM;
    for (int32_t i = 0; i < s->n_pages; i++) s->pt[i] = s->n_pages - 1 - i;
    for (int64_t i = 0; i < KD; i++) s->cen[i] = 40.0f * test_frand(&e->rng);
    for (int64_t i = 0; i < s->rows * KD; i++)
        s->k[i] = 3.0f * test_frand(&e->rng) + s->cen[i % KD], s->v[i] = test_frand(&e->rng);
    s->k[0] = 1e6f, s->k[1] = -65520.0f, s->v[2] = -3e9f; /* past fp16's range */
    for (int64_t i = 0; i < s->D; i++) s->k[KD + i] = s->cen[i]; /* row 1, head 0: its centre */
    const int32_t half = s->n_pages / 2;
    s->seqs[0] = (lc_attn_seq){0, s->R, 100, s->pt, 0};
    s->seqs[1] = (lc_attn_seq){s->R, 5, 3, s->pt + half, 0};
    lc_kv_layer_view hv = {s->hk, s->hv, s->P, s->KH, s->D, NULL, true, s->cen};
    int rc = e->cpu->kv_write(e->cpu, &hv, s->seqs, 2, s->k, s->v);
    /* sequence 0's positions before its rows were never written: zero pages there */
    if (rc == LC_OK) rc = e->cpu->kv_read(e->cpu, &hv, s->pt, 0, 100 + s->R, LC_KV_KEYS, s->want_k);
    if (rc == LC_OK) rc = e->cpu->kv_read(e->cpu, &hv, s->pt, 0, 100 + s->R, LC_KV_VALUES, s->want_v);
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    s->dk   = b->alloc(b, s->pool_bytes, "k slabs"), s->dv = b->alloc(b, s->pool_bytes, "v slabs");
    s->dks  = op_to_device(b, s->k, sizeof(float) * (size_t)(s->rows * KD), "k");
    s->dvs  = op_to_device(b, s->v, sizeof(float) * (size_t)(s->rows * KD), "v");
    s->dcen = op_to_device(b, s->cen, sizeof(float) * (size_t)KD, "key centres");
    s->dpt  = op_to_device(b, s->pt, sizeof(int32_t) * (size_t)s->n_pages, "page table");
    s->dout = b->alloc(b, sizeof(float) * (size_t)n0, "kv_read out");
    if (!s->dk || !s->dv || !s->dks || !s->dvs || !s->dcen || !s->dpt || !s->dout) return LC_ERR_NOMEM;
    return b->batch_begin(b, s->seqs, 2, s->P);
}

static int kv8_reset(op_env *e, void *state) {
    kv8_state *s  = state;
    int        rc = op_fill_device(e->dev, s->dk, 0, s->pool_bytes);
    if (rc == LC_OK) rc = op_fill_device(e->dev, s->dv, 0, s->pool_bytes);
    return rc == LC_OK ? e->dev->batch_begin(e->dev, s->seqs, 2, s->P) : rc;
}

static int kv8_run(op_env *e, void *state) {
    kv8_state       *s  = state;
    lc_kv_layer_view dv = {s->dk, s->dv, s->P, s->KH, s->D, NULL, true, s->dcen};
    return e->dev->kv_write(e->dev, &dv, s->seqs, 2, s->dks, s->dvs);
}

static int kv8_compare(op_env *e, void *state, op_result *r) {
    kv8_state *s = state;
    r->hash      = OP_HASH_START;
    for (int kv = 0; kv < 2; kv++) {
        const int rc = e->dev->download(e->dev, s->got, kv ? s->dv : s->dk, s->pool_bytes);
        if (rc != LC_OK) return rc;
        const unsigned char *want = kv ? s->hv : s->hk;
        int64_t              bad  = 0;
        for (size_t i = 0; i < s->pool_bytes; i++) bad += s->got[i] != want[i];
        if (bad) fprintf(stderr, "  %s slabs: %lld bytes differ from the CPU twin's\n", kv ? "V" : "K", (long long)bad);
        r->bad += bad;
        r->hash = op_hash(r->hash, s->got, s->pool_bytes);
    }
    const int64_t    n  = (int64_t)(100 + s->R) * s->KH * s->D;
    lc_kv_layer_view dv = {s->dk, s->dv, s->P, s->KH, s->D, NULL, true, s->dcen};
    for (int kv = 0; kv < 2; kv++) {
        int rc = e->dev->kv_read(e->dev, &dv, s->dpt, 0, 100 + s->R, kv ? LC_KV_VALUES : LC_KV_KEYS, s->dout);
        if (rc == LC_OK) rc = e->dev->download(e->dev, s->got_f, s->dout, sizeof(float) * (size_t)n);
        if (rc != LC_OK) return rc;
        const float *want = kv ? s->want_v : s->want_k;
        int64_t      bad  = 0;
        for (int64_t i = 0; i < n; i++) /* one fp16 rounding (the host's double rounding) */
            bad += !(fabsf(s->got_f[i] - want[i]) <= ldexpf(fabsf(want[i]), -10) + 0x1p-24f);
        if (bad) fprintf(stderr, "  kv_read %s: %lld of %lld elements differ\n", kv ? "V" : "K", (long long)bad, (long long)n);
        r->bad += bad;
    }
    return LC_OK;
}

const op_entry op_kv_write_e4m3 = {"kv_write_e4m3", "two sequences' rows into scattered pages in "
                                   "the fp8 layout vs the CPU twin's slabs bit for bit; kv_read "
                                   "of both within one fp16 rounding",
                                   kv_e8_shapes, OP_N_SHAPES(kv_e8_shapes), 0, true, kv8_make,
                                   kv8_reset, kv8_run, kv8_compare, kv8_free, NULL};
