/*
 * test_tokenizer.c — the tokenizer against a reference and by hand:
 *   - SmolLM2's byte-level BPE vs tests/fixtures/tokenizer/smollm2.tok (ids from llama.cpp,
 *     made by scripts/gen_tokenizer_fixtures.py), with parse_special on and off;
 *   - decode(encode(x)) == x, streaming detokenization (whole characters only), invalid
 *     UTF-8, BOS/EOG flags, and encode speed (printed, not asserted);
 *   - tiny vocabularies written as GGUF images in memory: SentencePiece BPE (scores, "▁",
 *     byte fallback) and byte-level BPE (merge ranks, ignore_merges, digit splitting), with
 *     expectations derived by hand; malformed tokenizer metadata -> LC_ERR_FORMAT.
 */
#include "format/gguf.h"
#include "longctx.h"
#include "gguf_image.h"
#include "test_util.h"

#include <string.h>
#include <time.h>

#define FIX LC_SOURCE_DIR "/tests/fixtures/tokenizer/"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void quiet_log(lc_log_level level, const char *msg, void *user) {
    (void)level;
    (void)msg;
    (void)user;
}

/* ---- GGUF images: tests/gguf_image.h ----------------------------------------------------- */

/* Load a tokenizer from a kv set; returns the status; *t set on success. */
static int load_kv(gbuf *b, lc_tokenizer **t) {
    size_t size;
    unsigned char *img = gguf_image(b, &size);
    lc_gguf *g = NULL;
    int rc = lc_gguf_open_memory(img, size, &g);
    CHECKF(rc == LC_OK, "gguf image rejected: %s", lc_last_error());
    *t = NULL;
    if (rc == LC_OK) {
        rc = lc_tokenizer_load(g, t);
        lc_gguf_close(g); /* the tokenizer copies what it needs */
    }
    free(img);
    free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}

static bool ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static bool encode_is(lc_tokenizer *t, const char *s, bool bos, bool special, const int32_t *want,
                      size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = lc_tokenizer_encode(t, s, strlen(s), bos, special, &ids, &n);
    bool ok = rc == LC_OK && ids_eq(ids, n, want, n_want);
    if (!ok) {
        fprintf(stderr, "encode(\"%s\") rc %d:", s, rc);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "  want:");
        for (size_t i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}
#define ENC(t, s, bos, sp, ...)                                                                    \
    do {                                                                                           \
        const int32_t w_[] = {__VA_ARGS__};                                                        \
        CHECK(encode_is(t, s, bos, sp, w_, sizeof w_ / sizeof w_[0]));                             \
    } while (0)

/* ---- SentencePiece BPE ---------------------------------------------------------------------- */

enum { SPM_UNK = 0, SPM_BOS = 1, SPM_EOS = 2, SPM_BYTE0 = 3 };
/* ids from 259 */
static const char *const k_spm_words[] = {
    "\xE2\x96\x81",
    "h",
    "e",
    "l",
    "o",
    "w",
    "r",
    "d", /* 259..266 single characters */
    "ll",
    "he",
    "\xE2\x96\x81he",
    "llo",
    "\xE2\x96\x81hello",
    "\xE2\x96\x81w",
    "or",
    "\xE2\x96\x81wor",
    "ld",
    "<|user|>", /* 267..277 */
};
static const float k_spm_scores[] = {-10, -11, -12, -13, -14, -15, -16, -17, -1,
                                     -2,  -3,  -4,  -5,  -6,  -7,  -8,  -9,  0};
enum {
    S_SP = 259,
    S_H,
    S_E,
    S_L,
    S_O,
    S_W,
    S_R,
    S_D,
    S_LL,
    S_HE,
    S_SPHE,
    S_LLO,
    S_SPHELLO,
    S_SPW,
    S_OR,
    S_SPWOR,
    S_LD,
    S_USER
};
#define SPM_N (259 + (int)(sizeof k_spm_words / sizeof k_spm_words[0]))

typedef struct spm_opts {
    int add_space_prefix; /* -1 absent */
    bool bad_type_len, bad_scores_len, bad_bos, no_tokens, tokens_i32, types_f32;
} spm_opts;

static void spm_kv(gbuf *b, spm_opts o) {
    static char names[SPM_N][16];
    const char *toks[SPM_N];
    int32_t types[SPM_N];
    float scores[SPM_N];
    for (int i = 0; i < SPM_N; i++) {
        if (i == SPM_UNK) {
            toks[i] = "<unk>";
            types[i] = 2;
        } else if (i == SPM_BOS) {
            toks[i] = "<s>";
            types[i] = 3;
        } else if (i == SPM_EOS) {
            toks[i] = "</s>";
            types[i] = 3;
        } else if (i < 259) {
            snprintf(names[i], sizeof names[i], "<0x%02X>", i - SPM_BYTE0);
            toks[i] = names[i];
            types[i] = 6;
        } else {
            toks[i] = k_spm_words[i - 259];
            types[i] = i == S_USER ? 4 : 1;
        }
        scores[i] = i >= 259 ? k_spm_scores[i - 259] : 0.0f;
    }
    kv_str(b, "general.architecture", "llama");
    kv_str(b, "tokenizer.ggml.model", "llama");
    if (!o.no_tokens) {
        if (o.tokens_i32)
            kv_arr_num(b, "tokenizer.ggml.tokens", LC_GGUF_TYPE_INT32, types, SPM_N);
        else
            kv_arr_str(b, "tokenizer.ggml.tokens", toks, SPM_N);
    }
    kv_arr_num(b, "tokenizer.ggml.scores", LC_GGUF_TYPE_FLOAT32, scores,
               o.bad_scores_len ? SPM_N - 1 : SPM_N);
    kv_arr_num(b, "tokenizer.ggml.token_type",
               o.types_f32 ? LC_GGUF_TYPE_FLOAT32 : LC_GGUF_TYPE_INT32, types,
               o.bad_type_len ? SPM_N - 3 : SPM_N);
    kv_u32(b, "tokenizer.ggml.bos_token_id", o.bad_bos ? SPM_N : SPM_BOS);
    kv_u32(b, "tokenizer.ggml.eos_token_id", SPM_EOS);
    kv_u32(b, "tokenizer.ggml.unknown_token_id", SPM_UNK);
    kv_i32(b, "tokenizer.ggml.padding_token_id", -1);
    if (o.add_space_prefix >= 0)
        kv_bool(b, "tokenizer.ggml.add_space_prefix", o.add_space_prefix != 0);
}

static void test_spm(void) {
    gbuf b = {0};
    lc_tokenizer *t = NULL;
    spm_kv(&b, (spm_opts){.add_space_prefix = -1});
    int rc = load_kv(&b, &t);
    CHECKF(rc == LC_OK, "SPM load: %s", lc_last_error());
    if (rc != LC_OK) return;
    CHECK(lc_tokenizer_n_vocab(t) == SPM_N);
    CHECK(lc_tokenizer_bos(t) == SPM_BOS && lc_tokenizer_eos(t) == SPM_EOS);
    CHECK(lc_tokenizer_add_bos(t)); /* default for SentencePiece */
    CHECK(lc_tokenizer_is_eog(t, SPM_EOS) && !lc_tokenizer_is_eog(t, SPM_BOS));

    /* worked by hand in the comment of k_spm_words: ll, he, ▁he, llo, ▁hello, ▁w, or, ▁wor, ld */
    ENC(t, "hello world", false, false, S_SPHELLO, S_SPWOR, S_LD);
    ENC(t, "hello world", true, false, SPM_BOS, S_SPHELLO, S_SPWOR, S_LD);
    /* equal scores: the left-most pair merges first */
    ENC(t, "lll", false, false, S_SP, S_LL, S_L);
    /* byte fallback: 'i' and 'é' are not in the vocabulary */
    ENC(t, "hi", false, false, S_SP, S_H, SPM_BYTE0 + 'i');
    ENC(t, "\xC3\xA9", false, false, S_SP, SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9);
    ENC(t, "\xF0\x9F\x98\x80", false, false, S_SP, SPM_BYTE0 + 0xF0, SPM_BYTE0 + 0x9F,
        SPM_BYTE0 + 0x98, SPM_BYTE0 + 0x80);
    /* special tokens: the dummy prefix goes after them again */
    ENC(t, "</s>hello", false, true, SPM_EOS, S_SPHELLO);
    ENC(t, "hello</s>", false, true, S_SPHELLO, SPM_EOS);
    ENC(t, "</s>", false, false, S_SP, SPM_BYTE0 + '<', SPM_BYTE0 + '/', SPM_BYTE0 + 's',
        SPM_BYTE0 + '>');
    /* user-defined tokens are cut out even without parse_special (as llama.cpp) */
    ENC(t, "<|user|>", false, false, S_USER);
    ENC(t, "", true, false, SPM_BOS);
    {
        int32_t *ids;
        size_t n;
        CHECK(lc_tokenizer_encode(t, "", 0, false, false, &ids, &n) == LC_OK && n == 0);
        free(ids);
    }
    /* decoding: ▁ -> space, <0xAB> -> the byte */
    size_t len;
    const char *p = lc_tokenizer_token_bytes(t, S_SPHELLO, &len);
    CHECK(p && len == 6 && memcmp(p, " hello", 6) == 0);
    p = lc_tokenizer_token_bytes(t, SPM_BYTE0 + 0xC3, &len);
    CHECK(p && len == 1 && (unsigned char)p[0] == 0xC3);
    p = lc_tokenizer_token_bytes(t, SPM_EOS, &len);
    CHECK(p && len == 4 && memcmp(p, "</s>", 4) == 0);
    CHECK(strcmp(lc_tokenizer_token_text(t, S_SPHELLO), "\xE2\x96\x81hello") == 0);
    CHECK(lc_tokenizer_token_bytes(t, SPM_N, &len) == NULL);
    CHECK(lc_tokenizer_token_text(t, -1) == NULL);
    /* streaming: é split over two byte tokens is emitted whole */
    lc_detok d = {0};
    char out[128];
    size_t n_out;
    CHECK(lc_detok_push(&d, t, SPM_BYTE0 + 0xC3, out, sizeof out, &n_out) == LC_OK && n_out == 0);
    CHECK(lc_detok_push(&d, t, SPM_BYTE0 + 0xA9, out, sizeof out, &n_out) == LC_OK && n_out == 2 &&
          memcmp(out, "\xC3\xA9", 2) == 0);
    lc_tokenizer_free(t);

    /* add_space_prefix = false */
    spm_kv(&b, (spm_opts){.add_space_prefix = 0});
    CHECK(load_kv(&b, &t) == LC_OK);
    if (t) {
        ENC(t, "hello", false, false, S_HE, S_LLO);
        lc_tokenizer_free(t);
    }
}

/* ---- byte-level BPE on a tiny vocabulary ------------------------------------------------- */

/* The 256 byte characters in byte order, then: "he" "ll" "hell" "Ġworld". */
static int bpe_vocab(const char ***toks_out, char storage[][8]) {
    static const char *toks[260];
    int next = 256;
    for (int bt = 0; bt < 256; bt++) {
        bool keep = (bt >= 0x21 && bt <= 0x7E) || (bt >= 0xA1 && bt <= 0xAC) || bt >= 0xAE;
        uint32_t cp = keep ? (uint32_t)bt : (uint32_t)next++;
        char *s = storage[bt];
        if (cp < 0x80) {
            s[0] = (char)cp;
            s[1] = 0;
        } else {
            s[0] = (char)(0xC0 | (cp >> 6));
            s[1] = (char)(0x80 | (cp & 0x3F));
            s[2] = 0;
        }
        toks[bt] = s;
    }
    toks[256] = "he";
    toks[257] = "ll";
    toks[258] = "hell";
    toks[259] = "\xC4\xA0world";
    *toks_out = toks;
    return 260;
}

static void test_bpe_small(void) {
    static char storage[256][8];
    const char **toks;
    int n = bpe_vocab(&toks, storage);
    const char *merges[] = {"h e", "l l", "he ll"};
    lc_tokenizer *t;
    gbuf b = {0};
    const char *pres[] = {"gpt2", "llama-bpe", "smollm", "qwen2", "something-new"};
    for (size_t pi = 0; pi < sizeof pres / sizeof pres[0]; pi++) {
        kv_str(&b, "tokenizer.ggml.model", "gpt2");
        kv_str(&b, "tokenizer.ggml.pre", pres[pi]);
        kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
        kv_arr_str(&b, "tokenizer.ggml.merges", merges, 3);
        if (pi == 4) lc_log_set(quiet_log, NULL, LC_LOG_DEBUG);
        int rc = load_kv(&b, &t);
        if (pi == 4) lc_log_set(NULL, NULL, LC_LOG_NONE);
        CHECKF(rc == LC_OK, "pre %s: %s", pres[pi], lc_last_error());
        if (rc != LC_OK) continue;
        /* h e l l o: "h e" (rank 0), "l l" (1), "he ll" (2) -> hell, o */
        ENC(t, "hello", false, false, 258, 'o');
        if (pi == 1) {
            /* llama-bpe: ignore_merges emits the whole piece " world" though no merge makes it */
            ENC(t, " world", false, false, 259);
            /* digits in groups of three */
            ENC(t, "12345", false, false, '1', '2', '3', '4', '5');
        } else {
            ENC(t, " world", false, false, ' ', 'w', 'o', 'r', 'l', 'd');
        }
        /* byte tokens keep bytes: "é" is two byte characters */
        ENC(t, "\xC3\xA9", false, false, 0xC3, 0xA9);
        size_t len;
        const char *p = lc_tokenizer_token_bytes(t, 259, &len);
        CHECK(p && len == 6 && memcmp(p, " world", 6) == 0);
        p = lc_tokenizer_token_bytes(t, ' ', &len);
        CHECK(p && len == 1 && p[0] == ' ');
        CHECK(strcmp(lc_tokenizer_token_text(t, ' '), "\xC4\xA0") == 0);
        CHECK(!lc_tokenizer_add_bos(t)); /* no BOS id in this vocabulary */
        lc_tokenizer_free(t);
    }
}

/* ---- malformed metadata ---------------------------------------------------------------------- */

static void expect_format(gbuf *b, const char *key_in_msg, const char *what) {
    lc_tokenizer *t = NULL;
    int rc = load_kv(b, &t);
    CHECKF(rc == LC_ERR_FORMAT && strstr(lc_last_error(), key_in_msg),
           "%s: rc %d, message '%s' (want LC_ERR_FORMAT naming %s)", what, rc, lc_last_error(),
           key_in_msg);
    CHECK(t == NULL);
    lc_tokenizer_free(t);
}

static void test_malformed(void) {
    gbuf b = {0};
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .no_tokens = true});
    expect_format(&b, "tokenizer.ggml.tokens", "missing tokens");
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .tokens_i32 = true});
    expect_format(&b, "tokenizer.ggml.tokens", "tokens of i32");
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .bad_type_len = true});
    expect_format(&b, "tokenizer.ggml.token_type", "token_type length");
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .types_f32 = true});
    expect_format(&b, "tokenizer.ggml.token_type", "token_type of f32");
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .bad_scores_len = true});
    expect_format(&b, "tokenizer.ggml.scores", "scores length");
    spm_kv(&b, (spm_opts){.add_space_prefix = -1, .bad_bos = true});
    expect_format(&b, "tokenizer.ggml.bos_token_id", "bos out of range");

    kv_str(&b, "general.architecture", "llama");
    expect_format(&b, "tokenizer.ggml.model", "no tokenizer");

    static char storage[256][8];
    const char **toks;
    int n = bpe_vocab(&toks, storage);
    const char *bad_merges[] = {"h e", "l zz"};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    kv_arr_str(&b, "tokenizer.ggml.merges", bad_merges, 2);
    expect_format(&b, "tokenizer.ggml.merges", "merge with unknown token");

    const char *nospace[] = {"hello"};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    kv_arr_str(&b, "tokenizer.ggml.merges", nospace, 1);
    expect_format(&b, "tokenizer.ggml.merges", "merge without a space");

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    expect_format(&b, "tokenizer.ggml.merges", "gpt2 without merges");

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    kv_u32(&b, "tokenizer.ggml.merges", 3);
    expect_format(&b, "tokenizer.ggml.merges", "merges not an array");

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    kv_arr_str(&b, "tokenizer.ggml.merges", bad_merges, 1);
    kv_u32(&b, "tokenizer.ggml.add_bos_token", 1);
    expect_format(&b, "tokenizer.ggml.add_bos_token", "add_bos_token not a bool");

    kv_u32(&b, "tokenizer.ggml.model", 2);
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    expect_format(&b, "tokenizer.ggml.model", "model not a string");

    kv_str(&b, "tokenizer.ggml.model", "bert");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, (size_t)n);
    lc_tokenizer *t = NULL;
    int rc = load_kv(&b, &t);
    CHECKF(rc == LC_ERR_UNSUPPORTED && strstr(lc_last_error(), "bert"), "bert: %d %s", rc,
           lc_last_error());
}

/* SmolLM2's tokenizer metadata copied into a new image with tokenizer.ggml.pre replaced. */
static void copy_str_arr(gbuf *b, const lc_gguf *g, const char *key) {
    lc_gguf_type et;
    uint64_t n = 0;
    CHECK(lc_gguf_get_arr(g, key, &et, &n) == LC_OK && et == LC_GGUF_TYPE_STRING);
    kv_head(b, key, LC_GGUF_TYPE_ARRAY);
    put_u32(b, LC_GGUF_TYPE_STRING);
    put_u64(b, n);
    bool ok = true;
    for (uint64_t i = 0; i < n && ok; i++) {
        const char *s;
        size_t l;
        ok = lc_gguf_get_arr_str(g, key, i, &s, &l) == LC_OK;
        put_u64(b, ok ? l : 0);
        if (ok) put(b, s, l);
    }
    CHECKF(ok, "copying %s", key);
}

static lc_tokenizer *load_with_pre(const lc_gguf *g, const char *pre) {
    gbuf b = {0};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", pre);
    copy_str_arr(&b, g, "tokenizer.ggml.tokens");
    copy_str_arr(&b, g, "tokenizer.ggml.merges");
    const void *data;
    uint64_t n = 0;
    CHECK(lc_gguf_get_arr_data(g, "tokenizer.ggml.token_type", LC_GGUF_TYPE_INT32, &data, &n) ==
          LC_OK);
    kv_arr_num(&b, "tokenizer.ggml.token_type", LC_GGUF_TYPE_INT32, data, (size_t)n);
    static const char *ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                "tokenizer.ggml.unknown_token_id",
                                "tokenizer.ggml.padding_token_id"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t v;
        CHECK(lc_gguf_get_u32(g, ids[i], &v) == LC_OK);
        kv_u32(&b, ids[i], v);
    }
    kv_bool(&b, "tokenizer.ggml.add_bos_token", false);
    lc_tokenizer *t = NULL;
    int rc = load_kv(&b, &t);
    CHECKF(rc == LC_OK, "pre %s: %s", pre, lc_last_error());
    return t;
}

/* ---- SmolLM2 against the fixtures ------------------------------------------------------------ */

static int hexval(int c) {
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

typedef struct fcase {
    bool special;
    char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
} fcase;

static fcase *load_fixture(const char *path, size_t *n_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fcase *cs = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab1 = strchr(line, '\t');
        char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        if (!tab2) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            cs = realloc(cs, cap * sizeof *cs);
        }
        fcase *c = &cs[n++];
        c->special = line[0] == 'S';
        size_t hl = (size_t)(tab2 - tab1 - 1);
        c->len = hl / 2;
        c->text = malloc(c->len + 1);
        for (size_t i = 0; i < c->len; i++)
            c->text[i] = (char)(hexval(tab1[1 + 2 * i]) * 16 + hexval(tab1[2 + 2 * i]));
        c->text[c->len] = 0;
        c->ids = malloc(strlen(tab2) * sizeof(int32_t) + 4);
        c->n_ids = 0;
        char *p = tab2 + 1;
        for (;;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            c->ids[c->n_ids++] = (int32_t)v;
            p = e;
        }
    }
    free(line);
    fclose(f);
    *n_out = n;
    return cs;
}

static bool valid_utf8_whole(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (l == 0 || i + l > n) return false;
        for (size_t k = 1; k < l; k++)
            if ((u[i + k] & 0xC0) != 0x80) return false;
        i += l;
    }
    return true;
}

/* Decode ids by streaming through lc_detok; checks each chunk is whole UTF-8. */
static char *stream_decode(lc_tokenizer *t, const int32_t *ids, size_t n, size_t *len,
                           int *n_held) {
    size_t cap = 64, o = 0;
    char *s = malloc(cap);
    lc_detok d = {0};
    char buf[1024];
    *n_held = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t k;
        int rc;
        if (i < n) {
            rc = lc_detok_push(&d, t, ids[i], buf, sizeof buf, &k);
            if (d.n_pending) (*n_held)++;
        } else {
            rc = lc_detok_flush(&d, buf, sizeof buf, &k);
        }
        CHECK(rc == LC_OK);
        CHECK(valid_utf8_whole(buf, k));
        CHECK(buf[k] == '\0');
        if (o + k + 1 > cap) {
            cap = (o + k + 1) * 2;
            s = realloc(s, cap);
        }
        memcpy(s + o, buf, k);
        o += k;
    }
    *len = o;
    return s;
}

static void test_smollm2(lc_tokenizer *t) {
    CHECK(lc_tokenizer_n_vocab(t) == 49152);
    CHECK(lc_tokenizer_bos(t) == 1 && lc_tokenizer_eos(t) == 2);
    CHECK(!lc_tokenizer_add_bos(t));   /* tokenizer.ggml.add_bos_token = false */
    CHECK(lc_tokenizer_is_eog(t, 2));  /* <|im_end|> (eos) */
    CHECK(lc_tokenizer_is_eog(t, 0));  /* <|endoftext|> */
    CHECK(!lc_tokenizer_is_eog(t, 1)); /* <|im_start|> */
    CHECK(!lc_tokenizer_is_eog(t, 100));
    CHECK(!lc_tokenizer_is_eog(t, -1) && !lc_tokenizer_is_eog(t, 49152));
    CHECK(strcmp(lc_tokenizer_token_text(t, 1), "<|im_start|>") == 0);
    size_t len;
    const char *p = lc_tokenizer_token_bytes(t, 2, &len);
    CHECK(p && len == 10 && memcmp(p, "<|im_end|>", 10) == 0);
}

/* Every case of a fixture file: ids equal, decode(encode(x)) == x, streamed decode == x. */
static void test_fixture(lc_tokenizer *t, const char *file) {
    char path[512];
    snprintf(path, sizeof path, FIX "%s", file);
    size_t n_cases = 0;
    fcase *cs = load_fixture(path, &n_cases);
    CHECKF(cs != NULL, "cannot read %s", path);
    if (!cs) return;
    size_t n_equal = 0, n_round = 0, n_stream = 0, n_lossy = 0;
    int held_total = 0;
    /* bytes the vocabulary cannot spell (no token stands for exactly that byte; SmolLM2 lacks
     * a few control bytes and rare UTF-8 lead bytes): the tokenizer drops them as llama.cpp
     * does, so the round trip gives the text without them */
    bool missing[256];
    for (int b = 0; b < 256; b++) missing[b] = true;
    for (int32_t id = 0; id < lc_tokenizer_n_vocab(t); id++) {
        size_t tl;
        const char *tb = lc_tokenizer_token_bytes(t, id, &tl);
        if (tb && tl == 1) missing[(unsigned char)tb[0]] = false;
    }
    char *want = NULL;
    for (size_t i = 0; i < n_cases; i++) {
        fcase *c = &cs[i];
        want = realloc(want, c->len + 1);
        size_t want_len = 0;
        for (size_t k = 0; k < c->len; k++) {
            const unsigned char b = (unsigned char)c->text[k];
            if (!missing[b]) want[want_len++] = (char)b;
        }
        n_lossy += want_len != c->len;
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = lc_tokenizer_encode(t, c->text, c->len, false, c->special, &ids, &n);
        bool eq = rc == LC_OK && ids_eq(ids, n, c->ids, c->n_ids);
        n_equal += eq;
        if (!eq) {
            fprintf(stderr, "fixture case %zu (%s) \"%.60s\": rc %d\n  got :", i + 1,
                    c->special ? "special" : "plain", c->text, rc);
            for (size_t k = 0; k < n && k < 40; k++)
                fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n  want:");
            for (size_t k = 0; k < c->n_ids && k < 40; k++)
                fprintf(stderr, " %d", c->ids[k]);
            fprintf(stderr, "\n");
        }
        CHECK(eq);
        if (rc == LC_OK) {
            /* decode(encode(x)) == x, token by token and streamed */
            size_t o = 0;
            char *dec = malloc(c->len * 4 + 16);
            for (size_t k = 0; k < n; k++) {
                size_t tl;
                const char *tb = lc_tokenizer_token_bytes(t, ids[k], &tl);
                if (o + tl <= c->len * 4 + 16) memcpy(dec + o, tb, tl);
                o += tl;
            }
            bool rt = o == want_len && memcmp(dec, want, o) == 0;
            n_round += rt;
            CHECKF(rt, "round trip of case %zu", i + 1);
            free(dec);
            int held;
            char *sd = stream_decode(t, ids, n, &o, &held);
            bool st = o == want_len && memcmp(sd, want, o) == 0;
            n_stream += st;
            held_total += held;
            CHECKF(st, "streamed decode of case %zu", i + 1);
            free(sd);
        }
        free(ids);
    }
    fprintf(stderr,
            "%s: %zu/%zu cases equal to the reference; round trip %zu/%zu; "
            "streamed %zu/%zu (%d tokens ended inside a character; %zu cases hold bytes the "
            "vocabulary cannot spell)\n",
            file, n_equal, n_cases, n_round, n_cases, n_stream, n_cases, held_total, n_lossy);
    free(want);
    CHECK(n_cases >= 400);
    CHECK(held_total > 0); /* the corpus does split characters across tokens */
    for (size_t i = 0; i < n_cases; i++) {
        free(cs[i].text);
        free(cs[i].ids);
    }
    free(cs);
}

static void test_detok_edges(lc_tokenizer *t) {
    /* byte-level tokens of single bytes: find the ids of bytes 0xE4, 0xBD, 0xA0 ("你") and 0x80 */
    int32_t id_e4 = -1, id_bd = -1, id_a0 = -1, id_80 = -1, id_a = -1;
    for (int32_t i = 0; i < lc_tokenizer_n_vocab(t); i++) {
        size_t l;
        const char *p = lc_tokenizer_token_bytes(t, i, &l);
        if (l != 1) continue;
        unsigned char c = (unsigned char)p[0];
        if (c == 0xE4) id_e4 = i;
        if (c == 0xBD) id_bd = i;
        if (c == 0xA0) id_a0 = i;
        if (c == 0x80) id_80 = i;
        if (c == 'a') id_a = i;
    }
    CHECK(id_e4 >= 0 && id_bd >= 0 && id_a0 >= 0 && id_80 >= 0 && id_a >= 0);
    lc_detok d = {0};
    char out[128];
    size_t n;
    CHECK(lc_detok_push(&d, t, id_e4, out, sizeof out, &n) == LC_OK && n == 0 && d.n_pending == 1);
    CHECK(lc_detok_push(&d, t, id_bd, out, sizeof out, &n) == LC_OK && n == 0 && d.n_pending == 2);
    CHECK(lc_detok_push(&d, t, id_a0, out, sizeof out, &n) == LC_OK && n == 3 &&
          memcmp(out, "\xE4\xBD\xA0", 3) == 0 && d.n_pending == 0);
    /* a lone continuation byte -> U+FFFD */
    CHECK(lc_detok_push(&d, t, id_80, out, sizeof out, &n) == LC_OK && n == 3 &&
          memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    /* an unfinished character followed by ASCII -> U+FFFD then the ASCII */
    CHECK(lc_detok_push(&d, t, id_e4, out, sizeof out, &n) == LC_OK && n == 0);
    CHECK(lc_detok_push(&d, t, id_a, out, sizeof out, &n) == LC_OK && n == 4 &&
          memcmp(out,
                 "\xEF\xBF\xBD"
                 "a",
                 4) == 0);
    /* flush of an unfinished character -> U+FFFD; flush of nothing -> "" */
    CHECK(lc_detok_push(&d, t, id_e4, out, sizeof out, &n) == LC_OK && n == 0);
    CHECK(lc_detok_flush(&d, out, sizeof out, &n) == LC_OK && n == 3 && d.n_pending == 0);
    CHECK(lc_detok_flush(&d, out, sizeof out, &n) == LC_OK && n == 0 && out[0] == 0);
    CHECK(lc_detok_push(&d, t, 49152, out, sizeof out, &n) == LC_ERR_INVALID_ARG);
    CHECK(lc_detok_push(&d, t, -5, out, sizeof out, &n) == LC_ERR_INVALID_ARG);
    /* too small an output buffer is an error, not an overflow */
    CHECK(lc_detok_push(&d, t, id_a, out, 1, &n) == LC_ERR_INVALID_ARG);
}

static void test_invalid_utf8(lc_tokenizer *t) {
    static const struct {
        const char *s;
        size_t len;
        const char *offset;
    } bad[] = {
        {"abc\xff", 4, "offset 3"},
        {"ok \xC3", 4, "offset 3"},
        {"\xC0\xAF", 2, "offset 0"},
        {"ab\xED\xA0\x80", 5, "offset 2"},
        {"\xF4\x90\x80\x80", 4, "offset 0"},
        {"x\xE4\xBD"
         "a",
         4, "offset 1"},
        {"\x80", 1, "offset 0"},
        {"\xF8\x88\x80\x80\x80", 5, "offset 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        int rc = lc_tokenizer_encode(t, bad[i].s, bad[i].len, false, true, &ids, &n);
        CHECKF(rc == LC_ERR_INVALID_ARG && strstr(lc_last_error(), bad[i].offset),
               "invalid case %zu: rc %d '%s'", i, rc, lc_last_error());
        CHECK(ids == NULL && n == 0);
    }
    int32_t *ids;
    size_t n;
    CHECK(lc_tokenizer_encode(t, NULL, 0, false, false, &ids, &n) == LC_OK && n == 0);
    free(ids);
    CHECK(lc_tokenizer_encode(NULL, "a", 1, false, false, &ids, &n) == LC_ERR_INVALID_ARG);
    /* add_bos is ignored when the model does not want BOS */
    CHECK(lc_tokenizer_encode(t, "hi", 2, true, false, &ids, &n) == LC_OK && n >= 1 && ids[0] != 1);
    free(ids);
}

static void speed(lc_tokenizer *t, const char *what, const char *unit, size_t target) {
    size_t ul = strlen(unit);
    size_t n = target / ul * ul;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i += ul)
        memcpy(s + i, unit, ul);
    s[n] = 0;
    int32_t *ids = NULL;
    size_t n_ids;
    double t0 = now_s();
    int rc = lc_tokenizer_encode(t, s, n, false, true, &ids, &n_ids);
    double dt = now_s() - t0;
    CHECKF(rc == LC_OK, "%s: %s", what, lc_last_error());
    fprintf(stderr, "encode speed, %-28s %.2f MB in %.3f s = %6.2f MB/s (%zu tokens)\n", what,
            n / 1e6, dt, n / 1e6 / dt, n_ids);
    free(ids);
    free(s);
}

static void test_speed(lc_tokenizer *t) {
    static const char prose[] =
        "Long-context inference is the art of answering a question about a very large input, "
        "such as a code base, a book, or a month of logs. In 2024, models trained on 8,192 tokens "
        "were asked to read 1,000,000 tokens - and some did! It's fun; we'll see. ";
    static const char mixed[] =
        "def f(x):\n    return x * 2  # double\n你好，世界！今天天气很好。Привет, мир! "
        "مرحبا بالعالم 😀👍🏽 <|im_start|>user\nhi<|im_end|>\n";
    speed(t, "English prose (1 MB)", prose, 1 << 20);
    speed(t, "code + multilingual (1 MB)", mixed, 1 << 20);
    speed(t, "one 1 MB word 'aaaa...'", "a", 1 << 20);
    speed(t, "1 MB of spaces", " ", 1 << 20);
    speed(t, "1 MB of digits", "7", 1 << 20);
    speed(t, "English prose (4 MB)", prose, 4 << 20);
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    test_spm();
    test_bpe_small();
    test_malformed();
    if (lc_test_failures) TEST_END();
    REQUIRE_MODEL(LC_MODEL_PATH);
    lc_gguf *g = NULL;
    int rc = lc_gguf_open(LC_MODEL_PATH, &g);
    CHECKF(rc == LC_OK, "%s", lc_last_error());
    if (rc != LC_OK) TEST_END();
    lc_tokenizer *t = NULL;
    rc = lc_tokenizer_load(g, &t);
    CHECKF(rc == LC_OK, "%s", lc_last_error());
    if (rc == LC_OK) {
        test_smollm2(t);
        test_fixture(t, "smollm2.tok");
        test_detok_edges(t);
        test_invalid_utf8(t);
        test_speed(t);
        lc_tokenizer_free(t);
    }
    /* the Llama-3 and Qwen2 split rules, on SmolLM2's vocabulary */
    static const char *pres[] = {"llama-bpe", "qwen2"};
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "smollm2-pre-%s.tok", pres[i]);
        lc_tokenizer *tv = load_with_pre(g, pres[i]);
        if (tv) test_fixture(tv, file);
        lc_tokenizer_free(tv);
    }
    lc_gguf_close(g);
    TEST_END();
}
