/*
 * test_kv_read_cuda.c — the CUDA op kv_read (lc_cuda_kv_read, rope_embed_kv.cu) against its
 * CPU twin lc_cpu_kv_read (contract: backend/backend.h):
 *   1. f32, fp16 and bf16 pools built on the host and uploaded: every position range of
 *      kv_read_world.h, keys and values, bit for bit the twin's rows (widening is exact);
 *   2. through the backend: rows written with its kv_write (fp16 pools, its page size) and
 *      read back with its kv_read equal the twin's read of the downloaded pools, and the
 *      written values to fp16 rounding;
 *   3. the shared argument checks refuse what the twin refuses.
 * Skips (77) without a GPU.
 */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "longctx.h"
#include "test_util.h"
#include "util/util.h"

#include "kv_read_world.h"

#include <stdio.h>
#include <string.h>

static const uint32_t k_types[] = {LC_TYPE_F32, LC_TYPE_F16, LC_TYPE_BF16};

/* device copy of n bytes of host memory (NULL: failed) */
static void *to_device(lc_backend *b, const void *src, size_t n, const char *what) {
    void *d = b->alloc(b, n, what);
    if (d && b->upload(b, d, src, n) != LC_OK) {
        b->dealloc(b, d);
        return NULL;
    }
    return d;
}

/* Read every case on the device (read: the backend op or the twin) and on the host twin over
 * the same pools; compare bit for bit. kd/vd: device pools, kh/vh: host copies. */
static void compare_reads(lc_backend *b, const kv_world *w, uint32_t type, bool through_op,
                          const void *kd, const void *vd, const void *kh, const void *vh,
                          const int32_t *table_d) {
    const size_t row = (size_t)w->H * (size_t)w->D, cap = row * (size_t)w->n_pos;
    float       *got = malloc(sizeof(float) * cap), *want = malloc(sizeof(float) * cap);
    float       *out_d = b->alloc(b, sizeof(float) * cap, "kv_read output");
    CHECK(got && want && out_d);
    const lc_kv_layer_view kv_d = {(void *)kd, (void *)vd, w->P, w->H, w->D, NULL, false, NULL};
    const lc_kv_layer_view kv_h = {(void *)kh, (void *)vh, w->P, w->H, w->D, NULL, false, NULL};
    for (size_t c = 0; c < sizeof kvw_cases / sizeof kvw_cases[0] && got && want && out_d; c++)
        for (int32_t part = LC_KV_KEYS; part <= LC_KV_VALUES; part++) {
            const int64_t pos0 = kvw_cases[c][0], n = kvw_cases[c][1];
            const int st = through_op ? b->kv_read(b, &kv_d, table_d, pos0, n, part, out_d)
                                      : lc_cuda_kv_read(&kv_d, type, table_d, pos0, n, part, out_d);
            CHECKF(st == LC_OK, "%s", lc_last_error());
            CHECK(b->download(b, got, out_d, sizeof(float) * row * (size_t)n) == LC_OK);
            CHECK(lc_cpu_kv_read(&kv_h, type, w->table, pos0, n, part, want) == LC_OK);
            CHECKF(memcmp(got, want, sizeof(float) * row * (size_t)n) == 0,
                   "type %u%s part %d [%lld, +%lld): CUDA and CPU rows differ", type,
                   through_op ? " (backend op)" : "", part, (long long)pos0, (long long)n);
        }
    CHECK(lc_cuda_sync() == LC_OK);
    free(got), free(want);
    b->dealloc(b, out_d);
}

/* 1. host-built pools of each type */
static void twins_agree(lc_backend *b) {
    kv_world w;
    CHECK(kvw_init(&w, 8, 3, 40, 75, 0xC0FFEEull));
    const size_t pool_bytes = kvw_pool_elems(&w);
    int32_t *table_d = to_device(b, w.table, sizeof(int32_t) * (size_t)w.n_pages, "page table");
    CHECK(table_d != NULL);
    for (size_t t = 0; t < 3 && table_d; t++) {
        const size_t bytes = pool_bytes * kvw_elem_bytes(k_types[t]);
        void *kh = kvw_pool(&w, k_types[t], LC_KV_KEYS), *vh = kvw_pool(&w, k_types[t], LC_KV_VALUES);
        void *kd = kh ? to_device(b, kh, bytes, "keys") : NULL;
        void *vd = vh ? to_device(b, vh, bytes, "values") : NULL;
        CHECK(kd && vd);
        if (kd && vd) compare_reads(b, &w, k_types[t], false, kd, vd, kh, vh, table_d);
        b->dealloc(b, kd), b->dealloc(b, vd);
        free(kh), free(vh);
    }
    b->dealloc(b, table_d);
    kvw_free(&w);
}

/* 2. the backend's own pools: kv_write, then kv_read */
static void backend_round_trip(lc_backend *b) {
    kv_world w;
    const int32_t P = b->page_size > 0 ? b->page_size : 64;
    CHECK(kvw_init(&w, P, 2, 64, 3 * P - 5, 99));
    const size_t esz = kvw_elem_bytes(b->kv_type), elems = kvw_pool_elems(&w);
    const size_t row = (size_t)w.H * (size_t)w.D, n = row * (size_t)w.n_pos;
    void    *kd = b->alloc(b, elems * esz, "keys"), *vd = b->alloc(b, elems * esz, "values");
    void    *kh = malloc(elems * esz), *vh = malloc(elems * esz);
    float   *k_d = to_device(b, w.k, sizeof(float) * n, "k rows");
    float   *v_d = to_device(b, w.v, sizeof(float) * n, "v rows");
    int32_t *table_d = to_device(b, w.table, sizeof(int32_t) * (size_t)w.n_pages, "page table");
    float   *got = malloc(sizeof(float) * n), *out_d = b->alloc(b, sizeof(float) * n, "output");
    CHECK(kd && vd && kh && vh && k_d && v_d && table_d && got && out_d);
    if (!kd || !vd || !kh || !vh || !k_d || !v_d || !table_d || !got || !out_d) goto done;
    const lc_kv_layer_view kv = {kd, vd, w.P, w.H, w.D, NULL, false, NULL};
    const lc_attn_seq      sq = {.row0 = 0, .n_rows = w.n_pos, .pos0 = 0, .page_table = w.table};
    if (b->batch_begin) CHECK(b->batch_begin(b, &sq, 1, w.P) == LC_OK);
    CHECKF(b->kv_write(b, &kv, &sq, 1, k_d, v_d) == LC_OK, "%s", lc_last_error());
    CHECK(b->download(b, kh, kd, elems * esz) == LC_OK);
    CHECK(b->download(b, vh, vd, elems * esz) == LC_OK);
    compare_reads(b, &w, b->kv_type, true, kd, vd, kh, vh, table_d);
    /* the written values, rounded to the pool's type */
    for (int32_t part = LC_KV_KEYS; part <= LC_KV_VALUES; part++) {
        CHECK(b->kv_read(b, &kv, table_d, 0, w.n_pos, part, out_d) == LC_OK);
        CHECK(b->download(b, got, out_d, sizeof(float) * n) == LC_OK);
        const float *src = part == LC_KV_KEYS ? w.k : w.v;
        size_t       bad = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(got[i] - src[i]) > 2e-3f * fabsf(src[i]) + 1e-7f) bad++;
        CHECKF(bad == 0, "part %d: %zu of %zu values not the written ones", part, bad, n);
    }
done:
    b->dealloc(b, kd), b->dealloc(b, vd), b->dealloc(b, k_d), b->dealloc(b, v_d);
    b->dealloc(b, table_d), b->dealloc(b, out_d);
    free(kh), free(vh), free(got);
    kvw_free(&w);
}

/* 3. the shared checks */
static void bad_arguments(void) {
    float                  dummy[4];
    const int32_t          table[1] = {0};
    const lc_kv_layer_view kv       = {dummy, dummy, 8, 2, 4, NULL, false, NULL};
    CHECK(lc_cuda_kv_read(&kv, LC_TYPE_F16, table, 0, 1, 2, dummy) == LC_ERR_INVALID_ARG);
    CHECK(lc_cuda_kv_read(&kv, LC_TYPE_F16, table, -1, 1, LC_KV_KEYS, dummy) == LC_ERR_INVALID_ARG);
    CHECK(lc_cuda_kv_read(NULL, LC_TYPE_F16, table, 0, 1, LC_KV_KEYS, dummy) == LC_ERR_INVALID_ARG);
    CHECK(lc_cuda_kv_read(&kv, LC_TYPE_F16, NULL, 0, 1, LC_KV_KEYS, dummy) == LC_ERR_INVALID_ARG);
    CHECK(lc_cuda_kv_read(&kv, LC_TYPE_Q8_0, table, 0, 1, LC_KV_KEYS, dummy) == LC_ERR_UNSUPPORTED);
    CHECK(lc_cuda_kv_read(&kv, LC_TYPE_F16, NULL, 0, 0, LC_KV_KEYS, NULL) == LC_OK);
    lc_clear_error();
}

int main(void) {
    lc_backend *b = NULL;
    REQUIRE_CUDA_BACKEND(b);
    CHECK(b->kv_read != NULL);
    twins_agree(b);
    backend_round_trip(b);
    bad_arguments();
    b->free(b);
    TEST_END();
}
