// sampling.cu — the CUDA twin of lc_cpu_sample (contract and semantics in backend/backend.h):
// one token per logit row drawn on the device with the host's uniform, so that a decode step
// downloads n_rows int32 ids instead of n_rows x n_vocab logits (and can sit in a CUDA graph).
//
// Values are the row's logits after the repetition penalty (a bitmap of the penalised ids in
// shared memory, tested per element; the logits are never written), ranked by an
// order-preserving 32-bit key: larger value first, lowest index on ties — the CPU twin's
// order. A row is cut into chunks of CH ids so that every SM takes part; three kernels, each
// a no-op for rows whose mode does not need it (so the launch shape depends on n_rows and
// n_vocab only, and the sequence of launches is graph-capturable):
//   1. per chunk: the chunk's largest key and its lowest index (greedy, and the row maximum);
//      for top-k / top-p / min-p rows, the chunk's K best (K = top_k or LC_SAMPLE_MAX_K,
//      clamped to it) by a 4-pass 8-bit radix select in shared memory, written in index
//      order (the global K best are among the chunks' K best);
//   2. per chunk, for rows that need a whole-vocabulary sum (temperature only; top-p without
//      top-k): sum of float expf over the chunk against the row maximum, in double;
//   3. per row: greedy — the best chunk winner; temperature only — the chunk holding u * total
//      is walked in index order; otherwise the K best of the chunks' candidates (radix select
//      again, ties at the threshold taken lowest index first), a bitonic sort in shared
//      memory, then block scans give top-p, min-p and the inverse-CDF draw.
// Sums are in double, as on the CPU; exp of single elements matches the CPU's formulas
// (double exp for candidates, float expf for whole-vocabulary sums).
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <math.h>
#include <stdint.h>

#define CH 4096              // ids per chunk
#define NT1 256              // threads of the chunk kernels
#define NW1 (NT1 / 32)
#define EPT (CH / NT1)       // ids per thread in an ordered pass over a chunk
#define NT 512               // threads of the per-row kernel
#define NW (NT / 32)
#define CAP LC_SAMPLE_MAX_K

__device__ __forceinline__ uint32_t skey(float x) {
    if (x != x) return 0u;
    if (x == 0.0f) x = 0.0f;
    const uint32_t u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_val(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ bool before(uint32_t ka, int32_t ia, uint32_t kb, int32_t ib) {
    return ka > kb || (ka == kb && ia < ib);
}

enum { MODE_GREEDY = 0, MODE_FULL = 1, MODE_TOPK = 2 };
struct row_mode {
    int     mode;
    int32_t K;       // candidates (MODE_TOPK)
    bool    topk_on; // top_k set (< n_vocab): Z over the candidates, else the whole vocabulary
};
__device__ __forceinline__ row_mode mode_of(const lc_sample_row &p, int32_t V) {
    row_mode m;
    m.topk_on = p.top_k > 0 && p.top_k < V;
    m.K       = min(m.topk_on ? p.top_k : V, CAP);
    if (p.temperature <= 0.0f) m.mode = MODE_GREEDY;
    else if (!m.topk_on && !(p.top_p < 1.0f) && !(p.min_p > 0.0f)) m.mode = MODE_FULL;
    else m.mode = MODE_TOPK;
    return m;
}

// per (row, chunk), written by the chunk kernels
struct chunk_stat {
    uint32_t max_key; // the chunk's largest key
    int32_t  arg;     // its lowest index (absolute id)
    int32_t  n_cand;  // candidates written (MODE_TOPK)
    int32_t  bad;     // 1: the chunk holds a non-finite logit (the row draws nothing: id -1)
    double   sum;     // MODE_FULL: sum of expf((x - max) / T); top-p without top-k: expf(x - max)
};

// The chunk's penalty bitmap (bits of ids [c0, c0 + CH)) in shared memory; returns whether the
// row has a penalty. Ends with a barrier.
__device__ bool chunk_penalty(const lc_sample_row &p, const int32_t *pen, int32_t c0,
                              uint32_t *bits, int nthreads) {
    if (!(p.repeat_penalty != 1.0f && p.pen_n > 0)) return false;
    for (int i = threadIdx.x; i < CH / 32; i += nthreads) bits[i] = 0u;
    __syncthreads();
    for (int32_t j = threadIdx.x; j < p.pen_n; j += nthreads) {
        const int32_t t = pen[p.pen_off + j] - c0;
        if (t >= 0 && t < CH) atomicOr(&bits[t >> 5], 1u << (t & 31));
    }
    __syncthreads();
    return true;
}
// the penalised value of id c0 + i
__device__ __forceinline__ float pval(const float *x, int32_t c0, int32_t i, const uint32_t *bits,
                                      bool pen_on, float rp) {
    const float v = x[c0 + i];
    if (pen_on && ((bits[i >> 5] >> (i & 31)) & 1u)) return v > 0 ? v / rp : v * rp;
    return v;
}

// radix-select state (shared)
struct radix_sel {
    uint32_t prefix, mask;
    int32_t  kk;   // rank still to find below the fixed prefix
    int32_t  n_eq; // keys in the chosen bin (after the last pass: keys == threshold)
};
// Run by warp 0 after a histogram of the keys matching the prefix: fix the next digit.
__device__ void radix_pick(radix_sel &sel, const uint32_t *hist, int shift) {
    const int lane = threadIdx.x & 31;
    const int kk   = sel.kk;
    __syncwarp(); // every lane has read kk before one of them rewrites it
    uint32_t c[8], sum = 0;
    for (int j = 0; j < 8; j++) c[j] = hist[255 - (8 * lane + j)], sum += c[j];
    uint32_t incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    uint32_t above = incl - sum; // keys in the bins above this lane's
    if (above < (uint32_t)kk && incl >= (uint32_t)kk)
        for (int j = 0; j < 8; j++) {
            if (above + c[j] >= (uint32_t)kk) {
                const uint32_t d = 255 - (8 * lane + j);
                sel.prefix |= d << shift;
                sel.mask |= 255u << shift;
                sel.kk   = kk - (int)above;
                sel.n_eq = (int)c[j];
                break;
            }
            above += c[j];
        }
}
// add 1 to hist[digit of key] for the lanes with in (warp-aggregated)
__device__ __forceinline__ void hist_add(uint32_t *hist, bool in, uint32_t key, int shift) {
    const uint32_t act = __ballot_sync(0xffffffffu, in);
    if (in) {
        const uint32_t digit  = (key >> shift) & 255u;
        const uint32_t same   = __match_any_sync(act, digit);
        if ((int)(threadIdx.x & 31) == __ffs(same) - 1) atomicAdd(&hist[digit], (uint32_t)__popc(same));
    }
}

// exclusive scan of one int per thread over the block (thread order); tmp: [nwarps + 1]
__device__ int32_t block_excl_scan_i(int32_t v, int32_t *tmp, int32_t *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int32_t   incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    __syncthreads();
    if (lane == 31) tmp[warp] = incl;
    __syncthreads();
    int32_t base = 0, t = 0;
    for (int w = 0; w < nw; w++) {
        if (w < warp) base += tmp[w];
        t += tmp[w];
    }
    *total = t;
    return base + incl - v;
}

// ---- kernel 1: chunk maxima and candidates -------------------------------------------------

// grid (n_chunks, n_rows), block NT1
__global__ void __launch_bounds__(NT1)
    sample_chunk_kernel(const float *__restrict__ logits, int64_t ld, int32_t V, int32_t n_chunks,
                        const lc_sample_row *__restrict__ rows, const int32_t *__restrict__ pen,
                        chunk_stat *__restrict__ stats, uint2 *__restrict__ cands) {
    __shared__ uint32_t  keys[CH];
    __shared__ uint32_t  bits[CH / 32];
    __shared__ uint32_t  hist[256];
    __shared__ uint32_t  wk[NW1];
    __shared__ int32_t   wi[NW1 + 1];
    __shared__ radix_sel sel;
    const int           tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t       row = blockIdx.y, chunk = blockIdx.x, c0 = chunk * CH;
    const int32_t       n   = min(CH, V - c0);
    const lc_sample_row p   = rows[row];
    const row_mode      m   = mode_of(p, V);
    const float        *x   = logits + (int64_t)row * ld;
    const bool          pen_on = chunk_penalty(p, pen, c0, bits, NT1);
    chunk_stat         *st  = stats + (int64_t)row * n_chunks + chunk;

    uint32_t bk = 0;
    int32_t  bi = INT32_MAX;
    int      bad = 0;
    for (int32_t i = tid; i < n; i += NT1) {
        const uint32_t k = skey(pval(x, c0, i, bits, pen_on, p.repeat_penalty));
        keys[i]          = k;
        bad |= !isfinite(x[c0 + i]);
        if (bi == INT32_MAX || k > bk) bk = k, bi = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        const uint32_t ok = __shfl_xor_sync(0xffffffffu, bk, o);
        const int32_t  oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi != INT32_MAX && (bi == INT32_MAX || before(ok, oi, bk, bi))) bk = ok, bi = oi;
    }
    if (lane == 0) wk[warp] = bk, wi[warp] = bi;
    bad = __syncthreads_or(bad);
    if (tid == 0) {
        st->bad = bad;
        for (int w = 1; w < NW1; w++)
            if (wi[w] != INT32_MAX && (wi[0] == INT32_MAX || before(wk[w], wi[w], wk[0], wi[0])))
                wk[0] = wk[w], wi[0] = wi[w];
        st->max_key = wk[0];
        st->arg     = c0 + wi[0];
        st->n_cand  = 0;
        st->sum     = 0.0;
    }
    if (m.mode != MODE_TOPK) return;
    const int32_t K = m.K;
    uint2        *out = cands + ((int64_t)row * n_chunks + chunk) * CAP;
    if (n <= K) { // every id of the chunk is a candidate
        for (int32_t i = tid; i < n; i += NT1) out[i] = make_uint2(keys[i], (uint32_t)(c0 + i));
        if (tid == 0) st->n_cand = n;
        return;
    }
    // the K-th largest key T of the chunk
    if (tid == 0) sel.prefix = 0u, sel.mask = 0u, sel.kk = K, sel.n_eq = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += NT1) hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int32_t i0 = 0; i0 < n; i0 += NT1) {
            const int32_t  i = i0 + tid;
            const uint32_t k = i < n ? keys[i] : 0u;
            hist_add(hist, i < n && (k & mask) == prefix, k, shift);
        }
        __syncthreads();
        if (warp == 0) radix_pick(sel, hist, shift);
        __syncthreads();
    }
    const uint32_t T = sel.prefix;
    const int32_t  need = sel.kk;
    // the keys > T and the first `need` keys == T, in index order: thread t owns ids
    // [t EPT, t EPT + EPT)
    const int32_t a = tid * EPT, e = min(n, a + EPT);
    int32_t       n_eq = 0;
    for (int32_t i = a; i < e; i++) n_eq += keys[i] == T;
    int32_t       tot;
    const int32_t eq0 = block_excl_scan_i(n_eq, wi, &tot);
    int32_t       take = 0, r = eq0;
    for (int32_t i = a; i < e; i++) {
        const uint32_t k = keys[i];
        take += k > T || (k == T && r < need);
        r += k == T;
    }
    int32_t at = block_excl_scan_i(take, wi, &tot);
    r          = eq0;
    for (int32_t i = a; i < e; i++) {
        const uint32_t k = keys[i];
        if (k > T || (k == T && r < need)) out[at++] = make_uint2(k, (uint32_t)(c0 + i));
        r += k == T;
    }
    if (tid == 0) st->n_cand = K;
}

// ---- kernel 2: whole-vocabulary sums -------------------------------------------------------

// grid (n_chunks, n_rows), block NT1
__global__ void __launch_bounds__(NT1)
    sample_sum_kernel(const float *__restrict__ logits, int64_t ld, int32_t V, int32_t n_chunks,
                      const lc_sample_row *__restrict__ rows, const int32_t *__restrict__ pen,
                      chunk_stat *__restrict__ stats) {
    __shared__ uint32_t bits[CH / 32];
    __shared__ uint32_t wk[NW1];
    __shared__ double   wd[NW1];
    const int           tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t       row = blockIdx.y, chunk = blockIdx.x, c0 = chunk * CH;
    const int32_t       n   = min(CH, V - c0);
    const lc_sample_row p   = rows[row];
    const row_mode      m   = mode_of(p, V);
    const bool          full = m.mode == MODE_FULL;
    if (!full && !(m.mode == MODE_TOPK && !m.topk_on && p.top_p < 1.0f)) return;
    const chunk_stat *st = stats + (int64_t)row * n_chunks;
    uint32_t          mk = 0;
    for (int32_t c = tid; c < n_chunks; c += NT1) mk = max(mk, st[c].max_key);
    for (int o = 16; o > 0; o >>= 1) mk = max(mk, __shfl_xor_sync(0xffffffffu, mk, o));
    if (lane == 0) wk[warp] = mk;
    const bool pen_on = chunk_penalty(p, pen, c0, bits, NT1); // (barrier)
    __syncthreads();
    for (int w = 0; w < NW1; w++) mk = max(mk, wk[w]);
    const float  mx = key_val(mk);
    const float *x  = logits + (int64_t)row * ld;
    double       s  = 0.0;
    for (int32_t i = tid; i < n; i += NT1) {
        const float v = pval(x, c0, i, bits, pen_on, p.repeat_penalty);
        s += full ? (double)expf((v - mx) / p.temperature) : (double)expf(v - mx);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) wd[warp] = s;
    __syncthreads();
    if (tid == 0) {
        double t = 0.0;
        for (int w = 0; w < NW1; w++) t += wd[w];
        stats[(int64_t)row * n_chunks + chunk].sum = t;
    }
}

// ---- kernel 3: per row ---------------------------------------------------------------------

struct finish_smem {
    uint32_t  ckey[CAP];
    int32_t   cidx[CAP];
    uint32_t  hist[256];
    uint32_t  bits[CH / 32];
    double    dred[NW + 1];
    uint32_t  ured[NW];
    int32_t   ired[NW + 1];
    radix_sel sel;
    int32_t   pos_gt, pos_eq;
};

__device__ double block_sum(double v, finish_smem &s) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) s.dred[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < NW; w++) t += s.dred[w];
    return t;
}
__device__ int32_t block_min_i(int32_t v, finish_smem &s) {
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) s.ired[threadIdx.x >> 5] = v;
    __syncthreads();
    int32_t t = INT32_MAX;
    for (int w = 0; w < NW; w++) t = min(t, s.ired[w]);
    return t;
}
// inclusive scan of one double per thread (thread order); *total gets the block's sum
__device__ double block_incl_scan(double v, finish_smem &s, double *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        const double n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += n;
    }
    __syncthreads();
    if (lane == 31) s.dred[warp] = v;
    __syncthreads();
    double base = 0.0, t = 0.0;
    for (int w = 0; w < NW; w++) {
        if (w < warp) base += s.dred[w];
        t += s.dred[w];
    }
    *total = t;
    return base + v;
}
// warp-aggregated shared-memory increment: returns this lane's slot
__device__ __forceinline__ int32_t agg_add(int32_t *ctr, bool pred) {
    const uint32_t b = __ballot_sync(0xffffffffu, pred);
    const int      lane = threadIdx.x & 31;
    int32_t        base = 0;
    if (b) {
        const int leader = __ffs(b) - 1;
        if (lane == leader) base = atomicAdd(ctr, __popc(b));
        base = __shfl_sync(0xffffffffu, base, leader);
    }
    return base + __popc(b & ((1u << lane) - 1u));
}

// grid (n_rows), block NT
__global__ void __launch_bounds__(NT)
    sample_finish_kernel(const float *__restrict__ logits, int64_t ld, int32_t V, int32_t n_chunks,
                         const lc_sample_row *__restrict__ rows, const int32_t *__restrict__ pen,
                         const chunk_stat *__restrict__ stats, const uint2 *__restrict__ cands,
                         int32_t *__restrict__ ids) {
    __shared__ finish_smem s;
    const int           tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t       row = blockIdx.x;
    const lc_sample_row p   = rows[row];
    const row_mode      m   = mode_of(p, V);
    const chunk_stat   *st  = stats + (int64_t)row * n_chunks;

    // a non-finite logit anywhere in the row: no draw (one chunk flag per thread, one answer)
    int bad = 0;
    for (int32_t c = tid; c < n_chunks; c += NT) bad |= st[c].bad;
    if (__syncthreads_or(bad)) {
        if (tid == 0) ids[row] = -1;
        return;
    }
    if (m.mode == MODE_GREEDY) { // the best chunk winner (every thread, one order)
        if (tid == 0) {
            uint32_t k = st[0].max_key;
            int32_t  i = st[0].arg;
            for (int32_t c = 1; c < n_chunks; c++)
                if (before(st[c].max_key, st[c].arg, k, i)) k = st[c].max_key, i = st[c].arg;
            ids[row] = i;
        }
        return;
    }
    if (m.mode == MODE_FULL) { // inverse CDF in index order
        uint32_t mk    = 0;
        double   total = 0.0;
        for (int32_t c = 0; c < n_chunks; c++) mk = max(mk, st[c].max_key), total += st[c].sum;
        const float  mx = key_val(mk);
        const double u  = p.uniform * total;
        double       base = 0.0;
        int32_t      cf   = -1;
        for (int32_t c = 0; c < n_chunks && cf < 0; c++) {
            if (base + st[c].sum >= u && st[c].sum > 0.0) cf = c;
            else base += st[c].sum;
        }
        if (cf < 0) { // rounding: past the end
            if (tid == 0) ids[row] = V - 1;
            return;
        }
        const int32_t c0 = cf * CH, n = min(CH, V - c0);
        const bool    pen_on = chunk_penalty(p, pen, c0, s.bits, NT);
        const float  *x      = logits + (int64_t)row * ld;
        int32_t       found  = -1;
        for (int32_t t0 = 0; t0 < n && found < 0; t0 += NT) {
            const int32_t i = t0 + tid;
            const double  w = i < n ? (double)expf((pval(x, c0, i, s.bits, pen_on, p.repeat_penalty) - mx) /
                                                   p.temperature)
                                    : 0.0;
            double        tot;
            const double  incl = block_incl_scan(w, s, &tot);
            const int32_t hit  = block_min_i(i < n && base + incl >= u ? i : INT32_MAX, s);
            if (hit != INT32_MAX) found = hit;
            base += tot;
        }
        if (tid == 0) ids[row] = c0 + (found >= 0 ? found : n - 1);
        return;
    }

    // ---- the K best of the chunks' candidates ----
    const int32_t K       = m.K;
    const bool    topk_on = m.topk_on;
    const uint2  *cand    = cands + (int64_t)row * n_chunks * CAP;
    if (tid == 0) s.sel.prefix = 0u, s.sel.mask = 0u, s.sel.kk = K, s.sel.n_eq = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += NT) s.hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = s.sel.prefix, mask = s.sel.mask;
        for (int32_t c = 0; c < n_chunks; c++) {
            const int32_t cnt = st[c].n_cand;
            for (int32_t j0 = 0; j0 < cnt; j0 += NT) {
                const int32_t  j = j0 + tid;
                const uint32_t k = j < cnt ? cand[(int64_t)c * CAP + j].x : 0u;
                hist_add(s.hist, j < cnt && (k & mask) == prefix, k, shift);
            }
        }
        __syncthreads();
        if (warp == 0) radix_pick(s.sel, s.hist, shift);
        __syncthreads();
    }
    const uint32_t T     = s.sel.prefix;
    const int32_t  need  = s.sel.kk;
    const int32_t  n_gt  = K - need;
    const bool     order = s.sel.n_eq > need; // some keys == T are left out: lowest ids first
    if (tid == 0) s.pos_gt = 0, s.pos_eq = 0;
    __syncthreads();
    int32_t eq_base = 0; // keys == T seen so far (in id order: chunks in order, each in order)
    for (int32_t c = 0; c < n_chunks; c++) {
        const int32_t cnt = st[c].n_cand;
        for (int32_t j0 = 0; j0 < cnt; j0 += NT) {
            const int32_t j  = j0 + tid;
            const uint2   e  = j < cnt ? cand[(int64_t)c * CAP + j] : make_uint2(0u, 0u);
            const bool    gt = j < cnt && e.x > T, eq = j < cnt && e.x == T;
            const int32_t pg = agg_add(&s.pos_gt, gt);
            if (gt) s.ckey[pg] = e.x, s.cidx[pg] = (int32_t)e.y;
            if (order) {
                const uint32_t b = __ballot_sync(0xffffffffu, eq);
                __syncthreads();
                if (lane == 0) s.ired[warp] = __popc(b);
                __syncthreads();
                int32_t before_w = 0, tile = 0;
                for (int w = 0; w < NW; w++) {
                    if (w < warp) before_w += s.ired[w];
                    tile += s.ired[w];
                }
                const int32_t rank = eq_base + before_w + __popc(b & ((1u << lane) - 1u));
                if (eq && rank < need) s.ckey[n_gt + rank] = e.x, s.cidx[n_gt + rank] = (int32_t)e.y;
                eq_base += tile;
            } else {
                const int32_t pe = agg_add(&s.pos_eq, eq);
                if (eq && pe < need) s.ckey[n_gt + pe] = e.x, s.cidx[n_gt + pe] = (int32_t)e.y;
            }
        }
    }
    // bitonic sort of the K candidates (padded to a power of two): value desc, index asc
    int32_t P = 1;
    while (P < K) P <<= 1;
    for (int32_t i = K + tid; i < P; i += NT) s.ckey[i] = 0u, s.cidx[i] = INT32_MAX;
    __syncthreads();
    for (int32_t k = 2; k <= P; k <<= 1)
        for (int32_t j = k >> 1; j > 0; j >>= 1) {
            for (int32_t t = tid; t < P / 2; t += NT) {
                const int32_t  i = 2 * t - (t & (j - 1)), l = i + j;
                const uint32_t ka = s.ckey[i], kb = s.ckey[l];
                const int32_t  ia = s.cidx[i], ib = s.cidx[l];
                const bool     desc = (i & k) == 0;
                if (desc ? before(kb, ib, ka, ia) : before(ka, ia, kb, ib)) {
                    s.ckey[i] = kb, s.cidx[i] = ib;
                    s.ckey[l] = ka, s.cidx[l] = ia;
                }
            }
            __syncthreads();
        }

    // each thread holds candidates 2 tid and 2 tid + 1 (K <= 2 NT)
    const float mx = key_val(s.ckey[0]);
    float       v[2];
    bool        valid[2];
    for (int e = 0; e < 2; e++) {
        const int32_t j = 2 * tid + e;
        valid[e]        = j < K;
        v[e]            = valid[e] ? key_val(s.ckey[j]) : 0.0f;
    }
    int32_t n = K;
    if (p.top_p < 1.0f) {
        double z;
        if (topk_on) {
            double a = 0.0;
            for (int e = 0; e < 2; e++)
                if (valid[e]) a += exp((double)(v[e] - mx));
            z = block_sum(a, s);
        } else {
            double a = 0.0;
            for (int32_t c = 0; c < n_chunks; c++) a += st[c].sum; // every thread, one order
            z = a;
        }
        double pe[2], loc = 0.0;
        for (int e = 0; e < 2; e++) pe[e] = valid[e] ? exp((double)(v[e] - mx)) / z : 0.0, loc += pe[e];
        double       tot;
        const double incl = block_incl_scan(loc, s, &tot);
        const double c0 = incl - loc + pe[0], c1 = incl;
        int32_t      cut = INT32_MAX;
        if (valid[0] && c0 >= (double)p.top_p) cut = 2 * tid + 1;
        else if (valid[1] && c1 >= (double)p.top_p) cut = 2 * tid + 2;
        cut = block_min_i(cut, s);
        if (cut < n) n = cut;
    }
    if (p.min_p > 0.0f) {
        const double thresh = log((double)p.min_p);
        int          c      = 0;
        for (int e = 0; e < 2; e++) c += valid[e] && (2 * tid + e == 0 || (double)(v[e] - mx) >= thresh);
        // count of kept candidates (a prefix, the values being sorted)
        int32_t cnt = c;
        for (int o = 16; o > 0; o >>= 1) cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
        __syncthreads();
        if (lane == 0) s.ired[warp] = cnt;
        __syncthreads();
        int32_t total = 0;
        for (int w = 0; w < NW; w++) total += s.ired[w];
        if (total < 1) total = 1;
        if (total < n) n = total;
    }
    // the draw over the kept prefix [0, n)
    double we[2], loc = 0.0;
    for (int e = 0; e < 2; e++) {
        const int32_t j = 2 * tid + e;
        we[e]           = j < n ? exp((double)(v[e] - mx) / (double)p.temperature) : 0.0;
        loc += we[e];
    }
    double       total;
    const double incl = block_incl_scan(loc, s, &total);
    const double u    = p.uniform * total;
    const double c0 = incl - loc + we[0], c1 = incl;
    int32_t      hit = INT32_MAX;
    if (2 * tid < n && c0 >= u) hit = 2 * tid;
    else if (2 * tid + 1 < n && c1 >= u) hit = 2 * tid + 1;
    hit = block_min_i(hit, s);
    if (tid == 0) ids[row] = s.cidx[hit == INT32_MAX ? n - 1 : hit];
}

extern "C" size_t lc_cuda_sample_scratch_bytes(int32_t n_rows, int32_t n_vocab) {
    const size_t n_chunks = ((size_t)(n_vocab > 0 ? n_vocab : 1) + CH - 1) / CH;
    return (size_t)(n_rows > 0 ? n_rows : 1) * n_chunks * (sizeof(chunk_stat) + CAP * sizeof(uint2));
}

extern "C" int lc_cuda_sample(const float *logits, int64_t ld, int32_t n_rows, int32_t n_vocab,
                              const lc_sample_row *rows, const int32_t *pen_tokens, int32_t *ids,
                              void *scratch, size_t scratch_bytes) {
    if (n_rows <= 0) return LC_OK;
    if (n_vocab <= 0 || ld < n_vocab)
        return lc_fail(LC_ERR_INVALID_ARG, "sample: %d-token vocabulary in rows of %lld",
                       n_vocab, (long long)ld);
    if (scratch_bytes < lc_cuda_sample_scratch_bytes(n_rows, n_vocab))
        return lc_fail(LC_ERR_INVALID_ARG, "cuda sample: %zu bytes of scratch for %d rows of %d "
                       "(%zu needed)", scratch_bytes, n_rows, n_vocab,
                       lc_cuda_sample_scratch_bytes(n_rows, n_vocab));
    if (n_rows > 65535) return lc_fail(LC_ERR_INVALID_ARG, "cuda sample: %d rows (65535 at most)", n_rows);
    const int32_t n_chunks = (n_vocab + CH - 1) / CH;
    chunk_stat   *stats    = (chunk_stat *)scratch;
    uint2        *cands    = (uint2 *)(stats + (size_t)n_rows * n_chunks);
    const dim3    grid((unsigned)n_chunks, (unsigned)n_rows);
    sample_chunk_kernel<<<grid, NT1, 0, lc_cuda_stream()>>>(logits, ld, n_vocab, n_chunks, rows,
                                                           pen_tokens, stats, cands);
    LC_CUDA_LAUNCHED();
    sample_sum_kernel<<<grid, NT1, 0, lc_cuda_stream()>>>(logits, ld, n_vocab, n_chunks, rows,
                                                         pen_tokens, stats);
    LC_CUDA_LAUNCHED();
    sample_finish_kernel<<<(unsigned)n_rows, NT, 0, lc_cuda_stream()>>>(
        logits, ld, n_vocab, n_chunks, rows, pen_tokens, stats, cands, ids);
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
