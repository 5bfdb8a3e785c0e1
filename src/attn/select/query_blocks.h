/*
 * query_blocks.h — what the selecting sparse methods (HiP, attn/hip/; TokenSelect,
 * attn/tokenselect/; InfiniteHiP's block cut) share around their selection op: cutting a batch
 * into query blocks (prefill blocks first, then one block per decode sequence), the workspace of the prefill
 * selections, and the copy of the last prefill selections for evaluation (lc_hip_last).
 */
#ifndef LC_ATTN_QUERY_BLOCKS_H
#define LC_ATTN_QUERY_BLOCKS_H

#include "attn/attn.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct sel_ws {
    lc_backend    *b;
    int32_t        n_groups; /* selections per block */
    int32_t        sel_cap;  /* segments per (block, group) list */
    int32_t        n_sink;   /* for lc_hip_last */
    lc_hip_qblock *h_qb, *d_qb;
    int32_t        qb_cap;
    lc_hip_seg    *d_sel;    /* [qb_cap][n_groups][sel_cap] prefill selections */
    int32_t       *d_n;      /* [qb_cap][n_groups] */
    bool           last_sparse;
    int32_t        last_n_pre;
} sel_ws;

/* The sink + streaming-window rule of InfiniteHiP and HiP (backend.h): the first window key of a
 * block whose first row is at pos0. */
static inline int32_t sel_win0_stream(int32_t n_sink, int32_t n_stream, int32_t pos0) {
    const int32_t a = n_sink < pos0 + 1 ? n_sink : pos0 + 1;
    const int32_t w = pos0 + 1 - n_stream;
    return a > w ? a : w;
}

/* win0 of a block of n_rows rows from pos0 (the method's sink / window rule) */
typedef int32_t (*sel_win0_fn)(const void *params, int32_t pos0, int32_t n_rows);

/* The rows of the query block that starts at position pos of a prefill slice ending at end
 * (exclusive). Blocks end at multiples of block_rows in position, so they do not depend on how
 * the scheduler cut the prompt into forwards. With tail_block > 0 and a known prompt end
 * (prompt_end > 0), the prompt's last block_rows rows [prompt_end - block_rows, prompt_end)
 * are cut instead into blocks of tail_block rows counted from their start: the question at
 * the end of a long prompt gets selections of its own, not ones shared with (and outvoted by)
 * the text before it (issue 21 part 4: the question's block never selected the answer). */
int32_t sel_block_len(int32_t pos, int32_t end, int32_t block_rows, int32_t prompt_end,
                      int32_t tail_block);

/* How many blocks sel_cut_blocks makes of the batch. */
int32_t sel_count_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                         int32_t tail_block);
/* Cut the batch into qbs (room for sel_count_blocks): prefill sequences as sel_block_len cuts
 * them, then one block per decode sequence; *n_pre = prefill blocks. Returns the block count. */
int32_t sel_cut_blocks(const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                       int32_t tail_block, sel_win0_fn win0, const void *params,
                       lc_hip_qblock *qbs, int32_t *n_pre);
/* The two into w->h_qb, growing the workspace; a negative status if it cannot grow. */
int32_t sel_blocks(sel_ws *w, const lc_attn_seq *seqs, int32_t n_seqs, int32_t block_rows,
                   int32_t tail_block,
                   sel_win0_fn win0, const void *params, int32_t *n_pre);
void    sel_ws_release(sel_ws *w);
/* the last forward's prefill selections (lc_attn_method.last) */
int     sel_ws_last(const sel_ws *w, lc_hip_last *out);
/* upload the blocks (asynchronously when the backend can) */
int     sel_upload_blocks(sel_ws *w, int32_t n_qb);

#endif
