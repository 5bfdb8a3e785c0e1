/*
 * cuda.h — plain C declarations of the CUDA backend's ops (twins of backend/cpu/cpu.h, same
 * contracts, device pointers). Nothing outside backend/cuda includes a CUDA header.
 * The full forward on the GPU arrives with the CUDA backend issue; this file holds the ops
 * built so far. lc_cuda_kv_write takes one launch-shape argument its CPU twin does not need
 * (max_rows: the kernel grid is sized on the host without reading the device-side seqs).
 */
#ifndef LC_CUDA_H
#define LC_CUDA_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int lc_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim,
                    float eps);
int lc_cuda_silu_mul(const float *gate, const float *up, float *out, int64_t n);
int lc_cuda_add(float *x, const float *y, int64_t n);
int lc_cuda_add_bias(float *y, const float *bias, int64_t n_rows, int64_t dim);
int lc_cuda_embed(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out);
int lc_cuda_rope(float *x, const int32_t *pos, int64_t n_rows, int32_t n_heads, int32_t head_dim,
                 const lc_rope_table *rope);
/* seqs (and their page tables) in device memory; max_rows >= every seqs[i].n_rows. */
int lc_cuda_kv_write(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                     int32_t max_rows, const float *k, const float *v);
/* Wait for the device and report the first error (for tests). */
int lc_cuda_sync(void);

#ifdef __cplusplus
}
#endif
#endif
