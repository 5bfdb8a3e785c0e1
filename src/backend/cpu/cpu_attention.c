/*
 * cpu_attention.c — reference dense causal attention over the paged KV cache, and the KV
 * page write. Keys are stored before RoPE (DESIGN.md "Pre-RoPE keys") and rotated here, one
 * page tile at a time, with their true positions (a decode row: keys by their slot in the
 * page and the query by the page's start backwards, R(ps + j) = R(ps) R(j)); the tile loop uses
 * the online softmax of FlashAttention so memory stays O(page) per worker, and decode splits the
 * key range across threads (FlashDecoding) and merges the partial softmaxes.
 *
 * Layouts: q, out: [n_rows][n_head][head_dim]; pages: [page][kv_head][page_size][head_dim].
 * GQA: query head h reads KV head h / (n_head / n_kv_head). kv_write also writes the fp8
 * layout (backend.h LC_KV_E4M3: the twin of the CUDA op's quantisation); attention reads fp32
 * pools only (backend_cpu.c refuses an fp8 view).
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "util/util.h"

#include <cblas.h>
#include <float.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int lc_cpu_kv_write(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                    const float *k, const float *v) {
    const int32_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
    const size_t  sb = lc_kv_slab_bytes(true, LC_TYPE_F32, P, D); /* fp8 layout's slab */
    for (int32_t s = 0; s < n_seqs; s++) {
        const lc_attn_seq *sq = &seqs[s];
        for (int32_t r = 0; r < sq->n_rows; r++) {
            const int32_t pos  = sq->pos0 + r;
            const int64_t page = sq->page_table[pos / P];
            const int32_t slot = pos % P;
            for (int32_t h = 0; h < H; h++) {
                const int64_t src = ((int64_t)(sq->row0 + r) * H + h) * D;
                if (kv->e4m3) { /* backend.h LC_KV_E4M3: codes of the slot, then its scale */
                    unsigned char *ks = (unsigned char *)kv->k + (size_t)(page * H + h) * sb;
                    unsigned char *vs = (unsigned char *)kv->v + (size_t)(page * H + h) * sb;
                    const float    sk = lc_kv_e4m3_quantize(
                        k + src, kv->k_centre ? kv->k_centre + (int64_t)h * D : NULL, D,
                        ks + (size_t)slot * (size_t)D);
                    const float sv = lc_kv_e4m3_quantize(v + src, NULL, D, vs + (size_t)slot * (size_t)D);
                    memcpy(ks + (size_t)P * (size_t)D + sizeof(float) * (size_t)slot, &sk, sizeof sk);
                    memcpy(vs + (size_t)P * (size_t)D + sizeof(float) * (size_t)slot, &sv, sizeof sv);
                    continue;
                }
                const int64_t dst = ((page * H + h) * P + slot) * (int64_t)D;
                memcpy((float *)kv->k + dst, k + src, sizeof(float) * (size_t)D);
                memcpy((float *)kv->v + dst, v + src, sizeof(float) * (size_t)D);
            }
        }
    }
    return LC_OK;
}

/* One unit of work: the query rows [r0, r1) of one sequence, the query heads of one KV group,
 * the key range [k0, k1). Produces unnormalised partial results m, l, o per (row, head). */
typedef struct attn_unit {
    int32_t seq, g, r0, r1, k0, k1;
    int64_t part; /* index of the first partial row in the partial buffers, -1: write out */
} attn_unit;

typedef struct attn_args {
    const lc_kv_layer_view *kv;
    const lc_attn_seq      *seqs;
    const float            *q;
    const lc_rope_table    *rope;
    float                  *out;
    float                  *part_m, *part_l, *part_o;
    int32_t                 n_head, group;
    float                   scale;
} attn_args;

/* exp(x) for the softmax, written so the compiler vectorises it (libm's expf is a scalar
 * call): 2^(x·log2 e) = 2^n · 2^f with n = round, f in [-1/2, 1/2], 2^f by a degree-6
 * polynomial (relative error < 2e-7); 0 for x < -87 (incl. -inf from the causal mask).
 * Arguments are max-subtracted scores, so x <= 0. */
static inline float softmax_exp(float x) {
    /* softmax args are <= 0; fmaxf/fminf also map NaN to a number, so the float-to-int
     * conversion below is defined, and NaN comes back out at the end */
    const float xc = fminf(fmaxf(x, -87.0f), 0.0f);
    const float t  = xc * 1.44269504089f;
    const float n = floorf(t + 0.5f);
    const float f = t - n;
    float       p = 1.5403530e-4f;
    p             = p * f + 1.3333558e-3f;
    p             = p * f + 9.6181291e-3f;
    p             = p * f + 5.5504109e-2f;
    p             = p * f + 2.4022651e-1f;
    p             = p * f + 6.9314718e-1f;
    p             = p * f + 1.0f;
    union {
        float   f;
        int32_t i;
    } u = {p};
    u.i += (int32_t)n * (1 << 23); /* scale by 2^n: add n to the exponent field */
    return x < -87.0f ? 0.0f : (x == x ? u.f : x);
}

/* max of x[0..n) (-inf when n = 0) */
static float row_max(const float *x, int32_t n) {
    int32_t j  = 0;
    float   mx = -INFINITY;
#if defined(__AVX512F__)
    __m512 v = _mm512_set1_ps(-INFINITY);
    for (; j + 16 <= n; j += 16) v = _mm512_max_ps(v, _mm512_loadu_ps(x + j));
    mx = _mm512_reduce_max_ps(v);
#endif
    for (; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

#if defined(__AVX512F__)
/* softmax_exp on 16 lanes (same polynomial and clamping) */
static inline __m512 softmax_exp16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps());
    const __m512 t  = _mm512_mul_ps(xc, _mm512_set1_ps(1.44269504089f));
    const __m512 n  = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f  = _mm512_sub_ps(t, n);
    __m512       p  = _mm512_set1_ps(1.5403530e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    const __m512  r = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
    const __mmask16 dead = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
    return _mm512_mask_mov_ps(r, dead, _mm512_setzero_ps());
}
#endif

/* x[j] = exp(x[j] - mx) for j < n; returns the sum */
static float row_exp_sum(float *x, int32_t n, float mx) {
    int32_t j   = 0;
    float   sum = 0.0f;
#if defined(__AVX512F__)
    const __m512 vm = _mm512_set1_ps(mx);
    __m512       vs = _mm512_setzero_ps();
    for (; j + 16 <= n; j += 16) {
        const __m512 e = softmax_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
        _mm512_storeu_ps(x + j, e);
        vs = _mm512_add_ps(vs, e);
    }
    sum = _mm512_reduce_add_ps(vs);
#endif
    for (; j < n; j++) {
        x[j] = softmax_exp(x[j] - mx);
        sum += x[j];
    }
    return sum;
}

/* Scratch per worker: gathered, scaled queries qm[M][D] (and qr[G][D], a decode row's queries
 * rotated back to its page's start), rotated key tile kr[P][D], scores s[M][P], running max
 * m[M], sum l[M], output o[M][D]. */
typedef struct attn_scratch {
    float *qm, *qr, *kr, *s, *m, *l, *o;
} attn_scratch;

/* C[M][N] (ldc) = A[M][K] · B[N][K]ᵀ (+ C if beta = 1). BLAS for blocks big enough to pay for
 * the call (single-threaded inside our OpenMP region: the OpenMP OpenBLAS sees
 * omp_in_parallel()), plain loops for the few rows of a decode step. */
static void gemm_nt(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
    if (M >= 8) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, beta,
                    C, ldc);
        return;
    }
#if defined(__AVX512F__)
    if (K % 16 == 0 && K <= 256) { /* the rows of a decode step: a key row's chunks in registers,
                                      each dot product reduced by a shuffle tree (the simd
                                      reduction below compiled into a serial chain of 16 scalar
                                      adds through the stack: bench/NOTES.md 67) */
        const int nc = K / 16;
        for (int j = 0; j < N; j++) {
            __m512 b[16];
            for (int c = 0; c < nc; c++) b[c] = _mm512_loadu_ps(B + (int64_t)j * ldb + 16 * c);
            for (int i = 0; i < M; i++) {
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(A + (int64_t)i * lda), b[0]);
                for (int c = 1; c < nc; c++)
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(A + (int64_t)i * lda + 16 * c), b[c], acc);
                const float dot = _mm512_reduce_add_ps(acc);
                C[i * ldc + j] = beta == 0.0f ? dot : beta * C[i * ldc + j] + dot;
            }
        }
        return;
    }
#endif
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int k = 0; k < K; k++) acc += A[i * lda + k] * B[j * ldb + k];
            /* beta = 0: C is not read (as in BLAS) — the scratch may hold -inf or NaN from an
             * earlier tile, and 0 · -inf is NaN */
            C[i * ldc + j] = beta == 0.0f ? acc : beta * C[i * ldc + j] + acc;
        }
}

#if defined(__AVX512F__)
/* C[i][d0 .. d0 + 64) += sum_k A[i][k] B[k][d0 ..) for NR rows i (NR = 1..4): the 4 x NR
 * accumulators stay in registers over all k; A[i][k] == 0 adds nothing (a masked key's value
 * row is never read into the sum, as in the plain loop) */
#define GEMM_NN_BLOCK(NR)                                                                     \
    do {                                                                                      \
        __m512 acc[NR][4];                                                                    \
        for (int r = 0; r < NR; r++)                                                          \
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_loadu_ps(C + (i0 + r) * ldc + d0 + 16 * c); \
        for (int k = 0; k < K; k++) {                                                         \
            const float *b = B + (int64_t)k * ldb + d0;                                       \
            const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);               \
            const __m512 b2 = _mm512_loadu_ps(b + 32), b3 = _mm512_loadu_ps(b + 48);          \
            for (int r = 0; r < NR; r++) {                                                    \
                const float     av = A[(i0 + r) * lda + k];                                   \
                const __mmask16 m  = av != 0.0f ? (__mmask16)0xffff : (__mmask16)0;           \
                const __m512    a  = _mm512_set1_ps(av);                                      \
                acc[r][0] = _mm512_mask3_fmadd_ps(a, b0, acc[r][0], m);                       \
                acc[r][1] = _mm512_mask3_fmadd_ps(a, b1, acc[r][1], m);                       \
                acc[r][2] = _mm512_mask3_fmadd_ps(a, b2, acc[r][2], m);                       \
                acc[r][3] = _mm512_mask3_fmadd_ps(a, b3, acc[r][3], m);                       \
            }                                                                                 \
        }                                                                                     \
        for (int r = 0; r < NR; r++)                                                          \
            for (int c = 0; c < 4; c++) _mm512_storeu_ps(C + (i0 + r) * ldc + d0 + 16 * c, acc[r][c]); \
    } while (0)
#endif

void lc_cpu_gemm_nn_acc(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc) {
    if (M >= 8) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb,
                    1.0f, C, ldc);
        return;
    }
#if defined(__AVX512F__)
    if (N % 64 == 0) { /* the few rows of a decode step, in registers (bench/NOTES.md 67) */
        for (int d0 = 0; d0 < N; d0 += 64)
            for (int i0 = 0; i0 < M; i0 += 4) {
                switch (M - i0 < 4 ? M - i0 : 4) {
                case 1: GEMM_NN_BLOCK(1); break;
                case 2: GEMM_NN_BLOCK(2); break;
                case 3: GEMM_NN_BLOCK(3); break;
                default: GEMM_NN_BLOCK(4); break;
                }
            }
        return;
    }
#endif
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const float a = A[i * lda + k];
            if (a == 0.0f) continue;
            for (int j = 0; j < N; j++) C[i * ldc + j] += a * B[k * ldb + j];
        }
}

/* y = R(-pos) x / f on the rotated dims (f: the table factor, divided out), the rest copied:
 * the inverse of lc_cpu_rope_copy, for queries that meet keys rotated by R(slot) only */
static void rope_copy_back(const float *x, float *y, int32_t head_dim, int32_t pos,
                           const lc_rope_table *rope) {
    const int    half = rope->n_rot / 2;
    const float *c = rope->cos + (int64_t)pos * half, *s = rope->sin + (int64_t)pos * half;
    const float  inv = rope->mscale > 0.0f ? 1.0f / rope->mscale : 1.0f;
    if (rope->pairing == LC_ROPE_NORM) {
        for (int i = 0; i < half; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            y[2 * i]     = (x0 * c[i] + x1 * s[i]) * inv;
            y[2 * i + 1] = (x1 * c[i] - x0 * s[i]) * inv;
        }
    } else {
        for (int i = 0; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            y[i]        = (x0 * c[i] + x1 * s[i]) * inv;
            y[i + half] = (x1 * c[i] - x0 * s[i]) * inv;
        }
    }
    for (int i = rope->n_rot; i < head_dim; i++) y[i] = x[i];
}

static void attn_run_unit(const attn_args *a, const attn_unit *u, attn_scratch *w) {
    const lc_kv_layer_view *kv = a->kv;
    const lc_attn_seq      *sq = &a->seqs[u->seq];
    const int32_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim, G = a->group;
    const int32_t n_q = u->r1 - u->r0, M = n_q * G;

    /* gather this unit's queries: row qi*G + hh = query row r0+qi, head g*G+hh; pre-scaled */
    for (int32_t qi = 0; qi < n_q; qi++)
        for (int32_t hh = 0; hh < G; hh++) {
            const float *src =
                a->q + ((int64_t)(sq->row0 + u->r0 + qi) * a->n_head + u->g * G + hh) * D;
            float *dst = w->qm + (int64_t)(qi * G + hh) * D;
            for (int32_t d = 0; d < D; d++) dst[d] = src[d] * a->scale;
        }
    for (int32_t i = 0; i < M; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0.0f;
    }
    memset(w->o, 0, sizeof(float) * (size_t)M * (size_t)D);

    const int32_t qpos0    = sq->pos0 + u->r0;  /* position of the unit's first query */
    const int32_t last_pos = qpos0 + n_q - 1;
    const int32_t k_end    = u->k1 < last_pos + 1 ? u->k1 : last_pos + 1;
    /* One query row (decode): a key at ps + j meets it as R(-ps) q against R(j) k, so the keys
     * read table rows 0 .. P - 1 only (they stay in cache) instead of a row per key, which the
     * page's keys and values already fill memory bandwidth with (bench/NOTES.md 67); the query
     * rows are rotated back once a page. */
    const bool rel = n_q == 1 && a->rope->n_pos >= P;
    for (int32_t t0 = u->k0; t0 < k_end; t0 += P - (t0 % P)) {
        const int32_t page_start = t0 - t0 % P;
        const int32_t t1         = (page_start + P < k_end) ? page_start + P : k_end;
        const int32_t nt         = t1 - t0;
        const int64_t page       = sq->page_table[t0 / P];
        const float  *kp = (const float *)kv->k + ((page * H + u->g) * P + (t0 - page_start)) * (int64_t)D;
        const float  *vp = (const float *)kv->v + ((page * H + u->g) * P + (t0 - page_start)) * (int64_t)D;
#if defined(__AVX512F__)
        if (t1 < k_end) { /* the next page's keys, values and table rows, while this one computes */
            const int64_t np  = sq->page_table[t1 / P];
            const char   *nk  = (const char *)((const float *)kv->k + (np * H + u->g) * P * (int64_t)D);
            const char   *nv  = (const char *)((const float *)kv->v + (np * H + u->g) * P * (int64_t)D);
            const int32_t n1  = (t1 + P < k_end ? P : k_end - t1);
            const size_t  bytes = sizeof(float) * (size_t)n1 * (size_t)D;
            const char   *nc  = (const char *)(a->rope->cos + (int64_t)t1 * (a->rope->n_rot / 2));
            const char   *ns  = (const char *)(a->rope->sin + (int64_t)t1 * (a->rope->n_rot / 2));
            const size_t  tb  = sizeof(float) * (size_t)(rel ? 1 : n1) * (size_t)(a->rope->n_rot / 2);
            for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(nk + o, _MM_HINT_T1), _mm_prefetch(nv + o, _MM_HINT_T1);
            for (size_t o = 0; o < tb; o += 64) _mm_prefetch(nc + o, _MM_HINT_T1), _mm_prefetch(ns + o, _MM_HINT_T1);
        }
#endif
        /* rotate the tile's keys with their true positions (rel: by their slots in the page,
         * the queries by the page's first position backwards) */
        const float *qsrc = w->qm;
        for (int32_t j = 0; j < nt; j++)
            lc_cpu_rope_copy(kp + (int64_t)j * D, w->kr + (int64_t)j * D, D,
                             rel ? t0 - page_start + j : t0 + j, a->rope);
        if (rel) {
            for (int32_t r = 0; r < M; r++)
                rope_copy_back(w->qm + (int64_t)r * D, w->qr + (int64_t)r * D, D, page_start, a->rope);
            qsrc = w->qr;
        }
        /* queries before t0 see none of the tile: skip their rows */
        const int32_t qa = t0 > qpos0 ? t0 - qpos0 : 0;
        const int32_t r_begin = qa * G, Ma = M - r_begin;
        float        *S = w->s + (int64_t)r_begin * P;
        gemm_nt(Ma, nt, D, qsrc + (int64_t)r_begin * D, D, w->kr, D, 0.0f, S, P);
        for (int32_t row = 0; row < Ma; row++) {
            const int32_t qpos = qpos0 + qa + row / G;
            float        *sr   = S + (int64_t)row * P;
            const int32_t nv   = (qpos + 1 < t1 ? qpos + 1 : t1) - t0; /* visible keys */
            for (int32_t j = nv; j < nt; j++) sr[j] = -INFINITY;
            const int32_t r  = r_begin + row;
            const float mx   = fmaxf(w->m[r], row_max(sr, nv));
            const float corr = softmax_exp(w->m[r] - mx); /* 0 when m was -inf */
            const float sum  = row_exp_sum(sr, nt, mx);   /* masked keys are -inf: 0 */
            float *o = w->o + (int64_t)r * D;
            if (corr != 1.0f)
                for (int32_t d = 0; d < D; d++) o[d] *= corr;
            w->l[r] = w->l[r] * corr + sum;
            w->m[r] = mx;
        }
        lc_cpu_gemm_nn_acc(Ma, D, nt, S, P, vp, D, w->o + (int64_t)r_begin * D, D);
    }

    for (int32_t qi = 0; qi < n_q; qi++)
        for (int32_t hh = 0; hh < G; hh++) {
            const int32_t row = qi * G + hh;
            const int32_t h   = u->g * G + hh;
            const float  *o   = w->o + (int64_t)row * D;
            if (u->part < 0) {
                float      *dst = a->out + ((int64_t)(sq->row0 + u->r0 + qi) * a->n_head + h) * D;
                const float inv = w->l[row] > 0.0f ? 1.0f / w->l[row] : 0.0f;
                for (int32_t d = 0; d < D; d++) dst[d] = o[d] * inv;
            } else {
                const int64_t pr = u->part + row;
                a->part_m[pr]    = w->m[row];
                a->part_l[pr]    = w->l[row];
                memcpy(a->part_o + pr * D, o, sizeof(float) * (size_t)D);
            }
        }
}

#define LC_ATTN_Q_BLOCK 64 /* query rows per prefill unit */

/* How many key-range splits a sequence's attention gets: 0 = none (its rows go in query
 * blocks over the whole key range); otherwise a short row set (decode) over a long history is
 * split so that every thread has work. */
static int64_t key_splits(const lc_attn_seq *sq, int32_t H, int32_t P, int n_threads) {
    const int64_t n_k = (int64_t)sq->pos0 + sq->n_rows;
    if (sq->n_rows >= LC_ATTN_Q_BLOCK || n_k < 4 * P) return 0;
    const int64_t splits = (2 * n_threads + H - 1) / H, max_splits = (n_k + P - 1) / P;
    return splits < max_splits ? splits : max_splits;
}

int lc_cpu_attn_dense(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                      const float *q, int32_t n_head, const lc_rope_table *rope, float scale,
                      float *out) {
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size;
    if (H <= 0 || n_head % H != 0 || D > 512 || D <= 0)
        return lc_fail(LC_ERR_INVALID_ARG, "attention: bad head layout (%d query heads, %d kv "
                       "heads, head dim %d)", n_head, H, D);
    const int32_t G = n_head / H;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif

    /* Build units: prefill rows in blocks; single-row (decode) sequences get their key range
     * split so that every thread has work. */
    int64_t n_units = 0, n_part_rows = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const int64_t splits = key_splits(&seqs[s], H, P, n_threads);
        if (splits == 0) {
            n_units += (int64_t)H * ((seqs[s].n_rows + LC_ATTN_Q_BLOCK - 1) / LC_ATTN_Q_BLOCK);
        } else {
            n_units += (int64_t)H * splits;
            n_part_rows += (int64_t)H * splits * seqs[s].n_rows * G;
        }
    }
    attn_unit *units  = lc_malloc(sizeof(attn_unit) * (size_t)n_units, "attention units");
    float     *part_m = lc_malloc(sizeof(float) * (size_t)(n_part_rows + 1), "attention partials");
    float     *part_l = lc_malloc(sizeof(float) * (size_t)(n_part_rows + 1), "attention partials");
    float     *part_o =
        lc_malloc(sizeof(float) * (size_t)(n_part_rows + 1) * (size_t)D, "attention partials");
    if (!units || !part_m || !part_l || !part_o) {
        free(units), free(part_m), free(part_l), free(part_o);
        return LC_ERR_NOMEM;
    }
    int64_t u = 0, pr = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const lc_attn_seq *sq  = &seqs[s];
        const int32_t      n_k    = sq->pos0 + sq->n_rows;
        const int64_t      splits = key_splits(sq, H, P, n_threads);
        if (splits == 0) {
            for (int32_t g = 0; g < H; g++)
                for (int32_t r0 = 0; r0 < sq->n_rows; r0 += LC_ATTN_Q_BLOCK) {
                    const int32_t r1 =
                        r0 + LC_ATTN_Q_BLOCK < sq->n_rows ? r0 + LC_ATTN_Q_BLOCK : sq->n_rows;
                    units[u++] = (attn_unit){s, g, r0, r1, 0, n_k, -1};
                }
        } else {
            /* split boundaries on page multiples */
            const int64_t pages_per = ((n_k + P - 1) / P + splits - 1) / splits;
            for (int32_t g = 0; g < H; g++)
                for (int64_t sp = 0; sp < splits; sp++) {
                    int64_t k0 = sp * pages_per * P, k1 = k0 + pages_per * P;
                    if (k1 > n_k) k1 = n_k;
                    if (k0 > n_k) k0 = n_k;
                    units[u++] = (attn_unit){s, g, 0, sq->n_rows, (int32_t)k0, (int32_t)k1, pr};
                    pr += (int64_t)sq->n_rows * G;
                }
        }
    }

    attn_args args = {kv, seqs, q, rope, out, part_m, part_l, part_o, n_head, G, scale};
    int       failed = 0;
#pragma omp parallel
    {
        const int32_t cap = LC_ATTN_Q_BLOCK * G;
        attn_scratch  w;
        w.qm = malloc(sizeof(float) * (size_t)cap * (size_t)D);
        w.qr = malloc(sizeof(float) * (size_t)G * (size_t)D);
        w.kr = malloc(sizeof(float) * (size_t)P * (size_t)D);
        w.s  = malloc(sizeof(float) * (size_t)cap * (size_t)P);
        w.m  = malloc(sizeof(float) * (size_t)cap);
        w.l  = malloc(sizeof(float) * (size_t)cap);
        w.o  = malloc(sizeof(float) * (size_t)cap * (size_t)D);
        if (!w.qm || !w.qr || !w.kr || !w.s || !w.m || !w.l || !w.o) {
#pragma omp atomic write
            failed = 1;
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t i = 0; i < n_units; i++) attn_run_unit(&args, &units[i], &w);
        }
        free(w.qm), free(w.qr), free(w.kr), free(w.s), free(w.m), free(w.l), free(w.o);
    }

    /* merge split-K partials */
    for (int64_t i = 0; i < n_units && !failed;) {
        if (units[i].part < 0) {
            i++;
            continue;
        }
        const attn_unit   *first = &units[i];
        const lc_attn_seq *sq    = &seqs[first->seq];
        int64_t            j     = i;
        while (j < n_units && units[j].part >= 0 && units[j].seq == first->seq &&
               units[j].g == first->g)
            j++;
        const int32_t M = sq->n_rows * G;
        for (int32_t row = 0; row < M; row++) {
            float mx = -INFINITY;
            for (int64_t k = i; k < j; k++) {
                const float m = part_m[units[k].part + row];
                mx            = m > mx ? m : mx;
            }
            float  l = 0.0f;
            float *dst =
                out + ((int64_t)(sq->row0 + row / G) * n_head + first->g * G + row % G) * D;
            for (int32_t d = 0; d < D; d++) dst[d] = 0.0f;
            for (int64_t k = i; k < j; k++) {
                const int64_t p = units[k].part + row;
                if (part_l[p] == 0.0f) continue;
                const float c = expf(part_m[p] - mx);
                l += part_l[p] * c;
                for (int32_t d = 0; d < D; d++) dst[d] += part_o[p * D + d] * c;
            }
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            for (int32_t d = 0; d < D; d++) dst[d] *= inv;
        }
        i = j;
    }
    free(units), free(part_m), free(part_l), free(part_o);
    return failed ? lc_fail(LC_ERR_NOMEM, "attention: out of memory for worker scratch") : LC_OK;
}
