/*
 * http_client.h — the decoders behind `longctx bench serve`'s requests (issue 25's benchmark
 * client): an HTTP/1.1 response (status line, headers, identity or chunked body) and an OpenAI
 * completion stream (SSE `data:` lines of JSON chunks, `[DONE]`), each fed the bytes as they
 * arrive. No socket here, so fuzz/fuzz_bench_client.c feeds them whatever a server might send.
 */
#ifndef LC_TOOLS_HTTP_CLIENT_H
#define LC_TOOLS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing byte buffer, NUL-terminated after its n bytes once anything was added. */
typedef struct hc_buf {
    char  *p;
    size_t n, cap;
} hc_buf;
bool hc_buf_add(hc_buf *b, const char *s, size_t n);

#define HC_MAX_HEADER_BYTES 65536 /* a response whose headers run longer is refused */

/* The decoded body, piece by piece; false stops the decoding. */
typedef bool (*hc_body_fn)(void *user, const char *p, size_t n);

typedef struct hc_response {
    hc_body_fn fn;   /* NULL: the body goes into *whole */
    void      *user;
    hc_buf    *whole;
    /* after feeding */
    int  status;       /* -1 until the status line is read */
    bool headers_done; /* then status is set and the body is being decoded */
    bool finished;     /* the last chunk of a chunked body came (nothing more is read) */
    char err[256];     /* what went wrong, when feed returned false */
    /* decoder state */
    hc_buf    in;
    size_t    pos;
    bool      chunked;
    long long chunk_left; /* chunked: bytes left in the current chunk; -1 at a size line */
} hc_response;

/* A response decoder handing its body to fn (user) or, fn NULL, into *whole. */
void hc_response_init(hc_response *r, hc_body_fn fn, void *user, hc_buf *whole);
/* n more bytes of the response: false with r->err set when it is not an HTTP response, its
 * headers exceed HC_MAX_HEADER_BYTES, a chunk size is malformed, memory runs out, or the body
 * function said stop. Bytes after the last chunk are ignored. */
bool hc_response_feed(hc_response *r, const char *p, size_t n);
void hc_response_free(hc_response *r);

/* An OpenAI completion stream as `bench serve` measures it. */
typedef struct hc_stream {
    hc_buf  line;        /* the line being read */
    hc_buf  text;        /* the streamed text */
    bool    done_seen;   /* `data: [DONE]` came */
    double *chunk_t;     /* [n_chunks] when each chunk with text arrived */
    int     n_chunks, cap_chunks;
    int     n_out;       /* usage.completion_tokens, when a usage chunk came */
    int     n_in_usage;  /* usage.prompt_tokens */
    char    error[256];  /* an error event's message ("" if none) */
} hc_stream;

/* n more bytes of the body, received at time now (seconds): each complete `data:` line is
 * taken (CR before LF dropped, other lines ignored; a data line that is not JSON is ignored).
 * false only for out of memory. */
bool hc_stream_feed(hc_stream *s, const char *p, size_t n, double now);
void hc_stream_free(hc_stream *s);

#endif
