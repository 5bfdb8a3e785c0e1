/*
 * test_segmented_prefill.c — layer-segmented prefill (lc_context_params.prefill_token_layers,
 * engine.c segment_step; SparseServe's, spec/tokenselect-and-sparseserve.md B) on SmolLM2 on
 * the CPU: a prompt that advances a few layers a step, its residual stream kept between steps,
 * gives the same greedy tokens and last-prompt logits as chunked prefill (one layer a step,
 * five, all of them; dense and InfiniteHiP's sparse path; two prompts at once), and beside a
 * decoding request exactly the logits of the prompt alone (InfiniteHiP); the decode
 * tokens of another sequence go on while a long prompt is segmented (they all arrive before
 * its first token, where chunked prefill lets two through); a short prompt whose whole work fits
 * the step's budget is injected into the batch whole and answers in the first step while a long
 * one is segmented; a sequence removed with a chunk in flight leaves nothing behind; a negative
 * setting is refused.
 */
#include "engine_run.h"

static lc_context_params seg(const engine_fixture *f, int32_t token_layers) {
    lc_context_params p    = f->dense;
    p.prefill_token_layers = token_layers;
    return p;
}

/* one prompt, segmented, against the chunked reference */
static void same_as_chunked(engine_fixture *f, const char *what, const lc_context_params *cp,
                            const run_out *ref) {
    f->got.n = 0;
    CHECKF(run(f->m, cp, &f->pa, &f->n_a, 1, &f->got, NULL) == LC_OK, "%s: %s", what,
           lc_last_error());
    CHECKF(f->got.n == N_GEN && !memcmp(f->got.tokens, ref->tokens, sizeof ref->tokens),
           "%s: %d tokens, not the chunked prefill's", what, f->got.n);
    const double d = max_logprob_diff(f->got.logits, ref->logits, f->info.n_vocab);
    CHECKF(d < 1e-4, "%s: last prompt logits differ by %.3g in log-prob", what, d);
}

/* b's first 40 tokens decode; then a arrives: its first token and the logits of its last prompt
 * position (into lg) */
static int32_t a_beside_decoder(engine_fixture *f, const lc_context_params *cp, float *lg) {
    lc_context *c = NULL;
    CHECK(lc_context_create(f->m, cp, &c) == LC_OK);
    if (!c) return -1;
    lc_request rb = {.prompt = f->pb, .n_prompt = 40, .max_tokens = 4000,
                     .sampling = lc_sampling_default(), .ignore_eos = true};
    rb.sampling.temperature = 0;
    int32_t  ib, ia, first = -1;
    lc_event ev[4];
    size_t   n = 0;
    CHECK(lc_context_add(c, &rb, &ib) == LC_OK);
    for (int i = 0; i < 40; i++) CHECK(lc_context_step(c, ev, 4, &n) == LC_OK); /* decoding */
    lc_request ra = rb;
    ra.prompt = f->pa, ra.n_prompt = f->n_a, ra.max_tokens = N_GEN;
    CHECK(lc_context_add(c, &ra, &ia) == LC_OK);
    for (int guard = 0; guard < 4000 && first < 0; guard++) {
        if (lc_context_step(c, ev, 4, &n) != LC_OK || n == 0) break;
        for (size_t e = 0; e < n; e++)
            if (ev[e].seq_id == ia && ev[e].token >= 0) {
                first = ev[e].token;
                memcpy(lg, lc_context_logits(c, ia), sizeof(float) * (size_t)f->info.n_vocab);
            }
    }
    lc_context_free(c);
    return first;
}

/* b (short) and a (long) added together: how many of b's tokens arrive before a's first one */
static int b_tokens_before_a(engine_fixture *f, const lc_context_params *cp) {
    lc_context *c = NULL;
    CHECK(lc_context_create(f->m, cp, &c) == LC_OK);
    if (!c) return -1;
    int32_t    *pr[2] = {f->pb, f->pa};
    size_t      np[2] = {40, f->n_a};
    int32_t     id[2];
    for (int i = 0; i < 2; i++) {
        lc_request r = {.prompt = pr[i], .n_prompt = np[i], .max_tokens = N_GEN,
                        .sampling = lc_sampling_default(), .ignore_eos = true};
        r.sampling.temperature = 0;
        CHECK(lc_context_add(c, &r, &id[i]) == LC_OK);
    }
    int nb = 0, na = 0, before = -1;
    for (int guard = 0; guard < 2000 && (nb < N_GEN || na < N_GEN); guard++) {
        lc_event ev[4];
        size_t   n = 0;
        if (lc_context_step(c, ev, 4, &n) != LC_OK || n == 0) break;
        for (size_t e = 0; e < n; e++) {
            if (ev[e].token < 0) continue;
            if (ev[e].seq_id == id[0]) nb++;
            if (ev[e].seq_id == id[1] && na++ == 0) before = nb;
        }
    }
    CHECKF(nb == N_GEN && na == N_GEN, "interleaving: %d and %d tokens", nb, na);
    lc_context_free(c);
    return before;
}

int main(void) {
    REQUIRE_MODEL(MODEL);
    engine_fixture f;
    if (!engine_fixture_init(&f)) TEST_END();
    const int32_t NL = f.info.n_layer;

    /* 1 token-layer: one layer a step (the 512-row chunks); 5 layers; every layer at once */
    lc_context_params p1 = seg(&f, 1), p5 = seg(&f, 5 * 512), pall = seg(&f, 1 << 30);
    same_as_chunked(&f, "one layer a step", &p1, &f.ref);
    same_as_chunked(&f, "five layers a step", &p5, &f.ref);
    same_as_chunked(&f, "every layer a step", &pall, &f.ref);

    /* InfiniteHiP's sparse prefill path (its budget far below the prompt), segmented */
    lc_context_params ih = f.dense;
    ih.attn              = "infinitehip";
    ih.attn_settings     = "chunks=64,16,1 k=512,128,64 sink=16 stream=64 first-k=64 block-q=32";
    ih.sparse_always     = true;
    run_out ihref        = {.logits = malloc(sizeof(float) * (size_t)f.info.n_vocab)};
    CHECK(run(f.m, &ih, &f.pa, &f.n_a, 1, &ihref, NULL) == LC_OK && ihref.n == N_GEN);
    lc_context_params ihs    = ih;
    ihs.prefill_token_layers = 3 * 512;
    same_as_chunked(&f, "infinitehip, three layers a step", &ihs, &ihref);
    /* ... and beside a decoding request: the segments hold only the prompt's rows, so its
     * logits are exactly those of the prompt alone (chunked prefill would share its forwards,
     * and the matrices' shapes, with the decode row) */
    {
        float *lg = malloc(sizeof(float) * (size_t)f.info.n_vocab);
        ihs.n_seq_max = 2;
        const int32_t t = a_beside_decoder(&f, &ihs, lg);
        CHECKF(t == ihref.tokens[0], "infinitehip beside a decoder: first token %d, alone %d", t,
               ihref.tokens[0]);
        const double d = t >= 0 ? max_logprob_diff(lg, ihref.logits, f.info.n_vocab) : 1;
        CHECKF(d == 0, "infinitehip beside a decoder: logits %.3g from alone", d);
        free(lg);
    }
    free(ihref.logits);

    /* two prompts at once: each as it is alone */
    {
        int32_t *pr[2] = {f.pa, f.pb};
        size_t   np[2] = {f.n_a, f.n_b};
        run_out  chunked[2], segd[2];
        memset(chunked, 0, sizeof chunked), memset(segd, 0, sizeof segd);
        CHECK(run(f.m, &f.dense, pr, np, 2, chunked, NULL) == LC_OK);
        lc_context_params p2 = seg(&f, 2 * 512);
        CHECK(run(f.m, &p2, pr, np, 2, segd, NULL) == LC_OK);
        for (int i = 0; i < 2; i++)
            CHECKF(segd[i].n == N_GEN && chunked[i].n == N_GEN &&
                   !memcmp(segd[i].tokens, chunked[i].tokens, sizeof segd[i].tokens),
                   "two prompts: sequence %d differs from chunked prefill", i);
        CHECK(!memcmp(chunked[0].tokens, f.ref.tokens, sizeof f.ref.tokens));
    }

    /* a short request decodes while a long prompt is segmented: all of its tokens come before
     * the long one's first (two layers a step: 2 chunks x NL/2 steps), where chunked prefill
     * lets only the two steps of the long prompt's chunks go by */
    {
        lc_context_params p2 = seg(&f, 2 * 512);
        const int seg_before = b_tokens_before_a(&f, &p2), chunk_before = b_tokens_before_a(&f, &f.dense);
        CHECKF(seg_before == N_GEN, "segmented: %d of the short request's %d tokens before the long "
               "prompt's first (%d layers)", seg_before, N_GEN, NL);
        CHECKF(chunk_before >= 0 && chunk_before < seg_before, "chunked: %d tokens before",
               chunk_before);
    }

    /* injection: a prompt whose whole work (rows x layers) fits the step's budget joins the
     * batch whole — the short request added after a long one draws its first token in the
     * first step, while the long prompt is segmented with what is left (one layer a step), and
     * both give the tokens they give alone */
    {
        lc_context_params pi = seg(&f, 40 * NL + 512);
        pi.n_seq_max         = 2;
        lc_context *c        = NULL;
        CHECK(lc_context_create(f.m, &pi, &c) == LC_OK);
        int32_t *pr[2] = {f.pa, f.pb};
        size_t   np[2] = {f.n_a, 40};
        int32_t  id[2];
        for (int i = 0; i < 2 && c; i++) {
            lc_request r = {.prompt = pr[i], .n_prompt = np[i], .max_tokens = N_GEN,
                            .sampling = lc_sampling_default(), .ignore_eos = true};
            r.sampling.temperature = 0;
            CHECK(lc_context_add(c, &r, &id[i]) == LC_OK);
        }
        int32_t toks[2][N_GEN];
        int     got[2] = {0, 0}, first_step[2] = {-1, -1};
        for (int step = 0; c && step < 4000 && (got[0] < N_GEN || got[1] < N_GEN); step++) {
            lc_event ev[4];
            size_t   n = 0;
            if (lc_context_step(c, ev, 4, &n) != LC_OK || n == 0) break;
            for (size_t e = 0; e < n; e++)
                for (int i = 0; i < 2; i++)
                    if (ev[e].seq_id == id[i] && ev[e].token >= 0 && got[i] < N_GEN) {
                        if (got[i] == 0) first_step[i] = step;
                        toks[i][got[i]++] = ev[e].token;
                    }
        }
        lc_context_free(c);
        CHECKF(first_step[1] == 0, "injected: the short prompt's first token at step %d",
               first_step[1]);
        /* the long prompt's steps by the rule: the short one's 40 x NL token-layers leave
         * 512 (one layer) in step 0, then the whole budget, max(1, budget / rows) a step */
        int expect = 0;
        for (int64_t done = 0; done < (int64_t)f.n_a;) {
            const int64_t R = (int64_t)f.n_a - done < pi.n_batch ? (int64_t)f.n_a - done : pi.n_batch;
            for (int64_t l = 0; l < NL; expect++) {
                const int64_t per = (pi.prefill_token_layers - (expect == 0 ? 40 * NL : 0)) / R;
                l += per < 1 ? 1 : per;
            }
            done += R;
        }
        CHECKF(first_step[0] == expect - 1, "injected: the long prompt's first token at step %d, "
               "not %d", first_step[0], expect - 1);
        CHECKF(got[0] == N_GEN && !memcmp(toks[0], f.ref.tokens, sizeof toks[0]),
               "injected: the long prompt's tokens are not its alone tokens");
        run_out alone = {0};
        size_t  n40   = 40;
        CHECK(run(f.m, &f.dense, &f.pb, &n40, 1, &alone, NULL) == LC_OK);
        CHECKF(got[1] == N_GEN && alone.n == N_GEN && !memcmp(toks[1], alone.tokens, sizeof toks[1]),
               "injected: the short prompt's tokens are not its alone tokens");
    }

    /* removed with a chunk in flight; the next request is as if alone */
    {
        lc_context *c = NULL;
        CHECK(lc_context_create(f.m, &p1, &c) == LC_OK);
        lc_request r = {.prompt = f.pa, .n_prompt = f.n_a, .max_tokens = N_GEN,
                        .sampling = lc_sampling_default(), .ignore_eos = true};
        r.sampling.temperature = 0;
        int32_t id;
        CHECK(lc_context_add(c, &r, &id) == LC_OK);
        lc_event ev[2];
        size_t   n;
        for (int i = 0; i < NL + 3; i++) CHECK(lc_context_step(c, ev, 2, &n) == LC_OK);
        CHECK(lc_context_remove(c, id) == LC_OK);
        CHECK(lc_context_add(c, &r, &id) == LC_OK);
        int got = 0;
        int32_t toks[N_GEN];
        for (int guard = 0; guard < 4000 && got < N_GEN; guard++) {
            CHECK(lc_context_step(c, ev, 2, &n) == LC_OK);
            for (size_t e = 0; e < n; e++)
                if (ev[e].token >= 0 && got < N_GEN) toks[got++] = ev[e].token;
        }
        CHECKF(got == N_GEN && !memcmp(toks, f.ref.tokens, sizeof toks),
               "after a removal mid-chunk: %d tokens, not the reference's", got);
        lc_context_free(c);
    }

    /* a negative setting */
    lc_context_params bad = seg(&f, -1);
    lc_context       *c   = NULL;
    CHECK(lc_context_create(f.m, &bad, &c) == LC_ERR_INVALID_ARG && !c &&
          strstr(lc_last_error(), "prefill_token_layers"));

    engine_fixture_free(&f);
    TEST_END();
}
