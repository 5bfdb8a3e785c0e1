/*
 * test_prune_chunks.c — the InfiniteHiP pruning stage (lc_cpu_prune_chunks; contract in backend.h,
 * paper 000_ced830aa0d9eb0ea.txt Alg. 2–3) against a brute-force reference written here: for
 * every chunk and head the SelectRep descent exactly as the contract states, in double, over
 * scattered page tables. Where a descent step compares two probes closer than the tolerance,
 * the reference follows both branches, so each chunk has a point score and an interval of
 * scores a correct float kernel may produce; a selection passes when it holds exactly the
 * chunks of the list, sorted, min(n_chunks, n_keep) of them, and no kept chunk is beaten by a
 * dropped one beyond the tolerance (chunks whose scores tie within it may swap).
 * Cases: first stage and later stages (random input lists, odd lengths and alignments), all
 * three scan_rope modes, n_groups 1 and n_kv_head, one descent per query head or per KV head
 * (kv_descent), q_stride 1 and 4 with ragged blocks, head
 * dims 64 and 128, GQA 1/3/4/8, both RoPE pairings, n_keep >= n_chunks, empty candidate
 * ranges, tail chunks shorter than l_c, exact ties (the later chunk first).
 * The harness (hs_*) is in prune_chunks_world.h.
 */
#include "prune_chunks_world.h"


static const char *mode_name[] = {"plain", "relative", "chunk"};

/* Run the CPU stage on (world, stage) and check it; returns the swaps. */
static int64_t cpu_case(const hs_world *w, hs_stage *st, int exact, const char *what) {
    lc_kv_layer_view kv = {w->k, w->k, w->cs.P, w->cs.H, w->cs.D, NULL, false, NULL};
    const int        rc = lc_cpu_prune_chunks(&kv, w->seqs, w->cs.n_seqs, w->qb, w->n_qb, w->q,
                                           w->n_head, &w->rope, &st->a);
    CHECKF(rc == LC_OK, "%s: %s", what, lc_last_error());
    if (rc != LC_OK) return 0;
    hs_ref r;
    hs_reference(w, &st->a, 1e-5, &r);
    const int64_t sw = hs_check(w, &st->a, &r, st->out, st->out_n, 1e-5, exact, what);
    hs_ref_free(&r);
    return sw;
}

int main(void) {
    const int32_t dims[] = {64, 128}, gqa[][2] = {{4, 1}, {3, 3}, {2, 4}, {1, 8}};
    int64_t       swaps = 0, n_cases = 0;
    int           k = 0;
    for (int di = 0; di < 2; di++)
        for (int gi = 0; gi < 4; gi++)
            for (int mode = 0; mode < 3; mode++)
                for (int later = 0; later < 2; later++)
                    for (int gr = 0; gr < 2; gr++, k++) {
                        /* a prefill from empty (its first blocks have no candidates), a chunk
                         * after a history, a decode row */
                        hs_case cs = {dims[di], gqa[gi][0], gqa[gi][1], k % 3 ? 16 : 64, dims[di],
                                      k % 5 == 2 ? LC_ROPE_NEOX : LC_ROPE_NORM, 16, 8, 32, 0, 0, 0,
                                      3, {0, 300 + k, 700}, {150, 37, 1}};
                        if (k % 7 == 3) cs.n_rot = dims[di] / 2; /* partial rotary */
                        hs_world w;
                        hs_world_make(&cs, &w);
                        const int32_t ng = gr ? cs.H : 1, qs = k % 2 ? 4 : 1;
                        const int32_t chunk = later ? (k % 3 ? 5 : 4) : (k % 4 ? 16 : 13);
                        const int32_t keep = later ? 3 + k % 4 : 4 + k % 5;
                        hs_stage st;
                        /* first stages: the paper's grid, a staggered one (half a chunk), and
                         * an offset of 1 */
                        hs_first_offset = k % 3 == 1 ? chunk / 2 : k % 3 == 2 ? 1 : 0;
                        hs_first_stride = (k / 3) % 2 ? chunk / 2 : 0; /* overlapping chunks */
                        hs_kv_descent   = (k / 4) % 2; /* every mode, stage and grouping */
                        hs_stage_make(&w, &st, chunk, keep, qs, mode, ng, later, NULL, NULL, 0);
                        hs_first_offset = 0, hs_first_stride = 0, hs_kv_descent = 0;
                        char what[200];
                        snprintf(what, sizeof what, "D%d H%d G%d %s %s offset %d stride %d kv %d "
                                 "groups %d q_stride %d l_c %d keep %d P%d rot%d %s", cs.D, cs.H, cs.G,
                                 mode_name[mode], later ? "later" : "first", st.a.first_offset,
                                 st.a.first_stride, st.a.kv_descent, ng,
                                 qs, chunk, keep, cs.P, cs.n_rot,
                                 cs.pairing == LC_ROPE_NEOX ? "neox" : "norm");
                        swaps += cpu_case(&w, &st, 0, what);
                        n_cases++;
                        hs_stage_free(&st);
                        hs_world_free(&w);
                    }
    /* n_keep >= n_chunks everywhere: every chunk kept, in order */
    {
        hs_case  cs = {64, 2, 4, 16, 64, LC_ROPE_NORM, 16, 4, 64, 0, 0, 0, 2, {100, 0}, {20, 1}};
        hs_world w;
        hs_world_make(&cs, &w);
        hs_stage st;
        hs_stage_make(&w, &st, 7, 1000, 4, LC_SCAN_RELATIVE, 1, 0, NULL, NULL, 0);
        cpu_case(&w, &st, 1, "keep everything");
        hs_stage_free(&st);
        hs_world_free(&w);
    }
    /* exact ties (every key equal, relative RoPE): the later chunks are kept */
    for (int gr = 0; gr < 2; gr++) {
        hs_case  cs = {128, 2, 3, 16, 128, LC_ROPE_NORM, 64, 8, 16, 1, 0, 0, 2, {500, 0}, {70, 1}};
        hs_world w;
        hs_world_make(&cs, &w);
        hs_stage st;
        hs_stage_make(&w, &st, 32, 5, 4, LC_SCAN_RELATIVE, gr ? 2 : 1, 0, NULL, NULL, 0);
        cpu_case(&w, &st, 1, "ties, first stage");
        /* the next stage on that output (chunks of 8 inside the kept 32s, plus a tail) */
        hs_stage s2;
        hs_stage_make(&w, &s2, 8, 6, 1, LC_SCAN_RELATIVE, gr ? 2 : 1, 2, st.out, st.out_n, 5);
        cpu_case(&w, &s2, 1, "ties, second stage");
        hs_stage_free(&s2);
        hs_stage_free(&st);
        hs_world_free(&w);
    }
    /* three chained stages (the 3k preset's shape, small): 64 -> 16 -> 4; modes 3-5 again with
     * overlapping first-stage chunks (stride 32), whose clipped output feeds stage 2; modes 6-8
     * again with one descent per KV head in stages 1-2 */
    for (int mode6 = 0; mode6 < 9; mode6++) {
        const int mode = mode6 % 3;
        hs_first_stride = mode6 >= 3 && mode6 < 6 ? 32 : 0;
        hs_kv_descent   = mode6 >= 6;
        hs_case  cs = {64, 2, 4, 16, 64, LC_ROPE_NORM, 32, 16, 64, 0, 0, 0, 2, {3000, 4000}, {1, 45}};
        hs_world w;
        hs_world_make(&cs, &w);
        hs_stage s1, s2, s3;
        hs_stage_make(&w, &s1, 64, 8, 4, mode, 1, 0, NULL, NULL, 0);
        hs_first_stride = 0;
        swaps += cpu_case(&w, &s1, 0, "chain stage 1");
        hs_stage_make(&w, &s2, 16, 12, 4, mode, 1, 2, s1.out, s1.out_n, 8);
        swaps += cpu_case(&w, &s2, 0, "chain stage 2");
        hs_kv_descent = 0;
        hs_stage_make(&w, &s3, 4, 20, 1, mode, 1, 2, s2.out, s2.out_n, 12);
        swaps += cpu_case(&w, &s3, 0, "chain stage 3");
        hs_stage_free(&s1), hs_stage_free(&s2), hs_stage_free(&s3);
        hs_world_free(&w);
    }
    /* invalid arguments are refused */
    {
        hs_case  cs = {64, 2, 2, 16, 64, LC_ROPE_NORM, 16, 4, 16, 0, 0, 0, 1, {200}, {16}};
        hs_world w;
        hs_world_make(&cs, &w);
        hs_stage st;
        hs_stage_make(&w, &st, 8, 4, 4, LC_SCAN_RELATIVE, 1, 0, NULL, NULL, 0);
        lc_kv_layer_view kv = {w.k, w.k, cs.P, cs.H, cs.D, NULL, false, NULL};
        st.a.max_chunks--;
        CHECK(lc_cpu_prune_chunks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &st.a) ==
              LC_ERR_INVALID_ARG);
        st.a.max_chunks++;
        st.a.n_groups = 3;
        CHECK(lc_cpu_prune_chunks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &st.a) ==
              LC_ERR_INVALID_ARG);
        st.a.n_groups = 1, st.a.max_rows = 8;
        CHECK(lc_cpu_prune_chunks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &st.a) ==
              LC_ERR_INVALID_ARG);
        st.a.max_rows = 16, st.a.kv_descent = 2;
        CHECK(lc_cpu_prune_chunks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &st.a) ==
              LC_ERR_INVALID_ARG);
        st.a.kv_descent = 0;
        CHECK(lc_cpu_prune_chunks(&kv, w.seqs, 1, w.qb, w.n_qb, w.q, w.n_head, &w.rope, &st.a) == LC_OK);
        hs_stage_free(&st);
        hs_world_free(&w);
    }
    printf("%lld cases, %lld kept chunks swapped within the tolerance\n", (long long)n_cases,
           (long long)swaps);
    TEST_END();
}
