/*
 * op_select_blocks.c — registry entry of the HiP mask estimation (select_blocks; select_blocks.cu) against its
 * CPU twin and the double brute-force reference of select_blocks_world.h, on the same fp16 key
 * values. Both twins score in fp32 (in different orders), so a selection cut closer than ~1e-4
 * of the scores' magnitude may go either way: where the reference finds such a close cut in a
 * (block, group) pair, the GPU's blocks need only the invariants and an overlap of >= 95% with
 * the CPU twin's; every other pair must equal the CPU twin's selection exactly (and the
 * reference's). Planted-level and all-equal keys give discrete scores (exact ties broken by the
 * lower start), so there every pair must match. The shapes are case groups: the CPU test's grid
 * (head dims 64/128, GQA 9/3 and 32/8, PLAIN/RELATIVE, NORM/NEOX, partial rotary, n_groups 1
 * and n_kv_head, q_stride / k_stride 1-2, block_k 1/2/4, decode rows and 32-row blocks, NB <=
 * n_nodes, empty candidates, ragged candidate ranges); 2048 nodes with block_k 1; and (big) the
 * Llama-3.1-8B shape, random and planted keys x PLAIN / RELATIVE: decode rows at 64K with k 2048
 * / block_k 2 (8 groups and one) and 32-row prefill blocks at 16K with k 512 (GPU vs CPU only).
 * Outputs are poisoned before each run; a second run must give the same bytes.
 */
#include "select_blocks_world.h"
#include "op_registry.h"
#include "util/util.h"

static const double tol_gpu = 1e-4;
static int64_t      n_pairs_all, n_close, n_diff_blocks, n_blocks_all;

/* GPU run of x's arguments on world w; results into gout / gout_n (host). */
static int gpu_mask(lc_backend *b, const hm_world *w, const hm_args *x, lc_segment *gout, int32_t *gout_n) {
    const hm_case *cs      = &w->cs;
    const int64_t  pool    = (int64_t)w->n_pages * cs->H * cs->P * cs->D;
    const size_t   qn      = (size_t)w->rows * w->n_head * cs->D, tn = (size_t)w->n_pos * (cs->n_rot / 2) + 1;
    const int32_t  n_pairs = w->n_qb * x->a.n_groups;
    const size_t   ob = sizeof(lc_segment) * (size_t)n_pairs * x->a.out_cap, nb = sizeof(int32_t) * (size_t)n_pairs;
    void          *dk  = b->alloc(b, 2 * (size_t)pool, "k");
    float         *dq  = b->alloc(b, sizeof(float) * qn, "q");
    float         *dcs = b->alloc(b, sizeof(float) * tn, "cos"), *dsn = b->alloc(b, sizeof(float) * tn, "sin");
    lc_qblock *dqb = b->alloc(b, sizeof(lc_qblock) * (size_t)w->n_qb, "qb");
    lc_segment    *dout = b->alloc(b, ob, "out");
    int32_t       *dout_n = b->alloc(b, nb, "out_n");
    int            rc     = dk && dq && dcs && dsn && dqb && dout && dout_n ? LC_OK : LC_ERR_NOMEM;
    if (rc == LC_OK) {
        b->upload(b, dk, w->kb, 2 * (size_t)pool);
        b->upload(b, dq, w->q, sizeof(float) * qn);
        b->upload(b, dcs, w->rope.cos, sizeof(float) * (tn - 1));
        b->upload(b, dsn, w->rope.sin, sizeof(float) * (tn - 1));
        b->upload(b, dqb, w->qb, sizeof(lc_qblock) * (size_t)w->n_qb);
    }
    lc_select_blocks_args da   = x->a;
    da.out                = dout, da.out_n = dout_n;
    lc_rope_table    rope = {w->rope.n_pos, w->rope.n_rot, w->rope.pairing, dcs, dsn, w->rope.mscale};
    lc_kv_layer_view kv   = {dk, dk, cs->P, cs->H, cs->D, NULL, false, NULL};
    lc_segment      *o    = malloc(ob);
    int32_t         *on   = malloc(nb);
    for (int run = 0; run < 2 && rc == LC_OK; run++) {
        memset(o, 0xff, ob), memset(on, 0xff, nb); /* poison */
        b->upload(b, dout, o, ob);
        b->upload(b, dout_n, on, nb);
        rc = b->batch_begin(b, w->seqs, cs->n_seqs, cs->P);
        if (rc == LC_OK)
            rc = b->select_blocks(b, &kv, w->seqs, cs->n_seqs, dqb, w->n_qb, dq, w->n_head, &rope, &da);
        if (rc == LC_OK) rc = lc_cuda_sync();
        if (rc != LC_OK) break;
        b->download(b, o, dout, ob);
        b->download(b, on, dout_n, nb);
        if (run == 0) memcpy(gout, o, ob), memcpy(gout_n, on, nb);
        else {
            int same = memcmp(on, gout_n, nb) == 0;
            for (int32_t bg = 0; same && bg < n_pairs; bg++)
                same = on[bg] < 0 || on[bg] > x->a.out_cap ||
                       memcmp(o + (int64_t)bg * x->a.out_cap, gout + (int64_t)bg * x->a.out_cap,
                              sizeof(lc_segment) * (size_t)on[bg]) == 0;
            CHECKF(same, "a second GPU run differs from the first");
        }
    }
    free(o), free(on);
    b->dealloc(b, dk), b->dealloc(b, dq), b->dealloc(b, dcs), b->dealloc(b, dsn), b->dealloc(b, dqb);
    b->dealloc(b, dout), b->dealloc(b, dout_n);
    return rc;
}

/* blocks of two sorted segment lists in common */
static int32_t common_starts(const lc_segment *x, int32_t nx, const lc_segment *y, int32_t ny) {
    int32_t i = 0, j = 0, c = 0;
    while (i < nx && j < ny) {
        if (x[i].start == y[j].start) c++, i++, j++;
        else if (x[i].start < y[j].start) i++;
        else j++;
    }
    return c;
}

/* CPU twin and GPU on one case; with_ref: the reference classifies the pairs. */
static void run_case(lc_backend *b, const hm_case *cs, int32_t k, int32_t block_k, int32_t q_stride,
                     int32_t k_stride, int32_t n_groups, int with_ref) {
    hm_world w;
    hm_world_make(cs, &w);
    hm_args x;
    hm_args_make(&w, &x, k, block_k, q_stride, k_stride, n_groups);
    char what[256];
    snprintf(what, sizeof what, "D%d H%d G%d %s %s rot%d %s keys, k %d b_k %d b_sq %d b_sk %d groups %d b_q %d",
             cs->D, cs->H, cs->G, hm_mode_name[cs->mode], cs->pairing == LC_ROPE_NEOX ? "neox" : "norm",
             cs->n_rot, hm_keys_name[cs->keys], k, block_k, q_stride, k_stride, n_groups, cs->b_q);
    lc_kv_layer_view kv = {w.k, w.k, cs->P, cs->H, cs->D, NULL, false, NULL};
    const double     t0 = lc_time_s();
    const int        rc = lc_cpu_select_blocks(&kv, w.seqs, cs->n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &x.a);
    CHECKF(rc == LC_OK, "%s: CPU: %s", what, lc_last_error());
    const double  t1      = lc_time_s();
    const int32_t n_pairs = w.n_qb * n_groups;
    lc_segment   *go      = malloc(sizeof(lc_segment) * (size_t)n_pairs * x.a.out_cap);
    int32_t      *gon     = malloc(sizeof(int32_t) * (size_t)n_pairs);
    const int     grc     = gpu_mask(b, &w, &x, go, gon);
    CHECKF(grc == LC_OK, "%s: GPU: %s", what, lc_last_error());
    const double t2 = lc_time_s();
    int64_t      close = 0, diff = 0, blocks = 0;
    for (int32_t bg = 0; rc == LC_OK && grc == LC_OK && bg < n_pairs; bg++) {
        const lc_segment *co = x.out + (int64_t)bg * x.a.out_cap, *g = go + (int64_t)bg * x.a.out_cap;
        char              lbl[300];
        int               amb = cs->keys == HM_RANDOM; /* without the reference: overlap only */
        if (with_ref) {
            hm_ref ref;
            hm_reference_pair(&w, &x.a, bg, tol_gpu, &ref);
            snprintf(lbl, sizeof lbl, "%s [GPU]", what);
            hm_check_pair(&w, &x.a, bg, g, gon[bg], &ref, lbl);
            amb = ref.ambiguous;
            free(ref.blk);
        }
        CHECKF(gon[bg] == x.out_n[bg], "%s: pair %d: GPU out_n %d, CPU %d", what, bg, gon[bg], x.out_n[bg]);
        if (gon[bg] != x.out_n[bg] || gon[bg] < 0) continue;
        /* invariants of the GPU list (sorted, disjoint, inside the candidates) */
        const lc_qblock *q = &w.qb[bg / n_groups];
        for (int32_t i = 0; i < gon[bg]; i++)
            CHECKF(g[i].start >= x.a.n_sink && g[i].len >= 1 && g[i].start + g[i].len <= q->win0 &&
                       (i == 0 || g[i - 1].start + g[i - 1].len <= g[i].start),
                   "%s: pair %d: GPU segment %d [%d, +%d) outside [%d, %d) or unsorted", what, bg,
                   i, g[i].start, g[i].len, x.a.n_sink, q->win0);
        const int32_t c = common_starts(g, gon[bg], co, x.out_n[bg]);
        int           same = c == x.out_n[bg];
        for (int32_t i = 0; same && i < gon[bg]; i++) same = g[i].len == co[i].len;
        if (!amb) CHECKF(same, "%s: pair %d: GPU differs from the CPU twin (%d of %d in common)", what, bg, c, x.out_n[bg]);
        else CHECKF(c * 20 >= x.out_n[bg] * 19, "%s: pair %d: GPU overlap %d of %d with the CPU twin", what, bg, c, x.out_n[bg]);
        close += amb, diff += x.out_n[bg] - c, blocks += x.out_n[bg];
    }
    n_pairs_all += n_pairs, n_close += close, n_diff_blocks += diff, n_blocks_all += blocks;
    if (getenv("LC_TEST_VERBOSE") || !with_ref)
        printf("  %s: %d pairs, %lld close, %lld of %lld blocks differ from the CPU twin; CPU %.2fs GPU %.2fs\n",
               what, n_pairs, (long long)close, (long long)diff, (long long)blocks, t1 - t0, t2 - t1);
    free(go), free(gon);
    hm_args_free(&x);
    hm_world_free(&w);
}

static void run_grid_case(void *ctx, const hm_case *cs, int32_t k, int32_t block_k,
                          int32_t q_stride, int32_t k_stride, int32_t n_groups) {
    run_case((lc_backend *)ctx, cs, k, block_k, q_stride, k_stride, n_groups, 1);
}

/* n = {group, keys, scan mode} */
enum { HM_GRID, HM_MANY_NODES, HM_8B };
static const op_shape select_blocks_shapes[] = {
    {"grid", {HM_GRID}, false},
    {"2048 nodes, block_k 1", {HM_MANY_NODES}, false},
    {"8B random keys plain (64K decode, 16K prefill)", {HM_8B, HM_RANDOM, LC_SCAN_PLAIN}, true},
    {"8B random keys relative", {HM_8B, HM_RANDOM, LC_SCAN_RELATIVE}, true},
    {"8B planted keys plain", {HM_8B, HM_LEVELS, LC_SCAN_PLAIN}, true},
    {"8B planted keys relative", {HM_8B, HM_LEVELS, LC_SCAN_RELATIVE}, true},
};

static void select_blocks_check(op_env *e, const op_shape *sh, op_result *r) {
    lc_backend *b = e->dev;
    (void)r;
    hm_rng      = e->rng;
    n_pairs_all = n_close = n_diff_blocks = n_blocks_all = 0;
    if (sh->n[0] == HM_GRID) hm_case_grid(run_grid_case, b);
    else if (sh->n[0] == HM_MANY_NODES) { /* many nodes (2048: the largest sort), block_k 1 */
        hm_case many = {64, 2, 2, 16, 64, LC_ROPE_NEOX, 32, 16, 64, HM_LEVELS, LC_SCAN_RELATIVE, 2,
                        {9000, 5000}, {1, 40}};
        run_case(b, &many, 2048, 1, 1, 1, 2, 1);
    } else { /* the Llama-3.1-8B shape: decode rows at 64K, k 2048 / block_k 2; prefill blocks at 16K */
        const int keys = (int)sh->n[1], mode = (int)sh->n[2];
        hm_case   dec  = {128, 8, 4, 64, 128, LC_ROPE_NORM, 32, 64, 1024, keys, mode, 1, {65535}, {1}};
        if (keys == HM_LEVELS && mode == LC_SCAN_PLAIN) dec.n_rot = 64;
        run_case(b, &dec, 2048, 2, 1, 1, 8, 0);
        run_case(b, &dec, 2048, 2, 1, 1, 1, 0);
        hm_case pre = {128, 8, 4, 64, 128, LC_ROPE_NEOX, 32, 64, 1024, keys, mode, 1, {16384 - 64}, {64}};
        if (keys == HM_LEVELS && mode == LC_SCAN_PLAIN) pre.n_rot = 64;
        run_case(b, &pre, 512, 2, 2, 1, 8, 0);
        run_case(b, &pre, 512, 2, 1, 2, 1, 0);
    }
    printf("  GPU vs CPU twin: %lld pairs (%lld with a close cut), %lld of %lld selected blocks differ\n",
           (long long)n_pairs_all, (long long)n_close, (long long)n_diff_blocks, (long long)n_blocks_all);
}

const op_entry op_select_blocks = {"select_blocks", "selected key blocks vs the CPU twin (exact where the "
                              "reference finds no close cut) and the reference", select_blocks_shapes,
                              OP_N_SHAPES(select_blocks_shapes), 0, false, NULL, NULL, NULL, NULL, NULL,
                              select_blocks_check};
