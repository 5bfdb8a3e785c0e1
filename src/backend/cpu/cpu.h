/*
 * cpu.h — the CPU backend's operations (the reference twins of the CUDA ops). Contracts are
 * those of struct lc_backend in backend/backend.h; these take plain host pointers.
 */
#ifndef LC_CPU_H
#define LC_CPU_H

#include "backend/backend.h"

int lc_cpu_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out);
int lc_cpu_rmsnorm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim,
                   float eps);
int lc_cpu_matmul(const lc_weight *w, const float *x, float *y, int64_t n_rows);
/* The same product with, for Q4_0, Q4_1, Q8_0, Q4_K or Q6_K weights on a CPU with AVX-512
 * VNNI, the input rows (decode and prompt) quantised to int8 per 32 values and integer dots
 * (llama.cpp's arithmetic: not f32's values); anything else as lc_cpu_matmul. */
int lc_cpu_matmul_q8(const lc_weight *w, const float *x, float *y, int64_t n_rows);
int lc_cpu_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim);
int lc_cpu_rope(float *x, const int32_t *pos, int64_t n_rows, int32_t n_heads, int32_t head_dim,
                const lc_rope_table *rope);
int lc_cpu_silu_mul(const float *gate, const float *up, float *out, int64_t n);
int lc_cpu_add(float *x, const float *y, int64_t n);
/* copy_slabs (backend.h): the twin of the CUDA slab copy kernel (tiered_memory.cu). */
int lc_cpu_copy_slabs(const void *src, void *dst, const lc_slab_copy *copies, int32_t n,
                      size_t slab_bytes);
int lc_cpu_kv_write(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                    const float *k, const float *v);
/* kv_read (cpu_kv_read.c) for a pool of kv_type elements (LC_TYPE_F32, F16 or BF16; the CPU
 * backend's op passes its own kv_type). */
int lc_cpu_kv_read(const lc_kv_layer_view *kv, uint32_t kv_type, const int32_t *page_table,
                   int64_t pos0, int64_t n_rows, int32_t part, float *out);
int lc_cpu_attn_dense(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                      const float *q, int32_t n_head, const lc_rope_table *rope, float scale,
                      float *out);
/* InfiniteHiP (backend/backend.h): cpu_prune_chunks.c and cpu_attn_segments.c */
int lc_cpu_prune_chunks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                     const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                     const lc_rope_table *rope, const lc_prune_chunks_args *a);
int lc_cpu_attn_segments(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q, int32_t n_head,
                       const lc_rope_table *rope, float scale, const lc_attn_segments_args *a,
                       float *out);
/* TokenSelect (cpu_select_tokens.c) and HiP (cpu_select_blocks.c) selections (backend/backend.h) */
int lc_cpu_select_tokens(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                     const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                     const lc_rope_table *rope, const lc_select_tokens_args *a);
int lc_cpu_select_blocks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                    const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                    const lc_rope_table *rope, const lc_select_blocks_args *a);
int lc_cpu_sample(const float *logits, int64_t ld, int32_t n_rows, int32_t n_vocab,
                  const lc_sample_row *rows, const int32_t *pen_tokens, int32_t *ids);

/* fp32 -> fp16 (round to nearest even) over n elements. */
void lc_cpu_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);

/* Rotate the first n_rot dims of one head vector by position pos, in place (helper shared by
 * rope and attention). */
void lc_cpu_rope_vec(float *x, int32_t pos, const lc_rope_table *rope);
/* y[head_dim] = x rotated by position pos (dims past n_rot copied); x and y may be equal. */
void lc_cpu_rope_copy(const float *x, float *y, int32_t head_dim, int32_t pos,
                      const lc_rope_table *rope);

/* C[M][N] (ldc) += A[M][K] (lda) · B[K][N] (ldb): BLAS for 8 rows and more, plain loops below
 * (the few rows of a decode step). Dense and sparse attention's P·V (cpu_attention.c). */
void lc_cpu_gemm_nn_acc(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc);

#endif
