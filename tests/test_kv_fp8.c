/*
 * test_kv_fp8.c — the fp8 KV cache's host side (issue 23 item 2; backend.h "LC_KV_E4M3"):
 *   1. e4m3 (format/quant.h) over all 256 codes: the values (0x01 = 2^-9, 0x08 = 2^-6,
 *      0x7e = 448, NaN at 0x7f / 0xff, strictly increasing, signs mirrored); the encoder
 *      returns each value's code, rounds every midpoint between neighbours to the even code and
 *      the floats next to it to the nearer one, saturates to +-448 (infinities too) and maps
 *      NaN to 0x7f. (The CUDA encoder is checked against this one bit for bit by the
 *      kv_write_e4m3 entry of test_ops_cuda.)
 *   2. lc_kv_e4m3_quantize / lc_kv_e4m3_value on random rows around a centre: every element
 *      within e4m3's half step (2^-4 relative, or half a subnormal step of the row's scale)
 *      plus fp16 roundings; a row equal to its centre comes back as the centre (scale 0);
 *      values past the range are clamped to LC_KV_E4M3_MAX and read back finite.
 *   3. the CPU backend's kv_write and kv_read over the fp8 layout give those same codes and
 *      values, at the slab offsets of the layout.
 *   4. a context with an fp8 KV cache on the CPU backend is refused before allocation, with a
 *      message that names fp8; and the budget of a CUDA-less model is unaffected.
 */
#include "backend/backend.h"
#include "format/quant.h"
#include "generated_model.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_codes(void) {
    CHECK(lc_e4m3_to_fp32(0x00) == 0.0f && signbit(lc_e4m3_to_fp32(0x80)));
    CHECK(lc_e4m3_to_fp32(0x01) == 0x1p-9f && lc_e4m3_to_fp32(0x07) == 7 * 0x1p-9f);
    CHECK(lc_e4m3_to_fp32(0x08) == 0x1p-6f && lc_e4m3_to_fp32(0x38) == 1.0f);
    CHECK(lc_e4m3_to_fp32(0x7e) == 448.0f && lc_e4m3_to_fp32(0xfe) == -448.0f);
    CHECK(isnan(lc_e4m3_to_fp32(0x7f)) && isnan(lc_e4m3_to_fp32(0xff)));
    int bad = 0;
    for (int c = 0; c < 0x7e; c++) {
        const float a = lc_e4m3_to_fp32((uint8_t)c), b = lc_e4m3_to_fp32((uint8_t)(c + 1));
        bad += !(a < b) || lc_e4m3_to_fp32((uint8_t)(c | 0x80)) != -a;
        for (int sg = 0; sg < 2; sg++) {
            const float   s   = sg ? -1.0f : 1.0f;
            const uint8_t lo  = (uint8_t)(c | (sg ? 0x80 : 0)), hi = (uint8_t)((c + 1) | (sg ? 0x80 : 0));
            const float   mid = s * (a + b) / 2; /* exact: a and b are 4-bit numbers */
            bad += lc_fp32_to_e4m3(s * a) != lo;
            bad += lc_fp32_to_e4m3(mid) != ((c & 1) ? hi : lo); /* ties to the even code */
            bad += lc_fp32_to_e4m3(nextafterf(mid, 0.0f)) != lo;
            bad += lc_fp32_to_e4m3(nextafterf(mid, s * INFINITY)) != hi;
        }
    }
    CHECKF(bad == 0, "%d e4m3 encodings wrong", bad);
    CHECK(lc_fp32_to_e4m3(448.0f) == 0x7e && lc_fp32_to_e4m3(460.0f) == 0x7e);
    CHECK(lc_fp32_to_e4m3(1e30f) == 0x7e && lc_fp32_to_e4m3(-INFINITY) == 0xfe);
    CHECK(lc_fp32_to_e4m3(INFINITY) == 0x7e && lc_fp32_to_e4m3(NAN) == 0x7f);
    CHECK(lc_fp32_to_e4m3(0x1p-10f) == 0x00 && lc_fp32_to_e4m3(nextafterf(0x1p-10f, 1)) == 0x01);
    CHECK(lc_fp32_to_e4m3(-0.0f) == 0x80 && lc_fp32_to_e4m3(1e-30f) == 0x00);
}

static void check_rows(void) {
    enum { D = 128, ROWS = 2000 };
    uint64_t rng = 7;
    float    x[D], c[D];
    uint8_t  q[D];
    int      bad = 0;
    double   worst_rel = 0;
    for (int r = 0; r < ROWS; r++) {
        const float spread = ldexpf(1.0f, r % 24 - 12); /* rows of very different sizes */
        for (int d = 0; d < D; d++) {
            c[d] = r % 3 ? 300.0f * test_frand(&rng) : 0.0f;
            x[d] = c[d] + spread * test_frand(&rng);
        }
        const float s = lc_kv_e4m3_quantize(x, c, D, q);
        for (int d = 0; d < D; d++) {
            const float cf  = lc_fp16_to_fp32(lc_fp32_to_fp16(c[d]));
            const float y   = x[d] - cf;
            const float got = lc_kv_e4m3_value(q[d], s, c[d]);
            /* e4m3's half step, fp16's rounding of 256 s (2^-11 relative) and of the sum */
            const float tol = fmaxf(fabsf(y) * 0x1p-4f, s * 0x1p-10f) * 1.002f +
                              (fabsf(y) + fabsf(got)) * 0x1p-11f + fabsf(x[d]) * 0x1p-23f + 0x1p-24f;
            if (!(fabsf(got - x[d]) <= tol)) bad++;
            if (c[d] == 0.0f && fabsf(y) > s * 64) { /* uncentred rows: no fp16 sum rounding */
                const double rel = fabs((double)got - cf - y) / fabs(y);
                if (rel > worst_rel) worst_rel = rel;
            }
        }
    }
    CHECKF(bad == 0, "%d of %d dequantised elements outside e4m3's half step", bad, ROWS * D);
    fprintf(stderr, "e4m3 rows: worst relative error of the larger elements %.4f (half step 0.0625)\n",
            worst_rel);
    /* past the range: clamped to LC_KV_E4M3_MAX, and read back finite (not fp16's inf) */
    for (int d = 0; d < D; d++) x[d] = d == 5 ? -1e6f : d == 6 ? 3e9f : (float)d;
    const float sb = lc_kv_e4m3_quantize(x, NULL, D, q);
    CHECK(sb == LC_KV_E4M3_MAX / 448.0f);
    CHECK(lc_kv_e4m3_value(q[5], sb, 0) == -65408.0f && lc_kv_e4m3_value(q[6], sb, 0) == 65408.0f);
    for (int d = 0; d < D; d++) c[d] = x[d] = 17.0f + (float)d;
    const float s = lc_kv_e4m3_quantize(x, c, D, q);
    CHECK(s == 0.0f);
    int same = 0;
    for (int d = 0; d < D; d++) same += lc_kv_e4m3_value(q[d], s, c[d]) == x[d];
    CHECKF(same == D, "a row equal to its centre: %d of %d elements back exactly", same, D);
}

static void check_cpu_ops(void) {
    lc_backend *b = NULL;
    CHECK(lc_backend_cpu_create(1, &b) == LC_OK && b);
    if (!b) return;
    enum { P = 16, H = 2, D = 64, N_PAGES = 5, ROWS = 37 };
    const size_t sb   = lc_kv_slab_bytes(true, b->kv_type, P, D);
    unsigned char *kp = calloc(N_PAGES * H, sb), *vp = calloc(N_PAGES * H, sb);
    float *k = malloc(sizeof(float) * ROWS * H * D), *v = malloc(sizeof(float) * ROWS * H * D);
    float *cen = malloc(sizeof(float) * H * D), *out = malloc(sizeof(float) * (ROWS + 3) * H * D);
    CHECK(sb == (size_t)P * (D + 4));
    CHECK(kp && vp && k && v && cen && out);
    if (kp && vp && k && v && cen && out) {
        uint64_t rng = 3;
        for (int i = 0; i < H * D; i++) cen[i] = 50.0f * test_frand(&rng);
        for (int i = 0; i < ROWS * H * D; i++) k[i] = cen[i % (H * D)] + test_frand(&rng), v[i] = test_frand(&rng);
        int32_t           pt[N_PAGES] = {4, 0, 3, 1, 2};
        lc_attn_seq       sq          = {0, ROWS, 3, pt, 0};
        lc_kv_layer_view  kv          = {kp, vp, P, H, D, NULL, true, cen};
        CHECK(b->kv_write(b, &kv, &sq, 1, k, v) == LC_OK);
        int bad = 0;
        for (int part = 0; part < 2; part++) {
            CHECK(b->kv_read(b, &kv, pt, 3, ROWS, part ? LC_KV_VALUES : LC_KV_KEYS, out) == LC_OK);
            for (int r = 0; r < ROWS; r++)
                for (int h = 0; h < H; h++) {
                    const int      pos = 3 + r;
                    unsigned char *slab = (part ? vp : kp) + (size_t)(pt[pos / P] * H + h) * sb;
                    uint8_t        q[D];
                    const float   *c = part ? NULL : cen + h * D;
                    const float    s = lc_kv_e4m3_quantize((part ? v : k) + (r * H + h) * D, c, D, q);
                    float          stored;
                    memcpy(&stored, slab + P * D + 4 * (pos % P), 4);
                    bad += stored != s || memcmp(slab + (pos % P) * D, q, D) != 0;
                    for (int d = 0; d < D; d++)
                        bad += out[(r * H + h) * D + d] != lc_kv_e4m3_value(q[d], s, c ? c[d] : 0.0f);
                }
        }
        CHECKF(bad == 0, "%d fp8 slab rows or read-back values differ from the layout", bad);
        /* the CPU's attention does not read the layout: a clear refusal */
        float q[8 * D] = {0};
        CHECK(b->attn_dense(b, &kv, &sq, 1, q, 4, NULL, 1.0f, out) == LC_ERR_UNSUPPORTED);
        CHECK(strstr(lc_last_error(), "fp8") != NULL);
    }
    free(kp), free(vp), free(k), free(v), free(cen), free(out);
    b->free(b);
}

static void check_cpu_context(void) {
    lc_model *m = load_generated("tiny-qwen2", 1, LC_DEVICE_CPU, 1);
    if (!m) return;
    lc_context_params cp = tiny_context_params(NULL, NULL);
    cp.kv_type           = LC_KV_FP8;
    lc_context *c        = NULL;
    const int   rc       = lc_context_create(m, &cp, &c);
    CHECKF(rc == LC_ERR_UNSUPPORTED && !c && strstr(lc_last_error(), "fp8"),
           "fp8 KV on the CPU: %s (%s)", lc_status_str(rc), lc_last_error());
    cp.kv_type = (lc_kv_type)7;
    CHECK(lc_context_create(m, &cp, &c) == LC_ERR_INVALID_ARG && !c);
    cp.kv_type = LC_KV_AUTO;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK && c);
    if (c) lc_context_free(c);
    lc_model_free(m);
}

int main(void) {
    check_codes();
    check_rows();
    check_cpu_ops();
    check_cpu_context();
    TEST_END();
}
