/*
 * test_qwen_logits_slow.c — the second reference model, Qwen2.5-Coder-1.5B-Instruct (qwen2,
 * Q4_K_M, 28 layers, 12/2 heads, head dim 128), on the CPU against peers nobody here wrote
 * (issue 21, part 1):
 *   0. the hyper-parameters lc_model_get_info reports;
 *   1. token ids on every string of tests/fixtures/tokenizer/qwen25coder.tok (qwen2
 *      pre-tokenizer; ids from llama.cpp, which transformers' GGUF tokenizer matches on all
 *      504 cases; written by scripts/gen_tokenizer_fixtures.py --preset qwen), parse_special
 *      on and off, and decode(encode(x)) == x;
 *   2. the chat prompt of the logits fixture from lc_model_chat_tokenize (the model's own
 *      template with its default system prompt) equals the reference's ids;
 *   3. for every prompt of tests/fixtures/logits/qwen/transformers.txt (Hugging Face
 *      transformers, GGUF dequantised to fp32, fp32 CPU forward; written by
 *      scripts/gen_logits_fixtures.py --preset qwen): prompt-only evaluation in one chunk and
 *      in chunks of 64 (and the paragraph's prefixes, chunks of 16): the same top-1 and max
 *      |d log-prob| over the reference's top 20 <= 1e-2;
 *   4. greedy continuation (32 tokens, ignore_eos): equal to the reference's, up to a step
 *      where the reference's best two log-probs are within 2e-2 (a near tie, after which the
 *      runs may part).
 * The largest |d log-prob| and the greedy agreement are printed.
 *
 * Needs models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf (`make model-qwen`, 1.1 GB, which
 * `make test` runs first); skips (exit 77) without it, or fails with LC_REQUIRE_MODEL=1 (as
 * `make test-release` sets). Loading dequantises to fp32: ~7 GB of host memory; ~75 s in a
 * Release build on 2 cores. Labelled slow (the _slow suffix): `make test-release` runs it,
 * `make test-asan` (-LE slow) does not. The same prompts on the GPU: test_qwen_logits_cuda.c.
 */
#define FIXTURE_PATH    QWEN_FIXTURE_PATH
#define TOK_FIXTURE     LC_SOURCE_DIR "/tests/fixtures/tokenizer/qwen25coder.tok"

#define MAX_TOP     64
#define MAX_GREEDY  64
#define MAX_PREFIX  32
#define MAX_PROMPTS 16
#define N_CTX       1024 /* the longest fixture prompt + 32 fits */
#define TOL_LOGPROB 1e-2
#define GREEDY_N    32
#define TIE_MARGIN  (2 * TOL_LOGPROB)

#include "qwen_model.h"

#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- 1. tokenizer fixture ---------------------------------------------------------------- */

static int hexval(int c) {
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

/* Every line "P|S <TAB> hex(text) <TAB> ids": encode with parse_special (S) or not (P) and
 * compare; also decode(encode(x)) == x (every byte has a token in Qwen's vocabulary). */
static void test_tokenizer_fixture(const lc_tokenizer *t) {
    FILE *f = fopen(TOK_FIXTURE, "rb");
    CHECKF(f != NULL, "cannot open %s", TOK_FIXTURE);
    if (!f) return;
    char *line = NULL;
    size_t lcap = 0;
    int n_cases = 0, n_equal = 0, n_round = 0;
    while (getline(&line, &lcap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab1 = strchr(line, '\t');
        char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        CHECKF(tab2 != NULL && (line[0] == 'P' || line[0] == 'S'), "malformed line in %s",
               TOK_FIXTURE);
        if (!tab2) continue;
        const bool special = line[0] == 'S';
        const size_t len = (size_t)(tab2 - tab1 - 1) / 2;
        char *text = malloc(len + 1);
        int32_t *want = malloc((strlen(tab2) + 1) * sizeof *want);
        if (!text || !want) {
            CHECK(false);
            free(text);
            free(want);
            break;
        }
        for (size_t i = 0; i < len; i++)
            text[i] = (char)(hexval(tab1[1 + 2 * i]) * 16 + hexval(tab1[2 + 2 * i]));
        text[len] = 0;
        size_t n_want = 0;
        for (char *p = tab2 + 1;;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            want[n_want++] = (int32_t)v;
            p = e;
        }
        n_cases++;
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = lc_tokenizer_encode(t, text, len, false, special, &ids, &n);
        bool eq = rc == LC_OK && n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
        n_equal += eq;
        if (!eq) {
            fprintf(stderr, "tokenizer case %d (%s) \"%.60s\": rc %d\n  got :", n_cases,
                    special ? "special" : "plain", text, rc);
            for (size_t k = 0; k < n && k < 40; k++)
                fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n  want:");
            for (size_t k = 0; k < n_want && k < 40; k++)
                fprintf(stderr, " %d", want[k]);
            fputc('\n', stderr);
        }
        if (rc == LC_OK) {
            size_t o = 0;
            bool rt = true;
            for (size_t k = 0; k < n && rt; k++) {
                size_t tl;
                const char *tb = lc_tokenizer_token_bytes(t, ids[k], &tl);
                rt = tb && o + tl <= len && memcmp(text + o, tb, tl) == 0;
                o += tl;
            }
            rt = rt && o == len;
            n_round += rt;
            CHECKF(rt, "round trip of tokenizer case %d", n_cases);
        }
        free(ids);
        free(text);
        free(want);
    }
    free(line);
    fclose(f);
    CHECKF(n_equal == n_cases, "token ids: %d of %d cases equal the reference", n_equal, n_cases);
    CHECK(n_cases >= 400);
    fprintf(stderr,
            "tokenizer: %d/%d cases equal to the reference (qwen25coder.tok), round "
            "trip %d/%d\n",
            n_equal, n_cases, n_round, n_cases);
}

/* ---- 2. chat prompt ----------------------------------------------------------------------- */

static void test_chat_prompt(const lc_model *m, const fixture_t *fx, int n_fx) {
    const fixture_t *f = NULL;
    for (int i = 0; i < n_fx; i++)
        if (!strcmp(fx[i].name, "chat_capital")) f = &fx[i];
    CHECKF(f != NULL, "no chat_capital prompt in %s", FIXTURE_PATH);
    if (!f) return;
    CHECK(lc_model_chat_template(m) == LC_CHAT_TEMPLATE_CHATML);
    const lc_chat_message msg = {"user", "What is the capital of France?"};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = lc_model_chat_tokenize(m, LC_CHAT_TEMPLATE_NONE, &msg, 1, true, &ids, &n);
    CHECKF(rc == LC_OK, "lc_model_chat_tokenize: %s (%s)", lc_status_str(rc), lc_last_error());
    const bool eq =
        rc == LC_OK && n == (size_t)f->n_ids && memcmp(ids, f->ids, n * sizeof *ids) == 0;
    CHECKF(eq, "chat prompt: %zu ids, reference %d (or different ids)", n, f->n_ids);
    fprintf(stderr, "chat prompt from the model's template: %zu ids, %s the reference's\n", n,
            eq ? "equal to" : "NOT equal to");
    free(ids);
}

/* ---- 3, 4. logits and greedy -------------------------------------------------------------- */

int main(void) {
    REQUIRE_QWEN_MODEL();
    const double t_start = now_s();

    static fixture_t fx[MAX_PROMPTS];
    int n_fx = read_fixtures(FIXTURE_PATH, fx, MAX_PROMPTS);
    CHECK(n_fx >= 4);
    if (n_fx < 1) TEST_END();

    lc_model_params mp = lc_model_default_params();
    mp.device = LC_DEVICE_CPU;
    lc_model *m = NULL;
    int rc = lc_model_load(QWEN_MODEL_PATH, &mp, &m);
    CHECKF(rc == LC_OK && m, "lc_model_load: %s (%s)", lc_status_str(rc), lc_last_error());
    if (rc != LC_OK) {
        free_fixtures(fx, n_fx);
        TEST_END();
    }
    const double t_loaded = now_s();
    fprintf(stderr, "model loaded in %.1f s\n", t_loaded - t_start);

    lc_model_info info;
    check_qwen_info(m, &info);

    test_tokenizer_fixture(lc_model_tokenizer(m));
    test_chat_prompt(m, fx, n_fx);

    const int32_t small_batch = 64;
    const int32_t prefix_batch = 16;
    lc_context *c_def = make_context(m, N_CTX, 0, 0);
    lc_context *c_small = make_context(m, N_CTX, small_batch, 0);
    int32_t n_vocab = c_def ? lc_context_n_vocab(c_def) : 0;
    double *lp = n_vocab > 0 ? malloc((size_t)n_vocab * sizeof *lp) : NULL;
    CHECK(n_vocab == 151936);
    CHECK(lp != NULL);
    const int32_t def_batch = lc_context_default_params().n_batch;
    double worst = 0.0;
    int greedy_ok = 0, top1_ok = 0, n_top1 = 0;

    if (c_def && c_small && lp) {
        for (int i = 0; i < n_fx; i++) {
            fixture_t *f = &fx[i];
            char what[128];
            int steps = 0;
            for (int pass = 0; pass < 2; pass++) {
                lc_context *c = pass == 0 ? c_def : c_small;
                const int32_t nb = pass == 0 ? def_batch : small_batch;
                const int before = lc_test_failures;
                if (!eval_prompt(c, f->ids, f->n_ids, true, nb, lp, &steps)) continue;
                snprintf(what, sizeof what, "%.63s n_batch=%d", f->name, nb);
                double d = compare_top(what, lp, n_vocab, f->top, f->n_top, TIE_MARGIN);
                if (d > worst) worst = d;
                n_top1++;
                top1_ok += argmax(lp, n_vocab) == f->top[0].id;
                fprintf(stderr,
                        "%-13s %4d ids  n_batch %4d (%3d steps)  top-1 %6d (ref %6d)  "
                        "max|dlogprob| %.2e%s\n",
                        f->name, f->n_ids, nb, steps, argmax(lp, n_vocab), f->top[0].id, d,
                        lc_test_failures > before ? "  FAILED" : "");
            }

            /* the prefixes of the paragraph, chunked */
            double pmax = 0.0;
            lc_context *c_prefix = f->n_prefix > 0 ? make_context(m, N_CTX, prefix_batch, 0) : NULL;
            for (int j = 0; c_prefix && j < f->n_prefix; j++) {
                const prefix_t *p = &f->prefix[j];
                CHECK(p->len <= f->n_ids);
                if (p->len > f->n_ids) continue;
                if (!eval_prompt(c_prefix, f->ids, p->len, true, prefix_batch, lp, &steps))
                    continue;
                snprintf(what, sizeof what, "%.63s prefix %d n_batch=%d", f->name, p->len,
                         prefix_batch);
                double d = compare_top(what, lp, n_vocab, p->top, p->k, TIE_MARGIN);
                if (d > pmax) pmax = d;
                n_top1++;
                top1_ok += argmax(lp, n_vocab) == p->top[0].id;
            }
            if (c_prefix) lc_context_free(c_prefix);
            if (f->n_prefix > 0) {
                fprintf(stderr,
                        "%-13s %d prefixes (n_batch %d)                        "
                        "max|dlogprob| %.2e\n",
                        f->name, f->n_prefix, prefix_batch, pmax);
                if (pmax > worst) worst = pmax;
            }

            /* greedy continuation */
            int32_t gen_buf[1][MAX_GREEDY];
            int n_gen_buf[1] = {0};
            run_greedy(c_def, &f, 1, GREEDY_N, true, gen_buf, n_gen_buf);
            const int k = check_greedy_ref("cpu", f, gen_buf[0], n_gen_buf[0], GREEDY_N,
                                           TIE_MARGIN);
            greedy_ok += k == GREEDY_N;
        }
    }
    fprintf(stderr,
            "qwen2.5-coder-1.5b: worst max|dlogprob| %.2e (tolerance %.0e); top-1 %d/%d; "
            "greedy equal %d/%d prompts; %.1f s (load %.1f s)\n",
            worst, TOL_LOGPROB, top1_ok, n_top1, greedy_ok, n_fx, now_s() - t_start,
            t_loaded - t_start);

    free(lp);
    if (c_small) lc_context_free(c_small);
    if (c_def) lc_context_free(c_def);
    lc_model_free(m);
    free_fixtures(fx, n_fx);
    TEST_END();
}
