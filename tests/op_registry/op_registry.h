/*
 * op_registry.h — the op test registry: every CUDA op against its CPU twin (DESIGN.md "Every
 * CUDA op has a CPU twin ... tests compare them"), one entry per op, each with a table of
 * shapes. The driver (op_registry.c) runs every entry or the ones named on its command line,
 * prints one line per (op, shape) with the error and pass / fail, and with `perf` times the
 * device op of each shape instead (backend timers: warm-up, median of N).
 *
 * An entry is either table-driven — make (random inputs on the host and the device, the CPU
 * twin's output as the reference), reset (outputs poisoned with NaN bytes, inputs an op
 * modifies in place restored), run (the backend op through its function pointer), compare
 * (download, NMSE or exact comparison, a hash of the output bytes: a second run must give the
 * same bytes), free — or, for ops whose outputs are selections checked against a brute-force
 * reference with tolerance intervals (prune_chunks, select_blocks, select_tokens) or whose shapes are case
 * groups of batched sequences (attn_segments), a check function that runs one group and reports
 * through CHECK (test_util.h). The entries live in the op_*.c files beside this file; adding an op
 * is an entry there and one line in op_registry.c's table.
 */
#ifndef LC_TEST_OP_REGISTRY_H
#define LC_TEST_OP_REGISTRY_H

#include "backend/backend.h"
#include "backend/cuda/cuda.h"
#include "format/quant.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* What every entry function gets. */
typedef struct op_env {
    lc_backend *dev;   /* the backend under test (CUDA) */
    lc_backend *cpu;   /* the CPU twin's backend (host pointers) */
    uint64_t    rng;   /* this shape's random stream (test_util.h test_frand ...), seeded by the driver */
    lc_tuning   tuning; /* the command line's tuning: entries that try other kernel paths set
                           dev->tuning and put this back */
    bool        small; /* the `small` argument: shapes marked big are left out, case groups shrink
                          (runs under compute-sanitizer) */
} op_env;

/* One row of an entry's shape table: n[] are the entry's dimensions (its file says which is
 * which); big rows are left out by `small`. */
typedef struct op_shape {
    const char *label;
    int64_t     n[8];
    bool        big;
} op_shape;

/* What one comparison found. */
typedef struct op_result {
    double   err;       /* NMSE against the CPU twin (the worst part's); 0 for exact entries */
    int64_t  nonfinite; /* non-finite outputs */
    int64_t  bad;       /* outputs that differ where they must be equal (exact entries, extra checks) */
    uint64_t hash;      /* of the output bytes (table-driven entries: runs must agree) */
} op_result;

typedef struct op_entry {
    const char     *name;    /* the backend op it checks (as in lc_backend) */
    const char     *summary; /* one line: what is compared, how */
    const op_shape *shapes;
    int32_t         n_shapes;
    double          tol;     /* NMSE limit (err < tol); 0: exact (bad == 0) */
    bool            same_bytes; /* a second run must give the same output bytes */
    /* table-driven (check NULL) */
    int  (*make)(op_env *e, const op_shape *s, void **state);
    int  (*reset)(op_env *e, void *state);
    int  (*run)(op_env *e, void *state);
    int  (*compare)(op_env *e, void *state, op_result *r);
    void (*free)(op_env *e, void *state);
    /* case groups: the whole check of shape s (CHECK counts failures); r->err the worst NMSE */
    void (*check)(op_env *e, const op_shape *s, op_result *r);
} op_entry;

/* The entries (op_*.c). */
extern const op_entry op_rmsnorm, op_silu_mul, op_add, op_add_bias, op_embed, op_rope, op_kv_write;
extern const op_entry op_attn_dense, op_attn_dense_e4m3, op_kv_write_e4m3, op_dequant, op_gemm16, op_gemv16, op_sample;
extern const op_entry op_attn_segments, op_prune_chunks, op_select_blocks, op_select_tokens;
extern const op_entry op_matmul_blocks, op_matmul_blocks_gemm, op_embed_blocks;

/* ---- helpers the entries share ---- */

/* A device copy of bytes at host (NULL on failure; the caller deallocs). */
static inline void *op_to_device(lc_backend *b, const void *host, size_t bytes, const char *what) {
    void *d = b->alloc(b, bytes ? bytes : 1, what);
    if (d && bytes && b->upload(b, d, host, bytes) != LC_OK) {
        b->dealloc(b, d);
        return NULL;
    }
    return d;
}

/* Fill bytes of device memory with byte (0xff: NaN for floats) through a host buffer. */
static inline int op_fill_device(lc_backend *b, void *dst, int byte, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return LC_ERR_NOMEM;
    memset(h, byte, bytes);
    const int rc = b->upload(b, dst, h, bytes);
    free(h);
    return rc;
}

/* FNV-1a over bytes, continuing from h (start with 14695981039346656037). */
static inline uint64_t op_hash(uint64_t h, const void *p, size_t bytes) {
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
#define OP_HASH_START 14695981039346656037ull

/* Download n floats from dev to host and compare them with ref: NMSE, non-finite, hash into r. */
static inline int op_compare_floats(lc_backend *b, const float *ref, const float *dev, float *host,
                                    size_t n, op_result *r) {
    const int rc = b->download(b, host, dev, sizeof(float) * n);
    if (rc != LC_OK) return rc;
    r->err  = test_nmse(ref, host, n, &r->nonfinite);
    r->hash = op_hash(OP_HASH_START, host, sizeof(float) * n);
    return LC_OK;
}

/* A float pool [n_slabs][P][D] (slab = page x H + head) in the fp8 layout (backend.h
 * LC_KV_E4M3): each token's row, first offset by its head's row of cen ([H][D]; NULL: no offset
 * and no centre, as for values), quantised as kv_write does (lc_kv_e4m3_quantize, centred on
 * cen) into the returned slabs (malloc'd, n_slabs x lc_kv_slab_bytes; NULL when out of memory),
 * and replaced in the pool by what its codes stand for (lc_kv_e4m3_value), so that a CPU twin
 * reading the pool sees the numbers the device reads from the slabs. */
static inline unsigned char *op_e8_slabs(float *pool, size_t n_slabs, int32_t H, int32_t P,
                                         int32_t D, const float *cen) {
    const size_t   sb    = lc_kv_slab_bytes(true, LC_TYPE_F16, P, D);
    unsigned char *slabs = malloc(n_slabs * sb);
    float         *row   = malloc(sizeof(float) * (size_t)D);
    if (!slabs || !row) return free(slabs), free(row), NULL;
    for (size_t sl = 0; sl < n_slabs; sl++) {
        const float   *c    = cen ? cen + (int64_t)(sl % (size_t)H) * D : NULL;
        unsigned char *slab = slabs + sl * sb;
        for (int32_t t = 0; t < P; t++) {
            float         *x     = pool + ((int64_t)sl * P + t) * D;
            unsigned char *codes = slab + (size_t)t * (size_t)D;
            for (int32_t d = 0; d < D; d++) row[d] = x[d] + (c ? c[d] : 0.0f);
            const float sc = lc_kv_e4m3_quantize(row, c, D, codes);
            memcpy(slab + (size_t)P * (size_t)D + sizeof(float) * (size_t)t, &sc, sizeof sc);
            for (int32_t d = 0; d < D; d++) x[d] = lc_kv_e4m3_value(codes[d], sc, c ? c[d] : 0.0f);
        }
    }
    free(row);
    return slabs;
}

#define OP_N_SHAPES(table) ((int32_t)(sizeof(table) / sizeof((table)[0])))

#endif
