/*
 * cpu_select_blocks.c — HiP hierarchical top-k mask estimation, the CPU reference of op select_blocks
 * (contract: backend.h, "HiP hierarchical top-k mask estimation"). For every query block and
 * head group: cut the candidates [n_sink, win0) into key blocks of block_k tokens, start from
 * n_nodes = k / block_k equal nodes, and until every node is one block split each node into two
 * branches, score each branch by its middle block (max over the group's heads, the sampled
 * query rows and the sampled keys of that block of q·k, both rotated by scan_rope), and keep
 * the n_nodes best branches (equal scores: the lower start first). The final blocks are written
 * one segment each, sorted by start.
 * Paper: HiP (seeds/004_b4c89dd3429c70a1.txt) §3.1–3.2, Alg. 1; digest
 * spec/infinitehip-and-hip.md §1.2–1.5.
 *
 * Layouts: q_raw [n_rows][n_head][head_dim] (un-rotated); pages [page][kv_head][P][head_dim]
 * fp32, keys before RoPE. Work: the (block, group) pairs are independent; OpenMP threads take
 * whole pairs.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_select.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HM_MAX_D 1024 /* stack buffer of one rotated key */

typedef struct hm_branch {
    int32_t  f, l; /* blocks [f, l) */
    uint32_t key;  /* lc_cpu_score_key of the branch's score */
} hm_branch;

/* descending score, then ascending start */
static int cmp_branch(const void *x, const void *y) {
    const hm_branch *p = x, *q = y;
    if (p->key != q->key) return p->key > q->key ? -1 : 1;
    return (p->f > q->f) - (p->f < q->f);
}

static int cmp_start(const void *x, const void *y) {
    const hm_branch *p = x, *q = y;
    return (p->f > q->f) - (p->f < q->f);
}

typedef struct hm_job {
    const lc_kv_layer_view *kv;
    const lc_rope_table    *rope;
    const lc_select_blocks_args *a;
    const int32_t          *pt;  /* the block's page table */
    const float            *qr;  /* rotated sampled queries of the group: [gh][i][D] */
    int32_t                 h0, nh, nsr, G, win0;
} hm_job;

/* Score of key block r: max over the group's heads, sampled rows and sampled keys of q·k. */
static float score_block(const hm_job *j, int32_t r, float *kr) {
    const lc_select_blocks_args *a = j->a;
    const int32_t           D = j->kv->head_dim, P = j->kv->page_size, H = j->kv->n_kv_head;
    const int32_t           b0 = a->n_sink + r * a->block_k;
    const int32_t           b1 = b0 + a->block_k < j->win0 ? b0 + a->block_k : j->win0;
    float                   best = -INFINITY;
    for (int32_t kvh = j->h0 / j->G; kvh <= (j->h0 + j->nh - 1) / j->G; kvh++)
        for (int32_t t = b0; t < b1; t += a->k_stride) {
            const float *k = (const float *)j->kv->k +
                             (((int64_t)j->pt[t / P] * H + kvh) * P + t % P) * D;
            lc_cpu_rope_copy(k, kr, D, a->scan_rope == LC_SCAN_PLAIN ? t : 0, j->rope);
            for (int32_t h = kvh * j->G; h < (kvh + 1) * j->G; h++) {
                if (h < j->h0 || h >= j->h0 + j->nh) continue;
                for (int32_t i = 0; i < j->nsr; i++) {
                    const float *q = j->qr + ((int64_t)(h - j->h0) * j->nsr + i) * D;
                    float        s = 0.0f;
                    for (int32_t d = 0; d < D; d++) s += q[d] * kr[d];
                    if (s > best) best = s;
                }
            }
        }
    return best;
}

/* The selection of one (block, group) pair; nodes / br: n_nodes and 2 * n_nodes entries. */
static void mask_pair(const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                      const lc_qblock *qb, const float *q_raw, int32_t n_head,
                      const lc_rope_table *rope, const lc_select_blocks_args *a, int32_t bg,
                      hm_branch *nodes, hm_branch *br, float *qr) {
    const int32_t        b = bg / a->n_groups, g = bg % a->n_groups;
    if (a->from && a->from[b] > 0) return; /* not refreshed: its cached mask stands */
    const lc_qblock *q = &qb[b];
    const int32_t        D = kv->head_dim, G = n_head / kv->n_kv_head;
    /* its lists: at list[b] in batched decode (backend.h) */
    const int64_t        lbg = (int64_t)(a->list ? a->list[b] : b) * a->n_groups + g;
    lc_segment          *out = a->out + lbg * a->out_cap;
    const int32_t        n_nodes = a->k / a->block_k;
    const int64_t        cand = (int64_t)q->win0 - a->n_sink;
    if (cand <= 0) {
        a->out_n[lbg] = 0;
        return;
    }
    const int64_t NB = (cand + a->block_k - 1) / a->block_k;
    if (NB <= n_nodes) {
        out[0]       = (lc_segment){a->n_sink, (int32_t)cand};
        a->out_n[lbg] = 1;
        return;
    }
    hm_job j;
    j.kv = kv, j.rope = rope, j.a = a, j.pt = seqs[q->seq].page_table, j.qr = qr, j.G = G;
    j.h0 = a->n_groups == 1 ? 0 : g * G, j.nh = a->n_groups == 1 ? n_head : G;
    j.nsr  = (q->n_rows + a->q_stride - 1) / a->q_stride;
    j.win0 = q->win0;
    /* the sampled rows, rotated */
    for (int32_t h = 0; h < j.nh; h++)
        for (int32_t i = 0; i < j.nsr; i++) {
            const int32_t r   = i * a->q_stride;
            const int32_t pos = a->scan_rope == LC_SCAN_PLAIN ? q->pos0 + r : a->n_stream + 1;
            lc_cpu_rope_copy(q_raw + ((int64_t)(q->row0 + r) * n_head + j.h0 + h) * D,
                             qr + ((int64_t)h * j.nsr + i) * D, D, pos, rope);
        }
    float kr[HM_MAX_D];
    for (int32_t n = 0; n < n_nodes; n++)
        nodes[n] = (hm_branch){(int32_t)(n * NB / n_nodes), (int32_t)((n + 1) * NB / n_nodes), 0};
    for (;;) {
        int32_t nb = 0, multi = 0;
        for (int32_t n = 0; n < n_nodes; n++) {
            const int32_t f = nodes[n].f, l = nodes[n].l;
            if (l - f >= 2) {
                const int32_t m = f + (l - f) / 2;
                br[nb++] = (hm_branch){f, m, 0};
                br[nb++] = (hm_branch){m, l, 0};
                multi    = 1;
            } else {
                br[nb++] = (hm_branch){f, l, 0};
            }
        }
        if (!multi) break;
        for (int32_t i = 0; i < nb; i++)
            br[i].key = lc_cpu_score_key(score_block(&j, br[i].f + (br[i].l - br[i].f - 1) / 2, kr));
        qsort(br, (size_t)nb, sizeof(hm_branch), cmp_branch);
        memcpy(nodes, br, sizeof(hm_branch) * (size_t)n_nodes);
    }
    qsort(nodes, (size_t)n_nodes, sizeof(hm_branch), cmp_start);
    for (int32_t n = 0; n < n_nodes; n++) {
        const int32_t start = a->n_sink + nodes[n].f * a->block_k;
        out[n] = (lc_segment){start, q->win0 - start < a->block_k ? q->win0 - start : a->block_k};
    }
    a->out_n[lbg] = n_nodes;
}

int lc_cpu_select_blocks(const lc_kv_layer_view *kv, const lc_attn_seq *seqs, int32_t n_seqs,
                    const lc_qblock *qb, int32_t n_qb, const float *q_raw, int32_t n_head,
                    const lc_rope_table *rope, const lc_select_blocks_args *a) {
    int st = lc_select_blocks_check(kv, seqs, qb, n_qb, q_raw, n_head, rope, a);
    if (st == LC_OK) st = lc_cpu_check_head_dim("select_blocks", kv->head_dim, HM_MAX_D);
    if (st == LC_OK) /* the mask scores at the true positions with scan_rope plain */
        st = lc_cpu_check_blocks("select_blocks", seqs, n_seqs, qb, n_qb, a->max_rows, a->n_sink,
                                 a->max_cand, a->scan_rope == LC_SCAN_PLAIN ? rope : NULL);
    if (st != LC_OK || n_qb == 0) return st;
    const int32_t n_pairs = n_qb * a->n_groups, n_nodes = a->k / a->block_k;
    const int32_t nh      = a->n_groups == 1 ? n_head : n_head / kv->n_kv_head;
    const int32_t nsr     = (a->max_rows + a->q_stride - 1) / a->q_stride;
    int           fail    = 0;
#pragma omp parallel
    {
        hm_branch *nodes = lc_malloc(sizeof(hm_branch) * (size_t)n_nodes, "select_blocks nodes");
        hm_branch *br    = lc_malloc(sizeof(hm_branch) * 2 * (size_t)n_nodes, "select_blocks branches");
        float     *qr    = lc_malloc(sizeof(float) * (size_t)nh * nsr * kv->head_dim,
                                     "select_blocks queries");
        if (!nodes || !br || !qr) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int32_t bg = 0; bg < n_pairs; bg++)
            if (nodes && br && qr) mask_pair(kv, seqs, qb, q_raw, n_head, rope, a, bg, nodes, br, qr);
        free(nodes), free(br), free(qr);
    }
    return fail ? LC_ERR_NOMEM : LC_OK;
}
