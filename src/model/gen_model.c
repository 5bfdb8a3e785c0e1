/*
 * gen_model.c — random-weight GGUF models with the configurations of real ones (DESIGN.md
 * "Models": real shapes for speed work without downloads). Writes the same metadata keys and
 * tensor names as llama.cpp's converter (spec/ecosystem-and-style.md §1.4), Llama-3.x long-
 * context RoPE as a rope_freqs.weight tensor (the converter's rule), a synthetic byte-level
 * BPE ("gpt2") tokenizer of the exact vocabulary size, and deterministic weights generated row
 * block by row block while streaming through the GGUF writer (format/gguf_write.h).
 */
#include "longctx.h"
#include "format/gguf_write.h"
#include "format/quant.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum tok_family { TOK_LLAMA3, TOK_QWEN2, TOK_SMOLLM } tok_family;

typedef struct gen_config {
    const char *name;
    const char *arch;
    const char *pre; /* tokenizer.ggml.pre */
    tok_family  tok;
    int32_t     n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
    float       rope_base, eps;
    float       llama3_factor; /* 0: no llama3 RoPE scaling */
    bool        tied, qkv_bias;
} gen_config;

static const gen_config k_configs[] = {
    {"llama-3.1-8b", "llama", "llama-bpe", TOK_LLAMA3, 32, 4096, 14336, 32, 8, 128, 128256, 131072,
     500000.0f, 1e-5f, 8.0f, false, false},
    {"llama-3.2-1b", "llama", "llama-bpe", TOK_LLAMA3, 16, 2048, 8192, 32, 8, 64, 128256, 131072,
     500000.0f, 1e-5f, 32.0f, true, false},
    {"qwen2.5-7b", "qwen2", "qwen2", TOK_QWEN2, 28, 3584, 18944, 28, 4, 128, 152064, 32768,
     1000000.0f, 1e-6f, 0.0f, false, true},
    {"smollm2-135m", "llama", "smollm", TOK_SMOLLM, 30, 576, 1536, 9, 3, 64, 49152, 8192,
     100000.0f, 1e-5f, 0.0f, true, false},
    {"tiny", "llama", "llama-bpe", TOK_LLAMA3, 2, 64, 128, 4, 2, 16, 512, 2048, 10000.0f, 1e-5f,
     0.0f, false, false},
    /* test configs for the other code paths: qwen2 with biases, llama3 rope factors + tied */
    {"tiny-qwen2", "qwen2", "qwen2", TOK_QWEN2, 2, 64, 128, 4, 2, 16, 1024, 4096, 1000000.0f,
     1e-6f, 0.0f, true, true},
    {"tiny-llama3", "llama", "llama-bpe", TOK_LLAMA3, 2, 64, 128, 2, 1, 32, 512, 131072, 500000.0f,
     1e-5f, 8.0f, true, false},
    /* head dim 64 (what the CUDA kernels take) with an untied output head, for GPU tests */
    {"tiny-hd64", "llama", "llama-bpe", TOK_LLAMA3, 2, 128, 256, 4, 2, 64, 512, 2048, 10000.0f,
     1e-5f, 0.0f, false, false},
    /* rows of 256 and 512 values (the K types' blocks) over 8 layers (Q4_K_M's layer rule) */
    {"tiny-k", "llama", "llama-bpe", TOK_LLAMA3, 8, 256, 512, 4, 2, 64, 512, 2048, 10000.0f,
     1e-5f, 0.0f, false, false},
};
#define N_CONFIGS (sizeof k_configs / sizeof k_configs[0])

static const gen_config *find_config(const char *name) {
    for (size_t i = 0; name && i < N_CONFIGS; i++)
        if (strcmp(k_configs[i].name, name) == 0) return &k_configs[i];
    return NULL;
}

const char *lc_gen_config_arch(const char *config) {
    const gen_config *c = find_config(config);
    return c ? c->arch : NULL;
}

const char *lc_gen_config_names(void) {
    return "llama-3.1-8b, llama-3.2-1b, qwen2.5-7b, smollm2-135m, tiny, tiny-qwen2, tiny-llama3";
}

/* ---- random numbers -------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z          = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z          = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Row r of tensor t: an independent stream, so rows can be generated in any order or in
 * parallel and the file stays a function of (seed, config, type). Values are the sum of four
 * 16-bit uniforms (Irwin–Hall, close to normal), scaled to std 0.02. */
static void fill_row(uint64_t seed, int64_t t, int64_t r, float *x, int64_t n) {
    uint64_t s = seed ^ 0x243F6A8885A308D3ull;
    uint64_t k = splitmix64(&s) ^ ((uint64_t)t * 0xD1B54A32D192ED03ull);
    k          = splitmix64(&k) ^ ((uint64_t)r * 0x8CB92BA72F3D8DD7ull);
    const float scale = 0.02f / 37837.23f; /* std of a sum of 4 uniforms on [0, 65535] */
    for (int64_t i = 0; i < n; i++) {
        uint64_t v   = splitmix64(&k);
        int32_t  sum = (int32_t)(v & 0xFFFF) + (int32_t)((v >> 16) & 0xFFFF) +
                      (int32_t)((v >> 32) & 0xFFFF) + (int32_t)(v >> 48);
        x[i] = (float)(sum - 131070) * scale;
    }
}

/* ---- tokenizer ------------------------------------------------------------------------- */

#define TOK_SLOT 24 /* bytes per token string in the pool */

/* GPT-2 bytes_to_unicode(): printable Latin-1 bytes map to themselves, the rest to 256+n. */
static int byte_to_cp(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

static size_t utf8_put(int cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Lowercase string number i of length len (base 26). */
static void letters(int64_t i, int len, char *o) {
    for (int k = len - 1; k >= 0; k--) {
        o[k] = (char)('a' + i % 26);
        i /= 26;
    }
    o[len] = '\0';
}

static int add_tokenizer(lc_gguf_writer *w, const gen_config *c) {
    static const char *ctrl_llama3[] = {"<|begin_of_text|>", "<|end_of_text|>",
                                        "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
    static const char *ctrl_chatml[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    const char *const *ctrl = c->tok == TOK_LLAMA3 ? ctrl_llama3 : ctrl_chatml;
    const int n_ctrl        = c->tok == TOK_LLAMA3 ? 5 : 3;
    const int64_t n         = c->n_vocab;
    int32_t bos, eos, eot;
    if (c->tok == TOK_LLAMA3) {
        bos = 256, eos = 257, eot = 260;
    } else if (c->tok == TOK_QWEN2) {
        bos = 256, eos = 256, eot = 258;
    } else {
        bos = 257, eos = 258, eot = 258;
    }
    const int64_t n_fill = n - 256 - n_ctrl;
    if (n_fill < 26)
        return lc_fail(LC_ERR_INTERNAL, "gen-model: vocabulary %lld too small", (long long)n);
    const int64_t n_merge2 = n_fill < 676 ? n_fill : 676;
    char   *pool  = malloc((size_t)n * TOK_SLOT);
    char  **strs  = malloc((size_t)n * sizeof *strs);
    int32_t *type = malloc((size_t)n * sizeof *type);
    const int64_t n_merge3 = n_fill - n_merge2 < 1000 ? n_fill - n_merge2 : 1000;
    const int64_t n_merges = n_merge2 + n_merge3;
    char  *mpool  = malloc((size_t)n_merges * 16);
    char **merges = malloc((size_t)n_merges * sizeof *merges);
    int    st     = LC_OK;
    if (!pool || !strs || !type || !mpool || !merges) {
        st = lc_fail(LC_ERR_NOMEM, "gen-model: out of memory for the vocabulary");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) strs[i] = pool + i * TOK_SLOT;
    for (int b = 0; b < 256; b++) {
        size_t l    = utf8_put(byte_to_cp(b), strs[b]);
        strs[b][l]  = '\0';
        type[b]     = 1; /* normal, as in real byte-level BPE GGUFs */
    }
    for (int i = 0; i < n_ctrl; i++) {
        snprintf(strs[256 + i], TOK_SLOT, "%s", ctrl[i]);
        type[256 + i] = 3; /* control */
    }
    /* filler: all two-letter strings, then three-letter, then four-letter ... */
    int64_t id = 256 + n_ctrl, left = n_fill;
    for (int len = 2; left > 0 && len < TOK_SLOT - 1; len++) {
        int64_t count = 1;
        for (int k = 0; k < len; k++) count *= 26;
        for (int64_t i = 0; i < count && left > 0; i++, left--, id++) {
            letters(i, len, strs[id]);
            type[id] = 1;
        }
    }
    /* merges: "x y" for every two-letter token, "xy z" for the first three-letter ones */
    for (int64_t i = 0; i < n_merges; i++) {
        merges[i] = mpool + i * 16;
        char s[8];
        if (i < n_merge2) {
            letters(i, 2, s);
            snprintf(merges[i], 16, "%c %c", s[0], s[1]);
        } else {
            letters(i - n_merge2, 3, s);
            snprintf(merges[i], 16, "%c%c %c", s[0], s[1], s[2]);
        }
    }
    if (st == LC_OK) st = lc_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == LC_OK) st = lc_gguf_writer_add_str(w, "tokenizer.ggml.pre", c->pre);
    if (st == LC_OK)
        st = lc_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs,
                                        NULL, (uint64_t)n);
    if (st == LC_OK) st = lc_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)n);
    if (st == LC_OK)
        st = lc_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                        NULL, (uint64_t)n_merges);
    if (st == LC_OK) st = lc_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (st == LC_OK) st = lc_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (st == LC_OK) st = lc_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot);
    if (st == LC_OK && c->tok == TOK_QWEN2)
        st = lc_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (st == LC_OK)
        st = lc_gguf_writer_add_str(
            w, "tokenizer.chat_template",
            c->tok == TOK_LLAMA3
                ? "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ "
                  "message['role'] }}<|end_header_id|>\n\n{{ message['content'] | trim }}"
                  "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>"
                  "assistant<|end_header_id|>\n\n{% endif %}"
                : "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ "
                  "message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt "
                  "%}<|im_start|>assistant\n{% endif %}");
done:
    free(pool);
    free(strs);
    free(type);
    free(mpool);
    free(merges);
    return st;
}

/* ---- tensors --------------------------------------------------------------------------- */

typedef enum tkind { T_WEIGHT, T_NORM, T_BIAS, T_ROPE } tkind;

typedef struct tspec {
    char    name[64];
    int64_t cols, rows; /* ne[0], ne[1] (rows 1: a vector) */
    tkind   kind;
} tspec;

/* The converter's llama3 rope factors (convert_hf_to_gguf.py, LlamaModel): for each of the
 * n_rot/2 frequencies, 1 (high frequency), factor (low) or 1/((1-s)/factor + s) between. */
static void llama3_factors(const gen_config *c, float *out) {
    const int   dim = c->head_dim;
    const float low = 1.0f, high = 4.0f, orig = 8192.0f;
    const float low_wl = orig / low, high_wl = orig / high;
    for (int i = 0; i < dim / 2; i++) {
        const float freq    = 1.0f / powf(c->rope_base, (float)(2 * i) / (float)dim);
        const float wavelen = 2.0f * (float)M_PI / freq;
        if (wavelen < high_wl) {
            out[i] = 1.0f;
        } else if (wavelen > low_wl) {
            out[i] = c->llama3_factor;
        } else {
            const float s = (orig / wavelen - low) / (high - low);
            out[i]        = 1.0f / ((1.0f - s) / c->llama3_factor + s);
        }
    }
}

static int64_t build_specs(const gen_config *c, tspec *s) {
    const int64_t E = c->n_embd, Q = (int64_t)c->n_head * c->head_dim,
                  KV = (int64_t)c->n_head_kv * c->head_dim, F = c->n_ff, V = c->n_vocab;
    int64_t n = 0;
#define ADD(nm, cl, rw, kd)                                                                   \
    do {                                                                                      \
        if (s) {                                                                              \
            snprintf(s[n].name, sizeof s[n].name, "%s", nm);                                  \
            s[n].cols = (cl), s[n].rows = (rw), s[n].kind = (kd);                             \
        }                                                                                     \
        n++;                                                                                  \
    } while (0)
    if (c->llama3_factor > 0.0f) ADD("rope_freqs.weight", c->head_dim / 2, 1, T_ROPE);
    ADD("token_embd.weight", E, V, T_WEIGHT);
    for (int32_t l = 0; l < c->n_layer; l++) {
        char b[64];
#define LADD(sfx, cl, rw, kd)                                                                 \
    do {                                                                                      \
        snprintf(b, sizeof b, "blk.%d.%s", l, sfx);                                           \
        ADD(b, cl, rw, kd);                                                                   \
    } while (0)
        LADD("attn_norm.weight", E, 1, T_NORM);
        LADD("attn_q.weight", E, Q, T_WEIGHT);
        if (c->qkv_bias) LADD("attn_q.bias", Q, 1, T_BIAS);
        LADD("attn_k.weight", E, KV, T_WEIGHT);
        if (c->qkv_bias) LADD("attn_k.bias", KV, 1, T_BIAS);
        LADD("attn_v.weight", E, KV, T_WEIGHT);
        if (c->qkv_bias) LADD("attn_v.bias", KV, 1, T_BIAS);
        LADD("attn_output.weight", Q, E, T_WEIGHT);
        LADD("ffn_norm.weight", E, 1, T_NORM);
        LADD("ffn_gate.weight", E, F, T_WEIGHT);
        LADD("ffn_up.weight", E, F, T_WEIGHT);
        LADD("ffn_down.weight", F, E, T_WEIGHT);
#undef LADD
    }
    ADD("output_norm.weight", E, 1, T_NORM);
    if (!c->tied) ADD("output.weight", E, V, T_WEIGHT);
#undef ADD
    return n;
}

/* The tensor type of generated type t, before the K types' fallback (weight_type). */
typedef struct gen_type_info {
    const char *name;      /* as gen-model --type takes it */
    uint32_t    type;      /* the matrices' type (LC_GEN_Q4_K_M: most of them) */
    uint32_t    file_type; /* general.file_type (llama.cpp's llama_ftype) */
} gen_type_info;

static const gen_type_info k_types[] = {
    [LC_GEN_BF16] = {"bf16", LC_TYPE_BF16, 32},  [LC_GEN_Q8_0] = {"q8_0", LC_TYPE_Q8_0, 7},
    [LC_GEN_Q4_0] = {"q4_0", LC_TYPE_Q4_0, 2},   [LC_GEN_Q4_1] = {"q4_1", LC_TYPE_Q4_1, 3},
    [LC_GEN_Q5_0] = {"q5_0", LC_TYPE_Q5_0, 8},   [LC_GEN_Q5_1] = {"q5_1", LC_TYPE_Q5_1, 9},
    [LC_GEN_Q4_K] = {"q4_k", LC_TYPE_Q4_K, 14},  [LC_GEN_Q5_K] = {"q5_k", LC_TYPE_Q5_K, 16},
    [LC_GEN_Q6_K] = {"q6_k", LC_TYPE_Q6_K, 18},  [LC_GEN_Q4_K_M] = {"q4_k_m", LC_TYPE_Q4_K, 15},
};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

const char *lc_gen_type_name(lc_gen_type t) {
    return (int)t >= 0 && (int)t < N_TYPES ? k_types[t].name : NULL;
}

const char *lc_gen_type_names(void) {
    return "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m";
}

int lc_gen_type_parse(const char *name, lc_gen_type *out) {
    for (int i = 0; name && i < N_TYPES; i++)
        if (strcmp(k_types[i].name, name) == 0) {
            *out = (lc_gen_type)i;
            return LC_OK;
        }
    return lc_fail(LC_ERR_NOT_FOUND, "'%s' is not one of %s", name ? name : "(null)",
                   lc_gen_type_names());
}

/* Q4_K_M's layers with more bits (attn_v, ffn_down in q6_K): the first and last eighth and
 * every third layer between. */
static bool more_bits(int32_t l, int32_t n) {
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* The type a matrix of the generated model is written in. */
static uint32_t weight_type(const gen_config *c, const char *name, int64_t cols, lc_gen_type t) {
    uint32_t ty = k_types[t].type;
    int      l  = -1;
    if (t == LC_GEN_Q4_K_M) {
        if (strcmp(name, "output.weight") == 0) ty = LC_TYPE_Q6_K;
        if (sscanf(name, "blk.%d.", &l) == 1 && more_bits(l, c->n_layer) &&
            (strstr(name, ".attn_v.weight") || strstr(name, ".ffn_down.weight")))
            ty = LC_TYPE_Q6_K;
    }
    if (cols % 256 != 0) { /* rows that are not whole 256-value blocks */
        if (ty == LC_TYPE_Q4_K) ty = LC_TYPE_Q5_0;
        if (ty == LC_TYPE_Q5_K) ty = LC_TYPE_Q5_1;
        if (ty == LC_TYPE_Q6_K) ty = LC_TYPE_Q8_0;
    }
    return ty;
}

static int add_hparams(lc_gguf_writer *w, const gen_config *c, lc_gen_type type) {
    char key[128];
    int  st = lc_gguf_writer_add_str(w, "general.architecture", c->arch);
    if (st == LC_OK) st = lc_gguf_writer_add_str(w, "general.type", "model");
    if (st == LC_OK) {
        char name[96];
        snprintf(name, sizeof name, "random %s", c->name);
        st = lc_gguf_writer_add_str(w, "general.name", name);
    }
    if (st == LC_OK) st = lc_gguf_writer_add_u32(w, "general.file_type", k_types[type].file_type);
    if (st == LC_OK) st = lc_gguf_writer_add_u32(w, "general.quantization_version", 2);
    struct {
        const char *k;
        uint32_t    v;
    } u[] = {
        {"block_count", (uint32_t)c->n_layer},
        {"context_length", (uint32_t)c->n_ctx},
        {"embedding_length", (uint32_t)c->n_embd},
        {"feed_forward_length", (uint32_t)c->n_ff},
        {"attention.head_count", (uint32_t)c->n_head},
        {"attention.head_count_kv", (uint32_t)c->n_head_kv},
        {"attention.key_length", (uint32_t)c->head_dim},
        {"attention.value_length", (uint32_t)c->head_dim},
        {"rope.dimension_count", (uint32_t)c->head_dim},
        {"vocab_size", (uint32_t)c->n_vocab},
    };
    for (size_t i = 0; st == LC_OK && i < sizeof u / sizeof u[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", c->arch, u[i].k);
        st = lc_gguf_writer_add_u32(w, key, u[i].v);
    }
    if (st == LC_OK) {
        snprintf(key, sizeof key, "%s.rope.freq_base", c->arch);
        st = lc_gguf_writer_add_f32(w, key, c->rope_base);
    }
    if (st == LC_OK) {
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", c->arch);
        st = lc_gguf_writer_add_f32(w, key, c->eps);
    }
    return st;
}

static int write_tensor(lc_gguf_writer *w, const gen_config *c, const tspec *s, int64_t ti,
                        uint64_t seed, float *buf, int64_t buf_elems) {
    if (s->kind == T_ROPE) {
        llama3_factors(c, buf);
        return lc_gguf_writer_write_f32(w, buf, (size_t)s->cols);
    }
    if (s->kind == T_NORM) {
        for (int64_t i = 0; i < s->cols; i++) buf[i] = 1.0f;
        return lc_gguf_writer_write_f32(w, buf, (size_t)s->cols);
    }
    int64_t block = buf_elems / s->cols;
    if (block < 1) block = 1;
    for (int64_t r0 = 0; r0 < s->rows; r0 += block) {
        const int64_t nr = s->rows - r0 < block ? s->rows - r0 : block;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nr; r++) fill_row(seed, ti, r0 + r, buf + r * s->cols, s->cols);
        int st = lc_gguf_writer_write_f32(w, buf, (size_t)(nr * s->cols));
        if (st != LC_OK) return st;
    }
    return LC_OK;
}

int lc_model_generate(const lc_gen_params *p) {
    lc_clear_error();
    if (!p || !p->config || !p->path)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_model_generate: NULL argument");
    const gen_config *c = find_config(p->config);
    if (!c)
        return lc_fail(LC_ERR_NOT_FOUND, "gen-model: unknown config '%s' (known: %s)", p->config,
                       lc_gen_config_names());
    if ((int)p->type < 0 || (int)p->type >= N_TYPES)
        return lc_fail(LC_ERR_INVALID_ARG, "gen-model: weight type %d is not one of %s",
                       (int)p->type, lc_gen_type_names());
    const int64_t  n_specs = build_specs(c, NULL);
    tspec         *specs   = lc_calloc((size_t)n_specs, sizeof *specs, "tensor list");
    if (!specs) return LC_ERR_NOMEM;
    build_specs(c, specs);
    int64_t max_cols = 0;
    for (int64_t i = 0; i < n_specs; i++)
        if (specs[i].cols > max_cols) max_cols = specs[i].cols;
    const int64_t   buf_elems = max_cols > (1 << 22) ? max_cols : (1 << 22); /* 16 MiB of fp32 */
    float          *buf       = lc_malloc((size_t)buf_elems * sizeof(float), "row block");
    lc_gguf_writer *w         = NULL;
    int             st        = buf ? lc_gguf_writer_open(p->path, &w) : LC_ERR_NOMEM;
    if (st == LC_OK) st = add_hparams(w, c, p->type);
    if (st == LC_OK) st = add_tokenizer(w, c);
    for (int64_t i = 0; st == LC_OK && i < n_specs; i++) {
        const uint64_t ne[2] = {(uint64_t)specs[i].cols, (uint64_t)specs[i].rows};
        const bool     mat   = specs[i].kind == T_WEIGHT;
        st = lc_gguf_writer_add_tensor(
            w, specs[i].name, mat ? 2 : 1, ne,
            mat ? weight_type(c, specs[i].name, specs[i].cols, p->type) : (uint32_t)LC_TYPE_F32);
    }
    if (st == LC_OK) st = lc_gguf_writer_begin_data(w);
    for (int64_t i = 0; st == LC_OK && i < n_specs; i++) {
        st = write_tensor(w, c, &specs[i], i, p->seed, buf, buf_elems);
        if (st == LC_OK && p->progress) p->progress(i + 1, n_specs, p->progress_user);
    }
    if (w) {
        if (st == LC_OK) {
            st = lc_gguf_writer_close(w);
        } else {
            lc_gguf_writer_abort(w);
        }
    }
    free(buf);
    free(specs);
    return st;
}
