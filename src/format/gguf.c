/*
 * gguf.c — GGUF v2/v3 reader (spec/ecosystem-and-style.md §1.2). The file is mapped read-only
 * and parsed strictly: every count, length, offset and dimension is bounds- and
 * overflow-checked against the bytes that remain, and every error is one line naming the
 * field and its byte offset. Keys and tensor names are copied (NUL-terminated); string
 * values, arrays and tensor data point into the mapping. String arrays get an offset index
 * at parse time so element lookup is O(1); keys and tensor names are hashed.
 */
#include "format/gguf.h"

#include "format/quant.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC         0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_KEY_LEN   65535u
#define GGUF_MAX_NAME_LEN  255u /* ggml allows 63; be a little more tolerant */
#define GGUF_MAX_STR_LEN   (1ull << 30)
#define GGUF_MAX_ARR_COUNT (1ull << 30)
#define GGUF_MAX_DEPTH     8 /* nesting of arrays of arrays */
#define GGUF_MAX_DIMS      4

typedef struct gguf_kv {
    char *key; /* owned, NUL-terminated */
    lc_gguf_type type;
    size_t off;             /* scalar: the value; string: its bytes; array: first element */
    uint64_t len;           /* string: byte length */
    lc_gguf_type elem_type; /* arrays */
    uint64_t n;             /* arrays: element count */
    uint64_t *str_off;      /* string arrays: offset of each element's bytes (owned) */
} gguf_kv;

struct lc_gguf {
    const uint8_t *base;
    size_t size;
    void *map; /* non-NULL when we own a mapping */
    size_t map_size;
    uint32_t version;
    uint32_t alignment;
    int64_t n_kv;
    int64_t n_tensors;
    gguf_kv *kv;
    lc_gguf_tensor *tensors;
    int64_t *kv_hash; /* open addressing: index + 1, 0 = empty */
    int64_t *t_hash;
    uint64_t kv_hash_mask, t_hash_mask;
    size_t data_offset;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static const size_t g_type_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *lc_gguf_type_name(lc_gguf_type t) {
    static const char *names[13] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < 13 ? names[t] : "unknown";
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Printable, bounded rendering of a name for error messages. */
static const char *safe_name(const char *s, size_t n, char *buf, size_t cap) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[j++] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
        if (i == 63 && n > 64) {
            buf[j++] = '.';
            buf[j++] = '.';
            buf[j++] = '.';
            break;
        }
    }
    buf[j] = '\0';
    return buf;
}

/* A key name for a message, escaped (lc_text_escape): b must be an array. */
#define KEY_ESC(b, key) lc_text_escape(b, sizeof b, key, strlen(key))

/* ---- the parser -------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *name; /* path or "gguf" */
    char ctx[160];    /* "header", "key 7 (\"x\")", "tensor 3 (\"y\")" */
} reader;

static int eof_err(reader *r, const char *field, size_t need) {
    return lc_fail(LC_ERR_FORMAT,
                   "%s: %s: unexpected end of file reading %s at byte %zu (%zu bytes needed, "
                   "file size %zu)",
                   r->name, r->ctx, field, r->pos, need, r->size);
}

static int need(reader *r, size_t n, const char *field) {
    if (r->size - r->pos < n) return eof_err(r, field, n);
    return LC_OK;
}

static int get_u32(reader *r, uint32_t *v, const char *field) {
    int st = need(r, 4, field);
    if (st) return st;
    *v = rd32(r->p + r->pos);
    r->pos += 4;
    return LC_OK;
}

static int get_u64(reader *r, uint64_t *v, const char *field) {
    int st = need(r, 8, field);
    if (st) return st;
    *v = rd64(r->p + r->pos);
    r->pos += 8;
    return LC_OK;
}

/* A gguf_string: u64 length + bytes. On success *off is the offset of the bytes. */
static int get_str(reader *r, uint64_t max_len, const char *field, size_t *off, uint64_t *len) {
    size_t at = r->pos;
    uint64_t n;
    int st = get_u64(r, &n, field);
    if (st) return st;
    if (n > r->size - r->pos)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: %s: %s length %" PRIu64 " at byte %zu extends past end of file "
                       "(size %zu)",
                       r->name, r->ctx, field, n, at, r->size);
    if (n > max_len)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: %s: %s length %" PRIu64 " at byte %zu exceeds the limit %" PRIu64,
                       r->name, r->ctx, field, n, at, max_len);
    *off = r->pos;
    *len = n;
    r->pos += (size_t)n;
    return LC_OK;
}

/* Smallest number of bytes one element of type t can occupy. */
static size_t min_elem_size(lc_gguf_type t) {
    if (t == LC_GGUF_TYPE_STRING) return 8;
    if (t == LC_GGUF_TYPE_ARRAY) return 12;
    return g_type_size[t];
}

static int check_type(reader *r, uint32_t t, size_t at, const char *field) {
    if (t > LC_GGUF_TYPE_FLOAT64)
        return lc_fail(LC_ERR_FORMAT, "%s: %s: unknown %s %u at byte %zu", r->name, r->ctx, field,
                       t, at);
    return LC_OK;
}

/* Array header at r->pos: elem type and count, checked against the remaining bytes. */
static int get_arr_header(reader *r, lc_gguf_type *et, uint64_t *n) {
    size_t at = r->pos;
    uint32_t t;
    int st = get_u32(r, &t, "array element type");
    if (st) return st;
    if ((st = check_type(r, t, at, "array element type"))) return st;
    at = r->pos;
    if ((st = get_u64(r, n, "array count"))) return st;
    uint64_t min_bytes;
    if (!lc_mul_u64(*n, min_elem_size((lc_gguf_type)t), &min_bytes) || min_bytes > r->size - r->pos)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: %s: array count %" PRIu64 " at byte %zu exceeds file size (%zu)",
                       r->name, r->ctx, *n, at, r->size);
    if (*n > GGUF_MAX_ARR_COUNT)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: %s: array count %" PRIu64 " at byte %zu exceeds the limit %llu",
                       r->name, r->ctx, *n, at, (unsigned long long)GGUF_MAX_ARR_COUNT);
    *et = (lc_gguf_type)t;
    return LC_OK;
}

static int check_bools(reader *r, size_t off, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b = r->p[off + i];
        if (b > 1)
            return lc_fail(LC_ERR_FORMAT, "%s: %s: bool value %u at byte %zu is not 0 or 1",
                           r->name, r->ctx, b, (size_t)(off + i));
    }
    return LC_OK;
}

/* Skip (validating) one value of type t at r->pos. Used for nested array elements. */
static int skip_value(reader *r, lc_gguf_type t, int depth) {
    if (t == LC_GGUF_TYPE_STRING) {
        size_t off;
        uint64_t len;
        return get_str(r, GGUF_MAX_STR_LEN, "string", &off, &len);
    }
    if (t == LC_GGUF_TYPE_ARRAY) {
        size_t at = r->pos;
        if (depth >= GGUF_MAX_DEPTH)
            return lc_fail(LC_ERR_FORMAT, "%s: %s: arrays nested deeper than %d at byte %zu",
                           r->name, r->ctx, GGUF_MAX_DEPTH, at);
        lc_gguf_type et;
        uint64_t n;
        int st = get_arr_header(r, &et, &n);
        if (st) return st;
        if (et == LC_GGUF_TYPE_STRING || et == LC_GGUF_TYPE_ARRAY) {
            for (uint64_t i = 0; i < n; i++)
                if ((st = skip_value(r, et, depth + 1))) return st;
            return LC_OK;
        }
        size_t bytes = (size_t)n * g_type_size[et]; /* checked by get_arr_header */
        if (et == LC_GGUF_TYPE_BOOL && (st = check_bools(r, r->pos, n))) return st;
        r->pos += bytes;
        return LC_OK;
    }
    int st = need(r, g_type_size[t], lc_gguf_type_name(t));
    if (st) return st;
    if (t == LC_GGUF_TYPE_BOOL && (st = check_bools(r, r->pos, 1))) return st;
    r->pos += g_type_size[t];
    return LC_OK;
}

static int parse_value(reader *r, gguf_kv *kv) {
    int st;
    if (kv->type == LC_GGUF_TYPE_STRING)
        return get_str(r, GGUF_MAX_STR_LEN, "string", &kv->off, &kv->len);
    if (kv->type != LC_GGUF_TYPE_ARRAY) {
        kv->off = r->pos;
        return skip_value(r, kv->type, 0);
    }
    if ((st = get_arr_header(r, &kv->elem_type, &kv->n))) return st;
    kv->off = r->pos;
    if (kv->elem_type == LC_GGUF_TYPE_STRING) {
        if (kv->n) {
            kv->str_off = lc_malloc((size_t)kv->n * sizeof(uint64_t), "gguf string array index");
            if (!kv->str_off) return LC_ERR_NOMEM;
        }
        for (uint64_t i = 0; i < kv->n; i++) {
            size_t off;
            uint64_t len;
            if ((st = get_str(r, GGUF_MAX_STR_LEN, "string", &off, &len))) return st;
            kv->str_off[i] = off;
        }
        return LC_OK;
    }
    if (kv->elem_type == LC_GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < kv->n; i++)
            if ((st = skip_value(r, LC_GGUF_TYPE_ARRAY, 1))) return st;
        return LC_OK;
    }
    if (kv->elem_type == LC_GGUF_TYPE_BOOL && (st = check_bools(r, r->pos, kv->n))) return st;
    r->pos += (size_t)kv->n * g_type_size[kv->elem_type];
    return LC_OK;
}

static int64_t *hash_new(int64_t n, uint64_t *mask) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap <<= 1;
    *mask = cap - 1;
    return lc_calloc((size_t)cap, sizeof(int64_t), "gguf hash table");
}

/* Insert index i for name; returns the existing index when the name is already present,
 * or -1 after inserting. */
static int64_t hash_insert(int64_t *tab, uint64_t mask, const char *name, int64_t i,
                           const char *(*name_of)(const lc_gguf *, int64_t), const lc_gguf *g) {
    uint64_t h = hash_bytes(name, strlen(name)) & mask;
    for (;; h = (h + 1) & mask) {
        if (tab[h] == 0) {
            tab[h] = i + 1;
            return -1;
        }
        if (strcmp(name_of(g, tab[h] - 1), name) == 0) return tab[h] - 1;
    }
}

static int64_t hash_find(const int64_t *tab, uint64_t mask, const char *name,
                         const char *(*name_of)(const lc_gguf *, int64_t), const lc_gguf *g) {
    if (!tab) return -1;
    uint64_t h = hash_bytes(name, strlen(name)) & mask;
    for (;; h = (h + 1) & mask) {
        if (tab[h] == 0) return -1;
        if (strcmp(name_of(g, tab[h] - 1), name) == 0) return tab[h] - 1;
    }
}

static const char *kv_name_of(const lc_gguf *g, int64_t i) {
    return g->kv[i].key;
}
static const char *t_name_of(const lc_gguf *g, int64_t i) {
    return g->tensors[i].name;
}

/* Copy a name (key or tensor name) that must be non-empty and contain no NUL. */
static int copy_name(reader *r, size_t off, uint64_t len, const char *what, size_t at, char **out) {
    if (len == 0)
        return lc_fail(LC_ERR_FORMAT, "%s: %s: empty %s at byte %zu", r->name, r->ctx, what, at);
    if (memchr(r->p + off, 0, (size_t)len))
        return lc_fail(LC_ERR_FORMAT, "%s: %s: %s at byte %zu contains a NUL byte", r->name, r->ctx,
                       what, at);
    char *s = lc_malloc((size_t)len + 1, what);
    if (!s) return LC_ERR_NOMEM;
    memcpy(s, r->p + off, (size_t)len);
    s[len] = '\0';
    *out = s;
    return LC_OK;
}

/* The name entry i starts with (a key, or with tensor a tensor name): read into a new string
 * (*out), r->ctx set to 'key 3 ("name")' / 'tensor 3 ("name")', and entered in its hash table
 * (a duplicate: an error naming the first). */
static int parse_name(lc_gguf *g, reader *r, int64_t i, bool tensor, char **out) {
    const char *label = tensor ? "tensor" : "key", *what = tensor ? "tensor name" : "key";
    snprintf(r->ctx, sizeof r->ctx, "%s %" PRId64, label, i);
    size_t at = r->pos, off;
    uint64_t len;
    char *name = NULL;
    int st = get_str(r, tensor ? GGUF_MAX_NAME_LEN : GGUF_MAX_KEY_LEN, what, &off, &len);
    if (st == LC_OK) st = copy_name(r, off, len, what, at, &name);
    if (st != LC_OK) return st;
    char nb[80];
    snprintf(r->ctx, sizeof r->ctx, "%s %" PRId64 " (\"%s\")", label, i,
             safe_name(name, (size_t)len, nb, sizeof nb));
    const int64_t dup = tensor ? hash_insert(g->t_hash, g->t_hash_mask, name, i, t_name_of, g)
                               : hash_insert(g->kv_hash, g->kv_hash_mask, name, i, kv_name_of, g);
    if (dup >= 0) {
        st = lc_fail(LC_ERR_FORMAT, "%s: %s at byte %zu: duplicate %s (first is %s %" PRId64 ")",
                     r->name, r->ctx, at, what, label, dup);
        free(name);
        return st;
    }
    *out = name;
    return LC_OK;
}

static int parse_kvs(lc_gguf *g, reader *r) {
    int st;
    for (int64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        if ((st = parse_name(g, r, i, false, &kv->key))) return st;
        uint32_t t;
        size_t at = r->pos;
        if ((st = get_u32(r, &t, "value type"))) return st;
        if ((st = check_type(r, t, at, "value type"))) return st;
        kv->type = (lc_gguf_type)t;
        if ((st = parse_value(r, kv))) return st;
    }
    return LC_OK;
}

static int parse_alignment(lc_gguf *g, reader *r) {
    g->alignment = GGUF_DEFAULT_ALIGN;
    int64_t i = hash_find(g->kv_hash, g->kv_hash_mask, "general.alignment", kv_name_of, g);
    if (i < 0) return LC_OK;
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != LC_GGUF_TYPE_UINT32)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: key %" PRId64 " (\"general.alignment\"): type %s, expected u32",
                       r->name, i, lc_gguf_type_name(kv->type));
    uint32_t a = rd32(g->base + kv->off);
    if (a == 0 || (a & (a - 1)) != 0)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: key %" PRId64 " (\"general.alignment\"): alignment %u at byte %zu is "
                       "not a power of two",
                       r->name, i, a, kv->off);
    g->alignment = a;
    return LC_OK;
}

static int parse_tensors(lc_gguf *g, reader *r) {
    int st;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        lc_gguf_tensor *t = &g->tensors[i];
        char *name = NULL;
        if ((st = parse_name(g, r, i, true, &name))) return st;
        t->name = name;
        size_t at = r->pos;
        if ((st = get_u32(r, &t->n_dims, "n_dims"))) return st;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return lc_fail(LC_ERR_FORMAT, "%s: %s: n_dims %u at byte %zu out of range 1..%d",
                           r->name, r->ctx, t->n_dims, at, GGUF_MAX_DIMS);
        uint64_t nel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            at = r->pos;
            if ((st = get_u64(r, &t->ne[d], "ne"))) return st;
            if (t->ne[d] > (uint64_t)INT64_MAX)
                return lc_fail(LC_ERR_FORMAT, "%s: %s: ne[%u] %" PRIu64 " at byte %zu is negative",
                               r->name, r->ctx, d, t->ne[d], at);
            if (!lc_mul_u64(nel, t->ne[d], &nel) || nel > (uint64_t)INT64_MAX)
                return lc_fail(LC_ERR_FORMAT,
                               "%s: %s: element count overflows at ne[%u] (byte %zu)", r->name,
                               r->ctx, d, at);
        }
        at = r->pos;
        if ((st = get_u32(r, &t->type, "tensor type"))) return st;
        const lc_type_traits *tt = lc_type_traits_get(t->type);
        if (!tt)
            return lc_fail(LC_ERR_FORMAT, "%s: %s: unknown tensor type id %u at byte %zu", r->name,
                           r->ctx, t->type, at);
        if (t->ne[0] % (uint64_t)tt->blck_size != 0)
            return lc_fail(LC_ERR_FORMAT,
                           "%s: %s: ne[0] %" PRIu64
                           " is not a multiple of the %s block size %" PRId64,
                           r->name, r->ctx, t->ne[0], tt->name, tt->blck_size);
        uint64_t row, bytes = 0;
        bool ok = lc_type_row_bytes(t->type, t->ne[0], &row);
        bytes = row;
        for (int d = 1; ok && d < GGUF_MAX_DIMS; d++)
            ok = lc_mul_u64(bytes, t->ne[d], &bytes);
        if (!ok) return lc_fail(LC_ERR_FORMAT, "%s: %s: byte size overflows", r->name, r->ctx);
        t->nbytes = bytes;
        at = r->pos;
        if ((st = get_u64(r, &t->offset, "tensor data offset"))) return st;
    }
    return LC_OK;
}

static int check_tensor_data(lc_gguf *g, reader *r) {
    snprintf(r->ctx, sizeof r->ctx, "tensor data");
    uint64_t start = r->pos;
    if (g->n_tensors > 0) {
        uint64_t a = g->alignment;
        if (!lc_add_u64(start, a - 1, &start)) start = UINT64_MAX;
        start &= ~(a - 1);
        if (start > r->size)
            return lc_fail(LC_ERR_FORMAT,
                           "%s: data section starts at byte %" PRIu64
                           " (tensor infos end at %zu, alignment %u), past end of file (size %zu)",
                           r->name, start, r->pos, g->alignment, r->size);
    }
    g->data_offset = (size_t)start;
    uint64_t avail = r->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        lc_gguf_tensor *t = &g->tensors[i];
        char nb[80];
        if (t->offset % g->alignment != 0)
            return lc_fail(LC_ERR_FORMAT,
                           "%s: tensor %" PRId64 " (\"%s\") data offset %" PRIu64
                           " is not a multiple of the alignment %u",
                           r->name, i, safe_name(t->name, strlen(t->name), nb, sizeof nb),
                           t->offset, g->alignment);
        uint64_t end;
        if (!lc_add_u64(t->offset, t->nbytes, &end) || end > avail)
            return lc_fail(LC_ERR_FORMAT,
                           "%s: tensor %" PRId64 " (\"%s\") data [offset %" PRIu64 ", %" PRIu64
                           " bytes] extends past end of file (size %zu, data section at %zu)",
                           r->name, i, safe_name(t->name, strlen(t->name), nb, sizeof nb),
                           t->offset, t->nbytes, r->size, g->data_offset);
        t->data = g->base + g->data_offset + t->offset;
    }
    return LC_OK;
}

static int parse(lc_gguf *g, const char *name) {
    reader r = {.p = g->base, .size = g->size, .pos = 0, .name = name};
    snprintf(r.ctx, sizeof r.ctx, "header");
    int st;
    uint32_t magic, version;
    uint64_t nt, nkv;
    if (g->size == 0)
        return lc_fail(LC_ERR_FORMAT, "%s: empty file (0 bytes), not a GGUF file", name);
    if ((st = get_u32(&r, &magic, "magic"))) return st;
    if (magic != GGUF_MAGIC)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: not a GGUF file: bad magic %02x %02x %02x %02x at byte 0 (expected "
                       "47 47 55 46 \"GGUF\")",
                       name, g->base[0], g->base[1], g->base[2], g->base[3]);
    if ((st = get_u32(&r, &version, "version"))) return st;
    if (version == 1)
        return lc_fail(LC_ERR_FORMAT, "%s: GGUFv1 is no longer supported (version at byte 4)",
                       name);
    if (version == 0)
        return lc_fail(LC_ERR_FORMAT, "%s: unsupported GGUF version 0 at byte 4", name);
    if ((version & 0xffffu) == 0)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: big-endian GGUF not supported (version field 0x%08x at byte 4)", name,
                       version);
    if (version > 3)
        return lc_fail(LC_ERR_FORMAT, "%s: unsupported GGUF version %u at byte 4 (2 and 3 are)",
                       name, version);
    g->version = version;
    if ((st = get_u64(&r, &nt, "n_tensors"))) return st;
    if ((st = get_u64(&r, &nkv, "n_kv"))) return st;
    /* Each kv needs >= 8 (key length) + 1 (key) + 4 (type) + 1 (value) bytes; each tensor
     * info >= 8 + 1 + 4 + 8 + 4 + 8. */
    uint64_t rest = g->size - r.pos;
    if (nt > rest / 33)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: n_tensors %" PRIu64
                       " at byte 8 exceeds what the file size (%zu) can hold",
                       name, nt, g->size);
    if (nkv > rest / 14)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: n_kv %" PRIu64 " at byte 16 exceeds what the file size (%zu) can hold",
                       name, nkv, g->size);
    if (nt * 33 + nkv * 14 > rest)
        return lc_fail(LC_ERR_FORMAT,
                       "%s: n_tensors %" PRIu64 " and n_kv %" PRIu64
                       " (bytes 8..23) exceed what the file size (%zu) can hold",
                       name, nt, nkv, g->size);
    g->n_tensors = (int64_t)nt;
    g->n_kv = (int64_t)nkv;
    if (nkv) {
        if (!(g->kv = lc_calloc((size_t)nkv, sizeof(gguf_kv), "gguf kv table")))
            return LC_ERR_NOMEM;
    }
    if (!(g->kv_hash = hash_new(g->n_kv, &g->kv_hash_mask))) return LC_ERR_NOMEM;
    if (nt) {
        if (!(g->tensors = lc_calloc((size_t)nt, sizeof(lc_gguf_tensor), "gguf tensor table")))
            return LC_ERR_NOMEM;
    }
    if (!(g->t_hash = hash_new(g->n_tensors, &g->t_hash_mask))) return LC_ERR_NOMEM;
    if ((st = parse_kvs(g, &r))) return st;
    if ((st = parse_alignment(g, &r))) return st;
    if ((st = parse_tensors(g, &r))) return st;
    return check_tensor_data(g, &r);
}

/* ---- open / close ----------------------------------------------------------------------- */

void lc_gguf_close(lc_gguf *g) {
    if (!g) return;
    if (g->kv) {
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].str_off);
        }
        free(g->kv);
    }
    if (g->tensors) {
        for (int64_t i = 0; i < g->n_tensors; i++)
            free((void *)g->tensors[i].name);
        free(g->tensors);
    }
    free(g->kv_hash);
    free(g->t_hash);
    if (g->map) munmap(g->map, g->map_size);
    free(g);
}

static int open_common(lc_gguf *g, const char *name, lc_gguf **out) {
    int st = parse(g, name);
    if (st) {
        lc_gguf_close(g);
        return st;
    }
    *out = g;
    return LC_OK;
}

int lc_gguf_open_memory(const void *data, size_t size, lc_gguf **out) {
    if (!out) return lc_fail(LC_ERR_INVALID_ARG, "gguf: out is NULL");
    *out = NULL;
    if (!data && size) return lc_fail(LC_ERR_INVALID_ARG, "gguf: data is NULL");
    lc_gguf *g = lc_calloc(1, sizeof *g, "gguf handle");
    if (!g) return LC_ERR_NOMEM;
    g->base = data;
    g->size = size;
    return open_common(g, "gguf", out);
}

int lc_gguf_open(const char *path, lc_gguf **out) {
    if (!out) return lc_fail(LC_ERR_INVALID_ARG, "gguf: out is NULL");
    *out = NULL;
    if (!path) return lc_fail(LC_ERR_INVALID_ARG, "gguf: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lc_fail(LC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lc_fail(LC_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return lc_fail(LC_ERR_IO, "%s: is a directory, not a GGUF file", path);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lc_fail(LC_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return lc_fail(LC_ERR_FORMAT, "%s: empty file (0 bytes), not a GGUF file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return lc_fail(LC_ERR_IO, "%s: file too large to map", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return lc_fail(LC_ERR_IO, "%s: mmap of %zu bytes failed: %s", path, size, strerror(e));
    lc_gguf *g = lc_calloc(1, sizeof *g, "gguf handle");
    if (!g) {
        munmap(map, size);
        return LC_ERR_NOMEM;
    }
    g->base = map;
    g->size = size;
    g->map = map;
    g->map_size = size;
    return open_common(g, path, out);
}

/* ---- public accessors ------------------------------------------------------------------- */

uint32_t lc_gguf_version(const lc_gguf *g) {
    return g ? g->version : 0;
}
uint32_t lc_gguf_alignment(const lc_gguf *g) {
    return g ? g->alignment : 0;
}
int64_t lc_gguf_n_kv(const lc_gguf *g) {
    return g ? g->n_kv : 0;
}
int64_t lc_gguf_n_tensors(const lc_gguf *g) {
    return g ? g->n_tensors : 0;
}

int64_t lc_gguf_find_key(const lc_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return hash_find(g->kv_hash, g->kv_hash_mask, key, kv_name_of, g);
}

const char *lc_gguf_kv_key(const lc_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_kv) return NULL;
    return g->kv[i].key;
}

lc_gguf_type lc_gguf_kv_type(const lc_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_kv) return LC_GGUF_TYPE_INVALID;
    return g->kv[i].type;
}

int lc_gguf_kv_array_info(const lc_gguf *g, int64_t i, lc_gguf_type *elem_type, uint64_t *n) {
    if (!g || i < 0 || i >= g->n_kv)
        return lc_fail(LC_ERR_INVALID_ARG, "gguf: kv index %" PRId64 " out of range", i);
    const gguf_kv *kv = &g->kv[i];
    char kb[96];
    if (kv->type != LC_GGUF_TYPE_ARRAY)
        return lc_fail(LC_ERR_INVALID_ARG, "gguf: key \"%s\" is a %s, not an array",
                       KEY_ESC(kb, kv->key), lc_gguf_type_name(kv->type));
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = kv->n;
    return LC_OK;
}

const lc_gguf_tensor *lc_gguf_tensor_at(const lc_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_tensors) return NULL;
    return &g->tensors[i];
}

const lc_gguf_tensor *lc_gguf_find_tensor(const lc_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    int64_t i = hash_find(g->t_hash, g->t_hash_mask, name, t_name_of, g);
    return i < 0 ? NULL : &g->tensors[i];
}

/* ---- formatting ------------------------------------------------------------------------- */

typedef struct sbuf {
    char *buf;
    size_t cap, len;
} sbuf;

static void sb_putc(sbuf *b, char c) {
    if (b->len + 1 < b->cap) {
        b->buf[b->len++] = c;
        b->buf[b->len] = '\0';
    }
}

static void sb_puts(sbuf *b, const char *s) {
    while (*s && b->len + 1 < b->cap)
        sb_putc(b, *s++);
}

static void sb_printf(sbuf *b, const char *fmt, ...) LC_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_puts(b, tmp);
}

#define FMT_STR_MAX 80

/* The characters fmt_string writes as a named escape, and those escapes. */
static const char  named_from[] = "\"\\\n\r\t";
static const char *named_to[]   = {"\\\"", "\\\\", "\\n", "\\r", "\\t"};

static void fmt_string(sbuf *b, const uint8_t *s, uint64_t len) {
    sb_putc(b, '"');
    uint64_t n = len < FMT_STR_MAX ? len : FMT_STR_MAX;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        const char   *named = c ? strchr(named_from, c) : NULL;
        if (named) {
            sb_puts(b, named_to[named - named_from]);
        } else if (c >= 0x80) { /* non-ASCII: valid UTF-8 kept, C1 controls and bad bytes escaped */
            uint64_t e = i;
            while (e < n && s[e] >= 0x80)
                e++;
            char esc[4 * FMT_STR_MAX + 4];
            sb_puts(b, lc_text_escape(esc, sizeof esc, (const char *)s + i, (size_t)(e - i)));
            i = e - 1;
        } else if (c < 0x20 || c == 0x7f) {
            sb_printf(b, "\\x%02x", c);
        } else {
            sb_putc(b, (char)c);
        }
    }
    sb_putc(b, '"');
    if (len > n) sb_printf(b, "...(%" PRIu64 " bytes)", len);
}

/* An integer value: its sign, its magnitude when not negative (0 when negative), and its
 * value as a signed integer (saturated at INT64_MAX). */
typedef struct {
    bool     neg;
    uint64_t mag;
    int64_t  sv;
} int_val;

/* An unsigned integer u as an int_val. */
static bool unsigned_val(uint64_t u, int_val *v) {
    v->neg = false;
    v->mag = u;
    v->sv = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    return true;
}

/* The integer of type t at p; false if t is not an integer type. */
static bool int_at(lc_gguf_type t, const uint8_t *p, int_val *v) {
    int64_t s;
    switch (t) {
    case LC_GGUF_TYPE_UINT8: return unsigned_val(p[0], v);
    case LC_GGUF_TYPE_UINT16: return unsigned_val(rd16(p), v);
    case LC_GGUF_TYPE_UINT32: return unsigned_val(rd32(p), v);
    case LC_GGUF_TYPE_UINT64: return unsigned_val(rd64(p), v);
    case LC_GGUF_TYPE_INT8: s = (int8_t)p[0]; break;
    case LC_GGUF_TYPE_INT16: s = (int16_t)rd16(p); break;
    case LC_GGUF_TYPE_INT32: s = (int32_t)rd32(p); break;
    case LC_GGUF_TYPE_INT64: s = (int64_t)rd64(p); break;
    default: return false;
    }
    v->neg = s < 0;
    v->mag = s < 0 ? 0 : (uint64_t)s;
    v->sv = s;
    return true;
}

/* Render one scalar of type t at p. */
static void fmt_scalar(sbuf *b, lc_gguf_type t, const uint8_t *p) {
    int_val v;
    if (int_at(t, p, &v)) {
        if (v.neg)
            sb_printf(b, "%" PRId64, v.sv);
        else
            sb_printf(b, "%" PRIu64, v.mag);
        return;
    }
    switch (t) {
    case LC_GGUF_TYPE_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        sb_printf(b, "%g", (double)v);
    } break;
    case LC_GGUF_TYPE_BOOL:
        sb_puts(b, p[0] ? "true" : "false");
        break;
    case LC_GGUF_TYPE_FLOAT64: {
        double v;
        memcpy(&v, p, 8);
        sb_printf(b, "%g", v);
    } break;
    default:
        sb_puts(b, "?");
        break;
    }
}

/* Render a (validated) value of type t at *pos, advancing *pos past it. */
static void fmt_value(sbuf *b, const lc_gguf *g, lc_gguf_type t, size_t *pos, size_t max_elems) {
    const uint8_t *p = g->base;
    if (t == LC_GGUF_TYPE_STRING) {
        uint64_t len = rd64(p + *pos);
        fmt_string(b, p + *pos + 8, len);
        *pos += 8 + (size_t)len;
        return;
    }
    if (t != LC_GGUF_TYPE_ARRAY) {
        fmt_scalar(b, t, p + *pos);
        *pos += g_type_size[t];
        return;
    }
    lc_gguf_type et = (lc_gguf_type)rd32(p + *pos);
    uint64_t n = rd64(p + *pos + 4);
    *pos += 12;
    sb_putc(b, '[');
    for (uint64_t i = 0; i < n; i++) {
        if (i == max_elems) {
            sb_printf(b, "%s... (%" PRIu64 " elements)", i ? ", " : "", n);
            /* skip the rest (needed to continue rendering an enclosing array) */
            if (et == LC_GGUF_TYPE_STRING || et == LC_GGUF_TYPE_ARRAY) {
                sbuf null = {NULL, 0, 0};
                for (; i < n; i++)
                    fmt_value(&null, g, et, pos, 0);
            } else {
                *pos += (size_t)(n - i) * g_type_size[et];
            }
            break;
        }
        if (i) sb_puts(b, ", ");
        fmt_value(b, g, et, pos, max_elems);
    }
    sb_putc(b, ']');
}

int lc_gguf_kv_format(const lc_gguf *g, int64_t i, size_t max_elems, char *buf, size_t cap) {
    if (!buf || cap == 0) return lc_fail(LC_ERR_INVALID_ARG, "gguf: kv_format needs a buffer");
    buf[0] = '\0';
    if (!g || i < 0 || i >= g->n_kv)
        return lc_fail(LC_ERR_INVALID_ARG, "gguf: kv index %" PRId64 " out of range", i);
    const gguf_kv *kv = &g->kv[i];
    sbuf b = {buf, cap, 0};
    if (kv->type == LC_GGUF_TYPE_STRING) {
        fmt_string(&b, g->base + kv->off, kv->len);
    } else if (kv->type == LC_GGUF_TYPE_ARRAY) {
        size_t pos = kv->off - 12;
        fmt_value(&b, g, LC_GGUF_TYPE_ARRAY, &pos, max_elems);
    } else {
        fmt_scalar(&b, kv->type, g->base + kv->off);
    }
    return LC_OK;
}

/* ---- typed getters ---------------------------------------------------------------------- */

/* Index of key or -1 (no error recorded). */
static const gguf_kv *lookup(const lc_gguf *g, const char *key) {
    int64_t i = lc_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

static int type_err(const gguf_kv *kv, const char *expected) {
    char kb[96];
    return lc_fail(LC_ERR_FORMAT, "gguf: key \"%s\" has type %s, expected %s",
                   KEY_ESC(kb, kv->key), lc_gguf_type_name(kv->type), expected);
}

/* The entry of key when it has type: LC_OK and *kv; LC_ERR_NOT_FOUND (no error recorded); or
 * the type error that names what was expected. */
static int lookup_typed(const lc_gguf *g, const char *key, lc_gguf_type type, const char *expected,
                        const gguf_kv **kv) {
    *kv = lookup(g, key);
    if (!*kv) return LC_ERR_NOT_FOUND;
    return (*kv)->type == type ? LC_OK : type_err(*kv, expected);
}

static int range_err(const lc_gguf *g, const gguf_kv *kv, const char *dest) {
    char tmp[64];
    sbuf b = {tmp, sizeof tmp, 0};
    tmp[0] = '\0';
    fmt_scalar(&b, kv->type, g->base + kv->off);
    char kb[96];
    return lc_fail(LC_ERR_FORMAT, "gguf: key \"%s\": value %s (%s) does not fit %s",
                   KEY_ESC(kb, kv->key), tmp, lc_gguf_type_name(kv->type), dest);
}

/* The integer value of key when it lies in [lo, hi]: LC_OK and *v; LC_ERR_NOT_FOUND (no error
 * recorded); a type error for a key that is not an integer; a range error naming dest, the
 * caller's type, for one outside [lo, hi]. */
static int get_int_in(const lc_gguf *g, const char *key, int64_t lo, uint64_t hi, const char *dest,
                      int_val *v) {
    const gguf_kv *kv = lookup(g, key);
    if (!kv) return LC_ERR_NOT_FOUND;
    if (!int_at(kv->type, g->base + kv->off, v)) return type_err(kv, "an integer");
    if (v->neg ? v->sv < lo : v->mag > hi) return range_err(g, kv, dest);
    return LC_OK;
}

int lc_gguf_get_u32(const lc_gguf *g, const char *key, uint32_t *out) {
    int_val   v = {0};
    const int st = get_int_in(g, key, 0, UINT32_MAX, "u32", &v);
    if (st == LC_OK) *out = (uint32_t)v.mag;
    return st;
}

int lc_gguf_get_i32(const lc_gguf *g, const char *key, int32_t *out) {
    int_val   v = {0};
    const int st = get_int_in(g, key, INT32_MIN, INT32_MAX, "i32", &v);
    if (st == LC_OK) *out = (int32_t)v.sv;
    return st;
}

int lc_gguf_get_u64(const lc_gguf *g, const char *key, uint64_t *out) {
    int_val   v = {0};
    const int st = get_int_in(g, key, 0, UINT64_MAX, "u64", &v);
    if (st == LC_OK) *out = v.mag;
    return st;
}

int lc_gguf_get_f32(const lc_gguf *g, const char *key, float *out) {
    const gguf_kv *kv = lookup(g, key);
    if (!kv) return LC_ERR_NOT_FOUND;
    if (kv->type == LC_GGUF_TYPE_FLOAT32) {
        memcpy(out, g->base + kv->off, 4);
        return LC_OK;
    }
    if (kv->type == LC_GGUF_TYPE_FLOAT64) {
        double v;
        memcpy(&v, g->base + kv->off, 8);
        *out = (float)v;
        return LC_OK;
    }
    return type_err(kv, "f32 or f64");
}

int lc_gguf_get_bool(const lc_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv;
    const int      st = lookup_typed(g, key, LC_GGUF_TYPE_BOOL, "bool", &kv);
    if (st != LC_OK) return st;
    *out = g->base[kv->off] != 0;
    return LC_OK;
}

int lc_gguf_get_str(const lc_gguf *g, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv;
    const int      st = lookup_typed(g, key, LC_GGUF_TYPE_STRING, "string", &kv);
    if (st != LC_OK) return st;
    *s = (const char *)g->base + kv->off;
    *len = (size_t)kv->len;
    return LC_OK;
}

int lc_gguf_get_arr(const lc_gguf *g, const char *key, lc_gguf_type *elem_type, uint64_t *n) {
    const gguf_kv *kv;
    const int      st = lookup_typed(g, key, LC_GGUF_TYPE_ARRAY, "array", &kv);
    if (st != LC_OK) return st;
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = kv->n;
    return LC_OK;
}

int lc_gguf_get_arr_data(const lc_gguf *g, const char *key, lc_gguf_type elem_type,
                         const void **data, uint64_t *n) {
    if (elem_type == LC_GGUF_TYPE_STRING || elem_type == LC_GGUF_TYPE_ARRAY ||
        (unsigned)elem_type > LC_GGUF_TYPE_FLOAT64)
        return lc_fail(LC_ERR_INVALID_ARG,
                       "gguf: get_arr_data(\"%s\"): element type %s has no packed data",
                       key ? key : "", lc_gguf_type_name(elem_type));
    const gguf_kv *kv;
    const int      st = lookup_typed(g, key, LC_GGUF_TYPE_ARRAY, "array", &kv);
    if (st != LC_OK) return st;
    char kb[96];
    if (kv->elem_type != elem_type)
        return lc_fail(LC_ERR_FORMAT, "gguf: key \"%s\" is an array of %s, expected an array of %s",
                       KEY_ESC(kb, kv->key), lc_gguf_type_name(kv->elem_type),
                       lc_gguf_type_name(elem_type));
    *data = g->base + kv->off;
    *n = kv->n;
    return LC_OK;
}

int lc_gguf_get_arr_str(const lc_gguf *g, const char *key, uint64_t i, const char **s,
                        size_t *len) {
    const gguf_kv *kv;
    const int      st = lookup_typed(g, key, LC_GGUF_TYPE_ARRAY, "array of strings", &kv);
    if (st != LC_OK) return st;
    char kb[96];
    if (kv->elem_type != LC_GGUF_TYPE_STRING)
        return lc_fail(LC_ERR_FORMAT,
                       "gguf: key \"%s\" is an array of %s, expected an array of string",
                       KEY_ESC(kb, kv->key), lc_gguf_type_name(kv->elem_type));
    if (i >= kv->n)
        return lc_fail(LC_ERR_INVALID_ARG,
                       "gguf: key \"%s\": index %" PRIu64 " out of range (%" PRIu64 " elements)",
                       KEY_ESC(kb, kv->key), i, kv->n);
    size_t off = (size_t)kv->str_off[i];
    *s = (const char *)g->base + off;
    *len = (size_t)rd64(g->base + off - 8);
    return LC_OK;
}
