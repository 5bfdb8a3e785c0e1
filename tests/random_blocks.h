/*
 * random_blocks.h — random GGUF tensor bytes with sane scales, for the tests of the weight
 * paths (test_block_units, the op registry's dequant and block-weight entries): random bytes
 * everywhere, then each block's fp16 scale fields (d; m / dmin where the type has one) set to
 * small finite values, so every value dequantises to a finite number. F32 / F16 / BF16: random
 * values in [-1, 1).
 */
#ifndef LC_TEST_RANDOM_BLOCKS_H
#define LC_TEST_RANDOM_BLOCKS_H

#include "format/quant.h"
#include "test_util.h"

#include <string.h>

static inline void test_random_blocks(uint64_t *rng, uint32_t type, uint8_t *buf, int64_t n_elems) {
    const lc_type_traits *tr = lc_type_traits_get(type);
    const int64_t         nb = n_elems / tr->blck_size;
    for (int64_t i = 0; i < nb * (int64_t)tr->type_size; i++) buf[i] = (uint8_t)test_u32(rng);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = buf + b * tr->type_size;
        if (type == LC_TYPE_F32) {
            const float f = test_frand(rng);
            memcpy(blk, &f, 4);
        } else if (type == LC_TYPE_F16 || type == LC_TYPE_BF16) {
            const uint16_t h = type == LC_TYPE_F16 ? lc_fp32_to_fp16(test_frand(rng)) : lc_fp32_to_bf16(test_frand(rng));
            memcpy(blk, &h, 2);
        } else if (type == LC_TYPE_Q6_K) {
            const uint16_t d = lc_fp32_to_fp16(0.01f * test_frand(rng));
            memcpy(blk + 208, &d, 2);
        } else {
            const uint16_t d = lc_fp32_to_fp16(0.05f * test_frand(rng)), m = lc_fp32_to_fp16(0.1f * test_frand(rng));
            memcpy(blk, &d, 2);
            if (type == LC_TYPE_Q4_1 || type == LC_TYPE_Q5_1 || type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K)
                memcpy(blk + 2, &m, 2);
        }
    }
}

#endif
