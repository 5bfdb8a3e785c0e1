// backend_cuda.cu — the CUDA backend object (backend/backend.h): device selection, its stream,
// device memory, host<->device copies, bf16 weights, the per-forward batch upload (sequences
// and page tables copied once, read by every layer's KV write and attention), the op table
// over the kernels of elementwise.cu, rope_embed_kv.cu, weights_gemm.cu, attention.cu,
// sampling.cu, and CUDA graphs of decode steps.
//
// Copies. Uploads go through a pinned staging ring (cudaMemcpyAsync on the backend's stream,
// the caller's buffer free again at return; large ones synchronously); small downloads come
// back through a pinned buffer. So a decode step's only host synchronisation is the download
// of its sampled ids.
//
// Graphs (graph_begin / graph_end). A decode step's launch shape is a function of the
// caller's key (its buffers and row counts) and of what batch_begin saw: the number of
// sequences and the decode attention's split count. The split count is chosen from the
// longest sequence rounded up to a power of two of keys (at least one page), eager or not,
// so a captured graph stays valid while the sequences grow within a bucket — the kernels read
// the lengths from the uploaded batch image — and graphs on or off compute the same numbers.
// The first step of a shape runs eagerly (it sizes the backend's buffers and plans), the
// second is captured (cudaStreamBeginCapture on the backend stream), instantiated and
// launched, later ones replay it. Buffers the graphs point into (the GEMM input, attention
// partials, the sampling scratch, the batch image) bump an epoch when reallocated; a graph of an older epoch is
// re-captured and patched into its executable with cudaGraphExecUpdate (re-instantiated if
// that fails). The backend's tuning is part of the key (a graph runs the kernels chosen when it
// was captured); tuning.no_cuda_graphs (read at each step) turns graphs off. The kernel choices
// of the other ops follow b->tuning, passed to the kernels at each call.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "format/quant.h"
}

// The stream the kernels launch on: the stream of the backend instance whose op is running on
// this thread (each instance owns one, cuda_impl.stream; every op makes its instance's current
// first, through impl_of or use_stream), so instances on several devices or threads do not
// share one.
static thread_local cudaStream_t g_stream = nullptr;
cudaStream_t        lc_cuda_stream(void) { return g_stream; }
void                lc_cuda_set_stream(cudaStream_t s) { g_stream = s; }
extern "C" void    *lc_cuda_stream_handle(void) { return (void *)g_stream; }

struct cuda_impl {
    int           device;
    cudaStream_t  stream;
    lc_cuda_gemm *gemm;
    void         *staging; // weight upload staging (device)
    size_t        staging_bytes;
    lc_bf16      *xb;      // bf16 copy of a GEMM input
    size_t        xb_bytes;
    void         *wdq;     // f16 rows of a block-type matrix, dequantised for a GEMM
    size_t        wdq_bytes;
    void         *xsplit;  // a block GEMV's inputs split into two f16 values
    size_t        xsplit_bytes;
    uint64_t      logged_types; // (bit t: LC_TYPE t) types already reported as converted to f16
    // the current batch (batch_begin): host copy and device image [seqs][dec][pre][pages]
    const lc_attn_seq *host_seqs;
    int32_t            n_seqs, n_dec, n_pre, max_rows, max_pre_rows;
    int64_t            pre_tiles; // key pages of the prefill sequences (attention scratch)
    int64_t            max_dec_keys;
    unsigned char     *h_batch; // pinned
    unsigned char     *d_batch;
    size_t             batch_cap;
    cudaEvent_t        batch_copied;
    lc_attn_seq       *d_seqs;
    int32_t           *d_dec, *d_pre;
    float             *part;
    size_t             part_bytes;
    void              *pre_scratch; // prefill attention: rotated K and V in fp16
    size_t             pre_scratch_bytes;
    // batches announced and KV writes issued so far: the stamps of a caller's rotated keys
    // (lc_rotated_keys; rot_tiles_plan)
    uint64_t           batches, kv_writes;
    void              *hip_scratch; // InfiniteHiP stage kernels
    size_t             hip_scratch_bytes;
    void              *sel_scratch; // TokenSelect / HiP selection kernels
    size_t             sel_scratch_bytes;
    void              *sparse_scratch; // sparse attention (split partials)
    size_t             sparse_scratch_bytes;
    void              *samp; // sampling scratch
    size_t             samp_bytes;
    // pinned upload ring and download bounce buffer
    unsigned char *h_up;
    size_t         up_cap, up_used;
    cudaEvent_t    up_done; // the last copy out of h_up
    unsigned char *h_down;
    size_t         down_cap;
    // graphs
    uint64_t    epoch; // bumped when a buffer graphs point into is reallocated
    bool        capturing, spoiled;
    int         cap_slot;
    uint64_t    use_clock;
    struct graph_slot {
        bool            used, broken; // broken: failed to capture, always run eagerly
        uint64_t        key, epoch, last_use;
        cudaGraphExec_t exec; // nullptr: seen once (ran eagerly), not captured yet
    } graphs[16];
};

// The instance's state, its stream made the current one (every op calls this or use_stream).
static cuda_impl *impl_of(lc_backend *b) {
    cuda_impl *im = (cuda_impl *)b->impl;
    if (im) g_stream = im->stream;
    return im;
}
static void use_stream(lc_backend *b) { (void)impl_of(b); }

static void *cuda_alloc(lc_backend *b, size_t bytes, const char *what) {
    use_stream(b);
    void       *p   = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        lc_fail(LC_ERR_NOMEM, "out of GPU memory allocating %.1f MiB for %s (%.1f of %.1f MiB "
                "free; %s)", bytes / 1048576.0, what, free_b / 1048576.0, total_b / 1048576.0,
                cudaGetErrorString(err));
        return nullptr;
    }
    return p;
}

// Free and total memory of the backend's device (cudaMemGetInfo counts every process).
static int cuda_mem_info(lc_backend *b, uint64_t *free_bytes, uint64_t *total_bytes) {
    size_t f = 0, t = 0;
    LC_CUDA_TRY(cudaSetDevice(impl_of(b)->device));
    LC_CUDA_TRY(cudaMemGetInfo(&f, &t));
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return LC_OK;
}

static void cuda_dealloc(lc_backend *b, void *p) {
    use_stream(b);
    if (p) cudaFree(p);
}

static int no_copy_in_capture(cuda_impl *im, const char *what) {
    // a copy inside a capture would be recorded, not run (and replayed from a stale source)
    im->spoiled = true;
    return lc_fail(LC_ERR_INTERNAL, "cuda: %s inside a graph capture", what);
}

// Upload: small copies are staged in the pinned ring and copied asynchronously on the
// backend's stream (ordered before every later op; src is free again at return); large ones
// are copied and waited for.
static int cuda_upload(lc_backend *b, void *dst, const void *src, size_t bytes) {
    cuda_impl *im = impl_of(b);
    if (bytes == 0) return LC_OK;
    if (im->capturing) return no_copy_in_capture(im, "upload");
    if (bytes > im->up_cap / 4) {
        LC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, im->stream));
        LC_CUDA_TRY(cudaStreamSynchronize(im->stream));
        return LC_OK;
    }
    if (im->up_used + bytes > im->up_cap) { // wrap: every earlier copy precedes the last one
        LC_CUDA_TRY(cudaEventSynchronize(im->up_done));
        im->up_used = 0;
    }
    unsigned char *stage = im->h_up + im->up_used;
    memcpy(stage, src, bytes);
    LC_CUDA_TRY(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, im->stream));
    LC_CUDA_TRY(cudaEventRecord(im->up_done, im->stream));
    im->up_used += (bytes + 255) & ~(size_t)255;
    return LC_OK;
}

// Download: waits for the stream (so for every op before it), through the pinned buffer when
// the copy fits there.
static int cuda_download(lc_backend *b, void *dst, const void *src, size_t bytes) {
    cuda_impl *im = impl_of(b);
    if (bytes == 0) return LC_OK;
    if (im->capturing) return no_copy_in_capture(im, "download");
    const bool bounce = bytes <= im->down_cap;
    LC_CUDA_TRY(cudaMemcpyAsync(bounce ? im->h_down : dst, src, bytes, cudaMemcpyDeviceToHost,
                                im->stream));
    LC_CUDA_TRY(cudaStreamSynchronize(im->stream));
    if (bounce) memcpy(dst, im->h_down, bytes);
    return LC_OK;
}

static int cuda_weight_load(lc_backend *b, const lc_gguf_tensor *t, lc_weight *w) {
    cuda_impl    *im   = impl_of(b);
    const int64_t cols = (int64_t)t->ne[0];
    const int64_t rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    memset(w, 0, sizeof *w);
    if (rows == 1) { // norms and biases: fp32, dequantised on the host
        float *h = (float *)malloc(sizeof(float) * (size_t)cols);
        if (!h) return lc_fail(LC_ERR_NOMEM, "out of memory for tensor %s", t->name);
        int st = lc_dequantize(t->type, t->data, h, cols);
        if (st == LC_OK) {
            w->data = cuda_alloc(b, sizeof(float) * (size_t)cols, t->name);
            if (!w->data) st = LC_ERR_NOMEM;
            else st = cuda_upload(b, w->data, h, sizeof(float) * (size_t)cols);
        }
        free(h);
        if (st != LC_OK) {
            cuda_dealloc(b, w->data);
            w->data = nullptr;
            return st;
        }
        w->rows = 1, w->cols = cols, w->type = LC_TYPE_F32;
        return LC_OK;
    }
    // native: a block type the kernels read stays as the file's bytes
    if (b->weight_type == LC_WEIGHT_NATIVE && t->type < 64 && ((b->native_types >> t->type) & 1) &&
        lc_cuda_blocks_type(t->type)) {
        const int64_t rb = lc_cuda_blocks_row_bytes(t->type, cols);
        if (rb == 0)
            return lc_fail(LC_ERR_FORMAT, "tensor \"%s\": row of %lld elements is not whole blocks",
                           t->name, (long long)cols);
        const size_t bytes = (size_t)rb * (size_t)rows;
        void        *data  = cuda_alloc(b, bytes, t->name);
        if (!data) return LC_ERR_NOMEM;
        const int st = cuda_upload(b, data, t->data, bytes);
        if (st != LC_OK) {
            cuda_dealloc(b, data);
            return st;
        }
        w->rows = rows, w->cols = cols, w->type = t->type, w->data = data;
        return LC_OK;
    }
    if (b->weight_type == LC_WEIGHT_NATIVE && t->type < 64 && !((im->logged_types >> t->type) & 1)) {
        const lc_type_traits *tr = lc_type_traits_get(t->type);
        im->logged_types |= 1ull << t->type;
        if (t->type != LC_TYPE_F32)
            lc_log(LC_LOG_INFO, "weights: %s tensors (first: %s) have no GPU kernel as stored; held as f16",
                   tr ? tr->name : "?", t->name);
    }
    // weight_type LC_TYPE_BF16 / LC_TYPE_F16 forces one type; otherwise (native, auto) BF16
    // tensors in bf16 (exact) and stores every other type in fp16, whose 11-bit mantissa keeps
    // dequantised values (q * d + m) 8x closer than bf16 does
    const uint32_t out_type = b->weight_type == LC_TYPE_BF16 || b->weight_type == LC_TYPE_F16 ? b->weight_type
                              : t->type == LC_TYPE_BF16 ? LC_TYPE_BF16
                                                        : LC_TYPE_F16;
    void *data = cuda_alloc(b, 2 * (size_t)rows * (size_t)cols, t->name);
    if (!data) return LC_ERR_NOMEM;
    int st = lc_cuda_weight_upload16(t, rows, cols, out_type, data, im->staging, im->staging_bytes);
    if (st != LC_OK) {
        cuda_dealloc(b, data);
        return st;
    }
    w->rows = rows, w->cols = cols, w->type = out_type, w->data = data;
    return LC_OK;
}

static void cuda_weight_free(lc_backend *b, lc_weight *w) {
    cuda_dealloc(b, w->data);
    w->data = nullptr;
}

// Grow a device scratch (*buf, capacity *cap bytes) to at least need bytes. Graphs hold its old
// address, so growing invalidates them (epoch); inside a capture it cannot allocate: the
// capture is given up and the step runs eagerly.
static int grow_scratch(lc_backend *b, void **buf, size_t *cap, size_t need, const char *what) {
    cuda_impl *im = impl_of(b);
    if (need <= *cap) return LC_OK;
    if (im->capturing) {
        im->spoiled = true;
        return lc_fail(LC_ERR_INTERNAL, "cuda: %s too small in a capture", what);
    }
    im->epoch++;
    LC_CUDA_TRY(cudaStreamSynchronize(im->stream));
    cuda_dealloc(b, *buf);
    *cap = 0;
    *buf = cuda_alloc(b, need, what);
    if (!*buf) return LC_ERR_NOMEM;
    *cap = need;
    return LC_OK;
}

// a block-type matrix times n rows: our GEMV for decode-sized n; else rows of the matrix
// dequantised to f16, LC_WEIGHT_SLICE_ELEMS at most at a time, and cuBLASLt on each slice of outputs
static int matmul_blocks(lc_backend *b, const lc_weight *w, const float *x, float *y, int64_t n) {
    cuda_impl *im = impl_of(b);
    // (the GEMV up to 4 rows: on an H200 at 14336 x 4096 q4_K, 4 rows take 34 us on tensor
    // cores, the GEMM path 120 us for 17; bench/NOTES.md §62, §63)
    if (!b->tuning.no_gemv && n <= LC_CUDA_GEMV_BLOCKS_MAX_ROWS && ((uintptr_t)x & 15) == 0) {
        const size_t split_bytes = lc_cuda_gemv_blocks_scratch_bytes(w->type, n, w->cols);
        int          st          = split_bytes ? grow_scratch(b, &im->xsplit, &im->xsplit_bytes, split_bytes,
                                                              "GEMV input (split f16)")
                                               : LC_OK;
        return st == LC_OK ? lc_cuda_gemv_blocks(w->type, w->data, w->rows, w->cols, x, n, y, im->xsplit, im->xsplit_bytes)
                           : st;
    }
    const int64_t rb    = lc_cuda_blocks_row_bytes(w->type, w->cols);
    int64_t       slice = LC_WEIGHT_SLICE_ELEMS / w->cols;
    if (slice > w->rows) slice = w->rows;
    if (slice < 1) slice = 1;
    if (rb == 0) return lc_fail(LC_ERR_INTERNAL, "cuda matmul: block type %u", w->type);
    int st = grow_scratch(b, &im->wdq, &im->wdq_bytes, 2 * (size_t)slice * (size_t)w->cols,
                          "dequantised weight rows (f16)");
    const size_t need = (size_t)n * (size_t)w->cols;
    if (st == LC_OK) st = grow_scratch(b, (void **)&im->xb, &im->xb_bytes, need * 2, "GEMM input (16-bit)");
    if (st == LC_OK) st = lc_cuda_f32_to_16(x, LC_TYPE_F16, im->xb, (int64_t)need);
    for (int64_t r0 = 0; r0 < w->rows && st == LC_OK; r0 += slice) {
        const int64_t nr = w->rows - r0 < slice ? w->rows - r0 : slice;
        st = lc_cuda_dequant_blocks(w->type, (const uint8_t *)w->data + r0 * rb, nr, w->cols, LC_TYPE_F16, im->wdq);
        if (st == LC_OK)
            st = lc_cuda_gemm16(im->gemm, LC_TYPE_F16, im->wdq, nr, w->cols, im->xb, n, y + r0, w->rows);
    }
    return st;
}

static int cuda_matmul(lc_backend *b, const lc_weight *w, const float *x, float *y, int64_t n) {
    cuda_impl *im = impl_of(b);
    if (lc_cuda_blocks_type(w->type)) return matmul_blocks(b, w, x, y, n);
    if (w->type != LC_TYPE_BF16 && w->type != LC_TYPE_F16)
        return lc_fail(LC_ERR_UNSUPPORTED, "cuda matmul: weight type %u (bf16 or f16)", w->type);
    // decode-sized: our GEMV on the fp32 input (unless tuning.no_gemv)
    if (!b->tuning.no_gemv && lc_cuda_gemv_fits(w->cols, n, w->data, x))
        return lc_cuda_gemv16(w->type, w->data, w->rows, w->cols, x, n, y);
    const size_t need = (size_t)n * (size_t)w->cols;
    int st = grow_scratch(b, (void **)&im->xb, &im->xb_bytes, need * 2, "GEMM input (16-bit)");
    if (st != LC_OK) return st;
    st = lc_cuda_f32_to_16(x, w->type, im->xb, (int64_t)need);
    if (st != LC_OK) return st;
    return lc_cuda_gemm16(im->gemm, w->type, w->data, w->rows, w->cols, im->xb, n, y, w->rows);
}

static int cuda_embed(lc_backend *b, const lc_weight *t, const int32_t *ids, int64_t n, float *o) {
    use_stream(b);
    return lc_cuda_blocks_type(t->type) ? lc_cuda_embed_blocks(t, ids, n, o) : lc_cuda_embed(t, ids, n, o);
}
static int cuda_rmsnorm(lc_backend *b, const float *x, const float *w, float *y, int64_t n,
                        int64_t dim, float eps) {
    use_stream(b);
    return lc_cuda_rmsnorm(x, w, y, n, dim, eps);
}
static int cuda_silu_mul(lc_backend *b, const float *g, const float *u, float *o, int64_t n) {
    use_stream(b);
    return lc_cuda_silu_mul(g, u, o, n);
}
static int cuda_add(lc_backend *b, float *x, const float *y, int64_t n) {
    use_stream(b);
    return lc_cuda_add(x, y, n);
}
static int cuda_add_bias(lc_backend *b, float *y, const float *bias, int64_t n, int64_t dim) {
    use_stream(b);
    return lc_cuda_add_bias(y, bias, n, dim);
}
static int cuda_rope(lc_backend *b, float *x, const int32_t *pos, int64_t n, int32_t nh, int32_t hd,
                     const lc_rope_table *rope) {
    use_stream(b);
    return lc_cuda_rope(x, pos, n, nh, hd, rope);
}

static int cuda_kv_read(lc_backend *b, const lc_kv_layer_view *kv, const int32_t *page_table,
                        int64_t pos0, int64_t n_rows, int32_t part, float *out) {
    use_stream(b);
    return lc_cuda_kv_read(kv, b->kv_type, page_table, pos0, n_rows, part, out);
}

static int cuda_batch_begin(lc_backend *b, const lc_attn_seq *seqs, int32_t n_seqs,
                            int32_t page_size) {
    cuda_impl *im = impl_of(b);
    im->batches++;
    size_t     n_pages = 0;
    for (int32_t i = 0; i < n_seqs; i++)
        n_pages += (size_t)((seqs[i].pos0 + seqs[i].n_rows + page_size - 1) / page_size);
    const size_t seq_bytes = sizeof(lc_attn_seq) * (size_t)n_seqs;
    const size_t off_dec = (seq_bytes + 15) & ~(size_t)15;
    const size_t off_pre = off_dec + sizeof(int32_t) * (size_t)n_seqs;
    const size_t off_pg  = off_pre + sizeof(int32_t) * (size_t)n_seqs;
    const size_t total   = off_pg + sizeof(int32_t) * n_pages;
    // the previous batch's copy must be done before the pinned image is rewritten
    LC_CUDA_TRY(cudaEventSynchronize(im->batch_copied));
    if (total > im->batch_cap) {
        im->epoch++;
        LC_CUDA_TRY(cudaStreamSynchronize(im->stream));
        cudaFreeHost(im->h_batch);
        cudaFree(im->d_batch);
        im->h_batch = nullptr, im->d_batch = nullptr, im->batch_cap = 0;
        const size_t cap = total * 2 + 4096;
        LC_CUDA_TRY(cudaMallocHost((void **)&im->h_batch, cap));
        LC_CUDA_TRY(cudaMalloc((void **)&im->d_batch, cap));
        im->batch_cap = cap;
    }
    lc_attn_seq *hs  = (lc_attn_seq *)im->h_batch;
    int32_t     *dec = (int32_t *)(im->h_batch + off_dec), *pre = (int32_t *)(im->h_batch + off_pre);
    int32_t     *pg  = (int32_t *)(im->h_batch + off_pg);
    size_t       at  = 0;
    im->n_dec = im->n_pre = im->max_rows = im->max_pre_rows = 0;
    im->max_dec_keys = 0;
    im->pre_tiles    = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const int32_t np = (seqs[i].pos0 + seqs[i].n_rows + page_size - 1) / page_size;
        memcpy(pg + at, seqs[i].page_table, sizeof(int32_t) * (size_t)np);
        hs[i]            = seqs[i];
        hs[i].page_table = (const int32_t *)(im->d_batch + off_pg) + at;
        at += (size_t)np;
        if (seqs[i].n_rows > im->max_rows) im->max_rows = seqs[i].n_rows;
        if (seqs[i].n_rows == 1) {
            dec[im->n_dec++] = i;
            if (seqs[i].pos0 + 1 > im->max_dec_keys) im->max_dec_keys = seqs[i].pos0 + 1;
        } else if (seqs[i].n_rows > 1) {
            pre[im->n_pre++] = i;
            im->pre_tiles += np;
            if (seqs[i].n_rows > im->max_pre_rows) im->max_pre_rows = seqs[i].n_rows;
        }
    }
    LC_CUDA_TRY(cudaMemcpyAsync(im->d_batch, im->h_batch, total, cudaMemcpyHostToDevice, im->stream));
    LC_CUDA_TRY(cudaEventRecord(im->batch_copied, im->stream));
    im->host_seqs = seqs;
    im->n_seqs    = n_seqs;
    im->d_seqs    = (lc_attn_seq *)im->d_batch;
    im->d_dec     = (int32_t *)(im->d_batch + off_dec);
    im->d_pre     = (int32_t *)(im->d_batch + off_pre);
    return LC_OK;
}

// The key count the decode split is chosen for: the longest sequence's, rounded up to a power
// of two (at least a page), so that the split count — part of a graph's launch shape —
// changes only when the longest sequence doubles.
static int64_t key_bucket(int64_t keys) {
    int64_t k = 64;
    while (k < keys) k <<= 1;
    return k;
}

static int check_batch(cuda_impl *im, const lc_attn_seq *seqs, int32_t n_seqs, const char *op) {
    if (seqs != im->host_seqs || n_seqs != im->n_seqs)
        return lc_fail(LC_ERR_INTERNAL, "cuda %s: the batch was not announced by batch_begin", op);
    return LC_OK;
}

/* The start of a selection or sparse-attention op: the batch checked (op names it in an error),
 * then the op's scratch (*buf, *cap) grown to need bytes (what names it). */
static int begin_scratch_op(lc_backend *b, const lc_attn_seq *seqs, int32_t n_seqs, const char *op,
                            void **buf, size_t *cap, size_t need, const char *what) {
    int st = check_batch(impl_of(b), seqs, n_seqs, op);
    if (st == LC_OK && need > 0) st = grow_scratch(b, buf, cap, need, what);
    return st;
}

static int cuda_kv_write(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         int32_t n_seqs, const float *k, const float *v) {
    cuda_impl *im = impl_of(b);
    int        st = check_batch(im, seqs, n_seqs, "kv_write");
    if (st != LC_OK) return st;
    im->kv_writes++;
    return lc_cuda_kv_write(kv, im->d_seqs, n_seqs, im->max_rows, k, v);
}

static int cuda_attn_dense(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                           int32_t n_seqs, const float *q, int32_t n_head,
                           const lc_rope_table *rope, float scale, float *out) {
    cuda_impl *im = impl_of(b);
    int        st = check_batch(im, seqs, n_seqs, "attention");
    if (st != LC_OK) return st;
    lc_cuda_attn_batch bt;
    memset(&bt, 0, sizeof bt);
    bt.seqs         = im->d_seqs;
    bt.dec          = im->d_dec;
    bt.n_dec        = im->n_dec;
    bt.pre          = im->d_pre;
    bt.n_pre        = im->n_pre;
    bt.max_pre_rows = im->max_pre_rows;
    bt.pre_tiles    = im->pre_tiles;
    bt.prefill_mma  = b->tuning.prefill_mma;
    bt.decode_direct = b->tuning.dense_decode_direct;
    bt.n_splits     = lc_cuda_attn_splits(kv, n_head, im->n_dec, key_bucket(im->max_dec_keys),
                                          bt.decode_direct);
    const size_t need = (size_t)im->n_dec * (size_t)n_head * (size_t)bt.n_splits *
                        (size_t)(kv->head_dim + 2) * sizeof(float);
    if (bt.n_splits > 1)
        st = grow_scratch(b, (void **)&im->part, &im->part_bytes, need, "attention partials");
    if (st == LC_OK && im->n_pre > 0)
        st = grow_scratch(b, &im->pre_scratch, &im->pre_scratch_bytes,
                          lc_cuda_attn_prefill_scratch_bytes(kv, im->pre_tiles),
                          "prefill attention scratch (keys and values, fp16)");
    if (st != LC_OK) return st;
    bt.part    = im->part;
    bt.scratch = im->pre_scratch;
    return lc_cuda_attn_dense(kv, &bt, q, n_head, rope, scale, out);
}

static void *cuda_alloc_tiered(lc_backend *b, size_t dev_bytes, size_t host_bytes,
                               const char *what) {
    return lc_cuda_alloc_tiered(impl_of(b)->device, dev_bytes, host_bytes, what);
}
static void cuda_dealloc_tiered(lc_backend *b, void *p) {
    use_stream(b);
    lc_cuda_dealloc_tiered(p);
}
static int cuda_copy_slabs(lc_backend *b, const void *src, void *dst, const lc_slab_copy *copies,
                           int32_t n, size_t slab_bytes) {
    use_stream(b);
    return lc_cuda_copy_slabs(src, dst, copies, n, slab_bytes);
}

static int cuda_copy(lc_backend *b, void *dst, const void *src, size_t bytes) {
    use_stream(b);
    if (bytes == 0) return LC_OK;
    LC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, lc_cuda_stream()));
    return LC_OK;
}

// InfiniteHiP with plain RoPE in a prefill-sized call: the prefill sequences' keys rotated
// into fp16 tiles in the caller's lc_rotated_keys (lc_cuda_rot_tiles), so that the kernels read
// rotated keys instead of rotating each probe / gathered key with its own table row — when
// the call reads keys at least twice as often as the pass touches them (`reads`, a rough
// count); tuning.rotate_keys on: always, off: never. The first op of a layer that uses them
// fills the tiles (rot_tiles_done stamps them with the layer's pool, the table, and the batch
// and KV-write counts); a later op reuses them only while all four are unchanged.
static int rot_tiles_plan(lc_backend *b, const lc_kv_layer_view *kv, const lc_rope_table *rope,
                        lc_rotated_keys *rk, bool eligible, double reads, lc_cuda_rot_tiles *rot,
                        bool *use) {
    cuda_impl *im = impl_of(b);
    *use          = false;
    memset(rot, 0, sizeof *rot);
    const int32_t mode = b->tuning.rotate_keys;
    if (!rk || !eligible || im->n_pre == 0 || mode == LC_TUNE_OFF) return LC_OK;
    int64_t tiles = 0;
    for (int32_t i = 0; i < im->n_seqs; i++) {
        const lc_attn_seq *sq = &im->host_seqs[i];
        if (sq->n_rows > 1) tiles += ((int64_t)sq->pos0 + sq->n_rows + 63) / 64;
    }
    if (tiles == 0) return LC_OK;
    if (mode != LC_TUNE_ON && reads < 2.0 * (double)tiles * 64 * kv->n_kv_head) return LC_OK;
    const size_t bytes = (size_t)tiles * (size_t)kv->n_kv_head * 64 * (size_t)kv->head_dim * 2;
    if (rk->bytes < bytes) { // grown by a quarter more, so that a growing prompt rarely regrows
        lc_rotated_keys_release(b, rk);
        const size_t want = bytes + bytes / 4;
        rk->buf           = cuda_alloc(b, want, "rotated keys (fp16)");
        if (!rk->buf) return LC_ERR_NOMEM;
        rk->bytes = want;
    }
    rot->k      = rk->buf;
    rot->pre    = im->d_pre;
    rot->n_pre  = im->n_pre;
    rot->tiles  = tiles;
    rot->filled = rk->kv == kv->k && rk->cos == rope->cos && rk->batch == im->batches &&
                  rk->kv_writes == im->kv_writes;
    *use        = true;
    return LC_OK;
}

// After an op that filled the tiles of rot_tiles_plan (`filled`) returned `st`: they hold this
// layer's keys for this batch (or nothing, on an error).
static int rot_tiles_done(lc_backend *b, const lc_kv_layer_view *kv, const lc_rope_table *rope,
                        lc_rotated_keys *rk, bool filled, int st) {
    cuda_impl *im = impl_of(b);
    if (filled && rk) {
        rk->kv        = st == LC_OK ? kv->k : NULL;
        rk->cos       = rope->cos;
        rk->batch     = im->batches;
        rk->kv_writes = im->kv_writes;
    }
    return st;
}

static int cuda_prune_chunks(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                          int32_t n_seqs, const lc_qblock *qb, int32_t n_qb,
                          const float *q_raw, int32_t n_head, const lc_rope_table *rope,
                          const lc_prune_chunks_args *a) {
    cuda_impl *im = impl_of(b);
    int        st = begin_scratch_op(b, seqs, n_seqs, "prune_chunks", &im->hip_scratch, &im->hip_scratch_bytes,
                                     lc_cuda_prune_chunks_scratch_bytes(n_qb, n_head, a), "InfiniteHiP stage scratch");
    if (st != LC_OK) return st;
    // probes: a descent of ceil(log2(l_c)) + 1 keys per chunk, (block, query head)
    int steps = 1;
    while ((1 << (steps - 1)) < a->chunk) steps++;
    lc_cuda_rot_tiles rot;
    bool            use = false;
    st = rot_tiles_plan(b, kv, rope, a->rot, a->scan_rope == LC_SCAN_PLAIN && a->max_rows > 1,
                      (double)n_qb * n_head * (a->max_chunks > 0 ? a->max_chunks : 0) * steps, &rot, &use);
    if (st != LC_OK) return st;
    st = lc_cuda_prune_chunks(kv, im->d_seqs, qb, n_qb, q_raw, n_head, rope, a, use ? &rot : NULL,
                           &b->tuning, im->hip_scratch, im->hip_scratch_bytes);
    return rot_tiles_done(b, kv, rope, a->rot, use && n_qb > 0 && !rot.filled, st); // (no blocks:
                                                       // it returns before rotating)
}

static int cuda_attn_segments(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                            int32_t n_seqs, const lc_qblock *qb, int32_t n_qb, const float *q,
                            int32_t n_head, const lc_rope_table *rope, float scale,
                            const lc_attn_segments_args *a, float *out) {
    cuda_impl *im = impl_of(b);
    int        st = begin_scratch_op(b, seqs, n_seqs, "attn_segments", &im->sparse_scratch, &im->sparse_scratch_bytes,
                                     lc_cuda_attn_segments_scratch_bytes(n_qb, n_head, a, &b->tuning), "sparse attention scratch");
    if (st != LC_OK) return st;
    // gathered keys: every list entry once per 128 packed rows of a (block, KV head)
    const int32_t   H = kv->n_kv_head > 0 ? kv->n_kv_head : 1;
    const double    list = (double)(a->n_sink > 0 ? a->n_sink : 0) + (a->max_sel > 0 ? a->max_sel : 0) +
                           (a->max_window > 0 ? a->max_window : 0);
    const double    ctas = (double)(((int64_t)a->max_rows * (n_head / H) + 127) / 128);
    lc_cuda_rot_tiles rot;
    bool            use = false;
    st = rot_tiles_plan(b, kv, rope, a->rot, a->attn_rope == LC_ATTN_ROPE_PLAIN && a->max_rows > 1,
                      (double)n_qb * H * ctas * list, &rot, &use);
    if (st != LC_OK) return st;
    // not marked filled after: the sparse attention uses the tiles only on sm_90a, and it is
    // the layer's last reader anyway
    return lc_cuda_attn_segments(kv, im->d_seqs, qb, n_qb, q, n_head, rope, scale, a,
                               use ? &rot : NULL, &b->tuning, im->sparse_scratch,
                               im->sparse_scratch_bytes, out);
}

static int cuda_select_tokens(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                          int32_t n_seqs, const lc_qblock *qb, int32_t n_qb,
                          const float *q_raw, int32_t n_head, const lc_rope_table *rope,
                          const lc_select_tokens_args *a) {
    cuda_impl *im = impl_of(b);
    if (kv->e4m3) return lc_kv_plain_check(kv, "select_tokens", "cuda");
    int        st = check_batch(im, seqs, n_seqs, "select_tokens");
    if (st != LC_OK) return st;
    const size_t need = lc_cuda_select_tokens_scratch_bytes(kv, n_qb, n_head, a, &b->tuning);
    if (need > 0) st = grow_scratch(b, &im->sel_scratch, &im->sel_scratch_bytes, need,
                                    "TokenSelect scratch");
    if (st != LC_OK) return st;
    return lc_cuda_select_tokens(kv, im->d_seqs, qb, n_qb, q_raw, n_head, rope, a, &b->tuning,
                             im->sel_scratch, im->sel_scratch_bytes);
}

static int cuda_select_blocks(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         int32_t n_seqs, const lc_qblock *qb, int32_t n_qb,
                         const float *q_raw, int32_t n_head, const lc_rope_table *rope,
                         const lc_select_blocks_args *a) {
    cuda_impl *im = impl_of(b);
    if (kv->e4m3) return lc_kv_plain_check(kv, "select_blocks", "cuda");
    int        st = begin_scratch_op(b, seqs, n_seqs, "select_blocks", &im->sel_scratch, &im->sel_scratch_bytes,
                                     lc_cuda_select_blocks_scratch_bytes(kv, n_qb, n_head, a), "HiP mask scratch");
    if (st != LC_OK) return st;
    return lc_cuda_select_blocks(kv, im->d_seqs, qb, n_qb, q_raw, n_head, rope, a, im->sel_scratch,
                            im->sel_scratch_bytes);
}

static int cuda_sample(lc_backend *b, const float *logits, int64_t ld, int32_t n_rows,
                       int32_t n_vocab, const lc_sample_row *rows, const int32_t *pen,
                       int32_t *ids) {
    cuda_impl   *im   = impl_of(b);
    const int    st   = grow_scratch(b, &im->samp, &im->samp_bytes,
                                     lc_cuda_sample_scratch_bytes(n_rows, n_vocab), "sampling scratch");
    if (st != LC_OK) return st;
    return lc_cuda_sample(logits, ld, n_rows, n_vocab, rows, pen, ids, im->samp, im->samp_bytes);
}

// ---- graphs --------------------------------------------------------------------------------

static uint64_t mix64(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0x94D049BB133111EBull;
}

static void graph_slot_clear(cuda_impl::graph_slot *g) {
    if (g->exec) cudaGraphExecDestroy(g->exec);
    memset(g, 0, sizeof *g);
}

static int cuda_graph_begin(lc_backend *b, uint64_t key, int *mode) {
    cuda_impl *im = impl_of(b);
    *mode         = LC_GRAPH_OFF;
    if (b->tuning.no_cuda_graphs || im->capturing) return LC_OK;
    // the backend's part of the launch shape: what batch_begin saw, and the kernel choices
    uint64_t k = mix64(key, lc_tuning_hash(&b->tuning));
    k          = mix64(k, (uint64_t)im->n_seqs);
    k          = mix64(k, (uint64_t)im->n_dec);
    k          = mix64(k, (uint64_t)im->n_pre);
    k          = mix64(k, (uint64_t)im->max_rows);
    k          = mix64(k, (uint64_t)im->max_pre_rows);
    k          = mix64(k, (uint64_t)(im->n_dec > 0 ? key_bucket(im->max_dec_keys) : 0));
    const int  n_slots = (int)(sizeof im->graphs / sizeof im->graphs[0]);
    im->use_clock++;
    int slot = -1;
    for (int i = 0; i < n_slots && slot < 0; i++)
        if (im->graphs[i].used && im->graphs[i].key == k) slot = i;
    if (slot >= 0) {
        cuda_impl::graph_slot *g = &im->graphs[slot];
        g->last_use              = im->use_clock;
        if (g->broken) return LC_OK;
        if (g->exec && g->epoch == im->epoch) {
            LC_CUDA_TRY(cudaGraphLaunch(g->exec, im->stream));
            b->graph_launches++;
            *mode = LC_GRAPH_REPLAYED;
            return LC_OK;
        }
        LC_CUDA_TRY(cudaStreamBeginCapture(im->stream, cudaStreamCaptureModeThreadLocal));
        im->capturing = true;
        im->spoiled   = false;
        im->cap_slot  = slot;
        *mode         = LC_GRAPH_CAPTURING;
        return LC_OK;
    }
    // first sight of this shape: remember it and run eagerly (sizing buffers and plans)
    for (int i = 0; i < n_slots && slot < 0; i++)
        if (!im->graphs[i].used) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < n_slots; i++)
            if (im->graphs[i].last_use < im->graphs[slot].last_use) slot = i;
        graph_slot_clear(&im->graphs[slot]);
    }
    cuda_impl::graph_slot *g = &im->graphs[slot];
    g->used                  = true;
    g->key                   = k;
    g->last_use              = im->use_clock;
    return LC_OK;
}

static int cuda_graph_end(lc_backend *b, int status, bool *launched) {
    cuda_impl *im = impl_of(b);
    *launched     = false;
    if (!im->capturing) return status;
    cudaGraph_t       graph = nullptr;
    const cudaError_t e     = cudaStreamEndCapture(im->stream, &graph);
    im->capturing           = false;
    cuda_impl::graph_slot *g = &im->graphs[im->cap_slot];
    if (status != LC_OK || e != cudaSuccess || !graph) {
        // give the capture up; the caller issues the ops eagerly (an error they hit again
        // is reported then). A shape that fails to capture for another reason than a buffer
        // to grow is not tried again.
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        if (!im->spoiled) {
            lc_log(LC_LOG_WARN, "cuda: a decode step could not be captured as a graph (%s); "
                   "running it without", e != cudaSuccess ? cudaGetErrorString(e) : lc_last_error());
            if (g->exec) cudaGraphExecDestroy(g->exec);
            g->exec   = nullptr;
            g->broken = true;
        }
        im->spoiled = false;
        lc_clear_error();
        return LC_OK;
    }
    if (g->exec) { // same topology, new pointers or grids: patch the executable in place
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(g->exec, graph, &info) != cudaSuccess) {
            cudaGetLastError();
            cudaGraphExecDestroy(g->exec);
            g->exec = nullptr;
        }
    }
    if (!g->exec) {
        const cudaError_t ie = cudaGraphInstantiate(&g->exec, graph, 0);
        if (ie != cudaSuccess) {
            cudaGraphDestroy(graph);
            g->exec = nullptr;
            return lc_fail(LC_ERR_INTERNAL, "CUDA graph instantiation failed: %s",
                           cudaGetErrorString(ie));
        }
    }
    cudaGraphDestroy(graph);
    g->epoch = im->epoch;
    LC_CUDA_TRY(cudaGraphLaunch(g->exec, im->stream));
    b->graph_launches++;
    *launched = true;
    return LC_OK;
}

static void cuda_graph_reset(lc_backend *b) {
    cuda_impl *im = impl_of(b);
    if (im->capturing) return;
    cudaStreamSynchronize(im->stream);
    for (size_t i = 0; i < sizeof im->graphs / sizeof im->graphs[0]; i++)
        graph_slot_clear(&im->graphs[i]);
}

static void cuda_free(lc_backend *b) {
    if (!b) return;
    cuda_impl *im = impl_of(b);
    if (im) {
        if (im->stream) cudaStreamSynchronize(im->stream);
        for (size_t i = 0; i < sizeof im->graphs / sizeof im->graphs[0]; i++)
            graph_slot_clear(&im->graphs[i]);
        lc_cuda_gemm_free(im->gemm);
        cudaFree(im->staging);
        cudaFree(im->xb);
        cudaFree(im->wdq);
        cudaFree(im->xsplit);
        cudaFree(im->part);
        cudaFree(im->samp);
        cudaFree(im->pre_scratch);
        cudaFree(im->hip_scratch);
        cudaFree(im->sel_scratch);
        cudaFree(im->sparse_scratch);
        cudaFree(im->d_batch);
        cudaFreeHost(im->h_batch);
        cudaFreeHost(im->h_up);
        cudaFreeHost(im->h_down);
        if (im->batch_copied) cudaEventDestroy(im->batch_copied);
        if (im->up_done) cudaEventDestroy(im->up_done);
        if (im->stream) {
            if (g_stream == im->stream) g_stream = nullptr;
            cudaStreamDestroy(im->stream);
        }
        free(im);
    }
    free(b);
}

// ---- measurement (backend.h): events on the backend's stream ---------------------------------

static int cuda_sync(lc_backend *b) {
    use_stream(b);
    return lc_cuda_sync();
}

static int cuda_device_name(lc_backend *b, char *buf, size_t cap) {
    (void)b;
    return lc_cuda_device_info(buf, cap, NULL, NULL);
}

typedef struct cuda_timers {
    int    n;
    void **ev; // [n] cudaEvent_t handles
} cuda_timers;

static int cuda_timers_create(lc_backend *b, int32_t n, void **timers) {
    use_stream(b);
    *timers = NULL;
    if (n < 1) return lc_fail(LC_ERR_INVALID_ARG, "timers_create: %d marks", (int)n);
    cuda_timers *t = (cuda_timers *)calloc(1, sizeof *t);
    void       **e = (void **)calloc((size_t)n, sizeof(void *));
    if (!t || !e) {
        free(t), free(e);
        return lc_fail(LC_ERR_NOMEM, "out of memory for %d timer marks", (int)n);
    }
    const int st = lc_cuda_events_create(e, n);
    if (st != LC_OK) {
        free(t), free(e);
        return st;
    }
    t->n = n, t->ev = e;
    *timers = t;
    return LC_OK;
}

static void cuda_timers_free(lc_backend *b, void *timers) {
    use_stream(b);
    cuda_timers *t = (cuda_timers *)timers;
    if (!t) return;
    lc_cuda_events_destroy(t->ev, t->n);
    free(t->ev);
    free(t);
}

static int cuda_timer_mark(lc_backend *b, void *timers, int32_t i) {
    use_stream(b);
    cuda_timers *t = (cuda_timers *)timers;
    if (!t || i < 0 || i >= t->n) return lc_fail(LC_ERR_INVALID_ARG, "timer_mark: mark %d", (int)i);
    return lc_cuda_event_record(t->ev[i]);
}

static int cuda_timer_ms(lc_backend *b, void *timers, int32_t from, int32_t to, float *ms) {
    use_stream(b);
    cuda_timers *t = (cuda_timers *)timers;
    if (!t || from < 0 || to < 0 || from >= t->n || to >= t->n)
        return lc_fail(LC_ERR_INVALID_ARG, "timer_ms: marks %d, %d", (int)from, (int)to);
    return lc_cuda_event_ms(t->ev[from], t->ev[to], ms);
}

// The number of CUDA devices; LC_ERR_UNSUPPORTED when there is none.
static int device_count(int *count) {
    *count = 0;
    if (cudaGetDeviceCount(count) != cudaSuccess || *count == 0) {
        cudaGetLastError(); // clear the sticky "no device" error
        return lc_fail(LC_ERR_UNSUPPORTED, "no CUDA device is available");
    }
    return LC_OK;
}

extern "C" int lc_backend_cuda_device_name(char *buf, size_t cap) {
    if (buf && cap) buf[0] = '\0';
    int count = 0, st = device_count(&count);
    if (st == LC_OK) st = lc_cuda_device_info(buf, cap, NULL, NULL); // (device 0 unless set)
    return st;
}

extern "C" int lc_backend_cuda_create(int device_index, lc_backend **out) {
    *out      = nullptr;
    int count = 0;
    const int dc = device_count(&count);
    if (dc != LC_OK) return dc;
    if (device_index < 0 || device_index >= count)
        return lc_fail(LC_ERR_INVALID_ARG, "CUDA device %d does not exist (%d present)",
                       device_index, count);
    LC_CUDA_TRY(cudaSetDevice(device_index));
    lc_backend *b  = (lc_backend *)calloc(1, sizeof *b);
    cuda_impl  *im = (cuda_impl *)calloc(1, sizeof *im);
    if (!b || !im) {
        free(b), free(im);
        return lc_fail(LC_ERR_NOMEM, "out of memory for the CUDA backend");
    }
    b->impl    = im;
    b->free    = cuda_free;
    im->device = device_index;
    int st     = LC_OK;
    // a blocking stream: it orders with the synchronous copies of upload/download
    if (cudaStreamCreate(&im->stream) != cudaSuccess ||
        cudaEventCreateWithFlags(&im->batch_copied, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&im->up_done, cudaEventDisableTiming) != cudaSuccess)
        st = lc_fail(LC_ERR_INTERNAL, "could not create a CUDA stream");
    if (st == LC_OK) {
        im->up_cap = im->down_cap = 4u << 20;
        if (cudaMallocHost((void **)&im->h_up, im->up_cap) != cudaSuccess ||
            cudaMallocHost((void **)&im->h_down, im->down_cap) != cudaSuccess) {
            cudaGetLastError();
            st = lc_fail(LC_ERR_NOMEM, "out of pinned host memory for the CUDA copy buffers");
        }
    }
    if (st == LC_OK) lc_cuda_set_stream(im->stream);
    if (st == LC_OK) st = lc_cuda_gemm_create(&im->gemm);
    if (st == LC_OK) {
        im->staging_bytes = 64u << 20;
        im->staging       = cuda_alloc(b, im->staging_bytes, "weight upload staging");
        if (!im->staging) st = LC_ERR_NOMEM;
    }
    if (st == LC_OK) st = cudaEventRecord(im->batch_copied, im->stream) == cudaSuccess &&
                                  cudaEventRecord(im->up_done, im->stream) == cudaSuccess
                              ? LC_OK : lc_fail(LC_ERR_INTERNAL, "CUDA event");
    if (st != LC_OK) {
        cuda_free(b);
        return st;
    }
    b->name        = "cuda";
    b->device      = LC_DEVICE_CUDA;
    b->n_threads   = 1;
    b->weight_type = LC_WEIGHT_NATIVE; /* auto: block types as stored, others per tensor (cuda_weight_load) */
    b->native_types = (1ull << LC_TYPE_F16) | (1ull << LC_TYPE_BF16);
    for (uint32_t t = 0; t < 64; t++)
        if (lc_cuda_blocks_type(t)) b->native_types |= 1ull << t;
    b->kv_type     = LC_TYPE_F16; /* lc_kv16, device_prims.cuh */
    /* kv_write, kv_read, attn_dense, prune_chunks, attn_segments read the fp8 layout; its
     * conversions need compute capability 8.9 (Ada, Hopper) */
    b->kv_e4m3     = lc_cuda_cc() >= 89;
    b->page_size   = 64; /* one page = one key tile of the attention kernels (attention.cu) */
    b->alloc       = cuda_alloc;
    b->dealloc     = cuda_dealloc;
    b->mem_info    = cuda_mem_info;
    b->alloc_tiered   = cuda_alloc_tiered;
    b->dealloc_tiered = cuda_dealloc_tiered;
    b->tier_align     = lc_cuda_tier_align(im->device);
    b->upload       = cuda_upload;
    b->upload_async = cuda_upload; /* the same: small copies never wait */
    b->download     = cuda_download;
    b->batch_begin = cuda_batch_begin;
    b->weight_load = cuda_weight_load;
    b->weight_free = cuda_weight_free;
    b->embed       = cuda_embed;
    b->rmsnorm     = cuda_rmsnorm;
    b->matmul      = cuda_matmul;
    b->add_bias    = cuda_add_bias;
    b->rope        = cuda_rope;
    b->silu_mul    = cuda_silu_mul;
    b->add         = cuda_add;
    b->kv_write    = cuda_kv_write;
    b->kv_read     = cuda_kv_read;
    b->attn_dense  = cuda_attn_dense;
    b->copy        = cuda_copy;
    b->copy_slabs  = cuda_copy_slabs;
    b->prune_chunks   = cuda_prune_chunks;
    b->attn_segments = cuda_attn_segments;
    b->select_tokens   = cuda_select_tokens;
    b->select_blocks    = cuda_select_blocks;
    b->sample      = cuda_sample;
    b->graph_begin = cuda_graph_begin;
    b->graph_end   = cuda_graph_end;
    b->graph_reset = cuda_graph_reset;
    b->sync          = cuda_sync;
    b->device_name   = cuda_device_name;
    b->timers_create = cuda_timers_create;
    b->timers_free   = cuda_timers_free;
    b->timer_mark    = cuda_timer_mark;
    b->timer_ms      = cuda_timer_ms;
    *out           = b;
    return LC_OK;
}
