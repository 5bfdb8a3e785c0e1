/*
 * serve_request.h — a generation request of `longctx serve`, parsed and checked
 * (serve_request.c): what the handler enqueues, or the OpenAI-shaped error it answers with.
 */
#ifndef LC_SERVE_REQUEST_H
#define LC_SERVE_REQUEST_H

#include "longctx.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_TOP_LOGPROBS 20

typedef enum { SERVE_CHAT, SERVE_COMPLETION } serve_kind;

/* What one request asks the engine for. req.prompt / req.stop point into prompt / stop. */
typedef struct serve_request {
    serve_kind  kind;
    bool        stream, include_usage, logprobs;
    int         top_logprobs; /* 0 .. SERVE_MAX_TOP_LOGPROBS */
    int32_t    *prompt;       /* n_prompt >= 1 ids of the model's vocabulary, < n_ctx of them */
    size_t      n_prompt;
    lc_request  req;
    char      **stop;
    size_t      n_stop;
} serve_request;

/* A validation failure: the HTTP status (4xx; 500 when out of memory), the field, OpenAI's
 * error code where it has one, the message. */
typedef struct serve_error {
    unsigned status;
    char     param[64];
    char     code[48];
    char     msg[768];
} serve_error;

/* What parsing needs from the server. */
typedef struct serve_env {
    lc_model          *model;    /* its tokenizer and chat template */
    const char        *model_id; /* the only "model" a request may name */
    const lc_sampling *defaults; /* for the fields a request leaves out */
    uint64_t           serial;   /* mixed into the seed of a request that gives none */
    int32_t            n_ctx;    /* a request's context: the prompt must be shorter */
} serve_env;

/* The JSON body o of a request to the route of kind into r (zeroed first); false with e set
 * and r empty when anything is wrong. */
bool serve_parse_request(const serve_env *env, json_t *o, serve_kind kind, serve_request *r,
                         serve_error *e);
/* o's optional boolean field key into *out (left as it is when the field is absent or null);
 * false with e set (400 naming the field) when it is not a boolean. */
bool serve_get_bool(json_t *o, const char *key, bool *out, serve_error *e);
/* Free what r holds (it stays usable: empty, its kind kept). */
void serve_request_clear(serve_request *r);

#endif
