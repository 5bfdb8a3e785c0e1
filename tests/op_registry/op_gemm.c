/*
 * op_gemm.c — registry entries of the CUDA weight path: dequant (weight_load of F32, F16, BF16,
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 blocks to bf16 and f16 on the GPU, and the host path of a
 * K-quant, vs lc_dequantize rounded the same way: equal, or one step apart where the GPU fused
 * q*d + m), gemm16 (f32 -> 16-bit conversion, equal to the host's rounding bit for bit, then the
 * cuBLASLt product y = x·Wᵀ) and gemv16 (the decode GEMV of 1..4 fp32 rows) vs a double
 * reference on the same 16-bit inputs. These are the CUDA helpers behind the backend's matmul
 * (cuda.h); the CPU twin of the product is the double reference here.
 */
#include "format/quant.h"
#include "op_registry.h"
#include "random_blocks.h"

#include <math.h>
#include <stdlib.h>

/* ---- dequant: n = {GGUF type, output type}; 37 rows of 512 ---- */

#define DEQ(t) {#t " -> bf16", {LC_TYPE_##t, LC_TYPE_BF16}, false}, {#t " -> f16", {LC_TYPE_##t, LC_TYPE_F16}, false}
static const op_shape dequant_shapes[] = {DEQ(F32),  DEQ(F16),  DEQ(BF16), DEQ(Q8_0), DEQ(Q4_0),
                                          DEQ(Q4_1), DEQ(Q5_0), DEQ(Q5_1), DEQ(Q6_K)};

typedef struct deq_state {
    uint32_t  type, out;
    int64_t   n;
    uint8_t  *raw;
    float    *ref;
    uint16_t *got;
    lc_gguf_tensor t;
    lc_weight w;
    bool      loaded;
} deq_state;

static void deq_free(op_env *e, void *state) {
    deq_state *s = state;
    if (!s) return;
    if (s->loaded) e->dev->weight_free(e->dev, &s->w);
    free(s->raw), free(s->ref), free(s->got), free(s);
}

static int deq_make(op_env *e, const op_shape *sh, void **state) {
    deq_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->type = (uint32_t)sh->n[0], s->out = (uint32_t)sh->n[1];
    const int64_t rows = 37, cols = 512;
    uint64_t      row_bytes;
    if (!lc_type_row_bytes(s->type, (uint64_t)cols, &row_bytes)) return LC_ERR_INTERNAL;
    s->n = rows * cols;
    s->raw = malloc((size_t)(row_bytes * rows)), s->ref = malloc(sizeof(float) * (size_t)s->n);
    s->got = malloc(2 * (size_t)s->n);
    if (!s->raw || !s->ref || !s->got) return LC_ERR_NOMEM;
    test_random_blocks(&e->rng, s->type, s->raw, s->n);
    s->t = (lc_gguf_tensor){"test", 2, {(uint64_t)cols, (uint64_t)rows, 1, 1}, s->type, 0,
                            row_bytes * rows, s->raw};
    return lc_dequantize(s->type, s->raw, s->ref, s->n);
}

static int deq_reset(op_env *e, void *state) {
    deq_state *s = state;
    if (s->loaded) e->dev->weight_free(e->dev, &s->w), s->loaded = false;
    return LC_OK;
}

static int deq_run(op_env *e, void *state) { /* the weight loader's dequantisation */
    deq_state *s = state;
    if (s->loaded) e->dev->weight_free(e->dev, &s->w), s->loaded = false;
    e->dev->weight_type = s->out;
    const int rc        = e->dev->weight_load(e->dev, &s->t, &s->w);
    s->loaded           = rc == LC_OK;
    return rc;
}

static int deq_compare(op_env *e, void *state, op_result *r) {
    deq_state *s = state;
    const bool bf = s->out == LC_TYPE_BF16;
    if (s->w.type != s->out) return LC_ERR_INTERNAL;
    const int rc = e->dev->download(e->dev, s->got, s->w.data, 2 * (size_t)s->n);
    if (rc != LC_OK) return rc;
    for (int64_t i = 0; i < s->n; i++) {
        const float g  = bf ? lc_bf16_to_fp32(s->got[i]) : lc_fp16_to_fp32(s->got[i]);
        const float rf = bf ? lc_bf16_to_fp32(lc_fp32_to_bf16(s->ref[i])) : lc_fp16_to_fp32(lc_fp32_to_fp16(s->ref[i]));
        /* equal after rounding, or one step apart where the GPU fused q*d + m */
        if (!(g == rf || fabsf(g - rf) <= fabsf(rf) * (bf ? 1.0f / 128.0f : 1.0f / 1024.0f))) r->bad++;
    }
    r->hash = op_hash(OP_HASH_START, s->got, 2 * (size_t)s->n);
    return LC_OK;
}

const op_entry op_dequant = {"dequant", "weight_load of 37 x 512 GGUF blocks to bf16 / f16 vs "
                             "lc_dequantize rounded the same way (one step where q*d + m fused)",
                             dequant_shapes, OP_N_SHAPES(dequant_shapes), 0, true, deq_make,
                             deq_reset, deq_run, deq_compare, deq_free, NULL};

/* ---- gemm16 and gemv16: n = {16-bit type, m outputs, k inputs, n rows} ---- */

#define GEMM_N(ty, tn, M, K)                                                                  \
    {tn " m" #M " k" #K " n1", {ty, M, K, 1}, false}, {tn " m" #M " k" #K " n63", {ty, M, K, 63}, false}, \
    {tn " m" #M " k" #K " n65", {ty, M, K, 65}, false}
#define GEMM_N4(ty, tn, M, K) GEMM_N(ty, tn, M, K), {tn " m" #M " k" #K " n4097", {ty, M, K, 4097}, false}
/* (no 4097 rows at 4096 x 1024: keeps the double reference quick) */
#define GEMM_T(ty, tn)                                                                        \
    GEMM_N4(ty, tn, 576, 576), GEMM_N4(ty, tn, 1536, 576), GEMM_N4(ty, tn, 576, 1536),          \
    GEMM_N(ty, tn, 4096, 1024)
static const op_shape gemm_shapes[] = {GEMM_T(LC_TYPE_BF16, "bf16"), GEMM_T(LC_TYPE_F16, "f16")};

#define GEMV_N(ty, tn, M, K)                                                                  \
    {tn " m" #M " k" #K " n1", {ty, M, K, 1}, false}, {tn " m" #M " k" #K " n2", {ty, M, K, 2}, false}, \
    {tn " m" #M " k" #K " n3", {ty, M, K, 3}, false}, {tn " m" #M " k" #K " n4", {ty, M, K, 4}, false}
#define GEMV_T(ty, tn)                                                                        \
    GEMV_N(ty, tn, 577, 576), GEMV_N(ty, tn, 1536, 72), GEMV_N(ty, tn, 576, 1536),             \
    GEMV_N(ty, tn, 4096, 4104), GEMV_N(ty, tn, 1024, 14336)
static const op_shape gemv_shapes[] = {GEMV_T(LC_TYPE_BF16, "bf16"), GEMV_T(LC_TYPE_F16, "f16"),
                                       {"f16 m14336 k4096 n1", {LC_TYPE_F16, 14336, 4096, 1}, true}};

typedef struct prod_state {
    uint32_t      ty;
    bool          gemv;
    int64_t       m, k, n;
    uint16_t     *wb, *xb, *xg; /* weights, the host-rounded input, the device-converted input */
    float        *x, *y;        /* x: fp32 input (gemm16: then the rounded values) */
    void         *dw, *dxb;
    float        *dx, *dy;
    lc_cuda_gemm *g;
} prod_state;

static void prod_free(op_env *e, void *state) {
    prod_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dw), b->dealloc(b, s->dxb), b->dealloc(b, s->dx), b->dealloc(b, s->dy);
    if (s->g) lc_cuda_gemm_free(s->g);
    free(s->wb), free(s->xb), free(s->xg), free(s->x), free(s->y), free(s);
}

static int prod_make(op_env *e, const op_shape *sh, bool gemv, void **state) {
    prod_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->ty = (uint32_t)sh->n[0], s->m = sh->n[1], s->k = sh->n[2], s->n = sh->n[3], s->gemv = gemv;
    const bool bf = s->ty == LC_TYPE_BF16;
    s->wb = malloc(2 * (size_t)(s->m * s->k)), s->xb = malloc(2 * (size_t)(s->n * s->k));
    s->xg = malloc(2 * (size_t)(s->n * s->k));
    s->x = malloc(sizeof(float) * (size_t)(s->n * s->k)), s->y = malloc(sizeof(float) * (size_t)(s->n * s->m));
    if (!s->wb || !s->xb || !s->xg || !s->x || !s->y) return LC_ERR_NOMEM;
    for (int64_t i = 0; i < s->m * s->k; i++)
        s->wb[i] = bf ? lc_fp32_to_bf16(test_frand(&e->rng)) : lc_fp32_to_fp16(test_frand(&e->rng));
    for (int64_t i = 0; i < s->n * s->k; i++) {
        s->x[i]  = 4.0f * test_frand(&e->rng);
        s->xb[i] = bf ? lc_fp32_to_bf16(s->x[i]) : lc_fp32_to_fp16(s->x[i]);
    }
    lc_backend *b = e->dev;
    s->dw = op_to_device(b, s->wb, 2 * (size_t)(s->m * s->k), "w");
    s->dx = op_to_device(b, s->x, sizeof(float) * (size_t)(s->n * s->k), "x");
    s->dy = b->alloc(b, sizeof(float) * (size_t)(s->n * s->m), "y");
    if (!s->dw || !s->dx || !s->dy) return LC_ERR_NOMEM;
    if (gemv) { /* the GEMV reads the fp32 rows: the reference multiplies them as they are */
        CHECKF(lc_cuda_gemv_fits(s->k, s->n, s->dw, s->dx), "gemv16 m%lld k%lld n%lld: does not fit",
               (long long)s->m, (long long)s->k, (long long)s->n);
        return LC_OK;
    }
    /* the GEMM multiplies the rounded inputs: so does the reference */
    for (int64_t i = 0; i < s->n * s->k; i++) s->x[i] = bf ? lc_bf16_to_fp32(s->xb[i]) : lc_fp16_to_fp32(s->xb[i]);
    s->dxb = b->alloc(b, 2 * (size_t)(s->n * s->k), "xb");
    if (!s->dxb) return LC_ERR_NOMEM;
    return lc_cuda_gemm_create(&s->g);
}

static int gemm_make(op_env *e, const op_shape *sh, void **st) { return prod_make(e, sh, false, st); }
static int gemv_make(op_env *e, const op_shape *sh, void **st) {
    /* the GEMV's limits: k a multiple of 8 and at most LC_CUDA_GEMV_MAX_ROWS rows */
    CHECK(!lc_cuda_gemv_fits(1001, 1, NULL, NULL) && !lc_cuda_gemv_fits(1024, 5, NULL, NULL));
    return prod_make(e, sh, true, st);
}

static int prod_reset(op_env *e, void *state) {
    prod_state *s = state;
    return op_fill_device(e->dev, s->dy, 0xff, sizeof(float) * (size_t)(s->n * s->m));
}

static int prod_run(op_env *e, void *state) {
    prod_state *s = state;
    (void)e;
    if (s->gemv) return lc_cuda_gemv16(s->ty, s->dw, s->m, s->k, s->dx, s->n, s->dy);
    const int rc = lc_cuda_f32_to_16(s->dx, s->ty, s->dxb, s->n * s->k);
    return rc == LC_OK ? lc_cuda_gemm16(s->g, s->ty, s->dw, s->m, s->k, s->dxb, s->n, s->dy, s->m) : rc;
}

/* NMSE of y against x · Wᵀ in double; gemm16: the converted input must equal the host's. */
static int prod_compare(op_env *e, void *state, op_result *r) {
    prod_state *s  = state;
    const bool  bf = s->ty == LC_TYPE_BF16;
    int         rc = e->dev->download(e->dev, s->y, s->dy, sizeof(float) * (size_t)(s->n * s->m));
    if (rc == LC_OK && !s->gemv) {
        rc = e->dev->download(e->dev, s->xg, s->dxb, 2 * (size_t)(s->n * s->k));
        if (rc == LC_OK && memcmp(s->xg, s->xb, 2 * (size_t)(s->n * s->k)) != 0) {
            r->bad++;
            fprintf(stderr, "  f32 -> %s conversion differs from the host's\n", bf ? "bf16" : "f16");
        }
    }
    if (rc != LC_OK) return rc;
    double num = 0, den = 0;
    for (int64_t row = 0; row < s->n; row++)
        for (int64_t o = 0; o < s->m; o++) {
            double acc = 0;
            for (int64_t i = 0; i < s->k; i++)
                acc += (double)s->x[row * s->k + i] *
                       (bf ? lc_bf16_to_fp32(s->wb[o * s->k + i]) : lc_fp16_to_fp32(s->wb[o * s->k + i]));
            const float gv = s->y[row * s->m + o];
            if (!isfinite(gv)) r->nonfinite++;
            num += (acc - gv) * (acc - gv), den += acc * acc;
        }
    r->err  = num / den;
    r->hash = op_hash(OP_HASH_START, s->y, sizeof(float) * (size_t)(s->n * s->m));
    return LC_OK;
}

const op_entry op_gemm16 = {"gemm16", "f32 -> bf16/f16 conversion (bit for bit), cuBLASLt y = x·Wᵀ "
                            "vs a double reference on the rounded inputs",
                            gemm_shapes, OP_N_SHAPES(gemm_shapes), 1e-10, false, gemm_make,
                            prod_reset, prod_run, prod_compare, prod_free, NULL};
const op_entry op_gemv16 = {"gemv16", "decode GEMV of 1..4 fp32 rows over bf16/f16 weights vs a "
                            "double reference", gemv_shapes, OP_N_SHAPES(gemv_shapes), 1e-12, true,
                            gemv_make, prod_reset, prod_run, prod_compare, prod_free, NULL};
