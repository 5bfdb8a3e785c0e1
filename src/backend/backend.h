/*
 * backend.h — the compute backend interface: a table of operations the model forward calls,
 * implemented once for the CPU (backend/cpu, the reference) and once for CUDA (backend/cuda).
 * Every CUDA op has a CPU twin of the same name and contract (lc_cpu_<op> / lc_cuda_<op>);
 * the tests compare them. Pointers passed to ops are in the backend's memory (host memory for
 * the CPU backend, device memory for CUDA).
 *
 * Shapes are row-major with the last index contiguous; "rows" are tokens of the batch.
 *
 * Sampling (op `sample`, lc_cpu_sample / lc_cuda_sample) draws one token per logit row with
 * that row's own parameters; the uniform random number comes from the host (the engine's
 * seeded RNG), so both twins map the same uniform to the same token. Semantics, in order:
 *   1. repetition penalty on the row's listed tokens (distinct ids): x > 0 ? x / rp : x * rp;
 *   2. temperature <= 0: greedy, the argmax (the lowest index among equal maxima);
 *   3. no truncation (top_k off or >= n_vocab, top_p >= 1, min_p <= 0): the draw covers the
 *      whole vocabulary in index order: the first i with sum_{j<=i} w_j >= u * sum_j w_j,
 *      w_j = exp((x_j - max) / temperature);
 *   4. otherwise the candidates are the K largest values, K = top_k if set, else
 *      LC_SAMPLE_MAX_K, and never more than LC_SAMPLE_MAX_K (a larger top_k is clamped to it),
 *      sorted by value descending, equal values by index ascending (lowest index first);
 *      p_j = exp(x_j - max) / Z, where Z sums the candidates when top_k is set and the whole
 *      vocabulary (exp in float, summed in double) when it is not; top-p keeps the shortest
 *      prefix whose p sum reaches top_p (all K when they do not: the nucleus is cut at K);
 *      min-p then keeps the prefix with x_j - max >= log(min_p) (at least one); the draw is
 *      the inverse CDF over the kept prefix in that order with w_j = exp((x_j - max) / T).
 * Sums are in double, exp of a candidate in double, whole-vocabulary sums of float expf; the
 * twins add in different orders and their expf may differ by an ulp, so a uniform (or a
 * cumulative p against top_p) within ~1e-7 relative of a CDF boundary can pick a neighbour on
 * the other twin (~1e-15 when top_k is set). A row holding any non-finite value (NaN, +Inf
 * or -Inf) draws nothing: its id is -1 (the engine reports the sequence's error), whatever the
 * row's parameters.
 */
#ifndef LC_BACKEND_H
#define LC_BACKEND_H

#include "longctx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_backend lc_backend;

/* A weight matrix as held by a backend: W[rows = out features][cols = in features]. */
typedef struct lc_weight {
    int64_t  rows;
    int64_t  cols;
    uint32_t type;     /* storage type in the backend: LC_TYPE_F32 / F16 / BF16, or (under
                          LC_WEIGHT_NATIVE) the file's own block type */
    void    *data;
    bool     borrowed; /* data points into the model file's mapping (not freed) */
} lc_weight;

/* lc_backend.weight_type: hold every matrix in its file type where the backend computes with
 * that type (CPU: every type lc_dequantize reads), the mapped file pages used as they are. */
#define LC_WEIGHT_NATIVE 0xffffffffu
/* A backend holding block-type weights (CUDA) dequantises at most this many elements of a
 * matrix at a time, to 16 bits, for a prompt-sized product (its scratch: twice this in bytes;
 * the context budget reserves it). */
#define LC_WEIGHT_SLICE_ELEMS (64ll << 20)

/* RoPE pairing conventions (spec/ecosystem-and-style.md §1.4). */
typedef enum lc_rope_pairing {
    LC_ROPE_NORM = 0, /* adjacent pairs (x[2i], x[2i+1]): llama, mistral */
    LC_ROPE_NEOX = 1, /* split halves (x[i], x[i + n_rot/2]): qwen2 */
} lc_rope_pairing;

/* Precomputed rotation table: cos/sin[pos][n_rot/2], already including any attention scaling
 * factor (YaRN mscale). Held in backend memory. */
typedef struct lc_rope_table {
    int32_t         n_pos;
    int32_t         n_rot; /* rotated dims (<= head_dim) */
    lc_rope_pairing pairing;
    float          *cos;   /* [n_pos][n_rot/2] */
    float          *sin;
    float           mscale; /* the attention factor folded into cos/sin (YaRN; 0 means 1):
                               kernels that compose two table rows divide one factor out */
} lc_rope_table;

/* One slab to move (op copy_slabs), in units of the call's slab size. */
typedef struct lc_slab_copy {
    int64_t src, dst;
} lc_slab_copy;

/* copy_slabs' argument checks, shared by its twins (kv_args.c); n > 0. */
int lc_copy_slabs_check(const void *src, const void *dst, const lc_slab_copy *copies,
                        size_t slab_bytes);

/* The paged KV pool of one layer, as kernels see it (DESIGN.md "KV pages"):
 * K, V: [n_pages][n_kv_head] slabs of one page of one KV head, keys stored before RoPE. A slab
 * holds [page_size][head_dim] elements of the backend's kv_type (fp32 on the CPU, fp16 on
 * CUDA), or, where e4m3 is set, the fp8 layout LC_KV_E4M3:
 *   [page_size][head_dim] e4m3 codes (format/quant.h), then [page_size] fp32 scales s, one per
 *   token; lc_kv_slab_bytes. Element d of token t stands for
 *     value = fp16(fp16(256 s) * code / 256 + fp16(centre[d]))    (one rounding: an fp16 FMA)
 *   with centre = k_centre + head * head_dim for keys (zero where k_centre is NULL) and zero
 *   for values: every reader dequantises so (lc_kv_e4m3_value is the host's copy). kv_write
 *   centres a key on fp16(centre) (the layer's key bias, so that the codes spend their 3
 *   mantissa bits on what varies between tokens: NOTES section 35), clamps to +-LC_KV_E4M3_MAX,
 *   scales each (token, head) row by its largest |x| to 448 and rounds to nearest even.
 * Readers of the fp8 layout so far: kv_write, kv_read, attn_dense, prune_chunks,
 * attn_segments (CUDA; the backend's kv_e4m3); the other ops refuse a view with e4m3 set
 * (LC_ERR_UNSUPPORTED). */
typedef struct lc_kv_layer_view {
    void   *k;
    void   *v;
    int32_t page_size;
    int32_t n_kv_head;
    int32_t head_dim;
    /* NULL, or [n_pages][n_kv_head] in backend memory: the slab (page x n_kv_head + head) whose
     * copy op attn_segments reads in place of slab page x n_kv_head + head of both pools — the
     * slot cache of host-tier slabs in GPU pages (kv/slab_bank.h). A copy holds the same bytes
     * as its slab, so reading either gives the same result; the other ops read pages in place. */
    const int32_t *slab_map;
    bool           e4m3;     /* the pools hold the fp8 layout above */
    const float   *k_centre; /* e4m3: NULL or [n_kv_head][head_dim] in backend memory */
} lc_kv_layer_view;

/* The largest |x| kv_write stores in the fp8 layout (centred keys, values; beyond it a row is
 * clamped, as the fp16 pools saturate at 65,504): the largest code (448) times fp16(256 s) / 256
 * then stays below fp16's overflow, where amax = 65,504 could round 256 s up and give inf. */
#define LC_KV_E4M3_MAX 65408.0f

/* Bytes of one slab (one page of one KV head in one pool): page_size x head_dim elements of
 * kv_type, or the fp8 layout's page_size x (head_dim + 4) where e4m3. */
size_t lc_kv_slab_bytes(bool e4m3, uint32_t kv_type, int32_t page_size, int32_t head_dim);
/* The value an fp8 element stands for (the layout above), as the kernels compute it: code,
 * its token's scale, its centre (0 for values). */
float lc_kv_e4m3_value(uint8_t code, float scale, float centre);
/* The fp8 quantisation of one (token, head) row x[0..n) after centring (kv_write's, on the
 * host): codes[0..n) and the scale. Returns the scale. */
float lc_kv_e4m3_quantize(const float *x, const float *centre, int32_t n, uint8_t *codes);
/* LC_ERR_UNSUPPORTED, naming op and backend, for a view in the fp8 layout: the check of the
 * ops that do not read it. */
int lc_kv_plain_check(const lc_kv_layer_view *kv, const char *op, const char *backend);

/* Which half of a KV pool (op kv_read). */
typedef enum lc_kv_part {
    LC_KV_KEYS   = 0,
    LC_KV_VALUES = 1,
} lc_kv_part;

/* The argument checks of kv_read that both twins share (backend/kv_args.c): LC_ERR_INVALID_ARG
 * naming the first bad one. */
int lc_kv_read_check(const lc_kv_layer_view *kv, const int32_t *page_table, int64_t pos0,
                     int64_t n_rows, int32_t part, const float *out);

/* One sequence's slice of a batch: rows [row0, row0 + n_rows) of the batch belong to it and
 * have positions [pos0, pos0 + n_rows); its keys live in pages page_table[0 .. ]. Queries
 * attend causally to keys [0, pos0 + row]. prompt_end: for rows of a prompt, the position after
 * its last token (where the question of a long prompt ends; the sparse methods may select for
 * the rows just before it in finer blocks); 0 for decode rows and texts that are scored. */
typedef struct lc_attn_seq {
    int32_t        row0;
    int32_t        n_rows;
    int32_t        pos0;
    const int32_t *page_table;
    int32_t        prompt_end;
} lc_attn_seq;

/* ---- InfiniteHiP selection and block-sparse attention (attn/infinitehip.c; digest
 * spec/infinitehip-and-hip.md §3–4; paper 000_ced830aa0d9eb0ea.txt Alg. 1–3) ----
 *
 * Query blocks. The rows of a sequence in a forward are cut into blocks of up to b_q rows
 * (lc_qblock). For a block whose first row sits at position pos0 the keys split into
 *   sink      [0, min(n_sink, win0))
 *   candidates [n_sink, win0)            (what the pruning stages choose from)
 *   window    [win0, p]                  for the row at position p (causal)
 * with win0 = max(min(n_sink, pos0 + 1), pos0 + 1 - n_stream): every row of the block sees
 * the whole window start, so the rows later in the block see up to b_q - 1 more window keys.
 *
 * Segments. A stage's output, and the attention's selected keys, are lists of segments
 * (lc_segment: tokens [start, start + len)), sorted by start, disjoint, inside the block's
 * candidate range. A stage cuts its input list into chunks of l_c tokens: each input segment,
 * in order, into [start + i*l_c, min(start + len, start + (i+1)*l_c)); a chunk never crosses a
 * segment. With no input list (the first stage) the input is the one segment [n_sink, win0).
 * The chunk's rank c is its index in that list (0-based, position order); n_chunks is the
 * list's length.
 *
 * Scoring one chunk [f, f + len) for one query head h (SelectRep, the hierarchical top-1):
 *   (lo, hi) = (f, f + len); while hi - lo > 1: mid = lo + (hi - lo) / 2;
 *       sL = S(lo, LEFT), sR = S(mid, RIGHT); (lo, hi) = sR > sL ? (mid, hi) : (lo, mid);
 *   score_h = S(lo, RIGHT)  (the representative lo scored in the right-branch slot)
 * where S(key, slot) = max over the block's pooled queries u of  rot(q_u, a_q) · rot(k, a_k):
 * q_u is the mean of the un-rotated query rows [u*q_stride, (u+1)*q_stride) ∩ the block of
 * head h (each rotated first, see below), k the stored (pre-RoPE) key of h's KV head; the
 * positions (a_q, a_k) come from the stage's scan_rope:
 *   PLAIN:    each query row at its true position (rotated before pooling), key at its true
 *             position (slot ignored);
 *   RELATIVE: every query row at n_stream + 1; key at 0 in the LEFT slot, 1 in the RIGHT slot;
 *   CHUNK:    query row at min(p, n_chunks + n_stream); every key of chunk c at c (slot
 *             ignored).
 * No 1/sqrt(d) scale (it does not change the order). With kv_descent (ours, not the paper's)
 * the descent runs once per KV head: "query head h" above is the KV head's G query heads
 * together, S(key, slot) the max over their pooled queries (G times the rows): one probe per
 * KV head and step instead of G, the branch taken where any of the heads scores best.
 * A chunk's score is the max of score_h
 * over the heads of its group: all query heads (n_groups == 1, the paper's and the reference's
 * default) or the query heads of one KV head (n_groups == n_kv_head, group g = heads
 * [g*G, (g+1)*G), G = n_head / n_kv_head). The stage keeps the n_keep chunks of highest score
 * (equal scores: the later chunk first; all of them when there are no more than n_keep) and
 * writes them as segments sorted by start.
 *
 * Sparse attention (attn_segments): the row at position p of block b, query head h in group g
 * (as above), attends to sink ∪ sel[b][g] ∪ window (causal), softmax(scale · q·k) · v, with
 * keys rotated at
 *   PLAIN:     their true positions (with a selection that covers every candidate this is
 *              exactly dense attention);
 *   STREAMING: StreamingLLM re-indexing: the n_sel selected tokens are given consecutive
 *              positions just before the window and the sink keys just before them: sink key
 *              j at win0 - n_sel - n_s + j (n_s = min(n_sink, win0)), the selected token of
 *              rank r (0-based, position order) at win0 - n_sel + r, window keys at their
 *              true positions. The query stays rotated at its true position, so every query
 *              of a block sees the same key rotations, and a full selection is again dense.
 *   GAPS:      (ours) STREAMING with the gaps between the attended keys kept, compressed by one
 *              factor per block so that the whole span fits gap_span positions: with
 *              base = win0 - n_pre (n_pre = n_s + n_sel: the keys gone from the span are
 *              exactly base), S = clamp(gap_span - n_pre - (last - win0 + 1), 0, base) (last:
 *              the block's last row's position) and the attended key of list index i (sink
 *              and selected keys in position order) at token t:
 *                  pos = base + i - floor(S * (base - (t - i)) / base)   (0 when base = 0)
 *              (t - i: the key's gap tokens before it). S = 0 is STREAMING; S = base (a span
 *              that holds the true one) is PLAIN; in between a selected run stays contiguous,
 *              runs keep their order and distinct positions, and the distances between runs
 *              shrink by S / base.
 *
 * Batched decode (the selection ops and attn_segments). A call may name, per block, where its
 * selection lists live and whether it recomputes them, so that one launch serves every decode
 * sequence of a step while each sequence keeps its own cached selections (stage outputs, masks)
 * in a slot of a pool: with `list` non-NULL (backend memory, [n_qb]) block b reads and writes
 * the lists at index list[b] of the call's list arrays (in / in_n / out / out_n / sel / sel_n:
 * [n_lists][n_groups][cap]) instead of index b; with `from` non-NULL (backend memory, [n_qb]) a
 * selection op computes block b only where from[b] <= the call's `stage` (0 for the one-stage
 * ops) and leaves its output lists untouched otherwise (they hold the block's cached selection).
 * Both NULL: index b, every block (as before). Both are device data, so a decode step keeps one
 * launch shape while sequences refresh at different steps (CUDA graphs).
 */
typedef struct lc_qblock {
    int32_t seq;    /* index into the batch's seqs */
    int32_t row0;   /* first row of the block in q / out */
    int32_t n_rows; /* 1 .. b_q */
    int32_t pos0;   /* position of row0 (rows are consecutive positions) */
    int32_t win0;   /* first window key (formula above) */
} lc_qblock;

typedef struct lc_segment {
    int32_t start;
    int32_t len;
} lc_segment;

typedef enum lc_scan_rope_kind {
    LC_SCAN_PLAIN    = 0,
    LC_SCAN_RELATIVE = 1,
    LC_SCAN_CHUNK    = 2,
} lc_scan_rope_kind;

typedef enum lc_attn_rope_kind {
    LC_ATTN_ROPE_PLAIN     = 0,
    LC_ATTN_ROPE_STREAMING = 1,
    LC_ATTN_ROPE_GAPS      = 2,
} lc_attn_rope_kind;

#ifdef __CUDACC__
#define LC_HOST_DEVICE __host__ __device__
#else
#define LC_HOST_DEVICE
#endif
/* GAPS (contract above), shared by the backends so that they agree to the position: the gap
 * positions S a block keeps (n_window = last - win0 + 1), and the position of list entry i at
 * token t. */
static inline LC_HOST_DEVICE int32_t lc_gap_keep(int32_t gap_span, int32_t n_pre,
                                                 int32_t n_window, int32_t base) {
    const int64_t s = (int64_t)gap_span - n_pre - n_window;
    return s <= 0 ? 0 : s >= base ? base : (int32_t)s;
}
static inline LC_HOST_DEVICE int32_t lc_gap_pos(int32_t base, int32_t keep, int32_t i, int32_t t) {
    if (base <= 0 || keep <= 0) return base + i;
    return base + i - (int32_t)((int64_t)keep * (base - (t - i)) / base);
}

/* One pruning stage over n_qb query blocks. Arrays in backend memory. */
/* Keys rotated once for several ops of one layer (InfiniteHiP's prefill with plain RoPE: every
 * pruning stage and the sparse attention read the prefill sequences' keys at their true
 * positions). An object the caller owns and passes to prune_chunks and attn_segments (args.rot): the
 * backend may fill its buffer (backend memory, grown by the op; the caller frees it with
 * lc_rotated_keys_release) and records what it holds — the layer's key pool, the RoPE table,
 * the batch and the KV writes it saw — so a later op reuses it only when all four are the same:
 * the results never depend on the order of the calls or on other ops in between. A backend
 * without the optimisation (the CPU) ignores it. Zero-initialised: empty. */
typedef struct lc_rotated_keys {
    void        *buf;
    size_t       bytes;
    const void  *kv;        /* the key pool its contents come from; NULL: nothing */
    const float *cos;       /* the RoPE table they were rotated by */
    uint64_t     batch;     /* the backend's batch and KV-write counts when it was filled */
    uint64_t     kv_writes;
} lc_rotated_keys;

typedef struct lc_prune_chunks_args {
    int32_t           chunk;      /* l_c >= 1 */
    int32_t           n_keep;     /* chunks kept per (block, group), >= 1 */
    int32_t           q_stride;   /* query rows mean-pooled per scoring query, >= 1 */
    int32_t           n_sink;
    int32_t           n_stream;
    int32_t           scan_rope;  /* lc_scan_rope_kind */
    int32_t           n_groups;   /* 1 or n_kv_head */
    int32_t           max_rows;   /* >= every block's n_rows (launch size) */
    int32_t           max_chunks; /* >= the chunks of any (block, group) (launch size) */
    int32_t           in_cap;     /* capacity of each (block, group) input list */
    const lc_segment *in;         /* [n_qb][n_groups][in_cap]; NULL: the first stage */
    int32_t           first_offset; /* first stage only (in NULL), 0 .. chunk - 1: the chunk
                                       grid starts at n_sink + first_offset, after one shorter
                                       chunk [n_sink, n_sink + first_offset) (a staggered grid) */
    int32_t           first_stride; /* first stage only, 0 .. chunk (0: chunk): the grid's chunks
                                       of l_c start every first_stride tokens, the last ending
                                       at win0; with a stride below l_c they overlap, and each
                                       kept chunk is written clipped to start where the kept
                                       one before it ends (the output stays disjoint) */
    const int32_t    *in_n;       /* [n_qb][n_groups] segments in each input list */
    lc_segment       *out;        /* [n_qb][n_groups][n_keep] */
    int32_t          *out_n;      /* [n_qb][n_groups] segments written */
    int32_t           kv_descent; /* 0: SelectRep per query head (the paper's); 1 (ours): one
                                     descent per KV head, S() maxed over the pooled queries of
                                     all G query heads of that KV head (contract above) */
    const int32_t    *list;  /* [n_qb] or NULL: block b's lists (batched decode, above) */
    const int32_t    *from;  /* [n_qb] or NULL: block b runs where from[b] <= stage */
    int32_t           stage; /* this stage's index (with from) */
    lc_rotated_keys  *rot;   /* NULL: no reuse of rotated keys (lc_rotated_keys) */
} lc_prune_chunks_args;

typedef struct lc_attn_segments_args {
    int32_t           n_sink;
    int32_t           attn_rope; /* lc_attn_rope_kind */
    int32_t           n_groups;  /* 1 or n_kv_head */
    int32_t           sel_cap;   /* capacity of each (block, group) list */
    int32_t           max_rows;  /* >= every block's n_rows (launch size) */
    int32_t           max_sel;   /* >= the selected tokens of any (block, group) (launch size) */
    int32_t           max_window; /* >= p - win0 + 1 of any row (launch size) */
    int32_t           gap_span;  /* GAPS: the positions the attended span fits into, >= 1 */
    const lc_segment *sel;       /* [n_qb][n_groups][sel_cap] (with list: [n_lists]...) */
    const int32_t    *sel_n;     /* [n_qb][n_groups] */
    const int32_t    *list;      /* [n_qb] or NULL: block b's lists (batched decode, above) */
    lc_rotated_keys  *rot;       /* NULL: no reuse of rotated keys (lc_rotated_keys) */
} lc_attn_segments_args;

/* The contract checks both backends share (backend/select_args.c): the arguments of prune_chunks /
 * attn_segments that the host can see (not the blocks, which a device backend keeps in device
 * memory); LC_ERR_INVALID_ARG naming the first bad one. */
int lc_prune_chunks_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                       const lc_rope_table *rope, const lc_prune_chunks_args *a);
int lc_attn_segments_check(const lc_kv_layer_view *kv, int32_t n_head, const lc_attn_segments_args *a);

/* ---- TokenSelect token-level selection (op select_tokens; attn/tokenselect.c; digest
 * spec/tokenselect-and-sparseserve.md A.2–A.5; paper 001_823a2d0cdd44ac9c.txt Eq. 7, Alg. 1–2) ----
 * One selection per query block b (lc_qblock; the caller sets win0), shared by every
 * head: the candidates are [n_init, win0) (none when win0 <= n_init). With n = the block's n_rows:
 *   fingerprint  f_h = (1/n) sum_{i<n} rot(q_raw[row0 + i][h], fp_pos + i)   (rotated, then mean)
 *   logits       s_h[t] = f_h · k_t[kv(h)]: the stored (pre-RoPE) key, not rotated; no scale;
 *                kv(h) = h / (n_head / n_kv_head), or h % n_kv_head with gqa_mod (paper's code)
 *   soft vote    score[t] = sum_h exp(s_h[t] - m_h) / Z_h   (per-head softmax over the block's
 *                candidates: m_h = max_t s_h[t], Z_h = sum_t exp(s_h[t] - m_h); fp32)
 *   selection    the k candidates of highest score (equal scores: the lower position first), all
 *                of them when there are no more than k,
 * written as segments: the maximal runs of consecutive selected positions, sorted by start
 * (out_n[b] of them at out + b * out_cap).
 * Selection cache (decode): with cache_q non-NULL, each block b has a cache slot (list[b] with
 * `list`, else b; a call of several blocks with the cache needs `list`): its f flattened over
 * the heads (n_head * head_dim values) is compared with the slot's cache_q + slot * n_head *
 * head_dim: when cache_valid[slot] != 0 and cos(f, cache_q) >= theta (cos = f·c / (|f| |c|),
 * taken as 0 when a norm is 0) the block is a hit: its out / out_n lists, cache_q and
 * cache_valid are left as they are (the previous selection stands) and counts[0] += 1;
 * otherwise (a miss) its selection is computed, f is copied into its cache_q,
 * cache_valid[slot] = 1 and counts[1] += 1. counts (may be NULL) accumulate. A backend decides
 * hit or miss per block where the data is (the CUDA twin on the device: no host round trip; a
 * hit costs only early-returning work), so a step never waits for the host, and one launch
 * serves every decode sequence of a step, each with its own cache (batched decode, above:
 * `list` names the slot of out / out_n / cache_q / cache_valid; select_tokens has no `from`).
 */
typedef struct lc_select_tokens_args {
    int32_t     n_init;      /* first candidate position (the sink [0, n_init) is not one) */
    int32_t     k;           /* tokens selected per block, >= 1 */
    int32_t     fp_pos;      /* fingerprint rotation position of a block's first row (n_local) */
    int32_t     gqa_mod;     /* 0: kv(h) = h / group; 1: h % n_kv_head */
    int32_t     max_rows;    /* >= every block's n_rows (launch size) */
    int32_t     max_cand;    /* >= win0 - n_init of every block (launch size) */
    int32_t     out_cap;     /* capacity of each block's list, >= min(k, max_cand) */
    lc_segment *out;         /* [n_qb or slots][out_cap] */
    int32_t    *out_n;       /* [n_qb or slots] */
    float      *cache_q;     /* [slots][n_head * head_dim], or NULL: no selection cache */
    int32_t    *cache_valid; /* [slots] (with cache_q) */
    const int32_t *list;     /* [n_qb] or NULL: block b's slot (out, out_n, cache_q, cache_valid) */
    float       theta;       /* cosine threshold of a hit */
    int64_t    *counts;      /* [2]: hits, misses (accumulated); may be NULL */
} lc_select_tokens_args;

/* ---- HiP hierarchical top-k mask estimation (op select_blocks; attn/hip.c; digest
 * spec/infinitehip-and-hip.md §1.2–1.5; paper 004_b4c89dd3429c70a1.txt §3, Alg. 1) ----
 * For query block b and group g (groups as in prune_chunks: one of all query heads, or one per KV
 * head) the candidates [n_sink, win0) are cut into key blocks of block_k tokens from n_sink:
 * block j = [n_sink + j*block_k, min(win0, n_sink + (j+1)*block_k)), NB = ceil(cand / block_k)
 * blocks; n_nodes = k / block_k.
 *  - NB <= n_nodes: the selection is the whole candidate range (one segment; none when empty);
 *  - otherwise nodes are half-open ranges of blocks, at first node j = [j*NB/n_nodes,
 *    (j+1)*NB/n_nodes) (integer division; j < n_nodes). While some node has more than one block:
 *    a node [f, l) with l - f >= 2 becomes two branches [f, m), [m, l), m = f + (l - f) / 2; a
 *    one-block node is one branch [f, f + 1); every branch is scored, and the n_nodes branches of
 *    highest score (equal scores: the lower f first) are the next nodes;
 *  - a branch [f, l) is scored by its middle block r = f + (l - f - 1) / 2:
 *      score = max over the group's query heads h, the block's sampled rows u (row0 + i*q_stride
 *      for i*q_stride < n_rows) and block r's sampled keys t (its start + j*k_stride, inside it)
 *      of rot(q_raw[u][h], a_u) · rot(k_t[kv(h)], a_t), no scale, kv(h) = h / (n_head / n_kv_head),
 *      positions by scan_rope: PLAIN the row's and the key's true positions; RELATIVE every row
 *      at n_stream + 1 and every key at 0 (CHUNK is refused).
 * The final n_nodes blocks are written one segment per block (length block_k, shorter for the
 * block that ends at win0), sorted by start: out_n[b][g] segments at out + (b*n_groups + g) *
 * out_cap.
 */
typedef struct lc_select_blocks_args {
    int32_t     k;         /* tokens per selection: a multiple of block_k, >= block_k */
    int32_t     block_k;   /* b_k >= 1 */
    int32_t     q_stride;  /* b_sq >= 1: every q_stride-th row of a block scores */
    int32_t     k_stride;  /* b_sk in [1, block_k]: every k_stride-th key of a block scores */
    int32_t     n_sink;
    int32_t     n_stream;  /* for RELATIVE positions */
    int32_t     scan_rope; /* LC_SCAN_PLAIN or LC_SCAN_RELATIVE */
    int32_t     n_groups;  /* 1 or n_kv_head */
    int32_t     max_rows;  /* >= every block's n_rows (launch size) */
    int32_t     max_cand;  /* >= win0 - n_sink of every block (launch size) */
    int32_t     out_cap;   /* capacity of each (block, group) list, >= k / block_k */
    lc_segment *out;       /* [n_qb][n_groups][out_cap] (with list: [n_lists]...) */
    int32_t    *out_n;     /* [n_qb][n_groups] */
    const int32_t *list;   /* [n_qb] or NULL: block b's lists (batched decode, above) */
    const int32_t *from;   /* [n_qb] or NULL: block b runs where from[b] <= 0 */
} lc_select_blocks_args;

/* Contract checks shared by both twins (backend/select_args.c), as lc_prune_chunks_check. */
int lc_select_tokens_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                       const lc_rope_table *rope, const lc_select_tokens_args *a);
int lc_select_blocks_check(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                      const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                      const lc_rope_table *rope, const lc_select_blocks_args *a);

/* The most candidates sampling considers after top-k (see the sampling notes above). */
#define LC_SAMPLE_MAX_K 1024

/* Sampling parameters of one logit row (lc_sampling of the request, plus the draw). */
typedef struct lc_sample_row {
    double  uniform;        /* in [0, 1), from the host's RNG; unused when greedy */
    float   temperature;    /* <= 0: greedy */
    int32_t top_k;          /* 0: off */
    float   top_p;          /* >= 1: off */
    float   min_p;          /* <= 0: off */
    float   repeat_penalty; /* 1: off */
    int32_t pen_off;        /* the row's penalised tokens: pen_tokens[pen_off, pen_off + pen_n) */
    int32_t pen_n;          /* (distinct ids in [0, n_vocab); others are ignored) */
} lc_sample_row;

/* What graph_begin decided (CUDA graphs of a decode step; see graph_begin). */
typedef enum lc_graph_mode {
    LC_GRAPH_OFF       = 0, /* issue the ops as usual */
    LC_GRAPH_CAPTURING = 1, /* issue the ops: they are recorded, not run; then call graph_end */
    LC_GRAPH_REPLAYED  = 2, /* a recorded graph of these ops was launched: do not issue them */
} lc_graph_mode;

struct lc_backend {
    const char *name;
    lc_device   device;
    int         n_threads;   /* host threads used by the ops */
    uint32_t    weight_type; /* storage type for weight matrices (LC_TYPE_F32 / F16 / BF16,
                                or LC_WEIGHT_NATIVE) */
    bool        native_fast; /* its products over native (block-type) weights have vector
                                kernels on this machine (CPU: AVX-512, detected at run time) */
    uint64_t    native_types; /* under LC_WEIGHT_NATIVE, the tensor types a matrix is held in
                                 as stored (bit t: LC_TYPE t; CPU: every type; CUDA: the block
                                 types its kernels read, and F16 / BF16); matrices of other
                                 types are converted as under the backend's auto weight type */
    uint32_t    kv_type;     /* element type of the KV pools (LC_TYPE_F32 / F16) */
    bool        kv_e4m3;     /* its kernels read the fp8 KV layout (LC_KV_E4M3; kv_write,
                                kv_read, attn_dense, prune_chunks, attn_segments) */
    int32_t     page_size;   /* the KV page size its kernels need; 0: any power of two */
    /* The kernel choices the ops follow (longctx.h; all zero, the defaults, from the
     * constructors): lc_model_load copies lc_model_params.tuning here. Ops read the struct
     * they are called with at each call, so a caller may change it between ops (the tests do,
     * to compare the paths of an op); the CPU backend has no choices. */
    lc_tuning   tuning;
    /* forwards launched as graphs, captured or replayed (statistics; graph_begin / graph_end) */
    int64_t     graph_launches;
    /* the unit of alloc_tiered's dev_bytes, in bytes (CUDA: the mapping granularity, 2 MiB on
     * an H100/H200; 0 where alloc_tiered is NULL) */
    size_t      tier_align;
    void       *impl;
    void (*free)(lc_backend *b);

    /* memory: buffers for activations, KV pools, tables */
    void *(*alloc)(lc_backend *b, size_t bytes, const char *what);
    void (*dealloc)(lc_backend *b, void *p);
    /* A buffer in two tiers (the KV cache's host tier, kv.h): dev_bytes of backend memory,
     * then host_bytes of pinned host memory, one address range the ops read and write alike
     * (CUDA: a virtual range with device memory mapped at its start and host memory behind
     * it). dev_bytes is a multiple of tier_align. Freed with dealloc_tiered. NULL ops: the
     * backend's memory is host memory already (one alloc of both). */
    void *(*alloc_tiered)(lc_backend *b, size_t dev_bytes, size_t host_bytes, const char *what);
    void (*dealloc_tiered)(lc_backend *b, void *p);
    /* Memory where alloc places buffers, in bytes: *free_bytes that can still be allocated
     * (CPU: the host's available memory; CUDA: cudaMemGetInfo's free), *total_bytes in all.
     * NULL: unknown (the memory checks then use the host's numbers). */
    int (*mem_info)(lc_backend *b, uint64_t *free_bytes, uint64_t *total_bytes);
    /* host <-> backend copies */
    int (*upload)(lc_backend *b, void *dst, const void *src, size_t bytes);
    int (*download)(lc_backend *b, void *dst, const void *src, size_t bytes);

    /* Like upload, but may return before the copy is done (the source may be reused at once;
     * later ops see the data). NULL: use upload. */
    int (*upload_async)(lc_backend *b, void *dst, const void *src, size_t bytes);

    /* Called once per forward before any op that takes the batch's sequences: a backend whose
     * kernels need the sequences (and page tables) in its own memory copies them here. The
     * seqs pointer passed to later ops of the same forward is this one. NULL: nothing to do. */
    int (*batch_begin)(lc_backend *b, const lc_attn_seq *seqs, int32_t n_seqs, int32_t page_size);

    /* Dequantise a GGUF tensor (rows = ne[1], cols = ne[0]) into backend storage. */
    int (*weight_load)(lc_backend *b, const lc_gguf_tensor *t, lc_weight *w);
    void (*weight_free)(lc_backend *b, lc_weight *w);

    /* out[r][:] = table row ids[r]  (table: [n_vocab][dim]) */
    int (*embed)(lc_backend *b, const lc_weight *table, const int32_t *ids, int64_t n_rows,
                 float *out);
    /* y[r] = x[r] / rms(x[r]) * w */
    int (*rmsnorm)(lc_backend *b, const float *x, const float *w, float *y, int64_t n_rows,
                   int64_t dim, float eps);
    /* y[n_rows][w->rows] = x[n_rows][w->cols] · Wᵀ */
    int (*matmul)(lc_backend *b, const lc_weight *w, const float *x, float *y, int64_t n_rows);
    /* y[r][:] += bias */
    int (*add_bias)(lc_backend *b, float *y, const float *bias, int64_t n_rows, int64_t dim);
    /* Rotate x[n_rows][n_heads][head_dim] in place by positions pos[r]. */
    int (*rope)(lc_backend *b, float *x, const int32_t *pos, int64_t n_rows, int32_t n_heads,
                int32_t head_dim, const lc_rope_table *rope);
    /* out = silu(gate) * up, elementwise over n */
    int (*silu_mul)(lc_backend *b, const float *gate, const float *up, float *out, int64_t n);
    /* x += y over n */
    int (*add)(lc_backend *b, float *x, const float *y, int64_t n);
    /* Write rows' k, v ([n_rows][n_kv_head][head_dim]) into the pages of their sequences. */
    int (*kv_write)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                    int32_t n_seqs, const float *k, const float *v);
    /* Read stored KV back: out[r][h][:] = the key (part LC_KV_KEYS) or value (LC_KV_VALUES) of
     * KV head h at position pos0 + r of one sequence, r in [0, n_rows), converted from the
     * backend's kv_type to f32 (exact for f32 pools); keys as stored, before RoPE (rotate
     * them with rope). page_table: the sequence's pages (position p in page
     * page_table[p / page_size]), in backend memory, like out [n_rows][n_kv_head][head_dim].
     * For probes and tests (the fidelity evaluation), not the forward. LC_ERR_INVALID_ARG for
     * a missing pointer, a bad shape, part, pos0 < 0, n_rows < 0 or pos0 + n_rows > 2^31 - 1
     * (lc_kv_read_check); page ids are not checked (the pool's size is not in the view). */
    int (*kv_read)(lc_backend *b, const lc_kv_layer_view *kv, const int32_t *page_table,
                   int64_t pos0, int64_t n_rows, int32_t part, float *out);
    /* Dense causal attention for a batch of sequences over the paged KV; q is already
     * rotated; keys are rotated here with their true positions. out: [n_rows][n_head*hd] */
    int (*attn_dense)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                      int32_t n_seqs, const float *q, int32_t n_head, const lc_rope_table *rope,
                      float scale, float *out);
    /* dst = src, bytes in backend memory (stream-ordered on CUDA) */
    int (*copy)(lc_backend *b, void *dst, const void *src, size_t bytes);
    /* n slabs of slab_bytes (a multiple of 16; both buffers 16-byte aligned) from src +
     * copies[i].src x slab_bytes to dst + copies[i].dst x slab_bytes: the host tier's gather
     * into GPU slots (FlashH2D) and the save of new KV into host slabs, one launch for the
     * list (either buffer may be a tiered pool, alloc_tiered). copies [n] in backend memory;
     * the destinations of one call are distinct and do not overlap the sources. */
    int (*copy_slabs)(lc_backend *b, const void *src, void *dst, const lc_slab_copy *copies,
                      int32_t n, size_t slab_bytes);
    /* One InfiniteHiP pruning stage (semantics above): q_raw = the un-rotated queries
     * [n_rows][n_head][head_dim]; qb [n_qb] in backend memory. */
    int (*prune_chunks)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                     int32_t n_seqs, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                     int32_t n_head, const lc_rope_table *rope, const lc_prune_chunks_args *a);
    /* Block-sparse attention over sink + selected segments + window (semantics above); q
     * rotated at the true positions; out rows of the blocks only. */
    int (*attn_segments)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                       int32_t n_seqs, const lc_qblock *qb, int32_t n_qb, const float *q,
                       int32_t n_head, const lc_rope_table *rope, float scale,
                       const lc_attn_segments_args *a, float *out);
    /* TokenSelect selection (semantics above): q_raw before RoPE; qb [n_qb] in backend memory. */
    int (*select_tokens)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                     int32_t n_seqs, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                     int32_t n_head, const lc_rope_table *rope, const lc_select_tokens_args *a);
    /* HiP mask estimation (semantics above): q_raw before RoPE; qb in backend memory. */
    int (*select_blocks)(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                    int32_t n_seqs, const lc_qblock *qb, int32_t n_qb, const float *q_raw,
                    int32_t n_head, const lc_rope_table *rope, const lc_select_blocks_args *a);
    /* ids[r] = the token drawn from row r of logits (row r at logits + r * ld, n_vocab floats)
     * under rows[r] (semantics at the top of this file); rows, pen_tokens and ids in backend
     * memory; logits are not modified. */
    int (*sample)(lc_backend *b, const float *logits, int64_t ld, int32_t n_rows,
                  int32_t n_vocab, const lc_sample_row *rows, const int32_t *pen_tokens,
                  int32_t *ids);

    /* Graphs (NULL where unsupported, e.g. the CPU). A forward whose launch shape is a
     * function of key (the caller's part: buffers, row counts) and of what batch_begin saw
     * (the backend's part) brackets its ops with graph_begin / graph_end after uploading
     * its inputs and after batch_begin. graph_begin sets *mode (lc_graph_mode): the first
     * forward of a shape runs as usual (OFF), the second is captured and launched, later
     * ones replay it. graph_end(status of the issued ops) ends a capture and launches the
     * graph; *launched false (with LC_OK) means the capture was abandoned and the caller
     * issues the ops again as usual. graph_reset drops every graph (buffers they use are
     * about to be freed). */
    int (*graph_begin)(lc_backend *b, uint64_t key, int *mode);
    int (*graph_end)(lc_backend *b, int status, bool *launched);
    void (*graph_reset)(lc_backend *b);

    /* Measurement (the profiler, reports). NULL where it does not apply: a backend whose ops
     * return when their work is done (the CPU) has no sync and no timers, and is named "cpu".
     * sync waits for every op issued so far; device_name writes the device's name; a set of n
     * timer marks (timers_create) is recorded in op order (timer_mark: mark i is reached
     * when the ops issued before it are done) and read back as the device time between two
     * recorded marks (timer_ms waits for the later one). */
    int (*sync)(lc_backend *b);
    int (*device_name)(lc_backend *b, char *buf, size_t cap);
    int (*timers_create)(lc_backend *b, int32_t n, void **timers);
    void (*timers_free)(lc_backend *b, void *timers);
    int (*timer_mark)(lc_backend *b, void *timers, int32_t i);
    int (*timer_ms)(lc_backend *b, void *timers, int32_t from, int32_t to, float *ms);
};

/* Free a lc_rotated_keys' buffer (made by b's ops) and empty it. */
static inline void lc_rotated_keys_release(lc_backend *b, lc_rotated_keys *r) {
    if (r->buf) b->dealloc(b, r->buf);
    r->buf = NULL, r->bytes = 0, r->kv = NULL, r->cos = NULL;
}

/* LC_ERR_INVALID_ARG naming the first field of t out of its range (backend/tuning.c). */
int lc_tuning_check(const lc_tuning *t);
/* A hash of every field's value (graphs captured under one tuning are not replayed under
 * another). */
uint64_t lc_tuning_hash(const lc_tuning *t);

/* Constructors (tuning: the defaults). The CUDA one returns LC_ERR_UNSUPPORTED when built
 * without CUDA or when no device is present. */
int lc_backend_cpu_create(int n_threads, lc_backend **out);
int lc_backend_cuda_create(int device_index, lc_backend **out);
/* The name of CUDA device 0, without creating a backend (LC_ERR_UNSUPPORTED: no CUDA backend
 * in this build, or no device). */
int lc_backend_cuda_device_name(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
