/*
 * test_qwen_logits_cuda.c — the second reference model, Qwen2.5-Coder-1.5B-Instruct (qwen2,
 * Q4_K_M, 28 layers, 12/2 heads, head dim 128, 151,936-token vocabulary) end to end on the GPU
 * (16-bit weights, bf16 paged KV, the CUDA attention kernels) against the transformers fp32
 * reference of tests/fixtures/logits/qwen/transformers.txt — the prompts test_qwen_logits_slow
 * checks on the CPU — within the bounds the SmolLM2 GPU test (test_forward_cuda.c) uses, and
 * the reasons given there (bf16 KV cache, fp16 GEMM inputs):
 *   1. last-position log-probs of every fixture prompt, in one prefill chunk, in chunks of 32
 *      rows (later chunks attend to a history) and, for the paragraph, each of its prefixes in
 *      chunks of 16, with the default weights (f16 for this Q4_K_M model): against the
 *      reference, same top-1 (unless its best two are a near tie, < 2e-2 apart) and max |d
 *      log-prob| over its top 20 <= 4e-2; in one chunk also against the CPU backend with the
 *      same f16 weights (its top 20 as the reference), same bounds. With every matrix in bf16,
 *      max |d| <= 1e-1 against the reference;
 *   2. 32-token greedy continuations (ignore_eos) of every prompt on the GPU: equal to the
 *      reference's up to a step where the reference's best two log-probs are less than
 *      2 x 4e-2 apart (a near tie: two log-probs each within 4e-2 may swap), and equal
 *      throughout for all prompts but at most one (the SmolLM2 test: 2 of 3);
 *   3. the first three prompts batched in one context give the same continuations on the GPU
 *      as they do one at a time, for at least 2 of the 3;
 *   4. an fp8 KV cache (LC_KV_FP8: e4m3 with a scale per token and head, keys centred on the
 *      key bias) with the default weights: one chunk and chunks of 16 (prefill over an fp8
 *      history), max |d log-prob| over the reference's top 20 <= 4.5e-1 and top-1 the
 *      reference's unless its best two are within 2e-1 (bench/NOTES.md 35: the CPU emulation of
 *      this format gave <= 2.6e-1 on these prompts, top-1 unchanged); 32-token greedy
 *      continuations (decode over the fp8 cache) equal to the reference's up to a step where its
 *      best two are within 2 x 4.5e-1; InfiniteHiP over the fp8 cache with its sparse path
 *      forced within 4.5e-1 too (one chunk); HiP over it refused by name.
 * Per prompt it prints the largest |d log-prob| against the reference and the top-1 agreement
 * over every evaluation, and the greedy agreement, then one summary line.
 *
 * Skips (exit 77) without a GPU, or without the model file (`make model-qwen`, 1.1 GB; on the
 * GPU machine scripts/model-to-device.sh carries it) unless LC_REQUIRE_MODEL=1. Memory: ~3 GB
 * of GPU memory per 16-bit copy of the weights, ~3.5 GB of host memory for the CPU f16 model.
 */
#define MAX_TOP     64
#define MAX_GREEDY  64
#define MAX_PREFIX  32
#define MAX_PROMPTS 16
#define N_CTX       1024 /* the longest fixture prompt + 32 fits */
#define TOL_LOGPROB 4e-2 /* test_forward_cuda.c's bound, for the same reasons */
#define TOP1_TIE    2e-2 /* test_forward_cuda.c's near tie for the top-1 check */
#define GREEDY_TIE  (2 * TOL_LOGPROB)
#define GREEDY_N    32 /* the reference's continuations are 32 ids */
#define TOL_BF16    1e-1
#define TOL_FP8     4.5e-1 /* section 4 above */
#define TOP1_TIE_FP8 2e-1

#include "qwen_model.h"

#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What one prompt gave, for the summary. */
typedef struct {
    double worst_ref; /* largest max |d| against the reference over its evaluations */
    double worst_cpu; /* against the CPU backend with f16 weights (one chunk) */
    double worst_bf16;
    int    top1_same, n_top1; /* our argmax == the reference's, out of n_top1 evaluations */
    int    greedy;            /* leading greedy ids equal to the reference's */
} result_t;

static lc_context *make_context_fp8(lc_model *m, int32_t n_ctx, int32_t n_batch) {
    lc_context_params p = lc_context_default_params();
    p.n_ctx = n_ctx, p.kv_type = LC_KV_FP8;
    if (n_batch > 0) p.n_batch = n_batch;
    lc_context *c  = NULL;
    const int   rc = lc_context_create(m, &p, &c);
    CHECKF(rc == LC_OK && c, "lc_context_create (fp8 KV, n_batch %d): %s (%s)", p.n_batch,
           lc_status_str(rc), lc_last_error());
    return rc == LC_OK ? c : NULL;
}

/* The largest |log-prob - the reference's| over f's first TOP_COMPARE reference ids; *at: its id. */
static double max_top_diff(const double *lp, const fixture_t *f, int *at) {
    double d = 0;
    *at      = f->top[0].id;
    for (int k = 0; k < TOP_COMPARE && k < f->n_top; k++)
        if (fabs(lp[f->top[k].id] - f->top[k].lp) > d) d = fabs(lp[f->top[k].id] - f->top[k].lp), *at = f->top[k].id;
    return d;
}

/* Section 4: the fp8 KV cache against the reference; the worst max |d| over the prompts'
 * evaluations into worst[i], greedy agreement into greedy[i]. */
static void check_fp8(lc_model *gpu, fixture_t *fx, int n_fx, double *worst, int *greedy) {
    lc_context   *c1 = make_context_fp8(gpu, N_CTX, 0), *c16 = make_context_fp8(gpu, N_CTX, 16);
    const int32_t nv = c1 ? lc_context_n_vocab(c1) : 0;
    double       *lp = nv > 0 ? malloc(sizeof(double) * (size_t)nv) : NULL;
    CHECK(c1 && c16 && lp);
    { /* HiP's selection kernel does not read it yet: refused, saying so */
        lc_context_params p = lc_context_default_params();
        p.n_ctx = N_CTX, p.kv_type = LC_KV_FP8, p.attn = "hip";
        lc_context *c  = NULL;
        const int   rc = lc_context_create(gpu, &p, &c);
        CHECKF(rc == LC_ERR_UNSUPPORTED && !c && strstr(lc_last_error(), "fp8"),
               "hip with an fp8 KV cache: %s (%s)", lc_status_str(rc), lc_last_error());
        if (c) lc_context_free(c);
    }
    { /* InfiniteHiP over it, its sparse path forced (sparse_always: every key of these short
         prompts is in its sink and window, so prune_chunks and attn_segments run over the fp8
         pages and must give what dense attention over them gives, within the same bound) */
        lc_context_params p = lc_context_default_params();
        p.n_ctx = N_CTX, p.kv_type = LC_KV_FP8, p.attn = "infinitehip", p.sparse_always = true;
        lc_context *c  = NULL;
        const int   rc = lc_context_create(gpu, &p, &c);
        CHECKF(rc == LC_OK && c, "infinitehip with an fp8 KV cache: %s (%s)", lc_status_str(rc),
               lc_last_error());
        for (int i = 0; c && lp && i < n_fx; i++) {
            const fixture_t *f = &fx[i];
            int              steps;
            if (!eval_prompt(c, f->ids, f->n_ids, true, lc_context_default_params().n_batch, lp, &steps))
                continue;
            int          at;
            const double d = max_top_diff(lp, f, &at);
            fprintf(stderr, "%-13s fp8 KV, infinitehip (sparse path): max|dlogprob| %.2e, top-1 %s\n",
                    f->name, d, argmax(lp, nv) == f->top[0].id ? "same" : "differs");
            CHECKF(d <= TOL_FP8, "%s fp8 KV, infinitehip: max|dlogprob| %.3g > %g", f->name, d, TOL_FP8);
        }
        if (c) lc_context_free(c);
    }
    for (int i = 0; c1 && c16 && lp && i < n_fx; i++) {
        fixture_t *f = &fx[i];
        worst[i]     = 0;
        for (int chunked = 0; chunked < 2; chunked++) {
            int steps;
            if (!eval_prompt(chunked ? c16 : c1, f->ids, f->n_ids, true,
                             chunked ? 16 : lc_context_default_params().n_batch, lp, &steps))
                continue;
            int          at;
            const double d   = max_top_diff(lp, f, &at);
            const int  am  = argmax(lp, nv);
            const bool tie = f->n_top > 1 && f->top[0].lp - f->top[1].lp < TOP1_TIE_FP8;
            fprintf(stderr, "%-13s fp8 KV, %-11s max|dlogprob| %.2e (token %d), top-1 %s\n",
                    f->name, chunked ? "chunks 16:" : "one chunk:", d, at,
                    am == f->top[0].id ? "same" : tie && am == f->top[1].id ? "swapped (near tie)" : "DIFFERS");
            CHECKF(am == f->top[0].id || (tie && am == f->top[1].id), "%s fp8 KV: top-1 %d, "
                   "reference %d", f->name, am, f->top[0].id);
            CHECKF(d <= TOL_FP8, "%s fp8 KV (%s): max|dlogprob| %.3g > %g", f->name,
                   chunked ? "chunks of 16" : "one chunk", d, TOL_FP8);
            if (d > worst[i]) worst[i] = d;
        }
        int32_t gen[1][MAX_GREEDY];
        int     n_gen[1] = {0};
        run_greedy(c1, &f, 1, GREEDY_N, true, gen, n_gen);
        greedy[i] = check_greedy_ref("cuda fp8 KV", f, gen[0], n_gen[0], GREEDY_N, 2 * TOL_FP8);
    }
    free(lp);
    if (c1) lc_context_free(c1);
    if (c16) lc_context_free(c16);
}

/* Evaluate the first n ids of f in c (chunks of n_batch) and compare with the reference top
 * list; the result goes into r (and the line is printed for a whole prompt). Returns max |d|,
 * or -1 if the evaluation failed. */
static double eval_vs_ref(lc_context *c, const fixture_t *f, int n, int32_t n_batch,
                        const pair_t *ref, int n_ref, const char *how, double *lp, result_t *r) {
    int  steps = 0;
    char what[128];
    if (!eval_prompt(c, f->ids, n, true, n_batch, lp, &steps)) return -1;
    snprintf(what, sizeof what, "cuda %.40s %.40s", f->name, how);
    const int    before = lc_test_failures;
    const double d      = compare_top(what, lp, lc_context_n_vocab(c), ref, n_ref, TOP1_TIE);
    const int    am     = argmax(lp, lc_context_n_vocab(c));
    if (d > r->worst_ref) r->worst_ref = d;
    r->n_top1++;
    r->top1_same += am == ref[0].id;
    if (n == f->n_ids)
        fprintf(stderr,
                "%-13s %4d ids  %-15s (%3d steps)  top-1 %6d (ref %6d)  max|dlogprob| "
                "%.2e%s\n",
                f->name, n, how, steps, am, ref[0].id, d,
                lc_test_failures > before ? "  FAILED" : "");
    return d;
}

int main(void) {
    REQUIRE_QWEN_MODEL();
    const double t_start = now_s();

    static fixture_t fx[MAX_PROMPTS];
    const int        n_fx = read_fixtures(QWEN_FIXTURE_PATH, fx, MAX_PROMPTS);
    CHECK(n_fx >= 3);
    if (n_fx < 3) TEST_END();

    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CUDA;
    lc_model *gpu      = NULL;
    int       rc       = lc_model_load(QWEN_MODEL_PATH, &mp, &gpu);
    if (rc == LC_ERR_UNSUPPORTED) {
        fprintf(stderr, "no CUDA device: %s\n", lc_last_error());
        free_fixtures(fx, n_fx);
        return 77;
    }
    CHECKF(rc == LC_OK && gpu, "load on cuda: %s (%s)", lc_status_str(rc), lc_last_error());
    if (!gpu) {
        free_fixtures(fx, n_fx);
        TEST_END();
    }
    fprintf(stderr, "model loaded on the GPU in %.1f s\n", now_s() - t_start);
    lc_model_info info;
    check_qwen_info(gpu, &info);
    CHECK(info.device == LC_DEVICE_CUDA);

    static result_t res[MAX_PROMPTS];
    memset(res, 0, sizeof res);

    /* every matrix in bf16: the looser bound */
    {
        lc_model_params bp = lc_model_default_params();
        bp.device = LC_DEVICE_CUDA, bp.weights = LC_WEIGHTS_BF16;
        lc_model *gb = NULL;
        CHECKF(lc_model_load(QWEN_MODEL_PATH, &bp, &gb) == LC_OK, "bf16 load: %s",
               lc_last_error());
        lc_context   *cb = gb ? make_context(gb, N_CTX, 0, 0) : NULL;
        const int32_t nv = cb ? lc_context_n_vocab(cb) : 0;
        double       *lb = nv > 0 ? malloc(sizeof(double) * (size_t)nv) : NULL;
        CHECK(cb == NULL || lb != NULL);
        for (int i = 0; cb && lb && i < n_fx; i++) {
            int steps;
            if (!eval_prompt(cb, fx[i].ids, fx[i].n_ids, true, lc_context_default_params().n_batch,
                             lb, &steps))
                continue;
            double worst = 0;
            for (int k = 0; k < TOP_COMPARE && k < fx[i].n_top; k++) {
                const double d = fabs(lb[fx[i].top[k].id] - fx[i].top[k].lp);
                if (d > worst) worst = d;
            }
            res[i].worst_bf16 = worst;
            fprintf(stderr, "%-13s bf16 weights: max|dlogprob| %.2e, top-1 %s\n", fx[i].name,
                    worst, argmax(lb, nv) == fx[i].top[0].id ? "same" : "differs");
            CHECKF(worst <= TOL_BF16, "%s bf16 weights: max|dlogprob| %.3g > %g", fx[i].name,
                   worst, TOL_BF16);
        }
        free(lb);
        if (cb) lc_context_free(cb);
        lc_model_free(gb);
    }

    /* the CPU backend with the GPU's f16 weights, for the one-chunk log-probs */
    lc_model *cpu16 = NULL;
    {
        lc_model_params hp = lc_model_default_params();
        hp.device = LC_DEVICE_CPU, hp.weights = LC_WEIGHTS_F16;
        CHECKF(lc_model_load(QWEN_MODEL_PATH, &hp, &cpu16) == LC_OK, "cpu f16 load: %s",
               lc_last_error());
    }
    lc_context *c_f16 = cpu16 ? make_context(cpu16, N_CTX, 0, 0) : NULL;
    CHECK(c_f16 != NULL);

    const int32_t def_batch = lc_context_default_params().n_batch;
    lc_context   *g_def     = make_context(gpu, N_CTX, 0, 0);
    lc_context   *g_small   = make_context(gpu, N_CTX, 32, 0);
    lc_context   *g_prefix  = make_context(gpu, N_CTX, 16, 0);
    lc_context   *g_multi   = make_context(gpu, N_CTX, 0, 4);
    const int32_t n_vocab   = g_def ? lc_context_n_vocab(g_def) : 0;
    double       *lp        = n_vocab > 0 ? malloc(sizeof(double) * (size_t)n_vocab) : NULL;
    double       *lpc       = n_vocab > 0 ? malloc(sizeof(double) * (size_t)n_vocab) : NULL;
    CHECK(n_vocab == 151936);
    CHECK(g_def && g_small && g_prefix && g_multi && lp && lpc);
    int greedy_same = 0, batch_same = 0;
    if (g_def && g_small && g_prefix && g_multi && lp && lpc) {
        for (int i = 0; i < n_fx; i++) {
            fixture_t *f = &fx[i];
            result_t  *r = &res[i];
            int        steps;
            char       how[64];
            snprintf(how, sizeof how, "n_batch %d", def_batch);
            const bool one =
                eval_vs_ref(g_def, f, f->n_ids, def_batch, f->top, f->n_top, how, lp, r) >= 0;
            if (one && c_f16 &&
                eval_prompt(c_f16, f->ids, f->n_ids, true, def_batch, lpc, &steps)) {
                pair_t top[TOP_COMPARE];
                top_n(lpc, n_vocab, top, TOP_COMPARE);
                char what[128];
                snprintf(what, sizeof what, "cuda vs cpu f16 %.63s", f->name);
                const double d = compare_top(what, lp, n_vocab, top, TOP_COMPARE, TOP1_TIE);
                r->worst_cpu   = d;
                fprintf(stderr, "%-13s %4d ids  gpu vs cpu f16                           "
                        "max|dlogprob| %.2e\n", f->name, f->n_ids, d);
            }
            eval_vs_ref(g_small, f, f->n_ids, 32, f->top, f->n_top, "n_batch 32", lp, r);

            /* the prefixes of the paragraph, chunks of 16 */
            double pmax = 0.0;
            for (int j = 0; j < f->n_prefix; j++) {
                const prefix_t *p = &f->prefix[j];
                CHECK(p->len <= f->n_ids);
                if (p->len > f->n_ids) continue;
                snprintf(how, sizeof how, "prefix %d n_batch 16", p->len);
                const double d = eval_vs_ref(g_prefix, f, p->len, 16, p->top, p->k, how, lp, r);
                if (d > pmax) pmax = d;
            }
            if (f->n_prefix > 0)
                fprintf(stderr, "%-13s %d prefixes (n_batch 16)                         "
                        "max|dlogprob| %.2e\n", f->name, f->n_prefix, pmax);

            /* greedy continuation against the reference's */
            int32_t gen[1][MAX_GREEDY];
            int     n_gen[1] = {0};
            run_greedy(g_def, &f, 1, GREEDY_N, true, gen, n_gen);
            r->greedy = check_greedy_ref("cuda", f, gen[0], n_gen[0], GREEDY_N, GREEDY_TIE);
            greedy_same += r->greedy == GREEDY_N;
        }
        CHECKF(greedy_same >= n_fx - 1,
               "greedy %d tokens equal to the reference for %d of %d prompts (want >= %d)",
               GREEDY_N, greedy_same, n_fx, n_fx - 1);

        /* the first three prompts batched vs each alone, both on the GPU */
        static int32_t a_out[3][MAX_GREEDY], b_out[3][MAX_GREEDY];
        int            n_a[3] = {0}, n_b[3] = {0};
        for (int i = 0; i < 3; i++) {
            fixture_t *f = &fx[i];
            run_greedy(g_def, &f, 1, GREEDY_N, false, &a_out[i], &n_a[i]);
        }
        fixture_t *three[3] = {&fx[0], &fx[1], &fx[2]};
        run_greedy(g_multi, three, 3, GREEDY_N, false, b_out, n_b);
        for (int i = 0; i < 3; i++) {
            int k = 0;
            while (k < n_a[i] && k < n_b[i] && a_out[i][k] == b_out[i][k]) k++;
            fprintf(stderr, "%-13s greedy %d tokens: gpu batched = gpu alone for %d\n",
                    fx[i].name, GREEDY_N, k);
            batch_same += k == GREEDY_N && n_b[i] == GREEDY_N;
        }
        CHECKF(batch_same >= 2, "greedy %d tokens identical batched and alone for %d of 3 "
               "prompts", GREEDY_N, batch_same);
    }

    static double fp8_worst[MAX_PROMPTS];
    static int    fp8_greedy[MAX_PROMPTS];
    check_fp8(gpu, fx, n_fx, fp8_worst, fp8_greedy);

    double worst = 0, worst_cpu = 0, worst_fp8 = 0;
    int    top1_same = 0, n_top1 = 0, fp8_greedy_all = 0;
    fprintf(stderr, "\nprompt         ids  max|dlogprob| vs ref  vs cpu f16  bf16 weights  "
            "top-1 = ref  greedy = ref  fp8 KV: max|d|  greedy\n");
    for (int i = 0; i < n_fx; i++) {
        const result_t *r = &res[i];
        fprintf(stderr, "%-13s %4d  %18.2e  %10.2e  %12.2e  %6d/%-4d  %6d/%-5d  %13.2e  %d/%d\n",
                fx[i].name, fx[i].n_ids, r->worst_ref, r->worst_cpu, r->worst_bf16, r->top1_same,
                r->n_top1, r->greedy, GREEDY_N, fp8_worst[i], fp8_greedy[i], GREEDY_N);
        worst_fp8 = fp8_worst[i] > worst_fp8 ? fp8_worst[i] : worst_fp8;
        fp8_greedy_all += fp8_greedy[i] == GREEDY_N;
        worst     = r->worst_ref > worst ? r->worst_ref : worst;
        worst_cpu = r->worst_cpu > worst_cpu ? r->worst_cpu : worst_cpu;
        top1_same += r->top1_same;
        n_top1 += r->n_top1;
    }
    fprintf(stderr,
            "qwen2.5-coder-1.5b on cuda: worst max|dlogprob| %.2e vs transformers, %.2e vs "
            "the cpu (f16 weights; tolerance %.0e); top-1 %d/%d; greedy equal %d/%d prompts, "
            "batched = alone %d/3; fp8 KV: worst %.2e (tolerance %.2g), greedy equal %d/%d; "
            "%.1f s\n",
            worst, worst_cpu, TOL_LOGPROB, top1_same, n_top1, greedy_same, n_fx, batch_same,
            worst_fp8, TOL_FP8, fp8_greedy_all, n_fx, now_s() - t_start);

    free(lp), free(lpc);
    if (g_def) lc_context_free(g_def);
    if (g_small) lc_context_free(g_small);
    if (g_prefix) lc_context_free(g_prefix);
    if (g_multi) lc_context_free(g_multi);
    if (c_f16) lc_context_free(c_f16);
    lc_model_free(cpu16);
    lc_model_free(gpu);
    free_fixtures(fx, n_fx);
    TEST_END();
}
