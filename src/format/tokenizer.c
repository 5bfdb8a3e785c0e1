/*
 * tokenizer.c — the tokenizer described by a GGUF file's tokenizer.ggml.* metadata
 * (spec/ecosystem-and-style.md §1.5):
 *   - byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, SmolLM2, Llama-3, Qwen2): the
 *     text is split into special tokens and raw fragments, each fragment is pre-split by the
 *     regex family named by tokenizer.ggml.pre (PCRE2, Unicode properties, JIT), each piece's
 *     bytes are mapped to printable code points (GPT-2 bytes_to_unicode) and merged pairwise,
 *     lowest merge rank first (priority queue over a linked list of symbols, hash map from the
 *     id pair to its rank and result);
 *   - SentencePiece-style BPE (model = "llama"): spaces become U+2581 "▁", a dummy "▁" prefix
 *     (add_space_prefix), adjacent symbols merged highest score first, characters outside the
 *     vocabulary fall back to <0xAB> byte tokens.
 * Special tokens follow llama.cpp (tokenizer_st_partition): control/unknown tokens are cut out
 * of the text only with parse_special; user-defined tokens always; longer tokens first.
 * Decoding precomputes each token's raw bytes; lc_detok_* streams whole UTF-8 characters.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "format/gguf.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ------------------------------------------------------------------------------- */

/* Classify the sequence at s[0..n): 1 = a valid character of *len bytes; 0 = a valid but
 * incomplete prefix that runs to the end of the buffer (*len = n); -1 = invalid, *len = the
 * length of the maximal ill-formed subpart to replace by one U+FFFD (>= 1). Strict UTF-8: no
 * overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_classify(const unsigned char *s, size_t n, size_t *len) {
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *len = 1;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *len = 1;
        return -1;
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= n) {
            *len = n;
            return 0;
        }
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) {
            *len = k;
            return -1;
        }
    }
    *len = need;
    return 1;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decode one valid character (caller validated). */
static uint32_t utf8_decode(const unsigned char *s, size_t *len) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *len = 1;
        return c;
    } else if (c < 0xE0) {
        *len = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    } else if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

/* ---- hashing ----------------------------------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n) {
    /* FNV-1a over 8-byte words, then a final mix: fast enough for token-sized keys. */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n * 2)
        c <<= 1;
    return c;
}

/* ---- the tokenizer ----------------------------------------------------------------------- */

enum { TOK_BPE = 1, TOK_SPM = 2 };
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct merge_slot {
    uint64_t key; /* (left id << 32) | right id; UINT64_MAX when empty */
    int32_t rank;
    int32_t result;
} merge_slot;

typedef struct trie_node {
    int32_t child;   /* first child, -1 if none */
    int32_t sibling; /* next sibling, -1 if none */
    int32_t token;   /* special token ending here, -1 if none */
    unsigned char byte;
} trie_node;

#define LC_MAX_REGEX 4

struct lc_tokenizer {
    int kind;
    int32_t n_vocab;

    char *text;          /* all token texts, each NUL-terminated */
    uint64_t *text_off;  /* [n_vocab] */
    uint32_t *text_len;  /* [n_vocab] */
    char *bytes;         /* decoded bytes of every token */
    uint64_t *bytes_off; /* [n_vocab] */
    uint32_t *bytes_len; /* [n_vocab] */
    uint8_t *type;       /* [n_vocab] token_type */
    float *score;        /* [n_vocab] (SPM) */
    bool *eog;           /* [n_vocab] */

    int32_t *map_id; /* text -> id, open addressing; -1 empty */
    uint32_t map_mask;

    merge_slot *merges; /* (left, right) -> rank, result */
    uint32_t merge_mask;

    int32_t byte_char_id[256]; /* BPE: id of the mapped character of each byte, -1 if none */
    int32_t byte_tok[256];     /* SPM: id of <0xAB> (or the raw byte), -1 if none */
    uint32_t byte_cp[256];     /* BPE bytes_to_unicode */
    int16_t cp_byte[512];      /* inverse for code points < 512, -1 if unmapped */

    int32_t bos, eos, eot, eom, unk, pad, sep;
    bool add_bos, add_space_prefix, ignore_merges;

    trie_node *trie; /* root is node 0 */
    int32_t n_trie;
    int32_t *special_order; /* [n_vocab] position of a special token in the longest-first
                               order, -1 when not special */

    pcre2_code *re[LC_MAX_REGEX];
    int n_re;
    bool jit;
    char pre[64];
};

static const char *tok_text(const lc_tokenizer *t, int32_t id) {
    return t->text + t->text_off[id];
}

static int32_t map_find(const lc_tokenizer *t, const char *s, size_t n) {
    if (!t->map_id) return -1;
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->map_mask;
    for (;;) {
        int32_t id = t->map_id[i];
        if (id < 0) return -1;
        if (t->text_len[id] == n && memcmp(tok_text(t, id), s, n) == 0) return id;
        i = (i + 1) & t->map_mask;
    }
}

/* Insert; a duplicate text maps to the later id (as llama.cpp's token_to_id). */
static void map_insert(lc_tokenizer *t, int32_t id) {
    const char *s = tok_text(t, id);
    size_t n = t->text_len[id];
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->map_mask;
    for (;;) {
        int32_t cur = t->map_id[i];
        if (cur < 0 || (t->text_len[cur] == n && memcmp(tok_text(t, cur), s, n) == 0)) {
            t->map_id[i] = id;
            return;
        }
        i = (i + 1) & t->map_mask;
    }
}

static const merge_slot *merge_find(const lc_tokenizer *t, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = (uint32_t)hash_u64(key) & t->merge_mask;
    for (;;) {
        const merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & t->merge_mask;
    }
}

/* Returns false when the pair is already present (the earlier, lower rank wins). */
static bool merge_insert(lc_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t result) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = (uint32_t)hash_u64(key) & t->merge_mask;
    for (;;) {
        merge_slot *s = &t->merges[i];
        if (s->key == key) return false;
        if (s->key == UINT64_MAX) {
            s->key = key;
            s->rank = rank;
            s->result = result;
            return true;
        }
        i = (i + 1) & t->merge_mask;
    }
}

void lc_tokenizer_free(lc_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    free(t->text);
    free(t->text_off);
    free(t->text_len);
    free(t->bytes);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->type);
    free(t->score);
    free(t->eog);
    free(t->map_id);
    free(t->merges);
    free(t->trie);
    free(t->special_order);
    free(t);
}

/* ---- loading ----------------------------------------------------------------------------- */

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * 256, 257, ... in byte order (space -> U+0120 "Ġ", '\n' -> U+010A "Ċ"). */
static void init_byte_map(lc_tokenizer *t) {
    uint32_t next = 256;
    for (int i = 0; i < 512; i++)
        t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        t->byte_cp[b] = keep ? (uint32_t)b : next++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
}

/* Optional special-token id: absent -> keeps *id; -1 stored as a signed value -> none. */
static int read_special_id(const lc_gguf *g, const char *key, int32_t n_vocab, int32_t *id) {
    int64_t k = lc_gguf_find_key(g, key);
    if (k < 0) return LC_OK;
    lc_gguf_type ty = lc_gguf_kv_type(g, k);
    int64_t v;
    if (ty == LC_GGUF_TYPE_INT32 || ty == LC_GGUF_TYPE_INT64 || ty == LC_GGUF_TYPE_INT8 ||
        ty == LC_GGUF_TYPE_INT16) {
        int32_t x;
        int rc = lc_gguf_get_i32(g, key, &x);
        if (rc != LC_OK) return rc;
        v = x;
    } else {
        uint32_t x;
        int rc = lc_gguf_get_u32(g, key, &x);
        if (rc != LC_OK) return rc;
        v = x;
    }
    if (v == -1) {
        *id = -1;
        return LC_OK;
    }
    if (v < 0 || v >= n_vocab)
        return lc_fail(LC_ERR_FORMAT, "%s: token id %lld out of range (vocabulary has %d tokens)",
                       key, (long long)v, (int)n_vocab);
    *id = (int32_t)v;
    return LC_OK;
}

static int read_bool(const lc_gguf *g, const char *key, bool *out) {
    int rc = lc_gguf_get_bool(g, key, out);
    return rc == LC_ERR_NOT_FOUND ? LC_OK : rc;
}

/* Pre-tokenizer regexes. \s and \S are widened by U+0085, which is White_Space in Unicode,
 * in llama.cpp and in Hugging Face tokenizers but not in PCRE2's UCP \s. */
#define WS "\\s\\x{85}"
#define RE_GPT2                                                                                    \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])"
#define RE_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS                               \
                "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS     \
                "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

typedef struct pre_family {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[2];
    bool ignore_merges;
    bool add_bos;
} pre_family;

static const pre_family k_pre[] = {
    {"default|gpt2|gpt-2|mpt|olmo|jais", {RE_GPT2, NULL}, false, false},
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva",
     {"\\p{N}", RE_GPT2},
     false,
     false},
    {"llama-bpe|llama3|llama-v3|smaug-bpe|dbrx", {RE_LLAMA3, NULL}, true, true},
    {"qwen2|stablelm2|deepseek-r1-qwen", {RE_QWEN2, NULL}, false, false},
};

static bool name_in_list(const char *list, const char *name, size_t n) {
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static int compile_regex(lc_tokenizer *t, const char *pattern) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lc_fail(LC_ERR_INTERNAL,
                       "tokenizer: pre-tokenizer regex does not compile at %zu: %s", (size_t)off,
                       (const char *)msg);
    }
    t->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    t->re[t->n_re++] = re;
    return LC_OK;
}

/* Token types and texts are loaded; compute the raw bytes each token stands for. */
static int build_token_bytes(lc_tokenizer *t) {
    uint64_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        total += t->text_len[i];
    t->bytes = lc_malloc(total + 1, "token bytes");
    t->bytes_off = lc_malloc((size_t)t->n_vocab * sizeof *t->bytes_off, "token bytes");
    t->bytes_len = lc_malloc((size_t)t->n_vocab * sizeof *t->bytes_len, "token bytes");
    if (!t->bytes || !t->bytes_off || !t->bytes_len) return LC_ERR_NOMEM;
    uint64_t pos = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const unsigned char *s = (const unsigned char *)tok_text(t, i);
        size_t n = t->text_len[i];
        char *o = t->bytes + pos;
        size_t m = 0;
        int ty = t->type[i];
        t->bytes_off[i] = pos;
        if (ty == TT_CONTROL || ty == TT_USER) {
            memcpy(o, s, n);
            m = n;
        } else if (t->kind == TOK_SPM && ty == TT_BYTE && n == 6 && s[0] == '<' && s[1] == '0' &&
                   s[2] == 'x' && s[5] == '>') {
            unsigned v;
            if (sscanf((const char *)s + 3, "%2x", &v) == 1) {
                o[0] = (char)v;
                m = 1;
            } else {
                memcpy(o, s, n);
                m = n;
            }
        } else if (t->kind == TOK_SPM) {
            for (size_t k = 0; k < n;) {
                if (k + 3 <= n && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
                    o[m++] = ' ';
                    k += 3;
                } else {
                    o[m++] = (char)s[k++];
                }
            }
        } else {
            /* byte-level: map code points back to bytes; anything unmapped stays as is */
            for (size_t k = 0; k < n;) {
                size_t l;
                int c = utf8_classify(s + k, n - k, &l);
                if (c == 1) {
                    size_t l2;
                    uint32_t cp = utf8_decode(s + k, &l2);
                    if (cp < 512 && t->cp_byte[cp] >= 0) {
                        o[m++] = (char)t->cp_byte[cp];
                        k += l;
                        continue;
                    }
                }
                memcpy(o + m, s + k, l);
                m += l;
                k += l;
            }
        }
        t->bytes_len[i] = (uint32_t)m;
        pos += m;
    }
    return LC_OK;
}

static int u64_cmp(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int build_specials(lc_tokenizer *t) {
    /* order: longer first, then lower id (llama.cpp sorts by length only) */
    int32_t n_sp = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int ty = t->type[i];
        if ((ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) && t->text_len[i] > 0) n_sp++;
    }
    t->special_order = lc_malloc((size_t)t->n_vocab * sizeof(int32_t), "special tokens");
    if (!t->special_order) return LC_ERR_NOMEM;
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->special_order[i] = -1;
    uint64_t trie_cap = 1;
    int32_t *ids = lc_malloc((size_t)(n_sp ? n_sp : 1) * sizeof(int32_t), "special tokens");
    if (!ids) return LC_ERR_NOMEM;
    int32_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int ty = t->type[i];
        if ((ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) && t->text_len[i] > 0) {
            ids[k++] = i;
            trie_cap += t->text_len[i];
        }
    }
    /* longest first, then lowest id: sort keys (UINT32_MAX - length) << 32 | id */
    uint64_t *keys = lc_malloc((size_t)(n_sp ? n_sp : 1) * sizeof *keys, "special tokens");
    if (!keys) {
        free(ids);
        return LC_ERR_NOMEM;
    }
    for (int32_t a = 0; a < n_sp; a++)
        keys[a] = ((uint64_t)(UINT32_MAX - t->text_len[ids[a]]) << 32) | (uint32_t)ids[a];
    qsort(keys, (size_t)n_sp, sizeof *keys, u64_cmp);
    for (int32_t a = 0; a < n_sp; a++)
        ids[a] = (int32_t)(uint32_t)keys[a];
    free(keys);
    for (int32_t a = 0; a < n_sp; a++)
        t->special_order[ids[a]] = a;
    if (trie_cap > INT32_MAX) {
        free(ids);
        return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.tokens: special tokens too long");
    }
    t->trie = lc_malloc((size_t)trie_cap * sizeof(trie_node), "special token trie");
    if (!t->trie) {
        free(ids);
        return LC_ERR_NOMEM;
    }
    t->trie[0] = (trie_node){-1, -1, -1, 0};
    t->n_trie = 1;
    for (int32_t a = 0; a < n_sp; a++) {
        const unsigned char *s = (const unsigned char *)tok_text(t, ids[a]);
        int32_t node = 0;
        for (uint32_t j = 0; j < t->text_len[ids[a]]; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != s[j])
                c = t->trie[c].sibling;
            if (c < 0) {
                c = t->n_trie++;
                t->trie[c] = (trie_node){-1, t->trie[node].child, -1, s[j]};
                t->trie[node].child = c;
            }
            node = c;
        }
        if (t->trie[node].token < 0) t->trie[node].token = ids[a];
    }
    free(ids);
    return LC_OK;
}

/* The optional per-token array key: n elements of type et or et2 (expected: their name in a
 * message); *data their packed bytes, or NULL where the file has no such key. */
static int token_array(const lc_gguf *g, const char *key, uint64_t n, lc_gguf_type et,
                       lc_gguf_type et2, const char *expected, const void **data) {
    *data = NULL;
    lc_gguf_type t;
    uint64_t     m;
    int          rc = lc_gguf_get_arr(g, key, &t, &m);
    if (rc == LC_ERR_NOT_FOUND) return LC_OK;
    if (rc != LC_OK) return rc;
    if (t != et && t != et2)
        return lc_fail(LC_ERR_FORMAT, "%s: array of %s, expected %s", key, lc_gguf_type_name(t),
                       expected);
    if (m != n)
        return lc_fail(LC_ERR_FORMAT, "%s: %llu entries for %llu tokens", key,
                       (unsigned long long)m, (unsigned long long)n);
    return lc_gguf_get_arr_data(g, key, t, data, &m);
}

static int load_impl(lc_tokenizer *t, const lc_gguf *g) {
    const char *model;
    size_t model_len;
    int rc = lc_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len);
    if (rc == LC_ERR_NOT_FOUND)
        return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.model: missing (no tokenizer in this file)");
    if (rc != LC_OK) return rc;
    if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) {
        t->kind = TOK_BPE;
    } else if (model_len == 5 && memcmp(model, "llama", 5) == 0) {
        t->kind = TOK_SPM;
    } else {
        char esc[96];
        return lc_fail(LC_ERR_UNSUPPORTED,
                       "tokenizer.ggml.model: '%s' is not supported (gpt2 or llama)",
                       lc_text_escape(esc, sizeof esc, model, model_len));
    }

    /* vocabulary */
    lc_gguf_type et;
    uint64_t n;
    rc = lc_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n);
    if (rc == LC_ERR_NOT_FOUND) return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.tokens: missing");
    if (rc != LC_OK) return rc;
    if (et != LC_GGUF_TYPE_STRING)
        return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.tokens: array of %s, expected string",
                       lc_gguf_type_name(et));
    if (n == 0 || n > (uint64_t)INT32_MAX / 2)
        return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens", (unsigned long long)n);
    t->n_vocab = (int32_t)n;
    t->text_off = lc_malloc(n * sizeof *t->text_off, "token table");
    t->text_len = lc_malloc(n * sizeof *t->text_len, "token table");
    t->type = lc_malloc(n, "token types");
    t->score = lc_calloc(n, sizeof *t->score, "token scores");
    t->eog = lc_calloc(n, sizeof *t->eog, "token flags");
    if (!t->text_off || !t->text_len || !t->type || !t->score || !t->eog) return LC_ERR_NOMEM;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t l;
        rc = lc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &l);
        if (rc != LC_OK) return rc;
        if (l > UINT32_MAX / 4)
            return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.tokens: token %llu too long",
                           (unsigned long long)i);
        t->text_off[i] = total;
        t->text_len[i] = (uint32_t)l;
        total += l + 1;
    }
    t->text = lc_malloc(total, "token texts");
    if (!t->text) return LC_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t l;
        rc = lc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &l);
        if (rc != LC_OK) return rc;
        memcpy(t->text + t->text_off[i], s, l);
        t->text[t->text_off[i] + l] = '\0';
    }

    /* token types (default: normal) */
    memset(t->type, TT_NORMAL, n);
    uint64_t    m;
    const void *data;
    rc = token_array(g, "tokenizer.ggml.token_type", n, LC_GGUF_TYPE_INT32, LC_GGUF_TYPE_UINT32,
                     "i32", &data);
    if (rc != LC_OK) return rc;
    if (data) {
        for (uint64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, (const char *)data + i * 4, 4);
            if (v < 0 || v > TT_BYTE)
                return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.token_type: token %llu has type %d",
                               (unsigned long long)i, (int)v);
            t->type[i] = (uint8_t)(v == 0 ? TT_NORMAL : v);
        }
    }

    /* scores (SPM) */
    rc = token_array(g, "tokenizer.ggml.scores", n, LC_GGUF_TYPE_FLOAT32, LC_GGUF_TYPE_FLOAT32,
                     "f32", &data);
    if (rc != LC_OK) return rc;
    if (data) memcpy(t->score, data, n * sizeof(float));

    /* text -> id */
    uint32_t cap = pow2_at_least(n);
    t->map_id = lc_malloc((size_t)cap * sizeof(int32_t), "token map");
    if (!t->map_id) return LC_ERR_NOMEM;
    memset(t->map_id, 0xFF, (size_t)cap * sizeof(int32_t));
    t->map_mask = cap - 1;
    for (int32_t i = 0; i < t->n_vocab; i++)
        map_insert(t, i);

    /* special ids and flags */
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = t->sep = -1;
    if (t->kind == TOK_SPM) {
        if (n > 0) t->unk = 0;
        if (n > 1) t->bos = 1;
        if (n > 2) t->eos = 2;
    }
    struct {
        const char *key;
        int32_t *id;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", &t->bos},
        {"tokenizer.ggml.eos_token_id", &t->eos},
        {"tokenizer.ggml.eot_token_id", &t->eot},
        {"tokenizer.ggml.eom_token_id", &t->eom},
        {"tokenizer.ggml.unknown_token_id", &t->unk},
        {"tokenizer.ggml.padding_token_id", &t->pad},
        {"tokenizer.ggml.seperator_token_id", &t->sep},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        rc = read_special_id(g, ids[i].key, t->n_vocab, ids[i].id);
        if (rc != LC_OK) return rc;
    }

    const pre_family *fam = NULL;
    if (t->kind == TOK_BPE) {
        const char *pre = "default";
        size_t pre_len = 7;
        rc = lc_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len);
        if (rc == LC_ERR_NOT_FOUND) {
            pre = "default";
            pre_len = 7;
        } else if (rc != LC_OK) {
            return rc;
        }
        lc_text_escape(t->pre, sizeof t->pre, pre, pre_len); /* for messages only */
        for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
            if (name_in_list(k_pre[i].names, pre, pre_len)) fam = &k_pre[i];
        if (!fam) {
            lc_log(LC_LOG_WARN,
                   "tokenizer.ggml.pre: unknown pre-tokenizer '%s', using the GPT-2 split rules "
                   "(tokenization may differ from the model's)",
                   t->pre);
            fam = &k_pre[0];
        }
        t->ignore_merges = fam->ignore_merges;
        t->add_bos = fam->add_bos;
    } else {
        snprintf(t->pre, sizeof t->pre, "spm");
        t->add_bos = true;
        t->add_space_prefix = true;
    }
    rc = read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    if (rc != LC_OK) return rc;
    rc = read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if (rc != LC_OK) return rc;
    if (t->add_bos && t->bos < 0) t->add_bos = false;

    /* end-of-generation tokens; like llama.cpp, well-known end texts count as control */
    static const char *k_eog_text[] = {"<|im_end|>", "<|eot_id|>",    "<|end_of_text|>",
                                       "</s>",       "<|endoftext|>", "<|eom_id|>",
                                       "<|end|>",    "<end_of_turn>", "<EOT>"};
    for (size_t i = 0; i < sizeof k_eog_text / sizeof k_eog_text[0]; i++) {
        int32_t id = map_find(t, k_eog_text[i], strlen(k_eog_text[i]));
        if (id >= 0) {
            t->eog[id] = true;
            if (t->type[id] == TT_NORMAL) t->type[id] = TT_CONTROL;
        }
    }
    if (t->eos >= 0) t->eog[t->eos] = true;
    if (t->eot >= 0) t->eog[t->eot] = true;
    if (t->eom >= 0) t->eog[t->eom] = true;

    if (t->kind == TOK_BPE) {
        init_byte_map(t);
        for (int b = 0; b < 256; b++) {
            char buf[4];
            size_t l = utf8_encode(t->byte_cp[b], buf);
            t->byte_char_id[b] = map_find(t, buf, l);
        }
        /* merges */
        rc = lc_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m);
        if (rc == LC_ERR_NOT_FOUND)
            return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.merges: missing (required for gpt2)");
        if (rc != LC_OK) return rc;
        if (et != LC_GGUF_TYPE_STRING)
            return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.merges: array of %s, expected string",
                           lc_gguf_type_name(et));
        if (m > (uint64_t)INT32_MAX / 4)
            return lc_fail(LC_ERR_FORMAT, "tokenizer.ggml.merges: %llu entries",
                           (unsigned long long)m);
        cap = pow2_at_least(m);
        t->merges = lc_malloc((size_t)cap * sizeof(merge_slot), "merge table");
        if (!t->merges) return LC_ERR_NOMEM;
        for (uint32_t i = 0; i < cap; i++)
            t->merges[i].key = UINT64_MAX;
        t->merge_mask = cap - 1;
        char *buf = NULL;
        size_t buf_cap = 0;
        for (uint64_t i = 0; i < m; i++) {
            const char *s;
            size_t l;
            rc = lc_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &s, &l);
            if (rc != LC_OK) {
                free(buf);
                return rc;
            }
            const char *sp = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
            char esc[96];
            if (!sp) {
                free(buf);
                return lc_fail(LC_ERR_FORMAT,
                               "tokenizer.ggml.merges: entry %llu ('%s') is not 'left right'",
                               (unsigned long long)i, lc_text_escape(esc, sizeof esc, s, l));
            }
            size_t la = (size_t)(sp - s), lb = l - la - 1;
            int32_t a = map_find(t, s, la), b = map_find(t, sp + 1, lb);
            if (la + lb > buf_cap) {
                free(buf);
                buf_cap = (la + lb) * 2 + 64;
                buf = lc_malloc(buf_cap, "merge");
                if (!buf) return LC_ERR_NOMEM;
            }
            memcpy(buf, s, la);
            memcpy(buf + la, sp + 1, lb);
            int32_t r = map_find(t, buf, la + lb);
            if (a < 0 || b < 0 || r < 0) {
                free(buf);
                return lc_fail(LC_ERR_FORMAT,
                               "tokenizer.ggml.merges: entry %llu ('%s') references a token "
                               "that is not in tokenizer.ggml.tokens",
                               (unsigned long long)i, lc_text_escape(esc, sizeof esc, s, l));
            }
            merge_insert(t, a, b, (int32_t)i, r);
        }
        free(buf);
        for (int i = 0; i < 2 && fam->re[i]; i++) {
            rc = compile_regex(t, fam->re[i]);
            if (rc != LC_OK) return rc;
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char buf[8];
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            t->byte_tok[b] = map_find(t, buf, 6);
            if (t->byte_tok[b] < 0) {
                char c = (char)b;
                t->byte_tok[b] = map_find(t, &c, 1);
            }
        }
    }

    rc = build_token_bytes(t);
    if (rc != LC_OK) return rc;
    return build_specials(t);
}

int lc_tokenizer_load(const lc_gguf *g, lc_tokenizer **out) {
    if (!g || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenizer_load: NULL argument");
    *out = NULL;
    lc_tokenizer *t = lc_calloc(1, sizeof *t, "tokenizer");
    if (!t) return LC_ERR_NOMEM;
    int rc = load_impl(t, g);
    if (rc != LC_OK) {
        lc_tokenizer_free(t);
        return rc;
    }
    lc_log(LC_LOG_DEBUG, "tokenizer: %s, pre '%s', %d tokens, bos %d eos %d add_bos %d",
           t->kind == TOK_BPE ? "byte-level BPE" : "SentencePiece BPE", t->pre, (int)t->n_vocab,
           (int)t->bos, (int)t->eos, (int)t->add_bos);
    *out = t;
    return LC_OK;
}

/* ---- accessors --------------------------------------------------------------------------- */

int32_t lc_tokenizer_n_vocab(const lc_tokenizer *t) {
    return t ? t->n_vocab : 0;
}
int32_t lc_tokenizer_bos(const lc_tokenizer *t) {
    return t ? t->bos : -1;
}
int32_t lc_tokenizer_eos(const lc_tokenizer *t) {
    return t ? t->eos : -1;
}
bool lc_tokenizer_add_bos(const lc_tokenizer *t) {
    return t && t->add_bos;
}

bool lc_tokenizer_is_eog(const lc_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && t->eog[id];
}

const char *lc_tokenizer_token_bytes(const lc_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->bytes_len[id];
    return t->bytes + t->bytes_off[id];
}

const char *lc_tokenizer_token_text(const lc_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    return tok_text(t, id);
}

/* ---- encoding ---------------------------------------------------------------------------- */

typedef struct ids_vec {
    int32_t *v;
    size_t n, cap;
} ids_vec;

static int ids_push(ids_vec *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return lc_fail(LC_ERR_NOMEM, "out of memory growing the token list");
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return LC_OK;
}

/* One merge candidate: the pair (left, next[left]) of adjacent symbols. key orders the heap:
 * high 32 bits the priority (BPE: merge rank, lower first; SPM: the negated score, so higher
 * scores first), low 32 bits the left position (left-most first on ties). 16 bytes, so four
 * children of the 4-ary heap share a cache line: long words push millions of candidates. */
typedef struct bigram {
    uint64_t key;
    int32_t a, b; /* BPE: the two symbol ids at push time; SPM: a = 0, b = byte size of the pair */
} bigram;

static uint64_t bigram_key(uint32_t prio, int32_t left) {
    return ((uint64_t)prio << 32) | (uint32_t)left;
}

/* Map a float score to a uint32 that sorts higher scores first. */
static uint32_t score_prio(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending order of f */
    return ~u;
}

/* Per-call cache of pre-token -> ids for long inputs (natural text repeats its words). */
typedef struct wc_slot {
    const char *p; /* the word inside the caller's text; NULL when the slot is empty */
    uint32_t len, off, n;
} wc_slot;

#define WC_MIN_TEXT (64 * 1024) /* inputs shorter than this do not use the cache */
#define WC_MAX_WORD 64
#define WC_SLOTS    (1u << 16)

/* Per-call scratch, grown as needed. */
typedef struct scratch {
    int32_t *id, *prev, *next, *start, *len;
    size_t sym_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
    char *buf;
    size_t buf_cap;
    wc_slot *wc; /* WC_SLOTS entries, or NULL */
    size_t wc_used;
    int32_t *wc_ids;
    size_t wc_n, wc_cap;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
} scratch;

static void scratch_free(scratch *s) {
    free(s->id);
    free(s->prev);
    free(s->next);
    free(s->start);
    free(s->len);
    free(s->heap);
    free(s->buf);
    free(s->wc);
    free(s->wc_ids);
    if (s->md) pcre2_match_data_free(s->md);
    if (s->mctx) pcre2_match_context_free(s->mctx);
    if (s->jstack) pcre2_jit_stack_free(s->jstack);
}

static int scratch_syms(scratch *s, size_t n) {
    if (n <= s->sym_cap) return LC_OK;
    size_t cap = s->sym_cap ? s->sym_cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t **arr[] = {&s->id, &s->prev, &s->next, &s->start, &s->len};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
        int32_t *p = realloc(*arr[i], cap * sizeof(int32_t));
        if (!p) return lc_fail(LC_ERR_NOMEM, "out of memory in the tokenizer");
        *arr[i] = p;
    }
    s->sym_cap = cap;
    return LC_OK;
}

static int scratch_buf(scratch *s, size_t n) {
    if (n <= s->buf_cap) return LC_OK;
    size_t cap = s->buf_cap ? s->buf_cap : 256;
    while (cap < n)
        cap *= 2;
    char *p = realloc(s->buf, cap);
    if (!p) return lc_fail(LC_ERR_NOMEM, "out of memory in the tokenizer");
    s->buf = p;
    s->buf_cap = cap;
    return LC_OK;
}

static int heap_push(scratch *s, bigram g) {
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        bigram *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return lc_fail(LC_ERR_NOMEM, "out of memory in the tokenizer");
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (g.key >= s->heap[p].key) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = g;
    return LC_OK;
}

static bigram heap_pop(scratch *s) {
    bigram top = s->heap[0];
    bigram last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    bigram *h = s->heap;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, e = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < e; k++)
            if (h[k].key < h[best].key) best = k;
        if (h[best].key >= last.key) break;
        h[i] = h[best];
        i = best;
    }
    if (n > 0) h[i] = last;
    return top;
}

static int bpe_try_pair(const lc_tokenizer *t, scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return LC_OK;
    const merge_slot *m = merge_find(t, s->id[l], s->id[r]);
    if (!m) return LC_OK;
    return heap_push(s, (bigram){bigram_key((uint32_t)m->rank, l), s->id[l], s->id[r]});
}

/* A byte whose byte-level symbol is not in the vocabulary (SmolLM2 lacks a few control
 * bytes, e.g. 0x16): as llama.cpp does, emit the tokens spelled by the symbol's individual
 * UTF-8 bytes where they exist, else nothing. The byte is lost either way, but no <unk> (which
 * is <|endoftext|> in some vocabularies) is injected into the prompt. */
static int push_missing_byte(const lc_tokenizer *t, unsigned char byte, ids_vec *out) {
    char         sym[4];
    const size_t m = utf8_encode(t->byte_cp[byte], sym);
    for (size_t k = 0; k < m; k++) {
        const int32_t id = map_find(t, sym + k, 1);
        if (id >= 0) {
            int rc = ids_push(out, id);
            if (rc != LC_OK) return rc;
        }
    }
    return LC_OK;
}

/* Byte-level BPE of one pre-token (raw bytes w[0..n)). */
static int bpe_word(const lc_tokenizer *t, scratch *s, const unsigned char *w, size_t n,
                    ids_vec *out) {
    int rc;
    if (n == 1) {
        int32_t id = t->byte_char_id[w[0]];
        return id >= 0 ? ids_push(out, id) : push_missing_byte(t, w[0], out);
    }
    if (t->ignore_merges) {
        /* the whole piece is a vocabulary entry: emit it as is (Llama-3) */
        if ((rc = scratch_buf(s, n * 2)) != LC_OK) return rc;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += utf8_encode(t->byte_cp[w[i]], s->buf + m);
        int32_t id = map_find(t, s->buf, m);
        if (id >= 0) return ids_push(out, id);
    }
    if (n > (size_t)INT32_MAX - 1) return lc_fail(LC_ERR_INVALID_ARG, "text too long");
    if ((rc = scratch_syms(s, n)) != LC_OK) return rc;
    for (size_t i = 0; i < n; i++) {
        s->id[i] = t->byte_char_id[w[i]];
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((rc = bpe_try_pair(t, s, (int32_t)i, (int32_t)i + 1)) != LC_OK) return rc;
    while (s->heap_n > 0) {
        bigram g = heap_pop(s);
        int32_t l = (int32_t)(uint32_t)g.key, r = s->next[l];
        /* stale: a side was merged since this pair was queued (if the right symbol had been
         * merged into l, id[l] changed; if it merged with its own right, its id changed) */
        if (s->id[l] != g.a || r < 0 || s->id[r] != g.b) continue;
        const merge_slot *m = merge_find(t, g.a, g.b);
        s->id[l] = m->result;
        s->next[l] = s->next[r];
        if (s->next[r] >= 0) s->prev[s->next[r]] = l;
        s->id[r] = -2; /* dead */
        if ((rc = bpe_try_pair(t, s, s->prev[l], l)) != LC_OK) return rc;
        if ((rc = bpe_try_pair(t, s, l, s->next[l])) != LC_OK) return rc;
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        /* only single bytes can lack an id (merge results are vocabulary entries) */
        rc = s->id[i] >= 0 ? ids_push(out, s->id[i]) : push_missing_byte(t, w[i], out);
        if (rc != LC_OK) return rc;
    }
    return LC_OK;
}

/* bpe_word through the per-call word cache (when s->wc is set). */
static int bpe_word_cached(const lc_tokenizer *t, scratch *s, const char *w, size_t n,
                           ids_vec *out) {
    if (!s->wc || n < 2 || n > WC_MAX_WORD) return bpe_word(t, s, (const unsigned char *)w, n, out);
    uint32_t i = (uint32_t)hash_bytes(w, n) & (WC_SLOTS - 1);
    for (;;) {
        wc_slot *e = &s->wc[i];
        if (!e->p) break;
        if (e->len == n && memcmp(e->p, w, n) == 0) {
            for (uint32_t k = 0; k < e->n; k++) {
                int rc = ids_push(out, s->wc_ids[e->off + k]);
                if (rc != LC_OK) return rc;
            }
            return LC_OK;
        }
        i = (i + 1) & (WC_SLOTS - 1);
    }
    size_t before = out->n;
    int rc = bpe_word(t, s, (const unsigned char *)w, n, out);
    if (rc != LC_OK || s->wc_used >= WC_SLOTS / 2) return rc;
    size_t k = out->n - before;
    if (s->wc_n + k > s->wc_cap) {
        size_t cap = s->wc_cap ? s->wc_cap * 2 : 4096;
        while (cap < s->wc_n + k)
            cap *= 2;
        int32_t *p = realloc(s->wc_ids, cap * sizeof *p);
        if (!p) return LC_OK; /* the cache is an optimisation: just stop caching */
        s->wc_ids = p;
        s->wc_cap = cap;
    }
    memcpy(s->wc_ids + s->wc_n, out->v + before, k * sizeof(int32_t));
    s->wc[i] = (wc_slot){w, (uint32_t)n, (uint32_t)s->wc_n, (uint32_t)k};
    s->wc_n += k;
    s->wc_used++;
    return LC_OK;
}

/* Pre-tokenize text[a..b) with regex number level (matches and the gaps between them both
 * become pieces, as in llama.cpp and HF tokenizers), then BPE each final piece. */
static int bpe_split(const lc_tokenizer *t, scratch *s, const char *text, size_t a, size_t b,
                     int level, ids_vec *out) {
    if (a >= b) return LC_OK;
    if (level == t->n_re) return bpe_word_cached(t, s, text + a, b - a, out);
    const char *sub = text + a;
    size_t n = b - a, pos = 0;
    int rc;
    while (pos < n) {
        int m =
            pcre2_match(t->re[level], (PCRE2_SPTR)sub, n, pos, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return lc_fail(LC_ERR_INTERNAL, "tokenizer: regex match failed near byte %zu: %s",
                           a + pos, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* cannot happen with these patterns; step one character */
            size_t l;
            utf8_classify((const unsigned char *)sub + ms, n - ms, &l);
            me = ms + l;
        }
        if (ms > pos && (rc = bpe_split(t, s, text, a + pos, a + ms, level + 1, out)) != LC_OK)
            return rc;
        if ((rc = bpe_split(t, s, text, a + ms, a + me, level + 1, out)) != LC_OK) return rc;
        pos = me;
    }
    if (pos < n) return bpe_split(t, s, text, a + pos, b, level + 1, out);
    return LC_OK;
}

static int spm_try_pair(const lc_tokenizer *t, scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return LC_OK;
    int32_t size = s->len[l] + s->len[r];
    int32_t id = map_find(t, s->buf + s->start[l], (size_t)size);
    if (id < 0) return LC_OK;
    return heap_push(s, (bigram){bigram_key(score_prio(t->score[id]), l), 0, size});
}

/* SentencePiece BPE of one raw fragment; prefix: add the dummy "▁". */
static int spm_fragment(const lc_tokenizer *t, scratch *s, const char *text, size_t n, bool prefix,
                        ids_vec *out) {
    int rc;
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++)
        spaces += text[i] == ' ';
    size_t m = n + (prefix ? 1 : 0) + spaces * 2;
    if (m == 0) return LC_OK;
    if (m > (size_t)INT32_MAX - 1) return lc_fail(LC_ERR_INVALID_ARG, "text too long");
    if ((rc = scratch_buf(s, m)) != LC_OK) return rc;
    size_t k = 0;
    if (prefix) {
        memcpy(s->buf, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') {
            memcpy(s->buf + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            s->buf[k++] = text[i];
        }
    }
    /* symbols: one per character */
    if ((rc = scratch_syms(s, k)) != LC_OK) return rc;
    int32_t ns = 0;
    for (size_t i = 0; i < k;) {
        size_t l;
        utf8_classify((const unsigned char *)s->buf + i, k - i, &l);
        s->start[ns] = (int32_t)i;
        s->len[ns] = (int32_t)l;
        s->prev[ns] = ns - 1;
        s->next[ns] = ns + 1;
        ns++;
        i += l;
    }
    s->next[ns - 1] = -1;
    s->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((rc = spm_try_pair(t, s, i, i + 1)) != LC_OK) return rc;
    while (s->heap_n > 0) {
        bigram g = heap_pop(s);
        int32_t l = (int32_t)(uint32_t)g.key, r = s->next[l];
        if (r < 0 || s->len[l] == 0 || s->len[r] == 0 || s->len[l] + s->len[r] != g.b) continue;
        s->len[l] += s->len[r];
        s->len[r] = 0;
        s->next[l] = s->next[r];
        if (s->next[r] >= 0) s->prev[s->next[r]] = l;
        if ((rc = spm_try_pair(t, s, s->prev[l], l)) != LC_OK) return rc;
        if ((rc = spm_try_pair(t, s, l, s->next[l])) != LC_OK) return rc;
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        int32_t id = map_find(t, s->buf + s->start[i], (size_t)s->len[i]);
        if (id >= 0) {
            if ((rc = ids_push(out, id)) != LC_OK) return rc;
            continue;
        }
        /* byte fallback */
        for (int32_t j = 0; j < s->len[i]; j++) {
            int32_t bt = t->byte_tok[(unsigned char)s->buf[s->start[i] + j]];
            if (bt < 0) bt = t->unk;
            if (bt >= 0 && (rc = ids_push(out, bt)) != LC_OK) return rc;
            if (bt == t->unk) break; /* one <unk> per character */
        }
    }
    return LC_OK;
}

/* A special token found in the text. */
typedef struct occurrence {
    int32_t order; /* position of the token in the longest-first order */
    int32_t id;
    size_t pos;
} occurrence;

static int occ_cmp(const void *x, const void *y) {
    const occurrence *a = x, *b = y;
    if (a->order != b->order) return a->order < b->order ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int occ_pos_cmp(const void *x, const void *y) {
    const occurrence *a = x, *b = y;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Find special tokens to cut out of the text, with llama.cpp's semantics: tokens are taken
 * longest first; each claims its left-most non-overlapping occurrences in what is still raw
 * text. Returns the claimed occurrences sorted by position. plain (NULL or len flags): bytes
 * that are plain text — a token other than a user-defined one (which plain text matches too,
 * as with parse_special off) is taken only where none of its bytes is flagged. */
static int find_specials(const lc_tokenizer *t, const char *text, size_t len, bool parse_special,
                         const unsigned char *plain, occurrence **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    occurrence *occ = NULL;
    size_t n = 0, cap = 0;
    if (t->trie[0].child < 0) return LC_OK;
    for (size_t p = 0; p < len; p++) {
        int32_t node = 0;
        for (size_t q = p; q < len; q++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != (unsigned char)text[q])
                c = t->trie[c].sibling;
            if (c < 0) break;
            node = c;
            int32_t id = t->trie[node].token;
            if (id < 0) continue;
            if (!parse_special && t->type[id] != TT_USER) continue;
            if (plain && t->type[id] != TT_USER) {
                bool inside = false;
                for (size_t j = p; j <= q && !inside; j++)
                    inside = plain[j] != 0;
                if (inside) continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                occurrence *nb = realloc(occ, cap * sizeof *occ);
                if (!nb) {
                    free(occ);
                    return lc_fail(LC_ERR_NOMEM, "out of memory in the tokenizer");
                }
                occ = nb;
            }
            occ[n++] = (occurrence){t->special_order[id], id, p};
        }
    }
    if (n == 0) return LC_OK;
    qsort(occ, n, sizeof *occ, occ_cmp);
    unsigned char *claimed = lc_calloc(len, 1, "special token map");
    if (!claimed) {
        free(occ);
        return LC_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = t->text_len[occ[i].id];
        bool ok = true;
        for (size_t j = 0; j < l && ok; j++)
            ok = !claimed[occ[i].pos + j];
        if (!ok) continue;
        memset(claimed + occ[i].pos, 1, l);
        occ[k++] = occ[i];
    }
    free(claimed);
    qsort(occ, k, sizeof *occ, occ_pos_cmp);
    *out = occ;
    *n_out = k;
    return LC_OK;
}

static int encode_impl(const lc_tokenizer *t, scratch *s, const char *text, size_t len,
                       bool add_bos, bool parse_special, const unsigned char *plain,
                       ids_vec *out) {
    int rc;
    /* validate UTF-8 first: the regexes run with PCRE2_NO_UTF_CHECK */
    for (size_t i = 0; i < len;) {
        size_t l;
        int c = utf8_classify((const unsigned char *)text + i, len - i, &l);
        if (c == 1) {
            i += l;
            continue;
        }
        return lc_fail(LC_ERR_INVALID_ARG,
                       "tokenizer: invalid UTF-8 at byte offset %zu (byte 0x%02X%s)", i,
                       (unsigned char)text[i], c == 0 ? ", truncated sequence at the end" : "");
    }
    if (add_bos && t->add_bos && t->bos >= 0 && (rc = ids_push(out, t->bos)) != LC_OK) return rc;

    occurrence *occ;
    size_t n_occ;
    if ((rc = find_specials(t, text, len, parse_special, plain, &occ, &n_occ)) != LC_OK) return rc;

    if (t->kind == TOK_BPE) {
        s->md = pcre2_match_data_create(4, NULL);
        s->mctx = pcre2_match_context_create(NULL);
        if (!s->md || !s->mctx) {
            free(occ);
            return lc_fail(LC_ERR_NOMEM, "out of memory creating regex match data");
        }
        if (len >= WC_MIN_TEXT) s->wc = calloc(WC_SLOTS, sizeof *s->wc); /* NULL: no cache */
        if (t->jit) {
            s->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
            if (s->jstack) pcre2_jit_stack_assign(s->mctx, NULL, s->jstack);
        }
    }

    size_t pos = 0;
    bool prev_special = true; /* SPM: the dummy prefix goes after BOS/special tokens */
    for (size_t i = 0; i <= n_occ; i++) {
        size_t end = i < n_occ ? occ[i].pos : len;
        if (end > pos) {
            if (t->kind == TOK_BPE)
                rc = bpe_split(t, s, text, pos, end, 0, out);
            else
                rc = spm_fragment(t, s, text + pos, end - pos, t->add_space_prefix && prev_special,
                                  out);
            if (rc != LC_OK) break;
            prev_special = false;
        }
        if (i < n_occ) {
            if ((rc = ids_push(out, occ[i].id)) != LC_OK) break;
            pos = end + t->text_len[occ[i].id];
            prev_special = true;
        }
    }
    free(occ);
    return rc;
}

static int encode_common(const lc_tokenizer *t, const char *text, size_t len, bool add_bos,
                         bool parse_special, const unsigned char *plain, int32_t **ids,
                         size_t *n_ids) {
    scratch s = {0};
    ids_vec out = {0};
    int rc = encode_impl(t, &s, text ? text : "", len, add_bos, parse_special, plain, &out);
    scratch_free(&s);
    if (rc != LC_OK) {
        free(out.v);
        return rc;
    }
    if (!out.v) {
        out.v = malloc(sizeof(int32_t));
        if (!out.v) return lc_fail(LC_ERR_NOMEM, "out of memory");
    }
    *ids = out.v;
    *n_ids = out.n;
    return LC_OK;
}

int lc_tokenizer_encode(const lc_tokenizer *t, const char *text, size_t len, bool add_bos,
                        bool parse_special, int32_t **ids, size_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    return encode_common(t, text, len, add_bos, parse_special, NULL, ids, n_ids);
}

int lc_tokenizer_encode_spans(const lc_tokenizer *t, const char *text, size_t len, bool add_bos,
                              const lc_text_span *plain, size_t n_plain, int32_t **ids,
                              size_t *n_ids) {
    if (!t || (!text && len) || (!plain && n_plain) || !ids || !n_ids)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tokenizer_encode_spans: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    for (size_t i = 0; i < n_plain; i++)
        if (plain[i].start > len || plain[i].len > len - plain[i].start)
            return lc_fail(LC_ERR_INVALID_ARG,
                           "lc_tokenizer_encode_spans: plain span %zu [%zu, +%zu) is outside the "
                           "text (%zu bytes)",
                           i, plain[i].start, plain[i].len, len);
    unsigned char *map = NULL;
    if (n_plain) {
        map = lc_calloc(len, 1, "plain-text map");
        if (!map) return LC_ERR_NOMEM;
        for (size_t i = 0; i < n_plain; i++)
            if (plain[i].len) memset(map + plain[i].start, 1, plain[i].len);
    }
    int rc = encode_common(t, text, len, add_bos, true, map, ids, n_ids);
    free(map);
    return rc;
}

/* ---- streaming detokenizer --------------------------------------------------------------- */

static const char k_fffd[3] = {'\xEF', '\xBF', '\xBD'};

/* Emit whole characters of s[0..n) into out; keep an unfinished tail in d->pending. */
static int detok_emit(lc_detok *d, const unsigned char *s, size_t n, char *out, size_t cap,
                      size_t *n_out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        int c = utf8_classify(s + i, n - i, &l);
        if (c == 0) { /* incomplete at the end: keep for the next token */
            memcpy(d->pending, s + i, l);
            d->n_pending = l;
            break;
        }
        const char *src = c == 1 ? (const char *)s + i : k_fffd;
        size_t m = c == 1 ? l : 3;
        if (o + m + 1 > cap) {
            out[o] = '\0';
            *n_out = o;
            return lc_fail(LC_ERR_INVALID_ARG,
                           "lc_detok_push: output buffer of %zu bytes too small", cap);
        }
        memcpy(out + o, src, m);
        o += m;
        i += l;
    }
    out[o] = '\0';
    *n_out = o;
    return LC_OK;
}

int lc_detok_push(lc_detok *d, const lc_tokenizer *t, int32_t id, char *out, size_t cap,
                  size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!d || !t || !out || !n_out || cap == 0)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_detok_push: NULL argument");
    out[0] = '\0';
    if (id < 0 || id >= t->n_vocab)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_detok_push: token id %d out of range [0, %d)",
                       (int)id, (int)t->n_vocab);
    if (d->n_pending > 3) d->n_pending = 0; /* never more than an unfinished 4-byte char */
    size_t tl;
    const char *tb = lc_tokenizer_token_bytes(t, id, &tl);
    size_t n = d->n_pending + tl;
    unsigned char small[256];
    unsigned char *buf = n <= sizeof small ? small : malloc(n);
    if (!buf) return lc_fail(LC_ERR_NOMEM, "out of memory in lc_detok_push");
    memcpy(buf, d->pending, d->n_pending);
    memcpy(buf + d->n_pending, tb, tl);
    d->n_pending = 0;
    int rc = detok_emit(d, buf, n, out, cap, n_out);
    if (buf != small) free(buf);
    return rc;
}

int lc_detok_flush(lc_detok *d, char *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!d || !out || !n_out || cap == 0)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_detok_flush: NULL argument");
    out[0] = '\0';
    if (d->n_pending == 0) return LC_OK;
    d->n_pending = 0;
    if (cap < 4) return lc_fail(LC_ERR_INVALID_ARG, "lc_detok_flush: output buffer too small");
    memcpy(out, k_fffd, 3);
    out[3] = '\0';
    *n_out = 3;
    return LC_OK;
}
