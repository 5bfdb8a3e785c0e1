/*
 * fuzz_serve_request.c — libFuzzer target for `longctx serve`'s request parsing
 * (tools/serve_request.c): the input is an HTTP body, parsed as the server parses it (jansson,
 * duplicate keys refused) and handed to serve_parse_request as a chat and as a completion
 * request. A request either comes back checked — a prompt of 1 .. n_ctx - 1 ids inside the
 * vocabulary, sampling inside the ranges the engine takes, stop strings within the API's
 * limits, top_logprobs only with logprobs — or is refused with a 4xx status (500 only for out
 * of memory) and a message, holding nothing. Anything else aborts; ASan and LeakSanitizer
 * catch the rest. The model (tokenizer and chat template) is SmolLM2 in models/, else
 * $LC_FUZZ_SERVE_GGUF, else the tiny qwen2 fixture.
 */
#include "longctx.h"
#include "serve_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 512

static lc_model   *g_model;
static lc_sampling g_defaults;

static void quiet_log(lc_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user;
}

static void load(void) {
    lc_log_set(quiet_log, NULL, LC_LOG_ERROR);
    const char *candidates[] = {"models/SmolLM2-135M-Instruct.Q4_1.gguf",
                                getenv("LC_FUZZ_SERVE_GGUF"), "tests/fixtures/tiny/qwen2.gguf"};
    for (size_t i = 0; i < 3 && !g_model; i++) {
        if (!candidates[i]) continue;
        lc_model_params mp = lc_model_default_params();
        mp.device          = LC_DEVICE_CPU;
        mp.n_threads       = 1;
        if (lc_model_load(candidates[i], &mp, &g_model) == LC_OK)
            fprintf(stderr, "fuzz_serve_request: model %s\n", candidates[i]);
    }
    if (!g_model) {
        fprintf(stderr, "fuzz_serve_request: no model found (run from the repository root)\n");
        abort();
    }
    g_defaults = lc_sampling_default();
}

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_serve_request: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void check(json_t *o, serve_kind kind, uint64_t serial) {
    const serve_env env = {g_model, "longctx", &g_defaults, serial, N_CTX};
    serve_request   r;
    serve_error     e;
    if (!serve_parse_request(&env, o, kind, &r, &e)) {
        REQUIRE((e.status >= 400 && e.status < 500) || e.status == 500);
        REQUIRE(e.msg[0] != '\0');
        REQUIRE(!r.prompt && !r.stop && r.n_prompt == 0 && r.n_stop == 0);
        return;
    }
    const int32_t V = lc_tokenizer_n_vocab(lc_model_tokenizer(g_model));
    REQUIRE(r.kind == kind);
    REQUIRE(r.n_prompt >= 1 && r.n_prompt < N_CTX && r.prompt);
    REQUIRE(r.req.prompt == r.prompt && r.req.n_prompt == r.n_prompt);
    for (size_t i = 0; i < r.n_prompt; i++) REQUIRE(r.prompt[i] >= 0 && r.prompt[i] < V);
    const lc_sampling *s = &r.req.sampling;
    REQUIRE(s->temperature >= 0 && s->temperature <= 2);
    REQUIRE(s->top_p > 0 && s->top_p <= 1);
    REQUIRE(s->min_p >= 0 && s->min_p <= 1);
    REQUIRE(s->top_k >= 0);
    REQUIRE(s->repeat_penalty > 0 && s->repeat_penalty <= 10);
    REQUIRE(r.req.max_tokens >= 1);
    REQUIRE(r.n_stop <= LC_MAX_STOP && r.req.n_stop == r.n_stop);
    for (size_t i = 0; i < r.n_stop; i++)
        REQUIRE(r.stop[i] && strlen(r.stop[i]) <= LC_MAX_STOP_LEN && r.req.stop[i] == r.stop[i]);
    REQUIRE(r.top_logprobs >= 0 && r.top_logprobs <= SERVE_MAX_TOP_LOGPROBS);
    REQUIRE(r.top_logprobs == 0 || r.logprobs);
    REQUIRE(kind == SERVE_CHAT || !r.logprobs);
    serve_request_clear(&r);
    REQUIRE(!r.prompt && !r.stop && r.n_prompt == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_model) load();
    json_error_t jerr;
    json_t      *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) return 0; /* the server answers 400 with jerr's line and column before parsing */
    check(o, SERVE_CHAT, size);
    check(o, SERVE_COMPLETION, size);
    json_decref(o);
    return 0;
}
