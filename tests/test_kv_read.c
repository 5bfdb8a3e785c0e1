/*
 * test_kv_read.c — the backend op kv_read on the CPU (contract: backend/backend.h):
 *   1. keys and values written with the backend's kv_write through a shuffled page table
 *      (several sequences' calls, ragged) read back exactly (f32 pools), for position ranges
 *      inside a page, across pages and ragged at both ends;
 *   2. fp16 and bf16 pools built on the host read back as the widening of each stored
 *      element at its place in the page layout (the backend's kv_type says the type);
 *   3. kv_read + the rope op give bit for bit the keys the fidelity probe used to decode by
 *      hand (attn_eval.c before it used the op table: pages downloaded, elements widened,
 *      lc_cpu_rope_vec at the true position), for both pairings, n_rot < and = head_dim;
 *   4. bad arguments: LC_ERR_INVALID_ARG with a message naming kv_read and what is wrong;
 *      an element type the twin does not know: LC_ERR_UNSUPPORTED.
 */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "longctx.h"
#include "test_util.h"
#include "util/util.h"

#include "kv_read_world.h"

#include <stdio.h>
#include <string.h>

static const uint32_t k_types[] = {LC_TYPE_F32, LC_TYPE_F16, LC_TYPE_BF16};

/* 1. kv_write, then kv_read: exact */
static void write_then_read(lc_backend *b) {
    kv_world w;
    CHECK(kvw_init(&w, 8, 3, 20, 70, 0x9E3779B97F4A7C15ull));
    const size_t pool = kvw_pool_elems(&w);
    float       *kp = calloc(pool, sizeof(float)), *vp = calloc(pool, sizeof(float));
    const size_t row = (size_t)w.H * (size_t)w.D;
    float       *out = malloc(sizeof(float) * row * (size_t)(w.n_pos + 1)); /* + a guard row */
    CHECK(kp && vp && out);
    if (!kp || !vp || !out) goto done;
    const lc_kv_layer_view kv = {kp, vp, w.P, w.H, w.D, NULL, false, NULL};
    /* written in ragged pieces, as prefill chunks and decode steps are: two batches of
     * several pieces each (a piece's rows start at row0 of its batch's k, v arrays) */
    static const int32_t cuts[] = {0, 5, 8, 9, 30, 31, 47, 70};
    enum { n_cuts = sizeof cuts / sizeof cuts[0], split = 4 };
    lc_attn_seq pieces[n_cuts - 1];
    for (int i = 0; i + 1 < n_cuts; i++)
        pieces[i] = (lc_attn_seq){.row0 = cuts[i] - (i < split ? 0 : cuts[split]),
                                  .n_rows = cuts[i + 1] - cuts[i], .pos0 = cuts[i],
                                  .page_table = w.table};
    CHECK(b->kv_write(b, &kv, pieces, split, w.k, w.v) == LC_OK);
    const size_t at = (size_t)cuts[split] * row;
    CHECK(b->kv_write(b, &kv, pieces + split, n_cuts - 1 - split, w.k + at, w.v + at) == LC_OK);
    for (size_t c = 0; c < sizeof kvw_cases / sizeof kvw_cases[0]; c++)
        for (int32_t part = LC_KV_KEYS; part <= LC_KV_VALUES; part++) {
            const int64_t pos0 = kvw_cases[c][0], n = kvw_cases[c][1];
            memset(out, 0xff, sizeof(float) * row * (size_t)(w.n_pos + 1));
            const int st = b->kv_read(b, &kv, w.table, pos0, n, part, out);
            CHECKF(st == LC_OK, "%s", lc_last_error());
            const float *want = (part == LC_KV_KEYS ? w.k : w.v) + (size_t)pos0 * row;
            CHECKF(memcmp(out, want, sizeof(float) * row * (size_t)n) == 0,
                   "f32 %s [%lld, +%lld) differ", part == LC_KV_KEYS ? "keys" : "values",
                   (long long)pos0, (long long)n);
            /* nothing past the rows is written */
            uint32_t past;
            memcpy(&past, out + row * (size_t)n, sizeof past);
            CHECK(past == 0xffffffffu);
        }
done:
    free(kp), free(vp), free(out);
    kvw_free(&w);
}

/* 2. fp16 / bf16 pools: the widening of each stored element */
static void half_pools(lc_backend *b) {
    kv_world w;
    CHECK(kvw_init(&w, 8, 2, 16, 75, 12345));
    const size_t row = (size_t)w.H * (size_t)w.D;
    float *got = malloc(sizeof(float) * row * (size_t)w.n_pos);
    float *want = malloc(sizeof(float) * row * (size_t)w.n_pos);
    const uint32_t kv_type = b->kv_type;
    for (size_t t = 0; t < 3 && got && want; t++) {
        void *kp = kvw_pool(&w, k_types[t], LC_KV_KEYS), *vp = kvw_pool(&w, k_types[t], LC_KV_VALUES);
        CHECK(kp && vp);
        const lc_kv_layer_view kv = {kp, vp, w.P, w.H, w.D, NULL, false, NULL};
        b->kv_type = k_types[t]; /* the pools' type as the op sees it */
        for (size_t c = 0; c < sizeof kvw_cases / sizeof kvw_cases[0] && kp && vp; c++)
            for (int32_t part = LC_KV_KEYS; part <= LC_KV_VALUES; part++) {
                const int64_t pos0 = kvw_cases[c][0], n = kvw_cases[c][1];
                const int st = b->kv_read(b, &kv, w.table, pos0, n, part, got);
                CHECKF(st == LC_OK, "%s", lc_last_error());
                kvw_expect(&w, part == LC_KV_KEYS ? kp : vp, k_types[t], pos0, n, want);
                CHECKF(memcmp(got, want, sizeof(float) * row * (size_t)n) == 0,
                       "type %u part %d [%lld, +%lld) differ", k_types[t], part, (long long)pos0,
                       (long long)n);
                /* and the stored values are the written ones, rounded */
                const float *src = (part == LC_KV_KEYS ? w.k : w.v) + (size_t)pos0 * row;
                const double tol = k_types[t] == LC_TYPE_F32 ? 0 : k_types[t] == LC_TYPE_F16 ? 2e-3 : 1.6e-2;
                for (size_t i = 0; i < row * (size_t)n; i++)
                    if (fabs((double)got[i] - src[i]) > tol) {
                        CHECKF(0, "type %u: %g stored as %g", k_types[t], src[i], got[i]);
                        break;
                    }
            }
        free(kp), free(vp);
    }
    b->kv_type = kv_type;
    free(got), free(want);
    kvw_free(&w);
}

/* 3. what attn_eval.c's probe computed by hand: keys [kv_head][token][dim], rotated */
static void hand_decode(lc_backend *b, const lc_kv_layer_view *kv, uint32_t kv_type,
                        const int32_t *page_table, int64_t n_keys, const lc_rope_table *rope,
                        float *kh) {
    const int32_t H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size;
    const size_t  esz = kv_type == LC_TYPE_F32 ? 4 : 2;
    const size_t  slab = (size_t)H * (size_t)P * (size_t)D;
    void         *page = malloc(slab * esz);
    if (!page) return;
    for (int64_t pg = 0; pg < (n_keys + P - 1) / P; pg++) {
        const int32_t id = page_table[pg];
        CHECK(b->download(b, page, (const char *)kv->k + (size_t)id * slab * esz, slab * esz) == LC_OK);
        for (int32_t h = 0; h < H; h++)
            for (int32_t t = 0; t < P && pg * P + t < n_keys; t++) {
                const int64_t tok = pg * P + t;
                float        *dst = kh + ((size_t)h * (size_t)n_keys + (size_t)tok) * (size_t)D;
                const size_t  src = ((size_t)h * P + (size_t)t) * (size_t)D;
                for (int32_t i = 0; i < D; i++)
                    dst[i] = kv_type == LC_TYPE_F16    ? lc_fp16_to_fp32(((const uint16_t *)page)[src + (size_t)i])
                             : kv_type == LC_TYPE_BF16 ? lc_bf16_to_fp32(((const uint16_t *)page)[src + (size_t)i])
                                                       : ((const float *)page)[src + (size_t)i];
                lc_cpu_rope_vec(dst, (int32_t)tok, rope);
            }
    }
    free(page);
}

static void rotated_keys_unchanged(lc_backend *b) {
    kv_world w;
    CHECK(kvw_init(&w, 8, 3, 32, 77, 777));
    const size_t row = (size_t)w.H * (size_t)w.D, n = row * (size_t)w.n_pos;
    float   *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)w.n_pos);
    CHECK(ref && got && pos);
    const uint32_t kv_type = b->kv_type;
    for (int32_t i = 0; pos && i < w.n_pos; i++) pos[i] = i;
    for (int pairing = 0; pairing < 2 && ref && got && pos; pairing++)
        for (int32_t n_rot = 16; n_rot <= 32; n_rot += 16) {
            lc_rope_table rope;
            CHECK(kvw_rope(&rope, 80, n_rot, (lc_rope_pairing)pairing));
            for (size_t t = 0; t < 3 && rope.cos && rope.sin; t++) {
                void *kp = kvw_pool(&w, k_types[t], LC_KV_KEYS);
                CHECK(kp != NULL);
                if (!kp) continue;
                const lc_kv_layer_view kv = {kp, kp, w.P, w.H, w.D, NULL, false, NULL};
                b->kv_type = k_types[t];
                hand_decode(b, &kv, k_types[t], w.table, w.n_pos, &rope, ref);
                CHECK(b->kv_read(b, &kv, w.table, 0, w.n_pos, LC_KV_KEYS, got) == LC_OK);
                CHECK(b->rope(b, got, pos, w.n_pos, w.H, w.D, &rope) == LC_OK);
                bool same = true;
                for (int32_t p = 0; p < w.n_pos && same; p++)
                    for (int32_t h = 0; h < w.H && same; h++)
                        same = memcmp(got + ((size_t)p * w.H + h) * w.D,
                                      ref + ((size_t)h * w.n_pos + p) * w.D,
                                      sizeof(float) * (size_t)w.D) == 0;
                CHECKF(same, "type %u, pairing %d, n_rot %d: kv_read + rope differ from the "
                       "hand decode", k_types[t], pairing, n_rot);
                free(kp);
            }
            free(rope.cos), free(rope.sin);
        }
    b->kv_type = kv_type;
    free(ref), free(got), free(pos);
    kvw_free(&w);
}

/* 4. bad arguments */
static void expect_invalid(int st, const char *what, const char *words) {
    CHECKF(st == LC_ERR_INVALID_ARG, "%s: status %d", what, st);
    const char *e = lc_last_error();
    CHECKF(e && strstr(e, "kv_read") && strstr(e, words), "%s: message \"%s\" (want \"%s\")", what,
           e ? e : "", words);
    lc_clear_error();
}

static void bad_arguments(lc_backend *b) {
    float                  pool[2 * 2 * 8 * 4] = {0}, out[64];
    const int32_t          table[2]         = {1, 0};
    const lc_kv_layer_view kv               = {pool, pool, 8, 2, 4, NULL, false, NULL};
    lc_kv_layer_view       bad              = kv;
    expect_invalid(b->kv_read(b, NULL, table, 0, 1, LC_KV_KEYS, out), "no view", "view");
    bad.page_size = 0;
    expect_invalid(b->kv_read(b, &bad, table, 0, 1, LC_KV_KEYS, out), "page 0", "shape");
    bad = kv, bad.n_kv_head = -1;
    expect_invalid(b->kv_read(b, &bad, table, 0, 1, LC_KV_KEYS, out), "heads -1", "shape");
    bad = kv, bad.head_dim = 0;
    expect_invalid(b->kv_read(b, &bad, table, 0, 1, LC_KV_KEYS, out), "dim 0", "shape");
    expect_invalid(b->kv_read(b, &kv, table, 0, 1, 2, out), "part 2", "part 2");
    expect_invalid(b->kv_read(b, &kv, table, 0, 1, -1, out), "part -1", "part -1");
    expect_invalid(b->kv_read(b, &kv, table, -1, 1, LC_KV_KEYS, out), "pos0 -1", "positions");
    expect_invalid(b->kv_read(b, &kv, table, 0, -3, LC_KV_KEYS, out), "n_rows -3", "positions");
    expect_invalid(b->kv_read(b, &kv, table, INT32_MAX, 1, LC_KV_KEYS, out), "past 2^31 - 1",
                   "positions");
    expect_invalid(b->kv_read(b, &kv, NULL, 0, 1, LC_KV_KEYS, out), "no table", "page table");
    expect_invalid(b->kv_read(b, &kv, table, 0, 1, LC_KV_VALUES, NULL), "no output", "output");
    bad = kv, bad.v = NULL;
    expect_invalid(b->kv_read(b, &bad, table, 0, 1, LC_KV_VALUES, out), "no values", "value pool");
    bad = kv, bad.k = NULL;
    expect_invalid(b->kv_read(b, &bad, table, 0, 1, LC_KV_KEYS, out), "no keys", "key pool");
    /* no rows: nothing to read, nothing needed */
    CHECK(b->kv_read(b, &kv, NULL, 5, 0, LC_KV_KEYS, NULL) == LC_OK);
    CHECK(b->kv_read(b, &kv, table, INT32_MAX, 0, LC_KV_KEYS, out) == LC_OK);
    /* the range check lets the last position 2^31 - 2 through */
    CHECK(lc_kv_read_check(&kv, table, INT32_MAX - 1, 1, LC_KV_KEYS, out) == LC_OK);
    CHECK(lc_cpu_kv_read(&kv, LC_TYPE_Q8_0, table, 0, 1, LC_KV_KEYS, out) == LC_ERR_UNSUPPORTED);
    lc_clear_error();
}

int main(void) {
    lc_backend *b = NULL;
    CHECK(lc_backend_cpu_create(2, &b) == LC_OK);
    if (!b) TEST_END();
    CHECK(b->kv_read != NULL);
    write_then_read(b);
    half_pools(b);
    rotated_keys_unchanged(b);
    bad_arguments(b);
    b->free(b);
    TEST_END();
}
