/*
 * engine.c — the context: a set of sequences advanced one step at a time (DESIGN.md "One step
 * function"). Each step packs decode tokens first (one per generating sequence), then prompt
 * chunks up to n_batch tokens, runs one model forward over the batch, samples for every
 * sequence whose prompt is complete, and reports per-sequence events: newly printable text
 * (whole UTF-8 characters, stop strings withheld), prompt progress and finish reasons.
 *
 * Sampling runs on the backend (op `sample`) inside the forward, with each sequence's
 * uniform drawn here from its own seeded RNG, so a GPU step downloads the sampled ids only.
 * Logits stay in the backend's workspace; lc_context_logits copies a sequence's row on first
 * use, and a step about to overwrite the workspace first copies the rows of sequences that
 * will not get new ones (finished or stalled), so every sequence's last logits stay readable.
 *
 * With a KV slot cache (kv/slab_bank.h, issue 24) the step ends by feeding it what each decode
 * sequence's attention read (slot_cache_learn), which also measures the sequences' working sets;
 * with ws_batch_control the next step's decode sequences join in arrival order while those fit
 * the slots (ws_control; SparseServe's batch size control, issue 25).
 */
#include "engine/engine.h"
#include "engine/sampler.h"
#include "model/budget.h"
#include "kv/slab_bank.h"
#include "format/quant.h"
#include "model/model.h"
#include "util/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SCORE_LOGIT_ROWS 512 /* logit rows per forward while scoring (a [512][n_vocab] buffer);
                                lc_context_params.score_rows lowers it (tests cut short texts) */

typedef struct lc_seq {
    bool        live;
    int32_t     id;
    int32_t    *tokens; /* prompt then generated tokens */
    int64_t     n_tokens, cap_tokens;
    int64_t     n_prompt;
    int64_t     n_done;  /* tokens whose KV is written */
    int32_t     n_generated, max_tokens;
    bool        ignore_eos;
    lc_sampler  sampler;
    char      **stop;
    size_t      n_stop, max_stop_len;
    char       *text; /* generated text */
    size_t      text_len, text_cap, text_emitted;
    lc_detok    detok;
    lc_finish   finish;
    char       *error; /* finish == LC_FINISH_ERROR: why (malloc'd) */
    bool        reported_finish;
    int32_t     last_sampled; /* token sampled in the current step, -1 if none */
    bool        has_logits;
    int32_t     logits_row; /* >= 0: its logits are row logits_row of the workspace, not yet
                               copied to logits */
    float      *logits; /* [n_vocab] */
    lc_kv_seq   kv;
    void      **attn_states; /* [n_layer] */
    int64_t     arrival;     /* admission order (FCFS of the working-set batch control) */
    int64_t     ws_slabs;    /* working set: host slabs its last recomputed decode selection
                                read, the largest layer's (-1: none measured yet) */
} lc_seq;

struct lc_context {
    lc_model             *model;
    lc_context_params     p;
    const lc_attn_method *attn;
    bool                  attn_owned; /* freed with the context */
    lc_kv_cache          *kv;
    lc_rope_table         rope;
    lc_forward_ws        *ws;
    lc_seq               *seqs;
    int32_t               next_id;
    /* per-step scratch */
    int32_t     *ids, *pos, *logit_rows, *logit_seq;
    lc_attn_seq *aseqs;
    void      ***astates;
    int32_t     *aseq_idx;
    lc_sample_row *srows;   /* [n_seq_max] */
    int32_t       *sampled; /* [n_seq_max] */
    int32_t       *pen;     /* penalised tokens of a step */
    int64_t        pen_cap;
    /* layer-segmented prefill (p.prefill_token_layers > 0): the one prompt chunk in flight */
    float  *seg_x;     /* its residual stream between steps, [n_batch][n_embd] (backend) */
    int32_t seg_seq;   /* the sequence (index into seqs) whose chunk it is, -1: none */
    int32_t seg_layer; /* the chunk's next layer (0: a new chunk is taken) */
    int32_t seg_rows;  /* the chunk's rows */
    uint8_t *inject;   /* [n_seq_max] prompts injected whole into this step's batch */
    uint8_t *ws_hold;  /* [n_seq_max] decode sequences the working-set control holds this step */
    int64_t  n_arrivals;
    int32_t  n_ws_held; /* held in the last step */
};

int lc_context_kv_usage(const lc_context *c, lc_kv_usage *out) {
    if (!c || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_context_kv_usage: NULL argument");
    const lc_kv_cache *kv = c->kv;
    out->page_size  = kv->page_size;
    out->gpu_pages  = kv->n_dev_pages;
    out->gpu_used   = kv->n_dev_pages - kv->n_free_dev;
    out->host_pages = kv->n_pages - kv->n_dev_pages;
    out->host_used  = out->host_pages - kv->n_free_host;
    out->slab_bytes = (int32_t)kv->slab_bytes;
    lc_slab_bank_stats bs;
    lc_slab_bank_get_stats(kv->bank, &bs);
    out->cache_slots     = bs.slots;
    out->cache_used      = bs.used;
    out->cache_hits      = bs.hits;
    out->cache_misses    = bs.misses;
    out->cache_evictions = bs.evictions;
    out->cache_overflow  = bs.overflow;
    out->cache_bytes_in  = bs.bytes_in;
    out->cache_map_bytes = bs.map_bytes;
    out->ws_slabs        = 0;
    for (int32_t i = 0; i < c->p.n_seq_max; i++)
        if (c->seqs[i].live && c->seqs[i].finish == LC_FINISH_NONE && c->seqs[i].ws_slabs > 0)
            out->ws_slabs += c->seqs[i].ws_slabs;
    out->ws_held = c->n_ws_held;
    return LC_OK;
}

int lc_context_attn_stats(const lc_context *c, lc_attn_stats *out) {
    if (!c || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_context_attn_stats: NULL argument");
    memset(out, 0, sizeof *out);
    return c->attn && c->attn->stats ? c->attn->stats(c->attn, out) : LC_OK;
}

lc_context_params lc_context_default_params(void) {
    lc_context_params p = {.n_ctx = 0, .n_seq_max = 1, .n_batch = 512, .page_size = 64,
                           .kv_tokens = 0, .prefill_progress = NULL, .progress_user = NULL,
                           .attn = NULL, .attn_settings = NULL};
    /* Defaults chosen on Qwen2.5-Coder-1.5B at 64K over the eval suite's fact tasks (H100,
     * bench/results/defaults-qwen-h100-2026-11-27.md): InfiniteHiP 3k-fine64 found the single
     * fact 20/20 against the paper's 3k 14/20 (dense 17/20), at ~4x the first stage's scan work
     * (--preset 3k keeps the paper's speed); HiP k 2048 found it 15/20 against the paper's k
     * 512 1/10 (--preset 512). Then the prompt's last block in finer blocks ("tail blocks",
     * H200, bench/results/eval-tail-blocks-qwen-h200-2026-11-28/, 20 paired trials at 64K):
     * TokenSelect 9/20 -> 20/20 (16 rows), HiP 11/20 -> 14/20 (8 rows; dense 15/20),
     * InfiniteHiP 20/20 either way and 9/20 -> 11/20 at 256K (16 rows): the presets "default",
     * each method's default preset (attn_settings NULL). */
    return p;
}

/* Free a sequence's per-layer attention-method states ([n_layer]; NULL: nothing). */
static void states_free(lc_context *c, void **states) {
    if (states && c->attn && c->attn->state_free)
        for (int32_t l = 0; l < c->model->hp.n_layer; l++)
            if (states[l]) c->attn->state_free(c->attn, states[l]);
    free(states);
}

/* New per-layer attention-method states ([n_layer], no cached selection) into *out. */
static int states_new(lc_context *c, void ***out) {
    *out          = NULL;
    void **states = lc_calloc((size_t)c->model->hp.n_layer, sizeof(void *), "attention state");
    if (!states) return LC_ERR_NOMEM;
    int st = LC_OK;
    if (c->attn->state_create)
        for (int32_t l = 0; l < c->model->hp.n_layer && st == LC_OK; l++)
            st = c->attn->state_create(c->attn, l, &states[l]);
    if (st != LC_OK) {
        states_free(c, states);
        return st;
    }
    *out = states;
    return LC_OK;
}

static void seq_clear(lc_context *c, lc_seq *s) {
    if (s->kv.pages) lc_kv_seq_release(c->kv, &s->kv);
    states_free(c, s->attn_states);
    free(s->tokens);
    for (size_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->stop);
    free(s->text);
    free(s->logits);
    free(s->error);
    lc_sampler_free(&s->sampler);
    memset(s, 0, sizeof *s);
}

void lc_context_free(lc_context *c) {
    if (!c) return;
    lc_backend *b = c->model->backend;
    if (c->seqs)
        for (int32_t i = 0; i < c->p.n_seq_max; i++)
            if (c->seqs[i].live) seq_clear(c, &c->seqs[i]);
    free(c->seqs);
    if (c->attn && c->attn_owned) lc_attn_method_free((lc_attn_method *)c->attn);
    lc_kv_free(c->kv);
    lc_forward_ws_free(c->model, c->ws);
    if (c->rope.cos) b->dealloc(b, c->rope.cos);
    if (c->rope.sin) b->dealloc(b, c->rope.sin);
    if (c->seg_x) b->dealloc(b, c->seg_x);
    free(c->ids), free(c->pos), free(c->logit_rows), free(c->logit_seq), free(c->aseqs);
    free(c->astates), free(c->aseq_idx), free(c->inject), free(c->ws_hold), free(c->srows), free(c->sampled), free(c->pen);
    lc_model *m = c->model;
    free(c);
    lc_model_release(m);
}

/* Make the RoPE table cover positions [0, need) (need capped at n_ctx): a new table of
 * max(need, the old rows + max(1/8 of them, LC_ROPE_MIN_ROWS)) rows (at most n_ctx) replaces
 * the old one. Growing by an eighth, not by doubling, keeps the one step that grows it short:
 * a decode step just past a 512K prompt filled 512K new rows (~0.13 s on an H100's host, where
 * steps take 3 ms; bench/NOTES.md 40) and now fills 64K; the copies of old rows it costs
 * instead run in backend memory. It is sized by the
 * positions sequences reach, not by n_ctx. Growing copies the old rows within backend memory
 * and computes only the new ones (a row depends on its position only): recomputing a 1M-row
 * table when a decode step crossed its end took seconds on the host, paid by the first token
 * after a prompt of 2^k tokens (bench/NOTES.md 39). The table lives in backend memory and a
 * captured CUDA decode graph holds its address (the graph key in forward.c mixes &c->rope,
 * which does not change), so replacing it drops every graph (graph_reset) first. */
static int rope_cover(lc_context *c, int64_t need) {
    const int64_t n_ctx = c->p.n_ctx;
    if (need > n_ctx) need = n_ctx;
    if (c->rope.cos && need <= c->rope.n_pos) return LC_OK;
    const int64_t grow = c->rope.cos ? c->rope.n_pos / 8 : 0;
    int64_t rows = c->rope.cos ? (int64_t)c->rope.n_pos + (grow > LC_ROPE_MIN_ROWS
                                                               ? grow : LC_ROPE_MIN_ROWS)
                               : need;
    if (rows < need) rows = need;
    if (rows > n_ctx) rows = n_ctx;
    const lc_hparams *hp    = &c->model->hp;
    lc_backend       *b     = c->model->backend;
    const int64_t     half  = hp->n_rot / 2;
    /* rows kept from the old table (a backend without a copy op recomputes them all) */
    const int64_t     old   = c->rope.cos && b->copy ? c->rope.n_pos : 0;
    const size_t      bytes = sizeof(float) * (size_t)rows * (size_t)half;
    const size_t      kept  = sizeof(float) * (size_t)old * (size_t)half;
    const size_t      fresh = bytes - kept;
    const bool        host  = b->device == LC_DEVICE_CPU; /* fill the backend's buffers in place */
    float *dc = b->alloc(b, bytes, "rope table"), *ds = b->alloc(b, bytes, "rope table");
    float *hc = NULL, *hs = NULL;
    if (dc && ds) {
        hc = host ? dc + old * half : lc_malloc(fresh ? fresh : 1, "rope table");
        hs = host ? ds + old * half : lc_malloc(fresh ? fresh : 1, "rope table");
    }
    int st = dc && ds && hc && hs ? LC_OK : LC_ERR_NOMEM;
    if (st != LC_OK)
        lc_fail(st, "out of memory for the RoPE table of %lld positions (2 x %zu bytes; it had "
                "%d)", (long long)rows, bytes, c->rope.n_pos);
    if (st == LC_OK && old > 0) st = b->copy(b, dc, c->rope.cos, kept);
    if (st == LC_OK && old > 0) st = b->copy(b, ds, c->rope.sin, kept);
    if (st == LC_OK)
        st = lc_rope_table_fill_rows(hp, c->model->rope_freq_factors, (int32_t)old,
                                     (int32_t)rows, hc, hs);
    if (!host) {
        if (st == LC_OK && fresh) st = b->upload(b, dc + old * half, hc, fresh);
        if (st == LC_OK && fresh) st = b->upload(b, ds + old * half, hs, fresh);
        free(hc), free(hs);
    }
    if (st != LC_OK) {
        if (dc) b->dealloc(b, dc);
        if (ds) b->dealloc(b, ds);
        return st;
    }
    if (c->rope.cos) {
        if (b->graph_reset) b->graph_reset(b); /* graphs hold the old table's address */
        b->dealloc(b, c->rope.cos);
        b->dealloc(b, c->rope.sin);
    }
    c->rope.cos     = dc;
    c->rope.sin     = ds;
    c->rope.n_pos   = (int32_t)rows;
    c->rope.n_rot   = hp->n_rot;
    c->rope.pairing = hp->rope_pairing;
    c->rope.mscale  = (float)lc_rope_mscale(hp);
    return LC_OK;
}

/* Before a step: the table reaches every position of the live sequences' tokens. */
static int rope_cover_live(lc_context *c) {
    int64_t need = 0;
    for (int32_t i = 0; i < c->p.n_seq_max; i++)
        if (c->seqs[i].live && c->seqs[i].finish == LC_FINISH_NONE && c->seqs[i].n_tokens > need)
            need = c->seqs[i].n_tokens;
    return rope_cover(c, need);
}

int32_t lc_context_rope_rows(const lc_context *c) { return c->rope.n_pos; }

int lc_context_rope_reserve(lc_context *c, int64_t n_pos) { return rope_cover(c, n_pos); }

int lc_context_create(lc_model *m, const lc_context_params *params, lc_context **out) {
    return lc_context_create_with_method(m, params, NULL, out);
}

int lc_context_create_with_method(lc_model *m, const lc_context_params *params,
                                  const lc_attn_method *method, lc_context **out) {
    lc_clear_error();
    if (!m || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_context_create: NULL argument");
    *out                  = NULL;
    lc_context_params def = lc_context_default_params();
    lc_context_params p   = params ? *params : def;
    const lc_hparams *hp  = &m->hp;
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train;
    if (p.n_ctx < 1 || p.n_ctx > (1 << 30))
        return lc_fail(LC_ERR_INVALID_ARG, "context size %d out of range (1 .. 2^30)", p.n_ctx);
    if (p.n_seq_max < 1 || p.n_seq_max > 4096)
        return lc_fail(LC_ERR_INVALID_ARG, "n_seq_max %d out of range (1 .. 4096)", p.n_seq_max);
    if (p.n_batch < 1 || p.n_batch > 65536)
        return lc_fail(LC_ERR_INVALID_ARG, "batch size %d out of range (1 .. 65536)", p.n_batch);
    if (p.page_size < 16 || p.page_size > 1024 || (p.page_size & (p.page_size - 1)))
        return lc_fail(LC_ERR_INVALID_ARG, "page size %d must be a power of two in 16 .. 1024",
                       p.page_size);
    if (m->backend->page_size && p.page_size != m->backend->page_size)
        return lc_fail(LC_ERR_INVALID_ARG, "page size %d: the %s backend's kernels need %d-token "
                       "pages", p.page_size, m->backend->name, m->backend->page_size);
    if (p.prefill_token_layers < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "prefill_token_layers %d out of range (0: off, or the "
                       "rows x layers a step may prefill, >= 1)", p.prefill_token_layers);
    if (p.score_rows < 0 || p.score_rows > SCORE_LOGIT_ROWS)
        return lc_fail(LC_ERR_INVALID_ARG, "score_rows %d out of range (0 .. %d; 0: %d)",
                       p.score_rows, SCORE_LOGIT_ROWS, SCORE_LOGIT_ROWS);
    if (p.kv_tokens == 0) p.kv_tokens = (int64_t)p.n_ctx * p.n_seq_max;
    if (p.kv_tokens < 1)
        return lc_fail(LC_ERR_INVALID_ARG, "KV capacity %lld tokens out of range",
                       (long long)p.kv_tokens);
    if (p.kv_host_tokens < 0 || p.kv_host_tokens > p.kv_tokens)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_host_tokens %lld out of range (0 .. the KV "
                       "capacity, %lld tokens)", (long long)p.kv_host_tokens,
                       (long long)p.kv_tokens);
    if (p.kv_slot_cache_tokens < 0 || p.kv_slot_cache_tokens > (int64_t)INT32_MAX * p.page_size)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_slot_cache_tokens %lld out of range",
                       (long long)p.kv_slot_cache_tokens);
    if (p.ws_batch_control && p.kv_slot_cache_tokens == 0)
        return lc_fail(LC_ERR_INVALID_ARG, "ws_batch_control sizes decode batches by the KV "
                       "slot cache, and there is none (kv_slot_cache_tokens 0)");
    if (p.kv_slot_cache_tokens > 0 && p.kv_host_tokens == 0)
        return lc_fail(LC_ERR_INVALID_ARG, "a KV slot cache (kv_slot_cache_tokens %lld) caches "
                       "the host tier, and there is none (kv_host_tokens 0)",
                       (long long)p.kv_slot_cache_tokens);
    if (p.kv_type != LC_KV_AUTO && p.kv_type != LC_KV_FP8)
        return lc_fail(LC_ERR_INVALID_ARG, "kv_type %d (LC_KV_AUTO 0 or LC_KV_FP8 1)",
                       (int)p.kv_type);
    if (p.kv_type == LC_KV_FP8 && !m->backend->kv_e4m3)
        return lc_fail(LC_ERR_UNSUPPORTED, "an fp8 KV cache (--kv-type fp8) is read by the CUDA "
                       "backend's kernels on a GPU of compute capability 8.9 or newer (fp8 "
                       "conversions); the %s backend here keeps its KV in %s", m->backend->name,
                       m->backend->device == LC_DEVICE_CUDA ? "fp16" : "fp32");
    if (p.n_batch < p.n_seq_max) p.n_batch = p.n_seq_max; /* room for one decode token each */
    /* what the context needs against the memory there is, before anything is allocated */
    if (!p.overcommit) {
        const int bst = lc_budget_check_context(m, &p);
        if (bst != LC_OK) return bst;
    }

    lc_context *c = lc_calloc(1, sizeof *c, "context");
    if (!c) return LC_ERR_NOMEM;
    lc_model_retain(m); /* the model lives at least as long as its contexts */
    c->model   = m;
    c->p       = p;
    c->next_id = 1;
    c->seg_seq = -1;
    lc_backend *b = m->backend;
    int         st;
    if (method) {
        c->attn = method;
    } else {
        const lc_attn_shape shape = {hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim,
                                     hp->n_ctx_train};
        lc_attn_method     *am    = NULL;
        if ((st = lc_attn_create(b, &shape, &p, &am)) != LC_OK) {
            free(c);
            lc_model_release(m);
            return st;
        }
        c->attn       = am;
        c->attn_owned = am != &lc_attn_dense;
    }
    if (p.kv_type == LC_KV_FP8 && !c->attn->kv_fp8) {
        st = lc_fail(LC_ERR_UNSUPPORTED, "an fp8 KV cache is read by the dense, infinitehip and "
                     "streaming methods so far; %s's kernels read fp16 (use --kv-type auto, or "
                     "another --attn)", c->attn->name);
        goto fail;
    }
    if (p.kv_slot_cache_tokens > 0 && !c->attn->decode_reads) {
        st = lc_fail(LC_ERR_INVALID_ARG, "a KV slot cache serves the decode reads of the "
                     "methods whose decode reads are known (infinitehip, hip, streaming), not "
                     "%s", c->attn->name);
        goto fail;
    }
    const int64_t n_slot  = lc_budget_kv_slot_pages(&p);
    const int64_t n_pages = (p.kv_tokens + p.page_size - 1) / p.page_size + n_slot;
    const int64_t n_host  = lc_budget_kv_host_pages(&p);
    if ((st = lc_kv_create(b, hp->n_layer, hp->n_head_kv, hp->head_dim, p.page_size, n_pages,
                           n_host, p.kv_type == LC_KV_FP8, &c->kv)) != LC_OK)
        goto fail;
    for (int32_t l = 0; l < hp->n_layer; l++) /* fp8 keys are centred on the key bias */
        lc_kv_set_key_centre(c->kv, l, (const float *)m->layers[l].bk.data);
    if (n_slot > 0) {
        lc_slab_bank *bank = NULL; /* owned by the KV cache */
        if ((st = lc_slab_bank_create(c->kv, n_slot, &bank)) != LC_OK) goto fail;
        lc_log(LC_LOG_INFO, "KV slot cache: %lld GPU pages, %lld slabs a layer",
               (long long)n_slot, (long long)n_slot * hp->n_head_kv);
    }
    if (n_host > 0)
        lc_log(LC_LOG_INFO, "KV cache: %lld pages of %d tokens, %lld in %s memory and %lld in "
               "pinned host memory", (long long)n_pages, p.page_size,
               (long long)c->kv->n_dev_pages, b->name, (long long)(n_pages - c->kv->n_dev_pages));
    /* RoPE table for the first positions; grown as sequences reach further (rope_cover) */
    if ((st = rope_cover(c, lc_budget_rope_rows0(&p))) != LC_OK) goto fail;
    if ((st = lc_forward_ws_create(m, p.n_batch, p.n_seq_max, &c->ws)) != LC_OK) goto fail;
    if (p.prefill_token_layers > 0 &&
        !(c->seg_x = b->alloc(b, sizeof(float) * (size_t)p.n_batch * (size_t)hp->n_embd,
                              "segmented prefill residual"))) {
        st = LC_ERR_NOMEM;
        goto fail;
    }
    c->seqs       = lc_calloc((size_t)p.n_seq_max, sizeof(lc_seq), "sequences");
    c->ids        = lc_malloc(sizeof(int32_t) * (size_t)p.n_batch, "batch");
    c->pos        = lc_malloc(sizeof(int32_t) * (size_t)p.n_batch, "batch");
    c->logit_rows = lc_malloc(sizeof(int32_t) * (size_t)p.n_seq_max, "batch");
    c->logit_seq  = lc_malloc(sizeof(int32_t) * (size_t)p.n_seq_max, "batch");
    c->aseqs      = lc_malloc(sizeof(lc_attn_seq) * (size_t)p.n_seq_max, "batch");
    c->astates    = lc_malloc(sizeof(void **) * (size_t)p.n_seq_max, "batch");
    c->aseq_idx   = lc_malloc(sizeof(int32_t) * (size_t)p.n_seq_max, "batch");
    c->inject     = lc_calloc((size_t)p.n_seq_max, 1, "batch");
    c->ws_hold    = lc_calloc((size_t)p.n_seq_max, 1, "batch");
    c->srows      = lc_malloc(sizeof(lc_sample_row) * (size_t)p.n_seq_max, "batch");
    c->sampled    = lc_malloc(sizeof(int32_t) * (size_t)p.n_seq_max, "batch");
    if (!c->seqs || !c->ids || !c->pos || !c->logit_rows || !c->logit_seq || !c->aseqs ||
        !c->astates || !c->aseq_idx || !c->inject || !c->ws_hold || !c->srows || !c->sampled) {
        st = LC_ERR_NOMEM;
        goto fail;
    }
    *out = c;
    return LC_OK;
fail:
    lc_context_free(c);
    return st;
}

static lc_seq *seq_find(const lc_context *c, int32_t id) {
    for (int32_t i = 0; i < c->p.n_seq_max; i++)
        if (c->seqs[i].live && c->seqs[i].id == id) return &c->seqs[i];
    return NULL;
}

/* The checks lc_context_add and lc_context_continue share: the prompt (its ids in the
 * vocabulary, fitting n_ctx after the held tokens), stop strings, max_tokens, sampling. */
static int check_request(const lc_context *c, const lc_request *r, int64_t held) {
    const int32_t V = c->model->hp.n_vocab;
    if (r->n_prompt == 0) return lc_fail(LC_ERR_INVALID_ARG, "the prompt is empty");
    if (!r->prompt)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_add: prompt is NULL with n_prompt %zu",
                       r->n_prompt);
    if (r->n_stop && !r->stop)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_add: stop is NULL with n_stop %zu",
                       r->n_stop);
    /* every generated token is matched against every stop string: bound the work */
    if (r->n_stop > LC_MAX_STOP)
        return lc_fail(LC_ERR_INVALID_ARG, "%zu stop strings (at most %d)", r->n_stop,
                       LC_MAX_STOP);
    for (size_t i = 0; i < r->n_stop; i++)
        if (r->stop[i] && strnlen(r->stop[i], LC_MAX_STOP_LEN + 1) > LC_MAX_STOP_LEN)
            return lc_fail(LC_ERR_INVALID_ARG, "stop string %zu is longer than %d bytes", i,
                           LC_MAX_STOP_LEN);
    if (r->max_tokens < 0) return lc_fail(LC_ERR_INVALID_ARG, "max_tokens %d < 0", r->max_tokens);
    if (held + (int64_t)r->n_prompt > c->p.n_ctx) {
        if (held == 0)
            return lc_fail(LC_ERR_CONTEXT, "the prompt has %zu tokens but the context holds %d "
                           "(raise -c/--ctx up to the memory you have)", r->n_prompt, c->p.n_ctx);
        return lc_fail(LC_ERR_CONTEXT, "%lld tokens so far and %zu new ones do not fit the "
                       "context of %d tokens (raise -c/--ctx, or start over)", (long long)held,
                       r->n_prompt, c->p.n_ctx);
    }
    for (size_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= V)
            return lc_fail(LC_ERR_INVALID_ARG, "prompt token %zu has id %d outside the vocabulary "
                           "(0 .. %d)", i, r->prompt[i], V - 1);
    return lc_sampling_check(&r->sampling);
}

/* Copy a request's stop strings into the sequence (s->stop empty before). */
static int seq_set_stops(lc_seq *s, const lc_request *r) {
    if (!r->n_stop) return LC_OK;
    s->stop = lc_calloc(r->n_stop, sizeof(char *), "stop strings");
    if (!s->stop) return LC_ERR_NOMEM;
    for (size_t i = 0; i < r->n_stop; i++) {
        if (!r->stop[i] || !r->stop[i][0]) continue;
        s->stop[s->n_stop] = strdup(r->stop[i]);
        if (!s->stop[s->n_stop]) return lc_fail(LC_ERR_NOMEM, "out of memory copying stop strings");
        size_t len = strlen(r->stop[i]);
        if (len > s->max_stop_len) s->max_stop_len = len;
        s->n_stop++;
    }
    return LC_OK;
}

int lc_context_add(lc_context *c, const lc_request *r, int32_t *seq_id) {
    lc_clear_error();
    if (!c || !r || !seq_id) return lc_fail(LC_ERR_INVALID_ARG, "lc_context_add: NULL argument");
    const int32_t V = c->model->hp.n_vocab;
    int st = check_request(c, r, 0);
    if (st != LC_OK) return st;
    lc_seq *s = NULL;
    for (int32_t i = 0; i < c->p.n_seq_max && !s; i++)
        if (!c->seqs[i].live) s = &c->seqs[i];
    if (!s)
        return lc_fail(LC_ERR_CONTEXT, "all %d sequence slots are busy", c->p.n_seq_max);
    const int64_t need_pages = lc_kv_pages_for(c->kv, (int64_t)r->n_prompt);
    if (need_pages > c->kv->n_free)
        return lc_fail(LC_ERR_CONTEXT, "the prompt needs %lld KV pages (%zu tokens) but only %lld "
                       "of %lld are free", (long long)need_pages, r->n_prompt,
                       (long long)c->kv->n_free, (long long)c->kv->n_pages);
    memset(s, 0, sizeof *s);
    s->cap_tokens = (int64_t)r->n_prompt + (r->max_tokens < 4096 ? r->max_tokens : 4096) + 1;
    s->tokens     = lc_malloc(sizeof(int32_t) * (size_t)s->cap_tokens, "sequence tokens");
    s->logits     = lc_malloc(sizeof(float) * (size_t)V, "sequence logits");
    if (!s->tokens || !s->logits) {
        seq_clear(c, s);
        return LC_ERR_NOMEM;
    }
    if ((st = states_new(c, &s->attn_states)) != LC_OK) {
        seq_clear(c, s);
        return st;
    }
    if ((st = lc_sampler_init(&s->sampler, &r->sampling, V)) != LC_OK) {
        seq_clear(c, s);
        return st;
    }
    memcpy(s->tokens, r->prompt, sizeof(int32_t) * r->n_prompt);
    s->n_tokens   = (int64_t)r->n_prompt;
    s->n_prompt   = (int64_t)r->n_prompt;
    s->max_tokens = r->max_tokens;
    s->ignore_eos = r->ignore_eos;
    if ((st = seq_set_stops(s, r)) != LC_OK) {
        seq_clear(c, s);
        return st;
    }
    s->live         = true;
    s->last_sampled = -1;
    s->logits_row   = -1;
    s->id           = c->next_id++;
    s->arrival      = c->n_arrivals++;
    s->ws_slabs     = -1;
    if (c->next_id <= 0) c->next_id = 1;
    *seq_id = s->id;
    return LC_OK;
}

int lc_context_continue(lc_context *c, int32_t seq_id, int64_t n_keep, const lc_request *r) {
    lc_clear_error();
    if (!c || !r) return lc_fail(LC_ERR_INVALID_ARG, "lc_context_continue: NULL argument");
    lc_seq *s = seq_find(c, seq_id);
    if (!s) return lc_fail(LC_ERR_NOT_FOUND, "no sequence with id %d", seq_id);
    if (s->finish == LC_FINISH_ERROR)
        return lc_fail(LC_ERR_INVALID_ARG, "sequence %d ended with an error (%s): it cannot go on",
                       seq_id, s->error ? s->error : "error");
    const int64_t held = s->n_done;
    if (n_keep < 0) n_keep = held;
    if (n_keep > held)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_continue: n_keep %lld but the KV cache "
                       "of sequence %d holds %lld tokens", (long long)n_keep, seq_id,
                       (long long)held);
    int st = check_request(c, r, n_keep);
    if (st != LC_OK) return st;
    const int64_t n_new = n_keep + (int64_t)r->n_prompt;
    const int64_t need  = lc_kv_pages_for(c->kv, n_new) - s->kv.n_pages;
    if (need > c->kv->n_free)
        return lc_fail(LC_ERR_CONTEXT, "the new tokens need %lld more KV pages but only %lld "
                       "of %lld are free", (long long)need, (long long)c->kv->n_free,
                       (long long)c->kv->n_pages);
    const int64_t cap = n_new + (r->max_tokens < 4096 ? r->max_tokens : 4096) + 1;
    if (cap > s->cap_tokens) {
        int32_t *t = realloc(s->tokens, sizeof(int32_t) * (size_t)cap);
        if (!t) return lc_fail(LC_ERR_NOMEM, "out of memory growing a sequence");
        s->tokens     = t;
        s->cap_tokens = cap;
    }
    lc_sampler ns;
    if ((st = lc_sampler_init(&ns, &r->sampling, c->model->hp.n_vocab)) != LC_OK) return st;
    /* dropped tokens take the method's cached selections over them along: new states (a
       continuation of one token is a decode step, which would reuse them) */
    void **fresh = NULL;
    if (n_keep < held && (st = states_new(c, &fresh)) != LC_OK) {
        lc_sampler_free(&ns);
        return st;
    }
    char  **old_stop = s->stop;
    size_t  old_n    = s->n_stop, old_max = s->max_stop_len;
    s->stop = NULL, s->n_stop = 0, s->max_stop_len = 0;
    if ((st = seq_set_stops(s, r)) != LC_OK) {
        for (size_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
        free(s->stop);
        s->stop = old_stop, s->n_stop = old_n, s->max_stop_len = old_max;
        lc_sampler_free(&ns);
        states_free(c, fresh);
        return st;
    }
    for (size_t i = 0; i < old_n; i++) free(old_stop[i]);
    free(old_stop);
    if (fresh) {
        states_free(c, s->attn_states);
        s->attn_states = fresh;
    }
    lc_sampler_free(&s->sampler);
    s->sampler = ns;
    /* the pages from n_keep's on are written again: their slot copies go (kv/slab_bank.h) */
    if (c->kv->bank && n_keep < held) {
        const int64_t p0 = n_keep / c->kv->page_size;
        lc_slab_bank_drop_pages(c->kv->bank, s->kv.pages + p0, s->kv.n_pages - p0);
    }
    s->ws_slabs = -1;
    memcpy(s->tokens + n_keep, r->prompt, sizeof(int32_t) * r->n_prompt);
    s->n_tokens        = n_new;
    s->n_done          = n_keep;
    if (c->seg_seq == (int32_t)(s - c->seqs)) c->seg_seq = -1; /* a chunk in flight restarts */
    s->n_prompt        = n_new; /* the new tokens are a prompt: prefilled in chunks */
    s->n_generated     = 0;
    s->max_tokens      = r->max_tokens;
    s->ignore_eos      = r->ignore_eos;
    s->text_len        = 0;
    s->text_emitted    = 0;
    if (s->text) s->text[0] = '\0';
    memset(&s->detok, 0, sizeof s->detok);
    s->finish          = LC_FINISH_NONE;
    s->reported_finish = false;
    s->last_sampled    = -1;
    s->has_logits      = false;
    s->logits_row      = -1;
    return LC_OK;
}

int64_t lc_context_seq_length(const lc_context *c, int32_t seq_id) {
    const lc_seq *s = c ? seq_find(c, seq_id) : NULL;
    return s ? s->n_done : -1;
}

int lc_context_remove(lc_context *c, int32_t seq_id) {
    lc_seq *s = c ? seq_find(c, seq_id) : NULL;
    if (!s) return lc_fail(LC_ERR_NOT_FOUND, "no sequence with id %d", seq_id);
    if (c->seg_seq == (int32_t)(s - c->seqs)) c->seg_seq = -1; /* its chunk in flight is dropped */
    seq_clear(c, s);
    return LC_OK;
}

/* Copy a sequence's logit row out of the workspace (once). */
static int seq_fetch_logits(const lc_context *c, lc_seq *s) {
    if (s->logits_row < 0) return LC_OK;
    int st = lc_forward_logits(c->model, c->ws, s->logits_row, s->logits);
    if (st != LC_OK) return st;
    s->logits_row = -1;
    s->has_logits = true;
    return LC_OK;
}

const float *lc_context_logits(const lc_context *c, int32_t seq_id) {
    lc_seq *s = c ? seq_find(c, seq_id) : NULL;
    if (!s) return NULL;
    if (s->logits_row >= 0 && seq_fetch_logits(c, s) != LC_OK) return NULL;
    return s->has_logits ? s->logits : NULL;
}

int32_t lc_context_n_vocab(const lc_context *c) { return c ? c->model->hp.n_vocab : 0; }

/* ---- output text and stop strings ------------------------------------------------------ */

static int text_append(lc_seq *s, const char *p, size_t n) {
    if (s->text_len + n + 1 > s->text_cap) {
        size_t cap = s->text_cap ? s->text_cap : 256;
        while (cap < s->text_len + n + 1) cap *= 2;
        char *t = realloc(s->text, cap);
        if (!t) return lc_fail(LC_ERR_NOMEM, "out of memory for generated text");
        s->text     = t;
        s->text_cap = cap;
    }
    memcpy(s->text + s->text_len, p, n);
    s->text_len += n;
    s->text[s->text_len] = '\0';
    return LC_OK;
}

/* After new text: find a stop string (finish there) or hold back a suffix that could start
 * one. Returns the end of the text that may be emitted. */
static size_t text_safe_end(lc_seq *s) {
    if (s->n_stop == 0 || s->text_len == 0) return s->text_len;
    const size_t from = s->text_emitted > s->max_stop_len ? s->text_emitted - s->max_stop_len : 0;
    size_t       best = SIZE_MAX;
    for (size_t i = 0; i < s->n_stop; i++) {
        const char *hit = memmem(s->text + from, s->text_len - from, s->stop[i], strlen(s->stop[i]));
        if (hit && (size_t)(hit - s->text) < best) best = (size_t)(hit - s->text);
    }
    if (best != SIZE_MAX) {
        s->finish   = LC_FINISH_STOP;
        s->text_len = best; /* drop the stop string and what follows */
        s->text[best] = '\0';
        return best;
    }
    size_t hold = 0;
    for (size_t i = 0; i < s->n_stop; i++) {
        const size_t L = strlen(s->stop[i]);
        /* a suffix of the text that is a proper prefix of the stop string: at most text_len
         * long (so a huge stop string costs nothing per token while the text is short) */
        for (size_t k = L - 1 < s->text_len ? L - 1 : s->text_len; k > hold; k--)
            if (memcmp(s->text + s->text_len - k, s->stop[i], k) == 0) {
                hold = k;
                break;
            }
    }
    size_t end = s->text_len - hold;
    return end < s->text_emitted ? s->text_emitted : end;
}

/* ---- the step -------------------------------------------------------------------------- */

static int seq_grow_tokens(lc_seq *s) {
    if (s->n_tokens < s->cap_tokens) return LC_OK;
    int64_t  cap = s->cap_tokens * 2;
    int32_t *t   = realloc(s->tokens, sizeof(int32_t) * (size_t)cap);
    if (!t) return lc_fail(LC_ERR_NOMEM, "out of memory growing a sequence");
    s->tokens     = t;
    s->cap_tokens = cap;
    return LC_OK;
}

/* End a sequence with LC_FINISH_ERROR and a one-line reason (reported in its event). */
static void seq_fail(lc_seq *s, const char *fmt, ...) {
    char    msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lc_log(LC_LOG_INFO, "sequence %d: %s", s->id, msg); /* the event carries it */
    free(s->error);
    s->error  = strdup(msg); /* NULL on no memory: the event then says only "error" */
    s->finish = LC_FINISH_ERROR;
}

/* Where the repetition penalty's history starts: the first generated token when the penalty
 * looks at generated tokens only, else the start of the sequence. */
static int64_t pen_from(const lc_seq *s) {
    return s->sampler.p.repeat_generated_only ? s->n_prompt : 0;
}

/* The sequence of a batch row (index into c->seqs), -1 if none. */
static int32_t seq_of_row(const lc_context *c, int32_t n_aseq, int32_t row) {
    for (int32_t a = 0; a < n_aseq; a++)
        if (row >= c->aseqs[a].row0 && row < c->aseqs[a].row0 + c->aseqs[a].n_rows)
            return c->aseq_idx[a];
    return -1;
}

/* Logit row li was to draw a token and the sampling op drew none (-1): its logits hold NaN or
 * Inf. (Rows of sequences at max_tokens are greedy placeholders, their draw unused.) */
static bool drew_nothing(const lc_context *c, int32_t li) {
    const lc_seq *s = &c->seqs[c->logit_seq[li]];
    return c->sampled[li] == -1 && s->n_generated < s->max_tokens;
}

/* The sampling row r of sequence s for this step (its uniform, its penalty window appended to
 * c->pen at *n_pen, which grows); a greedy placeholder when s may draw no more. */
static int sample_row_prepare(lc_context *c, lc_seq *s, lc_sample_row *r, int64_t *n_pen,
                              bool *any_sample) {
    if (s->n_generated >= s->max_tokens) { /* nothing to draw: a greedy placeholder */
        memset(r, 0, sizeof *r);
        r->top_p = 1.0f, r->repeat_penalty = 1.0f;
        return LC_OK;
    }
    *any_sample       = true;
    const int64_t h0  = pen_from(s);
    const int32_t cap = lc_sampler_pen_max(&s->sampler, s->n_tokens - h0);
    if (*n_pen + cap > c->pen_cap) {
        int32_t *np = realloc(c->pen, sizeof(int32_t) * (size_t)(*n_pen + cap));
        if (!np) return lc_fail(LC_ERR_NOMEM, "out of memory for the sampling penalty lists");
        c->pen     = np;
        c->pen_cap = *n_pen + cap;
    }
    /* c->pen stays NULL while no sequence has a penalty (NULL + 0 is undefined) */
    const int32_t np = lc_sampler_prepare(&s->sampler, s->tokens + h0, s->n_tokens - h0, r,
                                          c->pen ? c->pen + *n_pen : NULL, cap);
    r->pen_off = (int32_t)*n_pen;
    *n_pen += np;
    return LC_OK;
}

/* Sequence s takes the token tok drawn for it this step (its text, EOS, length limits). */
static int seq_take_sample(lc_context *c, lc_seq *s, int32_t tok) {
    const int32_t V = c->model->hp.n_vocab;
    if (s->finish == LC_FINISH_ERROR) return LC_OK;
    if (s->n_generated >= s->max_tokens) {
        s->finish = LC_FINISH_LENGTH;
        return LC_OK;
    }
    if (tok < 0 || tok >= V)
        return lc_fail(LC_ERR_INTERNAL, "sampling returned token %d (vocabulary of %d)", tok, V);
    int st = seq_grow_tokens(s);
    if (st != LC_OK) return st;
    s->tokens[s->n_tokens++] = tok;
    s->n_generated++;
    s->last_sampled = tok;
    const lc_tokenizer *tk = c->model->tokenizer;
    if (!s->ignore_eos && lc_tokenizer_is_eog(tk, tok)) {
        s->finish = LC_FINISH_EOS;
    } else {
        char   stack_buf[512], *buf = stack_buf;
        size_t nb = 0, tlen = 0;
        lc_tokenizer_token_bytes(tk, tok, &tlen);
        const size_t need = 3 * tlen + 64; /* invalid bytes may each become U+FFFD */
        if (need > sizeof stack_buf && !(buf = lc_malloc(need, "token text"))) return LC_ERR_NOMEM;
        st = lc_detok_push(&s->detok, tk, tok, buf, need > sizeof stack_buf ? need : sizeof stack_buf, &nb);
        if (st == LC_OK) st = text_append(s, buf, nb);
        if (buf != stack_buf) free(buf);
        if (st != LC_OK) return st;
        if (s->n_generated >= s->max_tokens) s->finish = LC_FINISH_LENGTH;
        if (s->n_tokens >= c->p.n_ctx) s->finish = LC_FINISH_LENGTH;
    }
    return LC_OK;
}

/* The slot cache (kv/slab_bank.h) learns what this step's decode attention read: for each
 * decode sequence and layer whose selection was recomputed in the forward, its lists with the
 * sink and window; then one gather of the misses, which the next steps read. */
static int slot_cache_learn(lc_context *c, int32_t n_aseq) {
    lc_slab_bank *bk = c->kv->bank;
    if (!bk || !c->attn->decode_reads) return LC_OK;
    lc_slab_bank_step(bk);
    const int32_t P = c->p.page_size;
    for (int32_t a = 0; a < n_aseq; a++) {
        if (c->aseqs[a].n_rows != 1) continue;
        const lc_seq *s    = &c->seqs[c->aseq_idx[a]];
        const int64_t keys = s->n_done, full = keys / P; /* pages every token of which is written */
        int64_t ws = -1;
        for (int32_t l = 0; l < c->model->hp.n_layer; l++) {
            lc_decode_reads r;
            int st = c->attn->decode_reads(c->attn, l, s->attn_states[l], &r);
            if (st != LC_OK) return st;
            if (!r.fresh) continue;
            const int64_t before = lc_slab_bank_pending(bk, l); /* (its pages are its own) */
            const int64_t w0 = keys > r.n_stream ? keys - r.n_stream : 0;
            const lc_segment ends[2] = {{0, (int32_t)(keys < r.n_sink ? keys : r.n_sink)},
                                        {(int32_t)w0, (int32_t)(keys - w0)}};
            st = lc_slab_bank_use(bk, l, s->kv.pages, full, ends, 2, -1);
            for (int32_t g = 0; g < r.n_groups && r.sel && st == LC_OK; g++)
                st = lc_slab_bank_use(bk, l, s->kv.pages, full, r.sel + (size_t)g * (size_t)r.cap,
                                      r.sel_n[g], r.n_groups == 1 ? -1 : g);
            if (st != LC_OK) return st;
            const int64_t n = lc_slab_bank_pending(bk, l) - before;
            if (n > ws) ws = n;
        }
        if (ws >= 0) c->seqs[c->aseq_idx[a]].ws_slabs = ws;
    }
    return lc_slab_bank_commit(bk);
}

/* SparseServe's working-set-aware batch control (lc_context_params.ws_batch_control): the
 * decode sequences join this step in arrival order while the sum of their working sets fits
 * the slot cache's slots a layer; the first always joins, the rest wait (their KV stays where
 * it is, nothing is recomputed). A sequence not measured yet counts as the largest working set
 * measured among the others (0 if none). */
static void ws_control(lc_context *c) {
    memset(c->ws_hold, 0, (size_t)c->p.n_seq_max);
    c->n_ws_held = 0;
    if (!c->p.ws_batch_control || !c->kv->bank) return;
    lc_slab_bank_stats bs;
    lc_slab_bank_get_stats(c->kv->bank, &bs);
    int64_t largest = 0;
    for (int32_t i = 0; i < c->p.n_seq_max; i++)
        if (c->seqs[i].live && c->seqs[i].ws_slabs > largest) largest = c->seqs[i].ws_slabs;
    int64_t sum = 0, last = -1;
    bool    any = false;
    for (;;) { /* the next decode sequence in arrival order */
        int32_t next = -1;
        for (int32_t i = 0; i < c->p.n_seq_max; i++) {
            const lc_seq *s = &c->seqs[i];
            if (!s->live || s->finish != LC_FINISH_NONE || s->n_done < s->n_prompt ||
                s->n_tokens <= s->n_done || s->arrival <= last)
                continue;
            if (next < 0 || s->arrival < c->seqs[next].arrival) next = i;
        }
        if (next < 0) break;
        last               = c->seqs[next].arrival;
        const int64_t ws   = c->seqs[next].ws_slabs >= 0 ? c->seqs[next].ws_slabs : largest;
        if (any && sum + ws > bs.slots) {
            c->ws_hold[next] = 1;
            c->n_ws_held++;
            continue;
        }
        sum += ws;
        any = true;
    }
}

static bool prefilling(const lc_seq *s) {
    return s->live && s->finish == LC_FINISH_NONE && s->n_done < s->n_prompt;
}

/* Layer-segmented prefill (p.prefill_token_layers > 0; SparseServe's, spec/tokenselect-and-
 * sparseserve.md B.5): the prompt chunk in flight — or a new one, of the first sequence still
 * prefilling that was not injected whole this step (c->inject) — goes through its next layers
 * in a forward of its own, max(1, budget / rows) of them, its residual stream kept in c->seg_x
 * between steps; the chunk's KV of a layer is written when that layer runs. When the last layer
 * of the prompt's last chunk has run, the sequence draws its first token (*final, the token in
 * *tok; its logits stay readable). *seg_i: the sequence that took part (-1: none). Another
 * sequence's logits still in the workspace are copied out first. */
static int segment_step(lc_context *c, int64_t budget, int32_t *seg_i, bool *final,
                        int32_t *tok) {
    *seg_i = -1, *final = false, *tok = -1;
    if (c->p.prefill_token_layers <= 0) return LC_OK;
    const int32_t NL = c->model->hp.n_layer;
    lc_seq       *s  = c->seg_seq >= 0 ? &c->seqs[c->seg_seq] : NULL;
    if (s && (!s->live || s->finish != LC_FINISH_NONE || s->n_done >= s->n_prompt)) s = NULL;
    if (!s) {
        c->seg_seq = -1, c->seg_layer = 0;
        for (int32_t i = 0; i < c->p.n_seq_max && !s; i++) {
            lc_seq *t = &c->seqs[i];
            if (prefilling(t) && !c->inject[i]) s = t, c->seg_seq = i;
        }
        if (!s) return LC_OK;
    }
    if (c->seg_layer == 0) { /* a new chunk */
        int64_t take = s->n_tokens - s->n_done;
        if (take > c->p.n_batch) take = c->p.n_batch;
        if (s->n_done + take > c->p.n_ctx) {
            s->finish = LC_FINISH_LENGTH, c->seg_seq = -1;
            return LC_OK;
        }
        if (lc_kv_seq_reserve(c->kv, &s->kv, s->n_done + take) != LC_OK) {
            seq_fail(s, "the KV cache is full: %s", lc_last_error());
            c->seg_seq = -1;
            return LC_OK;
        }
        c->seg_rows = (int32_t)take;
    }
    const int32_t R   = c->seg_rows;
    int64_t       per = budget / R;
    if (per < 1) per = 1;
    const int32_t l0   = c->seg_layer;
    const int32_t l1   = per >= NL - l0 ? NL : l0 + (int32_t)per;
    const bool    last = l1 == NL && s->n_done + R == s->n_tokens;
    for (int32_t t = 0; t < R; t++) {
        c->ids[t] = s->tokens[s->n_done + t];
        c->pos[t] = (int32_t)(s->n_done + t);
    }
    lc_attn_seq a = {.row0 = 0, .n_rows = R, .pos0 = (int32_t)s->n_done,
                     .page_table = s->kv.pages, .prompt_end = (int32_t)s->n_prompt};
    void **const  states[1] = {s->attn_states};
    const int32_t lrow      = R - 1;
    bool          any       = false;
    int64_t       n_pen     = 0;
    if (last) {
        /* the forward overwrites the workspace's logits: keep the rows still there */
        for (int32_t i = 0; i < c->p.n_seq_max; i++)
            if (c->seqs[i].live && c->seqs[i].logits_row >= 0) {
                int st = seq_fetch_logits(c, &c->seqs[i]);
                if (st != LC_OK) return st;
            }
        int st = sample_row_prepare(c, s, &c->srows[0], &n_pen, &any);
        if (st != LC_OK) return st;
    }
    lc_batch batch = {.n_rows = R, .ids = c->ids, .pos = c->pos, .n_seqs = 1, .seqs = &a,
                      .attn_states = states, .n_logit_rows = last ? 1 : 0, .logit_rows = &lrow,
                      .sample_rows = any ? c->srows : NULL, .pen_tokens = c->pen,
                      .n_pen = (int32_t)n_pen, .check_numerics = c->p.check_numerics,
                      .layer_begin = l0, .layer_end = l1, .x_in = c->seg_x, .x_out = c->seg_x};
    int st = lc_model_forward(c->model, c->ws, c->kv, &c->rope, c->attn, &batch, c->sampled);
    if (st == LC_ERR_NUMERIC) {
        seq_fail(s, "%s", lc_last_error());
        lc_clear_error();
        c->seg_seq = -1;
        return LC_OK;
    }
    if (st != LC_OK) return st;
    *seg_i = c->seg_seq;
    if (l1 < NL) {
        c->seg_layer = l1;
        return LC_OK;
    }
    s->n_done += R;
    c->seg_layer = 0;
    if (s->n_done >= s->n_prompt) c->seg_seq = -1;
    if (!last) return LC_OK;
    s->logits_row = 0, s->has_logits = false;
    *final = true;
    *tok   = any ? c->sampled[0] : -1;
    if (any && c->sampled[0] < 0) { /* the sampling op's non-finite check */
        seq_fail(s, "the logits at position %lld are not finite (NaN/Inf)",
                 (long long)(s->n_tokens - 1));
        *final = false;
    }
    return LC_OK;
}

int lc_context_step(lc_context *c, lc_event *events, size_t cap, size_t *n_events) {
    lc_clear_error();
    if (!c || !n_events || (cap && !events))
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_step: NULL argument");
    *n_events = 0;
    /* every sequence that can report this step must find room: check before advancing */
    size_t may_report = 0;
    for (int32_t i = 0; i < c->p.n_seq_max; i++)
        may_report += c->seqs[i].live && !c->seqs[i].reported_finish;
    if (may_report > cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_step: room for %zu events but %zu live "
                       "sequences may report one (pass cap >= %zu; n_seq_max %d is always "
                       "enough); nothing was advanced", cap, may_report, may_report,
                       c->p.n_seq_max);
    const int rope_st = rope_cover_live(c); /* the table reaches every position of the step */
    if (rope_st != LC_OK) return rope_st;
    int32_t rows = 0, n_aseq = 0, n_logit = 0;
    /* Layer-segmented prefill (p.prefill_token_layers): prompts whose whole remaining work
     * (rows x layers) fits what is left of the step's budget join this step's batch whole, in
     * sequence order (SparseServe's injection; a short prompt waits for no long one); then the
     * first other prompt still prefilling runs its next layers with what is left (at least one
     * layer), before the batch */
    const bool    segmented = c->p.prefill_token_layers > 0;
    const int32_t NL        = c->model->hp.n_layer;
    int64_t       budget    = c->p.prefill_token_layers;
    memset(c->inject, 0, (size_t)c->p.n_seq_max);
    if (segmented) {
        int64_t inj_rows = 0;
        for (int32_t i = 0; i < c->p.n_seq_max; i++) {
            const lc_seq *s = &c->seqs[i];
            if (!prefilling(s) || i == c->seg_seq) continue;
            const int64_t rem = s->n_tokens - s->n_done;
            if (rem * NL > budget || inj_rows + rem > c->p.n_batch) continue;
            c->inject[i] = 1;
            budget -= rem * NL;
            inj_rows += rem;
        }
    }
    int32_t seg_i;
    bool    seg_final;
    int32_t seg_tok;
    int     seg_st = segment_step(c, budget, &seg_i, &seg_final, &seg_tok);
    if (seg_st != LC_OK) return seg_st;

    ws_control(c);
    /* pass 1: decode tokens; pass 2: prompt chunks */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < c->p.n_seq_max && rows < c->p.n_batch; i++) {
            lc_seq *s = &c->seqs[i];
            if (!s->live || s->finish != LC_FINISH_NONE) continue;
            const bool decoding = s->n_done >= s->n_prompt;
            if ((pass == 0) != decoding || (segmented && !decoding && !c->inject[i])) continue;
            if (decoding && c->ws_hold[i]) continue; /* waits: the working sets are full */
            int64_t take = s->n_tokens - s->n_done;
            if (take <= 0) continue;
            if (take > c->p.n_batch - rows) take = c->p.n_batch - rows;
            if (s->n_done + take > c->p.n_ctx) {
                s->finish = LC_FINISH_LENGTH;
                continue;
            }
            if (lc_kv_seq_reserve(c->kv, &s->kv, s->n_done + take) != LC_OK) {
                /* out of KV pages: end this sequence, the others go on */
                if (decoding) {
                    lc_log(LC_LOG_WARN, "sequence %d stopped: %s", s->id, lc_last_error());
                    s->finish = LC_FINISH_LENGTH;
                } else {
                    seq_fail(s, "the KV cache is full: %s", lc_last_error());
                }
                continue;
            }
            lc_attn_seq *a = &c->aseqs[n_aseq];
            a->row0        = rows;
            a->n_rows      = (int32_t)take;
            a->pos0        = (int32_t)s->n_done;
            a->page_table  = s->kv.pages;
            a->prompt_end  = decoding ? 0 : (int32_t)s->n_prompt;
            c->astates[n_aseq]  = s->attn_states;
            c->aseq_idx[n_aseq] = i;
            n_aseq++;
            for (int64_t t = 0; t < take; t++) {
                c->ids[rows + t] = s->tokens[s->n_done + t];
                c->pos[rows + t] = (int32_t)(s->n_done + t);
            }
            rows += (int32_t)take;
            if (s->n_done + take == s->n_tokens) { /* last prompt chunk or a decode token */
                c->logit_rows[n_logit] = rows - 1;
                c->logit_seq[n_logit]  = i;
                n_logit++;
            }
        }
    }
    if (rows > 0) {
        /* the workspace's logits are about to be overwritten: keep the rows of sequences that
         * get no new ones this step */
        for (int32_t i = 0; i < c->p.n_seq_max; i++) {
            lc_seq *s = &c->seqs[i];
            if (!s->live || s->logits_row < 0) continue;
            bool renewed = false;
            for (int32_t li = 0; li < n_logit && !renewed; li++) renewed = c->logit_seq[li] == i;
            if (renewed) {
                s->logits_row = -1; /* its old logits expire with this step */
                s->has_logits = false;
            } else {
                int st = seq_fetch_logits(c, s);
                if (st != LC_OK) return st;
            }
        }
        /* sampling rows: a uniform from each sequence's RNG, its penalty window */
        bool    any_sample = false;
        int64_t n_pen      = 0;
        for (int32_t li = 0; li < n_logit; li++) {
            int st = sample_row_prepare(c, &c->seqs[c->logit_seq[li]], &c->srows[li], &n_pen,
                                        &any_sample);
            if (st != LC_OK) return st;
        }
        lc_batch batch = {rows, c->ids, c->pos, n_aseq, c->aseqs, (void **const *)c->astates,
                          n_logit, c->logit_rows, any_sample ? c->srows : NULL, c->pen,
                          (int32_t)n_pen, c->p.check_numerics, 0, 0, NULL, NULL};
        int st = lc_model_forward(c->model, c->ws, c->kv, &c->rope, c->attn, &batch, c->sampled);
        if (st == LC_ERR_NUMERIC) {
            /* check_numerics found NaN/Inf: that row's sequence ends with the message; the
             * others did not advance and run this step again next time */
            const int32_t i = seq_of_row(c, n_aseq, c->ws->bad_row);
            if (i < 0) return st;
            seq_fail(&c->seqs[i], "%s", lc_last_error());
            lc_clear_error();
            n_aseq = n_logit = 0;
        } else if (st != LC_OK) {
            return st;
        }
        for (int32_t a = 0; a < n_aseq; a++) {
            lc_seq *s = &c->seqs[c->aseq_idx[a]];
            s->n_done += c->aseqs[a].n_rows;
        }
        if ((st = slot_cache_learn(c, n_aseq)) != LC_OK) return st;
        /* the sampling op's free check: a row with NaN/Inf logits draws -1. Run the step again
         * with per-layer checks (no sampling) to name where the values first broke */
        bool nonfinite = false;
        for (int32_t li = 0; li < n_logit && any_sample; li++) nonfinite |= drew_nothing(c, li);
        if (nonfinite) {
            char    diag[768];
            lc_batch chk      = batch;
            chk.sample_rows   = NULL;
            chk.pen_tokens    = NULL;
            chk.n_pen         = 0;
            chk.check_numerics = true;
            const int dst = lc_model_forward(c->model, c->ws, c->kv, &c->rope, c->attn, &chk, NULL);
            if (dst == LC_ERR_NUMERIC)
                snprintf(diag, sizeof diag, "%s", lc_last_error());
            else if (dst == LC_OK)
                snprintf(diag, sizeof diag, "a re-run with per-layer checks found none");
            else
                snprintf(diag, sizeof diag, "the re-run with per-layer checks failed: %s",
                         lc_last_error());
            lc_clear_error();
            for (int32_t li = 0; li < n_logit; li++) {
                lc_seq *s = &c->seqs[c->logit_seq[li]];
                if (drew_nothing(c, li))
                    seq_fail(s, "the logits at position %lld are not finite (NaN/Inf): %s",
                             (long long)(s->n_tokens - 1), diag);
            }
        }
    }

    /* take the samples, detokenise, emit events */
    for (int32_t li = 0; li < n_logit; li++) {
        lc_seq *s     = &c->seqs[c->logit_seq[li]];
        s->logits_row = li;
        s->has_logits = false;
        int st        = seq_take_sample(c, s, c->sampled[li]);
        if (st != LC_OK) return st;
    }
    if (seg_i >= 0 && seg_final) {
        int st = seq_take_sample(c, &c->seqs[seg_i], seg_tok);
        if (st != LC_OK) return st;
    }

    /* events for every sequence that took part, or finished and is not yet reported */
    for (int32_t i = 0; i < c->p.n_seq_max; i++) {
        lc_seq *s = &c->seqs[i];
        if (!s->live || s->reported_finish) continue;
        bool took_part = i == seg_i;
        for (int32_t a = 0; a < n_aseq && !took_part; a++) took_part = c->aseq_idx[a] == i;
        if (!took_part && s->finish == LC_FINISH_NONE) continue;
        size_t end;
        if (s->finish == LC_FINISH_NONE) {
            end = text_safe_end(s); /* may find a stop string and finish */
        } else {
            char   buf[64];
            size_t nb = 0;
            if (lc_detok_flush(&s->detok, buf, sizeof buf, &nb) == LC_OK && nb) {
                int st = text_append(s, buf, nb);
                if (st != LC_OK) return st;
            }
            end = s->text_len;
        }
        if (*n_events < cap) {
            lc_event *e      = &events[*n_events];
            e->seq_id        = s->id;
            e->token         = s->last_sampled;
            e->text          = s->text ? s->text + s->text_emitted : "";
            e->text_len      = end - s->text_emitted;
            e->n_prompt_done = s->n_done < s->n_prompt ? s->n_done : s->n_prompt;
            e->n_prompt      = s->n_prompt;
            e->n_generated   = s->n_generated;
            e->finish        = s->finish;
            e->error         = s->finish == LC_FINISH_ERROR ? (s->error ? s->error : "error") : NULL;
            (*n_events)++;
        }
        s->text_emitted = end;
        s->last_sampled = -1;
        if (s->finish != LC_FINISH_NONE) s->reported_finish = true;
        if (took_part && s->n_done <= s->n_prompt && c->p.prefill_progress)
            c->p.prefill_progress(s->n_done, s->n_prompt, c->p.progress_user);
    }
    return LC_OK;
}

/* ---- teacher-forced scoring ------------------------------------------------------------ */


/* the row of the k-th (0-based) scoring row at or after a; INT64_MAX when there is none */
static int64_t score_nth_row(const lc_score_range *r, int32_t n_r, int64_t a, int64_t k) {
    for (int32_t i = 0; i < n_r; i++) {
        const int64_t lo = r[i].begin - 1 > a ? r[i].begin - 1 : a, hi = r[i].end - 1;
        if (hi <= lo) continue;
        if (k < hi - lo) return lo + k;
        k -= hi - lo;
    }
    return INT64_MAX;
}

int lc_context_score(lc_context *c, const int32_t *tokens, int64_t n_tokens,
                     const lc_score_range *ranges, int32_t n_ranges, double *logprob) {
    lc_clear_error();
    if (!c || !tokens || (n_ranges > 0 && (!ranges || !logprob)) || n_ranges < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_context_score: NULL argument");
    const lc_hparams *hp = &c->model->hp;
    const int32_t     V  = hp->n_vocab;
    if (n_tokens < 1 || n_tokens > c->p.n_ctx)
        return lc_fail(LC_ERR_CONTEXT, "scoring %lld tokens: the context holds 1 .. %d "
                       "(raise -c/--ctx)", (long long)n_tokens, c->p.n_ctx);
    for (int32_t i = 0; i < n_ranges; i++)
        if (ranges[i].begin < 1 || ranges[i].end <= ranges[i].begin ||
            ranges[i].end > n_tokens || (i > 0 && ranges[i].begin < ranges[i - 1].end))
            return lc_fail(LC_ERR_INVALID_ARG, "score range %d [%lld, %lld) of %lld tokens: "
                           "ranges must be sorted, disjoint and within [1, %lld]", i,
                           (long long)ranges[i].begin, (long long)ranges[i].end,
                           (long long)n_tokens, (long long)n_tokens);
    for (int64_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return lc_fail(LC_ERR_INVALID_ARG, "token %lld has id %d outside the vocabulary "
                           "(0 .. %d)", (long long)i, tokens[i], V - 1);
    const int64_t need_pages = lc_kv_pages_for(c->kv, n_tokens);
    if (need_pages > c->kv->n_free)
        return lc_fail(LC_ERR_CONTEXT, "scoring %lld tokens needs %lld KV pages but only %lld "
                       "of %lld are free", (long long)n_tokens, (long long)need_pages,
                       (long long)c->kv->n_free, (long long)c->kv->n_pages);

    const int rope_st = rope_cover(c, n_tokens); /* the table reaches every position */
    if (rope_st != LC_OK) return rope_st;
    const int32_t  max_lrows = c->p.score_rows > 0 ? c->p.score_rows : SCORE_LOGIT_ROWS;
    lc_kv_seq      kvs    = {0};
    lc_forward_ws *ws     = NULL;
    void         **states = NULL;
    const int32_t  NB     = c->p.n_batch;
    int32_t *ids   = lc_malloc(sizeof(int32_t) * (size_t)NB, "score batch");
    int32_t *pos   = lc_malloc(sizeof(int32_t) * (size_t)NB, "score batch");
    int32_t *lrows = lc_malloc(sizeof(int32_t) * (size_t)max_lrows, "score batch");
    int64_t *lpos  = lc_malloc(sizeof(int64_t) * (size_t)max_lrows, "score batch");
    float   *lg    = lc_malloc(sizeof(float) * (size_t)V * (size_t)max_lrows, "score logits");
    int st = (!ids || !pos || !lrows || !lpos || !lg) ? LC_ERR_NOMEM : LC_OK;
    if (st == LC_OK) st = states_new(c, &states);
    if (st == LC_OK) st = lc_kv_seq_reserve(c->kv, &kvs, n_tokens);
    if (st == LC_OK) st = lc_forward_ws_create(c->model, NB, max_lrows, &ws);

    for (int64_t p0 = 0; st == LC_OK && p0 < n_tokens;) {
        int64_t take = n_tokens - p0 < NB ? n_tokens - p0 : NB;
        /* at most max_lrows scoring rows per forward: end the chunk before the next one, on
         * a multiple of 64 rows from p0 when that leaves any (query blocks stay aligned) */
        const int64_t over = score_nth_row(ranges, n_ranges, p0, max_lrows);
        if (over < p0 + take) {
            const int64_t t64 = (over - p0) / 64 * 64;
            take              = t64 > 0 ? t64 : over - p0;
        }
        int32_t nl = 0;
        for (int64_t t = 0; t < take; t++) {
            ids[t] = tokens[p0 + t];
            pos[t] = (int32_t)(p0 + t);
        }
        for (int64_t k = 0;; k++) {
            const int64_t row = score_nth_row(ranges, n_ranges, p0, k);
            if (row >= p0 + take) break;
            lrows[nl]  = (int32_t)(row - p0);
            lpos[nl++] = row + 1; /* the token this row scores */
        }
        lc_attn_seq aseq = {.row0 = 0, .n_rows = (int32_t)take, .pos0 = (int32_t)p0,
                            .page_table = kvs.pages};
        void **sp[1] = {states};
        lc_batch batch = {(int32_t)take, ids, pos, 1, &aseq, (void **const *)sp, nl, lrows,
                          NULL, NULL, 0, c->p.check_numerics, 0, 0, NULL, NULL};
        st = lc_model_forward(c->model, ws, c->kv, &c->rope, c->attn, &batch, NULL);
        for (int32_t i = 0; i < nl && st == LC_OK; i++)
            st = lc_forward_logits(c->model, ws, i, lg + (size_t)i * (size_t)V);
        if (st == LC_OK) {
#pragma omp parallel for schedule(static)
            for (int32_t i = 0; i < nl; i++) {
                const float *x  = lg + (size_t)i * (size_t)V;
                double       mx = -INFINITY, sum = 0;
                for (int32_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
                for (int32_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
                logprob[lpos[i]] = (double)x[tokens[lpos[i]]] - mx - log(sum);
            }
            for (int32_t i = 0; i < nl && st == LC_OK; i++)
                if (!isfinite(logprob[lpos[i]]))
                    st = lc_fail(LC_ERR_NUMERIC, "scoring: the logits at position %lld are not "
                                 "finite (NaN/Inf); check_numerics names the layer",
                                 (long long)(lpos[i] - 1));
        }
        p0 += take;
        if (st == LC_OK && c->p.prefill_progress)
            c->p.prefill_progress(p0, n_tokens, c->p.progress_user);
    }
    if (ws) lc_forward_ws_free(c->model, ws);
    if (kvs.pages) lc_kv_seq_release(c->kv, &kvs);
    states_free(c, states);
    free(ids), free(pos), free(lrows), free(lpos), free(lg);
    return st;
}
