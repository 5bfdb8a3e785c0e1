/*
 * bench_select.c — one attention layer through the HiP (attn/hip.c) or TokenSelect
 * (attn/tokenselect.c) method exactly as the engine runs it (query blocks, selection op, block-
 * sparse attention, HiP's mask refresh every r_m steps, TokenSelect's selection cache), next to
 * our dense attention on the same paged fp16 K/V, timed with CUDA events (HiP paper §5.4 Table 5;
 * TokenSelect paper §4.4, Fig. 7).
 *
 * usage: bench_select decode  hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS] [KNOB=VAL..]
 *        bench_select prefill hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS ROWS [KNOB=VAL..]
 * (each also as NAME=VALUE: mode, method, kv_heads, group, head_dim, keys, steps|rows; and
 * dense=0: skip the dense reference; -h lists them: bench_args.h)
 * KNOB=VAL: a method setting as --hip-KNOB / --ts-KNOB (e.g. k=2048, theta=2).
 * decode: STEPS consecutive decode steps of one sequence at KEYS context with one query (so
 *   TokenSelect's cache hits after its first step unless theta > 1); each step is timed alone
 *   and classed by whether it computed a selection (the method's counters); prints both classes'
 *   medians, the average over the steps, and dense decode's median (of 50, after 2 warm-ups).
 *   For TokenSelect the average at another hit rate h is h * hit + (1 - h) * miss from the two
 *   medians. Then, for TokenSelect, where a hit step's time goes: the method's forward, the
 *   query block's upload, select_tokens (a hit) and attn_segments each alone on the backend's ops (GPU
 *   time between events and the host's time to issue them, medians of 30 after 3 warm-ups, the
 *   stream synchronised before each), and attn_segments over the same number of tokens as 8-token
 *   runs and as one run (what the selection's many 1-token segments cost).
 * prefill: ROWS query rows at the end of a KEYS-token context (one chunk), medians of 3 runs
 *   after a warm-up.
 * RoPE: auto with a 131072-token trained context (Llama-3.1-8B): contexts past 128K re-index.
 * Timing: bench_time_ops (bench_util.h), the same warm-ups, repetitions and units as before.
 * Changed: LONGCTX_BENCH_DENSE=0 is now the option dense=0; a bad argument is an error (exit 2)
 * instead of atoi's 0. LONGCTX_BENCH_TUNE="NAME=VALUE,..." sets the backend's tuning
 * (bench_util.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (bench_util.h) */
#include "attn/tokenselect/tokenselect.h"
#include "backend/cuda/cuda.h"
#include "model/model.h"

#define BENCH_NAME "bench_select"
#include "bench_util.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a piece of work costs: the median over 30 runs (each after a synchronise, 3 warm-ups)
 * of the GPU time between two events around it and of the host's time to issue it. */
static int time_piece(const char *name, bench_call fn, void *ctx, cudaStream_t s) {
    const bench_op op = {fn, ctx, NULL, NULL, NULL};
    bench_times    tm;
    if (bench_time_ops(s, (bench_plan){3, 30, 1, true}, 1, &op, &tm)) return 1;
    printf("  %-58s GPU %7.1f us, host issue %7.1f us\n", name, 1000.0f * tm.median, 1000.0f * tm.host_median);
    return 0;
}

/* The method on the layer (one forward: a timed call), and the pieces of a TokenSelect decode
 * step (hit), each alone on the backend's ops. */
typedef struct ts_pieces {
    bench_method_call  mc;       /* first: a ts_pieces * serves as one (bench_call_forward) */
    bench_layer       *L;
    lc_attn_stats      stats;    /* the method's counters after the last step */
    int               *selected; /* per timed step: whether it computed a selection */
    lc_qblock      hqb;
    lc_qblock     *dqb;
    lc_select_tokens_args  sa;
    lc_attn_segments_args aa;
    bench_opcall       select, sparse; /* select_tokens (sa, on the rotated query) and attn_segments (aa) */
} ts_pieces;

/* after a timed step: whether it computed a selection (the method's counters) */
static int step_class(void *c, int i) {
    ts_pieces    *x = c;
    lc_attn_stats after;
    TRYL(x->mc.m->stats(x->mc.m, &after));
    if (i >= 0) x->selected[i] = after.selected > x->stats.selected;
    x->stats = after;
    return 0;
}
static int piece_upload(void *c, int i) {
    ts_pieces  *x = c;
    lc_backend *b = x->L->b;
    int (*up)(lc_backend *, void *, const void *, size_t) = b->upload_async ? b->upload_async : b->upload;
    return up(b, x->dqb, &x->hqb, sizeof x->hqb) != LC_OK;
}
static int piece_select(void *c, int i) { return bench_call_select_tokens(&((ts_pieces *)c)->select, i); }
static int piece_sparse(void *c, int i) { return bench_call_attn_segments(&((ts_pieces *)c)->sparse, i); }
static int piece_select_sparse(void *c, int i) { return piece_select(c, i) || piece_sparse(c, i); }
static int piece_all_ops(void *c, int i) { return piece_upload(c, i) || piece_select(c, i) || piece_sparse(c, i); }

static int ts_breakdown(ts_pieces *x, int64_t keys, const lc_tokenselect_params *tp, cudaStream_t s) {
    lc_backend   *b = x->L->b;
    const int32_t k = tp->k, pos0 = (int32_t)keys - 1;
    int32_t       win0 = pos0 + 1 - tp->n_local;
    if (win0 < (tp->n_init < pos0 + 1 ? tp->n_init : pos0 + 1)) win0 = tp->n_init < pos0 + 1 ? tp->n_init : pos0 + 1;
    x->hqb = (lc_qblock){0, 0, 1, pos0, win0};
    const int32_t nf = x->L->n_head * x->L->kv.head_dim;
    x->dqb           = b->alloc(b, sizeof(lc_qblock), "qb");
    lc_segment *sel  = b->alloc(b, sizeof(lc_segment) * (size_t)k, "sel");
    int32_t    *seln = b->alloc(b, sizeof(int32_t), "sel_n");
    float      *cq   = b->alloc(b, sizeof(float) * (size_t)nf, "cache_q");
    int32_t    *cv   = b->alloc(b, sizeof(int32_t), "cache_valid");
    lc_segment *syn  = malloc(sizeof(lc_segment) * (size_t)k);
    if (!x->dqb || !sel || !seln || !cq || !cv || !syn) return fprintf(stderr, "bench_select: out of memory\n"), 1;
    const int32_t zero = 0;
    TRYL(b->upload(b, x->dqb, &x->hqb, sizeof x->hqb));
    TRYL(b->upload(b, cv, &zero, sizeof zero));
    memset(&x->sa, 0, sizeof x->sa);
    x->sa.n_init = tp->n_init, x->sa.k = k, x->sa.fp_pos = tp->n_local, x->sa.gqa_mod = tp->gqa_mod;
    x->sa.max_rows = 1, x->sa.max_cand = win0 - tp->n_init, x->sa.out_cap = k;
    x->sa.out = sel, x->sa.out_n = seln, x->sa.cache_q = cq, x->sa.cache_valid = cv, x->sa.theta = 2.0f;
    x->select   = bench_layer_opcall(x->L, x->dqb, &x->sa);
    x->select.q = x->L->dqr;
    x->sparse   = bench_layer_opcall(x->L, x->dqb, &x->aa);
    TRYL(piece_select(x, 0)); /* a miss: the selection and a valid cache */
    x->sa.theta = -1.0f;      /* then every call hits */
    memset(&x->aa, 0, sizeof x->aa);
    x->aa.n_sink = tp->n_init, x->aa.n_groups = 1, x->aa.sel_cap = k, x->aa.max_sel = k;
    x->aa.attn_rope  = keys > 131072 ? LC_ATTN_ROPE_STREAMING : LC_ATTN_ROPE_PLAIN;
    x->aa.max_rows   = 1, x->aa.max_window = pos0 + 1 - win0;
    x->aa.sel = sel, x->aa.sel_n = seln;
    int32_t n_seg = 0;
    TRYL(b->download(b, &n_seg, seln, sizeof n_seg));
    printf("# hit-step pieces at %lld keys (selection: %d segments for %d tokens; sink %d, window %d)\n",
           (long long)keys, n_seg, k, tp->n_init, pos0 + 1 - win0);
    int rc = time_piece("method forward (a cache hit)", bench_call_forward, x, s);
    rc |= time_piece("upload of the query block (20 bytes)", piece_upload, x, s);
    rc |= time_piece("select_tokens, a hit", piece_select, x, s);
    rc |= time_piece("attn_segments over that selection", piece_sparse, x, s);
    rc |= time_piece("select_tokens hit + attn_segments", piece_select_sparse, x, s);
    rc |= time_piece("upload + select_tokens hit + attn_segments", piece_all_ops, x, s);
    /* the same number of tokens as 8-token runs and as one run (segment count vs cost) */
    const int32_t cand = win0 - tp->n_init;
    for (int len = 8; len <= k && cand >= k; len = len == 8 ? k : k + 1) {
        const int32_t ns = k / len;
        for (int32_t i = 0; i < ns; i++)
            syn[i] = (lc_segment){tp->n_init + (int32_t)((int64_t)i * (cand - len) / (ns > 1 ? ns - 1 : 1)), len};
        TRYL(b->upload(b, sel, syn, sizeof(lc_segment) * (size_t)ns));
        TRYL(b->upload(b, seln, &ns, sizeof ns));
        char name[96];
        snprintf(name, sizeof name, "attn_segments over %d segments of %d tokens", ns, len);
        rc |= time_piece(name, piece_sparse, x, s);
    }
    b->dealloc(b, x->dqb), b->dealloc(b, sel), b->dealloc(b, seln), b->dealloc(b, cq), b->dealloc(b, cv);
    free(syn);
    return rc;
}

/* "KNOB=VAL" arguments past the table: the method's settings string */
static int add_knob(void *ctx, const char *arg) {
    char        *settings = ctx;
    const size_t at       = strlen(settings);
    return snprintf(settings + at, 1024 - at, "%s%s", at ? " " : "", arg) >= (int)(1024 - at);
}

int main(int argc, char **argv) {
    int     mode = 0, method = 0, H = 0, G = 0, D = 0, n = 0, dense = 1;
    int64_t keys = 0;
    char    settings[1024] = "";
    const bench_opt opts[] = {
        {"mode", 'c', &mode, "decode|prefill", 0, 0, 1, true, "decode steps or one prefill chunk"},
        {"method", 'c', &method, "hip|tokenselect", 0, 0, 2, true, "the attention method"},
        BENCH_OPTS_SHAPE(&H, &G, &D, &keys, 2, 3),
        BENCH_OPTS_STEPS_DENSE(&n, &dense, 7),
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    BENCH_ARGS("decode|prefill hip|tokenselect N_KV_HEADS GROUP HEAD_DIM KEYS [STEPS|ROWS] [KNOB=VAL ...] "
               "[NAME=VALUE ...]",
               opts, add_knob, settings, "KNOB=VAL: a setting of the method (--hip-KNOB / --ts-KNOB)");
    const int     decode = mode == 0;
    const char   *kind   = method ? "tokenselect" : "hip";
    const bool    is_ts  = method == 1;
    const int32_t arg7 = n ? n : (decode ? 256 : 32768);
    const int32_t n_head = H * G, layer = 5;
    const int32_t rows = decode ? 1 : arg7;
    if (rows > keys) {
        fprintf(stderr, BENCH_NAME ": rows=%d > keys=%lld\n", rows, (long long)keys);
        return 2;
    }
    char desc[512];
    if (lc_attn_check(kind, settings, desc, sizeof desc) != LC_OK) { /* a bad KNOB=VAL */
        fprintf(stderr, BENCH_NAME ": %s; the options of " BENCH_NAME ": ", lc_last_error());
        bench_args_names(stderr, opts, n_opts, NULL);
        fprintf(stderr, "\n");
        return 2;
    }
    lc_context_params cp = lc_context_default_params();
    cp.attn              = kind;
    cp.attn_settings     = settings;
    lc_tokenselect_params tsp = {0}; /* TokenSelect's settings, for the breakdown */
    if (is_ts) {
        void *parsed = NULL;
        TRYL(lc_attn_settings_parse(&lc_attn_desc_tokenselect, settings, &parsed));
        tsp = *(const lc_tokenselect_params *)parsed;
        free(parsed);
    }
    lc_backend *b;
    if (bench_backend(&b)) return 1;
    bench_layer L;
    if (bench_layer_init(&L, b, H, G, D, keys, rows)) return 1;
    const lc_attn_shape shape = {32, n_head, H, D, 131072};
    lc_attn_method     *m     = NULL;
    TRYL(lc_attn_create(b, &shape, &cp, &m));
    void *state = NULL;
    TRYL(m->state_create(m, layer, &state));
    cudaStream_t s = (cudaStream_t)lc_cuda_stream_handle();
    printf("# %s %s %d/%d heads, dim %d, %lld keys, layer %d (%s)\n", decode ? "decode" : "prefill",
           kind, n_head, H, D, (long long)keys, layer, desc);

    float dense_us = 0;
    if (bench_layer_dense_us(&L, s, dense ? (decode ? 50 : 3) : 0, &dense_us)) return 1;
    ts_pieces x;
    memset(&x, 0, sizeof x);
    x.mc = (bench_method_call){m, &L, layer, state}, x.L = &L;
    if (!decode) {
        const bench_op op = {bench_call_forward, &x, bench_call_forward_begin, NULL, NULL};
        bench_times    tm;
        if (bench_time_ops(s, (bench_plan){1, 3, 1, false}, 1, &op, &tm)) return 1;
        const float us = 1000.0f * tm.median;
        printf("prefill rows %d at %lld keys: %s %.1f us, dense %.1f us, speed-up %.2fx\n", rows,
               (long long)keys, kind, us, dense_us, dense_us / us);
    } else {
        float *cls[2], *steps = malloc(sizeof(float) * (size_t)arg7);
        int    n_cls[2] = {0, 0};
        cls[0] = malloc(sizeof(float) * (size_t)arg7), cls[1] = malloc(sizeof(float) * (size_t)arg7);
        x.selected = malloc(sizeof(int) * (size_t)arg7);
        for (int i = 0; i < 2; i++) /* warm-up, then a fresh state */
            if (bench_call_forward_begin(&x, i) || bench_call_forward(&x, i)) return 1;
        m->state_free(m, state);
        TRYL(m->state_create(m, layer, &state));
        x.mc.state = state;
        TRYL(m->stats(m, &x.stats));
        /* each step timed alone, in order, then classed by the counters */
        const bench_op op = {bench_call_forward, &x, bench_call_forward_begin, step_class, steps};
        bench_times    tm;
        if (bench_time_ops(s, (bench_plan){0, arg7, 1, false}, 1, &op, &tm)) return 1;
        double sum = 0;
        for (int i = 0; i < arg7; i++) {
            const int c = x.selected[i] ? 0 : 1;
            sum += steps[i];
            cls[c][n_cls[c]++] = 1000.0f * steps[i];
        }
        const double avg = 1000.0 * sum / arg7;
        const float  sel = bench_median(cls[0], n_cls[0]), reu = bench_median(cls[1], n_cls[1]);
        printf("decode %lld keys, %d steps: %s average %.1f us/step, dense %.1f us, speed-up %.2fx\n",
               (long long)keys, arg7, kind, avg, dense_us, dense_us / avg);
        printf("  steps computing a selection: %d, median %.1f us; reusing one: %d, median %.1f us\n",
               n_cls[0], sel, n_cls[1], reu);
        if (is_ts && n_cls[0] > 0 && n_cls[1] > 0 && sel > reu) {
            /* the hit rate at which the average reaches 20x dense */
            const double h20 = (sel - dense_us / 20.0) / (sel - reu);
            printf("  20x dense needs a hit rate >= %.1f%% (h*%.1f + (1-h)*%.1f <= %.1f us)\n",
                   100.0 * h20, reu, sel, dense_us / 20.0);
        }
        free(cls[0]), free(cls[1]), free(steps), free(x.selected);
        if (is_ts && ts_breakdown(&x, keys, &tsp, s)) return 1; /* where a hit step's time goes */
    }
    m->state_free(m, state);
    lc_attn_method_free(m);
    bench_layer_free(&L);
    b->free(b);
    return 0;
}
