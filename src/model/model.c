/*
 * model.c — model loading: hyper-parameters from GGUF metadata (spec/ecosystem-and-style.md
 * §1.4) for llama, mistral and qwen2, tensor validation, weights uploaded to the backend
 * (dequantised once), the tokenizer and chat template, and the public lc_model_* API.
 */
#include "model/model.h"
#include "backend/profile.h"
#include "model/budget.h"
#include "format/chat.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- hyper-parameters ------------------------------------------------------------------ */

static int get_arch_u32(const lc_gguf *g, const char *arch, const char *name, bool required,
                        int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    uint32_t v;
    int      st = lc_gguf_get_u32(g, key, &v);
    if (st == LC_ERR_NOT_FOUND) {
        if (required) return lc_fail(LC_ERR_FORMAT, "model metadata: required key %s is missing", key);
        return LC_ERR_NOT_FOUND;
    }
    if (st != LC_OK) return st;
    if (v == 0 || v > (1u << 30))
        return lc_fail(LC_ERR_FORMAT, "model metadata: %s = %u is out of range", key, v);
    *out = (int32_t)v;
    return LC_OK;
}

static int get_arch_f32(const lc_gguf *g, const char *arch, const char *name, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int st = lc_gguf_get_f32(g, key, out);
    if (st == LC_OK && !isfinite(*out))
        return lc_fail(LC_ERR_FORMAT, "model metadata: %s is not finite", key);
    return st;
}

int lc_hparams_read(const lc_gguf *g, lc_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    const char *arch;
    size_t      arch_len;
    if (lc_gguf_get_str(g, "general.architecture", &arch, &arch_len) != LC_OK)
        return lc_fail(LC_ERR_FORMAT, "model metadata: general.architecture is missing");
    if (memchr(arch, '\0', arch_len)) /* "llama\0junk" must not pass as llama */
        return lc_fail(LC_ERR_FORMAT, "model metadata: general.architecture holds a NUL byte");
    if (arch_len >= sizeof hp->arch) arch_len = sizeof hp->arch - 1;
    memcpy(hp->arch, arch, arch_len);
    hp->arch[arch_len] = '\0';
    if (strcmp(hp->arch, "llama") == 0 || strcmp(hp->arch, "mistral") == 0) {
        hp->rope_pairing = LC_ROPE_NORM;
    } else if (strcmp(hp->arch, "qwen2") == 0) {
        hp->rope_pairing = LC_ROPE_NEOX;
    } else {
        char esc[96];
        return lc_fail(LC_ERR_UNSUPPORTED, "model architecture \"%s\" is not supported "
                       "(supported: llama, mistral, qwen2)",
                       lc_text_escape(esc, sizeof esc, arch, arch_len));
    }
    const char *a = hp->arch;
    int         st;
    if ((st = get_arch_u32(g, a, "block_count", true, &hp->n_layer)) != LC_OK) return st;
    if ((st = get_arch_u32(g, a, "embedding_length", true, &hp->n_embd)) != LC_OK) return st;
    if ((st = get_arch_u32(g, a, "feed_forward_length", true, &hp->n_ff)) != LC_OK) return st;
    if ((st = get_arch_u32(g, a, "attention.head_count", true, &hp->n_head)) != LC_OK) return st;
    if ((st = get_arch_u32(g, a, "context_length", true, &hp->n_ctx_train)) != LC_OK) return st;
    hp->n_head_kv = hp->n_head;
    st = get_arch_u32(g, a, "attention.head_count_kv", false, &hp->n_head_kv);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    hp->head_dim = hp->n_embd / hp->n_head;
    st = get_arch_u32(g, a, "attention.key_length", false, &hp->head_dim);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    if (st == LC_ERR_NOT_FOUND && hp->n_embd % hp->n_head != 0)
        return lc_fail(LC_ERR_FORMAT, "model metadata: embedding_length %d is not a multiple of "
                       "head_count %d (and no attention.key_length)", hp->n_embd, hp->n_head);
    int32_t v_dim = hp->head_dim;
    st = get_arch_u32(g, a, "attention.value_length", false, &v_dim);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    if (v_dim != hp->head_dim)
        return lc_fail(LC_ERR_UNSUPPORTED, "model metadata: value head size %d differs from key "
                       "head size %d", v_dim, hp->head_dim);
    if (hp->n_head % hp->n_head_kv != 0)
        return lc_fail(LC_ERR_FORMAT, "model metadata: head_count %d is not a multiple of "
                       "head_count_kv %d", hp->n_head, hp->n_head_kv);
    if (hp->head_dim > 512 || hp->head_dim % 2)
        return lc_fail(LC_ERR_UNSUPPORTED, "model metadata: head dimension %d unsupported "
                       "(even, <= 512)", hp->head_dim);
    hp->n_rot = hp->head_dim;
    st = get_arch_u32(g, a, "rope.dimension_count", false, &hp->n_rot);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return lc_fail(LC_ERR_FORMAT, "model metadata: rope.dimension_count %d invalid for head "
                       "dimension %d", hp->n_rot, hp->head_dim);
    hp->norm_eps = 1e-5f;
    st = get_arch_f32(g, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return lc_fail(LC_ERR_FORMAT, "model metadata: rms epsilon %g out of range",
                       (double)hp->norm_eps);
    hp->rope_base = 10000.0f;
    st = get_arch_f32(g, a, "rope.freq_base", &hp->rope_base);
    if (st != LC_OK && st != LC_ERR_NOT_FOUND) return st;
    if (!(hp->rope_base > 1.0f))
        return lc_fail(LC_ERR_FORMAT, "model metadata: rope.freq_base %g out of range",
                       (double)hp->rope_base);

    /* RoPE scaling */
    hp->rope_scaling     = LC_ROPE_SCALING_NONE;
    hp->rope_factor      = 1.0f;
    hp->rope_orig_ctx    = hp->n_ctx_train;
    hp->yarn_ext_factor  = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_beta_fast   = 32.0f;
    hp->yarn_beta_slow   = 1.0f;
    hp->llama3_low_freq  = 1.0f;
    hp->llama3_high_freq = 4.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    const char *stype;
    size_t      stype_len;
    if (lc_gguf_get_str(g, key, &stype, &stype_len) == LC_OK) {
        if (stype_len == 4 && memcmp(stype, "none", 4) == 0)
            hp->rope_scaling = LC_ROPE_SCALING_NONE;
        else if (stype_len == 6 && memcmp(stype, "linear", 6) == 0)
            hp->rope_scaling = LC_ROPE_SCALING_LINEAR;
        else if (stype_len == 4 && memcmp(stype, "yarn", 4) == 0)
            hp->rope_scaling = LC_ROPE_SCALING_YARN;
        else if (stype_len == 6 && memcmp(stype, "llama3", 6) == 0)
            hp->rope_scaling = LC_ROPE_SCALING_LLAMA3;
        else {
            char esc[96];
            return lc_fail(LC_ERR_UNSUPPORTED, "model metadata: %s = \"%s\" is not supported "
                           "(none, linear, yarn, llama3)", key,
                           lc_text_escape(esc, sizeof esc, stype, stype_len));
        }
    }
    float f;
    if (get_arch_f32(g, a, "rope.scaling.factor", &f) == LC_OK && f > 0.0f) hp->rope_factor = f;
    float scale_linear;
    if (get_arch_f32(g, a, "rope.scale_linear", &scale_linear) == LC_OK && scale_linear > 0.0f) {
        hp->rope_scaling = LC_ROPE_SCALING_LINEAR;
        hp->rope_factor  = scale_linear;
    }
    get_arch_u32(g, a, "rope.scaling.original_context_length", false, &hp->rope_orig_ctx);
    get_arch_f32(g, a, "rope.scaling.yarn_ext_factor", &hp->yarn_ext_factor);
    get_arch_f32(g, a, "rope.scaling.attn_factor", &hp->yarn_attn_factor);
    get_arch_f32(g, a, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast);
    get_arch_f32(g, a, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow);
    get_arch_f32(g, a, "rope.scaling.low_freq_factor", &hp->llama3_low_freq);
    get_arch_f32(g, a, "rope.scaling.high_freq_factor", &hp->llama3_high_freq);
    if (hp->rope_scaling == LC_ROPE_SCALING_NONE) hp->rope_factor = 1.0f;
    if (hp->yarn_ext_factor < 0.0f) hp->yarn_ext_factor = 1.0f; /* llama.cpp's "unset" */
    return LC_OK;
}

/* ---- RoPE angles ----------------------------------------------------------------------- */

static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_rotations, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_rotations * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

double lc_rope_mscale(const lc_hparams *hp) {
    double mscale = 1.0;
    if (hp->rope_scaling == LC_ROPE_SCALING_YARN) {
        mscale = hp->yarn_attn_factor;
        if (hp->yarn_ext_factor != 0.0f) mscale *= 1.0 + 0.1 * log((double)hp->rope_factor);
    }
    return mscale;
}

int lc_rope_table_fill(const lc_hparams *hp, const float *freq_factors, int32_t n_pos,
                       float *cos_out, float *sin_out) {
    return lc_rope_table_fill_rows(hp, freq_factors, 0, n_pos, cos_out, sin_out);
}

int lc_rope_table_fill_rows(const lc_hparams *hp, const float *freq_factors, int32_t p0,
                            int32_t p1, float *cos_out, float *sin_out) {
    const int half = hp->n_rot / 2;
    if (p0 < 0 || p1 < p0)
        return lc_fail(LC_ERR_INVALID_ARG, "RoPE table rows [%d, %d): not a range", p0, p1);
    double   *freq = malloc(sizeof(double) * (size_t)half);
    double   *ramp = malloc(sizeof(double) * (size_t)half); /* share of the extrapolated angle */
    if (!freq || !ramp) {
        free(freq), free(ramp);
        return lc_fail(LC_ERR_NOMEM, "out of memory for the RoPE table");
    }
    double mscale = 1.0;
    for (int i = 0; i < half; i++) {
        double fr = pow((double)hp->rope_base, -2.0 * i / (double)hp->n_rot);
        if (freq_factors) fr /= (double)freq_factors[i];
        ramp[i] = 1.0;
        switch (hp->rope_scaling) {
        case LC_ROPE_SCALING_NONE: break;
        case LC_ROPE_SCALING_LINEAR: fr /= hp->rope_factor; break;
        case LC_ROPE_SCALING_LLAMA3: {
            const double orig     = hp->rope_orig_ctx;
            const double low_wl   = orig / hp->llama3_low_freq;
            const double high_wl  = orig / hp->llama3_high_freq;
            const double wavelen  = 2.0 * M_PI / fr;
            if (wavelen < high_wl) {
                /* high frequency: unchanged */
            } else if (wavelen > low_wl) {
                fr /= hp->rope_factor;
            } else {
                const double smooth = (orig / wavelen - hp->llama3_low_freq) /
                                      (hp->llama3_high_freq - hp->llama3_low_freq);
                fr = (1.0 - smooth) * fr / hp->rope_factor + smooth * fr;
            }
            break;
        }
        case LC_ROPE_SCALING_YARN: {
            float low  = floorf(yarn_corr_dim(hp->n_rot, hp->rope_orig_ctx, hp->yarn_beta_fast,
                                              hp->rope_base));
            float high = ceilf(yarn_corr_dim(hp->n_rot, hp->rope_orig_ctx, hp->yarn_beta_slow,
                                             hp->rope_base));
            if (low < 0) low = 0;
            if (high > hp->n_rot - 1) high = (float)(hp->n_rot - 1);
            const float y   = ((float)i - low) / fmaxf(0.001f, high - low);
            const float r   = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
            ramp[i]         = (double)(r * hp->yarn_ext_factor);
            break;
        }
        }
        freq[i] = fr;
    }
    mscale = lc_rope_mscale(hp);
    /* ~20 ns a value: 1M positions of a 128-dim head are 134M sines and cosines, seconds on
     * one core, so the rows are shared among threads when there are many */
#pragma omp parallel for schedule(static) if ((int64_t)(p1 - p0) * half >= (1 << 16))
    for (int32_t p = p0; p < p1; p++) {
        const int64_t row = (int64_t)(p - p0) * half;
        for (int i = 0; i < half; i++) {
            double theta;
            if (hp->rope_scaling == LC_ROPE_SCALING_YARN) {
                const double ext = (double)p * freq[i];
                const double itp = ext / hp->rope_factor;
                theta            = itp * (1.0 - ramp[i]) + ext * ramp[i];
            } else {
                theta = (double)p * freq[i];
            }
            cos_out[row + i] = (float)(cos(theta) * mscale);
            sin_out[row + i] = (float)(sin(theta) * mscale);
        }
    }
    free(freq);
    free(ramp);
    return LC_OK;
}

/* ---- weights --------------------------------------------------------------------------- */

/* A tensor the loader reads must have exactly the expected shape: cols in ne[0], rows the
 * product of the others, all of them (a [n, 0] tensor is not a [n] one). The GGUF reader
 * already derived nbytes from the shape and type and checked the data lies in the mapping, so
 * with the shape right every byte the loader reads is the tensor's. */
static int check_tensor(const lc_gguf_tensor *t, int64_t cols, int64_t rows) {
    const uint64_t t_rows = t->ne[1] * t->ne[2] * t->ne[3]; /* the parser bounds the product */
    if ((int64_t)t->ne[0] != cols || (int64_t)t_rows != rows)
        return lc_fail(LC_ERR_FORMAT, "model: tensor %s has shape [%llu, %llu], expected "
                       "[%lld, %lld]", t->name, (unsigned long long)t->ne[0],
                       (unsigned long long)t_rows, (long long)cols, (long long)rows);
    return LC_OK;
}

static int load_tensor(lc_model *m, const char *name, int64_t cols, int64_t rows, bool required,
                       lc_weight *w) {
    memset(w, 0, sizeof *w);
    const lc_gguf_tensor *t = lc_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return LC_OK;
        return lc_fail(LC_ERR_FORMAT, "model: tensor %s is missing", name);
    }
    int st = check_tensor(t, cols, rows);
    if (st != LC_OK) return st;
    st = m->backend->weight_load(m->backend, t, w);
    if (st != LC_OK) return st;
    m->n_params += (uint64_t)cols * (uint64_t)rows;
    uint64_t row_bytes = 0;
    if (w->borrowed && lc_type_row_bytes(w->type, (uint64_t)cols, &row_bytes))
        m->weight_bytes += row_bytes * (uint64_t)rows; /* the file's own blocks */
    else
        m->weight_bytes += (uint64_t)cols * (uint64_t)rows *
                           (w->type == LC_TYPE_F16 || w->type == LC_TYPE_BF16 ? 2u : 4u);
    return LC_OK;
}

static int load_weights(lc_model *m, const lc_model_params *p) {
    const lc_hparams *hp = &m->hp;
    const int64_t     E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim,
                  KV = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff, V = hp->n_vocab;
    /* progress counts the tensors the file holds of those read here (optional ones, the
       biases and output.weight, only when present), so the total is the file's */
    static const char *const layer_names[] = {
        "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
        "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
        "ffn_down.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"};
    int64_t total = 2 + (lc_gguf_find_tensor(m->gguf, "output.weight") != NULL);
    for (int32_t l = 0; l < hp->n_layer; l++)
        for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, layer_names[i]);
            total += i < 9 || lc_gguf_find_tensor(m->gguf, name) != NULL;
        }
    int64_t done = 0;
    int     st;
#define PROGRESS()                                                                            \
    do {                                                                                      \
        done++;                                                                               \
        if (p->progress) p->progress(done, total, p->progress_user);                          \
    } while (0)
    if ((st = load_tensor(m, "token_embd.weight", E, V, true, &m->tok_embd)) != LC_OK) return st;
    PROGRESS();
    if ((st = load_tensor(m, "output_norm.weight", E, 1, true, &m->output_norm)) != LC_OK)
        return st;
    PROGRESS();
    if ((st = load_tensor(m, "output.weight", E, V, false, &m->output)) != LC_OK) return st;
    if (!m->output.data) {
        m->output      = m->tok_embd;
        m->output_tied = true;
    } else {
        PROGRESS();
    }
    m->layers = lc_calloc((size_t)hp->n_layer, sizeof *m->layers, "layer weights");
    if (!m->layers) return LC_ERR_NOMEM;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        lc_layer_weights *L = &m->layers[l];
        struct {
            const char *name;
            int64_t     cols, rows;
            bool        required;
            lc_weight  *w;
        } specs[] = {
            {"attn_norm.weight", E, 1, true, &L->attn_norm}, {"attn_q.weight", E, Q, true, &L->wq},
            {"attn_k.weight", E, KV, true, &L->wk},          {"attn_v.weight", E, KV, true, &L->wv},
            {"attn_output.weight", Q, E, true, &L->wo},      {"ffn_norm.weight", E, 1, true, &L->ffn_norm},
            {"ffn_gate.weight", E, F, true, &L->w_gate},     {"ffn_up.weight", E, F, true, &L->w_up},
            {"ffn_down.weight", F, E, true, &L->w_down},     {"attn_q.bias", Q, 1, false, &L->bq},
            {"attn_k.bias", KV, 1, false, &L->bk},           {"attn_v.bias", KV, 1, false, &L->bv},
        };
        for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, specs[i].name);
            if ((st = load_tensor(m, name, specs[i].cols, specs[i].rows, specs[i].required,
                                  specs[i].w)) != LC_OK)
                return st;
            if (specs[i].required || specs[i].w->data) PROGRESS();
        }
    }
#undef PROGRESS
    /* rope_freqs (llama-3.x long-context frequency factors) */
    const lc_gguf_tensor *rf = lc_gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf) {
        if (rf->type != LC_TYPE_F32)
            return lc_fail(LC_ERR_FORMAT, "model: rope_freqs.weight must be f32 [%d]", hp->n_rot / 2);
        if ((st = check_tensor(rf, hp->n_rot / 2, 1)) != LC_OK) return st;
        for (int32_t i = 0; i < hp->n_rot / 2; i++) {
            float f;
            memcpy(&f, (const char *)rf->data + sizeof(float) * (size_t)i, sizeof f);
            if (!(f > 0.0f) || !isfinite(f))
                return lc_fail(LC_ERR_FORMAT, "model: rope_freqs.weight[%d] = %g (must be finite "
                               "and > 0)", i, (double)f);
        }
        m->rope_freq_factors = lc_malloc(sizeof(float) * (size_t)(hp->n_rot / 2), "rope freqs");
        if (!m->rope_freq_factors) return LC_ERR_NOMEM;
        memcpy(m->rope_freq_factors, rf->data, sizeof(float) * (size_t)(hp->n_rot / 2));
    }
    return LC_OK;
}

/* block_count against the tensor table, before anything is sized or looped by it: every
 * layer has 9 required tensors, and the last layer's must be there. */
static int check_block_count(const lc_model *m) {
    char last[64];
    snprintf(last, sizeof last, "blk.%d.attn_norm.weight", m->hp.n_layer - 1);
    const bool found = lc_gguf_find_tensor(m->gguf, last) != NULL;
    if ((int64_t)m->hp.n_layer * 9 > lc_gguf_n_tensors(m->gguf) || !found)
        return lc_fail(LC_ERR_FORMAT, "model: block_count %d does not match the tensor table "
                       "(%lld tensors; %s %s)", m->hp.n_layer,
                       (long long)lc_gguf_n_tensors(m->gguf), last, found ? "present" : "missing");
    return LC_OK;
}

/* ---- public API ------------------------------------------------------------------------ */

lc_model_params lc_model_default_params(void) {
    lc_model_params p = {LC_DEVICE_AUTO, 0, LC_WEIGHTS_AUTO, NULL, NULL, LC_PROFILE_OFF, false,
                         lc_tuning_default()};
    return p;
}

static void free_weight(lc_model *m, lc_weight *w) {
    if (w->data) m->backend->weight_free(m->backend, w);
}

void lc_model_retain(lc_model *m) { atomic_fetch_add(&m->refs, 1); }

static void model_destroy(lc_model *m);

void lc_model_release(lc_model *m) {
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) model_destroy(m);
}

void lc_model_free(lc_model *m) { lc_model_release(m); }

static void model_destroy(lc_model *m) {
    if (m->backend) {
        if (m->layers) {
            for (int32_t l = 0; l < m->hp.n_layer; l++) {
                lc_weight *ws[] = {&m->layers[l].attn_norm, &m->layers[l].wq, &m->layers[l].wk,
                                   &m->layers[l].wv, &m->layers[l].wo, &m->layers[l].ffn_norm,
                                   &m->layers[l].w_gate, &m->layers[l].w_up, &m->layers[l].w_down,
                                   &m->layers[l].bq, &m->layers[l].bk, &m->layers[l].bv};
                for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) free_weight(m, ws[i]);
            }
        }
        if (!m->output_tied) free_weight(m, &m->output);
        free_weight(m, &m->tok_embd);
        free_weight(m, &m->output_norm);
        m->backend->free(m->backend);
    }
    free(m->layers);
    free(m->rope_freq_factors);
    free(m->default_system);
    lc_tokenizer_free(m->tokenizer);
    lc_gguf_close(m->gguf);
    free(m);
}

int lc_model_load(const char *path, const lc_model_params *params, lc_model **out) {
    lc_clear_error();
    if (!path || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_load: NULL argument");
    *out                = NULL;
    lc_model_params def = lc_model_default_params();
    const lc_model_params *p = params ? params : &def;
    int st = lc_tuning_check(&p->tuning);
    if (st != LC_OK) return st;
    lc_model *m = lc_calloc(1, sizeof *m, "model");
    if (!m) return LC_ERR_NOMEM;
    atomic_init(&m->refs, 1);
    st = lc_gguf_open(path, &m->gguf);
    if (st != LC_OK) goto fail;
    if ((st = lc_hparams_read(m->gguf, &m->hp)) != LC_OK) goto fail;
    if ((st = check_block_count(m)) != LC_OK) goto fail;
    if ((st = lc_tokenizer_load(m->gguf, &m->tokenizer)) != LC_OK) goto fail;
    m->hp.n_vocab = lc_tokenizer_n_vocab(m->tokenizer);
    {
        const char *tmpl;
        size_t      tmpl_len;
        m->chat_template = LC_CHAT_TEMPLATE_NONE;
        if (lc_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &tmpl_len) == LC_OK) {
            char *s = lc_malloc(tmpl_len + 1, "chat template");
            if (!s) {
                st = LC_ERR_NOMEM;
                goto fail;
            }
            memcpy(s, tmpl, tmpl_len);
            s[tmpl_len] = '\0';
            if (lc_chat_template_detect(s, &m->chat_template) != LC_OK) {
                m->chat_template = LC_CHAT_TEMPLATE_NONE;
                snprintf(m->chat_template_why, sizeof m->chat_template_why, "%s",
                         lc_last_error());
            }
            if (m->chat_template == LC_CHAT_TEMPLATE_CHATML) lc_chat_default_system(s, &m->default_system);
            free(s);
            lc_clear_error();
        }
    }
    if (p->profile < LC_PROFILE_OFF || p->profile > LC_PROFILE_OPS) {
        st = lc_fail(LC_ERR_INVALID_ARG, "lc_model_load: profile mode %d unknown", p->profile);
        goto fail;
    }
    if (p->device == LC_DEVICE_CUDA || p->device == LC_DEVICE_AUTO) {
        st = lc_backend_cuda_create(0, &m->backend);
        if (st != LC_OK && p->device == LC_DEVICE_CUDA) goto fail;
        if (st != LC_OK) lc_clear_error(); /* auto: no GPU, use the CPU */
        if (st == LC_OK && p->weights == LC_WEIGHTS_F32) {
            st = lc_fail(LC_ERR_INVALID_ARG, "the CUDA backend holds weights as stored or in 16 "
                         "bits (--weights auto, native, f16 or bf16); f32 is a CPU option");
            goto fail;
        }
        if (st == LC_OK && p->weights == LC_WEIGHTS_F16) m->backend->weight_type = LC_TYPE_F16;
        if (st == LC_OK && p->weights == LC_WEIGHTS_BF16) m->backend->weight_type = LC_TYPE_BF16;
    }
    if (!m->backend) {
        if (p->weights == LC_WEIGHTS_BF16) {
            st = lc_fail(LC_ERR_INVALID_ARG, "--weights bf16 is a CUDA option (the CPU holds f32 "
                         "or f16)");
            goto fail;
        }
        if ((st = lc_backend_cpu_create(p->n_threads, &m->backend)) != LC_OK) goto fail;
        /* auto: the file's own types (resident memory about the file's size, and with the
         * AVX-512 kernels the fastest decode); on a CPU without them f32 where its copy fits
         * in memory (the portable dequantisers are slower than OpenBLAS on f32), else native.
         * f32 is the exact reference. */
        m->backend->weight_type = p->weights == LC_WEIGHTS_F16   ? LC_TYPE_F16
                                  : p->weights == LC_WEIGHTS_F32 ? LC_TYPE_F32
                                                                 : LC_WEIGHT_NATIVE;
        if (p->weights == LC_WEIGHTS_AUTO && !m->backend->native_fast) {
            m->backend->weight_type = LC_TYPE_F32;
            if (lc_budget_check_weights(m) != LC_OK) {
                lc_clear_error();
                m->backend->weight_type = LC_WEIGHT_NATIVE;
            }
            lc_log(LC_LOG_INFO, "weights: %s (this CPU has no AVX-512 kernels for them as "
                   "stored%s)", m->backend->weight_type == LC_TYPE_F32 ? "f32" : "native",
                   m->backend->weight_type == LC_TYPE_F32 ? "" : "; the f32 copy does not fit");
        }
    }
    m->backend->tuning = p->tuning;
    /* ops replayed from a captured CUDA graph cannot be timed one by one */
    if (p->profile == LC_PROFILE_OPS) m->backend->tuning.no_cuda_graphs = true;
    if (p->profile != LC_PROFILE_OFF) { /* (the wrapper starts as a copy, tuning included) */
        lc_backend *wrapped;
        if ((st = lc_backend_profile_wrap(m->backend, p->profile == LC_PROFILE_OPS, &wrapped)) !=
            LC_OK)
            goto fail;
        m->backend = wrapped;
    }
    /* the weights as the backend will hold them, against its memory, before any is loaded */
    if (!p->overcommit && (st = lc_budget_check_weights(m)) != LC_OK) goto fail;
    if ((st = load_weights(m, p)) != LC_OK) goto fail;
    *out = m;
    return LC_OK;
fail:
    {
        /* keep the message of the first failure */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", lc_last_error());
        lc_model_free(m);
        lc_fail(st, "%s", msg);
    }
    return st;
}

int lc_model_get_info(const lc_model *m, lc_model_info *info) {
    if (!m || !info) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_get_info: NULL argument");
    memset(info, 0, sizeof *info);
    snprintf(info->arch, sizeof info->arch, "%s", m->hp.arch);
    const char *name;
    size_t      len;
    if (lc_gguf_get_str(m->gguf, "general.name", &name, &len) == LC_OK)
        snprintf(info->name, sizeof info->name, "%.*s", (int)len, name);
    info->n_layer        = m->hp.n_layer;
    info->n_embd         = m->hp.n_embd;
    info->n_head         = m->hp.n_head;
    info->n_head_kv      = m->hp.n_head_kv;
    info->head_dim       = m->hp.head_dim;
    info->n_ff           = m->hp.n_ff;
    info->n_vocab        = m->hp.n_vocab;
    info->n_ctx_train    = m->hp.n_ctx_train;
    info->rope_freq_base = m->hp.rope_base;
    info->norm_eps       = m->hp.norm_eps;
    info->n_params       = m->n_params;
    info->weight_bytes   = m->weight_bytes;
    info->device         = m->backend->device;
    info->n_threads      = m->backend->n_threads;
    return LC_OK;
}

int lc_model_profile(const lc_model *m, lc_profile_report *out) {
    if (!m) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_profile: NULL model");
    return lc_backend_profile_get(m->backend, out);
}

int lc_model_profile_reset(lc_model *m) {
    if (!m) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_profile_reset: NULL model");
    return lc_backend_profile_reset(m->backend);
}

int lc_model_memory(lc_model *m, lc_memory_report *out) {
    if (!m) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_memory: NULL model");
    return lc_backend_profile_memory(m->backend, out);
}

int lc_model_device_name(const lc_model *m, char *buf, size_t cap) {
    if (!m || !buf || !cap) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_device_name: bad argument");
    lc_backend_device_name(m->backend, buf, cap);
    return LC_OK;
}

const lc_tokenizer *lc_model_tokenizer(const lc_model *m) { return m ? m->tokenizer : NULL; }

lc_chat_template lc_model_chat_template(const lc_model *m) {
    return m ? m->chat_template : LC_CHAT_TEMPLATE_NONE;
}

int lc_model_chat_format(const lc_model *m, lc_chat_template tmpl, const lc_chat_message *msgs,
                         size_t n_msgs, bool add_assistant, char **out) {
    return lc_model_chat_format_spans(m, tmpl, msgs, n_msgs, add_assistant, out, NULL, NULL);
}

int lc_model_chat_tokenize(const lc_model *m, lc_chat_template tmpl, const lc_chat_message *msgs,
                           size_t n_msgs, bool add_assistant, int32_t **ids, size_t *n_ids) {
    if (!m || !ids || !n_ids)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_model_chat_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    lc_text_span *spans = NULL;
    size_t n_spans = 0;
    int rc = lc_model_chat_format_spans(m, tmpl, msgs, n_msgs, add_assistant, &text, &spans,
                                        &n_spans);
    if (rc == LC_OK)
        rc = lc_tokenizer_encode_spans(m->tokenizer, text, strlen(text),
                                       lc_tokenizer_add_bos(m->tokenizer), spans, n_spans, ids,
                                       n_ids);
    free(spans);
    free(text);
    return rc;
}

/* spans and n_spans may both be NULL (lc_model_chat_format). */
int lc_model_chat_format_spans(const lc_model *m, lc_chat_template tmpl,
                               const lc_chat_message *msgs, size_t n_msgs, bool add_assistant,
                               char **out, lc_text_span **spans, size_t *n_spans) {
    if (!m || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_model_chat_format: NULL argument");
    const char *def = NULL;
    if (tmpl == LC_CHAT_TEMPLATE_NONE) {
        tmpl = m->chat_template;
        def  = m->default_system;
    }
    if (tmpl == LC_CHAT_TEMPLATE_NONE)
        return lc_fail(LC_ERR_NOT_FOUND, "%s",
                       m->chat_template_why[0] ? m->chat_template_why
                                               : "the model has no chat template "
                                                 "(tokenizer.chat_template); name one with "
                                                 "--chat-template NAME (chatml, llama3, "
                                                 "llama3.1, mistral, gemma, phi3)");
    return lc_chat_format_spans_ex(tmpl, def, msgs, n_msgs, add_assistant, out, spans, n_spans);
}
