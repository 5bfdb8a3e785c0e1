/*
 * cmd_serve.c — `longctx serve`: an OpenAI-compatible HTTP server over one lc_context.
 *
 * One engine thread owns the context (n_seq_max = --parallel) and loops lc_context_step:
 * continuous batching, new requests admitted with lc_context_add between steps from a FCFS
 * queue (engine_admit: the seam a smarter scheduler replaces). HTTP connections are served by
 * libmicrohttpd, a thread per connection: a handler parses and validates the JSON body
 * (jansson), tokenizes through the model's chat template, enqueues a job and then waits on the
 * job's own mutex + condition variable for what the engine thread delivers (text, tokens,
 * logprobs, the finish). A client that goes away marks its job cancelled; the engine thread
 * removes its sequence before the next step. Only the engine thread touches the lc_context.
 *
 * Built only with libmicrohttpd and jansson (LC_HAVE_SERVER); without them `serve` says so.
 */
#include "gen.h"

#include <stdio.h>
#include <string.h>

#ifndef LC_HAVE_SERVER

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "longctx serve: this longctx was built without server support (needs "
            "libmicrohttpd and jansson at build time: scripts/install-deps.sh)\n");
    return CLI_USAGE;
}

#else

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve_request.h"

#define SERVE_WAIT_MS          100 /* how often a waiting handler looks for a hang-up */

/* ---- settings ---------------------------------------------------------------------------- */

typedef struct serve_cfg {
    const char *host;
    int         port;
    const char *api_key;
    int         parallel;
    int         queue_max;
    size_t      max_body;
    const char *model_id; /* what /v1/models lists and requests name */
    bool        verbose;
} serve_cfg;

/* ---- metrics ----------------------------------------------------------------------------- */

#define HIST_N 14
static const double hist_bounds[HIST_N] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                           1,     2.5,  5,     10,   30,  60,  120};
typedef struct hist {
    uint64_t bucket[HIST_N]; /* counts of observations <= bound (not cumulative here) */
    uint64_t count;
    double   sum;
} hist;

static void hist_add(hist *h, double v) {
    for (int i = 0; i < HIST_N; i++)
        if (v <= hist_bounds[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

/* ---- jobs: one request, shared by its handler and the engine thread ---------------------- */

typedef struct piece { /* one generated token with its log-probabilities */
    int32_t token;
    float   logprob;
    int     n_top;
    int32_t top_id[SERVE_MAX_TOP_LOGPROBS];
    float   top_lp[SERVE_MAX_TOP_LOGPROBS];
} piece;

typedef struct job {
    /* set by the handler before enqueueing, then read-only */
    serve_request r; /* what it asks (serve_request.h) */
    char        id[48];
    long long   created;
    double      t_arrive;
    /* the engine thread's */
    int32_t     seq;
    double      t_first, t_last;
    struct job *next;     /* in the waiting queue (server mutex) */
    bool        in_queue; /* (server mutex) waiting for admission */
    bool        uncounted; /* (server mutex) cancelled while waiting: no longer in n_waiting */
    /* shared, under m */
    pthread_mutex_t m;
    pthread_cond_t  cv;
    char           *text;
    size_t          text_len, text_cap;
    piece          *pieces;
    size_t          n_pieces, cap_pieces;
    int32_t         n_generated;
    lc_finish       finish;
    bool            done;
    int             err_status; /* done with an error: the HTTP status (0: none) */
    char            err[512];
    bool            cancelled;
    int             refs;
} job;

typedef struct server {
    serve_cfg           cfg;
    lc_sampling         defaults; /* for fields a request leaves out: the command line's */
    lc_model           *model;
    const lc_tokenizer *tok;
    lc_context         *ctx;
    int32_t             n_ctx;
    int64_t             kv_total;
    long long           created;
    atomic_int          ready;    /* the model is loaded and the engine runs */
    atomic_int          stopping; /* shutting down: new requests get 503 */
    atomic_uint_fast64_t next_id;
    pthread_mutex_t     mu; /* the queue, the metrics */
    pthread_cond_t      cv; /* wakes the engine thread */
    job                *q_head, *q_tail;
    int                 n_waiting, n_running;
    bool                stop; /* (under mu) the engine thread ends */
    /* metrics (under mu) */
    uint64_t m_requests, m_ok, m_errors, m_cancelled, m_prompt_tokens, m_gen_tokens;
    int64_t  m_kv_used;
    lc_kv_usage m_kv; /* pages by tier */
    hist     h_ttft, h_tpot, h_e2e;
} server;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* jobs alive (the handler's or the engine's): at shutdown the daemon stops once they are gone,
 * so a stream in flight ends with its error event and [DONE] rather than a cut connection */
static atomic_int live_jobs;

static job *job_new(void) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    atomic_fetch_add(&live_jobs, 1);
    pthread_mutex_init(&j->m, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->seq  = -1;
    return j;
}

static void job_unref(job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->m);
    const bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->m);
    if (!last) return;
    serve_request_clear(&j->r);
    free(j->text);
    free(j->pieces);
    pthread_mutex_destroy(&j->m);
    pthread_cond_destroy(&j->cv);
    free(j);
    atomic_fetch_sub(&live_jobs, 1);
}

/* (under j->m) the job ends; wakes its handler */
static void job_finish_locked(job *j, lc_finish f, int err_status, const char *err) {
    j->finish = f;
    j->done   = true;
    if (err_status) {
        j->err_status = err_status;
        snprintf(j->err, sizeof j->err, "%s", err ? err : "error");
    }
    pthread_cond_broadcast(&j->cv);
}

static void job_fail(job *j, int status, const char *msg) {
    pthread_mutex_lock(&j->m);
    job_finish_locked(j, LC_FINISH_ERROR, status, msg);
    pthread_mutex_unlock(&j->m);
}

/* ---- the engine thread ----------------------------------------------------------------- */

/* log-softmax of the logits: the sampled token's and the top n ones */
static void fill_logprobs(const float *logits, int32_t V, int32_t token, int n_top, piece *p) {
    const double lse = cli_logsumexp_top(logits, V, n_top, p->top_id, &p->n_top);
    p->logprob       = token >= 0 && token < V ? (float)(logits[token] - lse) : 0.0f;
    for (int k = 0; k < p->n_top; k++) p->top_lp[k] = (float)(logits[p->top_id[k]] - lse);
}

/* Append n bytes to a growable buffer (*buf, *len, *cap; capacity doubling from first_cap)
 * and keep a NUL after them; -1 when out of memory (the buffer is left as it was). */
static int buf_append(char **buf, size_t *len, size_t *cap, size_t first_cap, const char *p,
                      size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : first_cap;
        while (c < *len + n + 1) c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb) return -1;
        *buf = nb;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static int append_text(job *j, const char *t, size_t n) {
    return buf_append(&j->text, &j->text_len, &j->text_cap, 256, t, n);
}

/* Admit waiting jobs, first come first served, while a sequence slot is free (under s->mu).
 * The scheduler seam: SparseServe's working-set-aware admission would decide here. */
static void engine_admit(server *s, job **run) {
    while (s->q_head && s->n_running < s->cfg.parallel) {
        job *j = s->q_head;
        pthread_mutex_lock(&j->m);
        const bool cancelled = j->cancelled;
        pthread_mutex_unlock(&j->m);
        if (!cancelled) {
            int32_t seq = -1;
            const int st = lc_context_add(s->ctx, &j->r.req, &seq);
            if (st == LC_ERR_CONTEXT && s->n_running > 0) return; /* wait for pages to free */
            if (st != LC_OK) {
                char msg[400];
                snprintf(msg, sizeof msg, "the request could not be admitted: %s",
                         lc_last_error());
                job_fail(j, st == LC_ERR_CONTEXT ? 400 : 500, msg);
                s->m_errors++;
            } else {
                j->seq = seq;
                for (int i = 0; i < s->cfg.parallel; i++)
                    if (!run[i]) {
                        run[i] = j;
                        break;
                    }
                s->n_running++;
                j = NULL; /* the engine's reference moved to run[] */
            }
        } else {
            s->m_cancelled++;
        }
        job *head = s->q_head;
        s->q_head = head->next;
        if (!s->q_head) s->q_tail = NULL;
        if (!head->uncounted) s->n_waiting--;
        head->in_queue = false;
        if (j) job_unref(j);
    }
}

static void *engine_main(void *arg) {
    server      *s   = arg;
    const int    P   = s->cfg.parallel;
    job        **run = calloc((size_t)P, sizeof *run);
    lc_event    *ev  = calloc((size_t)P, sizeof *ev);
    const int32_t V  = lc_context_n_vocab(s->ctx);
    if (!run || !ev) {
        fprintf(stderr, "longctx serve: out of memory in the engine thread\n");
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_mutex_unlock(&s->mu);
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        /* cancelled running jobs leave before the next step */
        for (int i = 0; run && i < P; i++) {
            if (!run[i]) continue;
            pthread_mutex_lock(&run[i]->m);
            const bool c = run[i]->cancelled;
            pthread_mutex_unlock(&run[i]->m);
            if (!c) continue;
            lc_context_remove(s->ctx, run[i]->seq);
            job_fail(run[i], 499, "the client closed the connection");
            job_unref(run[i]);
            run[i] = NULL;
            s->n_running--;
            s->m_cancelled++;
        }
        if (!s->stop && run) engine_admit(s, run);
        while (!s->stop && s->n_running == 0 && !s->q_head) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        const bool idle = s->n_running == 0;
        pthread_mutex_unlock(&s->mu);
        if (idle) continue; /* (waiting jobs that were cancelled: dropped above) */

        size_t    n_ev = 0;
        const int st   = lc_context_step(s->ctx, ev, (size_t)P, &n_ev);
        const double t = now_s();
        if (st != LC_OK) { /* the step failed as a whole: every running request ends */
            char msg[400];
            snprintf(msg, sizeof msg, "generation failed: %s", lc_last_error());
            fprintf(stderr, "longctx serve: %s\n", msg);
            pthread_mutex_lock(&s->mu);
            for (int i = 0; i < P; i++)
                if (run[i]) {
                    lc_context_remove(s->ctx, run[i]->seq);
                    job_fail(run[i], 500, msg);
                    job_unref(run[i]);
                    run[i] = NULL;
                    s->n_running--;
                    s->m_errors++;
                }
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        for (size_t k = 0; k < n_ev; k++) {
            const lc_event *e = &ev[k];
            int             slot = -1;
            for (int i = 0; i < P; i++)
                if (run[i] && run[i]->seq == e->seq_id) slot = i;
            if (slot < 0) continue;
            job  *j = run[slot];
            piece pc;
            memset(&pc, 0, sizeof pc);
            if (e->token >= 0 && j->r.logprobs) {
                const float *lg = lc_context_logits(s->ctx, e->seq_id);
                if (lg) fill_logprobs(lg, V, e->token, j->r.top_logprobs, &pc);
                pc.token = e->token;
            }
            if (e->token >= 0) {
                if (j->t_first == 0) j->t_first = t;
                j->t_last = t;
            }
            pthread_mutex_lock(&j->m);
            bool oom = e->text_len && append_text(j, e->text, e->text_len) != 0;
            if (e->token >= 0 && j->r.logprobs && !oom) {
                if (j->n_pieces == j->cap_pieces) {
                    const size_t nc = j->cap_pieces ? 2 * j->cap_pieces : 32;
                    piece       *np = realloc(j->pieces, nc * sizeof *np);
                    if (np) j->pieces = np, j->cap_pieces = nc;
                }
                if (j->n_pieces < j->cap_pieces) j->pieces[j->n_pieces++] = pc;
                else oom = true;
            }
            j->n_generated = e->n_generated;
            const lc_finish f = oom ? LC_FINISH_ERROR : e->finish;
            if (f != LC_FINISH_NONE) {
                if (f == LC_FINISH_ERROR)
                    job_finish_locked(j, f, 500, oom ? "out of memory" : e->error);
                else job_finish_locked(j, f, 0, NULL);
            } else if (j->r.stream) { /* (a non-streamed handler waits for the end only) */
                pthread_cond_broadcast(&j->cv);
            }
            pthread_mutex_unlock(&j->m);
            if (f != LC_FINISH_NONE) {
                lc_context_remove(s->ctx, j->seq);
                pthread_mutex_lock(&s->mu);
                s->n_running--;
                if (f == LC_FINISH_ERROR) s->m_errors++;
                else {
                    s->m_ok++;
                    s->m_prompt_tokens += j->r.n_prompt;
                    s->m_gen_tokens += (uint64_t)(e->n_generated > 0 ? e->n_generated : 0);
                    if (j->t_first > 0) hist_add(&s->h_ttft, j->t_first - j->t_arrive);
                    if (e->n_generated >= 2)
                        hist_add(&s->h_tpot, (j->t_last - j->t_first) / (e->n_generated - 1));
                    hist_add(&s->h_e2e, t - j->t_arrive);
                }
                pthread_mutex_unlock(&s->mu);
                job_unref(j);
                run[slot] = NULL;
            }
        }
        int64_t used = 0;
        for (int i = 0; i < P; i++)
            if (run[i]) {
                const int64_t l = lc_context_seq_length(s->ctx, run[i]->seq);
                if (l > 0) used += l;
            }
        lc_kv_usage ku;
        const bool  have_ku = lc_context_kv_usage(s->ctx, &ku) == LC_OK;
        pthread_mutex_lock(&s->mu);
        s->m_kv_used = used;
        if (have_ku) s->m_kv = ku;
        pthread_mutex_unlock(&s->mu);
    }
    /* shutting down: every request still here ends with 503 */
    pthread_mutex_lock(&s->mu);
    for (int i = 0; run && i < P; i++)
        if (run[i]) {
            lc_context_remove(s->ctx, run[i]->seq);
            job_fail(run[i], 503, "the server is shutting down");
            job_unref(run[i]);
            run[i] = NULL;
        }
    while (s->q_head) {
        job *j    = s->q_head;
        s->q_head = j->next;
        job_fail(j, 503, "the server is shutting down");
        job_unref(j);
    }
    s->q_tail    = NULL;
    s->n_waiting = s->n_running = 0;
    pthread_mutex_unlock(&s->mu);
    free(run);
    free(ev);
    return NULL;
}

/* Hand a job to the engine thread: false when the queue is full or the server stops. */
static bool enqueue(server *s, job *j) {
    pthread_mutex_lock(&s->mu);
    /* --queue counts the requests that wait for a slot: those that will take a free slot at the
     * engine's next step boundary (it may be inside a long step) do not fill the queue. */
    const int free_slots = s->cfg.parallel > s->n_running ? s->cfg.parallel - s->n_running : 0;
    if (s->stop || s->n_waiting >= s->cfg.queue_max + free_slots) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    pthread_mutex_lock(&j->m);
    j->refs++; /* the engine's */
    pthread_mutex_unlock(&j->m);
    j->next = NULL;
    if (s->q_tail) s->q_tail->next = j;
    else s->q_head = j;
    s->q_tail = j;
    j->in_queue  = true;
    j->uncounted = false;
    s->n_waiting++;
    s->m_requests++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* ---- HTTP helpers ---------------------------------------------------------------------- */

typedef struct conn_state {
    char  *body;
    size_t len, cap;
    bool   too_large;
} conn_state;

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, const char *retry_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    const enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *o,
                                 const char *retry_after) {
    char *body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!body) return MHD_NO;
    return send_text(c, status, "application/json", body, retry_after);
}

static json_t *error_obj(const char *msg, const char *type, const char *param, const char *code) {
    return json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", type, "param",
                     param ? json_string(param) : json_null(), "code",
                     code ? json_string(code) : json_null());
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *code, const char *fmt, ...) {
    char    msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    json_t *o = error_obj(msg, type, param, code);
    if (!o) return MHD_NO;
    return send_json(c, status, o, status == 503 ? "1" : NULL);
}

/* Whether the peer of a connection has closed it (or reset it). */
static bool peer_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd pf = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pf, 1, 0) <= 0) return false;
    if (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (pf.revents & POLLIN) {
        char b;
        const ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;
    }
    return false;
}

/* Wait on a job (held: j->m) for up to SERVE_WAIT_MS. */
static void job_wait_locked(job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SERVE_WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&j->cv, &j->m, &ts);
}

/* A cancelled job still waiting for admission stops counting against --queue at once (the
 * engine drops it when it reaches the head, which may be many steps later). */
static void job_uncount_waiting(server *s, job *j) {
    pthread_mutex_lock(&s->mu);
    if (j->in_queue && !j->uncounted) {
        j->uncounted = true;
        s->n_waiting--;
    }
    pthread_mutex_unlock(&s->mu);
}

static void job_cancel(server *s, job *j) {
    pthread_mutex_lock(&j->m);
    const bool c = !j->done;
    if (c) j->cancelled = true;
    pthread_mutex_unlock(&j->m);
    if (c) job_uncount_waiting(s, j);
}

/* ---- responses ------------------------------------------------------------------------- */

static const char *finish_name(lc_finish f) {
    return f == LC_FINISH_LENGTH ? "length" : "stop"; /* eos and stop strings: "stop" */
}

static json_t *usage_obj(const job *j) {
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)j->r.n_prompt,
                     "completion_tokens", (json_int_t)j->n_generated, "total_tokens",
                     (json_int_t)(j->r.n_prompt + (size_t)j->n_generated));
}

/* A token's text for logprobs: valid UTF-8 (partial characters as U+FFFD) and its bytes. */
static json_t *token_entry(const server *s, int32_t id, float lp) {
    size_t      n = 0;
    const char *b = lc_tokenizer_token_bytes(s->tok, id, &n);
    if (!b) b = "", n = 0;
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)b[i]));
    json_t *str = json_stringn(b, n);
    if (!str) { /* not valid UTF-8 by itself (a piece of a character) */
        lc_detok d = {{0}, 0};
        char     out[256];
        size_t   k = 0, k2 = 0;
        if (n * 3 + 64 < sizeof out && lc_detok_push(&d, s->tok, id, out, sizeof out, &k) == LC_OK &&
            lc_detok_flush(&d, out + k, sizeof out - k, &k2) == LC_OK)
            str = json_stringn(out, k + k2);
        if (!str) str = json_string("\xEF\xBF\xBD");
    }
    return json_pack("{s:o, s:f, s:o}", "token", str, "logprob", (double)lp, "bytes", bytes);
}

static json_t *logprobs_obj(const server *s, const job *j, size_t from, size_t to) {
    json_t *content = json_array();
    for (size_t i = from; i < to; i++) {
        const piece *p = &j->pieces[i];
        json_t      *e = token_entry(s, p->token, p->logprob);
        json_t      *top = json_array();
        for (int k = 0; k < p->n_top; k++)
            json_array_append_new(top, token_entry(s, p->top_id[k], p->top_lp[k]));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    return json_pack("{s:o}", "content", content);
}

static json_t *response_obj(const server *s, const job *j) {
    json_t *text = json_stringn(j->text ? j->text : "", j->text_len);
    if (!text) text = json_string("");
    json_t *lp = j->r.logprobs ? logprobs_obj(s, j, 0, j->n_pieces) : json_null();
    json_t *choice;
    if (j->r.kind == SERVE_CHAT)
        choice = json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", 0, "message", "role",
                           "assistant", "content", text, "logprobs", lp, "finish_reason",
                           finish_name(j->finish));
    else
        choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "text", text, "logprobs", lp,
                           "finish_reason", finish_name(j->finish));
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", j->id, "object",
                     j->r.kind == SERVE_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)j->created, "model", s->cfg.model_id, "choices", choice, "usage",
                     usage_obj(j));
}

/* streaming: one SSE chunk */
static json_t *chunk_obj(const server *s, const job *j, json_t *delta_or_text, json_t *lp,
                         const char *finish) {
    json_t *choice;
    if (j->r.kind == SERVE_CHAT)
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", delta_or_text,
                           "logprobs", lp ? lp : json_null(), "finish_reason",
                           finish ? json_string(finish) : json_null());
    else
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "text", delta_or_text,
                           "logprobs", lp ? lp : json_null(), "finish_reason",
                           finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", j->id, "object",
                          j->r.kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion",
                          "created", (json_int_t)j->created, "model", s->cfg.model_id,
                          "choices", choice);
    if (o && j->r.include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

typedef struct stream_state {
    server                *s;
    job                   *j;
    struct MHD_Connection *conn;
    char                  *out;
    size_t                 out_len, out_at, out_cap;
    size_t                 sent_text, sent_pieces;
    bool                   role_sent, ended;
} stream_state;

static int out_add(stream_state *st, const char *p, size_t n) {
    return buf_append(&st->out, &st->out_len, &st->out_cap, 1024, p, n);
}

static int out_event(stream_state *st, json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    if (!t) return -1;
    const int r = out_add(st, "data: ", 6) || out_add(st, t, strlen(t)) || out_add(st, "\n\n", 2);
    free(t);
    return r;
}

/* (held: j->m) what arrived since the last call, as SSE events into st->out */
static int stream_collect(stream_state *st) {
    server *s = st->s;
    job    *j = st->j;
    if (!st->role_sent) { /* (a completion has no role chunk, but must not ask again) */
        st->role_sent = true;
        if (j->r.kind == SERVE_CHAT &&
            out_event(st, chunk_obj(s, j, json_pack("{s:s, s:s}", "role", "assistant", "content", ""),
                                    NULL, NULL)))
            return -1;
    }
    const bool new_text = j->text_len > st->sent_text, new_lp = j->n_pieces > st->sent_pieces;
    if (new_text || new_lp) {
        json_t *t = json_stringn(j->text + st->sent_text, j->text_len - st->sent_text);
        if (!t) t = json_string("");
        json_t *d = j->r.kind == SERVE_CHAT ? json_pack("{s:o}", "content", t) : t;
        json_t *lp = j->r.logprobs ? logprobs_obj(s, j, st->sent_pieces, j->n_pieces) : NULL;
        if (out_event(st, chunk_obj(s, j, d, lp, NULL))) return -1;
        st->sent_text   = j->text_len;
        st->sent_pieces = j->n_pieces;
    }
    if (j->done) {
        st->ended = true;
        if (j->err_status) {
            if (out_event(st, error_obj(j->err, j->err_status >= 500 ? "server_error"
                                                                     : "invalid_request_error",
                                        NULL, NULL)))
                return -1;
        } else {
            json_t *d = j->r.kind == SERVE_CHAT ? json_object() : json_string("");
            if (out_event(st, chunk_obj(s, j, d, NULL, finish_name(j->finish)))) return -1;
            if (j->r.include_usage) {
                json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", j->id, "object",
                                      j->r.kind == SERVE_CHAT ? "chat.completion.chunk"
                                                           : "text_completion",
                                      "created", (json_int_t)j->created, "model",
                                      s->cfg.model_id, "choices", "usage", usage_obj(j));
                if (out_event(st, u)) return -1;
            }
        }
        if (out_add(st, "data: [DONE]\n\n", 14)) return -1;
    }
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_state *st = cls;
    (void)pos;
    while (st->out_at == st->out_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out_at = st->out_len = 0;
        job *j = st->j;
        pthread_mutex_lock(&j->m);
        while (!j->done && j->text_len == st->sent_text && j->n_pieces == st->sent_pieces &&
               st->role_sent) {
            job_wait_locked(j);
            if (!j->done && peer_gone(st->conn)) {
                j->cancelled = true;
                pthread_mutex_unlock(&j->m);
                job_uncount_waiting(st->s, j);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        const int r = stream_collect(st);
        pthread_mutex_unlock(&j->m);
        if (r) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->out_len - st->out_at;
    if (n > max) n = max;
    memcpy(buf, st->out + st->out_at, n);
    st->out_at += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    job_cancel(st->s, st->j); /* (a no-op when it finished) */
    job_unref(st->j);
    free(st->out);
    free(st);
}

/* ---- routes ---------------------------------------------------------------------------- */

static json_t *load_body(struct MHD_Connection *c, conn_state *cs, enum MHD_Result *ret);

static enum MHD_Result route_generate(server *s, struct MHD_Connection *c, conn_state *cs,
                                      serve_kind kind) {
    enum MHD_Result ret;
    json_t         *o = load_body(c, cs, &ret);
    if (!o) return ret;
    job *j = job_new();
    if (!j) {
        json_decref(o);
        return send_error(c, 500, NULL, NULL, "out of memory");
    }
    j->t_arrive = now_s();
    j->created  = (long long)time(NULL);
    const uint64_t serial = atomic_fetch_add(&s->next_id, 1);
    snprintf(j->id, sizeof j->id, "%s-%llx%06llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)s->created, (unsigned long long)serial);
    const serve_env env = {s->model, s->cfg.model_id, &s->defaults, serial, s->n_ctx};
    serve_error     e;
    const bool      ok = serve_parse_request(&env, o, kind, &j->r, &e);
    json_decref(o);
    if (!ok) {
        job_unref(j);
        return send_error(c, e.status, e.param[0] ? e.param : NULL, e.code[0] ? e.code : NULL,
                          "%s", e.msg);
    }
    if (!enqueue(s, j)) {
        job_unref(j);
        if (atomic_load(&s->stopping))
            return send_error(c, 503, NULL, "shutting_down", "the server is shutting down");
        return send_error(c, 503, NULL, "queue_full", "the server is busy: %d requests are "
                          "waiting (--queue); retry later", s->cfg.queue_max);
    }
    if (j->r.stream) {
        stream_state *st = calloc(1, sizeof *st);
        if (!st) {
            job_cancel(s, j);
            job_unref(j);
            return MHD_NO;
        }
        st->s    = s;
        st->j    = j; /* the handler's reference moves to the stream */
        st->conn = c;
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        const enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    /* not streamed: wait for the end, watching for a client that goes away */
    pthread_mutex_lock(&j->m);
    while (!j->done) {
        job_wait_locked(j);
        if (!j->done && peer_gone(c)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->m);
            job_uncount_waiting(s, j);
            job_unref(j);
            return MHD_NO; /* (closes the connection) */
        }
    }
    pthread_mutex_unlock(&j->m);
    if (j->err_status)
        ret = send_error(c, (unsigned)(j->err_status == 499 ? 500 : j->err_status), NULL, NULL,
                         "%s", j->err);
    else ret = send_json(c, 200, response_obj(s, j), NULL);
    job_unref(j);
    return ret;
}

static enum MHD_Result route_models(server *s, struct MHD_Connection *c) {
    return send_json(c, 200,
                     json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id",
                               s->cfg.model_id, "object", "model", "created",
                               (json_int_t)s->created, "owned_by", "longctx"),
                     NULL);
}

static void hist_print(FILE *f, const char *name, const char *help, const hist *h) {
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < HIST_N; i++) {
        cum += h->bucket[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, hist_bounds[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
            (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
}

static enum MHD_Result route_metrics(server *s, struct MHD_Connection *c) {
    char  *buf = NULL;
    size_t len = 0;
    FILE  *f   = open_memstream(&buf, &len);
    if (!f) return send_error(c, 500, NULL, NULL, "out of memory");
    pthread_mutex_lock(&s->mu);
#define G(name, help, type, v)                                                                 \
    fprintf(f, "# HELP longctx_" name " " help "\n# TYPE longctx_" name " " type               \
               "\nlongctx_" name " %llu\n",                                                    \
            (unsigned long long)(v))
    G("requests_running", "Requests whose sequence is in the context.", "gauge", s->n_running);
    G("requests_waiting", "Requests queued for admission (FCFS).", "gauge", s->n_waiting);
    G("requests_total", "Generation requests accepted into the queue.", "counter", s->m_requests);
    G("requests_finished_total", "Requests that finished (stop, eos or length).", "counter", s->m_ok);
    G("requests_failed_total", "Accepted requests that ended in an error.", "counter", s->m_errors);
    G("requests_cancelled_total", "Requests whose client went away before the end.", "counter",
      s->m_cancelled);
    G("prompt_tokens_total", "Prompt tokens of finished requests.", "counter", s->m_prompt_tokens);
    G("generation_tokens_total", "Generated tokens of finished requests.", "counter", s->m_gen_tokens);
    G("kv_tokens_used", "Tokens held in the KV cache by running sequences.", "gauge", s->m_kv_used);
    G("kv_tokens_total", "KV cache capacity in tokens (all sequences).", "gauge", s->kv_total);
#undef G
    fprintf(f, "# HELP longctx_kv_pages KV cache pages of %d tokens by tier (gpu: the backend's "
               "memory; host: pinned host memory) and state.\n# TYPE longctx_kv_pages gauge\n",
            s->m_kv.page_size);
    fprintf(f, "longctx_kv_pages{tier=\"gpu\",state=\"total\"} %lld\n"
               "longctx_kv_pages{tier=\"gpu\",state=\"used\"} %lld\n"
               "longctx_kv_pages{tier=\"host\",state=\"total\"} %lld\n"
               "longctx_kv_pages{tier=\"host\",state=\"used\"} %lld\n",
            (long long)s->m_kv.gpu_pages, (long long)s->m_kv.gpu_used,
            (long long)s->m_kv.host_pages, (long long)s->m_kv.host_used);
    const lc_kv_usage *u = &s->m_kv; /* the slot cache of host reads (--kv-slot-cache-*) */
    fprintf(f, "# HELP longctx_kv_slot_cache_slabs Slots of the KV slot cache (slabs of %d bytes, "
               "K and V each) per layer, and slots in use over all layers.\n"
               "# TYPE longctx_kv_slot_cache_slabs gauge\n"
               "longctx_kv_slot_cache_slabs{state=\"per_layer\"} %lld\n"
               "longctx_kv_slot_cache_slabs{state=\"used\"} %lld\n",
            u->slab_bytes, (long long)u->cache_slots, (long long)u->cache_used);
    fprintf(f, "# HELP longctx_kv_slot_cache_lookups_total Host-tier slabs a recomputed decode "
               "selection read: found in the slot cache (hit), brought in (miss), past a "
               "layer's slots in one step (overflow, read in place).\n"
               "# TYPE longctx_kv_slot_cache_lookups_total counter\n"
               "longctx_kv_slot_cache_lookups_total{result=\"hit\"} %llu\n"
               "longctx_kv_slot_cache_lookups_total{result=\"miss\"} %llu\n"
               "longctx_kv_slot_cache_lookups_total{result=\"overflow\"} %llu\n",
            (unsigned long long)u->cache_hits, (unsigned long long)u->cache_misses,
            (unsigned long long)u->cache_overflow);
    fprintf(f, "# HELP longctx_kv_slot_cache_evictions_total Misses that displaced a cached slab.\n"
               "# TYPE longctx_kv_slot_cache_evictions_total counter\n"
               "longctx_kv_slot_cache_evictions_total %llu\n"
               "# HELP longctx_kv_host_to_gpu_bytes_total Bytes copied from the host tier into "
               "GPU slots, and of slot maps uploaded.\n"
               "# TYPE longctx_kv_host_to_gpu_bytes_total counter\n"
               "longctx_kv_host_to_gpu_bytes_total{what=\"slabs\"} %llu\n"
               "longctx_kv_host_to_gpu_bytes_total{what=\"maps\"} %llu\n",
            (unsigned long long)u->cache_evictions, (unsigned long long)u->cache_bytes_in,
            (unsigned long long)u->cache_map_bytes);
    fprintf(f, "# HELP longctx_working_set_bytes Working sets of the generating requests: the "
               "host-tier K and V bytes their last recomputed selection read (largest layer).\n"
               "# TYPE longctx_working_set_bytes gauge\n"
               "longctx_working_set_bytes %llu\n"
               "# HELP longctx_requests_held Decode requests the working-set batch control held "
               "in the last step (--ws-batch-control).\n"
               "# TYPE longctx_requests_held gauge\n"
               "longctx_requests_held %d\n",
            (unsigned long long)u->ws_slabs * 2ull * (unsigned long long)u->slab_bytes, u->ws_held);
    hist_print(f, "longctx_time_to_first_token_seconds",
               "From arrival to the first generated token.", &s->h_ttft);
    hist_print(f, "longctx_time_per_output_token_seconds",
               "Mean time between generated tokens of a request.", &s->h_tpot);
    hist_print(f, "longctx_e2e_request_latency_seconds", "From arrival to the last token.",
               &s->h_e2e);
    pthread_mutex_unlock(&s->mu);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return send_error(c, 500, NULL, NULL, "out of memory");
    }
    return send_text(c, 200, "text/plain; version=0.0.4", buf, NULL);
}

static json_t *load_body(struct MHD_Connection *c, conn_state *cs, enum MHD_Result *ret) {
    json_error_t jerr;
    json_t      *o = json_loadb(cs->body ? cs->body : "", cs->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        *ret = send_error(c, 400, NULL, "invalid_json", "invalid JSON at line %d, column %d: %s",
                          jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        *ret = send_error(c, 400, NULL, "invalid_json", "the request body must be a JSON object");
        return NULL;
    }
    return o;
}

/* llama-server's shape: {"content": TEXT, "add_special": false, "parse_special": true} ->
 * {"tokens": [...]} */
static enum MHD_Result route_tokenize(server *s, struct MHD_Connection *c, conn_state *cs) {
    enum MHD_Result ret;
    json_t         *o = load_body(c, cs, &ret);
    if (!o) return ret;
    serve_error e;
    json_t     *ct = json_object_get(o, "content");
    bool        add_special = false, parse_special = true;
    memset(&e, 0, sizeof e);
    if (!json_is_string(ct)) {
        json_decref(o);
        return send_error(c, 400, "content", NULL, "'content' must be a string");
    }
    if (!serve_get_bool(o, "add_special", &add_special, &e) ||
        !serve_get_bool(o, "parse_special", &parse_special, &e)) {
        json_decref(o);
        return send_error(c, e.status, e.param, NULL, "%s", e.msg);
    }
    int32_t  *ids = NULL;
    size_t    n   = 0;
    const int st  = lc_tokenizer_encode(s->tok, json_string_value(ct), json_string_length(ct),
                                        add_special && lc_tokenizer_add_bos(s->tok), parse_special,
                                        &ids, &n);
    json_decref(o);
    if (st != LC_OK) return send_error(c, 400, "content", NULL, "%s", lc_last_error());
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    return send_json(c, 200, json_pack("{s:o}", "tokens", arr), NULL);
}

/* {"tokens": [...]} -> {"content": TEXT} */
static enum MHD_Result route_detokenize(server *s, struct MHD_Connection *c, conn_state *cs) {
    enum MHD_Result ret;
    json_t         *o = load_body(c, cs, &ret);
    if (!o) return ret;
    json_t *t = json_object_get(o, "tokens");
    if (!json_is_array(t)) {
        json_decref(o);
        return send_error(c, 400, "tokens", NULL, "'tokens' must be a list of token ids");
    }
    const int32_t V = lc_tokenizer_n_vocab(s->tok);
    size_t        cap = 1024, len = 0, i;
    char         *out = malloc(cap);
    lc_detok      d   = {{0}, 0};
    json_t       *v;
    if (!out) {
        json_decref(o);
        return send_error(c, 500, NULL, NULL, "out of memory");
    }
    json_array_foreach(t, i, v) {
        const json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= V) {
            free(out);
            json_decref(o);
            return send_error(c, 400, "tokens", NULL, "'tokens[%zu]' is not a token id (0 .. %d)",
                              i, V - 1);
        }
        size_t tl = 0;
        lc_tokenizer_token_bytes(s->tok, (int32_t)id, &tl);
        while (len + 64 + 3 * tl + 1 > cap) {
            char *no = realloc(out, cap *= 2);
            if (!no) {
                free(out);
                json_decref(o);
                return send_error(c, 500, NULL, NULL, "out of memory");
            }
            out = no;
        }
        size_t k = 0;
        lc_detok_push(&d, s->tok, (int32_t)id, out + len, cap - len, &k);
        len += k;
    }
    json_decref(o);
    if (len + 64 > cap) {
        char *no = realloc(out, cap = len + 64);
        if (!no) {
            free(out);
            return send_error(c, 500, NULL, NULL, "out of memory");
        }
        out = no;
    }
    size_t k = 0;
    lc_detok_flush(&d, out + len, cap - len, &k);
    len += k;
    json_t *str = json_stringn(out, len);
    free(out);
    if (!str) return send_error(c, 500, NULL, NULL, "the text is not valid UTF-8");
    return send_json(c, 200, json_pack("{s:o}", "content", str), NULL);
}

/* Authorization: Bearer KEY when --api-key is set (/health and /metrics are open) */
static bool authorized(server *s, struct MHD_Connection *c) {
    if (!s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    const char  *k  = h + 7;
    const size_t kl = strlen(k), wl = strlen(s->cfg.api_key);
    unsigned     diff = (unsigned)(kl ^ wl); /* (compares every byte: no early exit) */
    for (size_t i = 0; i < kl; i++) diff |= (unsigned)(k[i] ^ s->cfg.api_key[i % (wl ? wl : 1)]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    server     *s  = cls;
    conn_state *cs = *con_cls;
    (void)version;
    if (!cs) { /* the first call: headers only */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!cs->too_large && cs->len + *upload_size > s->cfg.max_body) cs->too_large = true;
        if (!cs->too_large) {
            if (cs->len + *upload_size + 1 > cs->cap) {
                size_t cap = cs->cap ? cs->cap : 4096;
                while (cap < cs->len + *upload_size + 1) cap *= 2;
                char *b = realloc(cs->body, cap);
                if (!b) return MHD_NO;
                cs->body = b;
                cs->cap  = cap;
            }
            memcpy(cs->body + cs->len, upload_data, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (s->cfg.verbose) fprintf(stderr, "longctx serve: %s %s\n", method, url);
    if (cs->too_large)
        return send_error(c, 413, NULL, "request_too_large", "the request body is larger than "
                          "%zu bytes (--max-body)", s->cfg.max_body);
    if (!strcmp(url, "/health")) {
        if (!atomic_load(&s->ready))
            return send_json(c, 503, json_pack("{s:s}", "status", "loading model"), "1");
        return send_json(c, 200, json_pack("{s:s}", "status", "ok"), NULL);
    }
    if (!strcmp(url, "/metrics") && get) return route_metrics(s, c);
    const bool known = !strcmp(url, "/v1/models") || !strcmp(url, "/v1/chat/completions") ||
                       !strcmp(url, "/v1/completions") || !strcmp(url, "/tokenize") ||
                       !strcmp(url, "/detokenize") || !strcmp(url, "/metrics");
    if (!known) return send_error(c, 404, NULL, "not_found", "no route %.200s", url);
    if (!authorized(s, c))
        return send_error(c, 401, NULL, "invalid_api_key",
                          "missing or incorrect API key (Authorization: Bearer KEY)");
    if (!atomic_load(&s->ready))
        return send_error(c, 503, NULL, "loading", "the model is still loading");
    if (atomic_load(&s->stopping))
        return send_error(c, 503, NULL, "shutting_down", "the server is shutting down");
    if (!strcmp(url, "/v1/models")) {
        if (!get) return send_error(c, 405, NULL, NULL, "%s %s: use GET", method, url);
        return route_models(s, c);
    }
    if (!post) return send_error(c, 405, NULL, NULL, "%s %s: use POST", method, url);
    if (!strcmp(url, "/v1/chat/completions")) return route_generate(s, c, cs, SERVE_CHAT);
    if (!strcmp(url, "/v1/completions")) return route_generate(s, c, cs, SERVE_COMPLETION);
    if (!strcmp(url, "/tokenize")) return route_tokenize(s, c, cs);
    return route_detokenize(s, c, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    conn_state *cs = *con_cls;
    (void)cls;
    (void)c;
    (void)toe;
    if (!cs) return;
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ---- the command ----------------------------------------------------------------------- */

/* libmicrohttpd's own messages (a client gone mid-response, ...): with --verbose only */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    const server *s = cls;
    if (!s->cfg.verbose) return;
    fprintf(stderr, "longctx serve: http: ");
    vfprintf(stderr, fmt, ap);
}

static void help(void) {
    printf("usage: longctx serve -m FILE [options]\n"
           "\n"
           "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions\n"
           "(stream true or false), GET /v1/models, GET /health, GET /metrics (Prometheus),\n"
           "POST /tokenize, POST /detokenize. One engine thread batches the running requests\n"
           "(continuous batching); new ones wait in a first-come-first-served queue.\n"
           "\n"
           "  --host ADDR             address to listen on (default 127.0.0.1)\n"
           "  --port N                TCP port (default 8080; 0: any free port, printed)\n"
           "  --api-key KEY           require 'Authorization: Bearer KEY' on /v1/*, /tokenize\n"
           "                          and /detokenize (/health and /metrics stay open)\n"
           "  --parallel N            requests generated at once, one sequence each (default 4)\n"
           "  --ctx-max N             tokens one request may hold, prompt and answer (default:\n"
           "                          the model's trained context; the same as -c)\n"
           "  --queue N               requests that may wait for a free sequence (default 64;\n"
           "                          more get 503 with Retry-After)\n"
           "  --max-body BYTES        largest request body (default 8388608; larger: 413)\n"
           "  --prefill-token-layers N  (see below) the server's default is 8192: prompts whose\n"
           "                          whole work fits join a step whole, a longer one advances a\n"
           "                          few layers a step, so running streams never wait for a\n"
           "                          whole prompt chunk (0: chunked prefill, as `run`)\n"
           "  --alias NAME            the model's id in /v1/models and requests (default: the\n"
           "                          file name without .gguf)\n"
           "  --verbose               one line per HTTP request (and libmicrohttpd's messages)\n"
           "                          on stderr\n"
           "\n"
           "Sampling options (--temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed) are\n"
           "the defaults of fields a request leaves out; --repeat-penalty defaults to 1 (off)\n"
           "here, as OpenAI's API has no such penalty. Requests without a seed get one each.\n"
           "\n%s",
           gen_opts_help());
}

/* measured best for goodput and short-request TTFT under a short + long load (8B shape, H200):
 * short TTFT mean 1.3 s against 5.5 s chunked, ITL p99 31 ms against 179 ms */
#define SERVE_PREFILL_TOKEN_LAYERS 8192

int cmd_serve(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    /* the server's default: layer-segmented prefill with injection, 8192 token-layers a step
     * (measured: bench/results/issue25-serve-mix-8b-h200-2026-12-03, bench/NOTES.md 58) */
    o.prefill_token_layers = SERVE_PREFILL_TOKEN_LAYERS;
    serve_cfg cfg = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .queue_max = 64,
                     .max_body = 8u << 20};
    const char *alias = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long long   n;
        const int   r = gen_opts_parse(&o, "serve", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--host")) {
            if (!(cfg.host = cli_value("serve", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--port")) {
            if (!(v = cli_value("serve", argc, argv, &i)) || !cli_int("serve", a, v, 0, 65535, &n))
                return CLI_USAGE;
            cfg.port = (int)n;
        } else if (!strcmp(a, "--api-key")) {
            if (!(cfg.api_key = cli_value("serve", argc, argv, &i))) return CLI_USAGE;
            if (!cfg.api_key[0]) {
                fprintf(stderr, "longctx serve: --api-key: the key is empty\n");
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            if (!(v = cli_value("serve", argc, argv, &i)) || !cli_int("serve", a, v, 1, 256, &n))
                return CLI_USAGE;
            cfg.parallel = (int)n;
        } else if (!strcmp(a, "--ctx-max")) {
            if (!(v = cli_value("serve", argc, argv, &i)) ||
                !cli_int("serve", a, v, 1, 1 << 30, &o.n_ctx))
                return CLI_USAGE;
        } else if (!strcmp(a, "--queue")) {
            if (!(v = cli_value("serve", argc, argv, &i)) || !cli_int("serve", a, v, 1, 1 << 20, &n))
                return CLI_USAGE;
            cfg.queue_max = (int)n;
        } else if (!strcmp(a, "--max-body")) {
            if (!(v = cli_value("serve", argc, argv, &i)) ||
                !cli_int("serve", a, v, 1024, 1LL << 32, &n))
                return CLI_USAGE;
            cfg.max_body = (size_t)n;
        } else if (!strcmp(a, "--alias")) {
            if (!(alias = cli_value("serve", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--verbose")) {
            cfg.verbose = true;
        } else {
            cli_unknown_option("serve", a);
            return CLI_USAGE;
        }
    }
    if (!o.model) {
        fprintf(stderr, "longctx serve: no model given (-m FILE)\n");
        return CLI_USAGE;
    }
    if (!gen_opts_check(&o, "serve")) return CLI_USAGE;
    /* the model id: --alias, else the file's name without the directory and .gguf */
    char        id[256];
    const char *base = strrchr(o.model, '/');
    snprintf(id, sizeof id, "%s", alias ? alias : base ? base + 1 : o.model);
    const size_t il = strlen(id);
    if (!alias && il > 5 && !strcmp(id + il - 5, ".gguf")) id[il - 5] = '\0';
    cfg.model_id = id;

    server *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "longctx serve: out of memory\n");
        return CLI_ERR;
    }
    s->cfg      = cfg;
    s->defaults = o.sampling;
    s->created  = (long long)time(NULL);
    atomic_init(&s->ready, 0);
    atomic_init(&s->stopping, 0);
    atomic_init(&s->next_id, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);

    /* SIGINT and SIGTERM go to sigwait below: blocked in every thread made from here on */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int              rc = CLI_ERR;
    struct MHD_Daemon *d = NULL;
    pthread_t        engine;
    bool             engine_started = false;
    /* listen first, load after: /health says 503 while the model loads */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    char            port[16];
    snprintf(port, sizeof port, "%d", cfg.port);
    const int gai = getaddrinfo(cfg.host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        fprintf(stderr, "longctx serve: --host %s: %s\n", cfg.host, gai_strerror(gai));
        goto done;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC; /* (ITC: quiesce) */
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    d = MHD_start_daemon(flags, (uint16_t)cfg.port, NULL, NULL, on_request, s,
                         MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr, "longctx serve: cannot listen on %s port %d: %s\n", cfg.host, cfg.port,
                strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    const int bound = di ? (int)di->port : cfg.port;
    fprintf(stderr, "longctx serve: listening on http://%s:%d (loading %s)\n", cfg.host, bound,
            o.model);

    if (gen_load("serve", &o, &s->model) != CLI_OK) goto done;
    s->tok = lc_model_tokenizer(s->model);
    lc_context_params cp;
    o.n_seq_max = cfg.parallel;
    if (gen_context_params("serve", &o, s->model, 0, &cp) != CLI_OK) goto done;
    cp.n_seq_max = cfg.parallel;
    if (cp.kv_tokens == 0) cp.kv_tokens = (int64_t)cp.n_ctx * cfg.parallel;
    int st = lc_context_create(s->model, &cp, &s->ctx);
    if (st != LC_OK) {
        cli_fail("serve", "creating the context", st);
        goto done;
    }
    s->n_ctx    = cp.n_ctx;
    s->kv_total = cp.kv_tokens;
    lc_context_kv_usage(s->ctx, &s->m_kv);
    if (pthread_create(&engine, NULL, engine_main, s) != 0) {
        fprintf(stderr, "longctx serve: cannot start the engine thread\n");
        goto done;
    }
    engine_started = true;
    atomic_store(&s->ready, 1);
    fprintf(stderr, "longctx serve: ready: model '%s', %d parallel, %d tokens a request, KV %lld "
            "tokens\n", cfg.model_id, cfg.parallel, s->n_ctx, (long long)s->kv_total);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "longctx serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = CLI_OK;
done:
    atomic_store(&s->stopping, 1);
    if (engine_started) { /* the engine ends every request (503), then the connections end */
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(engine, NULL);
    }
    if (d) { /* no new connections; the responses in flight finish (10 s at most) */
        const MHD_socket ls = MHD_quiesce_daemon(d); /* (ours to close now) */
        for (int i = 0; i < 1000 && atomic_load(&live_jobs) > 0; i++) {
            const struct timespec ms10 = {0, 10000000L};
            nanosleep(&ms10, NULL);
        }
        MHD_stop_daemon(d);
        if (ls != MHD_INVALID_SOCKET) close(ls);
    }
    lc_context_free(s->ctx);
    lc_model_free(s->model);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return rc;
}

#endif /* LC_HAVE_SERVER */
