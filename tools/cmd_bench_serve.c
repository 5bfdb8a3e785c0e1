/*
 * cmd_bench_serve.c — `longctx bench serve`: a load generator and latency meter for an
 * OpenAI-compatible server (ours, or llama-server / vLLM / SGLang: anything that streams
 * /v1/completions as SSE). Issue 25's benchmark client: prompts cut from a real text (token
 * ids from the server's /tokenize, lengths drawn around --input-len), Poisson arrivals at
 * --request-rate (or all at once) under an optional --max-concurrency, each request streamed;
 * per request the time to first token (TTFT), the gaps between streamed chunks (ITL), time per
 * output token after the first (TPOT) and end-to-end latency; reported as mean / median / std /
 * percentiles, request and token throughput and goodput under SLOs, with the field names of
 * `vllm bench serve`'s result JSON so its plotting scripts read ours. Plain HTTP/1.1 over TCP
 * (no TLS), JSON through jansson. Built with the server (LC_HAVE_SERVER).
 */
#include "cli.h"
#include "eval_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(LC_HAVE_SERVER)
#include "http_client.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DATASET "data/haystack/django-docs.txt"

static void help(void) {
    printf(
        "usage: longctx bench serve [--url URL] [--num-prompts N] [--request-rate R]\n"
        "                           [--max-concurrency C] [--dataset FILE] [--input-len L]\n"
        "                           [--output-len O] [--range-ratio X] [--ignore-eos]\n"
        "                           [--goodput ttft:MS,tpot:MS,e2el:MS] [--percentiles P,P]\n"
        "                           [--api-key KEY] [--model NAME] [--seed S] [--timeout S]\n"
        "                           [--result-file FILE.json] [--save-detailed]\n"
        "\n"
        "Load an OpenAI-compatible server with N streamed /v1/completions requests and measure\n"
        "them. Prompts are token-id slices of FILE (default %s, `make haystack`),\n"
        "tokenized once by the server's POST /tokenize; each request's input and output lengths\n"
        "are drawn uniformly in [L(1-X), L(1+X)] and [O(1-X), O(1+X)].\n"
        "  --url URL             the server (default http://127.0.0.1:8080)\n"
        "  --num-prompts N       requests to send (default 100)\n"
        "  --request-rate R      Poisson arrivals at R requests/s; inf (default): all at once\n"
        "  --max-concurrency C   at most C requests in flight (default: no limit)\n"
        "  --input-len L         prompt tokens (default 1024); --output-len O (default 128)\n"
        "  --range-ratio X       spread of both lengths, 0..1 (default 0: fixed)\n"
        "  --ignore-eos          ask for exactly the drawn output length (vLLM's extension;\n"
        "                        without it a request may stop at end-of-sequence)\n"
        "  --goodput SLOS        requests per second that meet every SLO, e.g. ttft:2000,tpot:50\n"
        "  --percentiles LIST    percentiles reported (default 50,90,99)\n"
        "  --api-key KEY         sent as Authorization: Bearer KEY\n"
        "  --model NAME          the request's model (default: the first of GET /v1/models)\n"
        "  --seed S              lengths, offsets and arrivals (default 0)\n"
        "  --timeout S           give up on a request after S seconds (default 600)\n"
        "  --result-file FILE    write the results as JSON (vllm bench serve's fields)\n"
        "  --save-detailed       also per-request lengths, TTFTs, ITLs and errors in the JSON\n"
        "Prints the table on stdout, progress on stderr. Exit 1 when a request failed or the\n"
        "server could not be reached, 2 on a usage error.\n",
        DEFAULT_DATASET);
}

/* ---- HTTP over one TCP connection per request ---- */

typedef struct url_t {
    char host[256];
    char port[16];
} url_t;

static bool parse_url(const char *s, url_t *u) {
    if (strncmp(s, "http://", 7) != 0) return false;
    s += 7;
    const char *end = s + strcspn(s, "/");
    const char *colon = memchr(s, ':', (size_t)(end - s));
    const char *hend  = colon ? colon : end;
    if (hend == s || (size_t)(hend - s) >= sizeof u->host) return false;
    memcpy(u->host, s, (size_t)(hend - s));
    u->host[hend - s] = 0;
    if (colon) {
        const size_t pl = (size_t)(end - colon - 1);
        if (pl == 0 || pl >= sizeof u->port || strspn(colon + 1, "0123456789") < pl) return false;
        memcpy(u->port, colon + 1, pl);
        u->port[pl] = 0;
    } else {
        strcpy(u->port, "80");
    }
    return *end == 0 || !strcmp(end, "/");
}

static int tcp_connect(const url_t *u, double timeout_s, char *err, size_t cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    const int       g     = getaddrinfo(u->host, u->port, &hints, &res);
    if (g != 0) {
        snprintf(err, cap, "cannot resolve %.100s: %.100s", u->host, gai_strerror(g));
        return -1;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        struct timeval tv = {.tv_sec = (time_t)timeout_s,
                             .tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) snprintf(err, cap, "cannot connect to %.100s:%s: %.100s", u->host, u->port, strerror(e));
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}


/* method path with body (or none); *status_out (when given) is set once the headers are read,
 * before the decoded body goes to fn (or, fn NULL, into *whole). Returns the HTTP status, or -1
 * with err set. */
static int http_call(const url_t *u, const char *api_key, const char *method, const char *path,
                     const char *body, double timeout_s, int *status_out, hc_body_fn fn, void *user,
                     hc_buf *whole, char *err, size_t cap) {
    const int fd = tcp_connect(u, timeout_s, err, cap);
    if (fd < 0) return -1;
    char   head[1024];
    size_t bl = body ? strlen(body) : 0;
    int    hl = snprintf(head, sizeof head,
                         "%s %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n"
                            "Accept: text/event-stream, application/json\r\n%s%s%s"
                            "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         method, path, u->host, u->port, api_key ? "Authorization: Bearer " : "",
                         api_key ? api_key : "", api_key ? "\r\n" : "", bl);
    if (hl < 0 || (size_t)hl >= sizeof head || !send_all(fd, head, (size_t)hl) ||
        (bl && !send_all(fd, body, bl))) {
        snprintf(err, cap, "sending the request failed: %s", strerror(errno));
        close(fd);
        return -1;
    }
    hc_response resp;
    hc_response_init(&resp, fn, user, whole);
    bool ok = true;
    char rb[16384];
    for (;;) {
        const ssize_t r = recv(fd, rb, sizeof rb, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, cap, "%s", errno == EAGAIN || errno == EWOULDBLOCK
                                         ? "timed out waiting for the server"
                                         : strerror(errno));
            ok = false;
            break;
        }
        if (r == 0) break;
        const bool had_headers = resp.headers_done;
        if (!hc_response_feed(&resp, rb, (size_t)r)) {
            snprintf(err, cap, "%s", resp.err);
            ok = false;
            break;
        }
        if (!had_headers && resp.headers_done && status_out) *status_out = resp.status;
        if (resp.finished) break;
    }
    close(fd);
    const int status = resp.status;
    if (ok && !resp.headers_done) {
        snprintf(err, cap, "the server closed the connection without a response");
        ok = false;
    }
    hc_response_free(&resp);
    return ok ? status : -1;
}

/* ---- one streamed request ---- */

typedef struct req_t {
    int32_t *ids;
    int      n_in, n_out_want;
    /* measured */
    bool      ok;
    char      error[256];
    double    t_send, t_first, t_end;
    hc_stream sse;    /* the streamed answer: text, chunk arrival times, usage */
    int       n_out;  /* usage.completion_tokens, else the chunks */
    int       status;
    hc_buf    err_body;
} req_t;

typedef struct run_t {
    url_t       url;
    const char *api_key, *model;
    bool        ignore_eos;
    double      timeout_s;
    req_t      *reqs;
    int         n;
    double     *arrival; /* seconds after t0 */
    double      t0;
    atomic_int  next, finished, failed;
} run_t;

/* The status line of a non-200 answer: its error message when it is OpenAI's shape. */
static void http_error(req_t *r) {
    json_error_t je;
    json_t      *o = r->err_body.p ? json_loads(r->err_body.p, 0, &je) : NULL;
    json_t      *m = o ? json_object_get(json_object_get(o, "error"), "message") : NULL;
    snprintf(r->error, sizeof r->error, "HTTP %d: %s", r->status,
             json_is_string(m) ? json_string_value(m) : "(no error message)");
    json_decref(o);
}

/* A 200 answer is an SSE stream, parsed as it comes; any other is kept whole for its error. */
static bool on_body(void *user, const char *p, size_t n) {
    req_t *r = user;
    return r->status == 200 ? hc_stream_feed(&r->sse, p, n, cli_now())
                            : hc_buf_add(&r->err_body, p, n);
}

static void run_one(run_t *R, req_t *r) {
    json_t *ids = json_array();
    for (int i = 0; i < r->n_in; i++) json_array_append_new(ids, json_integer(r->ids[i]));
    json_t *o = json_pack("{s:o, s:i, s:b, s:{s:b}, s:f, s:b}", "prompt", ids, "max_tokens",
                          r->n_out_want, "stream", 1, "stream_options", "include_usage", 1,
                          "temperature", 0.0, "ignore_eos", R->ignore_eos);
    if (R->model) json_object_set_new(o, "model", json_string(R->model));
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body) {
        snprintf(r->error, sizeof r->error, "out of memory for the request");
        return;
    }
    r->t_send = cli_now();
    char      err[256] = "";
    const int st = http_call(&R->url, R->api_key, "POST", "/v1/completions", body, R->timeout_s,
                             &r->status, on_body, r, NULL, err, sizeof err);
    r->t_end = cli_now();
    free(body);
    if (st < 0) {
        snprintf(r->error, sizeof r->error, "%s", err);
        return;
    }
    if (st != 200) {
        http_error(r);
        return;
    }
    if (r->sse.error[0]) {
        snprintf(r->error, sizeof r->error, "%s", r->sse.error);
        return;
    }
    if (!r->sse.done_seen) {
        snprintf(r->error, sizeof r->error, "the stream ended without [DONE]");
        return;
    }
    r->n_out = r->sse.n_out > 0 ? r->sse.n_out : r->sse.n_chunks;
    if (r->sse.n_chunks > 0) r->t_first = r->sse.chunk_t[0];
    if (r->sse.n_chunks == 0) {
        snprintf(r->error, sizeof r->error, "no token streamed");
        return;
    }
    r->ok = true;
}

static void *worker(void *arg) {
    run_t *R = arg;
    for (;;) {
        const int i = atomic_fetch_add(&R->next, 1);
        if (i >= R->n) break;
        const double wait = R->t0 + R->arrival[i] - cli_now();
        if (wait > 0) {
            struct timespec ts = {.tv_sec = (time_t)wait,
                                  .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
        run_one(R, &R->reqs[i]);
        if (!R->reqs[i].ok) atomic_fetch_add(&R->failed, 1);
        atomic_fetch_add(&R->finished, 1);
    }
    return NULL;
}

/* ---- statistics ---- */

/* numpy's default percentile (linear between closest ranks) of sorted v[n] */
static double pct(const double *v, int n, double p) {
    if (n == 0) return 0;
    const double x = p / 100.0 * (n - 1);
    const int    lo = (int)floor(x), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (x - lo);
}

typedef struct stat_t {
    double mean, median, std, p[8];
} stat_t;

static stat_t stats(double *v, int n, const double *ps, int n_ps) {
    stat_t s = {0};
    if (n == 0) return s;
    qsort(v, (size_t)n, sizeof *v, cli_cmp_double);
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.mean = sum / n;
    for (int i = 0; i < n; i++) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.std    = sqrt(sq / n);
    s.median = pct(v, n, 50);
    for (int k = 0; k < n_ps; k++) s.p[k] = pct(v, n, ps[k]);
    return s;
}

static int draw_len(uint64_t *s, long long base, double ratio) {
    const long long lo = (long long)floor(base * (1 - ratio)), hi = (long long)ceil(base * (1 + ratio));
    const long long l  = lo + (long long)(eval_rng_unit(s) * (double)(hi - lo + 1));
    return (int)(l < 1 ? 1 : l > hi ? hi : l);
}

/* "ttft:MS,tpot:MS,e2el:MS" */
static bool parse_goodput(const char *s, double slo[3]) {
    static const char *names[3] = {"ttft", "tpot", "e2el"};
    char               tmp[256];
    if (strlen(s) >= sizeof tmp) return false;
    strcpy(tmp, s);
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *c = strchr(t, ':');
        if (!c) return false;
        *c = 0;
        int k = -1;
        for (int j = 0; j < 3; j++)
            if (!strcmp(t, names[j])) k = j;
        char        *end;
        const double v = strtod(c + 1, &end);
        if (k < 0 || *end || !(v > 0)) return false;
        slo[k] = v;
    }
    return true;
}

static void add_stat(json_t *o, const char *name, const stat_t *s, const double *ps, int n_ps) {
    char key[64];
    snprintf(key, sizeof key, "mean_%s_ms", name), json_object_set_new(o, key, json_real(s->mean));
    snprintf(key, sizeof key, "median_%s_ms", name), json_object_set_new(o, key, json_real(s->median));
    snprintf(key, sizeof key, "std_%s_ms", name), json_object_set_new(o, key, json_real(s->std));
    for (int k = 0; k < n_ps; k++) {
        char p[32];
        snprintf(p, sizeof p, "%g", ps[k]);
        snprintf(key, sizeof key, "p%s_%s_ms", p, name);
        json_object_set_new(o, key, json_real(s->p[k]));
    }
}

static void print_stat(const char *title, const char *name, const stat_t *s, const double *ps,
                       int n_ps) {
    printf("%s\n", title);
    printf("%-40s %10.2f\n", "Mean (ms):", s->mean);
    printf("%-40s %10.2f\n", "Median (ms):", s->median);
    for (int k = 0; k < n_ps; k++) {
        char l[64];
        snprintf(l, sizeof l, "P%g %s (ms):", ps[k], name);
        printf("%-40s %10.2f\n", l, s->p[k]);
    }
}

int cmd_bench_serve(int argc, char **argv) {
    const char *C = "bench serve";
    const char *url_s = "http://127.0.0.1:8080", *dataset = DEFAULT_DATASET, *api_key = NULL,
               *model = NULL, *result_file = NULL, *pcts = "50,90,99", *goodput = NULL;
    long long   n = 100, max_conc = 0, in_len = 1024, out_len = 128, seed = 0;
    double      rate = INFINITY, ratio = 0, timeout_s = 600;
    bool        ignore_eos = false, detailed = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = true;
        } else if (!strcmp(a, "--save-detailed")) {
            detailed = true;
        } else if (!(v = cli_value(C, argc, argv, &i))) {
            return CLI_USAGE;
        } else if (!strcmp(a, "--url")) {
            url_s = v;
        } else if (!strcmp(a, "--dataset")) {
            dataset = v;
        } else if (!strcmp(a, "--api-key")) {
            api_key = v;
        } else if (!strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--result-file")) {
            result_file = v;
        } else if (!strcmp(a, "--percentiles")) {
            pcts = v;
        } else if (!strcmp(a, "--goodput")) {
            goodput = v;
        } else if (!strcmp(a, "--num-prompts")) {
            if (!cli_int(C, a, v, 1, 1000000, &n)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-concurrency")) {
            if (!cli_int(C, a, v, 1, 100000, &max_conc)) return CLI_USAGE;
        } else if (!strcmp(a, "--input-len")) {
            if (!cli_int(C, a, v, 1, 1 << 24, &in_len)) return CLI_USAGE;
        } else if (!strcmp(a, "--output-len")) {
            if (!cli_int(C, a, v, 1, 1 << 24, &out_len)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed")) {
            if (!cli_int(C, a, v, 0, (1ll << 62), &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--request-rate")) {
            if (strcmp(v, "inf") && !cli_float(C, a, v, 1e-6, 1e9, &rate)) return CLI_USAGE;
        } else if (!strcmp(a, "--range-ratio")) {
            if (!cli_float(C, a, v, 0, 1, &ratio)) return CLI_USAGE;
        } else if (!strcmp(a, "--timeout")) {
            if (!cli_float(C, a, v, 0.001, 1e6, &timeout_s)) return CLI_USAGE;
        } else {
            cli_unknown_option(C, a);
            return CLI_USAGE;
        }
    }
    run_t R;
    memset(&R, 0, sizeof R);
    if (!parse_url(url_s, &R.url)) {
        fprintf(stderr, "longctx %s: --url '%s' is not http://HOST[:PORT] (no TLS, no path)\n", C,
                url_s);
        return CLI_USAGE;
    }
    double ps[8];
    int    n_ps = 0;
    {
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s", pcts);
        for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *end;
            const double p = strtod(t, &end);
            if (*end || !(p > 0 && p < 100) || n_ps == 8) {
                fprintf(stderr, "longctx %s: --percentiles '%s': up to 8 values in (0, 100)\n",
                        C, pcts);
                return CLI_USAGE;
            }
            ps[n_ps++] = p;
        }
    }
    double slo[3] = {0, 0, 0}; /* ttft, tpot, e2el in ms; 0: none */
    if (goodput && !parse_goodput(goodput, slo)) {
        fprintf(stderr, "longctx %s: --goodput '%s' is not KEY:MS[,KEY:MS] with KEY ttft, tpot "
                "or e2el and MS > 0\n", C, goodput);
        return CLI_USAGE;
    }

    /* the dataset's tokens, from the server */
    size_t text_len = 0;
    char  *text     = cli_read_file(C, dataset, &text_len);
    if (!text) return CLI_ERR;
    char   err[256];
    hc_buf resp = {0};
    json_t *tq  = json_pack("{s:s%, s:b, s:b}", "content", text, text_len, "add_special", 0,
                            "parse_special", 0);
    free(text);
    char *tbody = tq ? json_dumps(tq, JSON_COMPACT) : NULL;
    json_decref(tq);
    if (!tbody) {
        fprintf(stderr, "longctx %s: %s is not valid UTF-8 text, or out of memory\n", C, dataset);
        return CLI_ERR;
    }
    fprintf(stderr, "bench serve: tokenizing %s (%zu bytes) on %s:%s\n", dataset, text_len,
            R.url.host, R.url.port);
    int st = http_call(&R.url, api_key, "POST", "/tokenize", tbody, timeout_s, NULL, NULL, NULL,
                       &resp, err, sizeof err);
    free(tbody);
    json_error_t je;
    json_t      *tr   = st == 200 && resp.p ? json_loads(resp.p, 0, &je) : NULL;
    json_t      *toks = tr ? json_object_get(tr, "tokens") : NULL;
    if (!json_is_array(toks)) {
        fprintf(stderr, "longctx %s: POST /tokenize on %s: %s\n", C, url_s,
                st < 0 ? err : "no {\"tokens\": [...]} in the answer (the server needs llama-server's /tokenize)");
        if (st > 0 && resp.p) fprintf(stderr, "  HTTP %d: %.300s\n", st, resp.p);
        json_decref(tr), free(resp.p);
        return CLI_ERR;
    }
    const size_t n_tok = json_array_size(toks);
    int32_t     *tok   = malloc(sizeof *tok * (n_tok ? n_tok : 1));
    for (size_t i = 0; tok && i < n_tok; i++)
        tok[i] = (int32_t)json_integer_value(json_array_get(toks, i));
    json_decref(tr), free(resp.p), resp = (hc_buf){0};
    if (!model) { /* the first served model */
        st = http_call(&R.url, api_key, "GET", "/v1/models", NULL, timeout_s, NULL, NULL, NULL,
                       &resp, err, sizeof err);
        json_t *mo = st == 200 && resp.p ? json_loads(resp.p, 0, &je) : NULL;
        json_t *id = mo ? json_object_get(json_array_get(json_object_get(mo, "data"), 0), "id") : NULL;
        static char model_buf[256];
        if (json_is_string(id)) snprintf(model_buf, sizeof model_buf, "%s", json_string_value(id));
        model = json_is_string(id) ? model_buf : NULL;
        json_decref(mo), free(resp.p), resp = (hc_buf){0};
    }

    /* requests: lengths, offsets, arrivals */
    R.n = (int)n, R.api_key = api_key, R.model = model, R.ignore_eos = ignore_eos;
    R.timeout_s = timeout_s;
    R.reqs      = calloc((size_t)n, sizeof *R.reqs);
    R.arrival   = calloc((size_t)n, sizeof *R.arrival);
    if (!tok || !R.reqs || !R.arrival) {
        fprintf(stderr, "longctx %s: out of memory for %lld requests\n", C, n);
        free(tok), free(R.reqs), free(R.arrival);
        return CLI_ERR;
    }
    uint64_t rs = ((uint64_t)seed * 0x2545F4914F6CDD1Dull) | 1; /* xorshift: never 0 */
    double   t  = 0;
    int      rc = CLI_OK;
    for (int i = 0; i < R.n; i++) {
        req_t *r      = &R.reqs[i];
        r->n_in       = draw_len(&rs, in_len, ratio);
        r->n_out_want = draw_len(&rs, out_len, ratio);
        if ((size_t)r->n_in > n_tok) {
            fprintf(stderr, "longctx %s: request %d wants %d prompt tokens; %s holds %zu\n", C, i,
                    r->n_in, dataset, n_tok);
            rc = CLI_USAGE;
            break;
        }
        const size_t off = (size_t)(eval_rng_unit(&rs) * (double)(n_tok - (size_t)r->n_in + 1));
        r->ids           = tok + (off > n_tok - (size_t)r->n_in ? n_tok - (size_t)r->n_in : off);
        if (isfinite(rate)) t += -log(1.0 - eval_rng_unit(&rs)) / rate; /* exponential gaps */
        R.arrival[i] = isfinite(rate) ? t : 0;
    }
    if (rc != CLI_OK) {
        free(tok), free(R.reqs), free(R.arrival);
        return rc;
    }

    int n_workers = max_conc > 0 && max_conc < n ? (int)max_conc : (int)n;
    if (n_workers > 1024) n_workers = 1024; /* threads; more in flight gain nothing here */
    pthread_t *th = calloc((size_t)n_workers, sizeof *th);
    char rate_s[32] = "inf (all at once)";
    if (isfinite(rate)) snprintf(rate_s, sizeof rate_s, "%g/s (Poisson)", rate);
    fprintf(stderr, "bench serve: %lld requests, model %s, input %lld, output %lld (ratio %g), "
            "rate %s, max concurrency %d\n", n, model ? model : "(none given)", in_len, out_len,
            ratio, rate_s, n_workers);
    R.t0 = cli_now();
    int started = 0;
    for (; th && started < n_workers; started++)
        if (pthread_create(&th[started], NULL, worker, &R) != 0) break;
    if (started == 0) {
        fprintf(stderr, "longctx %s: could not start a thread\n", C);
        free(th), free(tok), free(R.reqs), free(R.arrival);
        return CLI_ERR;
    }
    cli_progress prog;
    cli_progress_begin(&prog, "bench serve");
    while (atomic_load(&R.finished) < R.n) {
        cli_progress_update(&prog, atomic_load(&R.finished), R.n, "requests");
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cli_progress_update(&prog, R.n, R.n, "requests");
    cli_progress_end(&prog);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    double t_last = R.t0;
    for (int i = 0; i < R.n; i++)
        if (R.reqs[i].t_end > t_last) t_last = R.reqs[i].t_end;
    const double duration = t_last - R.t0;

    /* metrics */
    double *ttft = calloc((size_t)R.n, sizeof *ttft), *tpot = calloc((size_t)R.n, sizeof *tpot);
    double *e2el = calloc((size_t)R.n, sizeof *e2el);
    size_t  n_itl_all = 0;
    for (int i = 0; i < R.n; i++)
        if (R.reqs[i].ok && R.reqs[i].sse.n_chunks > 1) n_itl_all += (size_t)R.reqs[i].sse.n_chunks - 1;
    double *itl = calloc(n_itl_all ? n_itl_all : 1, sizeof *itl);
    int     done = 0, n_tpot = 0, good = 0;
    long long tot_in = 0, tot_out = 0;
    size_t  k_itl = 0;
    for (int i = 0; ttft && tpot && e2el && itl && i < R.n; i++) {
        req_t *r = &R.reqs[i];
        if (!r->ok) continue;
        const double tt = (r->t_first - r->t_send) * 1e3, ee = (r->t_end - r->t_send) * 1e3;
        const double tp = r->n_out > 1 ? (ee - tt) / (r->n_out - 1) : 0;
        ttft[done] = tt, e2el[done] = ee;
        if (r->n_out > 1) tpot[n_tpot++] = tp;
        for (int c = 1; c < r->sse.n_chunks; c++)
            itl[k_itl++] = (r->sse.chunk_t[c] - r->sse.chunk_t[c - 1]) * 1e3;
        tot_in += r->sse.n_in_usage > 0 ? r->sse.n_in_usage : r->n_in;
        tot_out += r->n_out;
        if ((slo[0] == 0 || tt <= slo[0]) && (slo[1] == 0 || tp <= slo[1]) &&
            (slo[2] == 0 || ee <= slo[2]))
            good++;
        done++;
    }
    if (!ttft || !tpot || !e2el || !itl) {
        fprintf(stderr, "longctx %s: out of memory for the statistics\n", C);
        rc = CLI_ERR;
    }
    json_t *res = json_object();
    if (rc == CLI_OK) {
        /* the per-request lists, in request order, before the sorting below */
        json_t *in_l = json_array(), *out_l = json_array(), *tt_l = json_array(),
               *itl_l = json_array(), *txt_l = json_array(), *err_l = json_array();
        for (int i = 0; detailed && i < R.n; i++) {
            req_t *r = &R.reqs[i];
            json_array_append_new(in_l, json_integer(r->n_in));
            json_array_append_new(out_l, json_integer(r->ok ? r->n_out : 0));
            json_array_append_new(tt_l, json_real(r->ok ? r->t_first - r->t_send : 0));
            json_t *il = json_array();
            for (int c = 1; r->ok && c < r->sse.n_chunks; c++)
                json_array_append_new(il, json_real(r->sse.chunk_t[c] - r->sse.chunk_t[c - 1]));
            json_array_append_new(itl_l, il);
            json_array_append_new(txt_l, json_string(r->sse.text.p && r->ok ? r->sse.text.p : ""));
            json_array_append_new(err_l, json_string(r->ok ? "" : r->error));
        }
        const stat_t s_tt = stats(ttft, done, ps, n_ps), s_tp = stats(tpot, n_tpot, ps, n_ps);
        const stat_t s_it = stats(itl, (int)k_itl, ps, n_ps), s_ee = stats(e2el, done, ps, n_ps);
        char date[32], commit[64];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y%m%d-%H%M%S", gmtime(&now));
        cli_commit_name(commit, sizeof commit);
        json_object_set_new(res, "date", json_string(date));
        json_object_set_new(res, "backend", json_string("openai"));
        json_object_set_new(res, "client", json_string("longctx bench serve"));
        json_object_set_new(res, "client_commit", json_string(commit));
        json_object_set_new(res, "base_url", json_string(url_s));
        json_object_set_new(res, "endpoint", json_string("/v1/completions"));
        json_object_set_new(res, "model_id", model ? json_string(model) : json_null());
        json_object_set_new(res, "tokenizer_id", json_string("server /tokenize"));
        json_object_set_new(res, "dataset", json_string(dataset));
        json_object_set_new(res, "num_prompts", json_integer(R.n));
        json_object_set_new(res, "request_rate", isfinite(rate) ? json_real(rate) : json_string("inf"));
        json_object_set_new(res, "burstiness", json_real(1.0));
        json_object_set_new(res, "max_concurrency", max_conc ? json_integer(max_conc) : json_null());
        json_object_set_new(res, "duration", json_real(duration));
        json_object_set_new(res, "completed", json_integer(done));
        json_object_set_new(res, "failed", json_integer(R.n - done));
        json_object_set_new(res, "total_input_tokens", json_integer(tot_in));
        json_object_set_new(res, "total_output_tokens", json_integer(tot_out));
        json_object_set_new(res, "request_throughput", json_real(duration > 0 ? done / duration : 0));
        json_object_set_new(res, "request_goodput",
                            goodput ? json_real(duration > 0 ? good / duration : 0) : json_null());
        json_object_set_new(res, "output_throughput", json_real(duration > 0 ? tot_out / duration : 0));
        json_object_set_new(res, "total_token_throughput",
                            json_real(duration > 0 ? (tot_in + tot_out) / duration : 0));
        add_stat(res, "ttft", &s_tt, ps, n_ps);
        add_stat(res, "tpot", &s_tp, ps, n_ps);
        add_stat(res, "itl", &s_it, ps, n_ps);
        add_stat(res, "e2el", &s_ee, ps, n_ps);
        if (detailed) {
            json_object_set_new(res, "input_lens", in_l);
            json_object_set_new(res, "output_lens", out_l);
            json_object_set_new(res, "ttfts", tt_l);
            json_object_set_new(res, "itls", itl_l);
            json_object_set_new(res, "generated_texts", txt_l);
            json_object_set_new(res, "errors", err_l);
        } else {
            json_decref(in_l), json_decref(out_l), json_decref(tt_l), json_decref(itl_l);
            json_decref(txt_l), json_decref(err_l);
        }

        printf("============ Serving Benchmark Result ============\n");
        printf("%-40s %10d\n", "Successful requests:", done);
        printf("%-40s %10d\n", "Failed requests:", R.n - done);
        printf("%-40s %10.2f\n", "Benchmark duration (s):", duration);
        printf("%-40s %10lld\n", "Total input tokens:", tot_in);
        printf("%-40s %10lld\n", "Total generated tokens:", tot_out);
        printf("%-40s %10.2f\n", "Request throughput (req/s):", duration > 0 ? done / duration : 0);
        if (goodput)
            printf("%-40s %10.2f\n", "Request goodput (req/s):", duration > 0 ? good / duration : 0);
        printf("%-40s %10.2f\n", "Output token throughput (tok/s):",
               duration > 0 ? tot_out / duration : 0);
        printf("%-40s %10.2f\n", "Total token throughput (tok/s):",
               duration > 0 ? (tot_in + tot_out) / duration : 0);
        print_stat("---------------Time to First Token----------------", "TTFT", &s_tt, ps, n_ps);
        print_stat("-----Time per Output Token (excl. 1st token)------", "TPOT", &s_tp, ps, n_ps);
        print_stat("---------------Inter-token Latency----------------", "ITL", &s_it, ps, n_ps);
        print_stat("----------------End-to-end Latency----------------", "E2EL", &s_ee, ps, n_ps);
        printf("==================================================\n");
        /* the first few failures, with their reasons */
        int shown = 0;
        for (int i = 0; i < R.n && shown < 5; i++)
            if (!R.reqs[i].ok) {
                fprintf(stderr, "bench serve: request %d failed: %s\n", i, R.reqs[i].error);
                shown++;
            }
        if (done < R.n) rc = CLI_ERR;
    }
    if (result_file && json_object_size(res) > 0) {
        if (json_dump_file(res, result_file, JSON_INDENT(1)) != 0) {
            fprintf(stderr, "longctx %s: could not write %s: %s\n", C, result_file, strerror(errno));
            rc = CLI_ERR;
        } else {
            fprintf(stderr, "bench serve: results in %s\n", result_file);
        }
    }
    json_decref(res);
    for (int i = 0; i < R.n; i++) {
        hc_stream_free(&R.reqs[i].sse);
        free(R.reqs[i].err_body.p);
    }
    free(ttft), free(tpot), free(e2el), free(itl);
    free(tok), free(R.reqs), free(R.arrival);
    return rc;
}


#else
int cmd_bench_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "longctx bench serve: built without server support (libmicrohttpd and jansson "
                    "were not found at configure time)\n");
    return CLI_ERR;
}
#endif
