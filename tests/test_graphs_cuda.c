/*
 * test_graphs_cuda.c — CUDA graphs of decode steps change nothing but speed: generation with
 * graphs on (the default) gives exactly the tokens of the same generation with the model's
 * tuning.no_cuda_graphs set (on its backend, between contexts), for
 *   1. one sequence, greedy, 40 tokens after a 1000-token prompt (the longest sequence
 *      crosses 1024 keys: a new split bucket, so a new shape is captured mid-generation);
 *   2. three sequences batched (prompts of 5, 60 and 130 tokens), two greedy and one sampled
 *      (temperature, top-k/p, min-p, repetition penalty, fixed seed), 32 tokens each;
 *   3. the same with each sparse method (InfiniteHiP, HiP, TokenSelect, StreamingLLM) forced
 *      onto its sparse path with pruning budgets, the sequences joining 2 steps apart (so their
 *      selection caches refresh at different steps), and most decode steps launched as graphs;
 * then prints decode tokens/s with graphs on and off (one sequence, 128 tokens). Runs on
 * SmolLM2-135M-Instruct when the model file is present, else on a random-weight model of its
 * configuration written to /tmp. Skips (exit 77) without a GPU.
 */
#include "backend/backend.h"
#include "longctx.h"
#include "model/model.h"
#include "test_util.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEQ 4
#define MAX_GEN 160

typedef struct run_out {
    int32_t tokens[MAX_SEQ][MAX_GEN];
    int32_t n[MAX_SEQ];
    double  decode_s; /* wall time of the steps after the first decode step */
    int32_t decode_tokens;
} run_out;

/* The model's CUDA graphs on or off (its backend's tuning, read at each step). */
static void set_graphs(lc_model *m, bool on) { m->backend->tuning.no_cuda_graphs = !on; }

/* The contexts' attention method (NULL: dense), forced onto its sparse path, and how many
 * steps apart the sequences join (0: all at once) */
static const char *g_attn, *g_settings;
static int         g_stagger;

/* Generate for n_seq requests in one context; false on an error (already CHECKed). */
static bool run(lc_model *m, int n_seq, const int32_t *const *prompts, const size_t *n_prompt,
                const lc_sampling *smp, int32_t max_tokens, run_out *o) {
    memset(o, 0, sizeof *o);
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 2048;
    cp.n_seq_max         = n_seq;
    cp.attn              = g_attn;
    cp.attn_settings     = g_settings;
    cp.sparse_always     = g_attn != NULL;
    lc_context *c        = NULL;
    int         rc       = lc_context_create(m, &cp, &c);
    CHECKF(rc == LC_OK, "context: %s", lc_last_error());
    if (rc != LC_OK) return false;
    int32_t ids[MAX_SEQ];
    int     added = 0;
    bool   ok = true, decoding = false;
    double t0 = 0;
    for (int guard = 0; guard < 10000; guard++) {
        /* sequence i joins at step i * g_stagger (its refresh phase differs from the others') */
        for (; added < n_seq && added * g_stagger <= guard; added++) {
            lc_request r = {.prompt = prompts[added], .n_prompt = n_prompt[added],
                            .max_tokens = max_tokens, .sampling = smp[added], .ignore_eos = true};
            rc           = lc_context_add(c, &r, &ids[added]);
            CHECKF(rc == LC_OK, "add: %s", lc_last_error());
            if (rc != LC_OK) {
                lc_context_free(c);
                return false;
            }
        }
        lc_event ev[MAX_SEQ];
        size_t   n_ev = 0;
        rc            = lc_context_step(c, ev, MAX_SEQ, &n_ev);
        CHECKF(rc == LC_OK, "step: %s", lc_last_error());
        if (rc != LC_OK) {
            ok = false;
            break;
        }
        if (n_ev == 0) break;
        bool live = false;
        for (size_t e = 0; e < n_ev; e++)
            for (int i = 0; i < added; i++)
                if (ev[e].seq_id == ids[i]) {
                    if (ev[e].token >= 0 && o->n[i] < MAX_GEN) o->tokens[i][o->n[i]++] = ev[e].token;
                    if (decoding && ev[e].token >= 0) o->decode_tokens++;
                    live = live || ev[e].finish == LC_FINISH_NONE;
                }
        if (!decoding && added == n_seq) {
            decoding = true; /* the prompts are done (one chunk each here) */
            t0       = lc_time_s();
        }
        if (!live && added == n_seq) break;
    }
    o->decode_s = lc_time_s() - t0;
    lc_context_free(c);
    return ok;
}

static void compare(const char *what, const run_out *a, const run_out *b, int n_seq) {
    for (int i = 0; i < n_seq; i++) {
        CHECKF(a->n[i] == b->n[i] && memcmp(a->tokens[i], b->tokens[i], sizeof(int32_t) * (size_t)a->n[i]) == 0,
               "%s: sequence %d differs with graphs off (%d vs %d tokens)", what, i, a->n[i], b->n[i]);
        if (a->n[i] == b->n[i])
            for (int t = 0; t < a->n[i]; t++)
                if (a->tokens[i][t] != b->tokens[i][t]) {
                    fprintf(stderr, "  first difference at token %d: %d vs %d\n", t, a->tokens[i][t],
                            b->tokens[i][t]);
                    break;
                }
    }
}

int main(void) {
    lc_backend *probe;
    REQUIRE_CUDA_BACKEND(probe);
    probe->free(probe);

    const char *path = LC_MODEL_PATH;
    char        gen_path[64] = "";
    FILE       *f            = fopen(path, "rb");
    if (f) {
        fclose(f);
    } else {
        snprintf(gen_path, sizeof gen_path, "/tmp/lc_test_graphs_%d.gguf", (int)getpid());
        lc_gen_params gp = {.config = "smollm2-135m", .path = gen_path, .type = LC_GEN_BF16, .seed = 1};
        fprintf(stderr, "%s absent: generating a random smollm2-135m model at %s\n", path, gen_path);
        int rc = lc_model_generate(&gp);
        CHECKF(rc == LC_OK, "generate: %s", lc_last_error());
        if (rc != LC_OK) TEST_END();
        path = gen_path;
    }
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CUDA;
    lc_model *m        = NULL;
    int       rc       = lc_model_load(path, &mp, &m);
    CHECKF(rc == LC_OK, "load: %s", lc_last_error());
    if (rc != LC_OK) {
        if (gen_path[0]) remove(gen_path);
        TEST_END();
    }
    lc_model_info info;
    lc_model_get_info(m, &info);

    static int32_t long_prompt[1000], p1[5], p2[60], p3[130];
    for (int i = 0; i < 1000; i++) long_prompt[i] = (int32_t)((i * 7919 + 13) % (info.n_vocab - 300)) + 256;
    for (int i = 0; i < 130; i++) {
        if (i < 5) p1[i] = 300 + i;
        if (i < 60) p2[i] = (int32_t)((i * 31 + 7) % 1000) + 400;
        p3[i] = (int32_t)((i * 97 + 3) % 5000) + 256;
    }
    lc_sampling greedy = lc_sampling_default();
    greedy.temperature = 0.0f;
    lc_sampling warm   = lc_sampling_default();
    warm.seed = 3, warm.repeat_penalty = 1.1f;
    static run_out on, off;

    { /* 1 */
        const int32_t *pr[1] = {long_prompt};
        size_t         np[1] = {1000};
        set_graphs(m, true);
        bool a = run(m, 1, pr, np, &greedy, 40, &on);
        set_graphs(m, false);
        bool b = run(m, 1, pr, np, &greedy, 40, &off);
        if (a && b) {
            CHECK(on.n[0] == 40);
            compare("one sequence, 1000-token prompt", &on, &off, 1);
        }
    }
    { /* 2 */
        const int32_t *pr[3]  = {p1, p2, p3};
        size_t         np[3]  = {5, 60, 130};
        lc_sampling    smp[3] = {greedy, warm, greedy};
        set_graphs(m, true);
        bool a = run(m, 3, pr, np, smp, 32, &on);
        set_graphs(m, false);
        bool b = run(m, 3, pr, np, smp, 32, &off);
        if (a && b) {
            CHECK(on.n[0] == 32 && on.n[1] == 32 && on.n[2] == 32);
            compare("three sequences", &on, &off, 3);
        }
    }
    { /* 3: each sparse method (forced onto its sparse path, budgets that prune) graphs on ==
         off, three sequences joining 2 steps apart (different refresh phases, mixed
         prefill/decode steps, then decode steps of all three), and its decode steps replayed */
        static const char *const methods[][2] = {
            {"infinitehip", "preset=3k chunks=16,4 k=64,32 refresh=3,2 q-stride=4,1 sink=8 "
                            "stream=32 first-k=32 dense-layers=1"},
            {"hip", "preset=512 k=64 block-k=8 block-q=32 sink=8 stream=32 refresh=3 "
                    "dense-layers=1"},
            {"tokenselect", "k=32 init=8 chunk=32 local=32 dense-layers=1"},
            {"streaming", "sink=4 window=32 block=32"},
        };
        static int32_t q1[300], q2[200], q3[120];
        for (int i = 0; i < 300; i++) {
            q1[i] = (int32_t)((i * 7919 + 13) % (info.n_vocab - 300)) + 256;
            if (i < 200) q2[i] = (int32_t)((i * 104729 + 5) % (info.n_vocab - 300)) + 256;
            if (i < 120) q3[i] = (int32_t)((i * 31 + 7) % 1000) + 400;
        }
        const int32_t *pr[3]  = {q1, q2, q3};
        size_t         np[3]  = {300, 200, 120};
        lc_sampling    smp[3] = {greedy, warm, greedy};
        for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
            g_attn = methods[k][0], g_settings = methods[k][1], g_stagger = 2;
            CHECKF(lc_attn_check(g_attn, g_settings, NULL, 0) == LC_OK, "%s: %s", g_attn,
                   lc_last_error());
            set_graphs(m, true);
            const int64_t launches0 = m->backend->graph_launches;
            bool          a         = run(m, 3, pr, np, smp, 40, &on);
            const int64_t launched  = m->backend->graph_launches - launches0;
            set_graphs(m, false);
            bool b = run(m, 3, pr, np, smp, 40, &off);
            if (a && b) {
                CHECK(on.n[0] == 40 && on.n[1] == 40 && on.n[2] == 40);
                compare(g_attn, &on, &off, 3);
                /* ~36 decode steps of all three; each launch shape (refresh phases, launch-size
                   bucket) runs eagerly once before it is captured */
                CHECKF(launched >= 12, "%s: only %lld decode steps ran as graphs", g_attn,
                       (long long)launched);
                fprintf(stderr, "%s: %lld steps launched as graphs\n", g_attn, (long long)launched);
            }
        }
        g_attn = NULL, g_settings = NULL, g_stagger = 0;
    }
    { /* speed */
        const int32_t *pr[1] = {p2};
        size_t         np[1] = {16};
        for (int rep = 0; rep < 2; rep++) { /* the first pass warms up plans and kernels */
            set_graphs(m, true);
            bool a = run(m, 1, pr, np, &greedy, 128, &on);
            set_graphs(m, false);
            bool b = run(m, 1, pr, np, &greedy, 128, &off);
            if (rep == 1 && a && b) {
                compare("speed run", &on, &off, 1);
                fprintf(stderr, "decode, 1 sequence, %d tokens: graphs on %.1f tok/s, off %.1f tok/s\n",
                        on.decode_tokens, on.decode_tokens / on.decode_s,
                        off.decode_tokens / off.decode_s);
            }
        }
    }
    lc_model_free(m);
    if (gen_path[0]) remove(gen_path);
    TEST_END();
}
