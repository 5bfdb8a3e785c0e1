/*
 * fuzz_bench_client.c — libFuzzer target for `longctx bench serve`'s response decoders
 * (tools/http_client.c): the input is what a server sends back, fed to the HTTP/1.1 response
 * decoder and, for a 200, its body to the OpenAI SSE stream decoder, once whole and once in
 * pieces whose sizes come from the input's first byte. Either way the decoders must agree (the
 * same status, body bytes, streamed text, chunk count, [DONE] and usage), never hand on more
 * body bytes than came in, keep the streamed text free of NUL bytes and valid UTF-8 (it is
 * made of JSON strings), and keep the counts inside their ranges. Anything else aborts; ASan,
 * UBSan and LeakSanitizer catch the rest.
 */
#include "http_client.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct run {
    hc_response resp;
    hc_stream   sse;
    hc_buf      err_body;
    size_t      body_bytes;
    bool        ok, sse_ok;
} run;

static bool on_body(void *user, const char *p, size_t n) {
    run *r = user;
    r->body_bytes += n;
    if (r->resp.status == 200) return r->sse_ok = hc_stream_feed(&r->sse, p, n, (double)r->body_bytes);
    return hc_buf_add(&r->err_body, p, n);
}

static void feed(run *r, const uint8_t *d, size_t n, size_t piece) {
    memset(r, 0, sizeof *r);
    r->sse_ok = true;
    hc_response_init(&r->resp, on_body, r, NULL);
    r->ok = true;
    for (size_t i = 0; i < n && r->ok && !r->resp.finished; i += piece) {
        const size_t k = n - i < piece ? n - i : piece;
        r->ok          = hc_response_feed(&r->resp, (const char *)d + i, k);
    }
}

static void done(run *r) {
    hc_response_free(&r->resp);
    hc_stream_free(&r->sse);
    free(r->err_body.p);
}

static bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        size_t              k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return false;
        i += k;
    }
    return true;
}

#define REQUIRE(c)                                                                       \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "fuzz_bench_client: %s (line %d)\n", #c, __LINE__);          \
            abort();                                                                     \
        }                                                                                \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t piece = 1 + data[0] % 17;
    data++, size--;
    run a, b;
    feed(&a, data, size, size ? size : 1);
    feed(&b, data, size, piece);
    REQUIRE(a.body_bytes <= size && b.body_bytes <= size);
    REQUIRE(a.resp.headers_done == b.resp.headers_done && a.resp.status == b.resp.status);
    if (a.resp.headers_done) REQUIRE(a.resp.status >= 100 && a.resp.status <= 999);
    if (a.ok && b.ok && a.sse_ok && b.sse_ok) {
        REQUIRE(a.body_bytes == b.body_bytes && a.resp.finished == b.resp.finished);
        REQUIRE(a.sse.n_chunks == b.sse.n_chunks && a.sse.done_seen == b.sse.done_seen &&
                a.sse.n_out == b.sse.n_out && a.sse.n_in_usage == b.sse.n_in_usage &&
                !strcmp(a.sse.error, b.sse.error));
        REQUIRE(a.sse.text.n == b.sse.text.n &&
                (!a.sse.text.n || !memcmp(a.sse.text.p, b.sse.text.p, a.sse.text.n)));
        REQUIRE(a.err_body.n == b.err_body.n &&
                (!a.err_body.n || !memcmp(a.err_body.p, b.err_body.p, a.err_body.n)));
    }
    for (int k = 0; k < 2; k++) {
        const run *r = k ? &b : &a;
        REQUIRE(r->sse.n_chunks >= 0 && r->sse.n_chunks <= r->sse.cap_chunks);
        REQUIRE(r->sse.n_out >= 0 && r->sse.n_out <= (1 << 30) && r->sse.n_in_usage >= 0 &&
                r->sse.n_in_usage <= (1 << 30));
        if (r->sse.text.n) {
            REQUIRE(!memchr(r->sse.text.p, 0, r->sse.text.n));
            REQUIRE(valid_utf8((const unsigned char *)r->sse.text.p, r->sse.text.n));
        }
        for (int c = 1; c < r->sse.n_chunks; c++) REQUIRE(r->sse.chunk_t[c] >= r->sse.chunk_t[c - 1]);
    }
    done(&a);
    done(&b);
    return 0;
}
