/*
 * profile.c — the profiling backend (see profile.h): a wrapper that forwards every op to the
 * backend it wraps, counts memory (weights, KV pools, other allocations, the GPU's used
 * memory) and, with time_ops, the time of each op, per op, per category (attention / GEMM /
 * rest) and per phase (decode / prefill). It is how `longctx bench --profile` splits a decode
 * step (issue 3, "CUDA backend", speed).
 *
 * How ops are timed: on the CPU, wall time (the ops return when done). On CUDA, by default a
 * pair of events on the backend's stream around each op, read back at the start of the next
 * forward: the device time of the op's kernels, with no synchronisation added inside a step,
 * so the profiled step runs at nearly its real speed and "step - ops" is the time the GPU
 * waited for the host. The wrapped backend's tuning.profile_sync instead synchronises the
 * device before and after every op and takes wall time (each op then also carries a launch and
 * a sync, ~10 us). Copies (upload/download) are synchronous cudaMemcpy calls that the backend's
 * (blocking) stream orders with, so the events around them hold the copy; a wall clock there
 * would also hold the wait for every kernel queued before it (measured: 5.7 ms of an 8B decode
 * step counted twice).
 */
#include "backend/profile.h"
#include "format/quant.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The ops the wrapper times, in report order. */
typedef enum op_id {
    OP_ATTN_DENSE,
    OP_MATMUL,
    OP_EMBED,
    OP_RMSNORM,
    OP_ADD_BIAS,
    OP_ROPE,
    OP_KV_WRITE,
    OP_SILU_MUL,
    OP_ADD,
    OP_BATCH_BEGIN,
    OP_UPLOAD,
    OP_DOWNLOAD,
    OP_HIP_STAGE,
    OP_ATTN_SPARSE,
    OP_COPY,
    OP_TS_SELECT,
    OP_HIP_MASK,
    OP_SAMPLE,
    OP_UPLOAD_ASYNC,
    OP_KV_READ,
    OP_COPY_SLABS,
    OP_N
} op_id;

static const char *const k_op_names[OP_N] = {
    "attn_dense", "matmul", "embed", "rmsnorm", "add_bias", "rope",
    "kv_write",   "silu_mul", "add", "batch_begin", "upload", "download",
    "prune_chunks",  "attn_segments", "copy", "select_tokens", "select_blocks", "sample",
    "upload_async", "kv_read", "copy_slabs",
};

_Static_assert(OP_N <= LC_PROFILE_MAX_OPS, "LC_PROFILE_MAX_OPS too small");

static lc_profile_cat op_cat(op_id op) {
    return op == OP_ATTN_DENSE || op == OP_HIP_STAGE || op == OP_ATTN_SPARSE ||
                   op == OP_TS_SELECT || op == OP_HIP_MASK
               ? LC_PROFILE_ATTENTION
                               : (op == OP_MATMUL ? LC_PROFILE_GEMM : LC_PROFILE_REST);
}

typedef struct alloc_rec {
    void  *p;
    size_t bytes;      /* backend memory */
    size_t host_bytes; /* a tiered pool's host tier */
    bool   kv;
} alloc_rec;

#define EV_PAIRS 2048 /* ops timed by events before a read-back is forced */

typedef struct ev_op {
    op_id            op;
    lc_profile_phase phase;
} ev_op;

typedef struct prof_backend {
    lc_backend  base;  /* first member: a prof_backend * is an lc_backend * */
    lc_backend *inner; /* owned */
    lc_backend  fn;    /* the inner's table at wrapping time: the functions forwarded to */
    bool        time_ops;
    bool        use_events;  /* CUDA: events around each op, not synchronisation */
    void       *ev;          /* the backend's timer marks: 2 per pending op */
    ev_op       pending[EV_PAIRS];
    int         n_pending;
    /* times */
    lc_profile_phase phase;
    int64_t          n_forwards[LC_PROFILE_N_PHASE];
    double           sec[OP_N][LC_PROFILE_N_PHASE];
    int64_t          calls[OP_N][LC_PROFILE_N_PHASE];
    /* memory */
    alloc_rec *recs;
    size_t     n_recs, cap_recs;
    uint64_t   weight_bytes, kv_bytes, kv_host_bytes, other_bytes, peak_bytes;
    uint64_t   dev_total, dev_used, dev_peak;
} prof_backend;

static prof_backend *P(lc_backend *b) { return (prof_backend *)b; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dev_sync(prof_backend *p) {
    /* the CPU ops return when their work is done: no sync */
    return p->fn.sync ? p->fn.sync(&p->base) : LC_OK;
}

/* Refresh the device's used-memory numbers (nothing for a backend in host memory). */
static void sample_device(prof_backend *p) {
    if (p->base.device == LC_DEVICE_CPU || !p->fn.mem_info) return;
    uint64_t free_b = 0, total_b = 0;
    if (p->fn.mem_info(&p->base, &free_b, &total_b) != LC_OK) {
        lc_clear_error(); /* a report number, not worth failing an op for */
        return;
    }
    p->dev_total = total_b;
    p->dev_used  = total_b - free_b;
    if (p->dev_used > p->dev_peak) p->dev_peak = p->dev_used;
}

static void note_peak(prof_backend *p) {
    const uint64_t live = p->weight_bytes + p->kv_bytes + p->other_bytes;
    if (live > p->peak_bytes) p->peak_bytes = live;
}

static void account(prof_backend *p, op_id op, lc_profile_phase phase, double seconds) {
    p->sec[op][phase] += seconds;
    p->calls[op][phase]++;
}

/* Read back the timer marks of the ops timed so far (waits for the last of them). */
static int drain_events(prof_backend *p) {
    int st = LC_OK;
    for (int i = 0; i < p->n_pending && st == LC_OK; i++) {
        float ms = 0;
        st       = p->fn.timer_ms(&p->base, p->ev, 2 * i, 2 * i + 1, &ms);
        if (st == LC_OK) account(p, p->pending[i].op, p->pending[i].phase, 1e-3 * (double)ms);
    }
    p->n_pending = 0;
    return st;
}

#define TIMED_EVENTS(op, call)                                                                \
    if (p_->use_events) {                                                                     \
        if (p_->n_pending == EV_PAIRS && (st_ = drain_events(p_)) != LC_OK) return st_;       \
        const int k_ = p_->n_pending;                                                         \
        if ((st_ = p_->fn.timer_mark(b, p_->ev, 2 * k_)) != LC_OK) return st_;                \
        st_             = (call);                                                             \
        const int st2_  = p_->fn.timer_mark(b, p_->ev, 2 * k_ + 1);                           \
        if (st2_ == LC_OK) p_->pending[p_->n_pending++] = (ev_op){op, p_->phase};             \
        return st_ != LC_OK ? st_ : st2_;                                                     \
    }

/* Time call: the backend's timer marks where it has them (CUDA events: see the top of the
 * file), else wall time with the device synchronised before and after it. */
#define TIMED(op, call)                                                                       \
    do {                                                                                      \
        prof_backend *p_  = P(b);                                                             \
        int           st_ = LC_OK;                                                            \
        TIMED_EVENTS(op, call)                                                                \
        if ((st_ = dev_sync(p_)) != LC_OK) return st_;                                        \
        const double t0_ = now_s();                                                           \
        st_              = (call);                                                            \
        if (st_ == LC_OK) st_ = dev_sync(p_);                                                 \
        account(p_, op, p_->phase, now_s() - t0_);                                            \
        return st_;                                                                           \
    } while (0)


/* ---- memory ---------------------------------------------------------------------------- */

/* Room for one more allocation record. */
static bool reserve_rec(prof_backend *p) {
    if (p->n_recs < p->cap_recs) return true;
    const size_t cap = p->cap_recs ? 2 * p->cap_recs : 64;
    alloc_rec   *r   = realloc(p->recs, cap * sizeof *r);
    if (!r) {
        lc_fail(LC_ERR_NOMEM, "out of memory for the profiler's allocation records");
        return false;
    }
    p->recs     = r;
    p->cap_recs = cap;
    return true;
}

/* Counts a new allocation (reserve_rec first): bytes of backend memory, host_bytes of a
 * tiered pool's host tier. */
static void record(prof_backend *p, void *ptr, size_t bytes, size_t host_bytes, const char *what) {
    const bool kv = what && strncmp(what, "kv pool", 7) == 0;
    p->recs[p->n_recs++] = (alloc_rec){ptr, bytes, host_bytes, kv};
    if (kv) p->kv_bytes += bytes;
    else p->other_bytes += bytes;
    p->kv_host_bytes += host_bytes;
    note_peak(p);
    sample_device(p);
}

/* Forgets the allocation at ptr (NULL or unknown: nothing). */
static void unrecord(prof_backend *p, const void *ptr) {
    if (!ptr) return;
    for (size_t i = p->n_recs; i-- > 0;) {
        if (p->recs[i].p != ptr) continue;
        if (p->recs[i].kv) p->kv_bytes -= p->recs[i].bytes;
        else p->other_bytes -= p->recs[i].bytes;
        p->kv_host_bytes -= p->recs[i].host_bytes;
        p->recs[i] = p->recs[--p->n_recs];
        return;
    }
}

static void *prof_alloc(lc_backend *b, size_t bytes, const char *what) {
    prof_backend *p = P(b);
    if (!reserve_rec(p)) return NULL;
    void *ptr = p->fn.alloc(b, bytes, what);
    if (ptr) record(p, ptr, bytes, 0, what);
    return ptr;
}

static void prof_dealloc(lc_backend *b, void *ptr) {
    unrecord(P(b), ptr);
    P(b)->fn.dealloc(b, ptr);
}

static void *prof_alloc_tiered(lc_backend *b, size_t dev_bytes, size_t host_bytes,
                               const char *what) {
    prof_backend *p = P(b);
    if (!reserve_rec(p)) return NULL;
    void *ptr = p->fn.alloc_tiered(b, dev_bytes, host_bytes, what);
    if (ptr) record(p, ptr, dev_bytes, host_bytes, what);
    return ptr;
}

static void prof_dealloc_tiered(lc_backend *b, void *ptr) {
    unrecord(P(b), ptr);
    P(b)->fn.dealloc_tiered(b, ptr);
}

/* the bytes a weight holds: its rows in its type (a native block-type matrix: the file's
 * bytes, mapped rather than allocated) */
static uint64_t weight_bytes(const lc_weight *w) {
    if (!w->data) return 0;
    uint64_t row_bytes;
    if (!lc_type_row_bytes(w->type, (uint64_t)w->cols, &row_bytes))
        row_bytes = (uint64_t)w->cols * 4u;
    return (uint64_t)w->rows * row_bytes;
}

static int prof_weight_load(lc_backend *b, const lc_gguf_tensor *t, lc_weight *w) {
    prof_backend *p  = P(b);
    int           st = p->fn.weight_load(b, t, w);
    if (st == LC_OK) {
        p->weight_bytes += weight_bytes(w);
        note_peak(p);
        sample_device(p);
    }
    return st;
}

static void prof_weight_free(lc_backend *b, lc_weight *w) {
    prof_backend  *p = P(b);
    const uint64_t n = weight_bytes(w);
    p->weight_bytes  = p->weight_bytes >= n ? p->weight_bytes - n : 0;
    p->fn.weight_free(b, w);
}

static void prof_free(lc_backend *b) {
    prof_backend *p = P(b);
    if (p->use_events) p->fn.timers_free(&p->base, p->ev);
    if (p->inner) p->inner->free(p->inner);
    free(p->recs);
    free(p);
}

/* ---- timed ops --------------------------------------------------------------------------- */

static int prof_upload(lc_backend *b, void *dst, const void *src, size_t bytes) {
    TIMED(OP_UPLOAD, p_->fn.upload(b, dst, src, bytes));
}

static int prof_upload_async(lc_backend *b, void *dst, const void *src, size_t bytes) {
    TIMED(OP_UPLOAD_ASYNC, p_->fn.upload_async(b, dst, src, bytes));
}

static int prof_download(lc_backend *b, void *dst, const void *src, size_t bytes) {
    TIMED(OP_DOWNLOAD, p_->fn.download(b, dst, src, bytes));
}

/* Marks the start of a forward: its phase follows from the batch's sequences. The previous
 * forward's events are read back here (its logits were downloaded: it is done). */
static int prof_batch_begin(lc_backend *b, const lc_attn_seq *seqs, int32_t n_seqs,
                            int32_t page_size) {
    prof_backend *p  = P(b);
    int           st = drain_events(p);
    if (st != LC_OK) return st;
    sample_device(p);
    bool decode = n_seqs > 0;
    for (int32_t i = 0; i < n_seqs; i++)
        if (seqs[i].n_rows != 1) decode = false;
    p->phase = decode ? LC_PROFILE_DECODE : LC_PROFILE_PREFILL;
    p->n_forwards[p->phase]++;
    if (!p->fn.batch_begin) return LC_OK;
    TIMED(OP_BATCH_BEGIN, p_->fn.batch_begin(b, seqs, n_seqs, page_size));
}

static int prof_embed(lc_backend *b, const lc_weight *table, const int32_t *ids, int64_t n_rows,
                      float *out) {
    TIMED(OP_EMBED, p_->fn.embed(b, table, ids, n_rows, out));
}

static int prof_rmsnorm(lc_backend *b, const float *x, const float *w, float *y, int64_t n_rows,
                        int64_t dim, float eps) {
    TIMED(OP_RMSNORM, p_->fn.rmsnorm(b, x, w, y, n_rows, dim, eps));
}

static int prof_matmul(lc_backend *b, const lc_weight *w, const float *x, float *y,
                       int64_t n_rows) {
    TIMED(OP_MATMUL, p_->fn.matmul(b, w, x, y, n_rows));
}

static int prof_add_bias(lc_backend *b, float *y, const float *bias, int64_t n_rows,
                         int64_t dim) {
    TIMED(OP_ADD_BIAS, p_->fn.add_bias(b, y, bias, n_rows, dim));
}

static int prof_rope(lc_backend *b, float *x, const int32_t *pos, int64_t n_rows,
                     int32_t n_heads, int32_t head_dim, const lc_rope_table *rope) {
    TIMED(OP_ROPE, p_->fn.rope(b, x, pos, n_rows, n_heads, head_dim, rope));
}

static int prof_silu_mul(lc_backend *b, const float *gate, const float *up, float *out,
                         int64_t n) {
    TIMED(OP_SILU_MUL, p_->fn.silu_mul(b, gate, up, out, n));
}

static int prof_add(lc_backend *b, float *x, const float *y, int64_t n) {
    TIMED(OP_ADD, p_->fn.add(b, x, y, n));
}

static int prof_kv_write(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         int32_t n_seqs, const float *k, const float *v) {
    TIMED(OP_KV_WRITE, p_->fn.kv_write(b, kv, seqs, n_seqs, k, v));
}

static int prof_kv_read(lc_backend *b, const lc_kv_layer_view *kv, const int32_t *page_table,
                        int64_t pos0, int64_t n_rows, int32_t part, float *out) {
    TIMED(OP_KV_READ, p_->fn.kv_read(b, kv, page_table, pos0, n_rows, part, out));
}

static int prof_attn_dense(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                           int32_t n_seqs, const float *q, int32_t n_head,
                           const lc_rope_table *rope, float scale, float *out) {
    TIMED(OP_ATTN_DENSE, p_->fn.attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out));
}

/* prune_chunks, select_tokens and select_blocks: the same parameters but for their args' type */
#define PROF_SELECTION_OP(name, op, args_type)                                                \
    static int prof_##name(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs, \
                           int32_t n_seqs, const lc_qblock *qb, int32_t n_qb,                 \
                           const float *q_raw, int32_t n_head, const lc_rope_table *rope,     \
                           const args_type *a) {                                              \
        TIMED(op, p_->fn.name(b, kv, seqs, n_seqs, qb, n_qb, q_raw, n_head, rope, a));        \
    }
PROF_SELECTION_OP(prune_chunks, OP_HIP_STAGE, lc_prune_chunks_args)
PROF_SELECTION_OP(select_tokens, OP_TS_SELECT, lc_select_tokens_args)
PROF_SELECTION_OP(select_blocks, OP_HIP_MASK, lc_select_blocks_args)

static int prof_attn_segments(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                            int32_t n_seqs, const lc_qblock *qb, int32_t n_qb,
                            const float *q, int32_t n_head, const lc_rope_table *rope,
                            float scale, const lc_attn_segments_args *a, float *out) {
    TIMED(OP_ATTN_SPARSE,
          p_->fn.attn_segments(b, kv, seqs, n_seqs, qb, n_qb, q, n_head, rope, scale, a, out));
}

static int prof_copy(lc_backend *b, void *dst, const void *src, size_t bytes) {
    TIMED(OP_COPY, p_->fn.copy(b, dst, src, bytes));
}

static int prof_copy_slabs(lc_backend *b, const void *src, void *dst, const lc_slab_copy *copies,
                           int32_t n, size_t slab_bytes) {
    TIMED(OP_COPY_SLABS, p_->fn.copy_slabs(b, src, dst, copies, n, slab_bytes));
}

static int prof_sample(lc_backend *b, const float *logits, int64_t ld, int32_t n_rows,
                       int32_t n_vocab, const lc_sample_row *rows, const int32_t *pen_tokens,
                       int32_t *ids) {
    TIMED(OP_SAMPLE, p_->fn.sample(b, logits, ld, n_rows, n_vocab, rows, pen_tokens, ids));
}

/* ---- public ---------------------------------------------------------------------------- */

int lc_backend_profile_wrap(lc_backend *inner, bool time_ops, lc_backend **out) {
    if (!inner || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_backend_profile_wrap: NULL argument");
    *out            = NULL;
    prof_backend *p = lc_calloc(1, sizeof *p, "profiling backend");
    if (!p) return LC_ERR_NOMEM;
    /* everything, including ops this file does not know, passes through as it is */
    p->base     = *inner;
    p->fn       = *inner;
    p->inner    = inner;
    p->time_ops = time_ops;
    p->phase    = LC_PROFILE_OUTSIDE;
    if (time_ops && inner->timers_create && inner->timer_mark && inner->timer_ms &&
        inner->timers_free && !inner->tuning.profile_sync) {
        if (inner->timers_create(inner, 2 * EV_PAIRS, &p->ev) == LC_OK) {
            p->use_events = true;
        } else {
            lc_clear_error(); /* fall back to synchronising around each op */
            p->ev = NULL;
        }
    }
    lc_backend *b  = &p->base;
    b->free        = prof_free;
    b->alloc       = prof_alloc;
    b->dealloc     = prof_dealloc;
    b->weight_load = prof_weight_load;
    b->weight_free = prof_weight_free;
    if (inner->alloc_tiered) b->alloc_tiered = prof_alloc_tiered;
    if (inner->dealloc_tiered) b->dealloc_tiered = prof_dealloc_tiered;
    b->mem_info    = inner->mem_info; /* forwarded as it is (a query, not an op to time) */
    if (time_ops) {
        b->upload      = prof_upload;
        if (inner->upload_async) b->upload_async = prof_upload_async;
        b->download    = prof_download;
        b->batch_begin = prof_batch_begin;
        b->embed       = prof_embed;
        b->rmsnorm     = prof_rmsnorm;
        b->matmul      = prof_matmul;
        b->add_bias    = prof_add_bias;
        b->rope        = prof_rope;
        b->silu_mul    = prof_silu_mul;
        b->add         = prof_add;
        b->kv_write    = prof_kv_write;
        if (inner->kv_read) b->kv_read = prof_kv_read;
        b->attn_dense  = prof_attn_dense;
        if (inner->prune_chunks) b->prune_chunks = prof_prune_chunks;
        if (inner->attn_segments) b->attn_segments = prof_attn_segments;
        if (inner->copy) b->copy = prof_copy;
        if (inner->copy_slabs) b->copy_slabs = prof_copy_slabs;
        if (inner->select_tokens) b->select_tokens = prof_select_tokens;
        if (inner->select_blocks) b->select_blocks = prof_select_blocks;
        if (inner->sample) b->sample = prof_sample;
    }
    sample_device(p);
    *out = b;
    return LC_OK;
}

bool lc_backend_is_profile(const lc_backend *b) { return b && b->free == prof_free; }

int lc_backend_profile_get(const lc_backend *b, lc_profile_report *out) {
    if (!out || !lc_backend_is_profile(b))
        return lc_fail(LC_ERR_INVALID_ARG, "op times: the model was not loaded with profiling "
                       "(lc_model_params.profile = LC_PROFILE_OPS)");
    prof_backend *p  = (prof_backend *)(uintptr_t)b; /* reading events back updates the sums */
    int           st = drain_events(p);
    if (st != LC_OK) return st;
    memset(out, 0, sizeof *out);
    out->timing = !p->time_ops     ? "none (memory only)"
                  : p->use_events  ? "CUDA events around each op (device time)"
                  : p->base.device == LC_DEVICE_CUDA
                      ? "device synchronised around each op (wall time)"
                      : "wall time (the CPU ops are synchronous)";
    out->n_ops = OP_N;
    for (int ph = 0; ph < LC_PROFILE_N_PHASE; ph++) out->n_forwards[ph] = p->n_forwards[ph];
    for (int op = 0; op < OP_N; op++) {
        lc_profile_op *o = &out->ops[op];
        o->name          = k_op_names[op];
        o->cat           = op_cat((op_id)op);
        for (int ph = 0; ph < LC_PROFILE_N_PHASE; ph++) {
            o->seconds[ph] = p->sec[op][ph];
            o->calls[ph]   = p->calls[op][ph];
            out->seconds[ph][o->cat] += p->sec[op][ph];
            out->calls[ph][o->cat] += p->calls[op][ph];
            out->total_s[ph] += p->sec[op][ph];
        }
    }
    return LC_OK;
}

int lc_backend_profile_reset(lc_backend *b) {
    if (!lc_backend_is_profile(b))
        return lc_fail(LC_ERR_INVALID_ARG, "profile reset: not a profiling backend");
    prof_backend *p = P(b);
    drain_events(p);
    lc_clear_error();
    memset(p->n_forwards, 0, sizeof p->n_forwards);
    memset(p->sec, 0, sizeof p->sec);
    memset(p->calls, 0, sizeof p->calls);
    p->phase = LC_PROFILE_OUTSIDE;
    return LC_OK;
}

int lc_backend_profile_memory(lc_backend *b, lc_memory_report *out) {
    if (!out || !lc_backend_is_profile(b))
        return lc_fail(LC_ERR_INVALID_ARG, "memory report: the model was not loaded with "
                       "profiling (lc_model_params.profile)");
    prof_backend *p = P(b);
    sample_device(p);
    memset(out, 0, sizeof *out);
    out->weight_bytes           = p->weight_bytes;
    out->kv_bytes               = p->kv_bytes;
    out->kv_host_bytes          = p->kv_host_bytes;
    out->other_bytes            = p->other_bytes;
    out->peak_bytes             = p->peak_bytes;
    out->device_total_bytes     = p->dev_total;
    out->device_used_bytes      = p->dev_used;
    out->device_peak_used_bytes = p->dev_peak;
    return LC_OK;
}

void lc_backend_device_name(const lc_backend *b, char *buf, size_t cap) {
    if (!buf || !cap) return;
    snprintf(buf, cap, "cpu");
    if (b && b->device_name && b->device_name((lc_backend *)b, buf, cap) != LC_OK) {
        lc_clear_error();
        snprintf(buf, cap, "unknown device");
    }
}
