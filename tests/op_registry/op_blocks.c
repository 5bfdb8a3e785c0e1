/*
 * op_blocks.c — registry entries of the CUDA products over weights kept in their GGUF block type
 * (weight_type LC_WEIGHT_NATIVE; cuda/weights_blocks.cu), against the CPU twin: the CPU
 * backend's matmul and embed over the same blocks (its native path, the exact weights).
 *   matmul_blocks: the decode GEMV, 1..4 fp32 rows, fp32 sums of the exact weights (NMSE
 *     1e-10); m not a multiple of the 4 rows a warp owns (nor, m37, of the 16 rows a block of
 *     the Q4_K tensor-core kernel owns), k an odd number of blocks (k768: 3 super-blocks, so one
 *     of that kernel's 4 warps has none and adds zeros to the reduction);
 *   matmul_blocks_gemm: prompt-sized products (and, with tuning.no_gemv, small ones): rows
 *     dequantised to f16 slices and cuBLASLt on f16 inputs (NMSE 1e-5: two 11-bit roundings),
 *     one shape past the 64M-element slice so that the output is written in two column slices;
 *   embed_blocks: the token table looked up by dequantising rows, bit for bit, with ids outside
 *     the table giving zeros.
 * Shapes n = {type, m outputs, k inputs, n rows}; NaN-poisoned outputs.
 */
#include "format/quant.h"
#include "op_registry.h"
#include "random_blocks.h"

#include <math.h>
#include <stdlib.h>

#define KB(t) ((t) == LC_TYPE_Q4_K || (t) == LC_TYPE_Q5_K || (t) == LC_TYPE_Q6_K)

#define GEMV_T(t, name)                                                                        \
    {name " m37 k odd n1", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 1}, false},         \
    {name " m37 k odd n3", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 3}, false},         \
    {name " m37 k odd n4", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 4}, false},         \
    {name " m1536 k4096 n1", {LC_TYPE_##t, 1536, 4096, 1}, false},                            \
    {name " m5 k14336 n2", {LC_TYPE_##t, 5, 14336, 2}, false}
static const op_shape gemv_shapes[] = {GEMV_T(Q4_0, "q4_0"), GEMV_T(Q4_1, "q4_1"), GEMV_T(Q5_0, "q5_0"),
                                       GEMV_T(Q5_1, "q5_1"), GEMV_T(Q8_0, "q8_0"), GEMV_T(Q4_K, "q4_K"),
                                       GEMV_T(Q5_K, "q5_K"), GEMV_T(Q6_K, "q6_K"),
                                       /* the Llama-3.1-8B shapes (perf mode's rows) */
                                       {"q4_K m14336 k4096 n1", {LC_TYPE_Q4_K, 14336, 4096, 1}, true},
                                       {"q4_K m4096 k4096 n1", {LC_TYPE_Q4_K, 4096, 4096, 1}, true},
                                       {"q6_K m4096 k14336 n1", {LC_TYPE_Q6_K, 4096, 14336, 1}, true},
                                       {"q4_0 m14336 k4096 n1", {LC_TYPE_Q4_0, 14336, 4096, 1}, true},
                                       {"q8_0 m14336 k4096 n1", {LC_TYPE_Q8_0, 14336, 4096, 1}, true},
                                       {"q4_K m14336 k4096 n4", {LC_TYPE_Q4_K, 14336, 4096, 4}, true}};

/* n[4] = 1: tuning.no_gemv (a 2-row product through the GEMM path) */
#define GEMM_T(t, name)                                                                        \
    {name " m37 k odd n5", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 5}, false},         \
    {name " m37 k odd n17", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 17}, false},       \
    {name " m300 k1024 n77", {LC_TYPE_##t, 300, 1024, 77}, false},                            \
    {name " m37 k odd n2 no_gemv", {LC_TYPE_##t, 37, KB(LC_TYPE_##t) ? 768 : 544, 2, 1}, false}
static const op_shape gemm_shapes[] = {GEMM_T(Q4_0, "q4_0"), GEMM_T(Q4_1, "q4_1"), GEMM_T(Q5_0, "q5_0"),
                                       GEMM_T(Q5_1, "q5_1"), GEMM_T(Q8_0, "q8_0"), GEMM_T(Q4_K, "q4_K"),
                                       GEMM_T(Q5_K, "q5_K"), GEMM_T(Q6_K, "q6_K"),
                                       /* 70000 x 1024 = 71.7M elements: two slices */
                                       {"q4_K m70000 k1024 n17 (two slices)", {LC_TYPE_Q4_K, 70000, 1024, 17}, true},
                                       {"q4_K m14336 k4096 n5", {LC_TYPE_Q4_K, 14336, 4096, 5}, true},
                                       {"q4_K m14336 k4096 n17", {LC_TYPE_Q4_K, 14336, 4096, 17}, true}};

static const op_shape embed_shapes[] = {
    {"q4_0 v300 d544", {LC_TYPE_Q4_0, 300, 544, 0}, false}, {"q4_1 v300 d544", {LC_TYPE_Q4_1, 300, 544, 0}, false},
    {"q5_0 v300 d544", {LC_TYPE_Q5_0, 300, 544, 0}, false}, {"q5_1 v300 d544", {LC_TYPE_Q5_1, 300, 544, 0}, false},
    {"q8_0 v300 d544", {LC_TYPE_Q8_0, 300, 544, 0}, false}, {"q4_K v300 d768", {LC_TYPE_Q4_K, 300, 768, 0}, false},
    {"q5_K v300 d768", {LC_TYPE_Q5_K, 300, 768, 0}, false}, {"q6_K v300 d768", {LC_TYPE_Q6_K, 300, 768, 0}, false}};

typedef struct blk_state {
    uint32_t       type;
    int64_t        m, k, n;
    bool           no_gemv, embed;
    uint8_t       *raw;
    lc_gguf_tensor t;
    lc_weight      wd, wc; /* device and CPU copies */
    bool           ld, lc;
    float         *x, *ref, *got;
    int32_t       *ids;
    void          *dx, *dy, *dids;
} blk_state;

static void blk_free(op_env *e, void *state) {
    blk_state *s = state;
    if (!s) return;
    if (s->ld) e->dev->weight_free(e->dev, &s->wd);
    if (s->lc) e->cpu->weight_free(e->cpu, &s->wc);
    e->dev->dealloc(e->dev, s->dx), e->dev->dealloc(e->dev, s->dy), e->dev->dealloc(e->dev, s->dids);
    free(s->raw), free(s->x), free(s->ref), free(s->got), free(s->ids), free(s);
}

static int blk_make_as(op_env *e, const op_shape *sh, bool embed, void **state) {
    blk_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state   = s;
    s->type  = (uint32_t)sh->n[0], s->m = sh->n[1], s->k = sh->n[2], s->n = sh->n[3];
    s->no_gemv = sh->n[4] == 1, s->embed = embed;
    if (embed) s->n = 9; /* ids: 7 in the table, -1 and m outside it */
    uint64_t row_bytes;
    if (!lc_type_row_bytes(s->type, (uint64_t)s->k, &row_bytes)) return LC_ERR_INTERNAL;
    s->raw = malloc((size_t)(row_bytes * (uint64_t)s->m));
    s->x   = malloc(sizeof(float) * (size_t)(s->n * s->k));
    const size_t out = (size_t)s->n * (size_t)(embed ? s->k : s->m);
    s->ref = malloc(sizeof(float) * out), s->got = malloc(sizeof(float) * out);
    s->ids = malloc(sizeof(int32_t) * (size_t)s->n);
    if (!s->raw || !s->x || !s->ref || !s->got || !s->ids) return LC_ERR_NOMEM;
    test_random_blocks(&e->rng, s->type, s->raw, s->m * s->k);
    for (int64_t i = 0; i < s->n * s->k; i++) s->x[i] = 2.0f * test_frand(&e->rng);
    for (int64_t i = 0; i < s->n; i++) s->ids[i] = (int32_t)test_irand(&e->rng, (uint32_t)s->m);
    if (embed) s->ids[3] = -1, s->ids[6] = (int32_t)s->m;
    s->t = (lc_gguf_tensor){"test", 2, {(uint64_t)s->k, (uint64_t)s->m, 1, 1}, s->type, 0,
                            row_bytes * (uint64_t)s->m, s->raw};
    /* both backends hold the blocks as they are */
    const uint32_t dev_wt = e->dev->weight_type, cpu_wt = e->cpu->weight_type;
    e->dev->weight_type = e->cpu->weight_type = LC_WEIGHT_NATIVE;
    int rc = e->dev->weight_load(e->dev, &s->t, &s->wd);
    s->ld  = rc == LC_OK;
    if (rc == LC_OK) rc = e->cpu->weight_load(e->cpu, &s->t, &s->wc);
    s->lc = s->ld && rc == LC_OK;
    e->dev->weight_type = dev_wt, e->cpu->weight_type = cpu_wt;
    if (rc != LC_OK) return rc;
    CHECKF(s->wd.type == s->type, "%s: the GPU holds type %u, not the file's %u", sh->label, s->wd.type, s->type);
    /* the CPU twin */
    if (embed) { /* (the CPU's embed refuses ids outside the table; the GPU's gives zeros) */
        for (int64_t i = 0; i < s->n && rc == LC_OK; i++) {
            if (s->ids[i] >= 0 && s->ids[i] < s->m) rc = e->cpu->embed(e->cpu, &s->wc, s->ids + i, 1, s->ref + i * s->k);
            else
                for (int64_t c = 0; c < s->k; c++) s->ref[i * s->k + c] = 0.0f;
        }
    } else {
        rc = e->cpu->matmul(e->cpu, &s->wc, s->x, s->ref, s->n);
    }
    if (rc != LC_OK) return rc;
    s->dx   = op_to_device(e->dev, s->x, sizeof(float) * (size_t)(s->n * s->k), "x");
    s->dids = op_to_device(e->dev, s->ids, sizeof(int32_t) * (size_t)s->n, "ids");
    s->dy   = e->dev->alloc(e->dev, sizeof(float) * out, "y");
    return s->dx && s->dids && s->dy ? LC_OK : LC_ERR_NOMEM;
}
static int blk_make(op_env *e, const op_shape *sh, void **st) { return blk_make_as(e, sh, false, st); }
static int emb_make(op_env *e, const op_shape *sh, void **st) { return blk_make_as(e, sh, true, st); }

static size_t blk_out(const blk_state *s) { return (size_t)s->n * (size_t)(s->embed ? s->k : s->m); }

static int blk_reset(op_env *e, void *state) {
    blk_state *s = state;
    return op_fill_device(e->dev, s->dy, 0xff, sizeof(float) * blk_out(s));
}

static int blk_run(op_env *e, void *state) {
    blk_state *s = state;
    if (s->embed) return e->dev->embed(e->dev, &s->wd, s->dids, s->n, s->dy);
    e->dev->tuning.no_gemv = s->no_gemv;
    const int rc = e->dev->matmul(e->dev, &s->wd, s->dx, s->dy, s->n);
    e->dev->tuning.no_gemv = e->tuning.no_gemv;
    return rc;
}

static int blk_compare(op_env *e, void *state, op_result *r) {
    blk_state *s = state;
    const int  rc = op_compare_floats(e->dev, s->ref, s->dy, s->got, blk_out(s), r);
    if (rc == LC_OK && s->embed)
        for (size_t i = 0; i < blk_out(s); i++) r->bad += memcmp(&s->ref[i], &s->got[i], 4) != 0;
    return rc;
}

const op_entry op_matmul_blocks = {"matmul_blocks", "decode GEMV over GGUF blocks (1..4 fp32 rows) vs the "
                                   "CPU backend's native matmul", gemv_shapes, OP_N_SHAPES(gemv_shapes),
                                   1e-10, true, blk_make, blk_reset, blk_run, blk_compare, blk_free, NULL};
const op_entry op_matmul_blocks_gemm = {"matmul_blocks_gemm", "GGUF blocks dequantised to f16 slices + cuBLASLt "
                                        "vs the CPU backend's native matmul", gemm_shapes,
                                        OP_N_SHAPES(gemm_shapes), 1e-5, true, blk_make, blk_reset, blk_run,
                                        blk_compare, blk_free, NULL};
const op_entry op_embed_blocks = {"embed_blocks", "token rows of a GGUF block table, bit for bit with the CPU's "
                                  "(ids outside the table: zeros)", embed_shapes, OP_N_SHAPES(embed_shapes), 0,
                                  true, emb_make, blk_reset, blk_run, blk_compare, blk_free, NULL};
