/*
 * gguf_write.c — streaming GGUF v3 writer (spec/ecosystem-and-style.md §1.2, §1.3): metadata
 * is serialised into a memory buffer as it is added, tensor infos are kept as a table, and
 * the data section is streamed tensor by tensor in declaration order with zero padding to
 * the alignment (32) between tensors. fp32 input is converted on the way out to F32, F16,
 * BF16 or a block type of format/quantize.h.
 */
#include "format/gguf_write.h"
#include "format/quant.h"
#include "format/quantize.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GW_ALIGN     32u
#define GW_MAX_NAME  64 /* ggml's GGML_MAX_NAME, NUL included */

typedef struct gw_tensor {
    char     name[GW_MAX_NAME];
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t offset; /* from the data section start */
    uint64_t nbytes;
} gw_tensor;

struct lc_gguf_writer {
    char     *path;
    FILE     *f;
    bool      regular; /* a regular file: removed on failure */
    bool      failed;
    bool      data_begun;
    uint8_t  *kv;
    size_t    kv_len, kv_cap;
    int64_t   n_kv;
    char    **keys;
    size_t    keys_cap;
    gw_tensor *t;
    int64_t   n_t, cap_t;
    uint64_t  data_size;   /* running padded size of the data section */
    int64_t   cur;         /* current tensor while streaming */
    uint64_t  cur_written; /* bytes of the current tensor written */
    uint8_t  *conv;        /* conversion buffer */
    size_t    conv_cap;
};

/* ---- metadata buffer ------------------------------------------------------------------- */

static int gw_reserve(lc_gguf_writer *w, size_t more) {
    if (w->kv_len + more <= w->kv_cap) return LC_OK;
    size_t cap = w->kv_cap ? w->kv_cap : 4096;
    while (cap < w->kv_len + more) {
        if (cap > SIZE_MAX / 2) return lc_fail(LC_ERR_NOMEM, "gguf writer: metadata too large");
        cap *= 2;
    }
    uint8_t *p = realloc(w->kv, cap);
    if (!p) return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory for metadata (%zu bytes)", cap);
    w->kv     = p;
    w->kv_cap = cap;
    return LC_OK;
}

static int gw_put(lc_gguf_writer *w, const void *p, size_t n) {
    int st = gw_reserve(w, n);
    if (st != LC_OK) return st;
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return LC_OK;
}
static int gw_u32(lc_gguf_writer *w, uint32_t v) { return gw_put(w, &v, 4); }
static int gw_u64(lc_gguf_writer *w, uint64_t v) { return gw_put(w, &v, 8); }
static int gw_str(lc_gguf_writer *w, const char *s, size_t n) {
    int st = gw_u64(w, n);
    return st != LC_OK ? st : gw_put(w, s, n);
}

/* Check the writer state and the key, write key + value type. */
static int gw_key(lc_gguf_writer *w, const char *key, lc_gguf_type type) {
    if (!w || !key) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->failed) return lc_fail(LC_ERR_INVALID_ARG, "%s: gguf writer used after a failure", w->path);
    if (w->data_begun)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: metadata key %s added after the data started",
                       w->path, key);
    size_t len = strlen(key);
    if (len == 0 || len > 65535)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: metadata key of length %zu", w->path, len);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: duplicate metadata key %s", w->path, key);
    if ((size_t)w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **k   = realloc(w->keys, cap * sizeof *k);
        if (!k) return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory for keys");
        w->keys     = k;
        w->keys_cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory for keys");
    memcpy(copy, key, len + 1);
    w->keys[w->n_kv++] = copy;
    int st = gw_str(w, key, len);
    return st != LC_OK ? st : gw_u32(w, (uint32_t)type);
}

int lc_gguf_writer_add_u32(lc_gguf_writer *w, const char *key, uint32_t v) {
    int st = gw_key(w, key, LC_GGUF_TYPE_UINT32);
    return st != LC_OK ? st : gw_put(w, &v, 4);
}
int lc_gguf_writer_add_i32(lc_gguf_writer *w, const char *key, int32_t v) {
    int st = gw_key(w, key, LC_GGUF_TYPE_INT32);
    return st != LC_OK ? st : gw_put(w, &v, 4);
}
int lc_gguf_writer_add_f32(lc_gguf_writer *w, const char *key, float v) {
    int st = gw_key(w, key, LC_GGUF_TYPE_FLOAT32);
    return st != LC_OK ? st : gw_put(w, &v, 4);
}
int lc_gguf_writer_add_bool(lc_gguf_writer *w, const char *key, bool v) {
    int     st = gw_key(w, key, LC_GGUF_TYPE_BOOL);
    uint8_t b  = v ? 1 : 0;
    return st != LC_OK ? st : gw_put(w, &b, 1);
}
int lc_gguf_writer_add_str(lc_gguf_writer *w, const char *key, const char *v) {
    if (!v) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL value for %s", key ? key : "?");
    int st = gw_key(w, key, LC_GGUF_TYPE_STRING);
    return st != LC_OK ? st : gw_str(w, v, strlen(v));
}
static int gw_arr_head(lc_gguf_writer *w, const char *key, lc_gguf_type et, uint64_t n,
                       const void *v) {
    if (n > 0 && !v) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL array for %s", key ? key : "?");
    int st = gw_key(w, key, LC_GGUF_TYPE_ARRAY);
    if (st == LC_OK) st = gw_u32(w, (uint32_t)et);
    if (st == LC_OK) st = gw_u64(w, n);
    return st;
}
int lc_gguf_writer_add_arr_str(lc_gguf_writer *w, const char *key, const char *const *strs,
                               const size_t *lens, uint64_t n) {
    int st = gw_arr_head(w, key, LC_GGUF_TYPE_STRING, n, strs);
    for (uint64_t i = 0; st == LC_OK && i < n; i++) {
        if (!strs[i]) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: %s[%llu] is NULL", key,
                                     (unsigned long long)i);
        st = gw_str(w, strs[i], lens ? lens[i] : strlen(strs[i]));
    }
    return st;
}
int lc_gguf_writer_add_arr_i32(lc_gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    int st = gw_arr_head(w, key, LC_GGUF_TYPE_INT32, n, v);
    if (st == LC_OK && n > SIZE_MAX / 4) return lc_fail(LC_ERR_NOMEM, "gguf writer: %s too large", key);
    return st != LC_OK ? st : gw_put(w, v, (size_t)n * 4);
}
int lc_gguf_writer_add_arr_f32(lc_gguf_writer *w, const char *key, const float *v, uint64_t n) {
    int st = gw_arr_head(w, key, LC_GGUF_TYPE_FLOAT32, n, v);
    if (st == LC_OK && n > SIZE_MAX / 4) return lc_fail(LC_ERR_NOMEM, "gguf writer: %s too large", key);
    return st != LC_OK ? st : gw_put(w, v, (size_t)n * 4);
}

/* ---- tensors --------------------------------------------------------------------------- */

int lc_gguf_writer_add_tensor(lc_gguf_writer *w, const char *name, uint32_t n_dims,
                              const uint64_t *ne, uint32_t type) {
    if (!w || !name || !ne) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->failed || w->data_begun)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s declared after the data started or "
                       "a failure", w->path, name);
    size_t len = strlen(name);
    if (len == 0 || len >= GW_MAX_NAME)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor name '%s' must be 1..%d bytes", w->path,
                       name, GW_MAX_NAME - 1);
    if (n_dims < 1 || n_dims > 4)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s has %u dimensions (1..4)", w->path,
                       name, n_dims);
    const lc_type_traits *tr = lc_type_traits_get(type);
    if (!tr) return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: unknown type %u", w->path, name, type);
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: duplicate tensor %s", w->path, name);
    uint64_t rows = 1, row_bytes, nbytes;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0) return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: dimension %u is 0", w->path, name, d);
        if (d > 0 && !lc_mul_u64(rows, ne[d], &rows))
            return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: size overflows", w->path, name);
    }
    if (!lc_type_row_bytes(type, ne[0], &row_bytes))
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: row length %llu is not a multiple of "
                       "the %s block size %lld", w->path, name, (unsigned long long)ne[0],
                       tr->name, (long long)tr->blck_size);
    uint64_t padded, end;
    if (!lc_mul_u64(row_bytes, rows, &nbytes) || !lc_add_u64(nbytes, GW_ALIGN - 1, &padded) ||
        !lc_add_u64(w->data_size, padded & ~(uint64_t)(GW_ALIGN - 1), &end))
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: size overflows", w->path, name);
    if (w->n_t == w->cap_t) {
        int64_t    cap = w->cap_t ? w->cap_t * 2 : 64;
        gw_tensor *t   = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory for the tensor table");
        w->t     = t;
        w->cap_t = cap;
    }
    gw_tensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type   = type;
    t->offset = w->data_size;
    t->nbytes = nbytes;
    w->data_size = end;
    return LC_OK;
}

/* ---- file ------------------------------------------------------------------------------ */

static int gw_io_fail(lc_gguf_writer *w, const char *what) {
    int e     = errno;
    w->failed = true;
    return lc_fail(LC_ERR_IO, "%s: %s failed: %s", w->path, what, e ? strerror(e) : "short write");
}

static int gw_write(lc_gguf_writer *w, const void *p, size_t n) {
    if (n == 0) return LC_OK;
    errno = 0;
    if (fwrite(p, 1, n, w->f) != n) return gw_io_fail(w, "write");
    return LC_OK;
}

static int gw_pad(lc_gguf_writer *w, uint64_t pos) {
    static const uint8_t zeros[GW_ALIGN];
    size_t pad = (size_t)((GW_ALIGN - pos % GW_ALIGN) % GW_ALIGN);
    return gw_write(w, zeros, pad);
}

int lc_gguf_writer_open(const char *path, lc_gguf_writer **out) {
    if (!path || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_gguf_writer_open: NULL argument");
    *out              = NULL;
    lc_gguf_writer *w = lc_calloc(1, sizeof *w, "gguf writer");
    if (!w) return LC_ERR_NOMEM;
    size_t n = strlen(path);
    w->path  = malloc(n + 1);
    if (!w->path) {
        free(w);
        return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory");
    }
    memcpy(w->path, path, n + 1);
    errno = 0;
    w->f  = fopen(path, "wb");
    if (!w->f) {
        int st = lc_fail(LC_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        free(w->path);
        free(w);
        return st;
    }
    struct stat sb;
    w->regular = fstat(fileno(w->f), &sb) == 0 && S_ISREG(sb.st_mode);
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    *out = w;
    return LC_OK;
}

int lc_gguf_writer_begin_data(lc_gguf_writer *w) {
    if (!w) return lc_fail(LC_ERR_INVALID_ARG, "lc_gguf_writer_begin_data: NULL argument");
    if (w->failed || w->data_begun)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: header already written or writer failed", w->path);
    w->data_begun = true;
    uint64_t pos  = 0;
    uint32_t head[2] = {0x46554747u /* "GGUF" */, 3};
    int64_t  counts[2] = {w->n_t, w->n_kv};
    int      st = gw_write(w, head, sizeof head);
    if (st == LC_OK) st = gw_write(w, counts, sizeof counts);
    if (st == LC_OK) st = gw_write(w, w->kv, w->kv_len);
    pos = sizeof head + sizeof counts + w->kv_len;
    for (int64_t i = 0; st == LC_OK && i < w->n_t; i++) {
        const gw_tensor *t   = &w->t[i];
        uint64_t         len = strlen(t->name);
        uint8_t          buf[8 + GW_MAX_NAME + 4 + 32 + 4 + 8];
        size_t           k = 0;
        memcpy(buf + k, &len, 8), k += 8;
        memcpy(buf + k, t->name, len), k += len;
        memcpy(buf + k, &t->n_dims, 4), k += 4;
        for (uint32_t d = 0; d < t->n_dims; d++) memcpy(buf + k, &t->ne[d], 8), k += 8;
        memcpy(buf + k, &t->type, 4), k += 4;
        memcpy(buf + k, &t->offset, 8), k += 8;
        st = gw_write(w, buf, k);
        pos += k;
    }
    if (st == LC_OK && w->n_t > 0) st = gw_pad(w, pos);
    if (st != LC_OK) w->failed = true;
    w->cur         = 0;
    w->cur_written = 0;
    return st;
}

/* Bytes written into the current tensor; finishes it (padding) when complete. */
static int gw_advance(lc_gguf_writer *w, size_t n) {
    gw_tensor *t = &w->t[w->cur];
    w->cur_written += n;
    if (w->cur_written == t->nbytes) {
        int st = gw_pad(w, t->nbytes);
        if (st != LC_OK) return st;
        w->cur++;
        w->cur_written = 0;
    }
    return LC_OK;
}

static int gw_check_stream(lc_gguf_writer *w, size_t bytes) {
    if (!w) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->failed) return lc_fail(LC_ERR_INVALID_ARG, "%s: gguf writer used after a failure", w->path);
    if (!w->data_begun)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor data written before the header", w->path);
    if (w->cur >= w->n_t)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: more tensor data than declared", w->path);
    const gw_tensor *t = &w->t[w->cur];
    if (bytes > t->nbytes - w->cur_written)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: %zu bytes written past its end "
                       "(%llu of %llu done)", w->path, t->name, bytes,
                       (unsigned long long)w->cur_written, (unsigned long long)t->nbytes);
    return LC_OK;
}

int lc_gguf_writer_write_raw(lc_gguf_writer *w, const void *data, size_t n) {
    int st = gw_check_stream(w, n);
    if (st == LC_OK) st = gw_write(w, data, n);
    if (st == LC_OK) st = gw_advance(w, n);
    return st;
}

int lc_gguf_writer_write_f32(lc_gguf_writer *w, const float *x, size_t n) {
    if (!w || (n && !x)) return lc_fail(LC_ERR_INVALID_ARG, "gguf writer: NULL argument");
    int st = gw_check_stream(w, 0);
    if (st != LC_OK) return st;
    const gw_tensor *t = &w->t[w->cur];
    uint64_t         bytes;
    if (!lc_type_row_bytes(t->type, n, &bytes) || bytes > SIZE_MAX)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s: %zu values is not a whole number of "
                       "%s blocks", w->path, t->name, n, lc_type_traits_get(t->type)->name);
    if ((st = gw_check_stream(w, (size_t)bytes)) != LC_OK) return st;
    if (t->type == LC_TYPE_F32) return lc_gguf_writer_write_raw(w, x, (size_t)bytes);
    if (bytes > w->conv_cap) {
        uint8_t *p = realloc(w->conv, (size_t)bytes);
        if (!p) return lc_fail(LC_ERR_NOMEM, "gguf writer: out of memory (%llu bytes)",
                               (unsigned long long)bytes);
        w->conv     = p;
        w->conv_cap = (size_t)bytes;
    }
    switch (t->type) {
    case LC_TYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = lc_fp32_to_fp16(x[i]);
            memcpy(w->conv + 2 * i, &h, 2);
        }
        break;
    case LC_TYPE_BF16:
#pragma omp parallel for schedule(static) if (n > 131072)
        for (size_t i = 0; i < n; i++) {
            uint16_t h = lc_fp32_to_bf16(x[i]);
            memcpy(w->conv + 2 * i, &h, 2);
        }
        break;
    default:
        if (!lc_quantize_supported(t->type))
            return lc_fail(LC_ERR_UNSUPPORTED, "%s: tensor %s: cannot convert fp32 to %s",
                           w->path, t->name, lc_type_traits_get(t->type)->name);
        if ((st = lc_quantize(t->type, x, w->conv, (int64_t)n)) != LC_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", lc_last_error());
            return lc_fail(st, "%s: tensor %s: %s", w->path, t->name, why);
        }
    }
    return lc_gguf_writer_write_raw(w, w->conv, (size_t)bytes);
}

int64_t lc_gguf_writer_tensor_index(const lc_gguf_writer *w) { return w ? w->cur : 0; }
int64_t lc_gguf_writer_n_tensors(const lc_gguf_writer *w) { return w ? w->n_t : 0; }

static void gw_free(lc_gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->kv);
    free(w->t);
    free(w->conv);
    free(w->path);
    free(w);
}

void lc_gguf_writer_abort(lc_gguf_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->regular) remove(w->path);
    gw_free(w);
}

int lc_gguf_writer_close(lc_gguf_writer *w) {
    if (!w) return lc_fail(LC_ERR_INVALID_ARG, "lc_gguf_writer_close: NULL argument");
    int st = LC_OK;
    if (w->failed) {
        st = lc_fail(LC_ERR_INVALID_ARG, "%s: closing a gguf writer after a failure", w->path);
    } else if (!w->data_begun) {
        st = lc_gguf_writer_begin_data(w);
    }
    if (st == LC_OK && w->cur < w->n_t)
        st = lc_fail(LC_ERR_INVALID_ARG, "%s: tensor %s is incomplete (%llu of %llu bytes); "
                     "%lld of %lld tensors written", w->path, w->t[w->cur].name,
                     (unsigned long long)w->cur_written, (unsigned long long)w->t[w->cur].nbytes,
                     (long long)w->cur, (long long)w->n_t);
    if (st == LC_OK) {
        errno = 0;
        if (fflush(w->f) != 0) st = gw_io_fail(w, "write");
    }
    errno     = 0;
    int cl    = fclose(w->f);
    w->f      = NULL;
    if (st == LC_OK && cl != 0) st = gw_io_fail(w, "close");
    if (st != LC_OK && w->regular) remove(w->path);
    gw_free(w);
    return st;
}
