/*
 * test_rope.c — RoPE angles: lc_rope_table_fill (none, linear, llama3 and yarn scaling)
 * against inverse frequencies and attention factors from Hugging Face transformers
 * (tests/fixtures/rope/rope.txt, scripts/gen_rope_fixtures.py); the two pairing conventions
 * rotate the right pairs; hyper-parameters of the real model.
 */
#include "backend/cpu/cpu.h"
#include "format/gguf.h"
#include "model/model.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static void check_case(char *line) {
    char   name[64], type[16];
    double base, factor, low, high, att;
    int    hd, orig, n, off;
    if (sscanf(line, "case %63s %15s %lf %d %lf %d %lf %lf %lf %d%n", name, type, &base, &hd,
               &factor, &orig, &low, &high, &att, &n, &off) != 10) {
        CHECKF(0, "bad fixture line: %.60s", line);
        return;
    }
    lc_hparams hp = {0};
    hp.n_rot            = hd;
    hp.head_dim         = hd;
    hp.rope_base        = (float)base;
    hp.rope_factor      = (float)factor;
    hp.rope_orig_ctx    = orig;
    hp.llama3_low_freq  = (float)low;
    hp.llama3_high_freq = (float)high;
    hp.yarn_ext_factor  = 1.0f;
    hp.yarn_attn_factor = 1.0f;
    hp.yarn_beta_fast   = 32.0f;
    hp.yarn_beta_slow   = 1.0f;
    hp.rope_scaling = !strcmp(type, "linear")   ? LC_ROPE_SCALING_LINEAR
                      : !strcmp(type, "llama3") ? LC_ROPE_SCALING_LLAMA3
                      : !strcmp(type, "yarn")   ? LC_ROPE_SCALING_YARN
                                                : LC_ROPE_SCALING_NONE;
    CHECK(n == hd / 2);
    const int32_t P = 1001;
    float *c = malloc(sizeof(float) * P * n), *s = malloc(sizeof(float) * P * n);
    CHECK(lc_rope_table_fill(&hp, NULL, P, c, s) == LC_OK);
    char  *p       = line + off;
    double max_err = 0, max_err1000 = 0;
    for (int i = 0; i < n; i++) {
        const double f = strtod(p, &p);
        /* position 1: the frequency itself (float32 in the reference) */
        const double e1 = fmax(fabs(c[n + i] - cos(f) * att), fabs(s[n + i] - sin(f) * att));
        /* position 1000: float32 frequencies drift by ~1e-7 relative, i.e. ~1e-4 rad */
        const double e2 = fmax(fabs(c[1000 * n + i] - cos(1000 * f) * att),
                               fabs(s[1000 * n + i] - sin(1000 * f) * att));
        max_err         = fmax(max_err, e1);
        max_err1000     = fmax(max_err1000, e2);
    }
    CHECKF(max_err < 2e-6, "%s: max error at position 1: %g", name, max_err);
    CHECKF(max_err1000 < 2e-3, "%s: max error at position 1000: %g", name, max_err1000);
    CHECK(c[0] == (float)att && s[0] == 0.0f); /* position 0: identity (times the factor) */
    /* a table extended in pieces (as the engine grows it) equals the whole one bit for bit; the
     * pieces are large enough to be filled by several threads */
    const int32_t Q = 70000;
    float *wc = malloc(sizeof(float) * Q * n), *ws = malloc(sizeof(float) * Q * n);
    float *gc = malloc(sizeof(float) * Q * n), *gs = malloc(sizeof(float) * Q * n);
    CHECK(lc_rope_table_fill(&hp, NULL, Q, wc, ws) == LC_OK);
    const int32_t cut[] = {0, 1, 4096, 4099, 65536, Q};
    for (int k = 0; k + 1 < 6; k++)
        CHECK(lc_rope_table_fill_rows(&hp, NULL, cut[k], cut[k + 1], gc + (int64_t)cut[k] * n,
                                      gs + (int64_t)cut[k] * n) == LC_OK);
    CHECKF(!memcmp(wc, gc, sizeof(float) * Q * n) && !memcmp(ws, gs, sizeof(float) * Q * n),
           "%s: rows filled in pieces differ from the whole table", name);
    CHECK(!memcmp(wc, c, sizeof(float) * P * n)); /* and the first rows from the short table */
    CHECK(lc_rope_table_fill_rows(&hp, NULL, 5, 4, gc, gs) == LC_ERR_INVALID_ARG);
    CHECK(lc_rope_table_fill_rows(&hp, NULL, -1, 4, gc, gs) == LC_ERR_INVALID_ARG);
    free(wc), free(ws), free(gc), free(gs);
    free(c), free(s);
}

int main(void) {
    FILE *f = fopen(LC_SOURCE_DIR "/tests/fixtures/rope/rope.txt", "r");
    CHECK(f != NULL);
    static char line[65536];
    int         cases = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "case ", 5)) {
            check_case(line);
            cases++;
        }
    if (f) fclose(f);
    CHECK(cases == 7);

    /* pairing: NORM rotates (x0, x1), NEOX rotates (x0, x_half) */
    float         cs[2] = {0.0f, 1.0f}, sn[2] = {1.0f, 0.0f}; /* pair 0 by 90°, pair 1 by 0° */
    lc_rope_table t     = {1, 4, LC_ROPE_NORM, cs, sn, 1.0f};
    float         x[4]  = {1, 2, 3, 4};
    lc_cpu_rope_vec(x, 0, &t);
    CHECK(x[0] == -2 && x[1] == 1 && x[2] == 3 && x[3] == 4);
    float y[4] = {1, 2, 3, 4};
    t.pairing  = LC_ROPE_NEOX;
    lc_cpu_rope_vec(y, 0, &t);
    CHECK(y[0] == -3 && y[1] == 2 && y[2] == 1 && y[3] == 4);

    /* both pairings at real head sizes (the vectorised paths) against the formula */
    for (int hd = 64; hd <= 128; hd += 64)
        for (int pairing = 0; pairing < 2; pairing++) {
            const int half = hd / 2;
            float    *cs2 = malloc(sizeof(float) * 3 * half), *sn2 = malloc(sizeof(float) * 3 * half);
            for (int i = 0; i < 3 * half; i++) cs2[i] = cosf(0.37f * i), sn2[i] = sinf(0.37f * i);
            lc_rope_table rt = {3, hd, (lc_rope_pairing)pairing, cs2, sn2, 1.0f};
            float         v[128], w[128];
            for (int i = 0; i < hd; i++) v[i] = w[i] = (float)(i % 7) - 3.0f + 0.1f * i;
            lc_cpu_rope_vec(w, 2, &rt);
            double err = 0;
            for (int i = 0; i < half; i++) {
                const int   a = pairing ? i : 2 * i, b = pairing ? i + half : 2 * i + 1;
                const float c = cs2[2 * half + i], s = sn2[2 * half + i];
                err = fmax(err, fabs(w[a] - (v[a] * c - v[b] * s)));
                err = fmax(err, fabs(w[b] - (v[a] * s + v[b] * c)));
            }
            CHECKF(err < 1e-5, "rope_vec head dim %d pairing %d: max err %g", hd, pairing, err);
            free(cs2), free(sn2);
        }

    /* the real model's hyper-parameters */
    FILE *mf = fopen(LC_MODEL_PATH, "rb");
    if (mf) {
        fclose(mf);
        lc_gguf *g;
        CHECK(lc_gguf_open(LC_MODEL_PATH, &g) == LC_OK);
        lc_hparams hp;
        CHECK(lc_hparams_read(g, &hp) == LC_OK);
        CHECK(!strcmp(hp.arch, "llama") && hp.n_layer == 30 && hp.n_embd == 576 && hp.n_head == 9 &&
              hp.n_head_kv == 3 && hp.head_dim == 64 && hp.n_ff == 1536 && hp.n_ctx_train == 8192 &&
              hp.n_rot == 64 && hp.rope_base == 100000.0f && hp.rope_pairing == LC_ROPE_NORM &&
              hp.rope_scaling == LC_ROPE_SCALING_NONE && fabsf(hp.norm_eps - 1e-5f) < 1e-9f);
        lc_gguf_close(g);
    }
    TEST_END();
}
