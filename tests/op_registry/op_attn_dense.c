/*
 * op_attn_dense.c — registry entry of the dense paged attention (attn_dense: split-KV decode +
 * merge, tensor-core prefill — wgmma on sm_90a, mma.sync elsewhere or with prefill=mma) against
 * its CPU twin on the same fp16 K/V values: head dims 64 and 128, GQA ratios 1, 3, 4, 8, both
 * RoPE pairings, partial rotary and a YaRN table factor, key counts 1, 63, 65, 4097 and 20K /
 * 200K (big), scattered page tables, batches mixing decode rows with prefill chunks after a
 * history. The NMSE limit holds per sequence (both kernels multiply in fp16); where a decode
 * row fails, both sides are also compared with the naive reference (attention_naive.h).
 *
 * attn_dense_e4m3: the same op over pools in the fp8 layout (backend.h LC_KV_E4M3): random
 * keys around a per-(head, dim) centre of up to +-40 (as Qwen2's key bias) and values,
 * quantised on the host (lc_kv_e4m3_quantize, kv_write's twin); the CPU twin reads the values
 * the codes stand for (lc_kv_e4m3_value), so both sides see the same keys and values and the
 * NMSE limit is the fp16 one.
 */
#include "attention_naive.h"
#include "format/quant.h"
#include "model/model.h"
#include "op_registry.h"

#include <math.h>
#include <stdlib.h>

/* n = {D, kv heads H, group G, pairing, half rotary, flags, batch kind, li}: flags bit 0 a YaRN
 * table, bit 1 (e4m3) no key centres (a model without key biases); batch kinds (pos0,
 * rows per sequence; lens = 1, 63, 65, 4097):
 *   0 decode:  one row after lens[li] - 1 keys, after lens[li + 1] - 1, after 200
 *   1 prefill: lens[li] rows from empty, 70 rows after lens[li], a decode row after
 *              lens[li + 2] (this last one only where lens[li] > 1)
 *   2 mix:     a decode row after 1000, 300 rows from empty, 64 rows after 129
 *   3 long:    a decode row after 200000, 512 rows after 20000 */
enum { DENSE_DECODE, DENSE_PREFILL, DENSE_MIX, DENSE_LONG };
static const int32_t lens[4] = {1, 63, 65, 4097};

#define DENSE_LENS(D, H, G, pr, prn)                                                          \
    {"decode D" #D " H" #H " G" #G " " prn " keys 1", {D, H, G, pr, 0, 0, DENSE_DECODE, 0}, false},      \
    {"decode D" #D " H" #H " G" #G " " prn " keys 63", {D, H, G, pr, 0, 0, DENSE_DECODE, 1}, false},     \
    {"decode D" #D " H" #H " G" #G " " prn " keys 65", {D, H, G, pr, 0, 0, DENSE_DECODE, 2}, false},     \
    {"decode D" #D " H" #H " G" #G " " prn " keys 4097", {D, H, G, pr, 0, 0, DENSE_DECODE, 3}, false},   \
    {"prefill D" #D " H" #H " G" #G " " prn " rows 1", {D, H, G, pr, 0, 0, DENSE_PREFILL, 0}, false},    \
    {"prefill D" #D " H" #H " G" #G " " prn " rows 63", {D, H, G, pr, 0, 0, DENSE_PREFILL, 1}, false},   \
    {"prefill D" #D " H" #H " G" #G " " prn " rows 65", {D, H, G, pr, 0, 0, DENSE_PREFILL, 2}, false},   \
    {"prefill D" #D " H" #H " G" #G " " prn " rows 4097", {D, H, G, pr, 0, 0, DENSE_PREFILL, 3}, false}
#define DENSE_GQA(D, pr, prn)                                                                 \
    DENSE_LENS(D, 4, 1, pr, prn), DENSE_LENS(D, 3, 3, pr, prn), DENSE_LENS(D, 8, 4, pr, prn),  \
    DENSE_LENS(D, 2, 8, pr, prn)
#define DENSE_EXTRA(D)                                                                        \
    {"partial-rotary D" #D " H2 G4 norm", {D, 2, 4, LC_ROPE_NORM, 1, 0, DENSE_MIX, 0}, false},  \
    {"yarn D" #D " H2 G4 norm", {D, 2, 4, LC_ROPE_NORM, 0, 1, DENSE_MIX, 0}, false},            \
    {"yarn D" #D " H2 G4 neox", {D, 2, 4, LC_ROPE_NEOX, 0, 1, DENSE_MIX, 0}, false}
static const op_shape dense_shapes[] = {
    DENSE_GQA(64, LC_ROPE_NORM, "norm"),  DENSE_GQA(64, LC_ROPE_NEOX, "neox"),
    DENSE_GQA(128, LC_ROPE_NORM, "norm"), DENSE_GQA(128, LC_ROPE_NEOX, "neox"),
    DENSE_EXTRA(64), DENSE_EXTRA(128),
    /* more than 8 query heads a KV head: the decode kernel's CTAs split them in groups of 8 */
    DENSE_LENS(128, 2, 12, LC_ROPE_NEOX, "neox"), DENSE_LENS(64, 1, 9, LC_ROPE_NORM, "norm"),
    {"long D128 H8 G4 norm (200K decode, 512 after 20K)", {128, 8, 4, LC_ROPE_NORM, 0, 0, DENSE_LONG, 0}, true},
    {"long D64 H3 G3 norm (200K decode, 512 after 20K)", {64, 3, 3, LC_ROPE_NORM, 0, 0, DENSE_LONG, 0}, true},
};

/* the e4m3 entry's shapes: both head dims and pairings, GQA 1 / 4 / 8, every batch kind */
#define E8_LENS(D, H, G, pr, prn)                                                              \
    {"e4m3 decode D" #D " H" #H " G" #G " " prn " keys 65", {D, H, G, pr, 0, 0, DENSE_DECODE, 2}, false},  \
    {"e4m3 decode D" #D " H" #H " G" #G " " prn " keys 4097", {D, H, G, pr, 0, 0, DENSE_DECODE, 3}, false},\
    {"e4m3 prefill D" #D " H" #H " G" #G " " prn " rows 63", {D, H, G, pr, 0, 0, DENSE_PREFILL, 1}, false},\
    {"e4m3 mix D" #D " H" #H " G" #G " " prn, {D, H, G, pr, 0, 0, DENSE_MIX, 0}, false}
static const op_shape e8_shapes[] = {
    E8_LENS(64, 4, 1, LC_ROPE_NORM, "norm"),   E8_LENS(64, 2, 8, LC_ROPE_NEOX, "neox"),
    E8_LENS(128, 2, 4, LC_ROPE_NORM, "norm"),  E8_LENS(128, 2, 6, LC_ROPE_NEOX, "neox"),
    E8_LENS(128, 8, 1, LC_ROPE_NEOX, "neox"),
    {"e4m3 partial-rotary D128 H2 G4 norm", {128, 2, 4, LC_ROPE_NORM, 1, 0, DENSE_MIX, 0}, false},
    {"e4m3 long D128 H2 G6 neox (200K decode, 512 after 20K)", {128, 2, 6, LC_ROPE_NEOX, 0, 0, DENSE_LONG, 0}, true},
    /* no key centres (Llama, SmolLM2: the decode kernel's other shared-memory plan) */
    {"e4m3 no centres decode D128 H8 G4 norm keys 1", {128, 8, 4, LC_ROPE_NORM, 0, 2, DENSE_DECODE, 0}, false},
    {"e4m3 no centres decode D128 H8 G4 norm keys 4097", {128, 8, 4, LC_ROPE_NORM, 0, 2, DENSE_DECODE, 3}, false},
    {"e4m3 no centres decode D64 H3 G3 norm keys 63", {64, 3, 3, LC_ROPE_NORM, 0, 2, DENSE_DECODE, 1}, false},
    {"e4m3 no centres decode D128 H2 G6 neox keys 65", {128, 2, 6, LC_ROPE_NEOX, 0, 2, DENSE_DECODE, 2}, false},
    {"e4m3 no centres mix D128 H2 G4 partial-rotary yarn norm", {128, 2, 4, LC_ROPE_NORM, 1, 3, DENSE_MIX, 0}, false},
    {"e4m3 no centres long D128 H8 G4 norm (200K decode, 512 after 20K)", {128, 8, 4, LC_ROPE_NORM, 0, 2, DENSE_LONG, 0}, true},
    /* more than 8 query heads a KV head */
    {"e4m3 decode D128 H2 G12 neox keys 4097", {128, 2, 12, LC_ROPE_NEOX, 0, 0, DENSE_DECODE, 3}, false},
    {"e4m3 no centres decode D64 H1 G9 norm keys 65", {64, 1, 9, LC_ROPE_NORM, 0, 2, DENSE_DECODE, 2}, false},
};

typedef struct dense_state {
    bool             e8;   /* the fp8 layout: dk, dv hold slabs, dcen the key centres */
    bool             nocen; /* e8 without key centres (dcen passed as NULL) */
    float           *cen;  /* [H][D] host key centres (e8) */
    unsigned char   *k8, *v8;
    void            *dcen;
    int32_t          D, H, G, n_head, n_rot, n_seqs, max_k, n_pages;
    int64_t          pool, qn;
    lc_rope_table    ht;
    float           *kc, *vc, *q, *ref, *got, *dq, *dout, *dcs, *dsn;
    uint16_t        *kb, *vb;
    void            *dk, *dv;
    int32_t         *perm;
    lc_attn_seq      seqs[3];
    lc_kv_layer_view hv;
} dense_state;

static void dense_free(op_env *e, void *state) {
    dense_state *s = state;
    if (!s) return;
    lc_backend *b = e->dev;
    b->dealloc(b, s->dk), b->dealloc(b, s->dv), b->dealloc(b, s->dq), b->dealloc(b, s->dout);
    b->dealloc(b, s->dcs), b->dealloc(b, s->dsn), b->dealloc(b, s->dcen);
    free(s->cen), free(s->k8), free(s->v8);
    free(s->ht.cos), free(s->ht.sin), free(s->kc), free(s->vc), free(s->kb), free(s->vb);
    free(s->perm), free(s->q), free(s->ref), free(s->got), free(s);
}

static int dense_make_any(op_env *e, const op_shape *sh, void **state, bool e8) {
    dense_state *s = calloc(1, sizeof *s);
    if (!s) return LC_ERR_NOMEM;
    *state = s;
    s->e8 = e8;
    s->D = (int32_t)sh->n[0], s->H = (int32_t)sh->n[1], s->G = (int32_t)sh->n[2];
    const lc_rope_pairing pairing = (lc_rope_pairing)sh->n[3];
    const int32_t         li      = (int32_t)sh->n[7], P = 64;
    const bool            yarn    = (sh->n[5] & 1) != 0;
    s->nocen                      = e8 && (sh->n[5] & 2) != 0;
    s->n_head = s->H * s->G, s->n_rot = sh->n[4] ? s->D / 2 : s->D;
    int32_t cs[3][2]; /* pos0, rows */
    switch (sh->n[6]) {
    case DENSE_DECODE:
        s->n_seqs = 3;
        cs[0][0] = lens[li] - 1, cs[1][0] = lens[(li + 1) % 4] - 1, cs[2][0] = 200;
        cs[0][1] = cs[1][1] = cs[2][1] = 1;
        break;
    case DENSE_PREFILL:
        s->n_seqs = lens[li] > 1 ? 3 : 2;
        cs[0][0] = 0, cs[0][1] = lens[li], cs[1][0] = lens[li], cs[1][1] = 70;
        cs[2][0] = lens[(li + 2) % 4], cs[2][1] = 1;
        break;
    case DENSE_MIX:
        s->n_seqs = 3;
        cs[0][0] = 1000, cs[0][1] = 1, cs[1][0] = 0, cs[1][1] = 300, cs[2][0] = 129, cs[2][1] = 64;
        break;
    default:
        s->n_seqs = 2;
        cs[0][0] = 200000, cs[0][1] = 1, cs[1][0] = 20000, cs[1][1] = 512;
        break;
    }
    int32_t rows = 0, total_pages = 0;
    s->max_k = 1;
    for (int32_t i = 0; i < s->n_seqs; i++) {
        rows += cs[i][1];
        const int32_t k = cs[i][0] + cs[i][1];
        if (k > s->max_k) s->max_k = k;
        total_pages += (k + P - 1) / P;
    }
    s->n_pages = total_pages + 3;
    /* RoPE table */
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = s->n_rot, hp.rope_base = 10000.0f, hp.rope_pairing = pairing;
    if (yarn) {
        hp.rope_scaling = LC_ROPE_SCALING_YARN, hp.rope_factor = 4.0f, hp.rope_orig_ctx = 2048;
        hp.yarn_ext_factor = 1.0f, hp.yarn_attn_factor = 1.0f, hp.yarn_beta_fast = 32.0f;
        hp.yarn_beta_slow = 1.0f;
    }
    const size_t tb = sizeof(float) * (size_t)s->max_k * (size_t)(s->n_rot / 2);
    s->ht = (lc_rope_table){s->max_k, s->n_rot, pairing, malloc(tb), malloc(tb), (float)lc_rope_mscale(&hp)};
    /* pools: fp16 values; the CPU twin gets the same values as fp32 */
    s->pool = (int64_t)s->n_pages * s->H * P * s->D;
    s->kc = malloc(sizeof(float) * (size_t)s->pool), s->vc = malloc(sizeof(float) * (size_t)s->pool);
    s->kb = malloc(2 * (size_t)s->pool), s->vb = malloc(2 * (size_t)s->pool);
    s->perm = malloc(sizeof(int32_t) * (size_t)s->n_pages);
    s->qn = (int64_t)rows * s->n_head * s->D;
    s->q = malloc(sizeof(float) * (size_t)s->qn), s->ref = malloc(sizeof(float) * (size_t)s->qn);
    s->got = malloc(sizeof(float) * (size_t)s->qn);
    if (!s->ht.cos || !s->ht.sin || !s->kc || !s->vc || !s->kb || !s->vb || !s->perm || !s->q ||
        !s->ref || !s->got)
        return LC_ERR_NOMEM;
    int rc = lc_rope_table_fill(&hp, NULL, s->max_k, s->ht.cos, s->ht.sin);
    if (rc != LC_OK) return rc;
    const size_t sb = lc_kv_slab_bytes(true, LC_TYPE_F16, P, s->D), slabs = (size_t)s->n_pages * (size_t)s->H;
    if (e8) {
        /* slabs of codes and scales; the CPU twin's pools the values they stand for */
        s->cen = malloc(sizeof(float) * (size_t)(s->H * s->D));
        if (!s->cen) return LC_ERR_NOMEM;
        for (int32_t i = 0; i < s->H * s->D; i++) s->cen[i] = s->nocen ? 0.0f : 40.0f * test_frand(&e->rng);
        for (int64_t i = 0; i < s->pool; i++)
            s->kc[i] = 2.0f * test_frand(&e->rng), s->vc[i] = test_frand(&e->rng);
        s->k8 = op_e8_slabs(s->kc, slabs, s->H, P, s->D, s->nocen ? NULL : s->cen); /* keys offset by the centres */
        s->v8 = op_e8_slabs(s->vc, slabs, s->H, P, s->D, NULL);
        if (!s->k8 || !s->v8) return LC_ERR_NOMEM;
    } else {
        for (int64_t i = 0; i < s->pool; i++) {
            s->kb[i] = lc_fp32_to_fp16(2.0f * test_frand(&e->rng)), s->vb[i] = lc_fp32_to_fp16(test_frand(&e->rng));
            s->kc[i] = lc_fp16_to_fp32(s->kb[i]), s->vc[i] = lc_fp16_to_fp32(s->vb[i]);
        }
    }
    /* scattered page tables: a random permutation of the pool */
    for (int32_t i = 0; i < s->n_pages; i++) s->perm[i] = i;
    for (int32_t i = s->n_pages - 1; i > 0; i--) {
        const int32_t j = (int32_t)test_irand(&e->rng, (uint32_t)i + 1), t = s->perm[i];
        s->perm[i] = s->perm[j], s->perm[j] = t;
    }
    int32_t row = 0, pg = 0;
    for (int32_t i = 0; i < s->n_seqs; i++) {
        s->seqs[i] = (lc_attn_seq){row, cs[i][1], cs[i][0], s->perm + pg, 0};
        row += cs[i][1];
        pg += (cs[i][0] + cs[i][1] + P - 1) / P;
    }
    for (int64_t i = 0; i < s->qn; i++) s->q[i] = test_frand(&e->rng);
    s->hv = (lc_kv_layer_view){s->kc, s->vc, P, s->H, s->D, NULL, false, NULL};
    rc    = e->cpu->attn_dense(e->cpu, &s->hv, s->seqs, s->n_seqs, s->q, s->n_head, &s->ht,
                               1.0f / sqrtf((float)s->D), s->ref);
    if (rc != LC_OK) return rc;
    lc_backend *b = e->dev;
    if (e8) {
        s->dk   = op_to_device(b, s->k8, slabs * sb, "k slabs"), s->dv = op_to_device(b, s->v8, slabs * sb, "v slabs");
        s->dcen = op_to_device(b, s->cen, sizeof(float) * (size_t)(s->H * s->D), "key centres");
        if (!s->dcen) return LC_ERR_NOMEM;
    } else {
        s->dk = op_to_device(b, s->kb, 2 * (size_t)s->pool, "k"), s->dv = op_to_device(b, s->vb, 2 * (size_t)s->pool, "v");
    }
    s->dq = op_to_device(b, s->q, sizeof(float) * (size_t)s->qn, "q");
    s->dout = b->alloc(b, sizeof(float) * (size_t)s->qn, "out");
    s->dcs = op_to_device(b, s->ht.cos, tb, "cos"), s->dsn = op_to_device(b, s->ht.sin, tb, "sin");
    return s->dk && s->dv && s->dq && s->dout && s->dcs && s->dsn ? LC_OK : LC_ERR_NOMEM;
}

static int dense_make(op_env *e, const op_shape *sh, void **state) {
    return dense_make_any(e, sh, state, false);
}
static int dense_make_e8(op_env *e, const op_shape *sh, void **state) {
    return dense_make_any(e, sh, state, true);
}

static int dense_reset(op_env *e, void *state) {
    dense_state *s  = state;
    const int    rc = op_fill_device(e->dev, s->dout, 0xff, sizeof(float) * (size_t)s->qn);
    return rc == LC_OK ? e->dev->batch_begin(e->dev, s->seqs, s->n_seqs, 64) : rc;
}

static int dense_run(op_env *e, void *state) {
    dense_state     *s  = state;
    lc_rope_table    dt = {s->max_k, s->n_rot, s->ht.pairing, s->dcs, s->dsn, s->ht.mscale};
    lc_kv_layer_view dv = {s->dk, s->dv, 64, s->H, s->D, NULL, s->e8, s->e8 && !s->nocen ? s->dcen : NULL};
    return e->dev->attn_dense(e->dev, &dv, s->seqs, s->n_seqs, s->dq, s->n_head, &dt,
                              1.0f / sqrtf((float)s->D), s->dout);
}

/* The worst sequence's NMSE; a failing decode row is also compared with the naive reference. */
static int dense_compare(op_env *e, void *state, op_result *r) {
    dense_state *s  = state;
    const int    rc = e->dev->download(e->dev, s->got, s->dout, sizeof(float) * (size_t)s->qn);
    if (rc != LC_OK) return rc;
    r->hash = op_hash(OP_HASH_START, s->got, sizeof(float) * (size_t)s->qn);
    for (int32_t i = 0; i < s->n_seqs; i++) {
        const lc_attn_seq *q   = &s->seqs[i];
        const int64_t      off = (int64_t)q->row0 * s->n_head * s->D, n = (int64_t)q->n_rows * s->n_head * s->D;
        int64_t            nf;
        const double       err = test_nmse(s->ref + off, s->got + off, (size_t)n, &nf);
        r->err = err > r->err ? err : r->err, r->nonfinite += nf;
        if ((nf || !(err < 1e-4)) && q->n_rows == 1) { /* which side is off */
            float *nv = malloc(sizeof(float) * (size_t)(s->n_head * s->D));
            for (int32_t qh = 0; nv && qh < s->n_head; qh++)
                naive(&s->hv, q->page_table, q->pos0 + 1, s->q + off + (int64_t)qh * s->D, qh / s->G,
                      &s->ht, 1.0f / sqrtf((float)s->D), nv + (int64_t)qh * s->D);
            if (nv)
                fprintf(stderr, "  sequence %d (history %d): naive reference vs GPU nmse %.3g, vs "
                        "CPU twin nmse %.3g\n", i, q->pos0,
                        test_nmse(nv, s->got + off, (size_t)n, NULL), test_nmse(nv, s->ref + off, (size_t)n, NULL));
            free(nv);
        }
    }
    return LC_OK;
}

const op_entry op_attn_dense = {"attn_dense", "causal attention of a batch over scattered fp16 "
                                "pages vs the CPU twin on the same values, per sequence",
                                dense_shapes, OP_N_SHAPES(dense_shapes), 1e-4, true, dense_make,
                                dense_reset, dense_run, dense_compare, dense_free, NULL};

const op_entry op_attn_dense_e4m3 = {"attn_dense_e4m3", "causal attention of a batch over scattered "
                                     "pages in the fp8 layout vs the CPU twin on the values the "
                                     "codes stand for, per sequence",
                                     e8_shapes, OP_N_SHAPES(e8_shapes), 1e-4, true, dense_make_e8,
                                     dense_reset, dense_run, dense_compare, dense_free, NULL};
