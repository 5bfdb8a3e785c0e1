/*
 * test_ops_cuda.c — CUDA ops vs their CPU twins (NMSE over odd shapes, fresh random inputs,
 * outputs poisoned before each run). Skips (exit 77) where no GPU is present.
 */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "format/quant.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t rng;
static float    frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double nmse(const float *ref, const float *got, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)ref[i] - got[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

int main(void) {
    lc_backend *b;
    REQUIRE_CUDA_BACKEND(b);
    rng = (uint64_t)time(NULL) | 1;
    const int64_t rows_list[] = {1, 63, 65, 4097};
    const int64_t dims[]      = {64, 576, 4096};
    for (size_t ri = 0; ri < 4; ri++)
        for (size_t di = 0; di < 3; di++) {
            const int64_t R = rows_list[ri], D = dims[di], N = R * D;
            float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N),
                  *w = malloc(sizeof(float) * D), *ref = malloc(sizeof(float) * N),
                  *got = malloc(sizeof(float) * N);
            for (int64_t i = 0; i < N; i++) x[i] = 3 * frand(), y[i] = frand();
            for (int64_t i = 0; i < D; i++) w[i] = frand();
            float *dx = b->alloc(b, sizeof(float) * N, "x"), *dy = b->alloc(b, sizeof(float) * N, "y"),
                  *dw = b->alloc(b, sizeof(float) * D, "w"), *dout = b->alloc(b, sizeof(float) * N, "out");
            CHECK(dx && dy && dw && dout);
            b->upload(b, dx, x, sizeof(float) * N);
            b->upload(b, dy, y, sizeof(float) * N);
            b->upload(b, dw, w, sizeof(float) * D);
            /* rmsnorm */
            memset(got, 0xff, sizeof(float) * N); /* poison: NaN */
            b->upload(b, dout, got, sizeof(float) * N);
            lc_cpu_rmsnorm(x, w, ref, R, D, 1e-5f);
            CHECK(lc_cuda_rmsnorm(dx, dw, dout, R, D, 1e-5f) == LC_OK && lc_cuda_sync() == LC_OK);
            b->download(b, got, dout, sizeof(float) * N);
            double e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-10, "rmsnorm rows %lld dim %lld nmse %g", (long long)R, (long long)D, e);
            /* silu_mul */
            memset(got, 0xff, sizeof(float) * N);
            b->upload(b, dout, got, sizeof(float) * N);
            lc_cpu_silu_mul(x, y, ref, N);
            CHECK(lc_cuda_silu_mul(dx, dy, dout, N) == LC_OK && lc_cuda_sync() == LC_OK);
            b->download(b, got, dout, sizeof(float) * N);
            e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-10, "silu_mul n %lld nmse %g", (long long)N, e);
            /* add and add_bias */
            memcpy(ref, x, sizeof(float) * N);
            lc_cpu_add(ref, y, N);
            lc_cpu_add_bias(ref, w, R, D);
            CHECK(lc_cuda_add(dx, dy, N) == LC_OK && lc_cuda_add_bias(dx, dw, R, D) == LC_OK &&
                  lc_cuda_sync() == LC_OK);
            b->download(b, got, dx, sizeof(float) * N);
            e = nmse(ref, got, (size_t)N);
            CHECKF(e < 1e-12, "add/add_bias n %lld nmse %g", (long long)N, e);
            b->dealloc(b, dx), b->dealloc(b, dy), b->dealloc(b, dw), b->dealloc(b, dout);
            free(x), free(y), free(w), free(ref), free(got);
        }
    /* embedding gather, RoPE (both pairings), KV page write */
    for (size_t ri = 0; ri < 4; ri++) {
        const int64_t R = rows_list[ri];
        /* embed */
        const int64_t V = 1000, E = 576;
        float   *tab = malloc(sizeof(float) * V * E), *ref = malloc(sizeof(float) * R * E),
                *got = malloc(sizeof(float) * R * E);
        int32_t *ids = malloc(sizeof(int32_t) * R);
        for (int64_t i = 0; i < V * E; i++) tab[i] = frand();
        for (int64_t i = 0; i < R; i++) ids[i] = (int32_t)((frand() + 1.0f) * 0.5f * (V - 1));
        float   *dtab = b->alloc(b, sizeof(float) * V * E, "t"), *dout = b->alloc(b, sizeof(float) * R * E, "o");
        int32_t *dids = b->alloc(b, sizeof(int32_t) * R, "ids");
        b->upload(b, dtab, tab, sizeof(float) * V * E);
        b->upload(b, dids, ids, sizeof(int32_t) * R);
        memset(got, 0xff, sizeof(float) * R * E);
        b->upload(b, dout, got, sizeof(float) * R * E);
        lc_weight wt = {V, E, 0, tab}, dwt = {V, E, 0, dtab};
        CHECK(lc_cpu_embed(&wt, ids, R, ref) == LC_OK);
        CHECK(lc_cuda_embed(&dwt, dids, R, dout) == LC_OK && lc_cuda_sync() == LC_OK);
        b->download(b, got, dout, sizeof(float) * R * E);
        CHECKF(memcmp(ref, got, sizeof(float) * R * E) == 0, "embed rows %lld differ", (long long)R);
        b->dealloc(b, dtab), b->dealloc(b, dout), b->dealloc(b, dids);
        free(tab), free(ref), free(got);

        /* rope */
        const int32_t heads[] = {3, 8, 32}, dims[2] = {64, 128};
        for (int hi = 0; hi < 3; hi++)
            for (int di = 0; di < 2; di++)
                for (int pairing = 0; pairing < 2; pairing++) {
                    const int32_t H = heads[hi], D = dims[di], NP = 5000, half = D / 2;
                    const int64_t N = R * H * D;
                    float *cs = malloc(sizeof(float) * NP * half), *sn = malloc(sizeof(float) * NP * half);
                    for (int64_t i = 0; i < (int64_t)NP * half; i++) cs[i] = frand(), sn[i] = frand();
                    float   *x = malloc(sizeof(float) * N), *xr = malloc(sizeof(float) * N);
                    int32_t *pos = malloc(sizeof(int32_t) * R);
                    for (int64_t i = 0; i < N; i++) x[i] = xr[i] = frand();
                    for (int64_t i = 0; i < R; i++) pos[i] = (int32_t)((frand() + 1.0f) * 0.5f * (NP - 1));
                    lc_rope_table ht = {NP, D, (lc_rope_pairing)pairing, cs, sn, 1.0f};
                    CHECK(lc_cpu_rope(xr, pos, R, H, D, &ht) == LC_OK);
                    float   *dx = b->alloc(b, sizeof(float) * N, "x"), *dc = b->alloc(b, sizeof(float) * NP * half, "c"),
                            *ds = b->alloc(b, sizeof(float) * NP * half, "s");
                    int32_t *dp = b->alloc(b, sizeof(int32_t) * R, "pos");
                    b->upload(b, dx, x, sizeof(float) * N);
                    b->upload(b, dc, cs, sizeof(float) * NP * half);
                    b->upload(b, ds, sn, sizeof(float) * NP * half);
                    b->upload(b, dp, pos, sizeof(int32_t) * R);
                    lc_rope_table dt = {NP, D, (lc_rope_pairing)pairing, dc, ds, 1.0f};
                    CHECK(lc_cuda_rope(dx, dp, R, H, D, &dt) == LC_OK && lc_cuda_sync() == LC_OK);
                    b->download(b, x, dx, sizeof(float) * N);
                    const double e = nmse(xr, x, (size_t)N);
                    CHECKF(e < 1e-12, "rope rows %lld heads %d dim %d pairing %d nmse %g", (long long)R, H, D, pairing, e);
                    b->dealloc(b, dx), b->dealloc(b, dc), b->dealloc(b, ds), b->dealloc(b, dp);
                    free(cs), free(sn), free(x), free(xr), free(pos);
                }

        /* kv write: two sequences, scattered pages */
        const int32_t P = ri % 2 ? 16 : 64, KH = ri < 2 ? 3 : 8, D = ri % 2 ? 128 : 64;
        const int32_t n_pages = (int32_t)(2 * ((R + 100 + P - 1) / P) + 2);
        const int64_t pool = (int64_t)n_pages * KH * P * D;
        float *kc = calloc((size_t)pool, sizeof(float)), *vc = calloc((size_t)pool, sizeof(float));
        int32_t *pt = malloc(sizeof(int32_t) * n_pages);
        for (int32_t i = 0; i < n_pages; i++) pt[i] = n_pages - 1 - i; /* scattered, distinct */
        const int32_t half_pages = n_pages / 2;
        lc_attn_seq   hs[2] = {{0, (int32_t)R, 100, pt, 0}, {(int32_t)R, 5, 3, pt + half_pages, 0}};
        const int64_t rows = R + 5, KD = (int64_t)KH * D;
        float *k = malloc(sizeof(float) * rows * KD), *v = malloc(sizeof(float) * rows * KD);
        for (int64_t i = 0; i < rows * KD; i++) k[i] = frand(), v[i] = frand();
        k[0] = 1e6f, k[1] = -65520.0f, v[2] = -3e9f; /* past fp16's range: saturated at +-65504 */
        lc_kv_layer_view hv = {kc, vc, P, KH, D};
        CHECK(lc_cpu_kv_write(&hv, hs, 2, k, v) == LC_OK);
        /* the CUDA pools hold fp16: compare with the CPU pool saturated and rounded to fp16, bit for
         * bit */
        uint16_t *dk = b->alloc(b, sizeof(uint16_t) * pool, "kpool"), *dv = b->alloc(b, sizeof(uint16_t) * pool, "vpool");
        float   *dks = b->alloc(b, sizeof(float) * rows * KD, "k"), *dvs = b->alloc(b, sizeof(float) * rows * KD, "v");
        int32_t *dpt = b->alloc(b, sizeof(int32_t) * n_pages, "pages");
        lc_attn_seq *dseq = b->alloc(b, sizeof hs, "seqs");
        uint16_t *hpool = calloc((size_t)pool, sizeof(uint16_t)), *want = malloc(sizeof(uint16_t) * pool);
        b->upload(b, dk, hpool, sizeof(uint16_t) * pool);
        b->upload(b, dv, hpool, sizeof(uint16_t) * pool);
        b->upload(b, dks, k, sizeof(float) * rows * KD);
        b->upload(b, dvs, v, sizeof(float) * rows * KD);
        b->upload(b, dpt, pt, sizeof(int32_t) * n_pages);
        lc_attn_seq ds2[2] = {{0, (int32_t)R, 100, dpt, 0}, {(int32_t)R, 5, 3, dpt + half_pages, 0}};
        b->upload(b, dseq, ds2, sizeof ds2);
        lc_kv_layer_view dvw = {dk, dv, P, KH, D};
        CHECK(lc_cuda_kv_write(&dvw, dseq, 2, (int32_t)(R > 5 ? R : 5), dks, dvs) == LC_OK &&
              lc_cuda_sync() == LC_OK);
        b->download(b, hpool, dk, sizeof(uint16_t) * pool);
        for (int64_t i = 0; i < pool; i++) want[i] = lc_fp32_to_fp16(fmaxf(-65504.0f, fminf(65504.0f, kc[i])));
        CHECKF(memcmp(hpool, want, sizeof(uint16_t) * pool) == 0, "kv_write K rows %lld", (long long)R);
        b->download(b, hpool, dv, sizeof(uint16_t) * pool);
        for (int64_t i = 0; i < pool; i++) want[i] = lc_fp32_to_fp16(fmaxf(-65504.0f, fminf(65504.0f, vc[i])));
        CHECKF(memcmp(hpool, want, sizeof(uint16_t) * pool) == 0, "kv_write V rows %lld", (long long)R);
        free(hpool), free(want);
        b->dealloc(b, dk), b->dealloc(b, dv), b->dealloc(b, dks), b->dealloc(b, dvs), b->dealloc(b, dpt), b->dealloc(b, dseq);
        free(kc), free(vc), free(pt), free(k), free(v), free(ids);
    }
    b->free(b);
    TEST_END();
}
