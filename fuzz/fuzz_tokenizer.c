/*
 * fuzz_tokenizer.c — libFuzzer target for the tokenizer: the input is text. Invalid UTF-8
 * must be rejected with LC_ERR_INVALID_ARG; valid UTF-8 must encode (with and without
 * special-token parsing) to ids whose bytes concatenate back to the input (less the few
 * bytes a vocabulary cannot spell, which are dropped as llama.cpp drops them), and the streaming
 * detokeniser must reproduce it exactly. Any violation aborts. The vocabulary comes from
 * $LC_FUZZ_TOKENIZER_GGUF, else the SmolLM2 model in models/, else the tiny qwen2 fixture.
 */
#include "format/gguf.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet_log(lc_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user;
}

static lc_gguf      *g_gguf;
static lc_tokenizer *g_tok;
static bool          g_missing[256]; /* bytes the vocabulary cannot spell (dropped) */

static void load(void) {
    const char *candidates[] = {getenv("LC_FUZZ_TOKENIZER_GGUF"),
                                "models/SmolLM2-135M-Instruct.Q4_1.gguf",
                                "tests/fixtures/tiny/qwen2.gguf"};
    for (size_t i = 0; i < 3 && !g_tok; i++) {
        if (!candidates[i]) continue;
        if (lc_gguf_open(candidates[i], &g_gguf) != LC_OK) continue;
        if (lc_tokenizer_load(g_gguf, &g_tok) != LC_OK) {
            lc_gguf_close(g_gguf);
            g_gguf = NULL;
            continue;
        }
        fprintf(stderr, "fuzz_tokenizer: vocabulary from %s\n", candidates[i]);
    }
    /* a byte is spellable when some token stands for exactly that byte */
    for (int b = 0; b < 256; b++) g_missing[b] = true;
    for (int32_t id = 0; id < lc_tokenizer_n_vocab(g_tok); id++) {
        size_t      tl;
        const char *tb = lc_tokenizer_token_bytes(g_tok, id, &tl);
        if (tb && tl == 1) g_missing[(unsigned char)tb[0]] = false;
    }
    if (!g_tok) {
        fprintf(stderr, "fuzz_tokenizer: no tokenizer GGUF found (run from the repository root)\n");
        abort();
    }
}

/* strict UTF-8 validity (no overlongs, surrogates or code points past U+10FFFF) */
static int valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        size_t        len;
        uint32_t      cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static void check_roundtrip(const uint8_t *input, size_t in_size, bool special) {
    int32_t *ids = NULL;
    size_t   n   = 0;
    if (lc_tokenizer_encode(g_tok, (const char *)input, in_size, false, special, &ids, &n) != LC_OK)
        abort(); /* valid UTF-8 must encode */
    /* what must come back: the input less the bytes the vocabulary cannot spell */
    uint8_t *data = malloc(in_size + 1);
    size_t   size = 0;
    for (size_t k = 0; k < in_size; k++)
        if (!g_missing[input[k]]) data[size++] = input[k];
    char  *back = malloc(size + 1), *stream = malloc(3 * size + 64 * (n + 1) + 1);
    size_t bl = 0, sl = 0;
    lc_detok d;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < n; i++) {
        size_t      tl;
        const char *t = lc_tokenizer_token_bytes(g_tok, ids[i], &tl);
        if (!t || bl + tl > size || memcmp(data + bl, t, tl) != 0) abort(); /* bytes differ */
        memcpy(back + bl, t, tl);
        bl += tl;
        char   buf[4096];
        size_t nb = 0;
        if (tl * 3 + 64 <= sizeof buf) {
            if (lc_detok_push(&d, g_tok, ids[i], buf, sizeof buf, &nb) != LC_OK) abort();
            memcpy(stream + sl, buf, nb);
            sl += nb;
        } else {
            sl = (size_t)-1; /* token too long for this buffer: skip the stream check */
            break;
        }
    }
    if (bl != size && sl != (size_t)-1) abort(); /* ids do not cover the input */
    if (sl != (size_t)-1) {
        char   buf[64];
        size_t nb = 0;
        if (lc_detok_flush(&d, buf, sizeof buf, &nb) != LC_OK) abort();
        memcpy(stream + sl, buf, nb);
        sl += nb;
        /* with bytes dropped the rest may not be valid UTF-8 any more (the streamer then
         * prints U+FFFD), so the exact comparison holds only for fully spellable input */
        if (size == in_size && (sl != size || memcmp(stream, data, size) != 0))
            abort(); /* streaming differs */
    }
    free(back);
    free(stream);
    free(ids);
    free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_tok) {
        lc_log_set(quiet_log, NULL, LC_LOG_ERROR);
        load();
    }
    if (size > 4096) return 0;
    if (!valid_utf8(data, size)) {
        int32_t *ids = NULL;
        size_t   n   = 0;
        if (lc_tokenizer_encode(g_tok, (const char *)data, size, false, false, &ids, &n) !=
            LC_ERR_INVALID_ARG)
            abort(); /* invalid UTF-8 must be rejected */
        free(ids);
        return 0;
    }
    check_roundtrip(data, size, false);
    check_roundtrip(data, size, true);
    return 0;
}
