/*
 * cpu_kv_read.c — the reference twin of op kv_read (backend.h): one sequence's stored keys or
 * values gathered out of its pages ([page][kv_head][page_size][head_dim], DESIGN.md "KV
 * pages") into rows [n_rows][n_kv_head][head_dim] of f32, converted from the pool's element
 * type (f32 copied, fp16 and bf16 widened exactly), or from the fp8 layout (backend.h
 * LC_KV_E4M3: lc_kv_e4m3_value).
 */
#include "backend/cpu/cpu.h"
#include "format/quant.h"
#include "util/util.h"

#include <string.h>

int lc_cpu_kv_read(const lc_kv_layer_view *kv, uint32_t kv_type, const int32_t *page_table,
                   int64_t pos0, int64_t n_rows, int32_t part, float *out) {
    int st = lc_kv_read_check(kv, page_table, pos0, n_rows, part, out);
    if (st != LC_OK) return st;
    if (kv->e4m3) { /* backend.h LC_KV_E4M3 */
        const int64_t        P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
        const size_t         sb   = lc_kv_slab_bytes(true, kv_type, (int32_t)P, (int32_t)D);
        const unsigned char *pool = part == LC_KV_KEYS ? kv->k : kv->v;
        const float         *cen  = part == LC_KV_KEYS ? kv->k_centre : NULL;
        for (int64_t r = 0; r < n_rows; r++) {
            const int64_t pos = pos0 + r, page = page_table[pos / P];
            for (int64_t h = 0; h < H; h++) {
                const unsigned char *slab = pool + (size_t)(page * H + h) * sb;
                float                scale;
                memcpy(&scale, slab + (size_t)(P * D) + sizeof(float) * (size_t)(pos % P), sizeof scale);
                for (int64_t i = 0; i < D; i++)
                    out[(r * H + h) * D + i] = lc_kv_e4m3_value(slab[(pos % P) * D + i], scale,
                                                                cen ? cen[h * D + i] : 0.0f);
            }
        }
        return LC_OK;
    }
    if (kv_type != LC_TYPE_F32 && kv_type != LC_TYPE_F16 && kv_type != LC_TYPE_BF16)
        return lc_fail(LC_ERR_UNSUPPORTED, "kv_read: KV element type %u (f32, f16 or bf16)",
                       kv_type);
    const int64_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim;
    const void   *pool = part == LC_KV_KEYS ? kv->k : kv->v;
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t pos = pos0 + r, page = page_table[pos / P];
        for (int64_t h = 0; h < H; h++) {
            const int64_t src = ((page * H + h) * P + pos % P) * D;
            float        *dst = out + (r * H + h) * D;
            if (kv_type == LC_TYPE_F32) {
                memcpy(dst, (const float *)pool + src, sizeof(float) * (size_t)D);
            } else {
                const uint16_t *s = (const uint16_t *)pool + src;
                for (int64_t i = 0; i < D; i++)
                    dst[i] = kv_type == LC_TYPE_F16 ? lc_fp16_to_fp32(s[i]) : lc_bf16_to_fp32(s[i]);
            }
        }
    }
    return LC_OK;
}
