/*
 * gguf_write.h — an internal streaming GGUF v3 writer (spec/ecosystem-and-style.md §1.2):
 * collect metadata and tensor declarations, write the header and tensor infos (alignment 32,
 * offsets = running sum of padded sizes, in declaration order), then stream each tensor's
 * data in declaration order, so a model larger than memory never sits in memory.
 *
 * Use: lc_gguf_writer_open → lc_gguf_writer_add_* / lc_gguf_writer_add_tensor →
 * lc_gguf_writer_begin_data → lc_gguf_writer_write_{f32,raw} for each tensor in order →
 * lc_gguf_writer_close. After any failure call lc_gguf_writer_abort (removes the partial
 * file when it is a regular file we created). Every error is recorded with lc_fail and names
 * the path and what failed (a full disk is LC_ERR_IO).
 */
#ifndef LC_GGUF_WRITE_H
#define LC_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lc_gguf_writer lc_gguf_writer;

int lc_gguf_writer_open(const char *path, lc_gguf_writer **out);

/* Metadata (before lc_gguf_writer_begin_data). Keys must be unique. */
int lc_gguf_writer_add_u32(lc_gguf_writer *w, const char *key, uint32_t v);
int lc_gguf_writer_add_i32(lc_gguf_writer *w, const char *key, int32_t v);
int lc_gguf_writer_add_f32(lc_gguf_writer *w, const char *key, float v);
int lc_gguf_writer_add_bool(lc_gguf_writer *w, const char *key, bool v);
int lc_gguf_writer_add_str(lc_gguf_writer *w, const char *key, const char *v);
/* strs[i] with lengths lens[i] (lens NULL: NUL-terminated). */
int lc_gguf_writer_add_arr_str(lc_gguf_writer *w, const char *key, const char *const *strs,
                               const size_t *lens, uint64_t n);
int lc_gguf_writer_add_arr_i32(lc_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
int lc_gguf_writer_add_arr_f32(lc_gguf_writer *w, const char *key, const float *v, uint64_t n);

/* Declare a tensor: ne in ggml order (ne[0] = row length), type an lc_type id
 * (src/format/quant.h). ne[0] must be a multiple of the type's block size. */
int lc_gguf_writer_add_tensor(lc_gguf_writer *w, const char *name, uint32_t n_dims,
                              const uint64_t *ne, uint32_t type);

/* Write the header, metadata, tensor infos and the padding before the data section. */
int lc_gguf_writer_begin_data(lc_gguf_writer *w);

/* Append n fp32 values to the current tensor, converted to its type (F32, F16, BF16, or
 * a block type lc_quantize writes);
 * n must be a multiple of the block size. When a tensor is complete, the padding is written
 * and the next declared tensor becomes current. */
int lc_gguf_writer_write_f32(lc_gguf_writer *w, const float *x, size_t n);
/* Append raw bytes (already in the tensor's type) to the current tensor. */
int lc_gguf_writer_write_raw(lc_gguf_writer *w, const void *data, size_t n);

/* Index of the current tensor (== number of complete tensors), and the count declared. */
int64_t lc_gguf_writer_tensor_index(const lc_gguf_writer *w);
int64_t lc_gguf_writer_n_tensors(const lc_gguf_writer *w);

/* Check every tensor is complete, flush and close. Frees w in every case; on failure the
 * partial file is removed. */
int lc_gguf_writer_close(lc_gguf_writer *w);
/* Close without finishing; removes the partial file. NULL is a no-op. */
void lc_gguf_writer_abort(lc_gguf_writer *w);

#endif
