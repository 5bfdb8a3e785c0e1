/*
 * http_client.c — the HTTP/1.1 response and OpenAI SSE stream decoders of `longctx bench serve`
 * (http_client.h; issue 25's benchmark client).
 */
#include "http_client.h"

#if defined(LC_HAVE_SERVER) /* (jansson comes with the server's libraries) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool hc_buf_add(hc_buf *b, const char *s, size_t n) {
    if (n > ((size_t)-1) / 2 - b->n) return false;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return false;
        b->p = q, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

void hc_response_init(hc_response *r, hc_body_fn fn, void *user, hc_buf *whole) {
    memset(r, 0, sizeof *r);
    r->fn = fn, r->user = user, r->whole = whole;
    r->status     = -1;
    r->chunk_left = -1;
}

void hc_response_free(hc_response *r) {
    free(r->in.p);
    r->in = (hc_buf){0};
}

static bool fail(hc_response *r, const char *msg) {
    snprintf(r->err, sizeof r->err, "%s", msg);
    return false;
}

/* The headers, once their blank line is in: the status and whether the body is chunked. */
static bool read_headers(hc_response *r) {
    const char *e = NULL;
    for (size_t i = 0; i + 3 < r->in.n && !e; i++)
        if (!memcmp(r->in.p + i, "\r\n\r\n", 4)) e = r->in.p + i;
    if (!e) {
        if (r->in.n > HC_MAX_HEADER_BYTES) return fail(r, "the response headers exceed 64 KiB");
        return true; /* more to come */
    }
    const size_t hlen = (size_t)(e - r->in.p);
    if (hlen > HC_MAX_HEADER_BYTES) return fail(r, "the response headers exceed 64 KiB");
    char *h = malloc(hlen + 1);
    if (!h) return fail(r, "out of memory for the response headers");
    memcpy(h, r->in.p, hlen);
    h[hlen] = 0;
    int status = -1;
    if (sscanf(h, "HTTP/1.%*d %d", &status) != 1 || status < 100 || status > 999) {
        free(h);
        return fail(r, "not an HTTP response");
    }
    for (char *l = strstr(h, "\r\n"); l; l = strstr(l + 2, "\r\n"))
        if (!strncasecmp(l + 2, "transfer-encoding:", 18) && strstr(l + 20, "chunked"))
            r->chunked = true;
    free(h);
    r->status       = status;
    r->pos          = hlen + 4;
    r->headers_done = true;
    return true;
}

/* A chunk size line (hex digits, then optional ";extensions"): its value, or -1. */
static long long chunk_size(const char *p, size_t n) {
    long long v = 0;
    size_t    i = 0;
    for (; i < n; i++) {
        const char c = p[i];
        const int  d = c >= '0' && c <= '9' ? c - '0'
                       : c >= 'a' && c <= 'f' ? c - 'a' + 10
                       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) break;
        if (v > (1LL << 40)) return -1; /* past any body this client takes */
        v = v * 16 + d;
    }
    if (i == 0) return -1;
    while (i < n && (p[i] == ' ' || p[i] == '\t')) i++;
    if (i < n && p[i] != ';' && p[i] != '\r') return -1;
    return v;
}

bool hc_response_feed(hc_response *r, const char *p, size_t n) {
    if (r->finished || r->err[0]) return !r->err[0];
    if (!hc_buf_add(&r->in, p, n)) return fail(r, "out of memory for the response");
    if (!r->headers_done) {
        if (!read_headers(r)) return false;
        if (!r->headers_done) return true;
    }
    while (r->pos < r->in.n) {
        const char *q = r->in.p + r->pos;
        size_t      m = r->in.n - r->pos, take;
        if (!r->chunked) {
            take = m;
        } else if (r->chunk_left < 0) { /* a size line */
            const char *nl = memchr(q, '\n', m);
            if (!nl) {
                if (m > 1024) return fail(r, "a chunk size line runs past 1 KiB");
                break;
            }
            r->chunk_left = chunk_size(q, (size_t)(nl - q));
            if (r->chunk_left < 0) return fail(r, "a malformed chunk size");
            r->pos += (size_t)(nl - q) + 1;
            if (r->chunk_left == 0) { /* the last chunk (trailers ignored) */
                r->finished = true;
                break;
            }
            continue;
        } else if (r->chunk_left == 0) { /* the CRLF after a chunk */
            if (m < 2) break;
            if (q[0] != '\r' || q[1] != '\n') return fail(r, "no CRLF after a chunk");
            r->pos += 2;
            r->chunk_left = -1;
            continue;
        } else {
            take = m < (size_t)r->chunk_left ? m : (size_t)r->chunk_left;
            r->chunk_left -= (long long)take;
        }
        const bool ok = r->fn ? r->fn(r->user, q, take) : hc_buf_add(r->whole, q, take);
        if (!ok) return fail(r, "could not handle the response body");
        r->pos += take;
    }
    if (r->pos == r->in.n) r->in.n = r->pos = 0; /* all consumed: reuse the buffer */
    return true;
}

/* One `data:` payload. */
static bool stream_event(hc_stream *s, const char *data, double now) {
    if (!strcmp(data, "[DONE]")) {
        s->done_seen = true;
        return true;
    }
    json_error_t je;
    json_t      *o = json_loads(data, 0, &je);
    if (!o) return true; /* not JSON: ignored */
    json_t *ch = json_object_get(o, "choices");
    if (json_is_array(ch) && json_array_size(ch) > 0) {
        json_t *c0 = json_array_get(ch, 0);
        json_t *t  = json_object_get(c0, "text");
        json_t *d  = json_object_get(c0, "delta");
        if (!t && d) t = json_object_get(d, "content");
        const char *txt = json_is_string(t) ? json_string_value(t) : NULL;
        if (txt && *txt) {
            if (s->n_chunks == s->cap_chunks) {
                const int cap = s->cap_chunks ? 2 * s->cap_chunks : 64;
                double   *q   = cap > 0 ? realloc(s->chunk_t, sizeof *q * (size_t)cap) : NULL;
                if (!q) {
                    json_decref(o);
                    return false;
                }
                s->chunk_t = q, s->cap_chunks = cap;
            }
            s->chunk_t[s->n_chunks++] = now;
            if (!hc_buf_add(&s->text, txt, strlen(txt))) {
                json_decref(o);
                return false;
            }
        }
    }
    json_t *us = json_object_get(o, "usage");
    if (json_is_object(us)) {
        json_t *ct = json_object_get(us, "completion_tokens"), *pt = json_object_get(us, "prompt_tokens");
        if (json_is_integer(ct) && json_integer_value(ct) >= 0 && json_integer_value(ct) <= 1 << 30)
            s->n_out = (int)json_integer_value(ct);
        if (json_is_integer(pt) && json_integer_value(pt) >= 0 && json_integer_value(pt) <= 1 << 30)
            s->n_in_usage = (int)json_integer_value(pt);
    }
    json_t *er = json_object_get(o, "error");
    if (er && !json_is_null(er)) {
        json_t *m = json_object_get(er, "message");
        snprintf(s->error, sizeof s->error, "error event: %s",
                 json_is_string(m) ? json_string_value(m) : "(no message)");
    }
    json_decref(o);
    return true;
}

bool hc_stream_feed(hc_stream *s, const char *p, size_t n, double now) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\n') {
            const char *nl  = memchr(p + i, '\n', n - i);
            const size_t k  = nl ? (size_t)(nl - (p + i)) : n - i; /* the rest of this line */
            if (!hc_buf_add(&s->line, p + i, k)) return false;
            i += k - 1;
            continue;
        }
        if (!hc_buf_add(&s->line, "", 0)) return false; /* (a NUL-terminated empty line) */
        char *l = s->line.p;
        if (s->line.n && l[s->line.n - 1] == '\r') l[--s->line.n] = 0;
        if (s->line.n == strlen(l) && !strncmp(l, "data:", 5)) { /* (no NUL inside) */
            const char *d = l + 5;
            while (*d == ' ') d++;
            if (!stream_event(s, d, now)) return false;
        }
        s->line.n = 0;
        s->line.p[0] = 0;
    }
    return true;
}

void hc_stream_free(hc_stream *s) {
    free(s->line.p), free(s->text.p), free(s->chunk_t);
    memset(s, 0, sizeof *s);
}

#endif /* LC_HAVE_SERVER */
