/*
 * test_gguf.c — GGUF reader tests: images built in memory by a small writer (v2 and v3,
 * every value type, nested arrays, tensors of several types, custom alignment) are parsed
 * and every getter is checked; then many corrupted images (bad header, every truncation,
 * absurd counts, bad dimensions/types/offsets, duplicates, bad alignment) must fail with
 * LC_ERR_FORMAT and a precise message; then file-level errors and the real model.
 */
#include "format/gguf.h"
#include "format/quant.h"
#include "test_util.h"
#include "util/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a tiny GGUF writer ----------------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void w_bytes(wbuf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        b->cap = cap;
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void w_u8(wbuf *b, uint8_t v) {
    w_bytes(b, &v, 1);
}
static void w_u16(wbuf *b, uint16_t v) {
    w_bytes(b, &v, 2);
}
static void w_u32(wbuf *b, uint32_t v) {
    w_bytes(b, &v, 4);
}
static void w_u64(wbuf *b, uint64_t v) {
    w_bytes(b, &v, 8);
}
static void w_f32(wbuf *b, float v) {
    w_bytes(b, &v, 4);
}
static void w_f64(wbuf *b, double v) {
    w_bytes(b, &v, 8);
}
static void w_strn(wbuf *b, const char *s, size_t n) {
    w_u64(b, n);
    w_bytes(b, s, n);
}
static void w_str(wbuf *b, const char *s) {
    w_strn(b, s, strlen(s));
}
static void w_pad(wbuf *b, size_t align) {
    while (b->len % align)
        w_u8(b, 0);
}

static void hdr(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    w_bytes(b, "GGUF", 4);
    w_u32(b, version);
    w_u64(b, n_tensors);
    w_u64(b, n_kv);
}
static void key(wbuf *b, const char *k, uint32_t type) {
    w_str(b, k);
    w_u32(b, type);
}
static void kv_u32(wbuf *b, const char *k, uint32_t v) {
    key(b, k, LC_GGUF_TYPE_UINT32);
    w_u32(b, v);
}
static void kv_str(wbuf *b, const char *k, const char *v) {
    key(b, k, LC_GGUF_TYPE_STRING);
    w_str(b, v);
}
static void tinfo(wbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                  uint64_t off) {
    w_str(b, name);
    w_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        w_u64(b, ne[i]);
    w_u32(b, type);
    w_u64(b, off);
}

/* ---- the valid image -------------------------------------------------------------------- */

typedef struct ttest {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t nbytes;
    uint64_t off;
} ttest;

static ttest g_tensors[] = {
    {"a", 2, {4, 2, 1, 1}, LC_TYPE_F32, 32, 0},
    {"blk.0.q8", 1, {64, 1, 1, 1}, LC_TYPE_Q8_0, 68, 0},
    {"c.q4_1", 2, {32, 3, 1, 1}, LC_TYPE_Q4_1, 60, 0},
    {"d4", 4, {2, 3, 4, 5}, LC_TYPE_F16, 240, 0},
    {"e.q4_k", 2, {256, 2, 1, 1}, LC_TYPE_Q4_K, 288, 0},
    {"f.q6_k", 1, {256, 1, 1, 1}, LC_TYPE_Q6_K, 210, 0},
};
#define N_TENSORS  (sizeof g_tensors / sizeof g_tensors[0])
#define N_KV_VALID 25

/* Builds the valid test image; alignment 0 = leave general.alignment out (default 32). */
static wbuf build_valid(uint32_t version, uint32_t alignment, size_t *data_start) {
    wbuf b = {0};
    hdr(&b, version, N_TENSORS, N_KV_VALID - (alignment ? 0 : 1));
    kv_str(&b, "general.architecture", "llama");
    key(&b, "t.u8", LC_GGUF_TYPE_UINT8), w_u8(&b, 200);
    key(&b, "t.i8", LC_GGUF_TYPE_INT8), w_u8(&b, (uint8_t)-5);
    key(&b, "t.u16", LC_GGUF_TYPE_UINT16), w_u16(&b, 60000);
    key(&b, "t.i16", LC_GGUF_TYPE_INT16), w_u16(&b, (uint16_t)-30000);
    kv_u32(&b, "t.u32", 4000000000u);
    key(&b, "t.i32", LC_GGUF_TYPE_INT32), w_u32(&b, (uint32_t)-2000000000);
    key(&b, "t.f32", LC_GGUF_TYPE_FLOAT32), w_f32(&b, 1.5f);
    key(&b, "t.bool", LC_GGUF_TYPE_BOOL), w_u8(&b, 1);
    kv_str(&b, "t.str", "he said \"hi\"\n");
    key(&b, "t.u64", LC_GGUF_TYPE_UINT64), w_u64(&b, 1ull << 40);
    key(&b, "t.i64", LC_GGUF_TYPE_INT64), w_u64(&b, (uint64_t) - (1ll << 40));
    key(&b, "t.f64", LC_GGUF_TYPE_FLOAT64), w_f64(&b, 2.25);
    key(&b, "t.i64small", LC_GGUF_TYPE_INT64), w_u64(&b, 7);
    /* arrays */
    key(&b, "a.u8", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_UINT8), w_u64(&b, 3);
    w_u8(&b, 1), w_u8(&b, 2), w_u8(&b, 3);
    key(&b, "a.i32", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_INT32), w_u64(&b, 3);
    w_u32(&b, (uint32_t)-1), w_u32(&b, 0), w_u32(&b, 1);
    key(&b, "a.f32", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_FLOAT32), w_u64(&b, 7);
    for (int i = 0; i < 7; i++)
        w_f32(&b, 0.5f * (float)i);
    key(&b, "a.bool", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_BOOL), w_u64(&b, 2);
    w_u8(&b, 1), w_u8(&b, 0);
    key(&b, "a.str", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_STRING), w_u64(&b, 3);
    w_str(&b, "a"), w_str(&b, "bc"), w_str(&b, "");
    key(&b, "a.u64.empty", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_UINT64), w_u64(&b, 0);
    /* [[1, 2], [3]] of i16 */
    key(&b, "a.nested", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_ARRAY), w_u64(&b, 2);
    w_u32(&b, LC_GGUF_TYPE_INT16), w_u64(&b, 2), w_u16(&b, 1), w_u16(&b, 2);
    w_u32(&b, LC_GGUF_TYPE_INT16), w_u64(&b, 1), w_u16(&b, 3);
    /* [["x", "y"], []] */
    key(&b, "a.nested_str", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_ARRAY), w_u64(&b, 2);
    w_u32(&b, LC_GGUF_TYPE_STRING), w_u64(&b, 2), w_str(&b, "x"), w_str(&b, "y");
    w_u32(&b, LC_GGUF_TYPE_STRING), w_u64(&b, 0);
    key(&b, "a.f64", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_FLOAT64), w_u64(&b, 1);
    w_f64(&b, -0.75);
    key(&b, "a.i8", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_INT8), w_u64(&b, 2);
    w_u8(&b, (uint8_t)-128), w_u8(&b, 127);
    if (alignment) kv_u32(&b, "general.alignment", alignment);
    uint32_t a = alignment ? alignment : 32;
    uint64_t off = 0;
    for (size_t i = 0; i < N_TENSORS; i++) {
        ttest *t = &g_tensors[i];
        t->off = off;
        tinfo(&b, t->name, t->n_dims, t->ne, t->type, off);
        off += t->nbytes;
        if (i + 1 < N_TENSORS) off = (off + a - 1) / a * a;
    }
    w_pad(&b, a);
    *data_start = b.len;
    for (size_t i = 0; i < N_TENSORS; i++) {
        while (b.len < *data_start + g_tensors[i].off)
            w_u8(&b, 0xEE);
        for (uint64_t j = 0; j < g_tensors[i].nbytes; j++)
            w_u8(&b, (uint8_t)(i * 16 + j));
    }
    return b;
}

static int has(const char *s, const char *sub) {
    return strstr(s, sub) != NULL;
}

static void check_valid(uint32_t version, uint32_t alignment) {
    size_t ds;
    wbuf b = build_valid(version, alignment, &ds);
    lc_gguf *g = NULL;
    int st = lc_gguf_open_memory(b.p, b.len, &g);
    CHECKF(st == LC_OK, "v%u align %u: %s", version, alignment, lc_last_error());
    if (st) {
        free(b.p);
        return;
    }
    CHECK(lc_gguf_version(g) == version);
    CHECK(lc_gguf_alignment(g) == (alignment ? alignment : 32));
    CHECK(lc_gguf_n_kv(g) == N_KV_VALID - (alignment ? 0 : 1));
    CHECK(lc_gguf_n_tensors(g) == (int64_t)N_TENSORS);
    CHECK(lc_gguf_find_key(g, "nope") == -1);
    CHECK(lc_gguf_find_key(g, "general.architecture") == 0);
    CHECK(strcmp(lc_gguf_kv_key(g, 1), "t.u8") == 0);
    CHECK(lc_gguf_kv_key(g, -1) == NULL);
    CHECK(lc_gguf_kv_key(g, 1000) == NULL);
    CHECK(lc_gguf_kv_type(g, 1) == LC_GGUF_TYPE_UINT8);

    /* scalars */
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f;
    bool bo;
    CHECK(lc_gguf_get_u32(g, "t.u8", &u32) == LC_OK && u32 == 200);
    CHECK(lc_gguf_get_i32(g, "t.i8", &i32) == LC_OK && i32 == -5);
    CHECK(lc_gguf_get_u32(g, "t.i8", &u32) == LC_ERR_FORMAT);
    CHECK(has(lc_last_error(), "t.i8") && has(lc_last_error(), "does not fit u32"));
    CHECK(lc_gguf_get_u32(g, "t.u16", &u32) == LC_OK && u32 == 60000);
    CHECK(lc_gguf_get_i32(g, "t.i16", &i32) == LC_OK && i32 == -30000);
    CHECK(lc_gguf_get_u32(g, "t.u32", &u32) == LC_OK && u32 == 4000000000u);
    CHECK(lc_gguf_get_i32(g, "t.u32", &i32) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_u64(g, "t.u32", &u64) == LC_OK && u64 == 4000000000u);
    CHECK(lc_gguf_get_i32(g, "t.i32", &i32) == LC_OK && i32 == -2000000000);
    CHECK(lc_gguf_get_u64(g, "t.i32", &u64) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_u64(g, "t.u64", &u64) == LC_OK && u64 == (1ull << 40));
    CHECK(lc_gguf_get_u32(g, "t.u64", &u32) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_u64(g, "t.i64", &u64) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_i32(g, "t.i64", &i32) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_i32(g, "t.i64small", &i32) == LC_OK && i32 == 7);
    CHECK(lc_gguf_get_u32(g, "t.i64small", &u32) == LC_OK && u32 == 7);
    CHECK(lc_gguf_get_f32(g, "t.f32", &f) == LC_OK && f == 1.5f);
    CHECK(lc_gguf_get_f32(g, "t.f64", &f) == LC_OK && f == 2.25f);
    CHECK(lc_gguf_get_f32(g, "t.u32", &f) == LC_ERR_FORMAT);
    CHECK(has(lc_last_error(), "\"t.u32\" has type u32, expected f32 or f64"));
    CHECK(lc_gguf_get_u32(g, "t.f32", &u32) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_bool(g, "t.bool", &bo) == LC_OK && bo);
    CHECK(lc_gguf_get_bool(g, "t.u8", &bo) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_u32(g, "t.bool", &u32) == LC_ERR_FORMAT);
    const char *s;
    size_t len;
    CHECK(lc_gguf_get_str(g, "t.str", &s, &len) == LC_OK && len == 13 &&
          memcmp(s, "he said \"hi\"\n", 13) == 0);
    CHECK(lc_gguf_get_str(g, "general.architecture", &s, &len) == LC_OK && len == 5 &&
          memcmp(s, "llama", 5) == 0);
    CHECK(lc_gguf_get_str(g, "t.u8", &s, &len) == LC_ERR_FORMAT);
    /* absent keys: NOT_FOUND, no error recorded */
    lc_clear_error();
    CHECK(lc_gguf_get_u32(g, "missing", &u32) == LC_ERR_NOT_FOUND);
    CHECK(lc_gguf_get_str(g, "missing", &s, &len) == LC_ERR_NOT_FOUND);
    CHECK(lc_gguf_get_arr(g, "missing", NULL, NULL) == LC_ERR_NOT_FOUND);
    CHECK(lc_last_error()[0] == '\0');

    /* arrays */
    lc_gguf_type et;
    uint64_t n;
    const void *data;
    CHECK(lc_gguf_get_arr(g, "a.u8", &et, &n) == LC_OK && et == LC_GGUF_TYPE_UINT8 && n == 3);
    CHECK(lc_gguf_get_arr_data(g, "a.u8", LC_GGUF_TYPE_UINT8, &data, &n) == LC_OK && n == 3 &&
          memcmp(data, "\1\2\3", 3) == 0);
    CHECK(lc_gguf_get_arr_data(g, "a.i32", LC_GGUF_TYPE_INT32, &data, &n) == LC_OK && n == 3);
    if (n == 3) {
        int32_t v[3];
        memcpy(v, data, sizeof v);
        CHECK(v[0] == -1 && v[1] == 0 && v[2] == 1);
    }
    CHECK(lc_gguf_get_arr_data(g, "a.i32", LC_GGUF_TYPE_UINT32, &data, &n) == LC_ERR_FORMAT);
    CHECK(has(lc_last_error(), "array of i32, expected an array of u32"));
    CHECK(lc_gguf_get_arr_data(g, "a.str", LC_GGUF_TYPE_STRING, &data, &n) == LC_ERR_INVALID_ARG);
    CHECK(lc_gguf_get_arr_data(g, "t.u8", LC_GGUF_TYPE_UINT8, &data, &n) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_arr_data(g, "a.f32", LC_GGUF_TYPE_FLOAT32, &data, &n) == LC_OK && n == 7);
    if (n == 7) {
        float v[7];
        memcpy(v, data, sizeof v);
        CHECK(v[0] == 0.0f && v[6] == 3.0f);
    }
    CHECK(lc_gguf_get_arr_data(g, "a.u64.empty", LC_GGUF_TYPE_UINT64, &data, &n) == LC_OK &&
          n == 0);
    CHECK(lc_gguf_get_arr(g, "a.str", &et, &n) == LC_OK && et == LC_GGUF_TYPE_STRING && n == 3);
    CHECK(lc_gguf_get_arr_str(g, "a.str", 0, &s, &len) == LC_OK && len == 1 && s[0] == 'a');
    CHECK(lc_gguf_get_arr_str(g, "a.str", 1, &s, &len) == LC_OK && len == 2 &&
          memcmp(s, "bc", 2) == 0);
    CHECK(lc_gguf_get_arr_str(g, "a.str", 2, &s, &len) == LC_OK && len == 0);
    CHECK(lc_gguf_get_arr_str(g, "a.str", 3, &s, &len) == LC_ERR_INVALID_ARG);
    CHECK(lc_gguf_get_arr_str(g, "a.u8", 0, &s, &len) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_arr_str(g, "t.str", 0, &s, &len) == LC_ERR_FORMAT);
    CHECK(lc_gguf_get_arr(g, "a.nested", &et, &n) == LC_OK && et == LC_GGUF_TYPE_ARRAY && n == 2);
    CHECK(lc_gguf_get_arr(g, "t.u32", &et, &n) == LC_ERR_FORMAT);
    int64_t ia = lc_gguf_find_key(g, "a.nested");
    CHECK(lc_gguf_kv_array_info(g, ia, &et, &n) == LC_OK && et == LC_GGUF_TYPE_ARRAY && n == 2);
    CHECK(lc_gguf_kv_array_info(g, 1, &et, &n) == LC_ERR_INVALID_ARG);
    CHECK(lc_gguf_kv_array_info(g, 999, &et, &n) == LC_ERR_INVALID_ARG);

    /* formatting */
    char buf[256];
#define FMT_IS(k, maxe, want)                                                                      \
    do {                                                                                           \
        int64_t i_ = lc_gguf_find_key(g, k);                                                       \
        CHECK(lc_gguf_kv_format(g, i_, maxe, buf, sizeof buf) == LC_OK);                           \
        CHECKF(strcmp(buf, want) == 0, "%s: got [%s] want [%s]", k, buf, want);                    \
    } while (0)
    FMT_IS("t.u8", 8, "200");
    FMT_IS("t.i8", 8, "-5");
    FMT_IS("t.u16", 8, "60000");
    FMT_IS("t.i16", 8, "-30000");
    FMT_IS("t.u32", 8, "4000000000");
    FMT_IS("t.i32", 8, "-2000000000");
    FMT_IS("t.f32", 8, "1.5");
    FMT_IS("t.bool", 8, "true");
    FMT_IS("t.str", 8, "\"he said \\\"hi\\\"\\n\"");
    FMT_IS("t.u64", 8, "1099511627776");
    FMT_IS("t.i64", 8, "-1099511627776");
    FMT_IS("t.f64", 8, "2.25");
    FMT_IS("a.u8", 8, "[1, 2, 3]");
    FMT_IS("a.u8", 2, "[1, 2, ... (3 elements)]");
    FMT_IS("a.u8", 0, "[... (3 elements)]");
    FMT_IS("a.i32", 8, "[-1, 0, 1]");
    FMT_IS("a.f32", 3, "[0, 0.5, 1, ... (7 elements)]");
    FMT_IS("a.bool", 8, "[true, false]");
    FMT_IS("a.str", 8, "[\"a\", \"bc\", \"\"]");
    FMT_IS("a.u64.empty", 8, "[]");
    FMT_IS("a.nested", 8, "[[1, 2], [3]]");
    FMT_IS("a.nested", 1, "[[1, ... (2 elements)], ... (2 elements)]");
    FMT_IS("a.nested_str", 8, "[[\"x\", \"y\"], []]");
    FMT_IS("a.nested_str", 1, "[[\"x\", ... (2 elements)], ... (2 elements)]");
    FMT_IS("a.f64", 8, "[-0.75]");
    FMT_IS("a.i8", 8, "[-128, 127]");
    /* truncation always NUL-terminates */
    char small[6];
    CHECK(lc_gguf_kv_format(g, lc_gguf_find_key(g, "a.f32"), 8, small, sizeof small) == LC_OK);
    CHECK(strcmp(small, "[0, 0") == 0);
    CHECK(lc_gguf_kv_format(g, 0, 8, small, 0) == LC_ERR_INVALID_ARG);
    CHECK(lc_gguf_kv_format(g, -1, 8, buf, sizeof buf) == LC_ERR_INVALID_ARG && buf[0] == '\0');
    /* every kv formats without error */
    for (int64_t i = 0; i < lc_gguf_n_kv(g); i++)
        CHECK(lc_gguf_kv_format(g, i, 4, buf, sizeof buf) == LC_OK && buf[0] != '\0');

    /* tensors */
    for (size_t i = 0; i < N_TENSORS; i++) {
        const ttest *w = &g_tensors[i];
        const lc_gguf_tensor *t = lc_gguf_tensor_at(g, (int64_t)i);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(strcmp(t->name, w->name) == 0);
        CHECK(lc_gguf_find_tensor(g, w->name) == t);
        CHECK(t->n_dims == w->n_dims);
        for (int d = 0; d < 4; d++)
            CHECK(t->ne[d] == w->ne[d]);
        CHECK(t->type == w->type);
        CHECK(t->offset == w->off);
        CHECK(t->offset % lc_gguf_alignment(g) == 0);
        CHECK(t->nbytes == w->nbytes);
        CHECK((const uint8_t *)t->data == b.p + ds + w->off);
        CHECK(((const uint8_t *)t->data)[0] == (uint8_t)(i * 16));
        CHECK(((const uint8_t *)t->data)[w->nbytes - 1] == (uint8_t)(i * 16 + w->nbytes - 1));
    }
    CHECK(lc_gguf_tensor_at(g, (int64_t)N_TENSORS) == NULL);
    CHECK(lc_gguf_tensor_at(g, -1) == NULL);
    CHECK(lc_gguf_find_tensor(g, "zzz") == NULL);
    lc_gguf_close(g);

    /* every strict prefix must fail cleanly (copied to an exact-size buffer for ASan) */
    int bad = 0;
    for (size_t cut = 0; cut < b.len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, b.p, cut);
        lc_gguf *h = NULL;
        int rc = lc_gguf_open_memory(copy, cut, &h);
        if (rc != LC_ERR_FORMAT || h != NULL || !has(lc_last_error(), "gguf: ")) {
            if (bad++ < 5) fprintf(stderr, "prefix %zu: rc %d msg %s\n", cut, rc, lc_last_error());
            lc_gguf_close(h);
        }
        free(copy);
    }
    CHECKF(bad == 0, "%d of %zu prefixes did not fail as expected", bad, b.len);
    free(b.p);
}

/* ---- corrupted images ------------------------------------------------------------------- */

static void expect_fail_(wbuf *b, const char *sub, int line) {
    uint8_t *copy = malloc(b->len ? b->len : 1);
    memcpy(copy, b->p, b->len);
    lc_gguf *g = NULL;
    int st = lc_gguf_open_memory(copy, b->len, &g);
    lc_test_checks++;
    if (st != LC_ERR_FORMAT || g != NULL || !strstr(lc_last_error(), sub)) {
        lc_test_failures++;
        fprintf(stderr, "%s:%d: expected LC_ERR_FORMAT with \"%s\", got %d: %s\n", __FILE__, line,
                sub, st, lc_last_error());
        lc_gguf_close(g);
    }
    free(copy);
    free(b->p);
    *b = (wbuf){0};
}
#define EXPECT_FAIL(b, sub) expect_fail_(&(b), sub, __LINE__)

/* A valid image with one f32 tensor "t" ne {8} and the given extra kvs written by fn. */
static void one_tensor(wbuf *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes) {
    hdr(b, 3, 1, 0);
    tinfo(b, "t", n_dims, ne, type, off);
    w_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        w_u8(b, 0);
}

static void check_corrupt(void) {
    wbuf b = {0};

    /* header */
    w_bytes(&b, "GGUX", 4), w_u32(&b, 3), w_u64(&b, 0), w_u64(&b, 0);
    EXPECT_FAIL(b, "bad magic 47 47 55 58 at byte 0");
    w_bytes(&b, "GG", 2);
    EXPECT_FAIL(b, "unexpected end of file reading magic at byte 0");
    hdr(&b, 1, 0, 0);
    EXPECT_FAIL(b, "GGUFv1 is no longer supported");
    hdr(&b, 0, 0, 0);
    EXPECT_FAIL(b, "unsupported GGUF version 0");
    hdr(&b, 4, 0, 0);
    EXPECT_FAIL(b, "unsupported GGUF version 4");
    hdr(&b, 0x03000000u, 0, 0);
    EXPECT_FAIL(b, "big-endian GGUF not supported");
    hdr(&b, 0x02000000u, 0, 0);
    EXPECT_FAIL(b, "big-endian GGUF not supported");
    hdr(&b, 3, 0, 1000000000000ull);
    EXPECT_FAIL(b, "n_kv 1000000000000 at byte 16 exceeds");
    hdr(&b, 3, 0, UINT64_MAX);
    EXPECT_FAIL(b, "n_kv 18446744073709551615 at byte 16");
    hdr(&b, 3, 1000000000000ull, 0);
    EXPECT_FAIL(b, "n_tensors 1000000000000 at byte 8 exceeds");
    hdr(&b, 3, (uint64_t)1 << 63, 0);
    EXPECT_FAIL(b, "n_tensors 9223372036854775808 at byte 8");
    /* n_kv = 2 with room for 2 minimal kvs individually but not for the tensor too */
    hdr(&b, 3, 1, 2);
    for (int i = 0; i < 40; i++)
        w_u8(&b, 0);
    EXPECT_FAIL(b, "exceed what the file size");
    hdr(&b, 3, 0, 1);
    EXPECT_FAIL(b, "n_kv 1 at byte 16");

    /* strings */
    hdr(&b, 3, 0, 1), w_u64(&b, 1000), w_bytes(&b, "abcdefghijklmnop", 16);
    EXPECT_FAIL(b, "key 0: key length 1000 at byte 24 extends past end of file");
    hdr(&b, 3, 0, 1), w_u64(&b, UINT64_MAX), w_bytes(&b, "abcdefghijklmnop", 16);
    EXPECT_FAIL(b, "key length 18446744073709551615 at byte 24 extends past end of file");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_STRING), w_u64(&b, 50), w_bytes(&b, "xyz", 3);
    EXPECT_FAIL(b, "key 0 (\"k\"): string length 50 at byte 37 extends past end of file");
    hdr(&b, 3, 0, 1), w_u64(&b, 0), w_u32(&b, LC_GGUF_TYPE_UINT8), w_u8(&b, 0), w_u8(&b, 0);
    EXPECT_FAIL(b, "empty key at byte 24");
    hdr(&b, 3, 0, 1), w_strn(&b, "a\0b", 3), w_u32(&b, LC_GGUF_TYPE_UINT8), w_u8(&b, 0);
    EXPECT_FAIL(b, "key at byte 24 contains a NUL byte");
    {
        char *big = malloc(70000);
        memset(big, 'k', 70000);
        hdr(&b, 3, 0, 1), w_strn(&b, big, 70000), w_u32(&b, LC_GGUF_TYPE_UINT8), w_u8(&b, 0);
        EXPECT_FAIL(b, "key length 70000 at byte 24 exceeds the limit 65535");
        hdr(&b, 3, 1, 0);
        uint64_t ne = 4;
        tinfo(&b, "", 1, &ne, 0, 0);
        w_pad(&b, 32), w_u64(&b, 0), w_u64(&b, 0);
        EXPECT_FAIL(b, "tensor 0: empty tensor name at byte 24");
        big[300] = '\0';
        hdr(&b, 3, 1, 0);
        tinfo(&b, big, 1, &ne, 0, 0);
        w_pad(&b, 32), w_u64(&b, 0), w_u64(&b, 0);
        EXPECT_FAIL(b, "tensor name length 300 at byte 24 exceeds the limit 255");
        free(big);
    }

    /* value types */
    hdr(&b, 3, 0, 1), key(&b, "k", 13), w_u64(&b, 0);
    EXPECT_FAIL(b, "key 0 (\"k\"): unknown value type 13 at byte 33");
    hdr(&b, 3, 0, 1), key(&b, "k", 0xffffffffu), w_u64(&b, 0);
    EXPECT_FAIL(b, "unknown value type 4294967295");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_BOOL), w_u8(&b, 2), w_u32(&b, 0);
    EXPECT_FAIL(b, "bool value 2 at byte 37 is not 0 or 1");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_BOOL);
    w_u64(&b, 3), w_u8(&b, 0), w_u8(&b, 1), w_u8(&b, 7);
    EXPECT_FAIL(b, "bool value 7 at byte 51");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_UINT64), w_u32(&b, 5);
    EXPECT_FAIL(b, "unexpected end of file reading u64 at byte 37");
    hdr(&b, 3, 0, 2), kv_u32(&b, "same", 1), kv_u32(&b, "same", 2);
    EXPECT_FAIL(b, "key 1 (\"same\") at byte 44: duplicate key (first is key 0)");

    /* arrays */
    hdr(&b, 3, 0, 1), key(&b, "tokenizer.ggml.tokens", LC_GGUF_TYPE_ARRAY);
    w_u32(&b, LC_GGUF_TYPE_STRING), w_u64(&b, 1000000000000ull), w_u64(&b, 0);
    EXPECT_FAIL(b, "key 0 (\"tokenizer.ggml.tokens\"): array count 1000000000000 at byte 61 "
                   "exceeds file size");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_UINT64);
    w_u64(&b, (1ull << 61) + 1), w_u64(&b, 0);
    EXPECT_FAIL(b, "array count 2305843009213693953 at byte 41 exceeds file size");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_ARRAY), w_u32(&b, 14), w_u64(&b, 0);
    EXPECT_FAIL(b, "unknown array element type 14 at byte 37");
    hdr(&b, 3, 0, 1), key(&b, "k", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_STRING);
    w_u64(&b, 2), w_str(&b, "ok"), w_u64(&b, 99);
    EXPECT_FAIL(b, "string length 99 at byte 59 extends past end of file");
    /* nested array bomb: arrays of arrays 100 deep */
    hdr(&b, 3, 0, 1), key(&b, "bomb", LC_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 100; i++)
        w_u32(&b, LC_GGUF_TYPE_ARRAY), w_u64(&b, 1);
    w_u32(&b, LC_GGUF_TYPE_UINT8), w_u64(&b, 0);
    EXPECT_FAIL(b, "arrays nested deeper than 8");
    /* a billion empty arrays in a tiny file */
    hdr(&b, 3, 0, 1), key(&b, "bomb", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_ARRAY);
    w_u64(&b, 1000000000), w_u32(&b, LC_GGUF_TYPE_UINT8), w_u64(&b, 0);
    EXPECT_FAIL(b, "array count 1000000000 at byte 44 exceeds file size");
    /* a nested array whose inner count lies */
    hdr(&b, 3, 0, 1), key(&b, "n", LC_GGUF_TYPE_ARRAY), w_u32(&b, LC_GGUF_TYPE_ARRAY);
    w_u64(&b, 1), w_u32(&b, LC_GGUF_TYPE_INT32), w_u64(&b, 5), w_u32(&b, 1);
    EXPECT_FAIL(b, "array count 5 at byte 53 exceeds file size");

    /* alignment */
    hdr(&b, 3, 0, 1), kv_u32(&b, "general.alignment", 0);
    EXPECT_FAIL(b, "alignment 0 at byte 53 is not a power of two");
    hdr(&b, 3, 0, 1), kv_u32(&b, "general.alignment", 3);
    EXPECT_FAIL(b, "alignment 3 at byte 53 is not a power of two");
    hdr(&b, 3, 0, 1), key(&b, "general.alignment", LC_GGUF_TYPE_UINT64), w_u64(&b, 32);
    EXPECT_FAIL(b, "(\"general.alignment\"): type u64, expected u32");

    /* tensor infos */
    uint64_t ne[5] = {8, 1, 1, 1, 1};
    one_tensor(&b, 0, ne, LC_TYPE_F32, 0, 32);
    EXPECT_FAIL(b, "tensor 0 (\"t\"): n_dims 0 at byte 33 out of range 1..4");
    one_tensor(&b, 5, ne, LC_TYPE_F32, 0, 32);
    EXPECT_FAIL(b, "tensor 0 (\"t\"): n_dims 5 at byte 33 out of range 1..4");
    uint64_t ov[2] = {1ull << 32, 1ull << 32};
    one_tensor(&b, 2, ov, LC_TYPE_F32, 0, 32);
    EXPECT_FAIL(b, "element count overflows at ne[1] (byte 45)");
    uint64_t neg[1] = {1ull << 63};
    one_tensor(&b, 1, neg, LC_TYPE_F32, 0, 32);
    EXPECT_FAIL(b, "ne[0] 9223372036854775808 at byte 37 is negative");
    uint64_t bigb[1] = {1ull << 62};
    one_tensor(&b, 1, bigb, LC_TYPE_F32, 0, 32);
    EXPECT_FAIL(b, "byte size overflows");
    uint64_t q33[1] = {33};
    one_tensor(&b, 1, q33, LC_TYPE_Q8_0, 0, 64);
    EXPECT_FAIL(b, "ne[0] 33 is not a multiple of the q8_0 block size 32");
    one_tensor(&b, 1, ne, 4, 0, 32);
    EXPECT_FAIL(b, "unknown tensor type id 4 at byte 45");
    one_tensor(&b, 1, ne, 5, 0, 32);
    EXPECT_FAIL(b, "unknown tensor type id 5");
    one_tensor(&b, 1, ne, 999, 0, 32);
    EXPECT_FAIL(b, "unknown tensor type id 999");
    one_tensor(&b, 1, ne, 31, 0, 32);
    EXPECT_FAIL(b, "unknown tensor type id 31");
    one_tensor(&b, 1, ne, LC_TYPE_COUNT, 0, 32);
    EXPECT_FAIL(b, "unknown tensor type id 43");
    one_tensor(&b, 1, ne, LC_TYPE_F32, 16, 64);
    EXPECT_FAIL(b, "tensor 0 (\"t\") data offset 16 is not a multiple of the alignment 32");
    one_tensor(&b, 1, ne, LC_TYPE_F32, 0, 31);
    EXPECT_FAIL(b, "tensor 0 (\"t\") data [offset 0, 32 bytes] extends past end of file");
    one_tensor(&b, 1, ne, LC_TYPE_F32, UINT64_MAX - 31, 32);
    EXPECT_FAIL(b, "data [offset 18446744073709551584, 32 bytes] extends past end of file");
    one_tensor(&b, 1, ne, LC_TYPE_F32, 64, 64);
    EXPECT_FAIL(b, "extends past end of file");
    /* data section start past EOF (no padding written) */
    hdr(&b, 3, 1, 0), tinfo(&b, "t", 1, ne, LC_TYPE_F32, 0);
    EXPECT_FAIL(b, "data section starts at byte 64");
    /* duplicate tensor names */
    hdr(&b, 3, 2, 0), tinfo(&b, "w", 1, ne, LC_TYPE_F32, 0), tinfo(&b, "w", 1, ne, LC_TYPE_F32, 32);
    w_pad(&b, 32);
    for (int i = 0; i < 64; i++)
        w_u8(&b, 0);
    EXPECT_FAIL(b, "tensor 1 (\"w\") at byte 57: duplicate tensor name (first is tensor 0)");
    /* custom alignment applies to offsets */
    hdr(&b, 3, 1, 1), kv_u32(&b, "general.alignment", 64), tinfo(&b, "t", 1, ne, LC_TYPE_F32, 32);
    w_pad(&b, 64);
    for (int i = 0; i < 128; i++)
        w_u8(&b, 0);
    EXPECT_FAIL(b, "data offset 32 is not a multiple of the alignment 64");

    /* sanity: the minimal valid images do parse */
    lc_gguf *g = NULL;
    hdr(&b, 3, 0, 0);
    CHECK(lc_gguf_open_memory(b.p, b.len, &g) == LC_OK && lc_gguf_n_kv(g) == 0 &&
          lc_gguf_alignment(g) == 32);
    lc_gguf_close(g);
    free(b.p), b = (wbuf){0};
    one_tensor(&b, 1, ne, LC_TYPE_F32, 0, 32);
    CHECK(lc_gguf_open_memory(b.p, b.len, &g) == LC_OK);
    CHECK(g && lc_gguf_tensor_at(g, 0)->nbytes == 32 && lc_gguf_tensor_at(g, 0)->data == b.p + 64);
    lc_gguf_close(g);
    free(b.p), b = (wbuf){0};
    /* zero-sized dims are accepted (ggml allows them) */
    uint64_t z[2] = {8, 0};
    one_tensor(&b, 2, z, LC_TYPE_F32, 0, 0);
    CHECK(lc_gguf_open_memory(b.p, b.len, &g) == LC_OK && g &&
          lc_gguf_tensor_at(g, 0)->nbytes == 0);
    lc_gguf_close(g);
    free(b.p), b = (wbuf){0};
    CHECK(lc_gguf_open_memory(NULL, 0, &g) == LC_ERR_FORMAT && g == NULL);
    CHECK(has(lc_last_error(), "empty"));
    CHECK(lc_gguf_open_memory("GGUF", 4, NULL) == LC_ERR_INVALID_ARG);
}

/* ---- files ------------------------------------------------------------------------------ */

static void check_files(void) {
    lc_gguf *g = NULL;
    const char *missing = "/nonexistent-dir-lc/missing.gguf";
    CHECK(lc_gguf_open(missing, &g) == LC_ERR_IO && g == NULL);
    CHECK(has(lc_last_error(), missing));
    CHECK(lc_gguf_open("/tmp", &g) == LC_ERR_IO && g == NULL);
    CHECK(has(lc_last_error(), "/tmp") && has(lc_last_error(), "directory"));

    char path[] = "/tmp/lc_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(lc_gguf_open(path, &g) == LC_ERR_FORMAT && g == NULL);
    CHECK(has(lc_last_error(), path) && has(lc_last_error(), "empty"));

    size_t ds;
    wbuf b = build_valid(3, 0, &ds);
    CHECK(write(fd, b.p, b.len) == (ssize_t)b.len);
    CHECK(lc_gguf_open(path, &g) == LC_OK && g != NULL);
    if (g) {
        CHECK(lc_gguf_n_tensors(g) == (int64_t)N_TENSORS);
        const lc_gguf_tensor *t = lc_gguf_find_tensor(g, "d4");
        CHECK(t && ((const uint8_t *)t->data)[1] == 3 * 16 + 1);
        lc_gguf_close(g);
        g = NULL;
    }
    CHECK(ftruncate(fd, (off_t)(b.len - 1)) == 0);
    CHECK(lc_gguf_open(path, &g) == LC_ERR_FORMAT && g == NULL);
    CHECKF(has(lc_last_error(), path) && has(lc_last_error(), "tensor 5 (\"f.q6_k\")") &&
               has(lc_last_error(), "extends past end of file"),
           "%s", lc_last_error());
    close(fd);
    unlink(path);
    free(b.p);
}

static void check_model(void) {
    FILE *f = fopen(LC_MODEL_PATH, "rb");
    if (!f) {
        const char *req = getenv("LC_REQUIRE_MODEL");
        fprintf(stderr, "model %s not found: skipping the real-model checks\n", LC_MODEL_PATH);
        CHECK(!(req && req[0] == '1'));
        return;
    }
    fclose(f);
    lc_gguf *g = NULL;
    int st = lc_gguf_open(LC_MODEL_PATH, &g);
    CHECKF(st == LC_OK, "%s", lc_last_error());
    if (st) return;
    CHECK(lc_gguf_version(g) == 3);
    CHECK(lc_gguf_n_tensors(g) == 272);
    CHECK(lc_gguf_n_kv(g) == 33);
    CHECK(lc_gguf_alignment(g) == 32);
    const char *s;
    size_t len;
    CHECK(lc_gguf_get_str(g, "general.architecture", &s, &len) == LC_OK && len == 5 &&
          memcmp(s, "llama", 5) == 0);
    uint32_t u;
    CHECK(lc_gguf_get_u32(g, "llama.block_count", &u) == LC_OK && u == 30);
    float eps;
    CHECK(lc_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) == LC_OK && eps > 0 &&
          eps < 1e-3f);
    const lc_gguf_tensor *t = lc_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->n_dims == 2 && t->ne[0] == 576 && t->ne[1] == 49152 && t->type == LC_TYPE_Q8_0);
        CHECK(t->nbytes == 576 / 32 * 34 * 49152ull);
    }
    lc_gguf_type et;
    uint64_t n;
    CHECK(lc_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) == LC_OK &&
          et == LC_GGUF_TYPE_STRING && n == 49152);
    CHECK(lc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &len) == LC_OK && len == 12 &&
          memcmp(s, "<|im_start|>", 12) == 0);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        if (lc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len) == LC_OK) total += len;
    CHECK(total > 49152);
    /* every tensor is of a type we can dequantise and lies inside the file */
    int types_ok = 1;
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const lc_gguf_tensor *ti = lc_gguf_tensor_at(g, i);
        if (ti->type != LC_TYPE_F32 && ti->type != LC_TYPE_Q4_1 && ti->type != LC_TYPE_Q8_0)
            types_ok = 0;
    }
    CHECK(types_ok);
    char buf[512];
    for (int64_t i = 0; i < lc_gguf_n_kv(g); i++)
        CHECK(lc_gguf_kv_format(g, i, 5, buf, sizeof buf) == LC_OK);
    CHECK(lc_gguf_kv_format(g, lc_gguf_find_key(g, "tokenizer.ggml.tokens"), 2, buf, sizeof buf) ==
          LC_OK);
    CHECKF(strcmp(buf, "[\"<|endoftext|>\", \"<|im_start|>\", ... (49152 elements)]") == 0, "%s",
           buf);
    lc_gguf_close(g);
}

int main(void) {
    check_valid(3, 0);
    check_valid(2, 0);
    check_valid(3, 64);
    check_valid(2, 8);
    check_corrupt();
    check_files();
    check_model();
    TEST_END();
}
