/*
 * kv_args.c — the argument checks of the KV read-back op (kv_read) and the slab copy op
 * (copy_slabs; contracts in backend.h) that the CPU twin and the CUDA op share, so both refuse
 * the same calls with the same message; and the host's copy of the fp8 KV layout (slab size,
 * the value an element stands for, kv_write's quantisation: backend.h "LC_KV_E4M3", issue 23).
 */
#include "backend/backend.h"
#include "format/quant.h"
#include "util/util.h"

#include <math.h>
#include <stdint.h>

int lc_copy_slabs_check(const void *src, const void *dst, const lc_slab_copy *copies,
                        size_t slab_bytes) {
    if (!src || !dst || !copies || slab_bytes == 0 || slab_bytes % 16 ||
        ((uintptr_t)src | (uintptr_t)dst) % 16)
        return lc_fail(LC_ERR_INVALID_ARG, "copy_slabs: bad arguments (slab of %zu bytes, a "
                       "multiple of 16 on 16-byte aligned pools)", slab_bytes);
    return LC_OK;
}

int lc_kv_read_check(const lc_kv_layer_view *kv, const int32_t *page_table, int64_t pos0,
                     int64_t n_rows, int32_t part, const float *out) {
    if (!kv) return lc_fail(LC_ERR_INVALID_ARG, "kv_read: no KV view");
    if (kv->page_size < 1 || kv->n_kv_head < 1 || kv->head_dim < 1)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_read: bad KV shape (page %d, %d KV heads, dim %d)",
                       kv->page_size, kv->n_kv_head, kv->head_dim);
    if (part != LC_KV_KEYS && part != LC_KV_VALUES)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_read: part %d (LC_KV_KEYS 0 or LC_KV_VALUES 1)",
                       part);
    if (pos0 < 0 || n_rows < 0 || pos0 + n_rows > INT32_MAX)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_read: positions [%lld, %lld + %lld) (need pos0 "
                       ">= 0, n_rows >= 0, the end <= 2^31 - 1)", (long long)pos0,
                       (long long)pos0, (long long)n_rows);
    if (n_rows > 0 && (!page_table || !out || !(part == LC_KV_KEYS ? kv->k : kv->v)))
        return lc_fail(LC_ERR_INVALID_ARG, "kv_read: missing %s", !page_table ? "page table"
                       : !out ? "output" : part == LC_KV_KEYS ? "key pool" : "value pool");
    return LC_OK;
}

/* ---- the fp8 KV layout (backend.h "LC_KV_E4M3") ------------------------------------------ */

size_t lc_kv_slab_bytes(bool e4m3, uint32_t kv_type, int32_t page_size, int32_t head_dim) {
    const size_t elem = kv_type == LC_TYPE_BF16 || kv_type == LC_TYPE_F16 ? 2 : 4;
    return e4m3 ? (size_t)page_size * ((size_t)head_dim + sizeof(float))
                : (size_t)page_size * (size_t)head_dim * elem;
}

float lc_kv_e4m3_value(uint8_t code, float scale, float centre) {
    /* the kernels: code / 256 is exact in fp16, times fp16(256 s) plus fp16(centre) in one
     * fp16 FMA; in double the product and sum are exact, then one rounding to fp16 (through
     * fp32: a second rounding can differ from the FMA's only at an exact fp16 tie) */
    const double h = (double)lc_e4m3_to_fp32(code) / 256.0;
    const double s = lc_fp16_to_fp32(lc_fp32_to_fp16(scale * 256.0f));
    const double c = lc_fp16_to_fp32(lc_fp32_to_fp16(centre));
    return lc_fp16_to_fp32(lc_fp32_to_fp16((float)(h * s + c)));
}

float lc_kv_e4m3_quantize(const float *x, const float *centre, int32_t n, uint8_t *codes) {
    float amax = 0.0f;
    for (int32_t d = 0; d < n; d++) {
        const float c = centre ? lc_fp16_to_fp32(lc_fp32_to_fp16(centre[d])) : 0.0f;
        float       y = x[d] - c;
        y             = y > LC_KV_E4M3_MAX ? LC_KV_E4M3_MAX : y < -LC_KV_E4M3_MAX ? -LC_KV_E4M3_MAX : y;
        amax          = fabsf(y) > amax ? fabsf(y) : amax;
    }
    const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
    for (int32_t d = 0; d < n; d++) {
        const float c = centre ? lc_fp16_to_fp32(lc_fp32_to_fp16(centre[d])) : 0.0f;
        float       y = x[d] - c;
        y             = y > LC_KV_E4M3_MAX ? LC_KV_E4M3_MAX : y < -LC_KV_E4M3_MAX ? -LC_KV_E4M3_MAX : y;
        codes[d]      = lc_fp32_to_e4m3(y * inv);
    }
    return amax / 448.0f;
}

int lc_kv_plain_check(const lc_kv_layer_view *kv, const char *op, const char *backend) {
    if (kv && kv->e4m3)
        return lc_fail(LC_ERR_UNSUPPORTED, "%s (%s backend) reads fp16/fp32 KV pools, not the "
                       "fp8 layout (its kernels do not read e4m3 yet)", op, backend);
    return LC_OK;
}
