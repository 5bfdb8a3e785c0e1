/*
 * quantize.h — fp32 to the ggml block types (the inverse of quant.h's dequantisers, the same
 * byte layouts): what `gen-model --type` writes, so that quantised-weight speed is measured at
 * real shapes (an 8B model) without a download (issue 23). Round-to-nearest with scales from
 * each block's range: simple and exact about its error bound, not llama.cpp's
 * error-minimising search, so a file written here is a valid GGUF of that type whose values
 * are close to, not as good as, a llama-quantize output of the same weights.
 */
#ifndef LC_QUANTIZE_H
#define LC_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

/* True for the types lc_quantize writes: q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K. */
bool lc_quantize_supported(uint32_t type);

/* Quantise n values (a multiple of the type's block size) from x into out (n / block_size
 * blocks of the type's size). Every value y the dequantiser reads back is within one step of
 * its block (or sub-block) of x (steps: quantize.c). LC_ERR_UNSUPPORTED for other types,
 * LC_ERR_INVALID_ARG for n not a whole number of blocks (recorded with lc_fail). */
int lc_quantize(uint32_t type, const float *x, void *out, int64_t n);

#endif
