/*
 * test_model_hostile.c — hostile and broken model files (issue 20 items 1, 6 and 9), made
 * from the tiny llama fixture with tests/gguf_edit.h:
 *   - a rope_freqs.weight whose bytes are fewer than its first dimension says (shape [16, 0]
 *     at the end of the file), one with a NaN factor, one of the wrong length: refused with
 *     LC_ERR_FORMAT naming the tensor, before a byte of it is read;
 *   - block_count far beyond the tensor table (2^29, and one more than the table): refused
 *     with LC_ERR_FORMAT naming block_count, before per-layer arrays are sized by it;
 *   - general.architecture "llama\0junk": refused, not taken for llama;
 *   - NaN weights (the scenarios of tests/numerics_run.h, on the CPU): the sequence that
 *     meets them finishes with LC_FINISH_ERROR and an error naming the layer and block, a
 *     sequence beside it is not harmed; test_numerics_cuda.c runs the same on the GPU.
 */
#include "gguf_edit.h"
#include "numerics_run.h"
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SRC LC_SOURCE_DIR "/tests/fixtures/tiny/llama-untied.gguf"

static char g_dir[64];

static int make(const char *name, const gguf_edit *e, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.gguf", g_dir, name);
    int st = gguf_edit_copy(SRC, path, e);
    CHECKF(st == LC_OK, "writing %s: %s", path, lc_last_error());
    return st;
}

static int load(const char *path, lc_model **m) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 1;
    *m                 = NULL;
    return lc_model_load(path, &mp, m);
}

/* A byte patch for what the writer cannot write: at `at` bytes after the first occurrence of
 * `find`, n bytes that must read `was` become `now`; then `cut` bytes come off the end. */
typedef struct file_patch {
    const char *find;
    size_t      at, n, cut;
    const void *was, *now;
} file_patch;

static bool patch_file(const char *path, const file_patch *fp) {
    FILE *f   = fopen(path, "rb");
    long  len = -1;
    char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)len);
        if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) len = -1;
    }
    if (f) fclose(f);
    char *hit = buf && len > 0 ? memmem(buf, (size_t)len, fp->find, strlen(fp->find)) : NULL;
    bool  ok  = hit && (size_t)(hit - buf) + fp->at + fp->n <= (size_t)len &&
              fp->cut <= (size_t)len && memcmp(hit + fp->at, fp->was, fp->n) == 0;
    CHECKF(ok, "%s: \"%s\" with the expected bytes not found", path, fp->find);
    if (ok) {
        memcpy(hit + fp->at, fp->now, fp->n);
        f  = fopen(path, "wb");
        ok = f && fwrite(buf, 1, (size_t)len - fp->cut, f) == (size_t)len - fp->cut;
        if (f) fclose(f);
        CHECKF(ok, "%s: rewriting failed", path);
    }
    free(buf);
    return ok;
}

/* load must fail with FORMAT and a message containing `what` (fp: patched first, may be
 * NULL) */
static void expect_refused(const char *name, const gguf_edit *e, const file_patch *fp,
                           const char *what) {
    char path[128];
    if (make(name, e, path, sizeof path) != LC_OK) return;
    if (fp && !patch_file(path, fp)) {
        unlink(path);
        return;
    }
    lc_model *m  = NULL;
    int       st = load(path, &m);
    CHECKF(st == LC_ERR_FORMAT && strstr(lc_last_error(), what),
           "%s: status %d, message \"%s\" (want a format error naming %s)", name, st,
           lc_last_error(), what);
    lc_model_free(m);
    unlink(path);
}

int main(void) {
    lc_log_set(NULL, NULL, LC_LOG_NONE);
    snprintf(g_dir, sizeof g_dir, "/tmp/lc-hostile-XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }

    /* ---- rope_freqs ---- */
    {
        /* shape [16, 0] as the last tensor, at the very end of the file: written as [16, 1]
         * (the writer refuses empty dimensions), then ne[1] patched to 0 and its 64 data
         * bytes cut off */
        gguf_extra_tensor x = {"rope_freqs.weight", 2, {16, 1, 1, 1}, 0 /* f32 */, NULL};
        gguf_edit         e = {.extra = &x, .n_extra = 1, .fill_row = -1};
        const uint64_t one = 1, zero = 0;
        const file_patch ne1_zero = {"rope_freqs.weight", 17 + 4 + 8 /* n_dims, ne[0] */, 8, 64,
                                     &one, &zero};
        expect_refused("rope_freqs_empty", &e, &ne1_zero, "rope_freqs.weight");
        float f[16];
        for (int i = 0; i < 16; i++) f[i] = 1.0f + (float)i;
        f[5]           = NAN;
        gguf_extra_tensor xn = {"rope_freqs.weight", 1, {16, 1, 1, 1}, 0, f};
        e.extra              = &xn;
        expect_refused("rope_freqs_nan", &e, NULL, "rope_freqs.weight");
        gguf_extra_tensor xs = {"rope_freqs.weight", 1, {8, 1, 1, 1}, 0, NULL};
        e.extra              = &xs;
        expect_refused("rope_freqs_short", &e, NULL, "rope_freqs.weight");
        /* a good one loads */
        char path[128];
        f[5]                 = 6.0f;
        gguf_extra_tensor xg = {"rope_freqs.weight", 1, {16, 1, 1, 1}, 0, f};
        e.extra              = &xg;
        if (make("rope_freqs_ok", &e, path, sizeof path) == LC_OK) {
            lc_model *m = NULL;
            CHECKF(load(path, &m) == LC_OK, "rope_freqs_ok: %s", lc_last_error());
            lc_model_free(m);
            unlink(path);
        }
    }

    /* ---- block_count beyond the tensor table ---- */
    {
        gguf_edit e = {.set_u32_key = "llama.block_count", .set_u32_value = 1u << 29,
                       .fill_row = -1};
        expect_refused("blocks_huge", &e, NULL, "block_count");
        e.set_u32_value = 3;
        expect_refused("blocks_plus1", &e, NULL, "block_count");
    }

    /* ---- general.architecture "llama\0junk" (written as "llamaXjunk", the X patched) ---- */
    {
        gguf_edit e = {.set_str_key = "general.architecture", .set_str_value = "llamaXjunk",
                       .fill_row = -1};
        const file_patch nul = {"llamaXjunk", 5, 1, 0, "X", ""};
        expect_refused("arch_nul", &e, &nul, "architecture");
    }

    /* ---- NaN weights (tests/numerics_run.h) ---- */
    const numerics_cfg cpu = {LC_DEVICE_CPU, 16};
    numerics_scenarios(&cpu, SRC, g_dir);
    rmdir(g_dir);
    TEST_END();
}
