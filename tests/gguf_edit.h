/*
 * gguf_edit.h — tests make hostile model files from a good one: copy a GGUF file's metadata
 * and tensors to a new file, with some u32 keys overridden, some tensors' data replaced by a
 * constant (e.g. NaN weights) and extra tensors appended (e.g. a truncated rope_freqs).
 * Uses the project's own reader and writer (src/format/gguf.h, gguf_write.h).
 */
#ifndef LC_TEST_GGUF_EDIT_H
#define LC_TEST_GGUF_EDIT_H

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "format/quant.h"
#include "longctx.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gguf_extra_tensor {
    const char *name;
    uint32_t    n_dims;
    uint64_t    ne[4];
    uint32_t    type;
    const void *data;   /* nbytes of the shape's byte size; NULL: zeros */
} gguf_extra_tensor;

typedef struct gguf_edit {
    const char *set_u32_key; /* override this u32 key (NULL: none) */
    uint32_t    set_u32_value;
    const char *set_str_key; /* override this string key (NULL: none) */
    const char *set_str_value;
    const char *fill_tensor; /* replace this f32/f16 tensor's values by fill_value */
    float       fill_value;
    int64_t     fill_row;    /* >= 0: only this row (ne[0] values) of it; -1: all of it */
    const gguf_extra_tensor *extra; /* appended after the file's tensors */
    int                      n_extra;
} gguf_edit;

/* Copy one metadata entry; LC_ERR_UNSUPPORTED for types the writer has no call for. */
static int gguf_edit_copy_kv(const lc_gguf *g, int64_t i, lc_gguf_writer *w, const gguf_edit *e) {
    const char  *key = lc_gguf_kv_key(g, i);
    lc_gguf_type t   = lc_gguf_kv_type(g, i);
    if (e->set_u32_key && strcmp(key, e->set_u32_key) == 0)
        return lc_gguf_writer_add_u32(w, key, e->set_u32_value);
    if (e->set_str_key && strcmp(key, e->set_str_key) == 0)
        return lc_gguf_writer_add_str(w, key, e->set_str_value);
    switch (t) {
    case LC_GGUF_TYPE_UINT32: {
        uint32_t v;
        lc_gguf_get_u32(g, key, &v);
        return lc_gguf_writer_add_u32(w, key, v);
    }
    case LC_GGUF_TYPE_INT32: {
        int32_t v;
        lc_gguf_get_i32(g, key, &v);
        return lc_gguf_writer_add_i32(w, key, v);
    }
    case LC_GGUF_TYPE_FLOAT32: {
        float v;
        lc_gguf_get_f32(g, key, &v);
        return lc_gguf_writer_add_f32(w, key, v);
    }
    case LC_GGUF_TYPE_BOOL: {
        bool v;
        lc_gguf_get_bool(g, key, &v);
        return lc_gguf_writer_add_bool(w, key, v);
    }
    case LC_GGUF_TYPE_STRING: {
        const char *s;
        size_t      len;
        lc_gguf_get_str(g, key, &s, &len);
        char *c = malloc(len + 1);
        memcpy(c, s, len);
        c[len] = '\0';
        int st = lc_gguf_writer_add_str(w, key, c);
        free(c);
        return st;
    }
    case LC_GGUF_TYPE_ARRAY: {
        lc_gguf_type et;
        uint64_t     n;
        lc_gguf_kv_array_info(g, i, &et, &n);
        if (et == LC_GGUF_TYPE_STRING) {
            const char **strs = calloc(n ? n : 1, sizeof *strs);
            size_t      *lens = calloc(n ? n : 1, sizeof *lens);
            for (uint64_t k = 0; k < n; k++) lc_gguf_get_arr_str(g, key, k, &strs[k], &lens[k]);
            int st = lc_gguf_writer_add_arr_str(w, key, strs, lens, n);
            free(strs), free(lens);
            return st;
        }
        /* i32 and f32 arrays: 4-byte elements, copied out aligned (the file's may not be) */
        const void *d;
        if ((et != LC_GGUF_TYPE_INT32 && et != LC_GGUF_TYPE_FLOAT32) ||
            lc_gguf_get_arr_data(g, key, et, &d, &n) != LC_OK)
            return LC_ERR_UNSUPPORTED;
        void *v = malloc(4 * (n ? n : 1));
        memcpy(v, d, 4 * n);
        int st = et == LC_GGUF_TYPE_INT32 ? lc_gguf_writer_add_arr_i32(w, key, v, n)
                                          : lc_gguf_writer_add_arr_f32(w, key, v, n);
        free(v);
        return st;
    }
    default: return LC_ERR_UNSUPPORTED;
    }
}

/* Write src, edited by e, to dst. LC_OK or a status. */
static int gguf_edit_copy(const char *src, const char *dst, const gguf_edit *e) {
    lc_gguf *g = NULL;
    int      st = lc_gguf_open(src, &g);
    if (st != LC_OK) return st;
    lc_gguf_writer *w = NULL;
    if ((st = lc_gguf_writer_open(dst, &w)) != LC_OK) {
        lc_gguf_close(g);
        return st;
    }
    for (int64_t i = 0; i < lc_gguf_n_kv(g) && st == LC_OK; i++) st = gguf_edit_copy_kv(g, i, w, e);
    for (int64_t i = 0; i < lc_gguf_n_tensors(g) && st == LC_OK; i++) {
        const lc_gguf_tensor *t = lc_gguf_tensor_at(g, i);
        st = lc_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type);
    }
    for (int i = 0; i < e->n_extra && st == LC_OK; i++)
        st = lc_gguf_writer_add_tensor(w, e->extra[i].name, e->extra[i].n_dims, e->extra[i].ne,
                                       e->extra[i].type);
    if (st == LC_OK) st = lc_gguf_writer_begin_data(w);
    for (int64_t i = 0; i < lc_gguf_n_tensors(g) && st == LC_OK; i++) {
        const lc_gguf_tensor *t = lc_gguf_tensor_at(g, i);
        if (e->fill_tensor && strcmp(t->name, e->fill_tensor) == 0) {
            const size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
            float       *v = malloc(sizeof(float) * (n ? n : 1));
            lc_dequantize(t->type, t->data, v, (int64_t)n); /* the tensor's own values */
            for (size_t k = 0; k < n; k++)
                if (e->fill_row < 0 || (int64_t)(k / t->ne[0]) == e->fill_row) v[k] = e->fill_value;
            st = lc_gguf_writer_write_f32(w, v, n);
            free(v);
        } else {
            st = lc_gguf_writer_write_raw(w, t->nbytes ? t->data : "", (size_t)t->nbytes);
        }
    }
    for (int i = 0; i < e->n_extra && st == LC_OK; i++) {
        const gguf_extra_tensor *x = &e->extra[i];
        uint64_t row, bytes;
        lc_type_row_bytes(x->type, x->ne[0], &row);
        bytes = row;
        for (uint32_t d = 1; d < x->n_dims; d++) bytes *= x->ne[d];
        void *zeros = x->data ? NULL : calloc(1, (size_t)bytes + 1); /* a 0-byte tensor too */
        st          = lc_gguf_writer_write_raw(w, x->data ? x->data : zeros, (size_t)bytes);
        free(zeros);
    }
    if (st == LC_OK) {
        st = lc_gguf_writer_close(w);
    } else {
        lc_gguf_writer_abort(w);
    }
    lc_gguf_close(g);
    return st;
}

#endif
