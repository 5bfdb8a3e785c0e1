/*
 * budget.c — memory a model and a context will need, computed from the GGUF tensor table and
 * the context parameters before anything is allocated, checked against the memory of the
 * backend (CPU: the host's available memory; CUDA: the GPU's free memory, plus the host for
 * host-side buffers) (DESIGN.md "Memory is accounted"). The sizes mirror the allocations of
 * load_weights / the backends' weight_load (model.c), lc_kv_create (kv.c), the RoPE table
 * (engine.c) and lc_forward_ws_create (forward.c): keep them in step.
 *
 * Not counted: the attention method's scratch and per-sequence state (sized by use), the
 * second workspace of lc_context_score while it runs, the GGUF mapping (page cache the kernel
 * reclaims). On a GPU a fixed reserve stands for the scratch that grows with use.
 */
#include "model/budget.h"
#include "kv/kv.h"

#include <sys/resource.h>
#include "format/gguf.h"
#include "format/quant.h"
#include "util/sysmem.h"
#include "util/util.h"

#include <stdio.h>
#include <string.h>

#define GPU_RESERVE (256ull << 20) /* cuBLASLt workspace, attention partials, method scratch */
/* block-type weights: the f16 rows a prompt-sized product dequantises */
#define GPU_WDQ_RESERVE (2ull * (uint64_t)LC_WEIGHT_SLICE_ELEMS)

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return lc_mul_u64(a, b, &r) ? r : UINT64_MAX;
}
static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return lc_add_u64(a, b, &r) ? r : UINT64_MAX;
}
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

int32_t lc_budget_rope_rows0(const lc_context_params *p) {
    int64_t rows = LC_ROPE_MIN_ROWS;
    /* positions read at fixed offsets (backend/select_args.c checks them against the table):
     * relative scoring at n_stream + 1; TokenSelect fingerprints at n_local + row: the method's
     * fixed_rope_rows */
    const int64_t fixed = lc_attn_fixed_rope_rows(p);
    if (fixed > rows) rows = fixed;
    return (int32_t)(rows < p->n_ctx ? rows : p->n_ctx);
}

/* ---- weights ----------------------------------------------------------------------------- */

/* How the backend holds matrices: 4 bytes an element, 2, or the file's own blocks. */
typedef enum held_as { HELD_F32, HELD_16, HELD_NATIVE } held_as;

static held_as held_of(const lc_backend *b) {
    return b->weight_type == LC_TYPE_F32      ? HELD_F32
           : b->weight_type == LC_WEIGHT_NATIVE ? HELD_NATIVE
                                                : HELD_16;
}

static uint64_t held_bytes(const lc_gguf_tensor *t, held_as as, uint64_t native_types) {
    const uint64_t rows = sat_mul(sat_mul(t->ne[1], t->ne[2]), t->ne[3]);
    uint64_t       row_bytes;
    /* native: the file's bytes (CPU: the mapped pages, resident as they are read) where the
     * backend keeps the type; other matrices are held in 16 bits */
    if (as == HELD_NATIVE && rows > 1 && t->type < 64 && ((native_types >> t->type) & 1) &&
        lc_type_row_bytes(t->type, t->ne[0], &row_bytes))
        return sat_mul(row_bytes, rows);
    /* vectors (norms, biases) stay f32 on every backend */
    return sat_mul(sat_mul(t->ne[0], rows), rows <= 1 || as == HELD_F32 ? 4 : 2);
}

/* Whether load_weights reads a tensor of this name: the three top-level ones, and the twelve
 * of each layer blk.L.* with L < n_layer. */
static bool loaded_name(const char *name, int32_t n_layer) {
    static const char *top[]   = {"token_embd.weight", "output_norm.weight", "output.weight"};
    static const char *layer[] = {"attn_norm.weight", "attn_q.weight",   "attn_k.weight",
                                  "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
                                  "ffn_gate.weight",  "ffn_up.weight",   "ffn_down.weight",
                                  "attn_q.bias",      "attn_k.bias",     "attn_v.bias"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(name, top[i]) == 0) return true;
    if (strncmp(name, "blk.", 4) != 0) return false;
    const char *p = name + 4;
    int64_t     l = 0;
    if (*p < '0' || *p > '9') return false;
    for (; *p >= '0' && *p <= '9' && l <= n_layer; p++) l = l * 10 + (*p - '0');
    if (l >= n_layer || *p != '.') return false;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (strcmp(p + 1, layer[i]) == 0) return true;
    return false;
}

/* The tensors load_weights reads, as the backend holds them (f32: 4 bytes a matrix element).
 * One pass over the tensor table: a hostile block_count costs nothing here. */
static uint64_t weight_bytes(const lc_model *m, held_as as) {
    const uint64_t native_types = m->backend->native_types;
    uint64_t      total = 0;
    const int64_t n     = lc_gguf_n_tensors(m->gguf);
    for (int64_t i = 0; i < n; i++) {
        const lc_gguf_tensor *t = lc_gguf_tensor_at(m->gguf, i);
        if (t && t->name && loaded_name(t->name, m->hp.n_layer))
            total = sat_add(total, held_bytes(t, as, native_types));
    }
    return total;
}

uint64_t lc_budget_weight_bytes(const lc_model *m) {
    return weight_bytes(m, held_of(m->backend));
}

/* Free and total bytes of the memory the backend allocates in; false (logged) when unknown. */
static bool backend_memory(lc_backend *b, uint64_t *avail, uint64_t *total) {
    const int st = b->mem_info ? b->mem_info(b, avail, total) : lc_sys_host_memory(avail, total);
    if (st == LC_OK) return true;
    lc_log(LC_LOG_WARN, "memory check skipped: %s", lc_last_error());
    lc_clear_error();
    return false;
}

static bool on_host(const lc_backend *b) { return b->device == LC_DEVICE_CPU || !b->mem_info; }

int lc_budget_check_weights(const lc_model *m) {
    lc_backend    *b    = m->backend;
    const held_as  as   = held_of(b);
    const uint64_t need = weight_bytes(m, as);
    uint64_t       avail, total;
    if (!backend_memory(b, &avail, &total) || need <= avail) return LC_OK;
    char n1[32], n2[32], n3[32], n4[32];
    lc_fmt_bytes(need, n1, sizeof n1);
    lc_fmt_bytes(avail, n2, sizeof n2);
    lc_fmt_bytes(total, n3, sizeof n3);
    if (!on_host(b))
        return lc_fail(LC_ERR_NOMEM, "the model's weights need %s of GPU memory (%s) but %s of "
                       "the GPU's %s is free; free GPU memory, run on the CPU (--device cpu), or "
                       "pass --overcommit to load anyway", n1,
                       as == HELD_NATIVE ? "as stored in the file" : "16 bits an element", n2, n3);
    const uint64_t native = weight_bytes(m, HELD_NATIVE);
    char           hint[96] = "";
    if (as != HELD_NATIVE && native <= avail)
        snprintf(hint, sizeof hint, "; --weights native holds them in %s",
                 lc_fmt_bytes(native, n4, sizeof n4));
    return lc_fail(LC_ERR_NOMEM, "the model's weights need %s of host memory as %s but %s of "
                   "the %s is available%s; or pass --overcommit to load anyway", n1,
                   as == HELD_F32 ? "f32" : as == HELD_16 ? "f16" : "stored in the file", n2, n3,
                   hint);
}

/* ---- context ----------------------------------------------------------------------------- */

int64_t lc_budget_kv_host_pages(const lc_context_params *p) {
    const int64_t n_pages = (p->kv_tokens + p->page_size - 1) / p->page_size;
    const int64_t h       = (p->kv_host_tokens + p->page_size - 1) / p->page_size;
    return h < 0 ? 0 : h > n_pages ? n_pages : h;
}

int64_t lc_budget_kv_slot_pages(const lc_context_params *p) {
    return p->kv_slot_cache_tokens > 0 ? (p->kv_slot_cache_tokens + p->page_size - 1) / p->page_size
                                       : 0;
}

void lc_budget_context(const lc_model *m, const lc_context_params *p, lc_ctx_budget *o) {
    const lc_hparams *hp = &m->hp;
    lc_backend       *b  = m->backend;
    memset(o, 0, sizeof *o);
    /* lc_kv_create: every layer a K and a V pool of n_pages pages */
    const uint64_t slab = lc_kv_slab_bytes(p->kv_type == LC_KV_FP8, b->kv_type, p->page_size,
                                           hp->head_dim); /* one page of one head and pool */
    o->kv_per_token     = sat_mul(2ull * (uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv, slab) /
                      (uint64_t)p->page_size;
    const uint64_t slot_pages = (uint64_t)lc_budget_kv_slot_pages(p); /* the slot cache's, on the GPU */
    const uint64_t pages = ((uint64_t)p->kv_tokens + (uint64_t)p->page_size - 1) /
                               (uint64_t)p->page_size + slot_pages;
    o->kv_bytes = sat_mul(sat_mul(pages, (uint64_t)p->page_size), o->kv_per_token);
    if (slot_pages > 0) /* its slab maps and copy lists (kv/slab_bank.h) */
        o->kv_bytes = sat_add(o->kv_bytes,
                              sat_mul((uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv,
                                      sat_add(sat_mul(pages, 4), sat_mul(slot_pages, 16))));
    /* the host tier: the pages lc_kv_create leaves outside the (rounded-up) device tier */
    const int64_t  host_asked = lc_budget_kv_host_pages(p);
    const uint64_t pool_page  = (uint64_t)hp->n_head_kv * slab; /* one page of one pool */
    const int64_t  dev_pages  = lc_kv_dev_pages(b, pool_page, (int64_t)pages, host_asked);
    o->kv_host_bytes = sat_mul((uint64_t)((int64_t)pages - dev_pages),
                               sat_mul((uint64_t)p->page_size, o->kv_per_token));
    /* the RoPE table: cos and sin [rows][n_rot/2], grown by doubling up to n_ctx; a sequence
     * reaches no position past the KV capacity */
    o->rope_per_row       = (uint64_t)(hp->n_rot / 2) * sizeof(float) * 2;
    const uint64_t used   = min_u64((uint64_t)p->kv_tokens, (uint64_t)p->n_ctx);
    const uint64_t rows   = min_u64((uint64_t)p->n_ctx,
                                    max_u64((uint64_t)lc_budget_rope_rows0(p), 2 * used));
    o->rope_bytes         = sat_mul(rows, o->rope_per_row);
    /* lc_forward_ws_create(n_batch, n_seq_max logit rows) */
    const uint64_t n = (uint64_t)p->n_batch, nl = (uint64_t)p->n_seq_max;
    const uint64_t E = (uint64_t)hp->n_embd, Q = (uint64_t)hp->n_head * (uint64_t)hp->head_dim,
                   KV = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim, F = (uint64_t)hp->n_ff,
                   V = (uint64_t)hp->n_vocab;
    o->ws_bytes = sizeof(float) * (n * (3 * E + 3 * Q + 2 * KV + 2 * F) + nl * (E + V)) +
                  n * 2 * sizeof(int32_t) + nl * (2 * sizeof(int32_t) + sizeof(lc_sample_row)) +
                  256 * sizeof(int32_t) +
                  (p->prefill_token_layers > 0 ? sizeof(float) * n * E : 0); /* engine.c seg_x */
    /* host: each sequence's logits and token array (prompt + up to 4096 more), the step's
     * scratch, and the host copy the table is filled in when the backend is not the host */
    o->host_bytes = nl * V * sizeof(float) +
                    sat_mul(sat_add((uint64_t)p->kv_tokens, nl * 4097), sizeof(int32_t)) +
                    n * 2 * sizeof(int32_t) +
                    nl * (3 * sizeof(int32_t) + sizeof(lc_attn_seq) + sizeof(void *) +
                          sizeof(lc_sample_row) + sizeof(int32_t));
    if (!on_host(b)) o->host_bytes = sat_add(o->host_bytes, o->rope_bytes);
    o->backend_reserve = on_host(b)                          ? 0
                         : b->weight_type == LC_WEIGHT_NATIVE ? GPU_RESERVE + GPU_WDQ_RESERVE
                                                              : GPU_RESERVE;
}

/* Round down to 3 significant digits ("~483,000"). */
static uint64_t round3(uint64_t v) {
    uint64_t p = 1;
    while (v / p >= 1000) p *= 10;
    return v / p * p;
}

/* One memory (host, or the GPU): need = fixed + per_token x tokens against avail. */
static int refuse(const lc_context_params *p, const char *where, uint64_t avail, uint64_t total,
                  uint64_t need, uint64_t kv_bytes, uint64_t fixed, uint64_t per_token,
                  uint64_t ws_bytes) {
    char s_need[32], s_avail[32], s_total[32], s_kv[32], s_tok[32], s_fit[32], s_ws[32];
    lc_fmt_bytes(need, s_need, sizeof s_need);
    lc_fmt_bytes(avail, s_avail, sizeof s_avail);
    lc_fmt_bytes(total, s_total, sizeof s_total);
    lc_fmt_bytes(kv_bytes, s_kv, sizeof s_kv);
    lc_fmt_count((uint64_t)p->kv_tokens, s_tok, sizeof s_tok);
    const uint64_t fit = avail > fixed && per_token ? (avail - fixed) / per_token : 0;
    if (fit < (uint64_t)p->page_size)
        return lc_fail(LC_ERR_NOMEM, "the context's buffers alone need %s of %s (forward "
                       "workspace for batches of %d tokens: %s) but %s of the %s is available; "
                       "lower -b/--batch, or pass --overcommit to allocate anyway",
                       lc_fmt_bytes(fixed, s_need, sizeof s_need), where, p->n_batch,
                       lc_fmt_bytes(ws_bytes, s_ws, sizeof s_ws), s_avail, s_total);
    lc_fmt_count(round3(fit), s_fit, sizeof s_fit);
    if (kv_bytes == 0) /* the host's share of a context on a GPU */
        return lc_fail(LC_ERR_NOMEM, "the context's host buffers for %s tokens (token ids, "
                       "logits, the RoPE table's staging copy) need %s but %s of %s (of %s) is "
                       "available; at most ~%s tokens fit (lower -c/--ctx, --kv-tokens or --kv-gb), or "
                       "pass --overcommit to allocate anyway", s_tok, s_need, s_avail, where,
                       s_total, s_fit);
    return lc_fail(LC_ERR_NOMEM, "the KV cache for %s tokens needs %s (%s with the RoPE table, "
                   "workspace and buffers) but %s of %s (of %s) is available; at most ~%s "
                   "tokens fit (lower -c/--ctx, --kv-tokens or --kv-gb), or pass --overcommit "
                   "to allocate anyway", s_tok, s_kv, s_need, s_avail, where, s_total, s_fit);
}

int lc_budget_check_context(const lc_model *m, const lc_context_params *p) {
    lc_backend   *b = m->backend;
    lc_ctx_budget e;
    lc_budget_context(m, p, &e);
    const uint64_t rope0 = sat_mul((uint64_t)lc_budget_rope_rows0(p), e.rope_per_row);
    /* per token of capacity: its KV, two RoPE rows (the table doubles), its token id */
    const uint64_t tok_backend = e.kv_per_token + 2 * e.rope_per_row;
    const uint64_t tok_ids     = sizeof(int32_t);
    const uint64_t ids_bytes   = sat_mul((uint64_t)p->kv_tokens, tok_ids);
    uint64_t       h_avail, h_total;
    const bool     host_known = lc_sys_host_memory(&h_avail, &h_total) == LC_OK;
    if (!host_known) {
        lc_log(LC_LOG_WARN, "memory check skipped: %s", lc_last_error());
        lc_clear_error();
    }
    if (on_host(b)) {
        if (!host_known) return LC_OK;
        const uint64_t need = sat_add(sat_add(sat_add(e.kv_bytes, e.rope_bytes), e.ws_bytes),
                                      e.host_bytes);
        if (need <= h_avail) return LC_OK;
        const uint64_t fixed = e.ws_bytes + rope0 + (e.host_bytes - ids_bytes);
        return refuse(p, "host memory", h_avail, h_total, need, e.kv_bytes, fixed,
                      tok_backend + tok_ids, e.ws_bytes);
    }
    uint64_t       d_avail, d_total;
    const uint64_t kv_dev = e.kv_bytes - e.kv_host_bytes;
    if (backend_memory(b, &d_avail, &d_total)) {
        const uint64_t need = sat_add(sat_add(sat_add(kv_dev, e.rope_bytes), e.ws_bytes),
                                      e.backend_reserve);
        if (need > d_avail)
            return refuse(p, "GPU memory", d_avail, d_total, need, kv_dev,
                          e.ws_bytes + rope0 + e.backend_reserve, tok_backend, e.ws_bytes);
    }
    if (host_known && e.kv_host_bytes > 0 && sat_add(e.host_bytes, e.kv_host_bytes) > h_avail) {
        /* pinned memory cannot be paged out: refuse before the driver locks it */
        char s_need[32], s_avail[32], s_total[32], s_tok[32], s_lock[48] = "";
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            char s_l[32];
            snprintf(s_lock, sizeof s_lock, "; the memlock limit is %s",
                     lc_fmt_bytes((uint64_t)rl.rlim_cur, s_l, sizeof s_l));
        }
        lc_fmt_count((uint64_t)(e.kv_host_bytes / e.kv_per_token), s_tok, sizeof s_tok);
        return lc_fail(LC_ERR_NOMEM, "the KV cache's host tier of %s tokens needs %s of pinned "
                       "host memory (with the context's other host buffers) but %s of the "
                       "host's %s is available%s; lower --kv-host-gb (or --kv-host-tokens), or "
                       "pass --overcommit to allocate anyway", s_tok,
                       lc_fmt_bytes(sat_add(e.host_bytes, e.kv_host_bytes), s_need, sizeof s_need),
                       lc_fmt_bytes(h_avail, s_avail, sizeof s_avail),
                       lc_fmt_bytes(h_total, s_total, sizeof s_total), s_lock);
    }
    if (host_known && e.host_bytes > h_avail) {
        /* the host's share: token ids and the table's staging copy grow with the tokens */
        const uint64_t fixed = e.host_bytes - ids_bytes - e.rope_bytes + rope0;
        return refuse(p, "host memory", h_avail, h_total, e.host_bytes, 0, fixed,
                      tok_ids + 2 * e.rope_per_row, e.ws_bytes);
    }
    return LC_OK;
}
