/*
 * test_escape.c — bytes from a file never reach a terminal raw (issue 20, item 8):
 *   - lc_text_escape: control characters, DEL, C1 controls, invalid UTF-8 and backslashes
 *     escaped; printable ASCII and valid UTF-8 kept; the length cap cuts at a character
 *     boundary with "...";
 *   - crafted GGUF images whose architecture, rope scaling type, tokenizer model, merges,
 *     pre-tokenizer name, key names and string values contain "\x1b[2J" (clear screen) or an
 *     OSC title sequence: every error, warning and lc_gguf_kv_format rendering shows the
 *     escape as text and holds no control byte.
 */
#include "format/gguf.h"
#include "longctx.h"
#include "model/model.h"
#include "gguf_image.h"
#include "test_util.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* No C0 control byte, DEL or C1 control (as UTF-8 U+0080..U+009F or a raw 0x80..0x9F byte
 * outside a valid character) in s. */
static bool clean(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return false;
        if (*p == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0) return false;
    }
    return true;
}

static bool has(const char *s, const char *sub) {
    return s && strstr(s, sub) != NULL;
}

static void test_escape_fn(void) {
    char b[64];
    CHECK(strcmp(lc_text_escape(b, sizeof b, "plain text", 10), "plain text") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "a\x1b[2Jb", 6), "a\\x1b[2Jb") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\n\t\r\x7f\x07", 5), "\\x0a\\x09\\x0d\\x7f\\x07") ==
          0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "a\\b", 3), "a\\\\b") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "x\0y", 3), "x\\x00y") == 0);
    /* valid UTF-8 kept: 2, 3 and 4 bytes, U+00A0 (first after C1) */
    const char *u = "\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82 \xc2\xa0";
    CHECK(strcmp(lc_text_escape(b, sizeof b, u, strlen(u)), u) == 0);
    /* C1 CSI (U+009B), invalid bytes, overlong, surrogate, above U+10FFFF, truncated */
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\xc2\x9b" "2J", 4), "\\xc2\\x9b2J") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\x9b\xff", 2), "\\x9b\\xff") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\xc0\xaf", 2), "\\xc0\\xaf") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\xed\xa0\x80", 3), "\\xed\\xa0\\x80") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "\xf4\x90\x80\x80", 4), "\\xf4\\x90\\x80\\x80") == 0);
    CHECK(strcmp(lc_text_escape(b, sizeof b, "a\xe6\x97", 3), "a\\xe6\\x97") == 0);
    /* the cap: whole characters and "..." */
    char s[8];
    CHECK(strcmp(lc_text_escape(s, sizeof s, "abcdefgh", 8), "abcd...") == 0);
    CHECK(strcmp(lc_text_escape(s, sizeof s, "abcdefg", 7), "abcdefg") == 0);
    CHECK(strcmp(lc_text_escape(s, sizeof s, "ab\x1b" "cdef", 7), "ab...") == 0);
    CHECK(strcmp(lc_text_escape(s, sizeof s, "a\xe6\x97\xa5\xe6\x97\xa5", 7), "a\xe6\x97\xa5\xe6\x97\xa5") == 0);
    CHECK(strcmp(lc_text_escape(s, 7, "a\xe6\x97\xa5\xe6\x97\xa5", 7), "a...") == 0);
    CHECK(strcmp(lc_text_escape(s, sizeof s, "a\x1b\x1b", 3), "a...") == 0);
    CHECK(strcmp(lc_text_escape(s, 3, "abcdef", 6), "ab") == 0);
    CHECK(strcmp(lc_text_escape(s, 1, "abc", 3), "") == 0);
    CHECK(strcmp(lc_text_escape(NULL, 0, "abc", 3), "") == 0);
    CHECK(strcmp(lc_text_escape(s, sizeof s, NULL, 0), "") == 0);
    /* every byte value alone: clean output */
    for (int c = 0; c < 256; c++) {
        char one = (char)c;
        CHECKF(clean(lc_text_escape(b, sizeof b, &one, 1)), "byte 0x%02x", c);
    }
}

/* ---- GGUF images in memory ---------------------------------------------------------------- */

/* The image of the kv set (no tensors); b is reset. */
static unsigned char *image(gbuf *b, size_t *size) {
    unsigned char *out = gguf_image(b, size);
    free(b->p);
    memset(b, 0, sizeof *b);
    return out;
}

static lc_gguf *open_image(gbuf *b, unsigned char **img) {
    size_t size;
    *img       = image(b, &size);
    lc_gguf *g = NULL;
    int rc     = lc_gguf_open_memory(*img, size, &g);
    CHECKF(rc == LC_OK, "image rejected: %s", lc_last_error());
    return g;
}

static void llama_hparams(gbuf *b, const char *arch) {
    kv_str(b, "general.architecture", arch);
    kv_u32(b, "llama.block_count", 2);
    kv_u32(b, "llama.embedding_length", 64);
    kv_u32(b, "llama.feed_forward_length", 128);
    kv_u32(b, "llama.attention.head_count", 2);
    kv_u32(b, "llama.context_length", 256);
}

static void test_model_metadata(void) {
    gbuf           b = {0};
    unsigned char *img;
    lc_hparams     hp;
    llama_hparams(&b, "ll\x1b[2Jama\x1b]0;pwned\x07");
    lc_gguf *g = open_image(&b, &img);
    CHECK(g && lc_hparams_read(g, &hp) == LC_ERR_UNSUPPORTED);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "ll\\x1b[2Jama"), "%s", lc_last_error());
    lc_gguf_close(g);
    free(img);

    /* the whole load, from a file */
    llama_hparams(&b, "\x1b[2J");
    size_t         size;
    unsigned char *im2     = image(&b, &size);
    char           path[]  = "/tmp/lc_test_escape_XXXXXX";
    int            fd      = mkstemp(path);
    CHECK(fd >= 0 && write(fd, im2, size) == (ssize_t)size);
    if (fd >= 0) close(fd);
    free(im2);
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    lc_model *m        = NULL;
    CHECK(lc_model_load(path, &mp, &m) == LC_ERR_UNSUPPORTED && m == NULL);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "\\x1b[2J"), "%s", lc_last_error());
    unlink(path);

    llama_hparams(&b, "llama");
    kv_str(&b, "llama.rope.scaling.type", "yarn\x1b[2J");
    g = open_image(&b, &img);
    CHECK(g && lc_hparams_read(g, &hp) == LC_ERR_UNSUPPORTED);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "yarn\\x1b[2J"), "%s", lc_last_error());
    lc_gguf_close(g);
    free(img);
}

static char g_warn[1024];
static void keep_warn(lc_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == LC_LOG_WARN) snprintf(g_warn, sizeof g_warn, "%s", msg);
}

static void test_tokenizer_metadata(void) {
    gbuf           b = {0};
    unsigned char *img;
    lc_tokenizer  *t = NULL;
    kv_str(&b, "tokenizer.ggml.model", "gpt\x1b[2J");
    lc_gguf *g = open_image(&b, &img);
    CHECK(g && lc_tokenizer_load(g, &t) == LC_ERR_UNSUPPORTED && t == NULL);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "gpt\\x1b[2J"), "%s", lc_last_error());
    lc_gguf_close(g);
    free(img);

    /* merges: an entry without a space, an entry naming an unknown token */
    const char *toks[]   = {"a", "b", "ab"};
    const char *bad1[]   = {"a\x1b[2Jb"};
    const char *bad2[]   = {"a \x1b[2J"};
    const char *const *merges[] = {bad1, bad2};
    for (int k = 0; k < 2; k++) {
        kv_str(&b, "tokenizer.ggml.model", "gpt2");
        kv_str(&b, "tokenizer.ggml.pre", "smollm");
        kv_arr_str(&b, "tokenizer.ggml.tokens", toks, 3);
        kv_arr_str(&b, "tokenizer.ggml.merges", merges[k], 1);
        g = open_image(&b, &img);
        CHECK(g && lc_tokenizer_load(g, &t) == LC_ERR_FORMAT && t == NULL);
        CHECKF(clean(lc_last_error()) && has(lc_last_error(), "\\x1b[2J"), "%s", lc_last_error());
        lc_gguf_close(g);
        free(img);
    }

    /* an unknown pre-tokenizer: a warning, escaped */
    const char *good[] = {"a b"};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "evil\x1b]0;title\x07");
    kv_arr_str(&b, "tokenizer.ggml.tokens", toks, 3);
    kv_arr_str(&b, "tokenizer.ggml.merges", good, 1);
    g = open_image(&b, &img);
    g_warn[0] = '\0';
    lc_log_set(keep_warn, NULL, LC_LOG_WARN);
    CHECK(g && lc_tokenizer_load(g, &t) == LC_OK && t != NULL);
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    CHECKF(g_warn[0] && clean(g_warn) && has(g_warn, "evil\\x1b]0;title\\x07"), "%s", g_warn);
    lc_tokenizer_free(t);
    lc_gguf_close(g);
    free(img);
}

static void test_gguf_keys(void) {
    gbuf           b = {0};
    unsigned char *img;
    kv_str(&b, "bad\x1b[2Jkey", "v\x1b]0;pwned\x07 \xc2\x9b" "2J \xff \xc3\xa9");
    lc_gguf *g = open_image(&b, &img);
    if (!g) return;
    uint32_t v;
    CHECK(lc_gguf_get_u32(g, "bad\x1b[2Jkey", &v) == LC_ERR_FORMAT);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "bad\\x1b[2Jkey"), "%s", lc_last_error());
    CHECK(lc_gguf_kv_array_info(g, 0, NULL, NULL) == LC_ERR_INVALID_ARG);
    CHECKF(clean(lc_last_error()) && has(lc_last_error(), "bad\\x1b[2Jkey"), "%s", lc_last_error());
    char buf[256];
    CHECK(lc_gguf_kv_format(g, 0, 8, buf, sizeof buf) == LC_OK);
    /* the control bytes escaped, C1 CSI and the bad byte too; é kept */
    CHECKF(clean(buf) && has(buf, "v\\x1b]0;pwned\\x07") && has(buf, "\\xc2\\x9b2J") &&
               has(buf, "\\xff") && has(buf, "\xc3\xa9"),
           "%s", buf);
    lc_gguf_close(g);
    free(img);
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    test_escape_fn();
    test_model_metadata();
    test_tokenizer_metadata();
    test_gguf_keys();
    TEST_END();
}
