/*
 * diag_qwen_precision.c — a diagnostic, not a ctest test (the tests glob is test_*.c; this is
 * built only with -DLC_DIAG=ON): which reduced-precision step of the CUDA path costs
 * Qwen2.5-Coder-1.5B-Instruct (qwen2, Q4_K_M) its ~0.1 max |d log-prob| against the
 * transformers fp32 reference (test_qwen_logits_cuda.c), emulated on the CPU backend.
 *
 * The model is loaded on the CPU backend (f16 weights by default: the GPU's weights), then the
 * backend's op table is wrapped so that each op rounds what its CUDA twin keeps in 16 (or 8)
 * bits, one step at a time or combined (a "config"):
 *   kv_write   K and/or V rounded when written to the KV pool (CUDA: bf16, pre-RoPE keys with the
 *              q/k/v biases already added); optionally K - b_k rounded and b_k added back in
 *              fp32 ("centred": the bias is the same for every token); fp8 e4m3/e5m2 or int8
 *              with a scale per (token, KV head) or per channel;
 *   matmul     the input rows rounded to f16 (or bf16) when a product has more than 4 rows
 *              (CUDA: cuBLASLt on 16-bit inputs; 1-4 rows run the GEMV on the fp32 input);
 *   attention  an emulation of the CUDA prefill kernel: the rotated queries, the keys rotated
 *              from the pool and V as fp16 MMA operands, P = exp2(s - running max) rounded to
 *              fp16 for P V while the row sum adds the fp32 P, online softmax over 64-key tiles;
 *   add        (not what the GPU does: its residual stream is fp32) the residual rounded to f16.
 * For each config (--list) and prompt of tests/fixtures/logits/qwen/transformers.txt (evaluated
 * in one chunk, as the CUDA test's first check) it prints max |d log-prob| over the reference's
 * top 20, and against the unmodified run ("base", always run first) over that run's top 20, then
 * a Markdown table. With --stats the attention is always the emulation above (fp32 where the
 * config rounds nothing) and the program also prints the three layers of largest score error
 * |s - s_exact| (scaled scores q.k/sqrt(d) against fp32 queries and the exact keys) per config,
 * and, for base, per layer: max |K| after the bias (pre-RoPE, as stored; and its channel
 * h * head_dim + d), max |K - b_k|, max |b_k|, max |V|, max |q| (rotated), the largest scaled
 * score, the residual's max |x| after the attention and the FFN block, and the largest GEMM
 * input of each kind (qkv, wo, gate/up, down). Maxima are over the prompts run.
 *
 * Build (CPU-only is enough):
 *   cmake -S . -B build-diag -DLC_CUDA=OFF -DLC_DIAG=ON && cmake --build build-diag
 *       --target diag_qwen_precision
 * Run: build-diag/tests/diag_qwen_precision [--weights f16|f32|bf16] [--prompts a,b]
 *       [--configs a,b] [--stats] [--list]
 * --weights bf16 loads f32 and rounds every matrix to bf16 (the CUDA backend's bf16 mode; GEMM
 * inputs then round to bf16 too). Memory: ~3.5 GB (f16 weights) or ~7 GB (f32, bf16). Time on a
 * 2-core VM: load 16 s (f16) / 27 s (bf16); per config ~6 s for the code prompt alone, 50-140 s
 * over the four prompts with --stats. Findings: bench/NOTES.md, section 35.
 */
#define MAX_TOP     64
#define MAX_GREEDY  64
#define MAX_PREFIX  32
#define MAX_PROMPTS 16
#define TOL_LOGPROB 4e-2
#define N_CTX       1024

/* the shared test helpers this program does not all use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "qwen_model.h"

#include "backend/cpu/cpu.h"
#include "model/model.h"

#include <stddef.h>
#include <time.h>

/* ---- number formats ------------------------------------------------------------------------ */

typedef enum {
    R_NONE = 0,
    R_BF16,     /* 8 significant bits */
    R_F16,      /* 11 significant bits, max 65504 */
    R_E4M3_TOK, /* fp8 e4m3 (4 bits, max 448), scale = amax / 448 per (token, KV head) */
    R_E4M3_CH,  /* fp8 e4m3, scale per (KV head, channel) over the prompt (a best-case static
                   scale) */
    R_E5M2_TOK, /* fp8 e5m2 (3 bits, max 57344), scale per (token, KV head) */
    R_I8_TOK,   /* int8, symmetric, scale = amax / 127 per (token, KV head) */
    R_I8_CH,    /* int8, symmetric, scale per (KV head, channel) over the prompt */
} rfmt;

static const char *fmt_name(int f) {
    static const char *n[] = {"f32",     "bf16",     "f16",    "e4m3/tok",
                              "e4m3/ch", "e5m2/tok", "i8/tok", "i8/ch"};
    return n[f];
}

static long long g_overflow; /* values past a format's largest finite value (saturated here) */

/* x rounded to nearest even with `mant` stored mantissa bits, exponents >= emin (below:
 * subnormal spacing), saturated at maxv (counted: real conversions would give inf or NaN). */
static float round_fmt(float x, int mant, int emin, float maxv) {
    if (x == 0.0f || !isfinite(x)) return x;
    int e;
    frexpf(x, &e);
    e -= 1; /* |x| in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    const float quantum = ldexpf(1.0f, e - mant);
    float r = rintf(x / quantum) * quantum;
    if (fabsf(r) > maxv) {
        g_overflow++;
        r = r > 0 ? maxv : -maxv;
    }
    return r;
}
static float to_bf16(float x) {
    return round_fmt(x, 7, -126, 3.3895314e38f);
}
static float to_f16(float x) {
    return round_fmt(x, 10, -14, 65504.0f);
}
static float to_e4m3(float x) {
    return round_fmt(x, 3, -6, 448.0f);
}
static float to_e5m2(float x) {
    return round_fmt(x, 2, -14, 57344.0f);
}

static float round_elem(int f, float x) {
    switch (f) {
    case R_BF16:
        return to_bf16(x);
    case R_F16:
        return to_f16(x);
    default:
        return x;
    }
}

/* ---- configurations ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int k_fmt, v_fmt; /* KV pool */
    bool k_centre;    /* K - b_k is what is rounded; b_k added back in fp32 */
    bool gemm_in;     /* matmul inputs of > 4 rows in the weights' 16-bit type */
    bool attn16;      /* the CUDA prefill kernel's fp16 q, rotated K, V and P */
    bool resid16;     /* residual stream rounded to f16 (not the GPU) */
    const char *help;
} cfg_t;

static const cfg_t k_cfgs[] = {
    {"base", 0, 0, false, false, false, false, "the CPU backend as is"},
    {"kv_bf16", R_BF16, R_BF16, false, false, false, false, "K and V stored in bf16 (CUDA's pool)"},
    {"k_bf16", R_BF16, 0, false, false, false, false, "K only in bf16"},
    {"v_bf16", 0, R_BF16, false, false, false, false, "V only in bf16"},
    {"kv_f16", R_F16, R_F16, false, false, false, false, "K and V stored in f16"},
    {"kc_bf16", R_BF16, R_BF16, true, false, false, false, "bf16 KV, K stored minus b_k"},
    {"gemm_in", 0, 0, false, true, false, false, "GEMM inputs (> 4 rows) in 16 bits"},
    {"attn16", 0, 0, false, false, true, false, "the attention kernel's fp16 q, K, V, P"},
    {"resid16", 0, 0, false, false, false, true, "residual stream in f16 (not the GPU)"},
    {"gpu", R_BF16, R_BF16, false, true, true, false,
     "all of the GPU's: bf16 KV + gemm_in + attn16"},
    {"gpu_kv_f16", R_F16, R_F16, false, true, true, false, "the GPU with an f16 KV pool"},
    {"gpu_kc_bf16", R_BF16, R_BF16, true, true, true, false, "the GPU, bf16 KV of K - b_k"},
    {"gpu_no_kv", 0, 0, false, true, true, false, "the GPU with an fp32 KV pool"},
    {"kv_e4m3_tok", R_E4M3_TOK, R_E4M3_TOK, false, false, false, false,
     "fp8 e4m3 KV, scale per (token, head)"},
    {"k_e4m3_ch", R_E4M3_CH, 0, false, false, false, false, "fp8 e4m3 K, scale per channel"},
    {"kc_e4m3_tok", R_E4M3_TOK, R_E4M3_TOK, true, false, false, false,
     "fp8 e4m3 KV, K stored minus b_k, scale per (token, head)"},
    {"kc_e4m3_ch", R_E4M3_CH, R_E4M3_TOK, true, false, false, false,
     "fp8 e4m3 KV, K minus b_k scaled per channel, V per (token, head)"},
    {"kc_e4m3_k", R_E4M3_TOK, 0, true, false, false, false,
     "fp8 e4m3 K only, K minus b_k, scale per (token, head)"},
    {"kc_i8_ch", R_I8_CH, R_I8_TOK, true, false, false, false,
     "int8 KV: K minus b_k scaled per channel, V per (token, head)"},
    {"k_e5m2_tok", R_E5M2_TOK, 0, false, false, false, false,
     "fp8 e5m2 K, scale per (token, head)"},
    {"v_e4m3_tok", 0, R_E4M3_TOK, false, false, false, false, "fp8 e4m3 V only"},
};
#define N_CFGS ((int)(sizeof k_cfgs / sizeof k_cfgs[0]))

/* ---- statistics ---------------------------------------------------------------------------- */

#define MAX_LAYERS 64
enum { IN_QKV, IN_WO, IN_UPGATE, IN_DOWN, IN_KINDS };
typedef struct {
    float max_k, max_kc, max_bk, max_v, max_q, max_s, max_ds;
    int ch_k; /* channel (head * D + d) of max |K| */
    float max_x_attn, max_x_ffn;
    float max_in[IN_KINDS];
} layer_stats;

static layer_stats g_ls[MAX_LAYERS];
static bool g_stats;
static const cfg_t *g_cfg;
static lc_model *g_m;
static lc_backend g_orig; /* the CPU backend's own op table */
static bool g_bf16_weights;
static int g_layer;                 /* layer of the last matmul */
static int g_last_kind;             /* which weight the last matmul used (offsetof in the layer) */
static float *g_shadow[MAX_LAYERS]; /* exact keys [N_CTX][KVD] per layer (stats) */
static float *g_tmp, *g_tmp2;
static size_t g_tmp_n;

static float *tmp_buf(size_t n, float **which) {
    if (n > g_tmp_n) {
        free(g_tmp), free(g_tmp2);
        g_tmp = malloc(sizeof(float) * n);
        g_tmp2 = malloc(sizeof(float) * n);
        g_tmp_n = n;
        if (!g_tmp || !g_tmp2) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    return *which;
}

static float vmax_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}
static void upd(float *dst, float v) {
    if (v > *dst) *dst = v;
}

/* which layer and which weight (offsetof in lc_layer_weights) w is; -1 for the output head */
static int locate(const lc_weight *w, int *kind) {
    const char *base = (const char *)g_m->layers;
    const char *p = (const char *)w;
    const size_t sz = sizeof(lc_layer_weights);
    if (p < base || p >= base + sz * (size_t)g_m->hp.n_layer) return -1;
    *kind = (int)((size_t)(p - base) % sz);
    return (int)((size_t)(p - base) / sz);
}

/* ---- wrapped ops --------------------------------------------------------------------------- */

static int diag_matmul(lc_backend *b, const lc_weight *w, const float *x, float *y, int64_t n) {
    int kind = -1;
    const int l = locate(w, &kind);
    const int64_t nx = n * w->cols;
    if (l >= 0) {
        g_layer = l;
        g_last_kind = kind;
        if (g_stats) {
            int k = -1;
            if (kind == offsetof(lc_layer_weights, wq))
                k = IN_QKV;
            else if (kind == offsetof(lc_layer_weights, wo))
                k = IN_WO;
            else if (kind == offsetof(lc_layer_weights, w_gate))
                k = IN_UPGATE;
            else if (kind == offsetof(lc_layer_weights, w_down))
                k = IN_DOWN;
            if (k >= 0) upd(&g_ls[l].max_in[k], vmax_abs(x, nx));
        }
    }
    if (g_cfg->gemm_in && n > 4) { /* CUDA: lc_cuda_f32_to_16 then cuBLASLt */
        float *xr = tmp_buf((size_t)nx, &g_tmp);
        for (int64_t i = 0; i < nx; i++)
            xr[i] = g_bf16_weights ? to_bf16(x[i]) : to_f16(x[i]);
        return g_orig.matmul(b, w, xr, y, n);
    }
    return g_orig.matmul(b, w, x, y, n);
}

static int diag_add(lc_backend *b, float *x, const float *y, int64_t n) {
    int st = g_orig.add(b, x, y, n);
    if (g_stats && g_layer >= 0) {
        const float mx = vmax_abs(x, n);
        if (g_last_kind == (int)offsetof(lc_layer_weights, wo))
            upd(&g_ls[g_layer].max_x_attn, mx);
        else
            upd(&g_ls[g_layer].max_x_ffn, mx);
    }
    if (g_cfg->resid16)
        for (int64_t i = 0; i < n; i++)
            x[i] = to_f16(x[i]);
    return st;
}

static int diag_embed(lc_backend *b, const lc_weight *t, const int32_t *ids, int64_t n, float *o) {
    int st = g_orig.embed(b, t, ids, n, o);
    if (g_cfg->resid16 && t == &g_m->tok_embd)
        for (int64_t i = 0; i < n * t->cols; i++)
            o[i] = to_f16(o[i]);
    return st;
}

/* Round rows [n_rows][H][D] of x in place to format f; bias (may be NULL, [H*D]) is taken out
 * before and put back after (in fp32) when centre. */
static void round_rows(float *x, int64_t n_rows, int H, int D, int f, const float *bias,
                       bool centre) {
    const int KVD = H * D;
    if (f == R_NONE) return;
    if (centre && bias)
        for (int64_t i = 0; i < n_rows * KVD; i++)
            x[i] -= bias[i % KVD];
    if (f == R_BF16 || f == R_F16) {
        for (int64_t i = 0; i < n_rows * KVD; i++)
            x[i] = round_elem(f, x[i]);
    } else if (f == R_E4M3_TOK || f == R_E5M2_TOK) {
        const float fmax = f == R_E5M2_TOK ? 57344.0f : 448.0f;
        for (int64_t r = 0; r < n_rows; r++)
            for (int h = 0; h < H; h++) {
                float *v = x + (r * H + h) * D;
                const float amax = vmax_abs(v, D);
                const float scale = amax > 0 ? amax / fmax : 1.0f;
                for (int d = 0; d < D; d++)
                    v[d] =
                        (f == R_E5M2_TOK ? to_e5m2(v[d] / scale) : to_e4m3(v[d] / scale)) * scale;
            }
    } else if (f == R_I8_TOK) {
        for (int64_t r = 0; r < n_rows; r++)
            for (int h = 0; h < H; h++) {
                float *v = x + (r * H + h) * D;
                const float amax = vmax_abs(v, D);
                const float scale = amax > 0 ? amax / 127.0f : 1.0f;
                for (int d = 0; d < D; d++)
                    v[d] = rintf(v[d] / scale) * scale;
            }
    } else if (f == R_E4M3_CH || f == R_I8_CH) {
        const float fmax = f == R_I8_CH ? 127.0f : 448.0f;
        for (int c = 0; c < KVD; c++) {
            float amax = 0;
            for (int64_t r = 0; r < n_rows; r++)
                upd(&amax, fabsf(x[r * KVD + c]));
            const float scale = amax > 0 ? amax / fmax : 1.0f;
            for (int64_t r = 0; r < n_rows; r++) {
                const float y = x[r * KVD + c] / scale;
                x[r * KVD + c] = (f == R_I8_CH ? rintf(y) : to_e4m3(y)) * scale;
            }
        }
    }
    if (centre && bias)
        for (int64_t i = 0; i < n_rows * KVD; i++)
            x[i] += bias[i % KVD];
}

static int diag_kv_write(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                         int32_t n_seqs, const float *k, const float *v) {
    const int H = kv->n_kv_head, D = kv->head_dim, KVD = H * D;
    int64_t n_rows = 0;
    for (int s = 0; s < n_seqs; s++)
        if (seqs[s].row0 + seqs[s].n_rows > n_rows) n_rows = seqs[s].row0 + seqs[s].n_rows;
    const lc_layer_weights *L = &g_m->layers[g_layer];
    const float *bk = L->bk.data;
    if (g_stats) {
        layer_stats *ls = &g_ls[g_layer];
        for (int64_t i = 0; i < n_rows * KVD; i++) {
            if (fabsf(k[i]) > ls->max_k) ls->max_k = fabsf(k[i]), ls->ch_k = (int)(i % KVD);
            upd(&ls->max_kc, fabsf(k[i] - (bk ? bk[i % KVD] : 0.0f)));
        }
        if (bk) upd(&ls->max_bk, vmax_abs(bk, KVD));
        upd(&ls->max_v, vmax_abs(v, n_rows * KVD));
        if (!g_shadow[g_layer]) g_shadow[g_layer] = calloc((size_t)N_CTX * KVD, sizeof(float));
        for (int s = 0; s < n_seqs; s++)
            for (int r = 0; r < seqs[s].n_rows; r++)
                memcpy(g_shadow[g_layer] + (int64_t)(seqs[s].pos0 + r) * KVD,
                       k + (int64_t)(seqs[s].row0 + r) * KVD, sizeof(float) * (size_t)KVD);
    }
    if (g_cfg->k_fmt == R_NONE && g_cfg->v_fmt == R_NONE)
        return g_orig.kv_write(b, kv, seqs, n_seqs, k, v);
    float *kr = tmp_buf((size_t)(n_rows * KVD), &g_tmp), *vr = g_tmp2;
    memcpy(kr, k, sizeof(float) * (size_t)(n_rows * KVD));
    memcpy(vr, v, sizeof(float) * (size_t)(n_rows * KVD));
    round_rows(kr, n_rows, H, D, g_cfg->k_fmt, bk, g_cfg->k_centre);
    round_rows(vr, n_rows, H, D, g_cfg->v_fmt, NULL, false);
    return g_orig.kv_write(b, kv, seqs, n_seqs, kr, vr);
}

/* The CUDA prefill kernel, emulated: per (sequence, query head), keys rotated from the pool
 * (fp32), then fp16 (attn16); q fp16; 64-key tiles with an online softmax; P rounded to fp16
 * for P V, the row sum of the fp32 P. With --stats also the scaled scores' largest magnitude
 * and their largest error against fp32 q and exact (unrounded) keys. */
static int diag_attn_dense(lc_backend *b, const lc_kv_layer_view *kv, const lc_attn_seq *seqs,
                           int32_t n_seqs, const float *q, int32_t n_head,
                           const lc_rope_table *rope, float scale, float *out) {
    if (!g_cfg->attn16 && !g_stats)
        return g_orig.attn_dense(b, kv, seqs, n_seqs, q, n_head, rope, scale, out);
    const int H = kv->n_kv_head, D = kv->head_dim, P = kv->page_size, G = n_head / H;
    const bool a16 = g_cfg->attn16;
    const float c_log2 = scale * 1.4426950408889634f;
    layer_stats *ls = &g_ls[g_layer];
    for (int s = 0; s < n_seqs; s++) {
        const lc_attn_seq *sq = &seqs[s];
        const int L = sq->pos0 + sq->n_rows;
        float *kr = malloc(sizeof(float) * (size_t)L * D),
              *vr = malloc(sizeof(float) * (size_t)L * D);
        float *kx = g_stats ? malloc(sizeof(float) * (size_t)L * D) : NULL;
        float *sc = malloc(sizeof(float) * (size_t)L);
        if (!kr || !vr || !sc || (g_stats && !kx)) return LC_ERR_NOMEM;
        for (int h = 0; h < H; h++) {
            for (int t = 0; t < L; t++) { /* rotated keys and values of this KV head */
                const int64_t off = (((int64_t)sq->page_table[t / P] * H + h) * P + t % P) * D;
                lc_cpu_rope_copy((const float *)kv->k + off, kr + (int64_t)t * D, D, t, rope);
                memcpy(vr + (int64_t)t * D, (const float *)kv->v + off, sizeof(float) * (size_t)D);
                if (a16)
                    for (int d = 0; d < D; d++) {
                        kr[(int64_t)t * D + d] = to_f16(kr[(int64_t)t * D + d]);
                        vr[(int64_t)t * D + d] = to_f16(vr[(int64_t)t * D + d]);
                    }
                if (kx)
                    lc_cpu_rope_copy(g_shadow[g_layer] + (int64_t)t * H * D + h * D,
                                     kx + (int64_t)t * D, D, t, rope);
            }
            for (int r = 0; r < sq->n_rows; r++)
                for (int g = 0; g < G; g++) {
                    const int qh = h * G + g, lim = sq->pos0 + r;
                    const float *q0 = q + ((int64_t)(sq->row0 + r) * n_head + qh) * D;
                    float qv[512];
                    for (int d = 0; d < D; d++)
                        qv[d] = a16 ? to_f16(q0[d]) : q0[d];
                    for (int t = 0; t <= lim; t++) {
                        const float *kt = kr + (int64_t)t * D;
                        float acc = 0;
#pragma omp simd reduction(+ : acc)
                        for (int d = 0; d < D; d++)
                            acc += qv[d] * kt[d];
                        sc[t] = acc;
                        if (kx) {
                            const float *ke = kx + (int64_t)t * D;
                            float ex = 0;
#pragma omp simd reduction(+ : ex)
                            for (int d = 0; d < D; d++)
                                ex += q0[d] * ke[d];
                            upd(&ls->max_s, fabsf(ex * scale));
                            upd(&ls->max_ds, fabsf((acc - ex) * scale));
                        }
                    }
                    float m_run = -INFINITY, l_run = 0, o[512];
                    for (int d = 0; d < D; d++)
                        o[d] = 0;
                    for (int t0 = 0; t0 <= lim; t0 += 64) { /* 64-key tiles */
                        const int t1 = t0 + 64 <= lim + 1 ? t0 + 64 : lim + 1;
                        float mx = -INFINITY;
                        for (int t = t0; t < t1; t++)
                            mx = fmaxf(mx, sc[t] * c_log2);
                        const float m_new = fmaxf(m_run, mx);
                        const float corr = exp2f(m_run - m_new);
                        m_run = m_new;
                        l_run *= corr;
                        for (int d = 0; d < D; d++)
                            o[d] *= corr;
                        for (int t = t0; t < t1; t++) {
                            const float p = exp2f(sc[t] * c_log2 - m_new);
                            const float pp = a16 ? to_f16(p) : p;
                            l_run += p;
                            const float *vt = vr + (int64_t)t * D;
#pragma omp simd
                            for (int d = 0; d < D; d++)
                                o[d] += pp * vt[d];
                        }
                    }
                    float *op = out + ((int64_t)(sq->row0 + r) * n_head + qh) * D;
                    for (int d = 0; d < D; d++)
                        op[d] = o[d] / l_run;
                }
        }
        free(kr), free(vr), free(kx), free(sc);
    }
    return LC_OK;
}

/* ---- running -------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* max |lp - ref| over the first 20 of ref (n_ref pairs) */
static double max_d(const double *lp, const pair_t *ref, int n_ref) {
    double m = 0;
    for (int i = 0; i < TOP_COMPARE && i < n_ref; i++) {
        const double d = fabs(lp[ref[i].id] - ref[i].lp);
        if (d > m) m = d;
    }
    return m;
}

static bool in_list(const char *list, const char *name) {
    if (!list) return true;
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static void print_stats(int n_layer) {
    fprintf(stderr, "\nlayer  max|K|  (chan)  max|K-bk| max|bk|  max|V|  max|q|  max|s|  max|ds|   "
                    "max|x| attn   ffn  | GEMM in: qkv    wo  gate/up    down\n");
    for (int l = 0; l < n_layer; l++) {
        const layer_stats *s = &g_ls[l];
        fprintf(stderr,
                "%5d %7.1f (%4d) %8.1f %7.1f %7.2f %7.1f %7.1f %8.4f %9.1f %8.1f | %9.2f %5.2f "
                "%8.2f %7.1f\n",
                l, s->max_k, s->ch_k, s->max_kc, s->max_bk, s->max_v, s->max_q, s->max_s, s->max_ds,
                s->max_x_attn, s->max_x_ffn, s->max_in[IN_QKV], s->max_in[IN_WO],
                s->max_in[IN_UPGATE], s->max_in[IN_DOWN]);
    }
}

/* max |q| (rotated) per layer: from the queries the attention op receives */
static int stats_rope(lc_backend *b, float *x, const int32_t *pos, int64_t n, int32_t nh,
                      int32_t hd, const lc_rope_table *r) {
    int st = g_orig.rope(b, x, pos, n, nh, hd, r);
    if (g_stats && g_layer >= 0) upd(&g_ls[g_layer].max_q, vmax_abs(x, n * nh * hd));
    return st;
}

int main(int argc, char **argv) {
    const char *weights = "f16", *prompts = NULL, *configs = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--weights") && i + 1 < argc)
            weights = argv[++i];
        else if (!strcmp(argv[i], "--prompts") && i + 1 < argc)
            prompts = argv[++i];
        else if (!strcmp(argv[i], "--configs") && i + 1 < argc)
            configs = argv[++i];
        else if (!strcmp(argv[i], "--stats"))
            g_stats = true;
        else if (!strcmp(argv[i], "--list")) {
            for (int c = 0; c < N_CFGS; c++)
                printf("%-13s K %-8s V %-8s%s%s%s%s  %s\n", k_cfgs[c].name,
                       fmt_name(k_cfgs[c].k_fmt), fmt_name(k_cfgs[c].v_fmt),
                       k_cfgs[c].k_centre ? " K-bk" : "", k_cfgs[c].gemm_in ? " gemm_in" : "",
                       k_cfgs[c].attn16 ? " attn16" : "", k_cfgs[c].resid16 ? " resid16" : "",
                       k_cfgs[c].help);
            return 0;
        } else {
            fprintf(stderr,
                    "usage: %s [--weights f16|f32|bf16] [--prompts a,b] [--configs a,b] "
                    "[--stats] [--list]\n",
                    argv[0]);
            return 2;
        }
    }
    REQUIRE_QWEN_MODEL();
    static fixture_t fx[MAX_PROMPTS];
    const int n_fx = read_fixtures(QWEN_FIXTURE_PATH, fx, MAX_PROMPTS);
    if (n_fx < 1) return 1;

    const double t0 = now_s();
    lc_model_params mp = lc_model_default_params();
    mp.device = LC_DEVICE_CPU;
    g_bf16_weights = !strcmp(weights, "bf16");
    mp.weights = !strcmp(weights, "f16") ? LC_WEIGHTS_F16 : LC_WEIGHTS_F32;
    int rc = lc_model_load(QWEN_MODEL_PATH, &mp, &g_m);
    if (rc != LC_OK) {
        fprintf(stderr, "load: %s (%s)\n", lc_status_str(rc), lc_last_error());
        return 1;
    }
    const int n_layer = g_m->hp.n_layer;
    if (n_layer > MAX_LAYERS || g_m->hp.head_dim > 512) return 1;
    if (g_bf16_weights) { /* every matrix rounded to bf16, as the CUDA backend's bf16 mode */
        lc_weight *ws[2] = {&g_m->tok_embd, g_m->output_tied ? NULL : &g_m->output};
        for (int l = 0; l < n_layer; l++) {
            lc_layer_weights *L = &g_m->layers[l];
            lc_weight *m9[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            for (int j = 0; j < 7; j++) {
                float *d = m9[j]->data;
                for (int64_t i = 0; i < m9[j]->rows * m9[j]->cols; i++)
                    d[i] = to_bf16(d[i]);
            }
        }
        for (int j = 0; j < 2; j++)
            if (ws[j]) {
                float *d = ws[j]->data;
                for (int64_t i = 0; i < ws[j]->rows * ws[j]->cols; i++)
                    d[i] = to_bf16(d[i]);
            }
    }
    fprintf(stderr, "loaded (%s weights) in %.1f s\n", weights, now_s() - t0);

    lc_backend *b = g_m->backend;
    g_orig = *b;
    b->matmul = diag_matmul;
    b->kv_write = diag_kv_write;
    b->attn_dense = diag_attn_dense;
    b->add = diag_add;
    b->embed = diag_embed;
    b->rope = stats_rope;

    const int n_vocab = (int)g_m->hp.n_vocab;
    double *lp = malloc(sizeof(double) * (size_t)n_vocab);
    static pair_t base_top[MAX_PROMPTS][TOP_COMPARE];
    static double res_ref[N_CFGS][MAX_PROMPTS], res_base[N_CFGS][MAX_PROMPTS];
    static int res_top1[N_CFGS][MAX_PROMPTS], ran[N_CFGS];
    static char res_ds[N_CFGS][96]; /* --stats: the three layers of largest score error */
    bool have_base = false;
    for (int c = 0; c < N_CFGS; c++) {
        if (c > 0 && !in_list(configs, k_cfgs[c].name)) continue; /* base always runs */
        g_cfg = &k_cfgs[c];
        memset(g_ls, 0, sizeof g_ls);
        g_overflow = 0;
        const double t1 = now_s();
        lc_context *ctx = make_context(g_m, N_CTX, 0, 0);
        if (!ctx) return 1;
        for (int i = 0; i < n_fx; i++) {
            if (!in_list(prompts, fx[i].name)) continue;
            g_layer = -1;
            if (!eval_prompt(ctx, fx[i].ids, fx[i].n_ids, false, 512, lp, NULL)) return 1;
            if (c == 0) top_n(lp, n_vocab, base_top[i], TOP_COMPARE);
            res_ref[c][i] = max_d(lp, fx[i].top, fx[i].n_top);
            res_base[c][i] = max_d(lp, base_top[i], TOP_COMPARE);
            res_top1[c][i] = argmax(lp, n_vocab) == fx[i].top[0].id;
            fprintf(stderr, "%-13s %-13s %4d ids  vs ref %.3e  vs base %.3e  top-1 %s\n",
                    k_cfgs[c].name, fx[i].name, fx[i].n_ids, res_ref[c][i], res_base[c][i],
                    res_top1[c][i] ? "same" : "DIFFERS");
        }
        lc_context_free(ctx);
        ran[c] = 1;
        have_base = have_base || c == 0;
        fprintf(stderr, "%-13s done in %.1f s%s", k_cfgs[c].name, now_s() - t1,
                g_overflow ? "" : "\n");
        if (g_overflow) fprintf(stderr, "  (%lld values saturated)\n", g_overflow);
        if (g_stats && c == 0) print_stats(n_layer);
        if (g_stats) { /* the three layers of largest max |ds| over the prompts run */
            int top[3] = {-1, -1, -1};
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < n_layer; l++) {
                    bool used = false;
                    for (int k = 0; k < j; k++)
                        used = used || top[k] == l;
                    if (!used && (top[j] < 0 || g_ls[l].max_ds > g_ls[top[j]].max_ds)) top[j] = l;
                }
            snprintf(res_ds[c], sizeof res_ds[c], "%.3g (L%d), %.3g (L%d), %.3g (L%d)",
                     g_ls[top[0]].max_ds, top[0], g_ls[top[1]].max_ds, top[1], g_ls[top[2]].max_ds,
                     top[2]);
            fprintf(stderr, "%-13s max |score error| %s\n", k_cfgs[c].name, res_ds[c]);
        }
    }

    /* the table */
    printf("\n%s weights; max |d log-prob| over the reference top 20 (vs transformers fp32) / "
           "over base's top 20 (vs base)\n\n| config |",
           weights);
    for (int i = 0; i < n_fx; i++)
        if (in_list(prompts, fx[i].name))
            printf(" %s (%d) vs ref | vs base |", fx[i].name, fx[i].n_ids);
    printf("%s what |\n|---|", g_stats ? " max abs score error (layer) |" : "");
    for (int i = 0; i < n_fx; i++)
        if (in_list(prompts, fx[i].name)) printf("---|---|");
    printf("%s---|\n", g_stats ? "---|" : "");
    for (int c = 0; c < N_CFGS; c++) {
        if (!ran[c]) continue;
        printf("| %s |", k_cfgs[c].name);
        for (int i = 0; i < n_fx; i++)
            if (in_list(prompts, fx[i].name))
                printf(" %.2e%s | %.2e |", res_ref[c][i], res_top1[c][i] ? "" : " (top-1 differs)",
                       res_base[c][i]);
        if (g_stats) printf(" %s |", res_ds[c]);
        printf(" %s |\n", k_cfgs[c].help);
    }
    free(lp);
    for (int l = 0; l < MAX_LAYERS; l++)
        free(g_shadow[l]);
    free(g_tmp), free(g_tmp2);
    lc_model_free(g_m);
    free_fixtures(fx, n_fx);
    return 0;
}
