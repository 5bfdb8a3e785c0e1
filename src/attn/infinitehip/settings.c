/*
 * settings.c — InfiniteHiP's settings table: every key with its range and help, the named
 * presets of the paper (App. F and E.2; spec/infinitehip-and-hip.md §3.6) and ours, and the
 * checks across keys that turn a bad combination into a message naming the key and its allowed
 * range before any kernel sees it.
 */
#include "attn/infinitehip/infinitehip.h"

#include "util/util.h"

#include <stddef.h>

#define HIP_MAX_TOKENS (1 << 30)
#define OFF(f) offsetof(lc_infinitehip_params, f)
#define STAGES OFF(n_stages)


static const lc_setting keys[] = {
    {"chunks", LC_SETTING_INT_LIST, OFF(chunk), LC_COUNT_SETS, STAGES, 1, 1 << 20, NULL,
     "l_c per stage: powers of two, each dividing the previous (sets the stages)", "chunk"},
    {"k", LC_SETTING_INT_LIST, OFF(k), LC_COUNT_SETS, STAGES, 1, HIP_MAX_TOKENS, NULL,
     "tokens each stage keeps: multiples of its chunk, non-increasing (sets the stages)", NULL},
    {"refresh", LC_SETTING_INT_LIST, OFF(refresh), LC_COUNT_MATCH, STAGES, 1, 1 << 20, NULL,
     "decode steps between recomputations of each stage", NULL},
    {"q-stride", LC_SETTING_INT_LIST, OFF(q_stride), LC_COUNT_MATCH, STAGES, 1, 64, NULL,
     "query rows mean-pooled per scoring query, per stage (at most block-q)", NULL},
    {"kv-descent", LC_SETTING_INT_LIST, OFF(kv_descent), LC_COUNT_MATCH, STAGES, 0, 1, NULL,
     "ours, per stage: 1 = one SelectRep descent per KV head (max over its query heads)", NULL},
    {"block-q", LC_SETTING_INT, OFF(block_q), 0, 0, 1, 64, NULL, "b_q: query rows per block in "
     "prefill", NULL},
    {"sink", LC_SETTING_INT, OFF(n_sink), 0, 0, 0, HIP_MAX_TOKENS, NULL,
     "first tokens always attended", NULL},
    {"stream", LC_SETTING_INT, OFF(n_stream), 0, 0, 1, HIP_MAX_TOKENS, NULL,
     "most recent tokens always attended", NULL},
    {"first-layers", LC_SETTING_INT, OFF(first_layers), 0, 0, 0, 1 << 16, NULL,
     "layers that prune with chunk-indexed RoPE and keep first-k tokens", NULL},
    {"first-k", LC_SETTING_INT, OFF(first_k), 0, 0, 1, HIP_MAX_TOKENS, NULL,
     "tokens the first layers keep: a multiple of the last chunk, at most the first k", NULL},
    LC_SETTING_DENSE_LAYERS(lc_infinitehip_params),
    {"rope", LC_SETTING_ENUM, OFF(rope), 0, 0, 0, 0, lc_rope_names_stream,
     "RoPE past the trained window: auto re-indexes there, extend always, plain never, stream "
     "re-indexes only the attention", NULL},
    LC_SETTING_HEADS(lc_infinitehip_params, "selection"),
    {"stagger", LC_SETTING_BOOL, OFF(stagger), 0, 0, 0, 1, NULL,
     "ours: odd layers shift the first stage's chunk grid by half a chunk", NULL},
    {"overlap", LC_SETTING_BOOL, OFF(overlap), 0, 0, 0, 1, NULL,
     "ours: first-stage chunks start every half chunk (2x its work)", NULL},
    LC_SETTING_TAIL_BLOCK(lc_infinitehip_params, 64, "block"),
    {"attn-span", LC_SETTING_INT, OFF(attn_span), 0, 0, 0, HIP_MAX_TOKENS, NULL,
     "ours: past the window the attention keeps the gaps between attended keys, compressed to "
     "fit this many positions (0: consecutive positions, the paper's re-indexing)", NULL},
};

/* The shared defaults (256 sink, 1024 streaming, b_q 64, three stages, 4096 tokens kept in the
 * first three layers which also use chunk-indexed RoPE; stages 1-2 pool 4 query rows, as the
 * reference's ScanStage(64, 4, ...)); every preset sets its chunks, budgets and refreshes. */
static const lc_infinitehip_params base = {
    .n_stages     = 3,
    .block_q      = 64,
    .n_sink       = 256,
    .n_stream     = 1024,
    .first_layers = 3,
    .first_k      = 4096,
    .dense_layers = 0,
    .rope         = LC_HIP_ROPE_AUTO,
    .per_group    = 0,
    .q_stride     = {4, 4, 1},
};

#define PAPER_3K "chunks=256,32,8 k=32768,8192,2048"
#define FINE64 "chunks=64,16,1 k=32768,8192,2048 refresh=16,8,4 overlap=1"

static const lc_settings_preset presets[] = {
    /* default (ours; lc_context_default_params): 3k-fine64 whose prompt ends (the question)
     * select in 16-row blocks: Qwen2.5-Coder-1.5B, fact, 20 paired trials (H200,
     * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 11/20 at 256K against 9/20
     * without, 20/20 at 64K as without. (One descent per KV head, kv-descent=1,1,1, halves its
     * cost — 62.0 -> 37.4 ms at 128K, 311 -> 169 ms at 1M — but found 9/10 needles at 1M
     * against 12/13 per head: left off in this retrieval preset, bench/NOTES.md 29) */
    {"default", FINE64 " tail-block=16", "3k-fine64 with tail-block=16 (the default)"},
    {"3k", PAPER_3K " refresh=16,8,4", "the paper's 3k"},
    {"fast", PAPER_3K " refresh=32,16,8", "the paper's fast: 3k with longer refreshes"},
    {"flash", PAPER_3K " refresh=96,24,8", "the paper's flash: 3k with the longest refreshes"},
    {"5k", "chunks=64,32,16 k=32768,16384,4096 refresh=16,8,4 first-k=4096", "the paper's 5k"},
    /* 3k-fine (ours, not the paper's): the last stage picks single tokens instead of 8-token
     * chunks; the same budgets and refreshes as 3k. Small models (SmolLM2-135M) lose retrieval
     * with 8-token chunks at budgets where token-level selection keeps it (bench/NOTES.md) */
    {"3k-fine", "chunks=256,32,1 k=32768,8192,2048 refresh=16,8,4",
     "ours: 3k with a token-level last stage"},
    /* 3k-fine64 (ours): 3k-fine with 64-token chunks in the first stage (as the paper's 5k) and
     * 16 in the second: SmolLM2-135M keeps a RULER needle at 128K with it (9/10 against 5/10
     * with 256-token chunks, bench/NOTES.md 18) at ~3x the stage-1 work; and overlapping
     * first-stage chunks, so a needle across a chunk border is not lost (niah 47/48 against
     * 42/48 at 4K-1M, +20% prefill at 128K, bench/NOTES.md 27) */
    {"3k-fine64", FINE64, "ours: 3k-fine with 64- and 16-token chunks, overlapping first stage"},
    /* 3k-kv (ours): 3k with one SelectRep descent per KV head in every stage (the branch by the
     * max over the KV head's query heads): 4x fewer probes at the same tensor-core work; H100,
     * 8B shape, 32K rows: prefill 26.4 -> 19.3 ms at 128K, 71.6 -> 46.8 ms at 1M; niah on
     * SmolLM2 as 3k's (bench/NOTES.md 29) */
    {"3k-kv", PAPER_3K " refresh=16,8,4 kv-descent=1,1,1",
     "ours: 3k with one descent per KV head"},
};

int lc_infinitehip_validate(const void *settings) {
    const lc_infinitehip_params *p = settings;
    if (!p) return lc_fail(LC_ERR_INVALID_ARG, "lc_infinitehip_validate: NULL argument");
    const int32_t N = p->n_stages;
    if (N < 1 || N > LC_HIP_MAX_STAGES)
        return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: %d stages; allowed 1..%d", N,
                       LC_HIP_MAX_STAGES);
    for (int32_t i = 0; i < N; i++) {
        const int32_t c = p->chunk[i], k = p->k[i];
        if (c < 1 || c > (1 << 20) || (c & (c - 1)))
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: chunks: stage %d chunk %d must be a "
                           "power of two in 1..1048576", i + 1, c);
        if (i > 0 && (c > p->chunk[i - 1] || p->chunk[i - 1] % c))
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: chunks: stage %d chunk %d must "
                           "divide the previous stage's chunk %d", i + 1, c, p->chunk[i - 1]);
        if (k < c || k > HIP_MAX_TOKENS || k % c)
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: k: stage %d keeps %d tokens; "
                           "allowed: a multiple of its chunk %d, from %d up to %d", i + 1, k, c,
                           c, HIP_MAX_TOKENS);
        if (i > 0 && k > p->k[i - 1])
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: k: stage %d keeps %d tokens, more "
                           "than the %d of stage %d (allowed: at most that)", i + 1, k,
                           p->k[i - 1], i);
        if (k / c > 65536)
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: k: stage %d keeps %d chunks of %d; "
                           "allowed at most 65536 chunks", i + 1, k / c, c);
        if (p->q_stride[i] > p->block_q)
            return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: q-stride: stage %d stride %d; "
                           "allowed 1..block-q (%d)", i + 1, p->q_stride[i], p->block_q);
    }
    const int32_t cl = p->chunk[N - 1];
    if (p->first_layers > 0 &&
        (p->first_k < cl || p->first_k % cl || p->first_k > p->k[0] || p->first_k / cl > 65536))
        return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: first-k=%d; allowed: a multiple of the "
                       "last chunk %d, from %d up to the first stage's k %d", p->first_k, cl, cl,
                       p->k[0]);
    if (p->stagger && p->chunk[0] < 2)
        return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: stagger=1 needs a first-stage chunk of "
                       "at least 2 (chunks starts with %d)", p->chunk[0]);
    if (p->overlap && (p->chunk[0] < 2 || N < 2))
        return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: overlap=1 needs a first-stage chunk of "
                       "at least 2 and a later stage (chunks %d, %d stages)", p->chunk[0], N);
    if (p->tail_block > p->block_q)
        return lc_fail(LC_ERR_INVALID_ARG, "infinitehip: tail-block=%d; allowed 0 (off)..block-q "
                       "(%d)", p->tail_block, p->block_q);
    return LC_OK;
}

LC_ATTN_ROPE_ROWS_PAST_STREAM(fixed_rope_rows, lc_infinitehip_params)
LC_ATTN_TYPED_CREATE(create, lc_attn_infinitehip_create, lc_infinitehip_params)

const lc_attn_desc lc_attn_desc_infinitehip = {
    .name     = "infinitehip",
    .summary  = "InfiniteHiP: multi-stage hierarchical pruning + block-sparse attention, RoPE "
                "re-indexing past the trained window",
    .settings = LC_SETTINGS_TABLE("infinitehip", lc_infinitehip_params, base, keys, presets),
    .validate        = lc_infinitehip_validate,
    .create          = create,
    .fixed_rope_rows = fixed_rope_rows,
};
