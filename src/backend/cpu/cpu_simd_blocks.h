/*
 * cpu_simd_blocks.h — what the CPU vector kernels (cpu_simd_avx512.c, cpu_simd_vnni.c) read
 * the same way from GGUF blocks: an fp16 field, the packed 6-bit scales and minimums of a
 * q4_K/q5_K block, and the dispatch that makes the input-row count a constant in each kernel
 * call. Plain C: included by files compiled with different target flags.
 */
#ifndef LC_CPU_SIMD_BLOCKS_H
#define LC_CPU_SIMD_BLOCKS_H

#include "format/quant.h"

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

/* the fp16 at p (little-endian) as fp32: one F16C instruction where the file is compiled for it
 * (the vector kernels: the conversion is exact, so the same value as lc_fp16_to_fp32, which
 * the kernels called once or twice a block before, bench/NOTES.md 66) */
static inline float lc_block_half(const uint8_t *p) {
#if defined(__F16C__)
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
#else
    return lc_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
#endif
}

/* All 8 scales and minimums of a q4_K/q5_K block (12 bytes at s), four bytes at a time (the
 * values of format/quant.c's scale_min_k4): words A, B, C = bytes 0-3, 4-7, 8-11; scales 0-3 =
 * A & 63, minimums 0-3 = B & 63, scales 4-7 = (C & 15) | (A >> 6) << 4, minimums 4-7 =
 * (C >> 4) | (B >> 6) << 4, each per byte. */
static inline void lc_block_k4_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t A, B, C;
    memcpy(&A, s, 4), memcpy(&B, s + 4, 4), memcpy(&C, s + 8, 4);
    const uint32_t v[4] = {A & 0x3f3f3f3fu, (C & 0x0f0f0f0fu) | (((A >> 6) & 0x03030303u) << 4),
                           B & 0x3f3f3f3fu,
                           ((C >> 4) & 0x0f0f0f0fu) | (((B >> 6) & 0x03030303u) << 4)};
    memcpy(sc, v, 8), memcpy(mn, v + 2, 8);
}

/* CALL with `const int n` = n_rows (1..4) a constant, so a kernel's per-row accumulators stay
 * in registers */
#define LC_QDOT_FOR_ROWS(n_rows, CALL)                                                        \
    switch (n_rows) {                                                                         \
    case 1: { const int n = 1; CALL; } break;                                                 \
    case 2: { const int n = 2; CALL; } break;                                                 \
    case 3: { const int n = 3; CALL; } break;                                                 \
    default: { const int n = 4; CALL; } break;                                                \
    }

#endif
