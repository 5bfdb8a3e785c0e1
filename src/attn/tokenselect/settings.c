/*
 * settings.c — TokenSelect's settings table (paper 001_823a2d0cdd44ac9c.txt; digest
 * spec/tokenselect-and-sparseserve.md A.7): every key with its range and help, the presets,
 * and the checks across keys that reject a bad combination with a message naming the key and
 * its allowed range before any kernel sees it.
 */
#include "attn/tokenselect/tokenselect.h"

#include "util/util.h"

#include <stddef.h>

#define SEL_MAX_TOKENS (1 << 30)
#define OFF(f) offsetof(lc_tokenselect_params, f)

static const char *const gqa_names[]  = {"group", "mod", NULL};

static const lc_setting keys[] = {
    {"k", LC_SETTING_INT, OFF(k), 0, 0, 1, SEL_MAX_TOKENS, NULL, "tokens selected", NULL},
    {"init", LC_SETTING_INT, OFF(n_init), 0, 0, 0, SEL_MAX_TOKENS, NULL, "sink tokens", NULL},
    {"local", LC_SETTING_INT, OFF(n_local), 0, 0, 1, SEL_MAX_TOKENS, NULL,
     "most recent tokens, at least chunk (a chunk sees itself)", NULL},
    {"chunk", LC_SETTING_INT, OFF(chunk), 0, 0, 1, 4096, NULL,
     "prefill rows sharing one selection", NULL},
    {"theta", LC_SETTING_FLOAT, OFF(theta), 0, 0, -1.0, 2.0, NULL,
     "selection-cache threshold (cosine; above 1: no cache)", NULL},
    {"gqa", LC_SETTING_ENUM, OFF(gqa_mod), 0, 0, 0, 0, gqa_names,
     "group: the model's KV head mapping; mod: head h reads KV head h mod n_kv_head (the "
     "paper's code)", NULL},
    {"rope", LC_SETTING_ENUM, OFF(rope), 0, 0, 0, 0, lc_rope_names,
     "RoPE in the attention: auto re-indexes past the trained window, extend always, plain "
     "never", NULL},
    LC_SETTING_DENSE_LAYERS(lc_tokenselect_params),
    LC_SETTING_TAIL_BLOCK(lc_tokenselect_params, 4096, "chunk"),
};

/* the paper's settings (tail-block 0) */
static const lc_tokenselect_params base = {
    .k            = 2048,
    .n_init       = 128,
    .n_local      = 512,
    .chunk        = 512,
    .theta        = 0.9f,
    .gqa_mod      = 0,
    .rope         = LC_HIP_ROPE_AUTO,
    .dense_layers = 0,
    .tail_block   = 0,
};

static const lc_settings_preset presets[] = {
    /* ours: the prompt's last chunk (where the question is) selects in 16-row chunks;
     * Qwen2.5-Coder-1.5B at 64K, fact, 20 paired trials (H200,
     * bench/results/eval-tail-blocks-qwen-h200-2026-11-28/): 20/20 against the paper's 9/20
     * (tail-block=0), dense 15/20 */
    {"default", "tail-block=16", "the paper's with tail-block=16 (the default)"},
    {"paper", "tail-block=0", "the paper's settings"},
};

static int validate(const void *settings) {
    const lc_tokenselect_params *p = settings;
    if (p->n_local < p->chunk)
        return lc_fail(LC_ERR_INVALID_ARG, "tokenselect: local=%d; allowed chunk (%d)..%d: a "
                       "prefill chunk's own rows are part of its local window", p->n_local,
                       p->chunk, SEL_MAX_TOKENS);
    if (p->tail_block > p->chunk)
        return lc_fail(LC_ERR_INVALID_ARG, "tokenselect: tail-block=%d; allowed 0 (off)..chunk "
                       "(%d)", p->tail_block, p->chunk);
    return LC_OK;
}

/* fingerprints read the RoPE rows n_local + row */
static int64_t fixed_rope_rows(const void *settings, int32_t n_batch) {
    return (int64_t)((const lc_tokenselect_params *)settings)->n_local + n_batch + 1;
}

LC_ATTN_TYPED_CREATE(create, lc_attn_tokenselect_create, lc_tokenselect_params)

const lc_attn_desc lc_attn_desc_tokenselect = {
    .name     = "tokenselect",
    .summary  = "TokenSelect: token-level top-k by a per-head soft vote over every cached key, "
                "with a selection cache in decode",
    .settings = LC_SETTINGS_TABLE("tokenselect", lc_tokenselect_params, base, keys, presets),
    .validate        = validate,
    .create          = create,
    .fixed_rope_rows = fixed_rope_rows,
};
