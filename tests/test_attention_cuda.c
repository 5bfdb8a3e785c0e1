/*
 * test_attention_cuda.c — the CUDA dense attention (split-KV decode + merge, tensor-core
 * prefill) against its CPU twin lc_cpu_attn_dense on the same fp16 K/V values: head dims 64
 * and 128, GQA ratios 1, 3, 4, 8, both RoPE pairings, partial rotary and a YaRN table factor,
 * key counts 1, 63, 65, 4097 and longer, scattered page tables, batches mixing decode rows with
 * prefill chunks that start after a history. Fresh random inputs each run (seed printed);
 * outputs poisoned (NaN) before each run. Arguments NAME=VALUE set the backend's tuning
 * (lc_tuning_set): ctest's test_attention_cuda_mma runs it with prefill=mma, the mma.sync
 * prefill kernel where the wgmma one would run. Skips (exit 77) where no GPU is present.
 */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "format/quant.h"
#include "model/model.h"
#include "test_util.h"
#include "attention_naive.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t rng;
static double   worst_dec, worst_pre; /* largest nmse seen, printed for calibration */
static float    frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static uint32_t irand(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static double nmse(const float *ref, const float *got, size_t n, int *nan) {
    double num = 0, den = 0;
    *nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) (*nan)++;
        const double d = (double)ref[i] - got[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

typedef struct scase {
    int32_t pos0, n_rows; /* history, new rows */
} scase;

/* One batch: the sequences' K/V (history + new rows) are already in the pools (as the forward
 * writes them before attention); compare the attention of the new rows. */
static void run_case(lc_backend *b, const char *what, int32_t D, int32_t H, int32_t G,
                     lc_rope_pairing pairing, int32_t n_rot, bool yarn, const scase *cs,
                     int32_t n_seqs, double tol_dec, double tol_pre) {
    const int32_t P = 64, n_head = H * G;
    int32_t       rows = 0, max_k = 1, total_pages = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        rows += cs[s].n_rows;
        const int32_t k = cs[s].pos0 + cs[s].n_rows;
        if (k > max_k) max_k = k;
        total_pages += (k + P - 1) / P;
    }
    const int32_t n_pages = total_pages + 3;
    /* RoPE table */
    lc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = n_rot, hp.rope_base = 10000.0f, hp.rope_pairing = pairing;
    if (yarn) {
        hp.rope_scaling = LC_ROPE_SCALING_YARN, hp.rope_factor = 4.0f, hp.rope_orig_ctx = 2048;
        hp.yarn_ext_factor = 1.0f, hp.yarn_attn_factor = 1.0f, hp.yarn_beta_fast = 32.0f;
        hp.yarn_beta_slow = 1.0f;
    }
    const size_t half = (size_t)n_rot / 2;
    lc_rope_table ht = {max_k, n_rot, pairing, malloc(sizeof(float) * max_k * half),
                        malloc(sizeof(float) * max_k * half), (float)lc_rope_mscale(&hp)};
    CHECK(lc_rope_table_fill(&hp, NULL, max_k, ht.cos, ht.sin) == LC_OK);
    /* pools: fp16 values; the CPU twin gets the same values as fp32 */
    const int64_t pool = (int64_t)n_pages * H * P * D;
    float        *kc = malloc(sizeof(float) * pool), *vc = malloc(sizeof(float) * pool);
    uint16_t     *kb = malloc(sizeof(uint16_t) * pool), *vb = malloc(sizeof(uint16_t) * pool);
    for (int64_t i = 0; i < pool; i++) {
        kb[i] = lc_fp32_to_fp16(2.0f * frand()), vb[i] = lc_fp32_to_fp16(frand());
        kc[i] = lc_fp16_to_fp32(kb[i]), vc[i] = lc_fp16_to_fp32(vb[i]);
    }
    /* scattered page tables: a random permutation of the pool */
    int32_t *perm = malloc(sizeof(int32_t) * n_pages);
    for (int32_t i = 0; i < n_pages; i++) perm[i] = i;
    for (int32_t i = n_pages - 1; i > 0; i--) {
        const int32_t j = (int32_t)irand((uint32_t)i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    lc_attn_seq *seqs = malloc(sizeof(lc_attn_seq) * n_seqs);
    int32_t      row = 0, pg = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        seqs[s] = (lc_attn_seq){row, cs[s].n_rows, cs[s].pos0, perm + pg, 0};
        row += cs[s].n_rows;
        pg += (cs[s].pos0 + cs[s].n_rows + P - 1) / P;
    }
    const int64_t qn = (int64_t)rows * n_head * D;
    float        *q = malloc(sizeof(float) * qn), *ref = malloc(sizeof(float) * qn),
          *got = malloc(sizeof(float) * qn);
    for (int64_t i = 0; i < qn; i++) q[i] = frand();
    const float      scale = 1.0f / sqrtf((float)D);
    lc_kv_layer_view hv    = {kc, vc, P, H, D};
    CHECK(lc_cpu_attn_dense(&hv, seqs, n_seqs, q, n_head, &ht, scale, ref) == LC_OK);

    /* device copies */
    void  *dk = b->alloc(b, 2 * pool, "k"), *dv = b->alloc(b, 2 * pool, "v");
    float *dq = b->alloc(b, sizeof(float) * qn, "q"), *dout = b->alloc(b, sizeof(float) * qn, "out");
    float *dcs = b->alloc(b, sizeof(float) * max_k * half, "cos"),
          *dsn = b->alloc(b, sizeof(float) * max_k * half, "sin");
    CHECK(dk && dv && dq && dout && dcs && dsn);
    b->upload(b, dk, kb, 2 * pool);
    b->upload(b, dv, vb, 2 * pool);
    b->upload(b, dq, q, sizeof(float) * qn);
    b->upload(b, dcs, ht.cos, sizeof(float) * max_k * half);
    b->upload(b, dsn, ht.sin, sizeof(float) * max_k * half);
    lc_rope_table    dt = {max_k, n_rot, pairing, dcs, dsn, ht.mscale};
    lc_kv_layer_view dv_ = {dk, dv, P, H, D};
    memset(got, 0xff, sizeof(float) * qn); /* poison: NaN */
    b->upload(b, dout, got, sizeof(float) * qn);
    CHECK(b->batch_begin(b, seqs, n_seqs, P) == LC_OK);
    int st = b->attn_dense(b, &dv_, seqs, n_seqs, dq, n_head, &dt, scale, dout);
    CHECKF(st == LC_OK, "%s: %s", what, lc_last_error());
    CHECK(lc_cuda_sync() == LC_OK);
    b->download(b, got, dout, sizeof(float) * qn);
    /* the same launch again must give the same bits (no race, no uninitialised read) */
    {
        float *again = malloc(sizeof(float) * qn);
        memset(again, 0xff, sizeof(float) * qn);
        b->upload(b, dout, again, sizeof(float) * qn);
        CHECK(b->batch_begin(b, seqs, n_seqs, P) == LC_OK);
        CHECK(b->attn_dense(b, &dv_, seqs, n_seqs, dq, n_head, &dt, scale, dout) == LC_OK);
        CHECK(lc_cuda_sync() == LC_OK);
        b->download(b, again, dout, sizeof(float) * qn);
        CHECKF(memcmp(again, got, sizeof(float) * qn) == 0, "%s D%d H%d G%d: a second run "
               "differs from the first", what, D, H, G);
        free(again);
    }
    for (int32_t s = 0; s < n_seqs; s++) {
        const int64_t off = (int64_t)seqs[s].row0 * n_head * D, n = (int64_t)seqs[s].n_rows * n_head * D;
        int           nan;
        const double  e   = nmse(ref + off, got + off, (size_t)n, &nan);
        const double  tol = seqs[s].n_rows == 1 ? tol_dec : tol_pre;
        double       *worst = seqs[s].n_rows == 1 ? &worst_dec : &worst_pre;
        if (e > *worst) *worst = e;
        if (!(nan == 0 && e < tol) && seqs[s].n_rows == 1) {
            /* which side is off: both against the naive reference */
            float *nv = malloc(sizeof(float) * n_head * D);
            for (int32_t qh = 0; qh < n_head; qh++)
                naive(&hv, seqs[s].page_table, seqs[s].pos0 + 1, q + off + (int64_t)qh * D,
                      qh / G, &ht, scale, nv + (int64_t)qh * D);
            int          n1, n2;
            const double eg = nmse(nv, got + off, (size_t)n, &n1), ec = nmse(nv, ref + off, (size_t)n, &n2);
            fprintf(stderr, "  naive reference: vs GPU nmse %.3g, vs CPU twin nmse %.3g\n", eg, ec);
            free(nv);
        }
        CHECKF(nan == 0 && e < tol, "%s D%d H%d G%d %s rot%d%s seq %d (history %d, rows %d): "
               "nmse %.3g (limit %.1g), %d non-finite", what, D, H, G,
               pairing == LC_ROPE_NEOX ? "neox" : "norm", n_rot, yarn ? " yarn" : "", s,
               seqs[s].pos0, seqs[s].n_rows, e, tol, nan);
    }
    b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dq), b->dealloc(b, dout);
    b->dealloc(b, dcs), b->dealloc(b, dsn);
    free(ht.cos), free(ht.sin), free(kc), free(vc), free(kb), free(vb), free(perm), free(seqs);
    free(q), free(ref), free(got);
}

int main(int argc, char **argv) {
    lc_backend *b;
    REQUIRE_CUDA_BACKEND(b);
    for (int i = 1; i < argc; i++) { /* NAME=VALUE: the backend's tuning */
        char        name[64];
        const char *eq = strchr(argv[i], '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - argv[i]) : 0, argv[i]);
        if (!eq || lc_tuning_set(&b->tuning, name, eq + 1) != LC_OK) {
            fprintf(stderr, "test_attention_cuda: bad argument '%s' (NAME=VALUE of lc_tuning): "
                    "%s\n", argv[i], lc_last_error());
            b->free(b);
            return 2;
        }
    }
    rng = (uint64_t)time(NULL) | 1;
    printf("seed %llu\n", (unsigned long long)rng);
    /* decode keeps fp32 math over the fp16 K/V: near-exact; prefill rounds Q, the rotated K
     * and the probabilities to fp16 for the tensor cores */
    const double tol_dec = 1e-4, tol_pre = 1e-4; /* both kernels multiply in fp16 */
    const int32_t dims[] = {64, 128}, gqa[][2] = {{4, 1}, {3, 3}, {8, 4}, {2, 8}};
    const int32_t lens[] = {1, 63, 65, 4097};
    /* LC_TEST_DIM=64|128 and LC_TEST_MODE=decode|prefill narrow the grid, so that a
     * compute-sanitizer run (racecheck is ~1000x slower) can be split into parts */
    const char *only_dim = getenv("LC_TEST_DIM"), *only_mode = getenv("LC_TEST_MODE");
    const bool  do_dec = !only_mode || !strcmp(only_mode, "decode");
    const bool  do_pre = !only_mode || !strcmp(only_mode, "prefill");
    for (int di = 0; di < 2; di++)
        if (!only_dim || atoi(only_dim) == dims[di])
        for (int gi = 0; gi < 4; gi++)
            for (int pi = 0; pi < 2; pi++) {
                const int32_t D = dims[di], H = gqa[gi][0], G = gqa[gi][1];
                const lc_rope_pairing pr = pi ? LC_ROPE_NEOX : LC_ROPE_NORM;
                for (int li = 0; li < 4; li++) {
                    /* decode: one row after lens[li] - 1 keys; batched with other lengths */
                    scase dec[3] = {{lens[li] - 1, 1}, {lens[(li + 1) % 4] - 1, 1}, {200, 1}};
                    if (do_dec) run_case(b, "decode", D, H, G, pr, D, false, dec, 3, tol_dec, tol_pre);
                    /* prefill from empty, and a chunk after a history, in one batch with a
                     * decode row */
                    scase pre[3] = {{0, lens[li]}, {lens[li], 70}, {lens[(li + 2) % 4], 1}};
                    if (do_pre)
                        run_case(b, "prefill", D, H, G, pr, D, false, pre, lens[li] > 1 ? 3 : 2,
                                 tol_dec, tol_pre);
                }
            }
    /* partial rotary (adjacent pairs) and a YaRN table factor */
    for (int di = 0; di < 2; di++) {
        const int32_t D = dims[di];
        if (only_dim && atoi(only_dim) != D) continue;
        scase mix[3] = {{1000, 1}, {0, 300}, {129, 64}};
        run_case(b, "partial-rotary", D, 2, 4, LC_ROPE_NORM, D / 2, false, mix, 3, tol_dec, tol_pre);
        run_case(b, "yarn", D, 2, 4, LC_ROPE_NORM, D, true, mix, 3, tol_dec, tol_pre);
        run_case(b, "yarn", D, 2, 4, LC_ROPE_NEOX, D, true, mix, 3, tol_dec, tol_pre);
    }
    /* long: decode over 200K keys (many splits per CTA), prefill chunk after 20K keys
     * (LC_TEST_QUICK=1 skips these, for runs under compute-sanitizer) */
    if (!getenv("LC_TEST_QUICK")) {
        scase lng[2] = {{200000, 1}, {20000, 512}};
        run_case(b, "long", 128, 8, 4, LC_ROPE_NORM, 128, false, lng, 2, tol_dec, tol_pre);
        run_case(b, "long", 64, 3, 3, LC_ROPE_NORM, 64, false, lng, 2, tol_dec, tol_pre);
    }
    printf("largest nmse: decode %.3g, prefill %.3g\n", worst_dec, worst_pre);
    b->free(b);
    TEST_END();
}
