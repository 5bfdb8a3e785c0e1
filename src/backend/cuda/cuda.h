/*
 * cuda.h — plain C declarations of the CUDA backend's ops (twins of backend/cpu/cpu.h, same
 * contracts, device pointers). Nothing outside backend/cuda includes a CUDA header.
 * Where a kernel's grid is sized on the host without reading device-side sequences, the op
 * takes the launch shape as extra arguments (lc_cuda_kv_write's max_rows, the attention
 * batch descriptor). The CUDA KV pools hold fp16 (lc_kv16); weight matrices bf16 or f16.
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
/* kv_read (twin of lc_cpu_kv_read, same arguments): page_table and out in device memory; a
 * pool of kv_type elements (the backend passes its own, fp16; f32 and bf16 for tests). */
int lc_cuda_kv_read(const lc_kv_layer_view *kv, uint32_t kv_type, const int32_t *page_table,
                    int64_t pos0, int64_t n_rows, int32_t part, float *out);
/* Dense causal attention (twin of lc_cpu_attn_dense). The batch's sequences are split into
 * decode sequences (one new row: split-KV kernel + merge) and prefill sequences (any rows:
 * tensor-core tiles); all arrays device-side. */
typedef struct lc_cuda_attn_batch {
    const lc_attn_seq *seqs;         /* [n_seqs] with device page tables */
    const int32_t     *dec;          /* indices of the sequences with n_rows == 1 */
    int32_t            n_dec;
    int32_t            n_splits;     /* key splits of the decode kernel (lc_cuda_attn_splits) */
    float             *part;         /* n_dec * n_head * n_splits * (head_dim + 2) floats */
    const int32_t     *pre;          /* indices of the other sequences */
    int32_t            n_pre;
    int32_t            max_pre_rows; /* >= every prefill sequence's n_rows */
    int64_t            pre_tiles;    /* key pages (64 keys) of the prefill sequences, summed */
    void              *scratch;      /* lc_cuda_attn_prefill_scratch_bytes, when n_pre > 0 */
    bool               prefill_mma;  /* the mma.sync prefill kernel even where the wgmma one
                                        runs (lc_tuning.prefill_mma) */
    bool               decode_direct; /* the direct decode kernel (lc_tuning.dense_decode_direct) */
} lc_cuda_attn_batch;
/* Key splits of the decode kernel (direct: the direct one) for n_dec sequences of up to max_keys
   keys: one wave of its CTAs (how many fit an SM depends on the kernel, the pools' layout and
   the head dim). */
int lc_cuda_attn_splits(const lc_kv_layer_view *kv, int32_t n_head, int32_t n_dec, int64_t max_keys,
                        bool direct);
/* Bytes of the prefill scratch (the prefill sequences' keys rotated to fp16, and their values
 * in fp16) for pre_tiles key pages. */
size_t lc_cuda_attn_prefill_scratch_bytes(const lc_kv_layer_view *kv, int64_t pre_tiles);
int lc_cuda_attn_dense(const lc_kv_layer_view *kv, const lc_cuda_attn_batch *bt, const float *q,
                       int32_t n_head, const lc_rope_table *rope, float scale, float *out);

/* InfiniteHiP (twins of lc_cpu_prune_chunks / lc_cpu_attn_segments; backend/backend.h): seqs,
 * qb and every array in the args in device memory; the args struct itself on the host.
 * tune: the backend's kernel choices (lc_tuning; not NULL).
 * scratch: device memory of at least the matching *_scratch_bytes (may be 0 bytes / NULL).
 * rot (NULL: none): with plain RoPE in a prefill-sized call, the op first rotates the keys of
 * the sequences listed in rot->pre — those with n_rows > 1 — into fp16 64-token tiles at rot->k,
 * laid out as the dense prefill's scratch (tile t of the z-th listed sequence is tile base_z + t,
 * [tiles][n_kv_head][64][D], 128-byte swizzled), unless rot->filled says an earlier op of the
 * same batch and layer already did; its kernels then read those instead of rotating keys per
 * probe / per gathered tile (values are read from the pages as they are); blocks of other
 * sequences take the usual path. Size: rot->tiles tiles of n_kv_head * 64 * head_dim fp16. */
typedef struct lc_cuda_rot_tiles {
    void          *k;
    const int32_t *pre;    /* device: indices of the rotated sequences */
    int32_t        n_pre;
    int32_t        filled; /* the tiles already hold these keys: no rotation */
    int64_t        tiles;  /* sum over them of ceil((pos0 + n_rows) / 64) */
} lc_cuda_rot_tiles;
/* Fill rot's tiles (nothing when rot->filled) on the backend's stream. */
int    lc_cuda_rotate_keys(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                          const lc_rope_table *rope, const lc_cuda_rot_tiles *rot);
size_t lc_cuda_prune_chunks_scratch_bytes(int32_t n_qb, int32_t n_head, const lc_prune_chunks_args *a);
int    lc_cuda_prune_chunks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                         const lc_rope_table *rope, const lc_prune_chunks_args *a,
                         const lc_cuda_rot_tiles *rot, const lc_tuning *tune, void *scratch,
                         size_t scratch_bytes);
size_t lc_cuda_attn_segments_scratch_bytes(int32_t n_qb, int32_t n_head,
                                         const lc_attn_segments_args *a, const lc_tuning *tune);
int    lc_cuda_attn_segments(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                           const lc_qblock *qb, int32_t n_qb, const float *q, int32_t n_head,
                           const lc_rope_table *rope, float scale, const lc_attn_segments_args *a,
                           const lc_cuda_rot_tiles *rot, const lc_tuning *tune, void *scratch,
                           size_t scratch_bytes, float *out);

/* TokenSelect and HiP selections (twins of lc_cpu_select_tokens / lc_cpu_select_blocks;
 * backend/backend.h): seqs, qb and every array in the args in device memory, the args struct on
 * the host; scratch of at least the matching *_scratch_bytes (select_tokens.cu, select_blocks.cu); tune
 * as above. */
size_t lc_cuda_select_tokens_scratch_bytes(const lc_kv_layer_view *kv, int32_t n_qb, int32_t n_head,
                                       const lc_select_tokens_args *a, const lc_tuning *tune);
int    lc_cuda_select_tokens(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                         const lc_rope_table *rope, const lc_select_tokens_args *a,
                         const lc_tuning *tune, void *scratch, size_t scratch_bytes);
size_t lc_cuda_select_blocks_scratch_bytes(const lc_kv_layer_view *kv, int32_t n_qb, int32_t n_head,
                                      const lc_select_blocks_args *a);
int    lc_cuda_select_blocks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                        const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                        const lc_rope_table *rope, const lc_select_blocks_args *a, void *scratch,
                        size_t scratch_bytes);

/* Weights: GGUF tensor -> 16-bit [rows][cols] on the device (out_type LC_TYPE_BF16 or
 * LC_TYPE_F16), through a device staging buffer. */
int lc_cuda_dequant16(uint32_t type, const void *src_dev, int64_t n, uint32_t out_type,
                      void *dst_dev);
int lc_cuda_weight_upload16(const lc_gguf_tensor *t, int64_t rows, int64_t cols,
                            uint32_t out_type, void *dst, void *staging, size_t staging_bytes);
int lc_cuda_f32_to_16(const float *x, uint32_t type, void *y, int64_t n);

/* cuBLASLt GEMM: y[n][m] (fp32, rows ldy floats apart, ldy >= m) = x[n][k] · W[m][k]ᵀ with x and
 * W of one 16-bit type (bf16 or f16), fp32 accumulation; plans cached per shape. */
typedef struct lc_cuda_gemm lc_cuda_gemm;
int  lc_cuda_gemm_create(lc_cuda_gemm **out);
void lc_cuda_gemm_free(lc_cuda_gemm *g);
int  lc_cuda_gemm16(lc_cuda_gemm *g, uint32_t type, const void *w, int64_t m, int64_t k,
                    const void *x, int64_t n, float *y, int64_t ldy);

/* Decode GEMV: y[n][m] (fp32) = x[n][k] (fp32) · W[m][k]ᵀ (W bf16 or f16), fp32 sums, for
 * 1..LC_CUDA_GEMV_MAX_ROWS rows; lc_cuda_gemv_fits says whether the shapes and alignment allow
 * it (k a multiple of 8, 16-byte aligned W and x); the backend's matmul uses it then, unless
 * tuning.no_gemv. */
#define LC_CUDA_GEMV_MAX_ROWS 4
bool lc_cuda_gemv_fits(int64_t k, int64_t n, const void *w, const float *x);
int  lc_cuda_gemv16(uint32_t type, const void *w, int64_t m, int64_t k, const float *x, int64_t n,
                    float *y);

/* Weights in their GGUF block type (weights_blocks.cu; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
 * Q5_K, Q6_K): W[m] rows of lc_cuda_blocks_row_bytes(type, k) bytes each, the file's bytes.
 * lc_cuda_blocks_type: whether the GPU computes with the type; row_bytes 0 where it does not
 * (or k is not whole blocks).
 * gemv_blocks: y[n][m] = x[n][k] · Wᵀ for 1..LC_CUDA_GEMV_BLOCKS_MAX_ROWS fp32 rows (x 16-byte
 * aligned), fp32 sums of the weights' exact values; Q4_K on tensor cores, the inputs split into
 * two f16 values (22 bits; |x| below 65504) in a device scratch of
 * lc_cuda_gemv_blocks_scratch_bytes (0: none needed; 16-byte aligned).
 * dequant_blocks: dst[rows][k] (out_type f16, bf16 or f32) = the rows' values.
 * embed_blocks: out[i][cols] = row ids[i] of a block-type table (zeros outside it). */
#define LC_CUDA_GEMV_BLOCKS_MAX_ROWS 4
bool    lc_cuda_blocks_type(uint32_t type);
int64_t lc_cuda_blocks_row_bytes(uint32_t type, int64_t k);
size_t  lc_cuda_gemv_blocks_scratch_bytes(uint32_t type, int64_t n, int64_t k);
int     lc_cuda_gemv_blocks(uint32_t type, const void *w, int64_t m, int64_t k, const float *x,
                            int64_t n, float *y, void *scratch, size_t scratch_bytes);
int     lc_cuda_dequant_blocks(uint32_t type, const void *w, int64_t rows, int64_t k,
                               uint32_t out_type, void *dst);
int     lc_cuda_embed_blocks(const lc_weight *table, const int32_t *ids, int64_t n_rows, float *out);

/* Sampling (twin of lc_cpu_sample; backend/backend.h): rows, pen_tokens and ids in device
 * memory; scratch: device memory of lc_cuda_sample_scratch_bytes(n_rows, n_vocab) bytes (or
 * more). The launch shape depends on n_rows and n_vocab only (graph-capturable). */
size_t lc_cuda_sample_scratch_bytes(int32_t n_rows, int32_t n_vocab);
int    lc_cuda_sample(const float *logits, int64_t ld, int32_t n_rows, int32_t n_vocab,
                      const lc_sample_row *rows, const int32_t *pen_tokens, int32_t *ids,
                      void *scratch, size_t scratch_bytes);

/* (tiered_memory.cu) The KV cache's host tier: a range with dev_bytes of device memory and
 * host_bytes of pinned host memory behind it (backend.h alloc_tiered); the mapping granularity
 * (0: the device cannot map host memory through the virtual memory API); the slab copy op. */
size_t lc_cuda_tier_align(int device);
void  *lc_cuda_alloc_tiered(int device, size_t dev_bytes, size_t host_bytes, const char *what);
void   lc_cuda_dealloc_tiered(void *p);
int    lc_cuda_copy_slabs(const void *src, void *dst, const lc_slab_copy *copies, int32_t n,
                          size_t slab_bytes);

/* The cudaStream_t the ops run on (for timing with events from C). */
void *lc_cuda_stream_handle(void);

/* Wait for the device and report the first error (for tests). */
int lc_cuda_sync(void);

/* (device_info.cu) The current device's name and memory; events on the backend's stream for
 * timing ops (the backend's timer marks, backend.h "Measurement"). */
int  lc_cuda_device_info(char *name, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes);
int  lc_cuda_events_create(void **ev, int n);
void lc_cuda_events_destroy(void **ev, int n);
int  lc_cuda_event_record(void *ev);
int  lc_cuda_event_ms(void *start, void *end, float *ms);

#ifdef __cplusplus
}
#endif
#endif
