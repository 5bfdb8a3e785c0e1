/*
 * cpu_simd.h — the CPU backend's vector kernels for the weight products (cpu_matmul.c), chosen
 * at run time: cpu_simd_avx512.c is compiled with AVX-512 flags on x86-64 whatever the build's
 * own flags (the sanitizer and portable builds included), and cpu_matmul.c calls it only when
 * the CPU reports AVX-512 F/BW/VL/DQ (lc_cpu_simd_avx512). Without it the scalar code of
 * cpu_matmul.c and format/quant.c runs: the same values (dequantisers bit-identical), slower.
 */
#ifndef LC_CPU_SIMD_H
#define LC_CPU_SIMD_H

#include <stdbool.h>
#include <stdint.h>

#define LC_QDOT_MAX_ROWS 4 /* input rows one fused decode product takes at a time */

/* true when the AVX-512 kernels are built in and this CPU runs them (detected once) */
bool lc_cpu_simd_avx512(void);
/* Tests: true runs the scalar code from now on even where AVX-512 is there; false detects
 * again. Process-wide; not for use while products run on other threads. */
void lc_cpu_simd_force_scalar(bool scalar);

#if defined(LC_HAVE_AVX512_KERNELS)
void  lc_avx512_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);
void  lc_avx512_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
float lc_avx512_dot_f16(const uint16_t *w, const float *x, int64_t n);
float lc_avx512_dot_f32(const float *w, const float *x, int64_t n);
/* One row of n values of a block type as fp32, bit-identical to lc_dequantize: Q4_0, Q4_1,
 * Q4_K, Q6_K (false for any other type: the caller uses lc_dequantize). */
bool lc_avx512_dequant_row(uint32_t type, const uint8_t *src, float *dst, int64_t n);
/* Whether lc_avx512_qdot has a kernel for the type: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
 * Q6_K. */
bool lc_avx512_qdot_type(uint32_t type);
/* Fused dequantise-and-dot of one weight row w (K values, K a multiple of 32; 256 for the K
 * types) with n (1..LC_QDOT_MAX_ROWS) input rows x[n][K]: out[r] = Σ w·x[r], fp32
 * accumulation. xs[n][K/32] holds the sums of each 32 consecutive elements of x (the block
 * minimum and offset terms go through them). */
void lc_avx512_qdot(uint32_t type, const uint8_t *w, const float *x, const float *xs, int64_t K,
                    int n, float *out);
#endif

/* true when the VNNI kernels are built in and this CPU runs them (AVX-512 F/BW/VL/DQ + VNNI) */
bool lc_cpu_simd_vnni(void);

#if defined(LC_HAVE_VNNI_KERNELS)
/* Whether lc_vnni_qdot has a kernel for the type: Q4_0, Q4_1, Q8_0, Q4_K, Q6_K. */
bool lc_vnni_qdot_type(uint32_t type);
/* One input row of K values (a multiple of 32) to int8 per 32 values: xq[K], the scales
 * xd[K/32] (max|x|/127; a value is xq·xd), the integer sums of each 16 values xs16[K/16]. */
void lc_vnni_quantize_row(const float *x, int64_t K, int8_t *xq, float *xd, int32_t *xs16);
/* out[r] = Σ w·(xq·xd)[r] over one weight row w for n (1..LC_QDOT_MAX_ROWS) quantised input
 * rows (each row's arrays at r·K, r·K/32, r·K/16, r·K/32; xs32: the integer sums of each 32
 * values as floats). */
void lc_vnni_qdot(uint32_t type, const uint8_t *w, const int8_t *xq, const float *xd,
                  const int32_t *xs16, const float *xs32, int64_t K, int n_rows, float *out);
#endif

#endif
