/*
 * attn_eval.c — a sparse attention method (InfiniteHiP, HiP, TokenSelect) against dense
 * attention on real queries and keys (recall of the true top-k attention mass, as InfiniteHiP
 * paper Fig. 6, and output error). The model runs densely; at the forward of the last n_rows
 * tokens a probe attention method also runs the method under test on the same queries and paged KV
 * of every layer, then compares: the selected key set against the true attention probabilities
 * (keys read back with the backend's kv_read, rotated at their true positions with its rope op,
 * downloaded; softmax in double on the host), and the
 * two outputs; optionally, how much of the true attention mass on a followed span of tokens (a
 * needle, `longctx eval suite --trace`) the method reads.
 */
#include "engine/engine.h"
#include "model/model.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct probe_impl {
    lc_attn_method *method; /* the sparse method under test */
    int64_t final_end;      /* probe the forward whose rows end here */
    int32_t top_k;
    int64_t span_begin, span_end; /* followed tokens; end <= begin: none */
    lc_attn_fidelity *res;
    int32_t measure_rows; /* measure the last this many rows of the probed forward (0: all) */
} probe_impl;

static int probe_state_create(const lc_attn_method *m, int32_t layer, void **state) {
    const probe_impl *pi = m->impl;
    return pi->method->state_create(pi->method, layer, state);
}

static void probe_state_free(const lc_attn_method *m, void *state) {
    const probe_impl *pi = m->impl;
    pi->method->state_free(pi->method, state);
}

/* k-th largest of x[0..n) (k >= 1), reordering x (quickselect) */
static double kth_largest(double *x, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        const double piv = x[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] > piv)
                i++;
            while (x[j] < piv)
                j--;
            if (i <= j) {
                double t = x[i];
                x[i] = x[j], x[j] = t;
                i++, j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return x[want];
}

/* The stored keys of one sequence's positions [0, n_keys) (pages page_table, host memory),
 * rotated at their true positions, into kh[n_keys][n_kv_head][head_dim] on the host: the
 * backend reads them back (kv_read) and rotates them (rope) in chunks of at most
 * KEY_CHUNK_BYTES, each chunk downloaded. */
#define KEY_CHUNK_BYTES ((size_t)64 << 20)
static int read_rotated_keys(lc_backend *b, const lc_kv_layer_view *kv, const int32_t *page_table,
                             int64_t n_keys, const lc_rope_table *rope, float *kh) {
    if (!b->kv_read)
        return lc_fail(LC_ERR_UNSUPPORTED, "fidelity probe: the %s backend cannot read its KV "
                       "back (no kv_read op)", b->name);
    const size_t  row = sizeof(float) * (size_t)kv->n_kv_head * (size_t)kv->head_dim;
    const int64_t n_pages = (n_keys + kv->page_size - 1) / kv->page_size;
    int64_t chunk = (int64_t)(KEY_CHUNK_BYTES / row);
    if (chunk < 1) chunk = 1;
    if (chunk > n_keys) chunk = n_keys;
    int32_t *pos_h = lc_malloc(sizeof(int32_t) * (size_t)chunk, "fidelity positions");
    int32_t *pages = b->alloc(b, sizeof(int32_t) * (size_t)n_pages, "fidelity page table");
    int32_t *pos = b->alloc(b, sizeof(int32_t) * (size_t)chunk, "fidelity positions");
    float *keys = b->alloc(b, row * (size_t)chunk, "fidelity keys");
    int st = pos_h && pages && pos && keys ? LC_OK : LC_ERR_NOMEM;
    if (st == LC_OK) st = b->upload(b, pages, page_table, sizeof(int32_t) * (size_t)n_pages);
    for (int64_t k0 = 0; k0 < n_keys && st == LC_OK; k0 += chunk) {
        const int64_t n = n_keys - k0 < chunk ? n_keys - k0 : chunk;
        for (int64_t i = 0; i < n; i++)
            pos_h[i] = (int32_t)(k0 + i);
        st = b->upload(b, pos, pos_h, sizeof(int32_t) * (size_t)n);
        if (st == LC_OK) st = b->kv_read(b, kv, pages, k0, n, LC_KV_KEYS, keys);
        if (st == LC_OK) st = b->rope(b, keys, pos, n, kv->n_kv_head, kv->head_dim, rope);
        if (st == LC_OK)
            st = b->download(b, kh + (size_t)k0 * (row / sizeof(float)), keys, row * (size_t)n);
    }
    free(pos_h);
    b->dealloc(b, pages);
    b->dealloc(b, pos);
    b->dealloc(b, keys);
    return st;
}

/* call: the dense forward of the one sequence whose attention is measured (its output in
 * call->out); the method under test runs on the same inputs into a scratch. */
static int probe_layer(probe_impl *pi, lc_backend *b, const lc_attn_call *call) {
    const lc_attn_seq *seq = &call->seqs[0];
    const lc_kv_layer_view *kv = call->kv;
    const int32_t layer = call->layer, n_head = call->n_head;
    const float scale = call->scale;
    const float *out_dense = call->out;
    const int32_t R = seq->n_rows, D = kv->head_dim, H = kv->n_kv_head;
    /* the rows measured: the last M of the forward's R */
    const int32_t M = pi->measure_rows > 0 && pi->measure_rows < R ? pi->measure_rows : R;
    const int32_t G = n_head / H;
    const size_t W = (size_t)n_head * (size_t)D;
    const int64_t n_keys = (int64_t)seq->pos0 + R;
    lc_attn_fidelity *res = &pi->res[layer];
    memset(res, 0, sizeof *res);
    float *tmp = b->alloc(b, sizeof(float) * W * (size_t)(seq->row0 + R), "fidelity probe");
    if (!tmp) return LC_ERR_NOMEM;
    lc_attn_call sub = *call;
    sub.out = tmp;
    int st = pi->method->forward(pi->method, b, &sub);
    lc_last_selection last;
    memset(&last, 0, sizeof last);
    if (st == LC_OK) st = lc_attn_last(pi->method, &last);
    float *qh = lc_malloc(sizeof(float) * W * (size_t)R, "fidelity probe");
    float *od = lc_malloc(sizeof(float) * W * (size_t)R, "fidelity probe");
    float *os = lc_malloc(sizeof(float) * W * (size_t)R, "fidelity probe");
    float *kh = lc_malloc(sizeof(float) * (size_t)n_keys * (size_t)H * (size_t)D, "fidelity keys");
    if (!qh || !od || !os || !kh) st = st == LC_OK ? LC_ERR_NOMEM : st;
    const size_t off = (size_t)seq->row0 * W;
    if (st == LC_OK) st = b->download(b, qh, call->q + off, sizeof(float) * W * (size_t)R);
    if (st == LC_OK) st = b->download(b, od, out_dense + off, sizeof(float) * W * (size_t)R);
    if (st == LC_OK) st = b->download(b, os, tmp + off, sizeof(float) * W * (size_t)R);
    /* keys [token][kv_head][dim] in fp32, rotated at their true positions */
    if (st == LC_OK) st = read_rotated_keys(b, kv, seq->page_table, n_keys, call->rope, kh);
    if (st == LC_OK) {
        double e = 0, nn = 0;
        for (size_t i = 0; i < W * (size_t)R; i++) {
            const double d = (double)os[i] - od[i];
            e += d * d, nn += (double)od[i] * od[i];
        }
        res->out_rel_l2 = nn > 0 ? sqrt(e / nn) : 0;
        res->rows = M;
        res->sparse = last.sparse;
        double recall_sum = 0, keys_sum = 0, span_sum = 0, span_read_sum = 0, span_tok_sum = 0;
        double stage_sum[LC_HIP_MAX_STAGES] = {0};
        int fail = 0;
#pragma omp parallel reduction(+ : recall_sum, keys_sum, span_sum, span_read_sum, span_tok_sum, \
                                   stage_sum[:LC_HIP_MAX_STAGES]) reduction(| : fail)
        {
            double *p = malloc(sizeof(double) * (size_t)n_keys);
            double *pc = malloc(sizeof(double) * (size_t)n_keys);
            unsigned char *in = malloc((size_t)n_keys);
            if (!p || !pc || !in) fail = 1;
#pragma omp for schedule(dynamic)
            for (int64_t rh = 0; rh < (int64_t)M * n_head; rh++) {
                if (fail) continue;
                const int32_t r = R - M + (int32_t)(rh / n_head), h = (int32_t)(rh % n_head);
                const int64_t pos = (int64_t)seq->pos0 + r, nk = pos + 1;
                if (nk < 1 || nk > n_keys) continue;
                const float *qv = qh + (size_t)r * W + (size_t)h * D;
                const float *kb = kh + (size_t)(h / G) * (size_t)D;
                double mx = -INFINITY, sum = 0;
                for (int64_t t = 0; t < nk; t++) {
                    double d = 0;
                    for (int32_t i = 0; i < D; i++)
                        d += (double)qv[i] * kb[(size_t)t * (size_t)H * (size_t)D + (size_t)i];
                    p[t] = d * scale;
                    if (p[t] > mx) mx = p[t];
                }
                for (int64_t t = 0; t < nk; t++)
                    sum += (p[t] = exp(p[t] - mx));
                for (int64_t t = 0; t < nk; t++)
                    p[t] /= sum;
                /* the key set the method read for this row */
                int64_t n_read = nk;
                for (int64_t t = 0; t < nk; t++)
                    in[t] = 1;
                /* the row's (query block, group) entry in last's lists; -1: read densely */
                int64_t row_li = -1;
                if (last.sparse) {
                    const lc_qblock *qb = NULL;
                    int32_t bi = 0;
                    for (; bi < last.n_qb; bi++)
                        if (seq->row0 + r >= last.qb[bi].row0 &&
                            seq->row0 + r < last.qb[bi].row0 + last.qb[bi].n_rows) {
                            qb = &last.qb[bi];
                            break;
                        }
                    if (qb) {
                        const int32_t g = last.n_groups == 1 ? 0 : h / G;
                        const size_t li = (size_t)bi * (size_t)last.n_groups + (size_t)g;
                        row_li = (int64_t)li;
                        const int32_t w0 = qb->win0, ns = last.n_sink < w0 ? last.n_sink : w0;
                        for (int64_t t = 0; t < nk; t++)
                            in[t] = 0;
                        for (int64_t t = 0; t < ns && t < nk; t++)
                            in[t] = 1;
                        for (int64_t t = w0; t < nk; t++)
                            in[t] = 1;
                        const lc_segment *sg = last.sel + li * (size_t)last.sel_cap;
                        for (int32_t j = 0; j < last.sel_n[li]; j++)
                            for (int64_t t = sg[j].start;
                                 t < (int64_t)sg[j].start + sg[j].len && t < nk; t++)
                                in[t] = 1;
                        n_read = 0;
                        for (int64_t t = 0; t < nk; t++)
                            n_read += in[t];
                    }
                }
                const int64_t k = pi->top_k < nk ? pi->top_k : nk;
                memcpy(pc, p, sizeof(double) * (size_t)nk);
                const double thr = kth_largest(pc, nk, k);
                double top = 0, got = 0;
                int64_t taken = 0;
                /* the keys above the threshold, then ties at it up to k */
                for (int64_t t = 0; t < nk; t++)
                    if (p[t] > thr) top += p[t], got += in[t] ? p[t] : 0, taken++;
                for (int64_t t = 0; t < nk && taken < k; t++)
                    if (p[t] == thr) top += p[t], got += in[t] ? p[t] : 0, taken++;
                recall_sum += top > 0 ? got / top : 1;
                keys_sum += (double)n_read;
                /* the followed span: its true mass, the part the method reads, its keys read */
                const int64_t sa = pi->span_begin > 0 ? pi->span_begin : 0;
                const int64_t se = pi->span_end < nk ? pi->span_end : nk;
                if (se > sa) {
                    double sm = 0, sr = 0;
                    int64_t nr = 0;
                    for (int64_t t = sa; t < se; t++) {
                        sm += p[t];
                        if (in[t]) sr += p[t], nr++;
                    }
                    span_sum += sm, span_read_sum += sr;
                    span_tok_sum += (double)nr / (double)(se - sa);
                    /* the share of the span each stage's output (chunks, without the sink and
                     * the window) covers; a row read densely: all of it */
                    for (int32_t i = 0; i < last.n_stages; i++) {
                        if (row_li < 0) {
                            stage_sum[i] += 1;
                            continue;
                        }
                        const size_t li = (size_t)row_li;
                        const lc_segment *sg = last.stage_sel[i] + li * (size_t)last.stage_cap[i];
                        const int32_t cnt = last.stage_n[i][li];
                        /* pc is free again: marks over the span (overlapping segments, as
                         * the first stage's with --hip-overlap, count once) */
                        for (int64_t t = sa; t < se; t++)
                            pc[t] = 0;
                        for (int32_t j = 0; j < cnt && j < last.stage_cap[i]; j++) {
                            const int64_t a = sg[j].start > sa ? sg[j].start : sa;
                            const int64_t e = (int64_t)sg[j].start + sg[j].len < se
                                                  ? (int64_t)sg[j].start + sg[j].len
                                                  : se;
                            for (int64_t t = a; t < e; t++)
                                pc[t] = 1;
                        }
                        int64_t cov = 0;
                        for (int64_t t = sa; t < se; t++)
                            cov += pc[t] != 0;
                        stage_sum[i] += (double)cov / (double)(se - sa);
                    }
                }
            }
            free(p), free(pc), free(in);
        }
        if (fail) st = LC_ERR_NOMEM;
        res->recall = recall_sum / ((double)M * n_head);
        res->keys_read = keys_sum / ((double)M * n_head);
        res->span_mass = span_sum / ((double)M * n_head);
        res->span_mass_read = span_read_sum / ((double)M * n_head);
        res->span_read = span_tok_sum / ((double)M * n_head);
        res->n_stages = last.n_stages;
        for (int32_t i = 0; i < last.n_stages; i++)
            res->span_stage_read[i] = stage_sum[i] / ((double)M * n_head);
    }
    lc_attn_last_free(&last);
    free(qh), free(od), free(os), free(kh);
    b->dealloc(b, tmp);
    return st;
}

static int probe_forward(const lc_attn_method *m, lc_backend *b, const lc_attn_call *call) {
    probe_impl *pi = m->impl;
    int st = lc_attn_call_dense(b, call);
    if (st != LC_OK || call->n_seqs != 1 ||
        (int64_t)call->seqs[0].pos0 + call->seqs[0].n_rows != pi->final_end)
        return st;
    return probe_layer(pi, b, call);
}

lc_fidelity_params lc_fidelity_default_params(void) {
    lc_fidelity_params fp = {.top_k = 2048, .n_rows = 64, .n_batch = 512};
    return fp;
}

int lc_eval_attn_fidelity(lc_model *m, const int32_t *tokens, int64_t n_tokens,
                          const lc_context_params *p, const lc_fidelity_params *fp,
                          lc_attn_fidelity *out) {
    lc_clear_error();
    if (!m || !tokens || !p || !fp || !out)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_eval_attn_fidelity: NULL argument");
    const int32_t top_k = fp->top_k, n_rows = fp->decode ? 1 : fp->n_rows, n_batch = fp->n_batch;
    if (top_k < 1 || n_rows < 1 || n_batch < 1 || n_tokens <= n_rows || n_tokens > (1 << 30) - 2)
        return lc_fail(LC_ERR_INVALID_ARG,
                       "lc_eval_attn_fidelity: top_k %d, rows %d, batch %d "
                       "and %lld tokens (need rows < tokens <= 2^30 - 2, all >= 1)",
                       top_k, n_rows, n_batch, (long long)n_tokens);
    lc_model_info info;
    lc_model_get_info(m, &info);
    lc_attn_method *hip = NULL;
    const lc_attn_shape shape = {info.n_layer, info.n_head, info.n_head_kv, info.head_dim,
                                 info.n_ctx_train};
    if (!p->attn || !strcmp(p->attn, "dense"))
        return lc_fail(LC_ERR_INVALID_ARG, "lc_eval_attn_fidelity: the method under test is dense");
    int st = lc_attn_create(m->backend, &shape, p, &hip);
    if (st != LC_OK) return st;
    /* decode: the forward of the first generated token ends one past the text */
    probe_impl pi = {hip,
                     fp->decode ? n_tokens + 1 : n_tokens,
                     top_k,
                     fp->span_begin,
                     fp->span_end,
                     out,
                     fp->decode || !fp->chunks_as_generation ? 0 : n_rows};
    for (int32_t l = 0; l < info.n_layer; l++)
        memset(&out[l], 0, sizeof out[l]);
    lc_attn_method probe = {.name = "fidelity probe",
                            .impl = &pi,
                            .needs_raw_q = true,
                            .graph_safe = false,
                            .state_create = probe_state_create,
                            .state_free = probe_state_free,
                            .forward = probe_forward};
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx = (int32_t)n_tokens + 2;
    cp.n_batch = n_batch > n_rows ? n_batch : n_rows;
    cp.prefill_progress = fp->progress;
    cp.progress_user = fp->progress_user;
    lc_context *c = NULL;
    int32_t seq = -1;
    if (st == LC_OK) {
        /* prefill rows: one request; the engine cuts prefill chunks from the start, so the
         * batch size is the largest divisor of the prefix (n_tokens - n_rows) in [n_rows,
         * n_batch]: the last chunk is then exactly n_rows. Without such a divisor chunks of
         * n_rows are used and the last one holds n_tokens mod n_rows rows (out[].rows says how
         * many were probed). chunks_as_generation: chunks of n_batch, the last one probed
         * whole and its last n_rows rows measured. Decode: two tokens, greedy; the second
         * one's forward is probed. */
        if (!fp->decode && !fp->chunks_as_generation) {
            const int64_t prefix = n_tokens - n_rows;
            int64_t nb = cp.n_batch;
            while (nb > n_rows && prefix % nb)
                nb--;
            cp.n_batch = (int32_t)nb;
        }
        st = lc_context_create_with_method(m, &cp, &probe, &c);
        lc_request r = {.prompt = tokens,
                        .n_prompt = (size_t)n_tokens,
                        .max_tokens = fp->decode ? 2 : 0,
                        .sampling = lc_sampling_default(),
                        .ignore_eos = true};
        r.sampling.temperature = 0.0f;
        if (st == LC_OK) st = lc_context_add(c, &r, &seq);
        for (int guard = 0; st == LC_OK && guard < (1 << 30); guard++) {
            lc_event ev[4];
            size_t n_ev = 0;
            st = lc_context_step(c, ev, 4, &n_ev);
            if (st != LC_OK || n_ev == 0) break;
            bool done = false;
            for (size_t e = 0; e < n_ev; e++)
                done = done || ev[e].finish != LC_FINISH_NONE;
            if (done) break;
        }
    }
    lc_context_free(c);
    lc_attn_method_free(hip);
    return st;
}
