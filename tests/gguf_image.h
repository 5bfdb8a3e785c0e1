/*
 * gguf_image.h — tests build small GGUF images (metadata only, no tensors) in memory, byte by
 * byte, to feed lc_gguf_open_memory exactly the keys, types and values a case needs (well
 * formed or hostile): collect key/value pairs in a gbuf with the kv_* helpers, then
 * gguf_image() prepends the header.
 */
#ifndef LC_TEST_GGUF_IMAGE_H
#define LC_TEST_GGUF_IMAGE_H

#include "longctx.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gbuf {
    unsigned char *p;
    size_t         n, cap;
    uint64_t       n_kv;
} gbuf;

static inline void put(gbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p   = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void put_u32(gbuf *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(gbuf *b, uint64_t v) { put(b, &v, 8); }
static inline void put_str(gbuf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static inline void kv_head(gbuf *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
    b->n_kv++;
}
static inline void kv_str(gbuf *b, const char *key, const char *v) {
    kv_head(b, key, LC_GGUF_TYPE_STRING);
    put_str(b, v);
}
static inline void kv_u32(gbuf *b, const char *key, uint32_t v) {
    kv_head(b, key, LC_GGUF_TYPE_UINT32);
    put_u32(b, v);
}
static inline void kv_i32(gbuf *b, const char *key, int32_t v) {
    kv_head(b, key, LC_GGUF_TYPE_INT32);
    put(b, &v, 4);
}
static inline void kv_bool(gbuf *b, const char *key, bool v) {
    kv_head(b, key, LC_GGUF_TYPE_BOOL);
    unsigned char c = v;
    put(b, &c, 1);
}
static inline void kv_arr_str(gbuf *b, const char *key, const char *const *v, size_t n) {
    kv_head(b, key, LC_GGUF_TYPE_ARRAY);
    put_u32(b, LC_GGUF_TYPE_STRING);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++) put_str(b, v[i]);
}
/* an array of 4-byte numbers (i32, u32, f32) */
static inline void kv_arr_num(gbuf *b, const char *key, lc_gguf_type et, const void *v, size_t n) {
    kv_head(b, key, LC_GGUF_TYPE_ARRAY);
    put_u32(b, et);
    put_u64(b, n);
    put(b, v, n * 4);
}

/* The image: header + the key/value bytes collected in b (GGUF v3, no tensors). Caller
 * frees; b is left as it is. */
static inline unsigned char *gguf_image(const gbuf *b, size_t *size) {
    gbuf out = {0};
    put(&out, "GGUF", 4);
    put_u32(&out, 3);
    put_u64(&out, 0);
    put_u64(&out, b->n_kv);
    put(&out, b->p, b->n);
    *size = out.n;
    return out.p;
}

#endif
