/*
 * test_attention.c — the CPU dense attention over the paged KV (tiled online softmax, split-K
 * decode, GQA, pre-RoPE keys rotated in the kernel) against a naive reference: rotate every
 * key, full softmax, weighted sum. Random shapes, shuffled page tables, several sequences in
 * one batch mixing prefill chunks and decode rows.
 */
#include "backend/cpu/cpu.h"
#include "kv/kv.h"
#include "model/model.h"
#include "test_util.h"
#include "attention_naive.h"

#include <math.h>
#include <string.h>

static uint64_t rng = 0x1234567;

/* half_rot: only the first D / 2 dims rotated; yarn: a YaRN table, whose attention factor
 * (mscale) is folded into cos and sin */
static void run_case_rope(int32_t n_kv_head, int32_t group, int32_t D, int32_t P, int32_t n_seqs,
                          const int32_t *pos0, const int32_t *n_rows, lc_rope_pairing pairing,
                          bool half_rot, bool yarn) {
    lc_backend *b;
    CHECK(lc_backend_cpu_create(2, &b) == LC_OK);
    const int32_t n_head = n_kv_head * group;
    int32_t       max_k = 0, total_rows = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        if (pos0[s] + n_rows[s] > max_k) max_k = pos0[s] + n_rows[s];
        total_rows += n_rows[s];
    }
    lc_hparams hp = {0};
    hp.n_rot = half_rot ? D / 2 : D;
    hp.rope_base = 10000.0f;
    hp.rope_pairing = pairing;
    if (yarn) {
        hp.rope_scaling = LC_ROPE_SCALING_YARN, hp.rope_factor = 4.0f, hp.rope_orig_ctx = 2048;
        hp.yarn_ext_factor = 1.0f, hp.yarn_attn_factor = 1.0f, hp.yarn_beta_fast = 32.0f;
        hp.yarn_beta_slow = 1.0f;
    }
    lc_rope_table rope = {max_k, hp.n_rot, pairing, malloc(sizeof(float) * max_k * D / 2),
                          malloc(sizeof(float) * max_k * D / 2), (float)lc_rope_mscale(&hp)};
    CHECK(!yarn || rope.mscale > 1.01f); /* the factor is there to be divided out */
    CHECK(lc_rope_table_fill(&hp, NULL, max_k, rope.cos, rope.sin) == LC_OK);
    int64_t pages_total = 0;
    for (int32_t s = 0; s < n_seqs; s++) pages_total += (pos0[s] + n_rows[s] + P - 1) / P;
    lc_kv_cache *kv;
    CHECK(lc_kv_create(b, 1, n_kv_head, D, P, pages_total + 3, 0, false, &kv) == LC_OK);
    /* shuffle the free list so page tables are scattered */
    for (int64_t i = kv->n_free - 1; i > 0; i--) {
        int64_t j = test_irand(&rng, (uint32_t)(i + 1));
        int32_t t = kv->free_pages[i];
        kv->free_pages[i] = kv->free_pages[j];
        kv->free_pages[j] = t;
    }
    lc_kv_seq   *seqs  = calloc((size_t)n_seqs, sizeof *seqs);
    lc_attn_seq *aseqs = calloc((size_t)n_seqs, sizeof *aseqs);
    lc_kv_layer_view view = lc_kv_layer(kv, 0);
    const int64_t KVD = (int64_t)n_kv_head * D;
    int32_t row = 0;
    float *q = malloc(sizeof(float) * total_rows * n_head * D);
    float *out = malloc(sizeof(float) * total_rows * n_head * D);
    for (int32_t s = 0; s < n_seqs; s++) {
        const int32_t n_k = pos0[s] + n_rows[s];
        CHECK(lc_kv_seq_reserve(kv, &seqs[s], n_k) == LC_OK);
        /* write the history and the new rows through kv_write, as the forward does */
        float *k = malloc(sizeof(float) * n_k * KVD), *v = malloc(sizeof(float) * n_k * KVD);
        for (int64_t i = 0; i < n_k * KVD; i++) k[i] = test_frand(&rng), v[i] = test_frand(&rng);
        lc_attn_seq hist = {0, n_k, 0, seqs[s].pages, 0};
        CHECK(lc_cpu_kv_write(&view, &hist, 1, k, v) == LC_OK);
        free(k), free(v);
        aseqs[s] = (lc_attn_seq){row, n_rows[s], pos0[s], seqs[s].pages, 0};
        row += n_rows[s];
    }
    for (int64_t i = 0; i < (int64_t)total_rows * n_head * D; i++) q[i] = 2 * test_frand(&rng);
    memset(out, 0xff, sizeof(float) * total_rows * n_head * D); /* poison */
    const float scale = 1.0f / sqrtf((float)D);
    CHECK(lc_cpu_attn_dense(&view, aseqs, n_seqs, q, n_head, &rope, scale, out) == LC_OK);
    double max_err = 0;
    float  ref[512];
    for (int32_t s = 0; s < n_seqs; s++)
        for (int32_t r = 0; r < n_rows[s]; r++)
            for (int32_t h = 0; h < n_head; h++) {
                const int64_t off = ((int64_t)(aseqs[s].row0 + r) * n_head + h) * D;
                naive(&view, seqs[s].pages, pos0[s] + r + 1, q + off, h / group, &rope, scale, ref);
                for (int32_t i = 0; i < D; i++) {
                    const double e = fabs((double)ref[i] - out[off + i]);
                    if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
                }
            }
    CHECKF(max_err < 2e-5, "kv heads %d group %d dim %d page %d%s%s: max |err| %g", n_kv_head,
           group, D, P, half_rot ? " half rotary" : "", yarn ? " yarn" : "", max_err);
    for (int32_t s = 0; s < n_seqs; s++) lc_kv_seq_release(kv, &seqs[s]);
    CHECK(kv->n_free == kv->n_pages);
    free(seqs), free(aseqs), free(q), free(out), free(rope.cos), free(rope.sin);
    lc_kv_free(kv);
    b->free(b);
}

static void run_case(int32_t n_kv_head, int32_t group, int32_t D, int32_t P, int32_t n_seqs,
                     const int32_t *pos0, const int32_t *n_rows, lc_rope_pairing pairing) {
    run_case_rope(n_kv_head, group, D, P, n_seqs, pos0, n_rows, pairing, false, false);
}

int main(void) {
    /* prefill from scratch, odd lengths */
    { int32_t p0[] = {0}, n[] = {63}; run_case(3, 3, 64, 16, 1, p0, n, LC_ROPE_NORM); }
    { int32_t p0[] = {0}, n[] = {65}; run_case(8, 4, 128, 64, 1, p0, n, LC_ROPE_NEOX); }
    /* chunked prefill continuing a sequence, GQA 1 and 8 */
    { int32_t p0[] = {100}, n[] = {37}; run_case(2, 1, 64, 32, 1, p0, n, LC_ROPE_NORM); }
    { int32_t p0[] = {130}, n[] = {17}; run_case(1, 8, 128, 16, 1, p0, n, LC_ROPE_NORM); }
    /* decode rows with split-K over many pages, mixed with a prefill chunk in one batch */
    { int32_t p0[] = {1000, 0, 4096}, n[] = {1, 33, 1};
      run_case(3, 3, 64, 64, 3, p0, n, LC_ROPE_NORM); }
    { int32_t p0[] = {257, 300}, n[] = {1, 1}; run_case(4, 2, 128, 16, 2, p0, n, LC_ROPE_NEOX); }
    /* decode rows (each page's keys by their slots, the queries rotated back) and a prefill
     * chunk, with partial rotary and a YaRN factor in the table */
    { int32_t p0[] = {1000, 0, 3000}, n[] = {1, 70, 1};
      run_case_rope(2, 4, 128, 64, 3, p0, n, LC_ROPE_NORM, true, true);
      run_case_rope(2, 6, 128, 64, 3, p0, n, LC_ROPE_NEOX, false, true);
      run_case_rope(3, 3, 64, 16, 3, p0, n, LC_ROPE_NORM, true, false); }
    /* a single token */
    { int32_t p0[] = {0}, n[] = {1}; run_case(1, 1, 64, 16, 1, p0, n, LC_ROPE_NORM); }
    TEST_END();
}
