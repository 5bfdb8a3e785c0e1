/*
 * backend_cpu.c — the CPU backend: host memory, weight matrices used in the file's own block
 * types from its mapping (the default; cpu_matmul.c dequantises as it multiplies) or
 * dequantised once at load to fp32 (the exact reference) or fp16,
 * and the op table pointing at the reference ops (cpu_ops.c, cpu_attention.c, cpu_kv_read.c,
 * cpu_sample.c and the sparse methods' cpu_hip_*.c, cpu_select_tokens.c).
 * Threads: OpenMP for our loops, OpenBLAS's own threads for GEMMs.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_simd.h"
#include "format/quant.h"
#include "util/sysmem.h"
#include "util/util.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS extension (declared in its cblas.h, not in the reference CBLAS). */
void openblas_set_num_threads(int num_threads);

static void *cpu_alloc(lc_backend *b, size_t bytes, const char *what) {
    (void)b;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void  *p       = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) lc_fail(LC_ERR_NOMEM, "out of host memory allocating %zu bytes for %s", bytes, what);
    return p;
}

static void cpu_dealloc(lc_backend *b, void *p) {
    (void)b;
    free(p);
}

static int cpu_mem_info(lc_backend *b, uint64_t *free_bytes, uint64_t *total_bytes) {
    (void)b;
    return lc_sys_host_memory(free_bytes, total_bytes);
}

static int cpu_copy(lc_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    memcpy(dst, src, bytes);
    return LC_OK;
}

static int cpu_copy_slabs(lc_backend *b, const void *src, void *dst, const lc_slab_copy *copies,
                          int32_t n, size_t slab_bytes) {
    (void)b;
    return lc_cpu_copy_slabs(src, dst, copies, n, slab_bytes);
}

static int cpu_weight_load(lc_backend *b, const lc_gguf_tensor *t, lc_weight *w) {
    const lc_type_traits *tr = lc_type_traits_get(t->type);
    if (!tr || !tr->to_float)
        return lc_fail(LC_ERR_UNSUPPORTED, "tensor \"%s\": type %s cannot be dequantised",
                       t->name, lc_type_name(t->type) ? lc_type_name(t->type) : "unknown");
    const int64_t cols = (int64_t)t->ne[0];
    const int64_t rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    uint64_t      row_bytes;
    if (!lc_type_row_bytes(t->type, (uint64_t)cols, &row_bytes))
        return lc_fail(LC_ERR_FORMAT, "tensor \"%s\": row of %lld elements invalid for %s",
                       t->name, (long long)cols, tr->name);
    /* native: a matrix stays in the file's mapped pages, in its own type (the products
     * dequantise rows or tiles of it as they go) */
    if (b->weight_type == LC_WEIGHT_NATIVE && rows > 1) {
        w->rows     = rows;
        w->cols     = cols;
        w->type     = t->type;
        w->data     = (void *)t->data;
        w->borrowed = true;
        return LC_OK;
    }
    /* matrices in the backend's weight type; vectors (norms, biases) stay fp32 */
    const bool   half = b->weight_type == LC_TYPE_F16 && rows > 1;
    const size_t esz  = half ? sizeof(uint16_t) : sizeof(float);
    void        *data = cpu_alloc(b, esz * (size_t)rows * (size_t)cols, t->name);
    float       *tmp  = half ? malloc(sizeof(float) * (size_t)cols * (size_t)b->n_threads) : NULL;
    if (!data || (half && !tmp)) {
        free(data), free(tmp);
        return lc_fail(LC_ERR_NOMEM, "out of memory for tensor %s", t->name);
    }
    int status = LC_OK;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const void *src = (const char *)t->data + r * (int64_t)row_bytes;
        int         st;
        if (half) {
            float *row = tmp + (int64_t)omp_get_thread_num() * cols;
            st         = lc_dequantize(t->type, src, row, cols);
            lc_cpu_fp32_to_fp16_row(row, (uint16_t *)data + r * cols, cols);
        } else {
            st = lc_dequantize(t->type, src, (float *)data + r * cols, cols);
        }
        if (st != LC_OK) {
#pragma omp atomic write
            status = st;
        }
    }
    free(tmp);
    if (status != LC_OK) {
        free(data);
        return status;
    }
    w->rows = rows;
    w->cols = cols;
    w->type = half ? LC_TYPE_F16 : LC_TYPE_F32;
    w->data = data;
    return LC_OK;
}

static void cpu_weight_free(lc_backend *b, lc_weight *w) {
    (void)b;
    if (!w->borrowed) free(w->data);
    w->data = NULL;
}

static int cpu_embed(lc_backend *b, const lc_weight *t, const int32_t *ids, int64_t n, float *o) {
    return lc_cpu_embed(t, ids, n, o);
}
static int cpu_rmsnorm(lc_backend *b, const float *x, const float *w, float *y, int64_t n,
                       int64_t dim, float eps) {
    return lc_cpu_rmsnorm(x, w, y, n, dim, eps);
}
static int cpu_matmul(lc_backend *b, const lc_weight *w, const float *x, float *y, int64_t n) {
    return b->tuning.cpu_q8_dot ? lc_cpu_matmul_q8(w, x, y, n) : lc_cpu_matmul(w, x, y, n);
}
static int cpu_add_bias(lc_backend *b, float *y, const float *bias, int64_t n, int64_t dim) {
    return lc_cpu_add_bias(y, bias, n, dim);
}
static int cpu_rope(lc_backend *b, float *x, const int32_t *pos, int64_t n, int32_t nh,
                    int32_t hd, const lc_rope_table *r) {
    return lc_cpu_rope(x, pos, n, nh, hd, r);
}
static int cpu_silu_mul(lc_backend *b, const float *g, const float *u, float *o, int64_t n) {
    return lc_cpu_silu_mul(g, u, o, n);
}
static int cpu_add(lc_backend *b, float *x, const float *y, int64_t n) {
    return lc_cpu_add(x, y, n);
}
static int cpu_kv_write(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                        int32_t n, const float *k, const float *v) {
    return lc_cpu_kv_write(kv, s, n, k, v);
}
static int cpu_kv_read(lc_backend *b, const lc_kv_layer_view *kv, const int32_t *page_table,
                       int64_t pos0, int64_t n_rows, int32_t part, float *out) {
    return lc_cpu_kv_read(kv, b->kv_type, page_table, pos0, n_rows, part, out);
}
static int cpu_attn_dense(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                          int32_t n, const float *q, int32_t nh, const lc_rope_table *r,
                          float scale, float *out) {
    if (kv->e4m3) return lc_kv_plain_check(kv, "attn_dense", "cpu");
    return lc_cpu_attn_dense(kv, s, n, q, nh, r, scale, out);
}
static int cpu_prune_chunks(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                         int32_t n, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                         int32_t nh, const lc_rope_table *r, const lc_prune_chunks_args *a) {
    if (kv->e4m3) return lc_kv_plain_check(kv, "prune_chunks", "cpu");
    return lc_cpu_prune_chunks(kv, s, n, qb, n_qb, q_raw, nh, r, a);
}
static int cpu_select_tokens(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                         int32_t n, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                         int32_t nh, const lc_rope_table *r, const lc_select_tokens_args *a) {
    (void)b;
    if (kv->e4m3) return lc_kv_plain_check(kv, "select_tokens", "cpu");
    return lc_cpu_select_tokens(kv, s, n, qb, n_qb, q_raw, nh, r, a);
}
static int cpu_select_blocks(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                        int32_t n, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                        int32_t nh, const lc_rope_table *r, const lc_select_blocks_args *a) {
    (void)b;
    if (kv->e4m3) return lc_kv_plain_check(kv, "select_blocks", "cpu");
    return lc_cpu_select_blocks(kv, s, n, qb, n_qb, q_raw, nh, r, a);
}
static int cpu_attn_segments(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *s,
                           int32_t n, const lc_qblock *qb, int32_t n_qb, const float *q,
                           int32_t nh, const lc_rope_table *r, float scale,
                           const lc_attn_segments_args *a, float *out) {
    if (kv->e4m3) return lc_kv_plain_check(kv, "attn_segments", "cpu");
    return lc_cpu_attn_segments(kv, s, n, qb, n_qb, q, nh, r, scale, a, out);
}

static int cpu_sample(lc_backend *b, const float *logits, int64_t ld, int32_t n_rows,
                      int32_t n_vocab, const lc_sample_row *rows, const int32_t *pen,
                      int32_t *ids) {
    return lc_cpu_sample(logits, ld, n_rows, n_vocab, rows, pen, ids);
}

static void cpu_free(lc_backend *b) { free(b); }

/* OpenMP's team size is a per-thread setting (the calling thread's nthreads ICV): set at
 * creation it holds only for the thread that created the backend, and a forward run from
 * another thread (the server's engine thread) would get libgomp's default for new threads
 * (every CPU, or OMP_NUM_THREADS) instead of the -t the user gave. So every forward sets it
 * for the thread that runs it. */
static int cpu_batch_begin(lc_backend *b, const lc_attn_seq *seqs, int32_t n_seqs,
                           int32_t page_size) {
    (void)seqs, (void)n_seqs, (void)page_size;
#ifdef _OPENMP
    if (omp_get_max_threads() != b->n_threads) omp_set_num_threads(b->n_threads);
#else
    (void)b;
#endif
    return LC_OK;
}

int lc_backend_cpu_create(int n_threads, lc_backend **out) {
    lc_backend *b = lc_calloc(1, sizeof *b, "cpu backend");
    if (!b) return LC_ERR_NOMEM;
    /* Always set the thread count: OpenBLAS otherwise sizes its pool by the host's CPU count,
     * which in a container can be far more than the cores we may use (measured: 20x slower
     * decode on a 2-core slice of a large host). */
    if (n_threads <= 0) {
#ifdef _OPENMP
        n_threads = omp_get_num_procs(); /* CPUs in our affinity mask */
#else
        n_threads = 1;
#endif
    }
#ifdef _OPENMP
    omp_set_num_threads(n_threads);
#endif
    openblas_set_num_threads(n_threads);
    b->name        = "cpu";
    b->weight_type = LC_TYPE_F32;
    b->native_fast = lc_cpu_simd_avx512();
    b->native_types = UINT64_MAX;
    b->kv_type     = LC_TYPE_F32;
    b->n_threads   = n_threads;
    b->device      = LC_DEVICE_CPU;
    b->free        = cpu_free;
    b->batch_begin = cpu_batch_begin;
    b->alloc       = cpu_alloc;
    b->dealloc     = cpu_dealloc;
    b->mem_info    = cpu_mem_info;
    b->upload      = cpu_copy;
    b->download    = cpu_copy;
    b->weight_load = cpu_weight_load;
    b->weight_free = cpu_weight_free;
    b->embed       = cpu_embed;
    b->rmsnorm     = cpu_rmsnorm;
    b->matmul      = cpu_matmul;
    b->add_bias    = cpu_add_bias;
    b->rope        = cpu_rope;
    b->silu_mul    = cpu_silu_mul;
    b->add         = cpu_add;
    b->kv_write    = cpu_kv_write;
    b->kv_read     = cpu_kv_read;
    b->attn_dense  = cpu_attn_dense;
    b->copy        = cpu_copy;
    b->copy_slabs  = cpu_copy_slabs;
    b->prune_chunks   = cpu_prune_chunks;
    b->attn_segments = cpu_attn_segments;
    b->select_tokens   = cpu_select_tokens;
    b->select_blocks    = cpu_select_blocks;
    b->sample      = cpu_sample; /* no upload_async (upload is a memcpy) and no graphs */
    *out           = b;
    return LC_OK;
}
