/*
 * test_api_contract.c — the public API's contract for careless callers (issue 20 items 5 and
 * 7): every NULL pointer with a non-zero count is LC_ERR_INVALID_ARG (never a null load);
 * lc_context_step never drops an event (cap too small fails before anything advances); a
 * model freed before its contexts stays alive until the last context is freed (ASan would
 * report a use-after-free otherwise); contexts of one model on two threads (CPU backend)
 * match the serial run.
 */
#include "longctx.h"
#include "test_util.h"

#include <pthread.h>
#include <string.h>

#define MODEL LC_SOURCE_DIR "/tests/fixtures/tiny/qwen2.gguf"

static lc_model *load(void) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1;
    lc_model *m        = NULL;
    CHECKF(lc_model_load(MODEL, &mp, &m) == LC_OK, "load: %s", lc_last_error());
    return m;
}

static lc_context *make_ctx(lc_model *m, int32_t n_seq) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 128;
    cp.n_seq_max         = n_seq;
    cp.page_size         = 16;
    lc_context *c        = NULL;
    CHECKF(lc_context_create(m, &cp, &c) == LC_OK, "context: %s", lc_last_error());
    return c;
}

static const int32_t k_prompt_a[] = {5, 17, 99, 23, 42, 7};
static const int32_t k_prompt_b[] = {11, 3, 200, 64};

static lc_request greedy(const int32_t *ids, size_t n, int32_t max_tokens) {
    lc_request r = {0};
    r.prompt     = ids;
    r.n_prompt   = n;
    r.max_tokens = max_tokens;
    r.sampling   = lc_sampling_default();
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    return r;
}

/* Run to completion with room for cap events per step; tokens of every sequence collected
 * by id (ids 1 and 2). Returns the number of finish events seen. */
static int run_all(lc_context *c, size_t cap, int32_t out[3][16], int32_t n_out[3]) {
    lc_event ev[8];
    int      finishes = 0;
    for (int step = 0; step < 200; step++) {
        size_t n = 0;
        int    st = lc_context_step(c, ev, cap, &n);
        CHECKF(st == LC_OK, "step: %s", lc_last_error());
        if (st != LC_OK || n == 0) break;
        for (size_t i = 0; i < n; i++) {
            const int32_t id = ev[i].seq_id;
            if (id >= 1 && id <= 2 && ev[i].token >= 0 && n_out[id] < 16)
                out[id][n_out[id]++] = ev[i].token;
            if (ev[i].finish != LC_FINISH_NONE) finishes++;
        }
    }
    return finishes;
}

typedef struct thread_job {
    lc_model *m;
    int32_t   tokens[16];
    int32_t   n;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    lc_context *c = make_ctx(j->m, 1);
    if (!c) return NULL;
    lc_request r = greedy(k_prompt_a, 6, 8);
    int32_t    id;
    if (lc_context_add(c, &r, &id) == LC_OK) {
        int32_t out[3][16], n_out[3] = {0, 0, 0};
        run_all(c, 8, out, n_out);
        memcpy(j->tokens, out[1], sizeof(int32_t) * (size_t)n_out[1]);
        j->n = n_out[1];
    }
    lc_context_free(c);
    return NULL;
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    lc_model *m = load();
    if (!m) TEST_END();

    /* ---- NULL pointers with non-zero counts ---- */
    {
        lc_context *c = make_ctx(m, 2);
        int32_t     id;
        lc_request  r = greedy(NULL, 4, 1);
        CHECK(lc_context_add(c, &r, &id) == LC_ERR_INVALID_ARG);
        r                = greedy(k_prompt_a, 6, 1);
        r.n_stop         = 2;
        r.stop           = NULL;
        CHECK(lc_context_add(c, &r, &id) == LC_ERR_INVALID_ARG);
        /* stop strings: bounded count and length */
        char *big = malloc(LC_MAX_STOP_LEN + 2);
        memset(big, 'x', LC_MAX_STOP_LEN + 1);
        big[LC_MAX_STOP_LEN + 1] = '\0';
        const char *stops[LC_MAX_STOP + 1];
        for (int i = 0; i <= LC_MAX_STOP; i++) stops[i] = "END";
        r.stop   = stops;
        r.n_stop = LC_MAX_STOP + 1;
        CHECK(lc_context_add(c, &r, &id) == LC_ERR_INVALID_ARG);
        stops[3] = big;
        r.n_stop = 4;
        CHECK(lc_context_add(c, &r, &id) == LC_ERR_INVALID_ARG);
        big[LC_MAX_STOP_LEN] = '\0'; /* exactly the limit: accepted */
        CHECK(lc_context_add(c, &r, &id) == LC_OK && lc_context_remove(c, id) == LC_OK);
        free(big);
        size_t n = 99;
        CHECK(lc_context_step(c, NULL, 4, &n) == LC_ERR_INVALID_ARG);
        CHECK(lc_context_step(c, NULL, 0, NULL) == LC_ERR_INVALID_ARG);
        CHECK(lc_context_score(c, NULL, 4, NULL, 0, NULL) == LC_ERR_INVALID_ARG);
        lc_score_range rg = {1, 3};
        CHECK(lc_context_score(c, k_prompt_a, 6, &rg, 1, NULL) == LC_ERR_INVALID_ARG);
        CHECK(lc_context_score(c, k_prompt_a, 6, NULL, 1, NULL) == LC_ERR_INVALID_ARG);
        lc_context_free(c);

        const lc_tokenizer *t = lc_model_tokenizer(m);
        int32_t            *ids;
        size_t              n_ids;
        CHECK(lc_tokenizer_encode(t, NULL, 5, false, false, &ids, &n_ids) == LC_ERR_INVALID_ARG);
        char *out = NULL;
        CHECK(lc_chat_format(LC_CHAT_TEMPLATE_CHATML, NULL, 2, true, &out) == LC_ERR_INVALID_ARG);
        lc_chat_message bad[1] = {{"user", NULL}};
        CHECK(lc_chat_format(LC_CHAT_TEMPLATE_CHATML, bad, 1, true, &out) == LC_ERR_INVALID_ARG);
        lc_chat_message bad_role[1] = {{NULL, "hi"}};
        CHECK(lc_chat_format(LC_CHAT_TEMPLATE_CHATML, bad_role, 1, true, &out) ==
              LC_ERR_INVALID_ARG);
        CHECK(lc_model_chat_format(m, LC_CHAT_TEMPLATE_CHATML, NULL, 1, true, &out) ==
              LC_ERR_INVALID_ARG);
        lc_gguf *g = NULL;
        CHECK(lc_gguf_open_memory(NULL, 64, &g) == LC_ERR_INVALID_ARG);
        CHECK(lc_gguf_open(NULL, &g) != LC_OK);
        char buf[8];
        CHECK(lc_model_device_name(m, NULL, 8) == LC_ERR_INVALID_ARG);
        CHECK(lc_model_device_name(m, buf, 0) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_help("infinitehip", NULL, 16) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_help("infinitehip", buf, 0) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_help("infinitehip", buf, sizeof buf) == LC_ERR_INVALID_ARG); /* too small */
        CHECK(lc_attn_help("nope", buf, sizeof buf) == LC_ERR_NOT_FOUND);
        CHECK(lc_attn_check("nope", NULL, NULL, 0) == LC_ERR_NOT_FOUND);
        CHECK(lc_attn_check("infinitehip", NULL, buf, sizeof buf) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_check("infinitehip", "sink", NULL, 0) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_check("hip", "k=", NULL, 0) == LC_ERR_INVALID_ARG);
        CHECK(lc_attn_check("tokenselect", "preset=", NULL, 0) == LC_ERR_NOT_FOUND);
        CHECK(lc_attn_check(NULL, NULL, buf, sizeof buf) == LC_OK && buf[0] == 0);
        lc_detok d = {{0}, 0};
        size_t   nb;
        CHECK(lc_detok_push(&d, t, 5, NULL, 64, &nb) == LC_ERR_INVALID_ARG);
    }

    /* ---- events are never dropped ---- */
    int32_t ref[3][16], n_ref[3] = {0, 0, 0};
    {
        lc_context *c = make_ctx(m, 2);
        int32_t     a, b;
        lc_request  ra = greedy(k_prompt_a, 6, 5), rb = greedy(k_prompt_b, 4, 7);
        CHECK(lc_context_add(c, &ra, &a) == LC_OK && a == 1);
        CHECK(lc_context_add(c, &rb, &b) == LC_OK && b == 2);
        /* cap 1 with two live sequences: refused, nothing advanced */
        lc_event ev[2];
        size_t   n = 99;
        CHECK(lc_context_step(c, ev, 1, &n) == LC_ERR_INVALID_ARG);
        CHECK(n == 0);
        CHECK(strstr(lc_last_error(), "cap") != NULL);
        CHECK(lc_context_logits(c, a) == NULL); /* nothing evaluated */
        /* now with room: both sequences report every token and their finish */
        CHECK(run_all(c, 2, ref, n_ref) == 2);
        CHECK(n_ref[1] == 5 && n_ref[2] == 7);
        lc_context_free(c);
    }
    /* the same two sequences alone give the same tokens (no event lost, nothing skipped) */
    {
        lc_context *c = make_ctx(m, 1);
        int32_t     id, out[3][16], n_out[3] = {0, 0, 0};
        lc_request  rb = greedy(k_prompt_b, 4, 7);
        CHECK(lc_context_add(c, &rb, &id) == LC_OK);
        run_all(c, 1, out, n_out); /* id 1 here */
        CHECK(n_out[1] == 7 && memcmp(out[1], ref[2], sizeof(int32_t) * 7) == 0);
        lc_context_free(c);
    }

    /* ---- lifetime: the model may be freed before its contexts ---- */
    {
        lc_context *c = make_ctx(m, 1);
        lc_model_free(m); /* the caller's handle is gone; the context holds the model */
        m = NULL;
        int32_t    id, out[3][16], n_out[3] = {0, 0, 0};
        lc_request ra = greedy(k_prompt_a, 6, 5);
        CHECK(lc_context_add(c, &ra, &id) == LC_OK);
        run_all(c, 1, out, n_out);
        CHECK(n_out[1] == 5 && memcmp(out[1], ref[1], sizeof(int32_t) * 5) == 0);
        lc_context_free(c); /* frees the model too (LeakSanitizer checks) */
    }

    /* ---- two contexts of one model on two threads (CPU) match the serial run ---- */
    {
        m = load();
        thread_job j[2] = {{m, {0}, 0}, {m, {0}, 0}};
        pthread_t  th[2];
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &j[i]);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++)
            CHECK(j[i].n == 8 && memcmp(j[i].tokens, ref[1], sizeof(int32_t) * 5) == 0);
        lc_model_free(m);
    }
    TEST_END();
}
