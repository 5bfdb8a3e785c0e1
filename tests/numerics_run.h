/*
 * numerics_run.h — the NaN scenarios test_model_hostile.c (CPU) and test_numerics_cuda.c
 * (GPU) share (issue 20 item 6). Given a good model file with an untied output head:
 *   1. greedy generation of NUMERICS_GEN tokens from a prompt, alone (the reference);
 *   2. the embedding row of a token A generates (its k-th, k >= 2, one found nowhere else)
 *      poisoned with NaN: A draws its first k tokens as before, then the step that feeds the
 *      poisoned token (a decode step: on CUDA a graph replay when k >= 3) has NaN logits, so the sequence finishes with
 *      LC_FINISH_ERROR, an error naming the token embeddings, and no fourth token; a second
 *      sequence in the same context whose reference output does not contain that token is
 *      not harmed (same tokens as alone);
 *   3. a NaN feed-forward matrix in layer 1: the error names layer 1 and the feed-forward
 *      block, and scoring fails with LC_ERR_NUMERIC;
 * each with check_numerics off (the sampling op's check, then a diagnostic re-run) and on.
 */
#ifndef LC_TEST_NUMERICS_RUN_H
#define LC_TEST_NUMERICS_RUN_H

#include "gguf_edit.h"
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NUMERICS_GEN 6

typedef struct numerics_gen {
    int32_t   tokens[16];
    int32_t   n;
    lc_finish finish;
    char      error[512];
} numerics_gen;

typedef struct numerics_cfg {
    lc_device device;
    int32_t   page_size;
} numerics_cfg;

static int numerics_load(const numerics_cfg *cfg, const char *path, lc_model **m) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = cfg->device;
    mp.n_threads       = 1;
    *m                 = NULL;
    return lc_model_load(path, &mp, m);
}

/* Greedy generation of NUMERICS_GEN tokens for each prompt, all in one context. */
static int numerics_generate(const numerics_cfg *cfg, lc_model *m, bool check,
                             const int32_t *const *prompts, const size_t *lens, int n,
                             numerics_gen *out) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 128;
    cp.n_seq_max         = n;
    cp.page_size         = cfg->page_size;
    cp.check_numerics    = check;
    lc_context *c        = NULL;
    int         st       = lc_context_create(m, &cp, &c);
    CHECKF(st == LC_OK, "context: %s", lc_last_error());
    if (st != LC_OK) return st;
    int32_t ids[4];
    for (int i = 0; i < n; i++) {
        lc_request r = {0};
        r.prompt     = prompts[i];
        r.n_prompt   = lens[i];
        r.max_tokens = NUMERICS_GEN;
        r.sampling   = lc_sampling_default();
        r.sampling.temperature = 0.0f;
        r.ignore_eos           = true;
        CHECK(lc_context_add(c, &r, &ids[i]) == LC_OK);
        memset(&out[i], 0, sizeof out[i]);
    }
    for (int step = 0; step < 60; step++) {
        lc_event ev[4];
        size_t   ne = 0;
        st          = lc_context_step(c, ev, 4, &ne);
        CHECKF(st == LC_OK, "step: %s", lc_last_error());
        if (st != LC_OK || ne == 0) break;
        for (size_t k = 0; k < ne; k++) {
            int i = 0;
            while (i < n && ids[i] != ev[k].seq_id) i++;
            if (i == n) continue;
            if (ev[k].token >= 0 && out[i].n < 16) out[i].tokens[out[i].n++] = ev[k].token;
            if (ev[k].finish != LC_FINISH_NONE) {
                out[i].finish = ev[k].finish;
                CHECK((ev[k].finish == LC_FINISH_ERROR) == (ev[k].error != NULL));
                if (ev[k].error) snprintf(out[i].error, sizeof out[i].error, "%s", ev[k].error);
            }
        }
    }
    lc_context_free(c);
    return st;
}

static bool numerics_contains(const numerics_gen *g, int32_t tok) {
    for (int32_t i = 0; i < g->n; i++)
        if (g->tokens[i] == tok) return true;
    return false;
}

/* Run the scenarios on src (a model with an untied output head and n_layer >= 2); files go
 * to dir. */
static void numerics_scenarios(const numerics_cfg *cfg, const char *src, const char *dir) {
    /* two prompts whose greedy outputs do not share the poisoned token */
    const int32_t  pa[] = {5, 17, 80, 23, 42}, pb[] = {11, 3, 99, 64};
    const int32_t *both[2] = {pa, pb};
    const size_t   lens[2] = {5, 4};
    numerics_gen   ref[2];
    lc_model      *m = NULL;
    CHECKF(numerics_load(cfg, src, &m) == LC_OK, "%s: %s", src, lc_last_error());
    if (!m) return;
    numerics_generate(cfg, m, false, &both[0], &lens[0], 1, &ref[0]);
    numerics_generate(cfg, m, false, &both[1], &lens[1], 1, &ref[1]);
    lc_model_free(m);
    CHECK(ref[0].n == NUMERICS_GEN && ref[1].n == NUMERICS_GEN);
    /* the poisoned token: the first of A's generated tokens from the second on that appears
     * nowhere else (prompts, A's earlier tokens, B's output) */
    int32_t bad = -1, k_bad = 0;
    for (int32_t k = 1; k < ref[0].n && bad < 0; k++) {
        const int32_t t  = ref[0].tokens[k];
        bool          ok = !numerics_contains(&ref[1], t);
        for (int i = 0; i < 5; i++) ok = ok && pa[i] != t;
        for (int i = 0; i < 4; i++) ok = ok && pb[i] != t;
        for (int32_t i = 0; i < k; i++) ok = ok && ref[0].tokens[i] != t;
        if (ok) bad = t, k_bad = k;
    }
    const bool usable = bad >= 0;
    CHECKF(usable, "no generated token of sequence A is unique to it: pick other prompts");
    char path[256];
    for (int check = 0; check < 2 && usable; check++) {
        gguf_edit e = {.fill_tensor = "token_embd.weight", .fill_value = NAN, .fill_row = bad};
        snprintf(path, sizeof path, "%s/embd_nan.gguf", dir);
        CHECKF(gguf_edit_copy(src, path, &e) == LC_OK, "%s", lc_last_error());
        m = NULL;
        if (numerics_load(cfg, path, &m) == LC_OK) {
            numerics_gen g[2];
            numerics_generate(cfg, m, check, both, lens, 2, g);
            CHECKF(g[0].finish == LC_FINISH_ERROR && strstr(g[0].error, "token embeddings") &&
                       strstr(g[0].error, "NaN") && g[0].n == k_bad + 1 &&
                       memcmp(g[0].tokens, ref[0].tokens, sizeof(int32_t) * (size_t)g[0].n) == 0,
                   "check %d: finish %d after %d tokens (want %d), error \"%s\"", check,
                   g[0].finish, g[0].n, k_bad + 1, g[0].error);
            CHECKF(g[1].finish == LC_FINISH_LENGTH && g[1].n == NUMERICS_GEN &&
                       memcmp(g[1].tokens, ref[1].tokens, sizeof(int32_t) * NUMERICS_GEN) == 0,
                   "check %d: the healthy sequence was harmed (finish %d, %d tokens, %s)", check,
                   g[1].finish, g[1].n, g[1].error);
        } else {
            CHECKF(false, "%s: %s", path, lc_last_error());
        }
        lc_model_free(m);
        unlink(path);

        gguf_edit e2 = {.fill_tensor = "blk.1.ffn_down.weight", .fill_value = NAN,
                        .fill_row = -1};
        snprintf(path, sizeof path, "%s/ffn_nan.gguf", dir);
        CHECKF(gguf_edit_copy(src, path, &e2) == LC_OK, "%s", lc_last_error());
        m = NULL;
        if (numerics_load(cfg, path, &m) == LC_OK) {
            numerics_gen g[1];
            numerics_generate(cfg, m, check, &both[1], &lens[1], 1, g);
            CHECKF(g[0].finish == LC_FINISH_ERROR && strstr(g[0].error, "layer 1") &&
                       strstr(g[0].error, "feed-forward") && g[0].n == 0,
                   "check %d: finish %d, %d tokens, error \"%s\"", check, g[0].finish, g[0].n,
                   g[0].error);
            lc_context_params cp = lc_context_default_params();
            cp.n_ctx             = 128;
            cp.page_size         = cfg->page_size;
            cp.check_numerics    = check;
            lc_context *c        = NULL;
            if (lc_context_create(m, &cp, &c) == LC_OK) {
                double         lp[4];
                lc_score_range r = {1, 4};
                CHECKF(lc_context_score(c, pb, 4, &r, 1, lp) == LC_ERR_NUMERIC, "score: %s",
                       lc_last_error());
                lc_context_free(c);
            }
        } else {
            CHECKF(false, "%s: %s", path, lc_last_error());
        }
        lc_model_free(m);
        unlink(path);
    }
}

#endif
