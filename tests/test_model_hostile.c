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

/* load must fail with FORMAT and a message containing `what` */
static void expect_refused(const char *name, const gguf_edit *e, const char *what) {
    char path[128];
    if (make(name, e, path, sizeof path) != LC_OK) return;
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
        char              path[128];
        if (make("rope_freqs_empty", &e, path, sizeof path) == LC_OK) {
            FILE *f   = fopen(path, "rb");
            long  len = 0;
            char *buf = NULL;
            if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 64 && !fseek(f, 0, SEEK_SET)) {
                buf = malloc((size_t)len);
                if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) len = 0;
            }
            if (f) fclose(f);
            const char *name = buf ? memmem(buf, (size_t)len, "rope_freqs.weight", 17) : NULL;
            CHECK(name != NULL);
            if (name) {
                char    *ne1  = (char *)name + 17 + 4 + 8; /* n_dims u32, ne[0] u64 */
                uint64_t one  = 0, zero = 0;
                memcpy(&one, ne1, 8);
                CHECK(one == 1);
                memcpy(ne1, &zero, 8);
                f = fopen(path, "wb");
                CHECK(f && fwrite(buf, 1, (size_t)len - 64, f) == (size_t)len - 64);
                if (f) fclose(f);
                lc_model *m  = NULL;
                int       st = load(path, &m);
                CHECKF(st == LC_ERR_FORMAT && strstr(lc_last_error(), "rope_freqs.weight"),
                       "rope_freqs [16, 0]: status %d, \"%s\"", st, lc_last_error());
                lc_model_free(m);
            }
            free(buf);
            unlink(path);
        }
        float f[16];
        for (int i = 0; i < 16; i++) f[i] = 1.0f + (float)i;
        f[5]           = NAN;
        gguf_extra_tensor xn = {"rope_freqs.weight", 1, {16, 1, 1, 1}, 0, f};
        e.extra              = &xn;
        expect_refused("rope_freqs_nan", &e, "rope_freqs.weight");
        gguf_extra_tensor xs = {"rope_freqs.weight", 1, {8, 1, 1, 1}, 0, NULL};
        e.extra              = &xs;
        expect_refused("rope_freqs_short", &e, "rope_freqs.weight");
        /* a good one loads */
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
        expect_refused("blocks_huge", &e, "block_count");
        e.set_u32_value = 3;
        expect_refused("blocks_plus1", &e, "block_count");
    }

    /* ---- general.architecture "llama\0junk" (written as "llamaXjunk", the X patched) ---- */
    {
        gguf_edit e = {.set_str_key = "general.architecture", .set_str_value = "llamaXjunk",
                       .fill_row = -1};
        char      path[128];
        if (make("arch_nul", &e, path, sizeof path) == LC_OK) {
            FILE *f   = fopen(path, "r+b");
            char  buf[4096];
            size_t n  = f ? fread(buf, 1, sizeof buf, f) : 0;
            char  *at = memmem(buf, n, "llamaXjunk", 10);
            CHECK(at != NULL);
            if (at && f) {
                fseek(f, (long)(at - buf) + 5, SEEK_SET);
                fputc('\0', f);
            }
            if (f) fclose(f);
            lc_model *m  = NULL;
            int       st = load(path, &m);
            CHECKF(st == LC_ERR_FORMAT && strstr(lc_last_error(), "architecture"),
                   "arch with NUL: status %d, \"%s\"", st, lc_last_error());
            lc_model_free(m);
            unlink(path);
        }
    }

    /* ---- NaN weights (tests/numerics_run.h) ---- */
    const numerics_cfg cpu = {LC_DEVICE_CPU, 16};
    numerics_scenarios(&cpu, SRC, g_dir);
    rmdir(g_dir);
    TEST_END();
}
