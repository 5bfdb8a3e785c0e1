/*
 * kv_args.c — the argument checks of the KV read-back op (kv_read) and the slab copy op
 * (copy_slabs; contracts in backend.h) that the CPU twin and the CUDA op share, so both refuse
 * the same calls with the same message.
 */
#include "backend/backend.h"
#include "util/util.h"

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
