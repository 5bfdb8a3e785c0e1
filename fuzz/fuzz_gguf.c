/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader: parse the input with
 * lc_gguf_open_memory, then walk every key (lc_gguf_kv_format, typed getters, string array
 * elements) and every tensor (fields, lookup by name, first and last data byte) so that any
 * out-of-bounds read or UB in the parser or the accessors trips ASan/UBSan.
 */
#include "format/gguf.h"
#include "format/quant.h"
#include "util/util.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void quiet_log(lc_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        lc_log_set(quiet_log, NULL, LC_LOG_ERROR);
        init = 1;
    }
    /* an exactly sized heap copy, so reads past the end are caught */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    lc_gguf *g = NULL;
    if (lc_gguf_open_memory(copy, size, &g) != LC_OK) {
        free(copy);
        return 0;
    }
    char buf[512];
    volatile unsigned sink = 0;
    for (int64_t i = 0; i < lc_gguf_n_kv(g); i++) {
        const char *key = lc_gguf_kv_key(g, i);
        (void)lc_gguf_kv_format(g, i, 4, buf, sizeof buf);
        (void)lc_gguf_kv_format(g, i, 0, buf, 7);
        sink += (unsigned)lc_gguf_find_key(g, key);
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        float f;
        bool b;
        const char *s;
        size_t len;
        (void)lc_gguf_get_u32(g, key, &u32);
        (void)lc_gguf_get_i32(g, key, &i32);
        (void)lc_gguf_get_u64(g, key, &u64);
        (void)lc_gguf_get_f32(g, key, &f);
        (void)lc_gguf_get_bool(g, key, &b);
        if (lc_gguf_get_str(g, key, &s, &len) == LC_OK && len) sink += (unsigned char)s[len - 1];
        lc_gguf_type et;
        uint64_t n;
        if (lc_gguf_kv_array_info(g, i, &et, &n) == LC_OK) {
            const void *d;
            if (lc_gguf_get_arr_data(g, key, et, &d, &n) == LC_OK && n)
                sink += ((const unsigned char *)d)[0];
            for (uint64_t k = 0; et == LC_GGUF_TYPE_STRING && k < n && k < 64; k++)
                if (lc_gguf_get_arr_str(g, key, n - 1 - k, &s, &len) == LC_OK && len)
                    sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
        }
    }
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const lc_gguf_tensor *t = lc_gguf_tensor_at(g, i);
        if (lc_gguf_find_tensor(g, t->name) != t) abort();
        sink += lc_type_name(t->type)[0];
        if (t->nbytes) {
            const unsigned char *p = t->data;
            sink += p[0] + p[t->nbytes - 1];
        }
        /* dequantise the first row when it is small */
        const lc_type_traits *tt = lc_type_traits_get(t->type);
        if (tt && tt->to_float && t->ne[0] <= 4096 && t->ne[1] * t->ne[2] * t->ne[3] > 0) {
            float row[4096];
            if (lc_dequantize(t->type, t->data, row, (int64_t)t->ne[0]) != LC_OK) abort();
        }
    }
    (void)sink;
    lc_gguf_close(g);
    free(copy);
    return 0;
}
