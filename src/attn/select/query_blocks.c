/*
 * query_blocks.c — query blocks, plan images, decode cache pools and the prefill-selection
 * workspace shared by the sparse methods (see query_blocks.h).
 */
#include "attn/select/query_blocks.h"
#include "util/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int sel_ws_init(sel_ws *w, lc_backend *b, int32_t n_layer, bool lists, int32_t n_groups,
                int32_t sel_cap, int32_t n_sink) {
    memset(w, 0, sizeof *w);
    w->b        = b;
    w->n_layer  = n_layer;
    w->lists    = lists;
    w->n_groups = n_groups;
    w->sel_cap  = sel_cap;
    w->n_sink   = n_sink;
    w->planned  = lc_calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof(bool), "query blocks");
    return w->planned ? LC_OK : LC_ERR_NOMEM;
}

static void ws_free_images(sel_ws *w) {
    lc_backend *b = w->b;
    free(w->h_img), free(w->up_img);
    if (w->d_img) b->dealloc(b, w->d_img);
    if (w->d_sel) b->dealloc(b, w->d_sel);
    if (w->d_n) b->dealloc(b, w->d_n);
    w->h_img = NULL, w->up_img = NULL, w->d_img = NULL, w->d_sel = NULL, w->d_n = NULL;
    w->h_qb = NULL, w->d_qb = NULL, w->h_list = NULL, w->h_from = NULL, w->d_list = NULL;
    w->d_from    = NULL;
    w->qb_cap    = 0;
    w->up_valid  = false;
    w->img_bytes = 0;
}

void sel_ws_release(sel_ws *w) {
    ws_free_images(w);
    free(w->planned);
    w->planned = NULL;
}

/* bytes of the blocks at the head of an image (rows of int32 follow, 16-byte aligned) */
static size_t qb_bytes(int32_t cap) {
    return (sizeof(lc_qblock) * (size_t)cap + 15) & ~(size_t)15;
}

static int ws_reserve(sel_ws *w, int32_t n_qb) {
    if (n_qb <= w->qb_cap) return LC_OK;
    ws_free_images(w);
    lc_backend   *b     = w->b;
    const int32_t cap   = n_qb < 64 ? 64 : n_qb + n_qb / 2;
    const size_t  lists = (size_t)cap * (size_t)w->n_groups;
    const size_t  row   = w->lists ? sizeof(int32_t) * (size_t)cap * (size_t)w->n_layer : 0;
    w->img_bytes        = qb_bytes(cap) + 2 * row;
    w->h_img            = lc_calloc(1, w->img_bytes, "query blocks");
    w->up_img           = lc_malloc(w->img_bytes, "query blocks");
    w->d_img            = b->alloc(b, w->img_bytes, "query blocks");
    if (w->sel_cap > 0) {
        w->d_sel = b->alloc(b, sizeof(lc_segment) * lists * (size_t)w->sel_cap, "prefill selections");
        w->d_n   = b->alloc(b, sizeof(int32_t) * lists, "prefill selections");
    }
    if (!w->h_img || !w->up_img || !w->d_img || (w->sel_cap > 0 && (!w->d_sel || !w->d_n)))
        return ws_free_images(w), LC_ERR_NOMEM;
    w->h_qb   = (lc_qblock *)w->h_img;
    w->d_qb   = (lc_qblock *)w->d_img;
    w->h_list = (int32_t *)(w->h_img + qb_bytes(cap));
    w->d_list = (int32_t *)((unsigned char *)w->d_img + qb_bytes(cap));
    w->h_from = (int32_t *)(w->h_img + qb_bytes(cap) + row);
    w->d_from = (int32_t *)((unsigned char *)w->d_img + qb_bytes(cap) + row);
    w->qb_cap = cap;
    w->epoch++;
    return LC_OK;
}

int32_t sel_block_len(int32_t pos, int32_t end, int32_t block_rows, int32_t prompt_end,
                      int32_t tail_block) {
    int32_t len = block_rows - pos % block_rows;
    if (tail_block > 0 && prompt_end > 0 && pos < prompt_end) {
        const int32_t t0 = prompt_end - block_rows > 0 ? prompt_end - block_rows : 0;
        if (pos >= t0) {
            len = tail_block - (pos - t0) % tail_block;
            if (len > prompt_end - pos) len = prompt_end - pos;
        } else if (pos + len > t0) {
            len = t0 - pos;
        }
    }
    return len < end - pos ? len : end - pos;
}

int32_t sel_count_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                         int32_t tail_block) {
    int32_t n_qb = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const lc_attn_seq *a = &seqs[s];
        if (a->n_rows <= 1) {
            n_qb += a->n_rows == 1;
            continue;
        }
        for (int32_t r = 0; r < a->n_rows; n_qb++)
            r += sel_block_len(a->pos0 + r, a->pos0 + a->n_rows, block_rows, a->prompt_end,
                               tail_block);
    }
    return n_qb;
}

int32_t sel_cut_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                       int32_t tail_block, sel_win0_fn win0, const void *params,
                       lc_qblock *qbs, int32_t *n_pre) {
    int32_t idx = 0;
    *n_pre      = 0;
    for (int pass = 0; pass < 2; pass++) { /* prefill blocks, then one per decode sequence */
        for (int32_t s = 0; s < n_seqs; s++) {
            const lc_attn_seq *a = &seqs[s];
            if (a->n_rows < 1 || (a->n_rows > 1) != (pass == 0)) continue;
            for (int32_t r = 0; r < a->n_rows;) {
                lc_qblock *qb = &qbs[idx++];
                qb->seq           = s;
                qb->row0          = a->row0 + r;
                qb->pos0          = a->pos0 + r;
                qb->n_rows = sel_block_len(qb->pos0, a->pos0 + a->n_rows, block_rows,
                                           a->prompt_end, tail_block);
                qb->win0   = win0(params, qb->pos0, qb->n_rows);
                r += qb->n_rows;
            }
        }
        if (pass == 0) *n_pre = idx;
    }
    return idx;
}

int sel_plan_blocks(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                    int32_t tail_block, sel_win0_fn win0, const void *params) {
    const int st = ws_reserve(w, sel_count_blocks(seqs, n_seqs, block_rows, tail_block));
    if (st != LC_OK) return st;
    w->n_qb = sel_cut_blocks(seqs, n_seqs, block_rows, tail_block, win0, params, w->h_qb,
                             &w->n_pre);
    return LC_OK;
}

int sel_plan_upload(sel_ws *w) {
    if (w->up_valid && memcmp(w->up_img, w->h_img, w->img_bytes) == 0) return LC_OK;
    lc_backend *b = w->b;
    int (*up)(lc_backend *, void *, const void *, size_t) = b->upload_async ? b->upload_async
                                                                            : b->upload;
    w->up_valid = false;
    const int st = up(b, w->d_img, w->h_img, w->img_bytes);
    if (st != LC_OK) return st;
    memcpy(w->up_img, w->h_img, w->img_bytes);
    w->up_valid = true;
    return LC_OK;
}

void sel_plan_mark(sel_ws *w) {
    for (int32_t l = 0; l < w->n_layer; l++) w->planned[l] = true;
}

bool sel_plan_take(sel_ws *w, int32_t layer) {
    if (layer < 0 || layer >= w->n_layer || !w->planned[layer]) return false;
    w->planned[layer] = false;
    return true;
}

int32_t sel_launch_bucket(int32_t x) {
    if (x <= 64) return 64;
    int32_t p = 64;
    while (p <= x / 2) p *= 2;
    const int32_t step = p / 8;
    const int64_t r    = ((int64_t)x + step - 1) / step * step;
    return r > INT32_MAX ? INT32_MAX : (int32_t)r;
}

/* ---- decode cache pools ---- */

int sel_pool_init(sel_pool *p, lc_backend *b, int32_t n_layer, int32_t n_lists,
                  int32_t n_groups, const int32_t *cap) {
    memset(p, 0, sizeof *p);
    p->b        = b;
    p->n_layer  = n_layer;
    p->n_lists  = n_lists;
    p->n_groups = n_groups;
    const size_t nl = (size_t)n_layer * (size_t)n_lists;
    p->cap = lc_malloc(sizeof(int32_t) * (nl ? nl : 1), "decode cache pool");
    p->seg = lc_calloc(nl ? nl : 1, sizeof(lc_segment *), "decode cache pool");
    p->n   = lc_calloc(nl ? nl : 1, sizeof(int32_t *), "decode cache pool");
    if (!p->cap || !p->seg || !p->n) return sel_pool_release(p), LC_ERR_NOMEM;
    memcpy(p->cap, cap, sizeof(int32_t) * nl);
    return LC_OK;
}

int sel_pool_keep_queries(sel_pool *p, int32_t q_len) {
    if (q_len < 1 || p->n_slots > 0 || p->q)
        return lc_fail(LC_ERR_INTERNAL, "decode cache pool: fingerprints of %d floats asked for late", q_len);
    const size_t L = (size_t)(p->n_layer > 0 ? p->n_layer : 1);
    p->q       = lc_calloc(L, sizeof(float *), "decode cache pool");
    p->q_valid = lc_calloc(L, sizeof(int32_t *), "decode cache pool");
    if (!p->q || !p->q_valid) return LC_ERR_NOMEM;
    p->q_len = q_len;
    return LC_OK;
}

/* Free the fingerprint arrays of q / qv ([n_layer] each; NULL entries skipped). */
static void pool_free_queries(lc_backend *b, int32_t n_layer, float **q, int32_t **qv) {
    for (int32_t l = 0; l < n_layer; l++) {
        if (q && q[l]) b->dealloc(b, q[l]);
        if (qv && qv[l]) b->dealloc(b, qv[l]);
    }
}

void sel_pool_release(sel_pool *p) {
    lc_backend  *b  = p->b;
    const size_t nl = (size_t)p->n_layer * (size_t)p->n_lists;
    for (size_t i = 0; i < nl; i++) {
        if (p->seg && p->seg[i]) b->dealloc(b, p->seg[i]);
        if (p->n && p->n[i]) b->dealloc(b, p->n[i]);
    }
    pool_free_queries(b, p->n_layer, p->q, p->q_valid);
    free(p->cap), free(p->seg), free(p->n), free(p->used), free(p->q), free(p->q_valid);
    free(p->h_reads), free(p->h_reads_n);
    p->cap = NULL, p->seg = NULL, p->n = NULL, p->used = NULL, p->q = NULL, p->q_valid = NULL;
    p->h_reads = NULL, p->h_reads_n = NULL, p->h_reads_cap = 0;
    p->n_slots = 0;
}

/* The fingerprint arrays for n slots (q_len floats and a flag each), the old ones copied over. */
static int pool_grow_queries(sel_pool *p, int32_t n, float ***q_out, int32_t ***qv_out) {
    *q_out = NULL, *qv_out = NULL;
    if (p->q_len <= 0) return LC_OK;
    lc_backend  *b  = p->b;
    const size_t L  = (size_t)(p->n_layer > 0 ? p->n_layer : 1), ql = (size_t)p->q_len;
    float      **q  = lc_calloc(L, sizeof(float *), "decode cache pool");
    int32_t    **qv = lc_calloc(L, sizeof(int32_t *), "decode cache pool");
    int          st = q && qv ? LC_OK : LC_ERR_NOMEM;
    for (int32_t l = 0; l < p->n_layer && st == LC_OK; l++) {
        q[l]  = b->alloc(b, sizeof(float) * (size_t)n * ql, "decode selection cache");
        qv[l] = b->alloc(b, sizeof(int32_t) * (size_t)n, "decode selection cache");
        if (!q[l] || !qv[l]) st = LC_ERR_NOMEM;
        if (st == LC_OK && p->n_slots > 0) {
            st = b->copy(b, q[l], p->q[l], sizeof(float) * (size_t)p->n_slots * ql);
            if (st == LC_OK) st = b->copy(b, qv[l], p->q_valid[l], sizeof(int32_t) * (size_t)p->n_slots);
        }
    }
    if (st != LC_OK) {
        if (q && qv) pool_free_queries(b, p->n_layer, q, qv);
        free(q), free(qv);
        return st;
    }
    *q_out = q, *qv_out = qv;
    return LC_OK;
}

/* Every layer's pools with room for n slots, the old caches copied over. */
static int pool_grow(sel_pool *p, int32_t n) {
    lc_backend  *b  = p->b;
    const size_t nl = (size_t)p->n_layer * (size_t)p->n_lists, G = (size_t)p->n_groups;
    lc_segment **seg = lc_calloc(nl ? nl : 1, sizeof(lc_segment *), "decode cache pool");
    int32_t    **cnt = lc_calloc(nl ? nl : 1, sizeof(int32_t *), "decode cache pool");
    uint8_t     *used = lc_calloc((size_t)p->n_layer * (size_t)n + 1, 1, "decode cache pool");
    int          st   = seg && cnt && used ? LC_OK : LC_ERR_NOMEM;
    float      **q    = NULL;
    int32_t    **qv   = NULL;
    if (st == LC_OK) st = pool_grow_queries(p, n, &q, &qv);
    for (size_t i = 0; i < nl && st == LC_OK; i++) {
        const size_t cap = (size_t)(p->cap[i] > 0 ? p->cap[i] : 1);
        seg[i] = b->alloc(b, sizeof(lc_segment) * (size_t)n * G * cap, "decode selection cache");
        cnt[i] = b->alloc(b, sizeof(int32_t) * (size_t)n * G, "decode selection cache");
        if (!seg[i] || !cnt[i]) st = LC_ERR_NOMEM;
        if (st == LC_OK && p->n_slots > 0) {
            st = b->copy(b, seg[i], p->seg[i], sizeof(lc_segment) * (size_t)p->n_slots * G * cap);
            if (st == LC_OK) st = b->copy(b, cnt[i], p->n[i], sizeof(int32_t) * (size_t)p->n_slots * G);
        }
    }
    if (st != LC_OK) {
        for (size_t i = 0; i < nl && seg && cnt; i++) {
            if (seg[i]) b->dealloc(b, seg[i]);
            if (cnt[i]) b->dealloc(b, cnt[i]);
        }
        if (q) pool_free_queries(b, p->n_layer, q, qv);
        free(seg), free(cnt), free(used), free(q), free(qv);
        return st;
    }
    for (int32_t l = 0; l < p->n_layer; l++)
        for (int32_t s = 0; s < p->n_slots; s++)
            used[(size_t)l * (size_t)n + (size_t)s] = p->used[(size_t)l * (size_t)p->n_slots + (size_t)s];
    for (size_t i = 0; i < nl; i++) {
        if (p->seg[i]) b->dealloc(b, p->seg[i]);
        if (p->n[i]) b->dealloc(b, p->n[i]);
    }
    free(p->seg), free(p->n), free(p->used);
    p->seg = seg, p->n = cnt, p->used = used, p->n_slots = n;
    if (q) {
        pool_free_queries(b, p->n_layer, p->q, p->q_valid);
        free(p->q), free(p->q_valid);
        p->q = q, p->q_valid = qv;
    }
    p->epoch++;
    return LC_OK;
}

int sel_pool_take(sel_pool *p, int32_t layer, int32_t *slot) {
    int32_t s = 0;
    while (s < p->n_slots && p->used[(size_t)layer * (size_t)p->n_slots + (size_t)s]) s++;
    if (s == p->n_slots) {
        const int st = pool_grow(p, p->n_slots < 4 ? 4 : 2 * p->n_slots);
        if (st != LC_OK) return st;
    }
    /* no lists yet: counts 0 (a cache read before its first write reads nothing) */
    const size_t G = (size_t)p->n_groups;
    int32_t      zeros[64] = {0};
    for (int32_t i = 0; i < p->n_lists; i++) {
        int32_t *cnt = sel_pool_n(p, layer, i) + (size_t)s * G;
        for (size_t g = 0; g < G;) {
            const size_t k  = G - g < 64 ? G - g : 64;
            const int    st = p->b->upload(p->b, cnt + g, zeros, sizeof(int32_t) * k);
            if (st != LC_OK) return st;
            g += k;
        }
    }
    if (p->q_len > 0) {
        const int st = p->b->upload(p->b, p->q_valid[layer] + s, zeros, sizeof(int32_t));
        if (st != LC_OK) return st;
    }
    p->used[(size_t)layer * (size_t)p->n_slots + (size_t)s] = 1;
    *slot = s;
    return LC_OK;
}

void sel_pool_give(sel_pool *p, int32_t layer, int32_t slot) {
    if (p->used && slot >= 0 && slot < p->n_slots && layer >= 0 && layer < p->n_layer)
        p->used[(size_t)layer * (size_t)p->n_slots + (size_t)slot] = 0;
}

int sel_ws_last(const sel_ws *w, lc_last_selection *out) {
    memset(out, 0, sizeof *out);
    out->n_sink   = w->n_sink;
    out->n_groups = w->n_groups;
    out->sparse   = w->last_sparse;
    if (!w->last_sparse) return LC_OK;
    const int32_t n = w->last_n_pre, cap = w->sel_cap, G = w->n_groups;
    out->n_qb    = n;
    out->sel_cap = cap;
    out->qb      = lc_malloc(sizeof(lc_qblock) * (size_t)n, "selection copy");
    out->sel     = lc_malloc(sizeof(lc_segment) * (size_t)n * (size_t)G * (size_t)cap, "selection copy");
    out->sel_n   = lc_malloc(sizeof(int32_t) * (size_t)n * (size_t)G, "selection copy");
    if (!out->qb || !out->sel || !out->sel_n) return lc_attn_last_free(out), LC_ERR_NOMEM;
    memcpy(out->qb, w->h_qb, sizeof(lc_qblock) * (size_t)n);
    int st = w->b->download(w->b, out->sel, w->d_sel,
                            sizeof(lc_segment) * (size_t)n * (size_t)G * (size_t)cap);
    if (st == LC_OK)
        st = w->b->download(w->b, out->sel_n, w->d_n, sizeof(int32_t) * (size_t)n * (size_t)G);
    if (st != LC_OK) lc_attn_last_free(out);
    return st;
}

/* ---- what every sparse method's instance does alike ---- */

int sel_method_new(lc_backend *b, bool has_ops, const lc_attn_method *ops, size_t impl_size,
                   lc_attn_method **out) {
    *out = NULL;
    if (!has_ops)
        return lc_fail(LC_ERR_UNSUPPORTED, "%s: the %s backend has no sparse attention",
                       ops->name, b->name);
    lc_attn_method *m    = lc_calloc(1, sizeof *m, "attention method");
    void           *impl = lc_calloc(1, impl_size, "attention method");
    if (!m || !impl) {
        free(m), free(impl);
        return LC_ERR_NOMEM;
    }
    *m       = *ops;
    m->impl  = impl;
    *out     = m;
    return LC_OK;
}

void sel_method_free(lc_attn_method *m) {
    if (!m) return;
    free(m->impl);
    free(m);
}

int sel_check_layer(const char *method, int32_t layer, int32_t n_layer) {
    if (layer < 0 || layer >= n_layer)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: layer %d of %d", method, layer, n_layer);
    return LC_OK;
}

int sel_forward_check(const char *method, const lc_backend *b, bool has_ops, int32_t layer,
                      int32_t n_layer, int32_t dense_layers) {
    int st = sel_check_layer(method, layer, n_layer);
    if (st != LC_OK) return st;
    if (layer < dense_layers) return SEL_RUN_DENSE;
    if (!has_ops)
        return lc_fail(LC_ERR_UNSUPPORTED, "%s: the %s backend lacks the sparse ops", method,
                       b->name);
    return LC_OK;
}

int sel_slot_state_create(sel_pool *pool, const char *method, const char *what, int32_t layer,
                          void **out) {
    int st = sel_check_layer(method, layer, pool->n_layer);
    if (st != LC_OK) return st;
    sel_slot_state *s = lc_calloc(1, sizeof *s, what);
    if (!s) return LC_ERR_NOMEM;
    s->layer = layer;
    st       = sel_pool_take(pool, layer, &s->slot);
    if (st != LC_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LC_OK;
}

void sel_slot_state_free(sel_pool *pool, void *state) {
    sel_slot_state *s = state;
    if (!s) return;
    sel_pool_give(pool, s->layer, s->slot);
    free(s);
}

int sel_decode_reads(sel_pool *pool, int32_t list, const sel_slot_state *state, int32_t n_sink,
                     int32_t n_stream, lc_decode_reads *r) {
    memset(r, 0, sizeof *r);
    if (!state || !state->fresh) return LC_OK;
    if (list < 0 || list >= pool->n_lists || state->layer < 0 || state->layer >= pool->n_layer ||
        state->slot < 0 || state->slot >= pool->n_slots)
        return lc_fail(LC_ERR_INTERNAL, "decode reads: list %d of layer %d slot %d out of range",
                       list, state->layer, state->slot);
    const int32_t G   = pool->n_groups;
    const int32_t cap = pool->cap[(size_t)state->layer * (size_t)pool->n_lists + (size_t)list];
    const size_t  n   = (size_t)G * (size_t)cap;
    if (n > pool->h_reads_cap) {
        lc_segment *s = realloc(pool->h_reads, sizeof(lc_segment) * n);
        if (!s) return lc_fail(LC_ERR_NOMEM, "out of memory for a decode selection copy");
        pool->h_reads = s;
        int32_t *c    = realloc(pool->h_reads_n, sizeof(int32_t) * (size_t)G);
        if (!c) return lc_fail(LC_ERR_NOMEM, "out of memory for a decode selection copy");
        pool->h_reads_n   = c;
        pool->h_reads_cap = n;
    }
    lc_backend *b  = pool->b;
    int         st = b->download(b, pool->h_reads, sel_pool_seg(pool, state->layer, list) +
                                 (size_t)state->slot * n, sizeof(lc_segment) * n);
    if (st == LC_OK)
        st = b->download(b, pool->h_reads_n, sel_pool_n(pool, state->layer, list) +
                         (size_t)state->slot * (size_t)G, sizeof(int32_t) * (size_t)G);
    if (st != LC_OK) return st;
    for (int32_t g = 0; g < G; g++) /* a count the host can trust */
        if (pool->h_reads_n[g] < 0 || pool->h_reads_n[g] > cap)
            return lc_fail(LC_ERR_INTERNAL, "decode reads: list %d of layer %d has %d segments "
                           "(room for %d)", g, state->layer, pool->h_reads_n[g], cap);
    r->fresh    = true;
    r->n_groups = G;
    r->cap      = cap;
    r->sel      = pool->h_reads;
    r->sel_n    = pool->h_reads_n;
    r->n_sink   = n_sink;
    r->n_stream = n_stream;
    return LC_OK;
}

int sel_plan_layers(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, void **const *states,
                    sel_plan_layer_fn plan_layer, void *impl) {
    void  *stack[64];
    void **ls = n_seqs <= 64 ? stack : lc_malloc(sizeof(void *) * (size_t)n_seqs, "states");
    if (!ls) return LC_ERR_NOMEM;
    int st = LC_OK;
    for (int32_t l = 0; l < w->n_layer && st == LC_OK; l++) {
        for (int32_t s = 0; s < n_seqs; s++) ls[s] = states ? states[s][l] : NULL;
        st = plan_layer(impl, l, seqs, n_seqs, ls);
    }
    if (ls != stack) free(ls);
    if (st == LC_OK) st = sel_plan_upload(w);
    if (st == LC_OK) sel_plan_mark(w);
    return st;
}

void sel_plan_sizes(const sel_ws *w, int32_t n_sink, sel_sizes *out) {
    memset(out, 0, sizeof *out);
    out->pre_rows = 1, out->max_rows = 1, out->max_window = 1;
    for (int32_t i = 0; i < w->n_qb; i++) {
        const lc_qblock *qb   = &w->h_qb[i];
        const bool           pre  = i < w->n_pre;
        const int32_t        cand = qb->win0 > n_sink ? qb->win0 - n_sink : 0;
        const int32_t        win  = qb->pos0 + qb->n_rows - qb->win0;
        if (pre && qb->n_rows > out->pre_rows) out->pre_rows = qb->n_rows;
        if (qb->n_rows > out->max_rows) out->max_rows = qb->n_rows;
        if (pre && cand > out->pre_cand) out->pre_cand = cand;
        if (!pre && cand > out->dec_cand) out->dec_cand = cand;
        if (cand > out->max_cand) out->max_cand = cand;
        if (win > out->max_window) out->max_window = win;
        if (qb->pos0 + qb->n_rows > out->max_end) out->max_end = qb->pos0 + qb->n_rows;
    }
    if (w->n_qb > w->n_pre) out->dec_cand = sel_launch_bucket(out->dec_cand);
}

int sel_attend_prefill(sel_ws *w, lc_backend *b, const lc_kv_layer_view *kv,
                       const lc_attn_seq *seqs, int32_t n_seqs, const float *q, int32_t n_head,
                       const lc_rope_table *rope, float scale, int32_t max_rows,
                       lc_attn_segments_args *aa, float *out) {
    w->last_sparse = true;
    w->last_n_pre  = w->n_pre;
    aa->max_rows   = max_rows;
    aa->sel        = w->d_sel;
    aa->sel_n      = w->d_n;
    return b->attn_segments(b, kv, seqs, n_seqs, w->d_qb, w->n_pre, q, n_head, rope, scale, aa, out);
}
