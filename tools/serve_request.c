/*
 * serve_request.c — the body of a generation request of `longctx serve` (OpenAI's
 * /v1/chat/completions and /v1/completions) into what the engine runs: every field checked
 * against what this server supports, the messages through the model's chat template, the
 * prompt tokenised, sampling from the server's defaults where the request says nothing. No
 * HTTP and no engine here, so fuzz/fuzz_serve_request.c drives it alone.
 */
#ifdef LC_HAVE_SERVER /* (jansson) */
#include "serve_request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fail(serve_error *e, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(serve_error *e, unsigned status, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    return false;
}

static bool get_number(json_t *o, const char *key, double lo, double hi, double *out,
                       serve_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return fail(e, 400, key, "'%s' must be a number", key);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return fail(e, 400, key, "'%s' is %g, outside %g .. %g", key, x, lo, hi);
    *out = x;
    return true;
}

static bool get_int(json_t *o, const char *key, long long lo, long long hi, long long *out,
                    serve_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) return fail(e, 400, key, "'%s' must be an integer", key);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(e, 400, key, "'%s' is %lld, outside %lld .. %lld", key, x, lo, hi);
    *out = x;
    return true;
}

bool serve_get_bool(json_t *o, const char *key, bool *out, serve_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return fail(e, 400, key, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return true;
}

/* Fields of OpenAI's API that change what a request means and that this server does not do:
 * 400 naming the field (harmless ones such as user, metadata or store are ignored). */
static bool reject_unsupported(json_t *o, serve_kind kind, serve_error *e) {
    static const char *never[] = {"tools", "tool_choice", "functions", "function_call",
                                  "audio", "prediction", "web_search_options", "suffix",
                                  "reasoning_effort", "parallel_tool_calls"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        json_t *v = json_object_get(o, never[i]);
        if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
            return fail(e, 400, never[i], "'%s' is not supported by this server", never[i]);
    }
    json_t *v = json_object_get(o, "logit_bias");
    if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
        return fail(e, 400, "logit_bias", "'logit_bias' is not supported by this server");
    v = json_object_get(o, "response_format");
    if (v && !json_is_null(v)) {
        json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
        if (!json_is_string(t) || strcmp(json_string_value(t), "text"))
            return fail(e, 400, "response_format",
                        "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    v = json_object_get(o, "modalities");
    if (v && !json_is_null(v)) {
        bool only_text = json_is_array(v);
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) only_text = only_text && json_is_string(m) &&
                                                !strcmp(json_string_value(m), "text");
        if (!only_text)
            return fail(e, 400, "modalities", "'modalities' other than [\"text\"] is not supported");
    }
    long long n = 1;
    if (!get_int(o, "n", 1, 1000000, &n, e)) return false;
    if (n != 1) return fail(e, 400, "n", "'n' must be 1 (one choice per request)");
    if (kind == SERVE_COMPLETION) {
        long long bo = 1;
        if (!get_int(o, "best_of", 1, 1000000, &bo, e)) return false;
        if (bo != 1) return fail(e, 400, "best_of", "'best_of' must be 1");
        bool echo = false;
        if (!serve_get_bool(o, "echo", &echo, e)) return false;
        if (echo) return fail(e, 400, "echo", "'echo' is not supported by this server");
    }
    double pp = 0, fp = 0;
    if (!get_number(o, "presence_penalty", -2, 2, &pp, e)) return false;
    if (!get_number(o, "frequency_penalty", -2, 2, &fp, e)) return false;
    if (pp != 0)
        return fail(e, 400, "presence_penalty", "'presence_penalty' is not supported (only 0); "
                    "the engine has llama.cpp's repeat_penalty ('repeat_penalty' field)");
    if (fp != 0)
        return fail(e, 400, "frequency_penalty", "'frequency_penalty' is not supported (only 0); "
                    "the engine has llama.cpp's repeat_penalty ('repeat_penalty' field)");
    return true;
}

/* The fields every generation route shares into j (sampling from defaults). */
static bool parse_common(const serve_env *s, json_t *o, serve_request *j, serve_error *e) {
    json_t *mv = json_object_get(o, "model");
    if (mv && !json_is_null(mv)) {
        if (!json_is_string(mv)) return fail(e, 400, "model", "'model' must be a string");
        if (strcmp(json_string_value(mv), s->model_id)) {
            snprintf(e->code, sizeof e->code, "model_not_found");
            return fail(e, 404, "model", "the model '%.200s' does not exist (this server has '%s')",
                        json_string_value(mv), s->model_id);
        }
    }
    lc_sampling sp = *s->defaults;
    double      x;
    long long   n;
    x = sp.temperature;
    if (!get_number(o, "temperature", 0, 2, &x, e)) return false;
    sp.temperature = (float)x;
    x = sp.top_p;
    if (!get_number(o, "top_p", 0, 1, &x, e)) return false;
    if (x <= 0) return fail(e, 400, "top_p", "'top_p' must be above 0");
    sp.top_p = (float)x;
    x = sp.min_p;
    if (!get_number(o, "min_p", 0, 1, &x, e)) return false;
    sp.min_p = (float)x;
    n = sp.top_k;
    if (!get_int(o, "top_k", 0, 1 << 30, &n, e)) return false;
    sp.top_k = (int32_t)n;
    x = sp.repeat_penalty;
    if (!get_number(o, "repeat_penalty", 0.001, 10, &x, e)) return false;
    sp.repeat_penalty = (float)x;
    json_t *sv = json_object_get(o, "seed");
    if (sv && !json_is_null(sv)) {
        if (!json_is_integer(sv)) return fail(e, 400, "seed", "'seed' must be an integer");
        sp.seed = (uint64_t)json_integer_value(sv);
    } else { /* a seed of its own per request, as OpenAI's sampling is not repeatable either */
        sp.seed = s->defaults->seed ^ (s->serial * 0x9E3779B97F4A7C15ull);
    }
    long long max_tokens = -1;
    if (!get_int(o, "max_tokens", 1, 1 << 30, &max_tokens, e)) return false;
    if (!get_int(o, "max_completion_tokens", 1, 1 << 30, &max_tokens, e)) return false;
    /* vLLM's extension, sent by benchmark clients for fixed output lengths */
    bool ignore_eos = false;
    if (!serve_get_bool(o, "ignore_eos", &ignore_eos, e)) return false;
    j->req.ignore_eos = ignore_eos;
    if (!serve_get_bool(o, "stream", &j->stream, e)) return false;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return fail(e, 400, "stream_options", "'stream_options' must be an object");
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return fail(e, 400, "stream_options.include_usage",
                        "'stream_options.include_usage' must be true or false");
        j->include_usage = json_is_true(iu);
    }
    /* stop: a string or a list of strings */
    json_t *st = json_object_get(o, "stop");
    if (st && !json_is_null(st)) {
        const size_t ns = json_is_array(st) ? json_array_size(st) : 1;
        if (!json_is_string(st) && !json_is_array(st))
            return fail(e, 400, "stop", "'stop' must be a string or a list of strings");
        if (ns > LC_MAX_STOP)
            return fail(e, 400, "stop", "'stop' has %zu strings, at most %d", ns, LC_MAX_STOP);
        j->stop = calloc(ns ? ns : 1, sizeof *j->stop);
        if (!j->stop) return fail(e, 500, NULL, "out of memory");
        for (size_t i = 0; i < ns; i++) {
            json_t *si = json_is_array(st) ? json_array_get(st, i) : st;
            if (!json_is_string(si))
                return fail(e, 400, "stop", "'stop' must be a string or a list of strings");
            if (json_string_length(si) > LC_MAX_STOP_LEN)
                return fail(e, 400, "stop", "a stop string is longer than %d bytes",
                            LC_MAX_STOP_LEN);
            if (strlen(json_string_value(si)) != json_string_length(si))
                return fail(e, 400, "stop", "a stop string holds a NUL character");
            if (!(j->stop[j->n_stop] = strdup(json_string_value(si))))
                return fail(e, 500, NULL, "out of memory");
            j->n_stop++;
        }
    }
    j->req.sampling   = sp;
    j->req.max_tokens = max_tokens > 0 ? (int32_t)max_tokens : (1 << 30); /* (to the context's end) */
    j->req.stop       = (const char *const *)j->stop;
    j->req.n_stop     = j->n_stop;
    return true;
}

/* "content": a string, or a list of {"type": "text", "text": ...} parts (joined); NULL with
 * *e set on failure. Returns a malloc'd copy. */
static char *message_content(json_t *m, size_t idx, serve_error *e) {
    char    param[64];
    json_t *c = json_object_get(m, "content");
    snprintf(param, sizeof param, "messages[%zu].content", idx);
    if (!c || json_is_null(c)) return strdup("");
    if (json_is_string(c)) {
        if (strlen(json_string_value(c)) != json_string_length(c)) {
            fail(e, 400, param, "'%s' holds a NUL character", param);
            return NULL;
        }
        return strdup(json_string_value(c));
    }
    if (!json_is_array(c)) {
        fail(e, 400, param, "'%s' must be a string or a list of text parts", param);
        return NULL;
    }
    size_t total = 1, i;
    json_t *p;
    json_array_foreach(c, i, p) {
        json_t *t = json_is_object(p) ? json_object_get(p, "type") : NULL;
        json_t *x = json_is_object(p) ? json_object_get(p, "text") : NULL;
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") || !json_is_string(x)) {
            fail(e, 400, param, "'%s[%zu]' is not a text part (only {\"type\": \"text\", "
                 "\"text\": ...} is supported)", param, i);
            return NULL;
        }
        total += json_string_length(x);
    }
    char *out = malloc(total);
    if (!out) return NULL;
    size_t at = 0;
    json_array_foreach(c, i, p) {
        json_t *x = json_object_get(p, "text");
        memcpy(out + at, json_string_value(x), json_string_length(x));
        at += json_string_length(x);
    }
    out[at] = '\0';
    if (strlen(out) != at) {
        free(out);
        fail(e, 400, param, "'%s' holds a NUL character", param);
        return NULL;
    }
    return out;
}

static bool parse_chat(const serve_env *s, json_t *o, serve_request *j, serve_error *e) {
    json_t *msgs = json_object_get(o, "messages");
    if (!msgs) return fail(e, 400, "messages", "'messages' is required");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(e, 400, "messages", "'messages' must be a non-empty list");
    const size_t     n   = json_array_size(msgs);
    lc_chat_message *cm  = calloc(n, sizeof *cm);
    char           **own = calloc(n, sizeof *own);
    bool             ok  = cm && own;
    if (!ok) fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; ok && i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        char    param[64];
        snprintf(param, sizeof param, "messages[%zu].role", i);
        json_t *r = json_is_object(m) ? json_object_get(m, "role") : NULL;
        if (!json_is_object(m)) {
            snprintf(param, sizeof param, "messages[%zu]", i);
            ok = fail(e, 400, param, "'%s' must be an object", param);
            break;
        }
        if (!json_is_string(r)) {
            ok = fail(e, 400, param, "'%s' must be a string", param);
            break;
        }
        const char *role = json_string_value(r);
        if (!strcmp(role, "developer")) role = "system"; /* (OpenAI's newer name) */
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")) {
            ok = fail(e, 400, param, "'%s' is '%.40s': only system, user and assistant are "
                      "supported", param, role);
            break;
        }
        json_t *tc = json_object_get(m, "tool_calls");
        if (tc && !json_is_null(tc)) {
            snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
            ok = fail(e, 400, param, "'%s': tool calls are not supported", param);
            break;
        }
        if (!(own[i] = message_content(m, i, e))) {
            if (!e->status) fail(e, 500, NULL, "out of memory");
            ok = false;
            break;
        }
        cm[i] = (lc_chat_message){role, own[i]};
    }
    if (ok) {
        const int st = lc_model_chat_tokenize(s->model, LC_CHAT_TEMPLATE_NONE, cm, n, true,
                                              &j->prompt, &j->n_prompt);
        if (st == LC_ERR_INVALID_ARG) ok = fail(e, 400, "messages", "%s", lc_last_error());
        else if (st != LC_OK) ok = fail(e, 500, NULL, "%s", lc_last_error());
    }
    for (size_t i = 0; own && i < n; i++) free(own[i]);
    free(own);
    free(cm);
    return ok;
}

static bool parse_completion(const serve_env *s, json_t *o, serve_request *j, serve_error *e) {
    json_t *p = json_object_get(o, "prompt");
    if (!p) return fail(e, 400, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    const lc_tokenizer *tok = lc_model_tokenizer(s->model);
    if (json_is_string(p)) {
        if (strlen(json_string_value(p)) != json_string_length(p))
            return fail(e, 400, "prompt", "'prompt' holds a NUL character");
        const int st = lc_tokenizer_encode(tok, json_string_value(p), json_string_length(p),
                                           lc_tokenizer_add_bos(tok), true, &j->prompt,
                                           &j->n_prompt);
        if (st != LC_OK) return fail(e, 400, "prompt", "%s", lc_last_error());
        return true;
    }
    if (json_is_array(p) && json_array_size(p) > 0) { /* token ids */
        const size_t  n = json_array_size(p);
        const int32_t V = lc_tokenizer_n_vocab(tok);
        if (!(j->prompt = malloc(n * sizeof *j->prompt))) return fail(e, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(p, i);
            if (!json_is_integer(t)) {
                if (json_is_string(t))
                    return fail(e, 400, "prompt", "'prompt' holds several strings: one prompt per "
                                "request ('n' = 1)");
                return fail(e, 400, "prompt", "'prompt' must be a string or a list of token ids");
            }
            const json_int_t id = json_integer_value(t);
            if (id < 0 || id >= V)
                return fail(e, 400, "prompt", "token id %lld is outside the vocabulary (0 .. %d)",
                            (long long)id, V - 1);
            j->prompt[i] = (int32_t)id;
        }
        j->n_prompt = n;
        return true;
    }
    return fail(e, 400, "prompt", "'prompt' must be a string or a list of token ids");
}

bool serve_parse_request(const serve_env *s, json_t *o, serve_kind kind, serve_request *j,
                         serve_error *e) {
    memset(e, 0, sizeof *e);
    memset(j, 0, sizeof *j);
    j->kind = kind;
    if (!json_is_object(o)) return fail(e, 400, NULL, "the body must be a JSON object");
    bool ok = reject_unsupported(o, kind, e) && parse_common(s, o, j, e);
    if (ok) {
        json_t *lpv = json_object_get(o, "logprobs");
        if (kind == SERVE_CHAT) {
            ok = serve_get_bool(o, "logprobs", &j->logprobs, e);
            long long tl = 0;
            ok = ok && get_int(o, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &tl, e);
            j->top_logprobs = (int)tl;
            if (ok && tl > 0 && !j->logprobs)
                ok = fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        } else if (lpv && !json_is_null(lpv)) {
            ok = fail(e, 400, "logprobs", "'logprobs' is supported on /v1/chat/completions only");
        }
    }
    if (ok) ok = kind == SERVE_CHAT ? parse_chat(s, o, j, e) : parse_completion(s, o, j, e);
    if (ok && j->n_prompt == 0)
        ok = fail(e, 400, kind == SERVE_CHAT ? "messages" : "prompt", "the prompt is empty");
    if (ok && (int64_t)j->n_prompt >= s->n_ctx) {
        snprintf(e->code, sizeof e->code, "context_length_exceeded");
        ok = fail(e, 400, kind == SERVE_CHAT ? "messages" : "prompt",
                  "the prompt has %zu tokens, and this server's context holds %d tokens a request "
                  "(prompt and answer; --ctx-max)", j->n_prompt, s->n_ctx);
    }
    if (!ok) {
        serve_request_clear(j);
        return false;
    }
    j->req.prompt   = j->prompt;
    j->req.n_prompt = j->n_prompt;
    return true;
}

void serve_request_clear(serve_request *r) {
    if (!r) return;
    free(r->prompt);
    for (size_t i = 0; r->stop && i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    const serve_kind k = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = k;
}

#endif /* LC_HAVE_SERVER */
