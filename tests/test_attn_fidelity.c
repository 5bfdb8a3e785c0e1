/*
 * test_attn_fidelity.c — lc_eval_attn_fidelity (engine/attn_eval.c) end to end on generated
 * tiny models (llama: adjacent RoPE pairs; qwen2: split halves) on the CPU:
 *   1. a selection that covers every candidate (TokenSelect with k past the context) reads
 *      every key: recall 1, keys_read = the mean causal key count of the probed rows, and the
 *      sparse output equals the dense one (up to float summation order);
 *   2. real pruning (HiP, TokenSelect, InfiniteHiP with small budgets): every layer's numbers
 *      are in range (recall in (0, 1], keys read between the sink + window and all keys, span
 *      numbers consistent), and two runs give the same numbers;
 *   3. bad parameters are refused with LC_ERR_INVALID_ARG.
 * The numbers of every run are printed (%.17g) so a change of the probe's key decoding can be
 * compared run against run; the keys the probe reads are checked against the page layout by
 * test_kv_read.c.
 */
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TOKENS 300
#define N_ROWS   8

static lc_model *load(const char *path) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 2;
    lc_model *m        = NULL;
    CHECKF(lc_model_load(path, &mp, &m) == LC_OK, "%s", lc_last_error());
    return m;
}

static void print_layer(const char *what, int32_t l, const lc_attn_fidelity *r) {
    fprintf(stderr, "%s layer %d: rows %d sparse %d recall %.17g out_rel_l2 %.17g keys_read "
            "%.17g span_mass %.17g span_mass_read %.17g span_read %.17g stages %d",
            what, l, r->rows, (int)r->sparse, r->recall, r->out_rel_l2, r->keys_read,
            r->span_mass, r->span_mass_read, r->span_read, r->n_stages);
    for (int32_t i = 0; i < r->n_stages && i < LC_HIP_MAX_STAGES; i++)
        fprintf(stderr, " stage%d %.17g", i, r->span_stage_read[i]);
    fputc('\n', stderr);
}

/* One fidelity run; returns the status, fills out[n_layer]. */
static int run(lc_model *m, const int32_t *toks, const char *method, const char *settings,
               bool decode, lc_attn_fidelity *out) {
    lc_context_params cp = lc_context_default_params();
    cp.page_size         = 64;
    cp.attn              = method;
    cp.attn_settings     = settings;
    cp.sparse_always     = true;
    lc_fidelity_params fp = lc_fidelity_default_params();
    fp.top_k              = 16;
    fp.n_rows             = N_ROWS;
    fp.n_batch            = 128;
    fp.decode             = decode;
    fp.span_begin         = 100;
    fp.span_end           = 140;
    return lc_eval_attn_fidelity(m, toks, N_TOKENS, &cp, &fp, out);
}

static void model_checks(const char *config, const char *path) {
    lc_gen_params gp = {.config = config, .path = path, .type = LC_GEN_BF16, .seed = 11};
    CHECKF(lc_model_generate(&gp) == LC_OK, "%s", lc_last_error());
    lc_model *m = load(path);
    if (!m) return;
    lc_model_info info;
    lc_model_get_info(m, &info);
    int32_t toks[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) toks[i] = 30 + (i * 53 + (i * i) % 17) % 200;
    lc_attn_fidelity *a = calloc((size_t)info.n_layer, sizeof *a);
    lc_attn_fidelity *b = calloc((size_t)info.n_layer, sizeof *b);
    CHECK(a && b);
    if (!a || !b) goto done;

    /* 1. full coverage: every key read, recall 1, the dense output */
    for (int decode = 0; decode < 2; decode++) {
        CHECKF(run(m, toks, "tokenselect", "k=4096 init=4 local=64 chunk=64", decode, a) == LC_OK,
               "%s", lc_last_error());
        const int32_t rows = decode ? 1 : N_ROWS;
        /* probed rows: positions N_TOKENS - rows .. N_TOKENS - 1 (decode: N_TOKENS) */
        const double mean_keys = decode ? N_TOKENS + 1 : N_TOKENS - (rows - 1) / 2.0;
        for (int32_t l = 0; l < info.n_layer; l++) {
            print_layer(decode ? "full decode" : "full prefill", l, &a[l]);
            CHECKF(a[l].rows == rows, "%s layer %d: %d rows", config, l, a[l].rows);
            CHECKF(fabs(a[l].recall - 1) < 1e-12, "%s layer %d: recall %.17g", config, l,
                   a[l].recall);
            CHECKF(fabs(a[l].keys_read - mean_keys) < 1e-9, "%s layer %d: keys read %.17g, "
                   "want %.17g", config, l, a[l].keys_read, mean_keys);
            CHECKF(a[l].out_rel_l2 < 1e-5, "%s layer %d: output error %.3g", config, l,
                   a[l].out_rel_l2);
            CHECKF(fabs(a[l].span_mass_read - a[l].span_mass) < 1e-12 &&
                       fabs(a[l].span_read - 1) < 1e-12 && a[l].span_mass > 0 &&
                       a[l].span_mass < 1,
                   "%s layer %d: span mass %.17g, read %.17g, keys %.17g", config, l,
                   a[l].span_mass, a[l].span_mass_read, a[l].span_read);
        }
    }

    /* 2. real pruning: numbers in range, repeatable */
    static const struct {
        const char *method, *settings;
    } k_runs[] = {
        {"hip", "k=32 block-k=8 sink=4 stream=32 dense-layers=0"},
        {"tokenselect", "k=24 init=4 local=64 chunk=64"},
        {"infinitehip", "chunks=16,4 k=64,32 refresh=1,1 q-stride=1,1 sink=4 stream=32 "
                        "first-k=32 dense-layers=0 rope=plain"},
    };
    for (size_t i = 0; i < sizeof k_runs / sizeof k_runs[0]; i++)
        for (int decode = 0; decode < 2; decode++) {
            int st = run(m, toks, k_runs[i].method, k_runs[i].settings, decode, a);
            CHECKF(st == LC_OK, "%s %s: %s", config, k_runs[i].method, lc_last_error());
            if (st != LC_OK) continue;
            st = run(m, toks, k_runs[i].method, k_runs[i].settings, decode, b);
            CHECK(st == LC_OK);
            const double max_keys = decode ? N_TOKENS + 1 : N_TOKENS;
            char         what[96];
            snprintf(what, sizeof what, "%s %s %s", config, k_runs[i].method,
                     decode ? "decode" : "prefill");
            for (int32_t l = 0; l < info.n_layer; l++) {
                print_layer(what, l, &a[l]);
                /* prefill prunes; in decode HiP's method records no selection for
                 * lc_attn_last (sparse false), so its decode probe counts every key read */
                CHECKF(a[l].sparse || decode, "%s layer %d: not sparse", what, l);
                CHECKF(a[l].recall > 0 && a[l].recall <= 1 + 1e-12, "%s layer %d: recall %.17g",
                       what, l, a[l].recall);
                CHECKF(a[l].sparse ? a[l].keys_read >= 32 && a[l].keys_read < max_keys
                                   : a[l].keys_read == max_keys && fabs(a[l].recall - 1) < 1e-12,
                       "%s layer %d: keys read %.17g", what, l, a[l].keys_read);
                CHECKF(isfinite(a[l].out_rel_l2) && a[l].out_rel_l2 >= 0, "%s layer %d: %.3g",
                       what, l, a[l].out_rel_l2);
                CHECKF(a[l].span_mass_read <= a[l].span_mass + 1e-12 && a[l].span_read >= 0 &&
                           a[l].span_read <= 1 + 1e-12,
                       "%s layer %d: span %.17g %.17g %.17g", what, l, a[l].span_mass,
                       a[l].span_mass_read, a[l].span_read);
                /* repeatable (the host sums run in threads: equal to rounding) */
                CHECKF(fabs(a[l].recall - b[l].recall) < 1e-12 &&
                           fabs(a[l].keys_read - b[l].keys_read) < 1e-9 &&
                           fabs(a[l].out_rel_l2 - b[l].out_rel_l2) < 1e-12 &&
                           fabs(a[l].span_mass - b[l].span_mass) < 1e-12,
                       "%s layer %d: two runs differ", what, l);
            }
        }

    /* 3. bad parameters */
    lc_context_params cp = lc_context_default_params();
    cp.attn              = "dense";
    lc_fidelity_params fp = lc_fidelity_default_params();
    CHECK(lc_eval_attn_fidelity(m, toks, N_TOKENS, &cp, &fp, a) == LC_ERR_INVALID_ARG);
    cp.attn   = "hip";
    fp.n_rows = N_TOKENS;
    CHECK(lc_eval_attn_fidelity(m, toks, N_TOKENS, &cp, &fp, a) == LC_ERR_INVALID_ARG);
    CHECK(lc_eval_attn_fidelity(m, NULL, N_TOKENS, &cp, &fp, a) == LC_ERR_INVALID_ARG);
done:
    free(a), free(b);
    lc_model_free(m);
}

int main(void) {
    const char *dir = getenv("TMPDIR");
    char        path[512];
    snprintf(path, sizeof path, "%s/lc_test_attn_fidelity_%d.gguf", dir && *dir ? dir : "/tmp",
             (int)getpid());
    model_checks("tiny", path);
    model_checks("tiny-qwen2", path);
    remove(path);
    TEST_END();
}
