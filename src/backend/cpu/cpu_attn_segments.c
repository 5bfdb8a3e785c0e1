/*
 * cpu_attn_segments.c — InfiniteHiP block-sparse attention, the CPU reference (op attn_segments;
 * contract in backend/backend.h "Sparse attention"; digest spec/infinitehip-and-hip.md §3–4,
 * the "BSA" step: sink + selected chunks + sliding window, StreamingLLM re-indexing §4.2).
 *
 * Each query block b and KV head h is one unit of work. Its attended keys are one list, the
 * same for every row of the block: sink [0, n_s), the selected segments of (b, group(h)) in
 * position order, then the window [win0, last row's position]; a row at position p sees the
 * window keys up to p (causal) and all the others. Keys are rotated at the list's positions
 * (PLAIN: true positions; STREAMING: the list index shifted so that the last window key keeps
 * its true position; GAPS: as STREAMING with the gaps compressed, lc_gap_pos), 64 at a time,
 * with the FlashAttention online softmax in fp32.
 *
 * Layouts: q, out: [n_rows][n_head][head_dim]; pages: [page][kv_head][page_size][head_dim].
 * The arguments are checked against the contract (sorted, disjoint segments inside the
 * candidate range, the launch bounds max_rows / max_sel / max_window): a violation is
 * LC_ERR_INVALID_ARG here, so that callers are caught on the reference backend.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_select.h"
#include "util/util.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SP_TILE 64 /* keys per tile */

/* The attended key list of one (block, group): tok[i], pos[i] (rope position) for i < n;
 * n_pre = sink + selected keys (always visible), the rest are window keys. */
typedef struct sp_list {
    int32_t *tok, *pos;
    int32_t  n, n_pre;
} sp_list;

static const lc_segment *sel_list(const lc_attn_segments_args *a, int32_t b, int32_t g,
                                  int32_t *n) {
    const int64_t l = (int64_t)(a->list ? a->list[b] : b) * a->n_groups + g; /* backend.h */
    *n = a->sel_n[l];
    return a->sel + l * a->sel_cap;
}

static void build_list(const lc_qblock *B, const lc_attn_segments_args *a, int32_t b, int32_t g,
                       sp_list *L) {
    int32_t           ns;
    const lc_segment *s     = sel_list(a, b, g, &ns);
    const int32_t     n_s   = a->n_sink < B->win0 ? a->n_sink : B->win0;
    const int32_t     last  = B->pos0 + B->n_rows - 1;
    int32_t           n_sel = 0;
    for (int32_t i = 0; i < ns; i++) n_sel += s[i].len;
    const bool    moved = a->attn_rope != LC_ATTN_ROPE_PLAIN; /* STREAMING or GAPS */
    const int32_t base  = B->win0 - n_sel - n_s; /* STREAMING: position of list index 0 */
    const int32_t keep  = a->attn_rope == LC_ATTN_ROPE_GAPS
                              ? lc_gap_keep(a->gap_span, n_s + n_sel, last - B->win0 + 1, base)
                              : 0;
    int32_t       n     = 0;
    for (int32_t j = 0; j < n_s; j++, n++)
        L->tok[n] = j, L->pos[n] = moved ? lc_gap_pos(base, keep, n, j) : j;
    for (int32_t i = 0; i < ns; i++)
        for (int32_t t = s[i].start; t < s[i].start + s[i].len; t++, n++)
            L->tok[n] = t, L->pos[n] = moved ? lc_gap_pos(base, keep, n, t) : t;
    L->n_pre = n;
    for (int32_t t = B->win0; t <= last; t++, n++) L->tok[n] = t, L->pos[n] = t;
    L->n = n;
}

static int check_args(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                      const lc_qblock *qb, int32_t n_qb, int32_t n_head,
                      const lc_rope_table *rope, const lc_attn_segments_args *a) {
    int st = lc_attn_segments_check(kv, n_head, a);
    if (st != LC_OK) return st;
    if ((st = lc_cpu_check_head_dim("attn_segments", kv->head_dim, 512)) != LC_OK) return st;
    for (int32_t b = 0; b < n_qb; b++) {
        if ((st = lc_cpu_check_block_seq("attn_segments", qb, b, n_seqs)) != LC_OK) return st;
        const lc_qblock *B  = &qb[b];
        const lc_attn_seq   *sq = &seqs[B->seq];
        if (B->n_rows < 1 || B->n_rows > a->max_rows || B->row0 < sq->row0 ||
            B->row0 + B->n_rows > sq->row0 + sq->n_rows ||
            B->pos0 != sq->pos0 + (B->row0 - sq->row0))
            return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d (rows %d+%d at position %d) "
                           "is not inside sequence %d (rows %d+%d at %d) or has more than "
                           "max_rows %d rows", b, B->row0, B->n_rows, B->pos0, B->seq, sq->row0,
                           sq->n_rows, sq->pos0, a->max_rows);
        const int32_t last = B->pos0 + B->n_rows - 1;
        if (B->win0 < 0 || B->win0 > B->pos0 + 1 || last - B->win0 + 1 > a->max_window)
            return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d: win0 %d outside [0, %d] "
                           "or a window of %d keys over max_window %d", b, B->win0, B->pos0 + 1,
                           last - B->win0 + 1, a->max_window);
        if (last >= rope->n_pos)
            return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d: position %d outside the "
                           "rope table (%d rows)", b, last, rope->n_pos);
        for (int32_t g = 0; g < a->n_groups; g++) {
            int32_t           ns;
            const lc_segment *s = sel_list(a, b, g, &ns);
            if (ns < 0 || ns > a->sel_cap)
                return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d group %d: %d segments "
                               "(capacity %d)", b, g, ns, a->sel_cap);
            int64_t n_sel = 0;
            int32_t prev  = a->n_sink; /* candidates: [n_sink, win0) */
            for (int32_t i = 0; i < ns; i++) {
                if (s[i].len < 0 || s[i].start < prev || (int64_t)s[i].start + s[i].len > B->win0)
                    return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d group %d segment "
                                   "%d [%d, +%d): not sorted, disjoint and inside the candidates "
                                   "[%d, %d)", b, g, i, s[i].start, s[i].len, a->n_sink, B->win0);
                prev = s[i].start + s[i].len;
                n_sel += s[i].len;
            }
            if (n_sel > a->max_sel)
                return lc_fail(LC_ERR_INVALID_ARG, "attn_segments: block %d group %d: %lld selected "
                               "tokens over max_sel %d", b, g, (long long)n_sel, a->max_sel);
        }
    }
    return LC_OK;
}

typedef struct sp_scratch {
    float   *qm, *kr, *vt, *s, *m, *l, *o;
    int32_t *tok, *pos;
} sp_scratch;

/* C[M][N] (ldc) = A[M][K] · B[N][K]ᵀ */
static void gemm_nt(int M, int N, int K, const float *A, const float *B, float *C, int ldc) {
    if (M >= 8) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C,
                    ldc);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += A[i * K + k] * B[j * K + k];
            C[i * ldc + j] = acc;
        }
}

/* One (block, KV head): all rows of the block, the G query heads of h. */
static void run_unit(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, const lc_qblock *B,
                     const lc_attn_segments_args *a, int32_t b, int32_t h, const float *q,
                     int32_t n_head, const lc_rope_table *rope, float scale, float *out,
                     sp_scratch *w) {
    const int32_t P = kv->page_size, H = kv->n_kv_head, D = kv->head_dim, G = n_head / H;
    const int32_t M = B->n_rows * G;
    const int32_t g = a->n_groups == 1 ? 0 : h;
    const int32_t *pages = seqs[B->seq].page_table;
    sp_list        L = {w->tok, w->pos, 0, 0};
    build_list(B, a, b, g, &L);

    /* queries: row r*G + hh = block row r, head h*G + hh; pre-scaled */
    for (int32_t r = 0; r < B->n_rows; r++)
        for (int32_t hh = 0; hh < G; hh++) {
            const float *src = q + ((int64_t)(B->row0 + r) * n_head + h * G + hh) * D;
            float       *dst = w->qm + (int64_t)(r * G + hh) * D;
            for (int32_t d = 0; d < D; d++) dst[d] = src[d] * scale;
        }
    for (int32_t i = 0; i < M; i++) w->m[i] = -INFINITY, w->l[i] = 0.0f;
    memset(w->o, 0, sizeof(float) * (size_t)M * (size_t)D);

    for (int32_t t0 = 0; t0 < L.n; t0 += SP_TILE) {
        const int32_t nt = L.n - t0 < SP_TILE ? L.n - t0 : SP_TILE;
        for (int32_t j = 0; j < nt; j++) {
            const int32_t tok  = L.tok[t0 + j];
            int64_t       slab = (int64_t)pages[tok / P] * H + h;
            if (kv->slab_map) slab = kv->slab_map[slab]; /* a cached copy (slab_bank.h) */
            const int64_t off = (slab * P + tok % P) * D;
            lc_cpu_rope_copy((const float *)kv->k + off, w->kr + (int64_t)j * D, D, L.pos[t0 + j],
                             rope);
            memcpy(w->vt + (int64_t)j * D, (const float *)kv->v + off, sizeof(float) * (size_t)D);
        }
        gemm_nt(M, nt, D, w->qm, w->kr, w->s, SP_TILE);
        for (int32_t row = 0; row < M; row++) {
            const int32_t p  = B->pos0 + row / G;
            float        *sr = w->s + (int64_t)row * SP_TILE;
            float         mx = -INFINITY;
            for (int32_t j = 0; j < nt; j++) {
                const int32_t i = t0 + j;
                if (i >= L.n_pre && L.tok[i] > p) sr[j] = -INFINITY; /* causal: window only */
                mx = sr[j] > mx ? sr[j] : mx;
            }
            const float m_new = w->m[row] > mx ? w->m[row] : mx;
            if (m_new == -INFINITY) { /* nothing visible yet */
                for (int32_t j = 0; j < nt; j++) sr[j] = 0.0f;
                continue;
            }
            const float corr = expf(w->m[row] - m_new); /* 0 when m was -inf */
            float       sum  = 0.0f;
            for (int32_t j = 0; j < nt; j++) {
                sr[j] = sr[j] == -INFINITY ? 0.0f : expf(sr[j] - m_new);
                sum += sr[j];
            }
            float *o = w->o + (int64_t)row * D;
            if (corr != 1.0f)
                for (int32_t d = 0; d < D; d++) o[d] *= corr;
            w->l[row] = w->l[row] * corr + sum;
            w->m[row] = m_new;
        }
        lc_cpu_gemm_nn_acc(M, D, nt, w->s, SP_TILE, w->vt, D, w->o, D);
    }
    for (int32_t r = 0; r < B->n_rows; r++)
        for (int32_t hh = 0; hh < G; hh++) {
            const int32_t row = r * G + hh;
            const float   inv = w->l[row] > 0.0f ? 1.0f / w->l[row] : 0.0f;
            const float  *o   = w->o + (int64_t)row * D;
            float        *dst = out + ((int64_t)(B->row0 + r) * n_head + h * G + hh) * D;
            for (int32_t d = 0; d < D; d++) dst[d] = o[d] * inv;
        }
}

int lc_cpu_attn_segments(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                       const lc_qblock *qb, int32_t n_qb, const float *q, int32_t n_head,
                       const lc_rope_table *rope, float scale, const lc_attn_segments_args *a,
                       float *out) {
    if (n_qb <= 0) return LC_OK;
    int st = check_args(kv, seqs, n_seqs, qb, n_qb, n_head, rope, a);
    if (st != LC_OK) return st;
    const int32_t H = kv->n_kv_head, D = kv->head_dim, G = n_head / H;
    const int64_t M = (int64_t)a->max_rows * G;
    const int64_t list_cap = (int64_t)a->n_sink + a->max_sel + a->max_window + 1;
    const int64_t n_units  = (int64_t)n_qb * H;
    int           failed   = 0;
#pragma omp parallel
    {
        sp_scratch w;
        w.qm  = malloc(sizeof(float) * (size_t)(M * D));
        w.kr  = malloc(sizeof(float) * (size_t)SP_TILE * (size_t)D);
        w.vt  = malloc(sizeof(float) * (size_t)SP_TILE * (size_t)D);
        w.s   = malloc(sizeof(float) * (size_t)(M * SP_TILE));
        w.m   = malloc(sizeof(float) * (size_t)M);
        w.l   = malloc(sizeof(float) * (size_t)M);
        w.o   = malloc(sizeof(float) * (size_t)(M * D));
        w.tok = malloc(sizeof(int32_t) * (size_t)list_cap);
        w.pos = malloc(sizeof(int32_t) * (size_t)list_cap);
        if (!w.qm || !w.kr || !w.vt || !w.s || !w.m || !w.l || !w.o || !w.tok || !w.pos) {
#pragma omp atomic write
            failed = 1;
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t u = 0; u < n_units; u++) {
                const int32_t b = (int32_t)(u / H), h = (int32_t)(u % H);
                run_unit(kv, seqs, &qb[b], a, b, h, q, n_head, rope, scale, out, &w);
            }
        }
        free(w.qm), free(w.kr), free(w.vt), free(w.s), free(w.m), free(w.l), free(w.o);
        free(w.tok), free(w.pos);
    }
    return failed ? lc_fail(LC_ERR_NOMEM, "attn_segments: out of memory for worker scratch")
                  : LC_OK;
}
