/*
 * op_attn_segments.c — registry entry of the block-sparse attention (attn_segments; attn_segments.cu:
 * decode split kernel + merge for calls of 1-row blocks, the list kernel + tensor-core prefill
 * over gathered key tiles for the others — the wgmma kernel on sm_90a) against its CPU twin on
 * the same fp16 K/V values, over the worlds of attn_segments_world.h: scattered page tables,
 * several sequences per call, decode blocks and prefill blocks up to 64 rows in one call, the
 * three attn_rope modes, n_groups 1 and n_kv_head, head dims 64 and 128, GQA 1/3/4/8/16, both
 * pairings, partial rotary with a YaRN factor, empty selections, odd-length segments, positions
 * before n_sink, rows in no block (must stay untouched), decode lists cut into many splits; full
 * coverage compared with the CPU dense attention; (big) the Llama-3.1-8B shape at 128K keys:
 * 256 sink + 256 random 8-token segments + 1024 window, a decode call and a call with a decode
 * row and a 64-row prefill block. Each case group runs as launched, then a reduced list with
 * the tuning sparse_prefill_mma and sparse_decode_prefill (the mma.sync kernel, decode calls
 * through it too), and with rotate_keys on (plain RoPE from keys and values rotated into fp16
 * tiles before the call), and through a slab map (the slot cache's, kv/slab_bank.h: about half
 * the slabs moved to other pages, NaN left at home). NMSE < 1e-5 per block; outputs poisoned
 * (NaN) before each run; a second run must give the same bits. The fp8 paths ("fp8 KV: ...")
 * run the case lists over pools in the fp8 layout (backend.h LC_KV_E4M3): the world's keys (offset
 * by a random centre per KV head and dim) and values quantised on the host
 * (lc_kv_e4m3_quantize, kv_write's twin), the CPU twin given the values the codes stand for
 * (lc_kv_e4m3_value), so both sides attend over the same numbers: as launched, through the
 * mma.sync prefill and with rotated tiles.
 */
#include "attn_segments_world.h"
#include "op_registry.h"

#include <math.h>

static double worst_dec, worst_pre, worst_dense;

static bool g_slab_map; /* read K/V through a slab map (lc_kv_layer_view.slab_map) */

/* The fp8 layout (g_e8): the world's slabs of codes and scales, its key centres [H][D] */
static bool           g_e8;
static unsigned char *g_k8, *g_v8;
static float         *g_cen;

/* Quantise w's pools into g_k8 / g_v8 (keys centred on g_cen, offset by it first) and replace
 * w's keys and values by what the codes stand for. */
static void e8_quantise(world *w) {
    const tcase *c     = &w->c;
    const size_t slabs = (size_t)w->n_pages * (size_t)c->H;
    g_cen              = malloc(sizeof(float) * (size_t)(c->H * c->D));
    CHECK(g_cen != NULL);
    if (!g_cen) return;
    for (int32_t i = 0; i < c->H * c->D; i++) g_cen[i] = 8.0f * test_frand(&rng);
    g_k8 = op_e8_slabs(w->k, slabs, c->H, c->P, c->D, g_cen);
    g_v8 = op_e8_slabs(w->v, slabs, c->H, c->P, c->D, NULL);
    CHECK(g_k8 && g_v8);
}
static void e8_free(void) {
    free(g_k8), free(g_v8), free(g_cen);
    g_k8 = g_v8 = NULL, g_cen = NULL;
}

/* The GPU op on w's inputs into got (poisoned first). With g_slab_map the pools have twice the
 * pages and about half the slabs (page x H + head) are moved to the upper half, a NaN left at
 * home, the map pointing at the copy: the op must read every key and value through the map. */
static int gpu_run(lc_backend *b, const world *w, float scale, float *got) {
    const tcase  *c     = &w->c;
    const int64_t pool  = (int64_t)w->n_pages * c->H * c->P * c->D;
    const int64_t slabs = (int64_t)w->n_pages * c->H, se = (int64_t)c->P * c->D;
    const int64_t alloc = g_slab_map ? 2 * pool : pool;
    const int64_t qn    = (int64_t)w->rows * w->n_head * c->D;
    const size_t  half  = (size_t)c->n_rot / 2;
    uint16_t     *kb = malloc(2 * alloc), *vb = malloc(2 * alloc);
    int32_t      *map = g_slab_map ? malloc(sizeof(int32_t) * 2 * slabs) : NULL;
    for (int64_t i = 0; i < pool; i++) kb[i] = lc_fp32_to_fp16(w->k[i]), vb[i] = lc_fp32_to_fp16(w->v[i]);
    if (map) {
        memset(kb + pool, 0xff, 2 * pool), memset(vb + pool, 0xff, 2 * pool); /* NaN */
        for (int64_t sl = 0; sl < 2 * slabs; sl++) map[sl] = (int32_t)sl;
        for (int64_t sl = 0; sl < slabs; sl++) {
            if ((((uint64_t)sl * 2654435761u) >> 7 & 1) == 0) continue; /* stays home */
            const int64_t to = slabs + (slabs - 1 - sl);
            memcpy(kb + to * se, kb + sl * se, 2 * se), memcpy(vb + to * se, vb + sl * se, 2 * se);
            memset(kb + sl * se, 0xff, 2 * se), memset(vb + sl * se, 0xff, 2 * se);
            map[sl] = (int32_t)to;
        }
    }
    int32_t *dmap = map ? op_to_device(b, map, sizeof(int32_t) * 2 * slabs, "slab map") : NULL;
    const size_t sb8 = lc_kv_slab_bytes(true, LC_TYPE_F16, c->P, c->D);
    const size_t pool_bytes = g_e8 ? (size_t)slabs * sb8 : 2 * (size_t)alloc;
    void  *dk = b->alloc(b, pool_bytes, "k"), *dv = b->alloc(b, pool_bytes, "v");
    float *dcen = g_e8 ? op_to_device(b, g_cen, sizeof(float) * (size_t)(c->H * c->D), "key centres") : NULL;
    float *dq = b->alloc(b, sizeof(float) * qn, "q"), *dout = b->alloc(b, sizeof(float) * qn, "out");
    float *dcs = b->alloc(b, sizeof(float) * w->max_pos * half, "cos");
    float *dsn = b->alloc(b, sizeof(float) * w->max_pos * half, "sin");
    const size_t sel_bytes = sizeof(lc_segment) * (size_t)w->n_qb * c->n_groups * w->sel_cap;
    lc_qblock *dqb  = b->alloc(b, sizeof(lc_qblock) * w->n_qb, "qb");
    lc_segment    *dsel = b->alloc(b, sel_bytes, "sel");
    int32_t       *dseln = b->alloc(b, sizeof(int32_t) * w->n_qb * c->n_groups, "sel_n");
    int            st   = LC_ERR_NOMEM;
    if (dk && dv && dq && dout && dcs && dsn && dqb && dsel && dseln && (dmap || !map) && (dcen || !g_e8)) {
        b->upload(b, dk, g_e8 ? (const void *)g_k8 : kb, pool_bytes);
        b->upload(b, dv, g_e8 ? (const void *)g_v8 : vb, pool_bytes);
        b->upload(b, dq, w->q, sizeof(float) * qn);
        b->upload(b, dcs, w->rope.cos, sizeof(float) * w->max_pos * half);
        b->upload(b, dsn, w->rope.sin, sizeof(float) * w->max_pos * half);
        b->upload(b, dqb, w->qb, sizeof(lc_qblock) * w->n_qb);
        b->upload(b, dsel, w->sel, sel_bytes);
        b->upload(b, dseln, w->sel_n, sizeof(int32_t) * w->n_qb * c->n_groups);
        memset(got, 0xff, sizeof(float) * qn); /* poison: NaN */
        b->upload(b, dout, got, sizeof(float) * qn);
        lc_rope_table      dt  = {w->max_pos, c->n_rot, c->pairing, dcs, dsn, w->rope.mscale};
        lc_kv_layer_view   dkv = {dk, dv, c->P, c->H, c->D, dmap, g_e8, dcen};
        lc_attn_segments_args da  = w->a;
        lc_rotated_keys    rk  = {0}; /* the caller's rotated keys (with tuning.rotate_keys) */
        da.sel = dsel, da.sel_n = dseln, da.rot = &rk;
        st = b->batch_begin(b, w->seqs, w->n_seqs, c->P);
        if (st == LC_OK)
            st = b->attn_segments(b, &dkv, w->seqs, w->n_seqs, dqb, w->n_qb, dq, w->n_head, &dt, scale,
                                &da, dout);
        if (st == LC_OK) st = lc_cuda_sync();
        lc_rotated_keys_release(b, &rk);
        if (st == LC_OK) st = b->download(b, got, dout, sizeof(float) * qn);
    }
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dout);
    b->dealloc(b, dcs), b->dealloc(b, dsn), b->dealloc(b, dqb), b->dealloc(b, dsel), b->dealloc(b, dseln);
    if (dmap) b->dealloc(b, dmap);
    if (dcen) b->dealloc(b, dcen);
    free(kb), free(vb), free(map);
    return st;
}

static const char *g_path = ""; /* prefix of failure messages: the prefill kernel forced */

static void run_case(lc_backend *b, const char *what_, const tcase *c, const tseq *ts,
                     int32_t n_seqs) {
    char tag[64];
    snprintf(tag, sizeof tag, "%s%s", g_path, what_);
    const char *what = tag;
    world       w;
    build(&w, c, ts, n_seqs);
    if (g_e8) e8_quantise(&w);
    const int32_t D     = c->D;
    const float   scale = 1.0f / sqrtf((float)D);
    const int64_t qn    = (int64_t)w.rows * w.n_head * D;
    float        *ref = malloc(sizeof(float) * qn), *got = malloc(sizeof(float) * qn);
    float        *again = malloc(sizeof(float) * qn);
    CHECK(lc_cpu_attn_segments(&w.kv, w.seqs, w.n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope, scale,
                             &w.a, ref) == LC_OK);
    int st = gpu_run(b, &w, scale, got);
    CHECKF(st == LC_OK, "%s: %s", what, lc_last_error());
    if (st == LC_OK) {
        st = gpu_run(b, &w, scale, again);
        CHECKF(st == LC_OK && memcmp(again, got, sizeof(float) * qn) == 0,
               "%s D%d H%d G%d: a second run differs from the first", what, D, c->H, c->G);
    }
    float *dense = NULL;
    if (c->sel_mode == SEL_FULL) {
        dense = malloc(sizeof(float) * qn);
        CHECK(lc_cpu_attn_dense(&w.kv, w.seqs, w.n_seqs, w.q, w.n_head, &w.rope, scale, dense) == LC_OK);
    }
    for (int32_t bi = 0; bi < w.n_qb && st == LC_OK; bi++) {
        const int64_t off = (int64_t)w.qb[bi].row0 * w.n_head * D, n = (int64_t)w.qb[bi].n_rows * w.n_head * D;
        int64_t       nf;
        const double  e     = test_nmse(ref + off, got + off, (size_t)n, &nf);
        const bool    dec   = w.qb[bi].n_rows == 1;
        double       *worst = dec ? &worst_dec : &worst_pre;
        if (e > *worst) *worst = e;
        CHECKF(nf == 0 && e < 1e-5, "%s D%d H%d G%d P%d groups %d rope %s %s rot %d%s sel %d: block "
               "%d (pos0 %d, rows %d, win0 %d): nmse %.3g vs the CPU twin, %lld non-finite", what, D,
               c->H, c->G, c->P, c->n_groups, rope_name(c->attn_rope),
               c->pairing == LC_ROPE_NEOX ? "neox" : "norm", c->n_rot, c->yarn ? " yarn" : "",
               c->sel_mode, bi, w.qb[bi].pos0, w.qb[bi].n_rows, w.qb[bi].win0, e, (long long)nf);
        if (dense) {
            const double ed = test_nmse(dense + off, got + off, (size_t)n, &nf);
            if (ed > worst_dense) worst_dense = ed;
            CHECKF(nf == 0 && ed < 1e-5, "%s D%d H%d G%d rope %s: full selection vs dense "
                   "attention: block %d (pos0 %d, rows %d): nmse %.3g", what, D, c->H, c->G,
                   rope_name(c->attn_rope), bi, w.qb[bi].pos0, w.qb[bi].n_rows, ed);
        }
    }
    for (int32_t row = 0; row < w.rows && st == LC_OK; row++)
        if (!row_covered(&w, row)) {
            const unsigned char *p = (const unsigned char *)(got + (int64_t)row * w.n_head * D);
            bool                 untouched = true;
            for (size_t i = 0; i < sizeof(float) * w.n_head * D; i++) untouched &= p[i] == 0xff;
            CHECKF(untouched, "%s: row %d is in no block but was written", what, row);
        }
    free(ref), free(got), free(again), free(dense);
    world_free(&w);
    e8_free();
}

/* The case list, part 0: the grid (one head dim: only_dim), 1: partial rotary / no sink /
 * all-window, 2: long; pass 1 (mma.sync prefill, decode calls through it; rotated tiles) runs a
 * reduced list. */
static void run_cases(lc_backend *b, bool small, int32_t only_dim, int pass, int part) {
    const int32_t dims[] = {64, 128}, gqa[][2] = {{3, 1}, {2, 3}, {2, 4}, {1, 8}, {1, 16}};
    /* one call: a decode row late, a prefill chunk after a history (a 64-row block and a
     * 36-row one), a sequence starting before n_sink, a decode row before n_sink, a chunk with
     * rows left out of every block */
    const tseq mix[] = {{700, 1, 0, 0}, {300, 100, 0, 0}, {3, 20, 0, 0}, {10, 1, 0, 0},
                        {150, 90, 10, 40}};
    const tseq dec[] = {{3000, 1, 0, 0}, {77, 1, 0, 0}, {0, 1, 0, 0}, {1500, 1, 0, 0}};
    for (int di = 0; di < 2 && part == 0; di++)
        for (int gi = 0; gi < 5; gi++)
            for (int rope = 0; rope < 3; rope++) /* plain, streaming, gaps */
                for (int grp = 0; grp < 2; grp++) {
                    if ((small || pass) && (gi % 2 != grp || rope % 2 != di)) continue;
                    if (only_dim && only_dim != dims[di]) continue;
                    const int32_t H = gqa[gi][0], G = gqa[gi][1], D = dims[di];
                    const lc_rope_pairing pr = (gi + rope) % 2 ? LC_ROPE_NEOX : LC_ROPE_NORM;
                    const int modes[] = {SEL_RANDOM, SEL_FULL, SEL_MIXED};
                    for (int mi = 0; mi < 3; mi++) {
                        tcase c = {D, H, G, (gi % 2) ? 64 : 16, grp ? H : 1, rope, 16, 64, 64,
                                   modes[mi], pr, D, false, 0};
                        run_case(b, "mix", &c, mix, 5);
                    }
                    tcase c = {D, H, G, 16, grp ? H : 1, rope, 16, 256, 1, SEL_MIXED, pr, D, false, 0};
                    run_case(b, "decode", &c, dec, 4); /* decode only (lists over many splits) */
                    c.sel_mode = SEL_FULL;
                    run_case(b, "decode-full", &c, dec, 4);
                    c.bq = 7, c.sel_mode = SEL_RANDOM, c.n_stream = 64; /* smaller query blocks */
                    run_case(b, "bq7", &c, mix, 5);
                }
    /* partial rotary with a YaRN factor; n_sink 0; a window longer than the history */
    for (int rope = 0; rope < 3 && part == 1; rope++) {
        const tseq mix2[] = {{500, 70, 0, 0}, {90, 1, 0, 0}};
        const tseq dec2[] = {{500, 1, 0, 0}, {90, 1, 0, 0}, {2, 1, 0, 0}};
        const int  modes[] = {SEL_RANDOM, SEL_FULL, SEL_MIXED};
        for (int mi = 0; mi < 3; mi++) {
            tcase c = {128, 2, 4, 64, 2, rope, 16, 64, 64, modes[mi], LC_ROPE_NORM, 64, true, 0};
            run_case(b, "partial-yarn", &c, mix2, 2);
            run_case(b, "partial-yarn-decode", &c, dec2, 3);
            tcase c0 = {64, 2, 2, 16, 1, rope, 0, 48, 32, modes[mi], LC_ROPE_NEOX, 64, false, 0};
            run_case(b, "no-sink", &c0, mix2, 2);
            run_case(b, "no-sink-decode", &c0, dec2, 3);
            tcase cl = {64, 2, 2, 16, 1, rope, 4, 4096, 32, modes[mi], LC_ROPE_NORM, 64, false, 0};
            run_case(b, "all-window", &cl, mix2, 2);
            run_case(b, "all-window-decode", &cl, dec2, 3);
        }
    }
    /* long: the 8B shape at 128K keys, InfiniteHiP's sizes (256 sink, 256 x 8 selected, 1024
     * window); a decode call, and a decode row with a 64-row prefill block in one call; pages
     * aliased into 512 physical ones */
    if (part == 2 && !small) {
        const tseq lng[] = {{131071, 1, 0, 0}, {131008, 64, 0, 0}};
        for (int rope = 0; rope < 3; rope++)
            for (int grp = 0; grp < 2; grp++) {
                if (pass && grp != rope % 2) continue;
                tcase c = {128, 8, 4, 64, grp ? 8 : 1, rope, 256, 1024, 64, SEL_LONG, LC_ROPE_NORM,
                           128, false, 512};
                run_case(b, "long-decode", &c, lng, 1);
                run_case(b, "long", &c, lng, 2);
            }
    }
}

/* n = {kernel path, part, head dim (0: both)} */
enum { SP_AS_LAUNCHED, SP_MMA, SP_ROTATED, SP_SLAB_MAP, SP_E8, SP_E8_MMA, SP_E8_ROTATED };
#define SPARSE_PATH(p, pn)                                                                    \
    {pn "grid D64", {p, 0, 64}, false}, {pn "grid D128", {p, 0, 128}, false},                  \
    {pn "partial rotary + yarn, no sink, all window", {p, 1, 0}, false},                      \
    {pn "long: 8B shape at 128K keys", {p, 2, 0}, true}
static const op_shape attn_segments_shapes[] = {SPARSE_PATH(SP_AS_LAUNCHED, ""),
                                              SPARSE_PATH(SP_MMA, "mma.sync prefill: "),
                                              SPARSE_PATH(SP_ROTATED, "rotated tiles: "),
                                              SPARSE_PATH(SP_SLAB_MAP, "through a slab map: "),
                                              SPARSE_PATH(SP_E8, "fp8 KV: "),
                                              SPARSE_PATH(SP_E8_MMA, "fp8 KV, mma.sync prefill: "),
                                              SPARSE_PATH(SP_E8_ROTATED, "fp8 KV, rotated tiles: ")};

static void attn_segments_check(op_env *e, const op_shape *sh, op_result *r) {
    lc_backend *b    = e->dev;
    const int   path0 = (int)sh->n[0];
    rng              = e->rng;
    worst_dec = worst_pre = worst_dense = 0;
    g_path = "";
    g_e8   = path0 >= SP_E8;
    /* the fp8 paths as their fp16 counterparts */
    const int path = path0 == SP_E8 ? SP_AS_LAUNCHED : path0 == SP_E8_MMA ? SP_MMA
                     : path0 == SP_E8_ROTATED ? SP_ROTATED : path0;
    if (path == SP_MMA) {
        b->tuning.sparse_prefill_mma = true, b->tuning.sparse_decode_prefill = true;
        g_path = g_e8 ? "fp8 KV, mma.sync prefill: " : "mma.sync prefill: ";
    } else if (path == SP_ROTATED) {
        b->tuning.rotate_keys = LC_TUNE_ON;
        g_path = g_e8 ? "fp8 KV, rotated tiles: " : "rotated tiles: ";
    } else if (path == SP_SLAB_MAP) {
        /* (rotated tiles are built from the pages in place, which the contract allows: a copy
         * holds its slab's bytes; here home holds NaN, so the tiles are off) */
        b->tuning.rotate_keys = LC_TUNE_OFF;
        g_slab_map            = true;
        g_path                = "through a slab map: ";
    }
    if (path0 == SP_E8) g_path = "fp8 KV: ";
    run_cases(b, e->small, (int32_t)sh->n[2], path != SP_AS_LAUNCHED, (int)sh->n[1]);
    b->tuning  = e->tuning;
    g_slab_map = false, g_e8 = false;
    r->err    = fmax(worst_dec, worst_pre);
    printf("  largest nmse vs the CPU twin: decode %.3g, prefill %.3g; full selection vs dense %.3g\n",
           worst_dec, worst_pre, worst_dense);
}

const op_entry op_attn_segments = {"attn_segments", "block-sparse attention over sink + selected "
                                 "segments + window vs the CPU twin (and dense where the selection "
                                 "is full), per block", attn_segments_shapes,
                                 OP_N_SHAPES(attn_segments_shapes), 1e-5, false, NULL, NULL, NULL,
                                 NULL, NULL, attn_segments_check};
