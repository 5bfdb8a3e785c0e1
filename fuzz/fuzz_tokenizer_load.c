/*
 * fuzz_tokenizer_load.c — libFuzzer target for the tokenizer loader and the chat templates on
 * hostile metadata: the input is a GGUF image (lc_gguf_open_memory on an exactly sized heap
 * copy). When lc_tokenizer_load accepts it, fixed strings (ASCII, multi-byte UTF-8, special
 * token texts) are encoded with every add_bos/parse_special combination, token bytes/texts
 * are read for a sample of ids (incl. the last), the ids are streamed through the detokeniser,
 * and tokenizer.chat_template goes through lc_chat_template_detect, lc_chat_default_system
 * and lc_chat_format of every family. Invariants checked (abort on violation): encoded ids in
 * range, every valid id has bytes and text, and for a byte-level BPE vocabulary that spells
 * every character of a printable ASCII string without spaces, decode(encode(s)) == s.
 */
#include "format/chat.h"
#include "format/gguf.h"
#include "util/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_tokenizer_load: invariant broken: %s\n", what);
        abort();
    }
}

/* Stream ids through the detokeniser; returns the concatenated output (malloc'd) or NULL. */
static char *detok_all(const lc_tokenizer *t, const int32_t *ids, size_t n, size_t *out_len) {
    size_t cap = 64, len = 0;
    char *all = malloc(cap);
    if (!all) return NULL;
    lc_detok d;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i <= n; i++) {
        size_t tl = 0;
        if (i < n) check(lc_tokenizer_token_bytes(t, ids[i], &tl) != NULL, "token bytes of id");
        size_t bcap = 64 + 3 * (tl + 8);
        char *buf = malloc(bcap);
        if (!buf) {
            free(all);
            return NULL;
        }
        size_t got = 0;
        int rc = i < n ? lc_detok_push(&d, t, ids[i], buf, bcap, &got)
                       : lc_detok_flush(&d, buf, bcap, &got);
        check(rc == LC_OK, "lc_detok_push/flush with a large enough buffer");
        check(got < bcap && buf[got] == '\0', "detok output NUL-terminated within cap");
        if (len + got + 1 > cap) {
            while (len + got + 1 > cap) cap *= 2;
            char *p = realloc(all, cap);
            if (!p) {
                free(buf);
                free(all);
                return NULL;
            }
            all = p;
        }
        memcpy(all + len, buf, got);
        len += got;
        free(buf);
    }
    all[len] = '\0';
    *out_len = len;
    return all;
}

/* Encode s every way, check ids and the detokeniser; round trip when bpe_roundtrip. */
static void exercise_encode(const lc_tokenizer *t, const char *s, int bpe_roundtrip) {
    const int32_t nv = lc_tokenizer_n_vocab(t);
    for (int mode = 0; mode < 4; mode++) {
        const bool add_bos = mode & 1, parse_special = (mode & 2) != 0;
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = lc_tokenizer_encode(t, s, strlen(s), add_bos, parse_special, &ids, &n);
        if (rc == LC_ERR_NOMEM) continue;
        check(rc == LC_OK, "encoding valid UTF-8 succeeds");
        for (size_t i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < nv, "encoded id in range");
        size_t dl = 0;
        char *dec = detok_all(t, ids, n, &dl);
        if (dec && bpe_roundtrip && !add_bos)
            check(dl == strlen(s) && memcmp(dec, s, dl) == 0, "BPE round trip of printable ASCII");
        free(dec);
        free(ids);
    }
}

static bool is_bpe(const lc_gguf *g) {
    const char *m;
    size_t l;
    return lc_gguf_get_str(g, "tokenizer.ggml.model", &m, &l) == LC_OK && l == 4 &&
           memcmp(m, "gpt2", 4) == 0;
}

/* Every character of s (printable ASCII, no spaces) is the bytes of some token (for byte-level
 * BPE that token's text is the character itself, whatever its type). */
static bool spells_all(const lc_tokenizer *t, const char *s) {
    bool need[128] = {0};
    for (const char *p = s; *p; p++) need[(unsigned char)*p] = true;
    for (int32_t id = 0; id < lc_tokenizer_n_vocab(t); id++) {
        size_t l;
        const char *b = lc_tokenizer_token_bytes(t, id, &l);
        if (b && l == 1 && b[0] > 0x20 && b[0] < 0x7F) need[(unsigned char)b[0]] = false;
    }
    for (int c = 0; c < 128; c++)
        if (need[c]) return false;
    return true;
}

static void exercise_tokenizer(const lc_gguf *g, const lc_tokenizer *t) {
    const int32_t nv = lc_tokenizer_n_vocab(t);
    check(nv > 0, "vocabulary not empty");
    const int32_t bos = lc_tokenizer_bos(t), eos = lc_tokenizer_eos(t);
    check(bos >= -1 && bos < nv && eos >= -1 && eos < nv, "bos/eos in range");
    check(!lc_tokenizer_add_bos(t) || bos >= 0, "add_bos only with a BOS token");
    volatile unsigned sink = 0;
    const int32_t sample[] = {0, 1, 2, nv / 2, nv - 2, nv - 1, nv, -1, bos, eos};
    for (size_t i = 0; i < sizeof sample / sizeof sample[0]; i++) {
        const int32_t id = sample[i];
        size_t len = 0;
        const char *b = lc_tokenizer_token_bytes(t, id, &len);
        const char *tx = lc_tokenizer_token_text(t, id);
        const bool valid = id >= 0 && id < nv;
        check(valid == (b != NULL) && valid == (tx != NULL), "token bytes/text iff id valid");
        if (len) sink += (unsigned char)b[0] + (unsigned char)b[len - 1];
        if (tx) sink += (unsigned)strlen(tx);
        sink += lc_tokenizer_is_eog(t, id);
    }
    (void)sink;
    static const char *texts[] = {
        "Hello, world! The quick brown fox.\n  indented\ttab 12345 don't",
        "Gr\xC3\xBC\xC3\x9F\x65, \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E, \xF0\x9F\x98\x80 \xCE\xB1\xCE\xB2",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "<s>[INST] question [/INST]</s><s><|endoftext|><unk>",
        "",
        " ",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) exercise_encode(t, texts[i], 0);
    static const char plain[] = "abc.XYZ,(0123)_-+=~tok!?";
    exercise_encode(t, plain, is_bpe(g) && spells_all(t, plain));
}

static void exercise_chat(const lc_gguf *g, const lc_tokenizer *t) {
    const char *tmpl = NULL;
    size_t tlen = 0;
    char *jinja = NULL;
    if (lc_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tlen) == LC_OK) {
        jinja = malloc(tlen + 1);
        if (!jinja) return;
        memcpy(jinja, tmpl, tlen);
        jinja[tlen] = '\0';
    }
    lc_chat_template fam = LC_CHAT_TEMPLATE_NONE;
    if (lc_chat_template_detect(jinja, &fam) == LC_OK)
        check(fam >= LC_CHAT_TEMPLATE_CHATML && fam <= LC_CHAT_TEMPLATE_LLAMA31,
              "detected family is a known one");
    else
        check(fam == LC_CHAT_TEMPLATE_NONE, "no family on failure");
    char *def = NULL;
    if (lc_chat_default_system(jinja, &def) == LC_OK && def)
        check(strlen(def) <= tlen, "default system prompt no longer than the template");
    const lc_chat_message msgs[] = {
        {"system", "You are terse."}, {"user", "  Hi <|im_end|> [INST] there  "},
        {"assistant", "Hello."},      {"user", "\xE6\x97\xA5 again"},
    };
    const size_t n_msgs = sizeof msgs / sizeof msgs[0];
    const lc_chat_template all[] = {LC_CHAT_TEMPLATE_CHATML,  LC_CHAT_TEMPLATE_LLAMA3,
                                    LC_CHAT_TEMPLATE_MISTRAL, LC_CHAT_TEMPLATE_GEMMA,
                                    LC_CHAT_TEMPLATE_PHI3,    LC_CHAT_TEMPLATE_LLAMA31};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char *out = NULL;
        int rc = lc_chat_format_ex(all[i], def, msgs + 1, n_msgs - 1, true, &out);
        check(rc == LC_OK || rc == LC_ERR_NOMEM, "chat format of a valid conversation");
        if (out && t && all[i] == fam) { /* the model's own pipeline: format, then encode */
            int32_t *ids = NULL;
            size_t n = 0;
            if (lc_tokenizer_encode(t, out, strlen(out), true, true, &ids, &n) == LC_OK)
                for (size_t k = 0; k < n; k++)
                    check(ids[k] >= 0 && ids[k] < lc_tokenizer_n_vocab(t), "chat id in range");
            free(ids);
        }
        free(out);
        out = NULL;
        rc = lc_chat_format(all[i], msgs, n_msgs, false, &out);
        check(rc == LC_OK || rc == LC_ERR_NOMEM, "chat format with a system message");
        free(out);
    }
    free(def);
    free(jinja);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        lc_log_set(NULL, NULL, LC_LOG_NONE); /* NULL: discard the library's logs */
        init = 1;
    }
    /* an exactly sized heap copy, so reads past the end are caught */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    lc_gguf *g = NULL;
    if (lc_gguf_open_memory(copy, size, &g) != LC_OK) {
        free(copy);
        return 0;
    }
    lc_tokenizer *t = NULL;
    if (lc_tokenizer_load(g, &t) == LC_OK)
        exercise_tokenizer(g, t);
    else if (getenv("LC_FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz_tokenizer_load: load: %s\n", lc_last_error());
    exercise_chat(g, t); /* t may be NULL: the template side alone */
    lc_tokenizer_free(t);
    lc_gguf_close(g);
    free(copy);
    return 0;
}
