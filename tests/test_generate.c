/*
 * test_generate.c — end-to-end generation on the real model (CPU): the greedy chat answer to
 * "What is the capital of France?" mentions Paris; stop strings cut the output and are not
 * emitted; max_tokens and the context limit end a sequence; two sequences batched in one
 * context generate exactly what each generates alone; bad requests are rejected with the
 * numbers in the message.
 */
#include "longctx.h"
#include "test_util.h"

#include <string.h>

typedef struct out {
    char      text[4096];
    size_t    len;
    int32_t   tokens[512];
    int32_t   n_tokens;
    lc_finish finish;
} out;

/* Run live sequences to completion, collecting per-sequence output. */
static int drain(lc_context *c, const int32_t *ids, out *outs, int n) {
    for (int guard = 0; guard < 100000; guard++) {
        lc_event ev[8];
        size_t   n_ev;
        int      st = lc_context_step(c, ev, 8, &n_ev);
        if (st != LC_OK) return st;
        if (n_ev == 0) return LC_OK;
        for (size_t e = 0; e < n_ev; e++)
            for (int i = 0; i < n; i++) {
                if (ev[e].seq_id != ids[i]) continue;
                out *o = &outs[i];
                if (ev[e].token >= 0 && o->n_tokens < 512) o->tokens[o->n_tokens++] = ev[e].token;
                if (o->len + ev[e].text_len < sizeof o->text) {
                    memcpy(o->text + o->len, ev[e].text, ev[e].text_len);
                    o->len += ev[e].text_len;
                    o->text[o->len] = '\0';
                }
                if (ev[e].finish != LC_FINISH_NONE) o->finish = ev[e].finish;
            }
        bool all = true;
        for (int i = 0; i < n; i++) all = all && outs[i].finish != LC_FINISH_NONE;
        if (all) return LC_OK;
    }
    return LC_ERR_INTERNAL;
}

static int32_t *encode(const lc_model *m, const char *text, size_t *n) {
    int32_t *ids = NULL;
    CHECK(lc_tokenizer_encode(lc_model_tokenizer(m), text, strlen(text), false, true, &ids, n) == LC_OK);
    return ids;
}

int main(void) {
    REQUIRE_MODEL(LC_MODEL_PATH);
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    lc_model *m;
    CHECK(lc_model_load(LC_MODEL_PATH, &mp, &m) == LC_OK);
    if (!m) TEST_END();

    /* 1. the capital of France */
    lc_chat_message msg = {"user", "What is the capital of France?"};
    char           *prompt;
    CHECK(lc_model_chat_format(m, LC_CHAT_TEMPLATE_NONE, &msg, 1, true, &prompt) == LC_OK);
    size_t   n_ids;
    int32_t *ids = encode(m, prompt, &n_ids);
    free(prompt);
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 512;
    cp.n_seq_max         = 2;
    cp.n_batch           = 16; /* several prefill chunks */
    lc_context *c;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK);
    lc_sampling greedy = lc_sampling_default();
    greedy.temperature = 0.0f;
    lc_request req     = {.prompt = ids, .n_prompt = n_ids, .max_tokens = 48, .sampling = greedy};
    int32_t    sid;
    out        o1 = {0};
    CHECK(lc_context_add(c, &req, &sid) == LC_OK);
    CHECK(drain(c, &sid, &o1, 1) == LC_OK);
    fprintf(stderr, "answer: \"%s\" (finish %d)\n", o1.text, o1.finish);
    CHECK(strstr(o1.text, "Paris") != NULL);
    CHECK(o1.finish == LC_FINISH_EOS || o1.finish == LC_FINISH_LENGTH);
    CHECK(lc_context_logits(c, sid) != NULL);
    CHECK(lc_context_remove(c, sid) == LC_OK);
    CHECK(lc_context_remove(c, sid) == LC_ERR_NOT_FOUND);

    /* 2. a stop string: the output ends before it and it is not emitted */
    const char *stops[] = {"Paris"};
    req.stop            = stops;
    req.n_stop          = 1;
    out o2              = {0};
    CHECK(lc_context_add(c, &req, &sid) == LC_OK);
    CHECK(drain(c, &sid, &o2, 1) == LC_OK);
    CHECK(o2.finish == LC_FINISH_STOP);
    CHECK(strstr(o2.text, "Paris") == NULL);
    CHECKF(strncmp(o1.text, o2.text, o2.len) == 0, "stop output \"%s\" is not a prefix of \"%s\"",
           o2.text, o1.text);
    lc_context_remove(c, sid);
    req.stop   = NULL;
    req.n_stop = 0;

    /* 3. max_tokens */
    req.max_tokens = 3;
    req.ignore_eos = true;
    out o3         = {0};
    CHECK(lc_context_add(c, &req, &sid) == LC_OK);
    CHECK(drain(c, &sid, &o3, 1) == LC_OK);
    CHECK(o3.finish == LC_FINISH_LENGTH && o3.n_tokens == 3);
    CHECK(memcmp(o3.tokens, o1.tokens, 3 * sizeof(int32_t)) == 0);
    lc_context_remove(c, sid);

    /* 4. two sequences batched together = each alone */
    size_t   n2;
    int32_t *ids2 = encode(m, "The quick brown fox jumps over the lazy dog. Then the dog", &n2);
    lc_request r1 = {.prompt = ids, .n_prompt = n_ids, .max_tokens = 12, .sampling = greedy,
                     .ignore_eos = true};
    lc_request r2 = {.prompt = ids2, .n_prompt = n2, .max_tokens = 12, .sampling = greedy,
                     .ignore_eos = true};
    out        alone[2], both[2];
    memset(alone, 0, sizeof alone);
    memset(both, 0, sizeof both);
    int32_t    s1, s2, pair[2];
    CHECK(lc_context_add(c, &r1, &s1) == LC_OK && drain(c, &s1, &alone[0], 1) == LC_OK);
    lc_context_remove(c, s1);
    CHECK(lc_context_add(c, &r2, &s2) == LC_OK && drain(c, &s2, &alone[1], 1) == LC_OK);
    lc_context_remove(c, s2);
    CHECK(lc_context_add(c, &r1, &pair[0]) == LC_OK && lc_context_add(c, &r2, &pair[1]) == LC_OK);
    CHECK(drain(c, pair, both, 2) == LC_OK);
    for (int i = 0; i < 2; i++) {
        CHECK(both[i].n_tokens == 12 && alone[i].n_tokens == 12);
        CHECKF(memcmp(both[i].tokens, alone[i].tokens, 12 * sizeof(int32_t)) == 0,
               "sequence %d: batched output differs from alone", i);
    }
    /* a third sequence does not fit the two slots */
    int32_t s3;
    CHECK(lc_context_add(c, &r1, &s3) == LC_ERR_CONTEXT);
    lc_context_remove(c, pair[0]);
    lc_context_remove(c, pair[1]);

    /* 5. bad requests */
    int32_t *big = calloc(600, sizeof(int32_t));
    lc_request rb = {.prompt = big, .n_prompt = 600, .max_tokens = 1, .sampling = greedy};
    CHECK(lc_context_add(c, &rb, &s3) == LC_ERR_CONTEXT);
    CHECKF(strstr(lc_last_error(), "600") && strstr(lc_last_error(), "512"), "message: %s",
           lc_last_error());
    big[5]      = 1 << 20;
    rb.n_prompt = 10;
    CHECK(lc_context_add(c, &rb, &s3) == LC_ERR_INVALID_ARG);
    rb.n_prompt = 0;
    CHECK(lc_context_add(c, &rb, &s3) == LC_ERR_INVALID_ARG);
    big[5]               = 0;
    rb.n_prompt          = 10;
    rb.sampling.top_p    = 0.0f;
    CHECK(lc_context_add(c, &rb, &s3) == LC_ERR_INVALID_ARG);
    free(big);

    /* 6. the context limit ends generation */
    lc_context_params cp2 = lc_context_default_params();
    cp2.n_ctx             = (int32_t)n_ids + 5;
    lc_context *c2;
    CHECK(lc_context_create(m, &cp2, &c2) == LC_OK);
    lc_request r6 = {.prompt = ids, .n_prompt = n_ids, .max_tokens = 100, .sampling = greedy,
                     .ignore_eos = true};
    out o6        = {0};
    CHECK(lc_context_add(c2, &r6, &sid) == LC_OK && drain(c2, &sid, &o6, 1) == LC_OK);
    CHECK(o6.finish == LC_FINISH_LENGTH);
    CHECKF(o6.n_tokens <= 6, "generated %d tokens in a context with room for 5 more", o6.n_tokens);
    lc_context_free(c2);

    free(ids), free(ids2);
    lc_context_free(c);
    lc_model_free(m);
    TEST_END();
}
