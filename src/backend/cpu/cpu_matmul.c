/*
 * cpu_matmul.c — y = x·Wᵀ on the CPU for weights held in fp32, fp16 or a GGUF block type as
 * the file stores it (W[out][in]; issue 23 item 4). fp32: OpenBLAS directly. fp16 and block
 * types (2 to 8 times fewer bytes than fp32 for a decode step to stream): for up to 4 input
 * rows one pass over W, each weight row dotted with every input row (a fused
 * dequantise-and-dot on CPUs with AVX-512, else the row converted then dotted; fp32
 * accumulation); for larger batches tiles of weight rows converted to fp32 (the values of
 * format/quant.h's lc_dequantize, so exactly those of --weights f32), then OpenBLAS. The vector
 * kernels are chosen at run time (cpu_simd.h). Also the embedding lookup and the fp32 -> fp16
 * weight conversion used at load.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_simd.h"
#include "format/quant.h"
#include "util/util.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* What this CPU runs, detected once: 0 not yet, 1 the scalar code, 2 the AVX-512 kernels, 3
 * those and the VNNI ones. Tests may force the scalar code. */
static _Atomic int simd_level = 0;

static int simd_detect(void) {
    int s = atomic_load_explicit(&simd_level, memory_order_relaxed);
    if (!s) {
        s = 1;
#if defined(LC_HAVE_AVX512_KERNELS)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("fma"))
            s = 2;
#endif
#if defined(LC_HAVE_VNNI_KERNELS)
        if (s == 2 && __builtin_cpu_supports("avx512vnni")) s = 3;
#endif
        atomic_store_explicit(&simd_level, s, memory_order_relaxed);
    }
    return s;
}

bool lc_cpu_simd_avx512(void) { return simd_detect() >= 2; }
bool lc_cpu_simd_vnni(void) { return simd_detect() == 3; }

void lc_cpu_simd_force_scalar(bool scalar) {
    atomic_store_explicit(&simd_level, scalar ? 1 : 0, memory_order_relaxed);
}

void lc_cpu_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512()) {
        lc_avx512_fp32_to_fp16_row(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = lc_fp32_to_fp16(src[i]);
}

static void fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512()) {
        lc_avx512_fp16_to_fp32_row(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = lc_fp16_to_fp32(src[i]);
}

/* dot of an fp16 row with an fp32 vector */
static float dot_f16(const uint16_t *w, const float *x, int64_t n) {
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512()) return lc_avx512_dot_f16(w, x, n);
#endif
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += lc_fp16_to_fp32(w[i]) * x[i];
    return acc;
}

/* dot of two fp32 rows: 8 partial sums (the compiler may vectorise them), then their total */
static float dot_f32(const float *w, const float *x, int64_t n) {
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512()) return lc_avx512_dot_f32(w, x, n);
#endif
    float   p[8] = {0};
    int64_t i    = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) p[l] += w[i + l] * x[i + l];
    float acc = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    for (; i < n; i++) acc += w[i] * x[i];
    return acc;
}

#define LC_TILE_ROWS 256 /* weight rows converted per tile for the GEMM path */

/* Weight rows a thread takes at a time in the decode products: a contiguous run of about
 * 256 KB, so that each thread's reads stay one long stream for the hardware prefetcher (32-row
 * runs of 864-byte rows, as before, streamed a 131072 x 1536 q4_K matrix at 17.5 GB/s on two
 * cores, 256 KB runs at 24 GB/s: bench/NOTES.md 66), but at most a quarter of a thread's share
 * of the rows (small matrices stay balanced) and at least 32 rows. */
static int64_t decode_chunk_rows(int64_t N, uint64_t row_bytes) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t c = (int64_t)((256u << 10) / (row_bytes ? row_bytes : 1));
    const int64_t quarter = N / (4 * (int64_t)threads);
    if (c > quarter) c = quarter;
    return c < 32 ? 32 : c;
}

/* Weight row o of w as fp32 into dst (fp16 or any block type lc_dequantize reads; the AVX-512
 * row dequantisers give the same bits). */
static int weight_row(const lc_weight *w, uint64_t row_bytes, int64_t o, float *dst) {
    const void *src = (const uint8_t *)w->data + (uint64_t)o * row_bytes;
    if (w->type == LC_TYPE_F16) {
        fp16_to_fp32_row(src, dst, w->cols);
        return LC_OK;
    }
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512() && lc_avx512_dequant_row(w->type, src, dst, w->cols)) return LC_OK;
#endif
    return lc_dequantize(w->type, src, dst, w->cols);
}

/* Decode (1..LC_QDOT_MAX_ROWS input rows): one pass over W, each weight row dotted with every
 * input row, fp32 accumulation, rows shared out in runs of decode_chunk_rows (dynamic: a thread
 * the OS preempts holds back only its own rows). fp16 is dotted as it is read; a block type
 * with an AVX-512 kernel through the fused dequantise-and-dot (x's sums over each 32 elements
 * computed once for the block minimum terms); otherwise the row is converted into a per-thread
 * buffer and dotted. */
static int matmul_rows(const lc_weight *w, uint64_t row_bytes, const float *x, float *y,
                       int64_t n_rows) {
    const int64_t N = w->rows, K = w->cols, chunk = decode_chunk_rows(N, row_bytes);
    if (w->type == LC_TYPE_F16) {
        const uint16_t *W = w->data;
#pragma omp parallel for schedule(dynamic, chunk)
        for (int64_t o = 0; o < N; o++)
            for (int64_t r = 0; r < n_rows; r++) y[r * N + o] = dot_f16(W + o * K, x + r * K, K);
        return LC_OK;
    }
    int st = LC_OK;
#if defined(LC_HAVE_AVX512_KERNELS)
    if (lc_cpu_simd_avx512() && lc_avx512_qdot_type(w->type) && K % 32 == 0) {
        const int64_t ng = K / 32;
        float        *xs = malloc(sizeof(float) * (size_t)(n_rows * ng));
        if (!xs) return lc_fail(LC_ERR_NOMEM, "out of memory for %lld input sums",
                                (long long)(n_rows * ng));
        for (int64_t r = 0; r < n_rows; r++)
            for (int64_t g = 0; g < ng; g++) {
                const float *p = x + r * K + 32 * g;
                float        t = 0.0f;
                for (int j = 0; j < 32; j++) t += p[j];
                xs[r * ng + g] = t;
            }
        const uint8_t *W = w->data;
#pragma omp parallel for schedule(dynamic, chunk)
        for (int64_t o = 0; o < N; o++) {
            float out[LC_QDOT_MAX_ROWS];
            lc_avx512_qdot(w->type, W + (uint64_t)o * row_bytes, x, xs, K, (int)n_rows, out);
            for (int64_t r = 0; r < n_rows; r++) y[r * N + o] = out[r];
        }
        free(xs);
        return LC_OK;
    }
#endif
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * (size_t)K);
        int    err = row ? LC_OK : LC_ERR_NOMEM;
#pragma omp for schedule(dynamic, chunk)
        for (int64_t o = 0; o < N; o++) {
            if (err != LC_OK) continue;
            if ((err = weight_row(w, row_bytes, o, row)) != LC_OK) continue;
            for (int64_t r = 0; r < n_rows; r++) y[r * N + o] = dot_f32(row, x + r * K, K);
        }
        if (err != LC_OK) {
#pragma omp atomic write
            st = err;
        }
        free(row);
    }
    return st == LC_ERR_NOMEM ? lc_fail(st, "out of memory for a weight row (%lld values)",
                                        (long long)K)
                              : st;
}

/* y = x·Wᵀ for W in fp16 or a block type: decode rows through matmul_rows; more input rows in
 * tiles of LC_TILE_ROWS weight rows converted to fp32, then OpenBLAS. */
static int matmul_converted(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
    const int64_t N = w->rows, K = w->cols;
    uint64_t      row_bytes;
    if (!lc_type_row_bytes(w->type, (uint64_t)K, &row_bytes))
        return lc_fail(LC_ERR_INTERNAL, "cpu matmul: rows of %lld values invalid for type %u",
                       (long long)K, w->type);
    if (n_rows <= LC_QDOT_MAX_ROWS) return matmul_rows(w, row_bytes, x, y, n_rows);
    /* one OpenMP loop over the tiles (dynamic: a preempted thread holds back only its tile);
     * each thread converts a tile into its own scratch and multiplies it with OpenBLAS, which
     * runs single-threaded inside our parallel region (its OpenMP build checks
     * omp_in_parallel), so the two never oversubscribe */
    int64_t tile = LC_TILE_ROWS; /* (a small W: one tile a thread, at least 16 rows) */
#ifdef _OPENMP
    const int64_t share = (N + omp_get_max_threads() - 1) / omp_get_max_threads();
    if (share < tile) tile = share < 16 ? 16 : share;
#endif
    if (tile > N) tile = N;
    const int64_t n_tiles = (N + tile - 1) / tile;
    int           st   = LC_OK;
#pragma omp parallel
    {
        float *blk = malloc(sizeof(float) * (size_t)(tile * K));
        int    err = blk ? LC_OK : LC_ERR_NOMEM;
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < n_tiles; ti++) {
            if (err != LC_OK) continue;
            const int64_t o0 = ti * tile, nb = N - o0 < tile ? N - o0 : tile;
            for (int64_t o = 0; o < nb && err == LC_OK; o++)
                err = weight_row(w, row_bytes, o0 + o, blk + o * K);
            if (err == LC_OK)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_rows, (int)nb,
                            (int)K, 1.0f, x, (int)K, blk, (int)K, 0.0f, y + o0, (int)N);
        }
        if (err != LC_OK) {
#pragma omp atomic write
            st = err;
        }
        free(blk);
    }
    return st == LC_ERR_NOMEM ? lc_fail(st, "out of memory for a weight tile (%lld x %lld)",
                                        (long long)tile, (long long)K)
                              : st;
}

#if defined(LC_HAVE_VNNI_KERNELS)
/* Decode products (1..LC_QDOT_MAX_ROWS input rows) with the input rows quantised to int8
 * (cpu_simd_vnni.c): the rows quantised once, then one pass over W in runs of
 * decode_chunk_rows, each weight row through the fused kernel. */
static int matmul_rows_q8(const lc_weight *w, uint64_t row_bytes, const float *x, float *y,
                          int64_t n_rows) {
    const int64_t N = w->rows, K = w->cols, ng = K / 32;
    int8_t       *xq  = malloc((size_t)(n_rows * K));
    float        *xd  = malloc(sizeof(float) * (size_t)(n_rows * ng));
    int32_t      *xs  = malloc(sizeof(int32_t) * (size_t)(n_rows * 2 * ng));
    float        *x32 = malloc(sizeof(float) * (size_t)(n_rows * ng));
    if (!xq || !xd || !xs || !x32) {
        free(xq), free(xd), free(xs), free(x32);
        return lc_fail(LC_ERR_NOMEM, "out of memory for %lld quantised input rows",
                       (long long)n_rows);
    }
    for (int64_t r = 0; r < n_rows; r++)
        lc_vnni_quantize_row(x + r * K, K, xq + r * K, xd + r * ng, xs + r * 2 * ng);
    for (int64_t g = 0; g < n_rows * ng; g++) x32[g] = (float)(xs[2 * g] + xs[2 * g + 1]);
    const uint8_t *W     = w->data;
    const int64_t  chunk = decode_chunk_rows(N, row_bytes);
#pragma omp parallel for schedule(dynamic, chunk)
    for (int64_t o = 0; o < N; o++) {
        float out[LC_QDOT_MAX_ROWS];
        lc_vnni_qdot(w->type, W + (uint64_t)o * row_bytes, xq, xd, xs, x32, K, (int)n_rows, out);
        for (int64_t r = 0; r < n_rows; r++) y[r * N + o] = out[r];
    }
    free(xq), free(xd), free(xs), free(x32);
    return LC_OK;
}
#endif

/* cpu-dot=q8: decode products through the 8-bit kernels; prompt products (more than
 * LC_QDOT_MAX_ROWS rows) on the fp32 tiles as without the knob, which measured faster on a
 * quiet machine (bench/NOTES.md 66: the 8-bit prompt tasks ran at 0.59x (SmolLM2) and 0.93x
 * (Qwen2.5-Coder-1.5B) of them) and are the weights' exact products. */
int lc_cpu_matmul_q8(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
#if defined(LC_HAVE_VNNI_KERNELS)
    uint64_t row_bytes;
    if (n_rows <= LC_QDOT_MAX_ROWS && lc_cpu_simd_vnni() && lc_vnni_qdot_type(w->type) &&
        w->cols % 32 == 0 && lc_type_row_bytes(w->type, (uint64_t)w->cols, &row_bytes))
        return matmul_rows_q8(w, row_bytes, x, y, n_rows);
#endif
    return lc_cpu_matmul(w, x, y, n_rows);
}

int lc_cpu_matmul(const lc_weight *w, const float *x, float *y, int64_t n_rows) {
    if (w->type != LC_TYPE_F32) {
        const lc_type_traits *tr = lc_type_traits_get(w->type);
        if (!tr || !tr->to_float)
            return lc_fail(LC_ERR_INTERNAL, "cpu matmul: weight type %u not supported", w->type);
        return matmul_converted(w, x, y, n_rows);
    }
    const int M = (int)n_rows, N = (int)w->rows, K = (int)w->cols;
    if (M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w->data, K, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w->data, K,
                    0.0f, y, N);
    return LC_OK;
}

int lc_cpu_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out) {
    uint64_t row_bytes;
    if (!lc_type_row_bytes(table->type, (uint64_t)table->cols, &row_bytes))
        return lc_fail(LC_ERR_INTERNAL, "cpu embed: rows of %lld values invalid for type %u",
                       (long long)table->cols, table->type);
    for (int64_t r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || ids[r] >= table->rows)
            return lc_fail(LC_ERR_INVALID_ARG, "token id %d at batch row %lld is outside the "
                           "vocabulary (0..%lld)", ids[r], (long long)r,
                           (long long)table->rows - 1);
        const int64_t off = (int64_t)ids[r] * table->cols;
        if (table->type == LC_TYPE_F32) {
            memcpy(out + r * table->cols, (const float *)table->data + off,
                   sizeof(float) * (size_t)table->cols);
        } else {
            int st = weight_row(table, row_bytes, ids[r], out + r * table->cols);
            if (st != LC_OK) return st;
        }
    }
    return LC_OK;
}
