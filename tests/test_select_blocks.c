/*
 * test_select_blocks.c — HiP mask estimation (lc_cpu_select_blocks; contract in backend.h "HiP
 * hierarchical top-k mask estimation"; paper 004_b4c89dd3429c70a1.txt §3, Alg. 1) against a
 * brute-force reference written here: every probed key block scored in double (rotation in
 * double from the table, memoised per block), the node / branch iteration simulated with a
 * rank count instead of a sort. Where a selection cut (the last kept branch against the first
 * dropped one) is closer than a tolerance, a correct float kernel may pick either side: such a
 * (block, group) pair is "ambiguous" and only needs the invariants and an overlap of >= 95%
 * with the reference; every other pair must match the reference exactly.
 * Worlds: scattered page tables, fp16-representable keys; random keys, or planted keys
 * (small integer levels times one vector per KV head, with PLAIN RoPE only in the un-rotated
 * dims) so that block scores are discrete — equal levels tie exactly (lower start first),
 * different levels are far apart — or all keys equal (every score ties).
 * Cases: head dims 64 / 128, GQA 9/3 and 32/8, NORM / NEOX, partial rotary, PLAIN / RELATIVE,
 * n_groups 1 and n_kv_head, q_stride 1/2, k_stride 1/2, block_k 1/2/4, decode rows and 32-row
 * blocks, NB <= n_nodes (one segment), empty candidate ranges, candidate ranges not a multiple
 * of block_k; invariants (sorted, disjoint, inside [n_sink, win0), n_out) always; bad
 * arguments refused.
 *
 * The harness (hm_*) is in select_blocks_world.h.
 */
#include "select_blocks_world.h"


static int64_t n_pairs_total, n_ambiguous, n_diff;

static void run_case(const hm_case *cs, int32_t k, int32_t block_k, int32_t q_stride,
                     int32_t k_stride, int32_t n_groups) {
    hm_world w;
    hm_world_make(cs, &w);
    hm_args x;
    hm_args_make(&w, &x, k, block_k, q_stride, k_stride, n_groups);
    char what[256];
    snprintf(what, sizeof what, "D%d H%d G%d %s %s rot%d %s keys, k %d b_k %d b_sq %d b_sk %d groups %d b_q %d",
             cs->D, cs->H, cs->G, hm_mode_name[cs->mode],
             cs->pairing == LC_ROPE_NEOX ? "neox" : "norm", cs->n_rot, hm_keys_name[cs->keys], k,
             block_k, q_stride, k_stride, n_groups, cs->b_q);
    lc_kv_layer_view kv = {w.k, w.k, cs->P, cs->H, cs->D, NULL, false, NULL};
    const int rc = lc_cpu_select_blocks(&kv, w.seqs, cs->n_seqs, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &x.a);
    CHECKF(rc == LC_OK, "%s: %s", what, lc_last_error());
    if (rc == LC_OK)
        for (int32_t bg = 0; bg < w.n_qb * n_groups; bg++) {
            hm_ref ref;
            hm_reference_pair(&w, &x.a, bg, 2e-5, &ref);
            n_diff += hm_check_pair(&w, &x.a, bg, x.out + (int64_t)bg * x.a.out_cap, x.out_n[bg], &ref, what);
            if (cs->keys != HM_RANDOM)
                CHECKF(!ref.ambiguous, "%s: pair %d: planted keys gave a close cut", what, bg);
            n_ambiguous += ref.ambiguous, n_pairs_total++;
            free(ref.blk);
        }
    hm_args_free(&x);
    hm_world_free(&w);
}

static void bad_args(void) {
    hm_case cs = {64, 2, 2, 16, 64, LC_ROPE_NORM, 8, 4, 16, HM_RANDOM, LC_SCAN_PLAIN, 1, {200}, {8}};
    hm_world w;
    hm_world_make(&cs, &w);
    hm_args x;
    hm_args_make(&w, &x, 16, 4, 1, 1, 1);
    lc_kv_layer_view kv = {w.k, w.k, cs.P, cs.H, cs.D, NULL, false, NULL};
    lc_select_blocks_args a  = x.a;
    a.k                 = 18; /* not a multiple of block_k */
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.k_stride = 5;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.scan_rope = LC_SCAN_CHUNK;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.max_cand = w.max_cand - 1;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.out_cap = 3;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.max_rows = 4;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a, a.n_groups = 3;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_ERR_INVALID_ARG);
    a = x.a;
    CHECK(lc_cpu_select_blocks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &a) == LC_OK);
    hm_args_free(&x);
    hm_world_free(&w);
}

static void run_grid_case(void *ctx, const hm_case *cs, int32_t k, int32_t block_k,
                          int32_t q_stride, int32_t k_stride, int32_t n_groups) {
    (void)ctx;
    run_case(cs, k, block_k, q_stride, k_stride, n_groups);
}

int main(void) {
    bad_args();
    hm_case_grid(run_grid_case, NULL);
    /* the 8B head layout, 32-row blocks with b_sq 2, block_k 2, k 512 */
    hm_case big = {128, 8, 4, 64, 128, LC_ROPE_NORM, 32, 64, 256, HM_RANDOM, LC_SCAN_RELATIVE, 2,
                   {4000, 2500}, {1, 64}};
    run_case(&big, 512, 2, 2, 1, 8);
    big.keys = HM_LEVELS;
    run_case(&big, 512, 2, 1, 2, 1);
    printf("%lld pairs, %lld with a close cut, %lld blocks differ from the reference in those\n",
           (long long)n_pairs_total, (long long)n_ambiguous, (long long)n_diff);
    TEST_END();
}
