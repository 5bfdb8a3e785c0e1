/*
 * gguf.h — internal view of a parsed GGUF file: typed metadata getters on top of the public
 * lc_gguf_* inspection API (include/longctx.h). The file stays mapped; tensor data and string
 * values point into the mapping. Format: spec/ecosystem-and-style.md §1.2.
 */
#ifndef LC_GGUF_H
#define LC_GGUF_H

#include "longctx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Typed getters. Return LC_OK, LC_ERR_NOT_FOUND when the key is absent (no error recorded,
 * so optional keys are cheap), or LC_ERR_FORMAT (recorded, naming the key and the type
 * found) when the value has an incompatible type.
 * Integer getters accept any integer type whose value fits the destination. */
int lc_gguf_get_u32(const lc_gguf *g, const char *key, uint32_t *out);
int lc_gguf_get_i32(const lc_gguf *g, const char *key, int32_t *out);
int lc_gguf_get_u64(const lc_gguf *g, const char *key, uint64_t *out);
/* Accepts f32 and f64. */
int lc_gguf_get_f32(const lc_gguf *g, const char *key, float *out);
int lc_gguf_get_bool(const lc_gguf *g, const char *key, bool *out);
/* Not NUL-terminated in the file: s points into the mapping, use len. */
int lc_gguf_get_str(const lc_gguf *g, const char *key, const char **s, size_t *len);

/* Arrays. lc_gguf_get_arr: element type and count of an array value.
 * lc_gguf_get_arr_data: pointer to the packed elements of a numeric array (may be unaligned:
 * read with memcpy). lc_gguf_get_arr_str: element i of a string array. */
int lc_gguf_get_arr(const lc_gguf *g, const char *key, lc_gguf_type *elem_type, uint64_t *n);
int lc_gguf_get_arr_data(const lc_gguf *g, const char *key, lc_gguf_type elem_type,
                         const void **data, uint64_t *n);
int lc_gguf_get_arr_str(const lc_gguf *g, const char *key, uint64_t i, const char **s,
                        size_t *len);

/* Name of a value type ("u32", "string", ...). */
const char *lc_gguf_type_name(lc_gguf_type t);

#endif
