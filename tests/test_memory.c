/*
 * test_memory.c — memory is checked before it is allocated, and the RoPE table is sized by the
 * positions used (issue 20, items 2 and 3): the host memory query; the weights estimate equals
 * what lc_model_load then holds (CPU f32, f16 and native); the backend's mem_info, also through the
 * profiling wrapper; a context whose KV cache cannot fit is refused at once with the numbers and
 * what would fit, and overcommit skips the check; a context of n_ctx = 2^30 with a small KV
 * starts with a small RoPE table, which grows (mid-decode and for lc_context_score) to the same
 * logits as a table made large up front. Uses a generated "tiny" model (no download).
 */
#include "engine/engine.h"
#include "model/budget.h"
#include "model/model.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_path[512];

static lc_model *load(lc_weight_format w, int profile) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 2;
    mp.weights         = w;
    mp.profile         = profile;
    lc_model *m        = NULL;
    const int st       = lc_model_load(g_path, &mp, &m);
    CHECKF(st == LC_OK, "%s", lc_last_error());
    return m;
}

static void test_host_memory(void) {
    uint64_t avail = 0, total = 0;
    CHECK(lc_host_memory(&avail, &total) == LC_OK);
    CHECKF(avail > 0 && total > 0 && avail <= total, "available %llu, total %llu",
           (unsigned long long)avail, (unsigned long long)total);
    CHECK(lc_host_memory(NULL, NULL) == LC_OK);
}

static void test_weights(void) {
    const lc_weight_format fmts[] = {LC_WEIGHTS_F32, LC_WEIGHTS_F16, LC_WEIGHTS_NATIVE};
    for (int i = 0; i < 2; i++) {
        lc_model *m = load(fmts[i], LC_PROFILE_OFF);
        if (!m) continue;
        lc_model_info info;
        lc_model_get_info(m, &info);
        CHECKF(lc_budget_weight_bytes(m) == info.weight_bytes, "estimate %llu, held %llu",
               (unsigned long long)lc_budget_weight_bytes(m),
               (unsigned long long)info.weight_bytes);
        CHECK(lc_budget_check_weights(m) == LC_OK); /* a tiny model fits */
        lc_model_free(m);
    }
    /* the backend's memory query, through the profiling wrapper too */
    lc_model *m = load(LC_WEIGHTS_AUTO, LC_PROFILE_MEMORY);
    if (m) {
        uint64_t f = 0, t = 0;
        CHECK(m->backend->mem_info != NULL);
        CHECK(m->backend->mem_info && m->backend->mem_info(m->backend, &f, &t) == LC_OK);
        CHECK(f > 0 && t >= f);
        lc_model_free(m);
    }
}

static void test_context_refused(lc_model *m) {
    uint64_t avail = 0;
    CHECK(lc_host_memory(&avail, NULL) == LC_OK);
    lc_context_params p = lc_context_default_params();
    p.kv_tokens         = (int64_t)1 << 36; /* 512 bytes a token: 32 TiB */
    lc_context *c       = (lc_context *)1;
    CHECK(lc_context_create(m, &p, &c) == LC_ERR_NOMEM);
    CHECK(c == NULL);
    const char *e = lc_last_error();
    CHECKF(strstr(e, "the KV cache for 68,719,476,736 tokens needs 32.0 TiB") != NULL, "%s", e);
    CHECKF(strstr(e, "of host memory") && strstr(e, "at most ~") && strstr(e, "--overcommit"),
           "%s", e);
    /* the tokens that fit, by the message, do fit (and a few more than twice them do not) */
    const char *q = strstr(e, "at most ~");
    if (q) {
        char    digits[32];
        size_t  k = 0;
        for (q += 9; *q && k + 1 < sizeof digits; q++)
            if (*q >= '0' && *q <= '9') digits[k++] = *q;
            else if (*q != ',') break;
        digits[k]           = '\0';
        const long long fit = atoll(digits);
        lc_ctx_budget   b;
        p.kv_tokens = fit;
        lc_budget_context(m, &p, &b);
        /* (the available memory moves a little between the two reads) */
        CHECKF(fit > 0 && b.kv_bytes + b.rope_bytes + b.ws_bytes + b.host_bytes <=
                              avail + avail / 20, "%lld tokens", fit);
        p.kv_tokens = 2 * fit + 1000000;
        CHECK(lc_budget_check_context(m, &p) == LC_ERR_NOMEM);
    }
    /* overcommit skips the check: 1.5x the available memory is reserved (not touched) */
    p             = lc_context_default_params();
    p.kv_tokens   = (int64_t)(avail / 512 * 3 / 2);
    CHECK(lc_context_create(m, &p, &c) == LC_ERR_NOMEM);
    p.overcommit = true;
    c            = NULL;
    const int st = lc_context_create(m, &p, &c);
    /* a host that refuses to reserve it (strict overcommit) fails in the allocation instead */
    CHECKF(st == LC_OK || (st == LC_ERR_NOMEM && !strstr(lc_last_error(), "--overcommit")),
           "%d: %s", st, lc_last_error());
    lc_context_free(c);
}

/* Generate greedily from prompt in c; writes the tokens and the last logits. */
static int run(lc_context *c, const int32_t *prompt, size_t n, int32_t max_tokens,
               int32_t *out_tokens, float *logits, int32_t V) {
    lc_request r = {.prompt = prompt, .n_prompt = n, .max_tokens = max_tokens,
                    .sampling = lc_sampling_default(), .ignore_eos = true};
    r.sampling.temperature = 0;
    int32_t seq            = -1;
    int     st             = lc_context_add(c, &r, &seq);
    int32_t n_out          = 0;
    for (int guard = 0; st == LC_OK && guard < 100000; guard++) {
        lc_event ev[4];
        size_t   n_ev = 0;
        st            = lc_context_step(c, ev, 4, &n_ev);
        if (st != LC_OK || n_ev == 0) break;
        if (ev[0].token >= 0 && n_out < max_tokens) out_tokens[n_out++] = ev[0].token;
        if (ev[0].finish != LC_FINISH_NONE) break;
    }
    const float *lg = st == LC_OK ? lc_context_logits(c, seq) : NULL;
    if (lg) memcpy(logits, lg, sizeof(float) * (size_t)V);
    else if (st == LC_OK) st = LC_ERR_INTERNAL;
    lc_context_remove(c, seq);
    return st;
}

static void test_rope_by_use(lc_model *m) {
    const int32_t V = m->hp.n_vocab;
    /* n_ctx 2^30 with a small KV: the table starts small (the old one: 2^30 rows, 32 GiB) */
    lc_context_params p = lc_context_default_params();
    p.n_ctx             = 1 << 30;
    p.kv_tokens         = 8192;
    lc_context *a = NULL, *b = NULL;
    CHECKF(lc_context_create(m, &p, &a) == LC_OK, "%s", lc_last_error());
    CHECKF(lc_context_create(m, &p, &b) == LC_OK, "%s", lc_last_error());
    if (!a || !b) {
        lc_context_free(a), lc_context_free(b);
        return;
    }
    CHECK(lc_context_rope_rows(a) == LC_ROPE_MIN_ROWS);
    CHECK(lc_context_rope_reserve(b, 9000) == LC_OK); /* b: large from the start */
    CHECK(lc_context_rope_rows(b) == 9000);
    /* a prompt ending just below the table's end: decode crosses it and the table grows */
    const size_t n  = LC_ROPE_MIN_ROWS - 6;
    int32_t     *pr = malloc(sizeof(int32_t) * n);
    for (size_t i = 0; i < n; i++) pr[i] = (int32_t)((i * 2654435761u) % (uint32_t)V);
    int32_t ta[16] = {0}, tb[16] = {0};
    float  *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    CHECKF(run(a, pr, n, 16, ta, la, V) == LC_OK, "%s", lc_last_error());
    CHECKF(run(b, pr, n, 16, tb, lb, V) == LC_OK, "%s", lc_last_error());
    CHECKF(lc_context_rope_rows(a) == 2 * LC_ROPE_MIN_ROWS, "%d", lc_context_rope_rows(a));
    CHECK(lc_context_rope_rows(b) == 9000);
    CHECK(memcmp(ta, tb, sizeof ta) == 0);
    double diff = 0;
    for (int32_t v = 0; v < V; v++) diff = fmax(diff, fabs((double)la[v] - lb[v]));
    CHECKF(diff == 0, "logits differ by %g after the table grew", diff);
    lc_context_free(a);
    /* lc_context_score grows it too: a fresh small table against b's */
    CHECK(lc_context_create(m, &p, &a) == LC_OK);
    const int64_t  ns = LC_ROPE_MIN_ROWS + 100;
    int32_t       *st = malloc(sizeof(int32_t) * (size_t)ns);
    double        *ga = calloc((size_t)ns, sizeof(double)), *gb = calloc((size_t)ns, sizeof(double));
    for (int64_t i = 0; i < ns; i++) st[i] = (int32_t)((i * 40503u + 7) % (uint32_t)V);
    const lc_score_range rg = {ns - 150, ns};
    if (a) {
        CHECKF(lc_context_score(a, st, ns, &rg, 1, ga) == LC_OK, "%s", lc_last_error());
        CHECK(lc_context_rope_rows(a) == 2 * LC_ROPE_MIN_ROWS);
    }
    CHECKF(lc_context_score(b, st, ns, &rg, 1, gb) == LC_OK, "%s", lc_last_error());
    bool same = true;
    for (int64_t i = rg.begin; i < rg.end; i++) same = same && ga[i] == gb[i] && isfinite(ga[i]);
    CHECK(same);
    /* growth by an eighth (at least LC_ROPE_MIN_ROWS rows), or to what is asked if more */
    CHECK(lc_context_rope_reserve(b, 9001) == LC_OK);
    CHECKF(lc_context_rope_rows(b) == 9000 + LC_ROPE_MIN_ROWS, "%d", lc_context_rope_rows(b));
    CHECK(lc_context_rope_reserve(b, 40000) == LC_OK && lc_context_rope_rows(b) == 40000);
    CHECK(lc_context_rope_reserve(b, 40001) == LC_OK);
    CHECKF(lc_context_rope_rows(b) == 45000, "%d", lc_context_rope_rows(b));
    lc_context_free(a);
    lc_context_free(b);
    p.n_ctx = 100; /* a context smaller than the first table: the table is n_ctx rows, and
                      never grows past n_ctx */
    CHECK(lc_context_create(m, &p, &a) == LC_OK);
    if (a) CHECK(lc_context_rope_rows(a) == 100);
    if (a) CHECK(lc_context_rope_reserve(a, 5000) == LC_OK && lc_context_rope_rows(a) == 100);
    lc_context_free(a);
    free(pr), free(la), free(lb), free(st), free(ga), free(gb);
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    const char *dir = getenv("TMPDIR");
    snprintf(g_path, sizeof g_path, "%s/lc_test_memory_%d.gguf", dir && *dir ? dir : "/tmp",
             (int)getpid());
    lc_gen_params gp = {.config = "tiny", .path = g_path, .type = LC_GEN_Q8_0, .seed = 3};
    if (lc_model_generate(&gp) != LC_OK) {
        fprintf(stderr, "cannot generate the tiny model: %s\n", lc_last_error());
        return 1;
    }
    test_host_memory();
    test_weights();
    lc_model *m = load(LC_WEIGHTS_AUTO, LC_PROFILE_OFF);
    if (m) {
        test_context_refused(m);
        test_rope_by_use(m);
        lc_model_free(m);
    }
    unlink(g_path);
    TEST_END();
}
