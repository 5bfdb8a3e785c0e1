/*
 * quant.h — ggml tensor types: ids, block sizes, and dequantisation to fp32 (the layouts of
 * ggml's ggml-common.h; see spec/ecosystem-and-style.md §1.3). Plain C, shared by the CPU
 * backend and (through the same byte layouts) the CUDA dequantisers.
 */
#ifndef LC_QUANT_H
#define LC_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum lc_type {
    LC_TYPE_F32  = 0,
    LC_TYPE_F16  = 1,
    LC_TYPE_Q4_0 = 2,
    LC_TYPE_Q4_1 = 3,
    LC_TYPE_Q5_0 = 6,
    LC_TYPE_Q5_1 = 7,
    LC_TYPE_Q8_0 = 8,
    LC_TYPE_Q8_1 = 9,
    LC_TYPE_Q2_K = 10,
    LC_TYPE_Q3_K = 11,
    LC_TYPE_Q4_K = 12,
    LC_TYPE_Q5_K = 13,
    LC_TYPE_Q6_K = 14,
    LC_TYPE_Q8_K = 15,
    LC_TYPE_I8   = 24,
    LC_TYPE_I16  = 25,
    LC_TYPE_I32  = 26,
    LC_TYPE_I64  = 27,
    LC_TYPE_F64  = 28,
    LC_TYPE_BF16 = 30,
    LC_TYPE_COUNT = 43, /* ids >= this are unknown */
};

typedef void (*lc_to_float_fn)(const void *src, float *dst, int64_t n);

typedef struct lc_type_traits {
    const char    *name;       /* "q4_1" */
    int64_t        blck_size;  /* elements per block */
    size_t         type_size;  /* bytes per block */
    lc_to_float_fn to_float;   /* NULL: we cannot dequantise this type */
} lc_type_traits;

/* Traits of a type id, NULL for ids ggml does not define (removed or out of range). A known
 * id whose to_float is NULL is a type we read the size of but cannot compute with. */
const lc_type_traits *lc_type_traits_get(uint32_t type);

/* Bytes of a row of n elements; false if n is not a multiple of the block size, the type is
 * unknown, or it overflows. */
bool lc_type_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

/* Dequantise n elements (a multiple of the block size) from src into dst. Returns LC_OK or
 * LC_ERR_UNSUPPORTED / LC_ERR_INVALID_ARG (recorded with lc_fail). */
int lc_dequantize(uint32_t type, const void *src, float *dst, int64_t n);

float    lc_fp16_to_fp32(uint16_t h);
uint16_t lc_fp32_to_fp16(float f);
float    lc_bf16_to_fp32(uint16_t h);
uint16_t lc_fp32_to_bf16(float f); /* round to nearest even */

/* fp8 e4m3 (OCP "E4M3FN": 1 sign, 4 exponent bits biased by 7, 3 mantissa bits; no infinities,
 * 0x7f / 0xff are NaN, largest finite 448), the element of the fp8 KV cache (backend.h
 * "LC_KV_E4M3"). lc_fp32_to_e4m3 rounds to nearest even and saturates to +-448 (NaN gives 0x7f),
 * as CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE does. */
float   lc_e4m3_to_fp32(uint8_t c);
uint8_t lc_fp32_to_e4m3(float f);

#endif
