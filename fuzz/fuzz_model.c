/*
 * fuzz_model.c — libFuzzer target for model loading on hostile files: the input is a GGUF
 * image, handed to the public lc_model_load (CPU backend, one thread) through a memfd named
 * /proc/self/fd/N, so hyper-parameter reading, tensor shape checks, weight dequantisation and
 * the tokenizer/chat-template setup all see it as a file. When it loads, a tiny generation
 * runs through the public API (32-token context, 16-token pages, a 3-token prompt, one greedy
 * token; with a repeat penalty when the input size is odd) and everything is freed. Any crash or sanitizer report is a finding; run with
 * -malloc_limit_mb so hyper-parameters that make the library allocate gigabytes show up too.
 */
#include "longctx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int g_verbose; /* $LC_FUZZ_VERBOSE set: say how each input fared (for checking seeds) */

/* Write all of data to fd; false on a short write. */
static int write_all(int fd, const uint8_t *data, size_t size) {
    while (size) {
        ssize_t w = write(fd, data, size);
        if (w <= 0) return 0;
        data += w;
        size -= (size_t)w;
    }
    return 1;
}

/* penalty: a repeat penalty of 1.1 over 8 tokens, else plain greedy (repeat_penalty 1: no
 * penalty buffer at all, the path of a0ec703's NULL + 0 fix); the caller picks by input size */
static void run_tiny_generation(lc_model *m, int penalty) {
    lc_model_info info;
    if (lc_model_get_info(m, &info) != LC_OK) abort();
    if (info.n_vocab <= 0 || info.n_layer <= 0) abort();
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx     = 32;
    cp.n_seq_max = 1;
    cp.n_batch   = 32;
    cp.page_size = 16;
    lc_context *c = NULL;
    if (lc_context_create(m, &cp, &c) != LC_OK) {
        if (g_verbose) fprintf(stderr, "fuzz_model: context: %s\n", lc_last_error());
        return;
    }
    const int32_t prompt[3] = {0, info.n_vocab - 1, info.n_vocab / 2};
    lc_request r;
    memset(&r, 0, sizeof r);
    r.prompt     = prompt;
    r.n_prompt   = 3;
    r.max_tokens = 1;
    r.sampling   = lc_sampling_default();
    r.sampling.temperature = 0.0f;
    if (penalty) {
        r.sampling.repeat_penalty = 1.1f;
        r.sampling.repeat_last_n  = 8;
    }
    int32_t seq;
    if (lc_context_add(c, &r, &seq) == LC_OK) {
        for (int step = 0; step < 16; step++) {
            lc_event ev[4];
            size_t   n = 0;
            if (lc_context_step(c, ev, 4, &n) != LC_OK || n == 0) break;
            int done = 0;
            for (size_t i = 0; i < n; i++) {
                if (ev[i].token >= info.n_vocab || ev[i].token < -1) abort();
                if (ev[i].finish != LC_FINISH_NONE) done = 1;
            }
            if (done) break;
        }
        if (g_verbose) fprintf(stderr, "fuzz_model: generated\n");
        const float *logits = lc_context_logits(c, seq);
        if (logits) {
            volatile float sink = logits[0] + logits[info.n_vocab - 1];
            (void)sink;
        }
    }
    lc_context_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        lc_log_set(NULL, NULL, LC_LOG_NONE); /* NULL: discard the library's logs */
        g_verbose = getenv("LC_FUZZ_VERBOSE") != NULL;
        init = 1;
    }
    int fd = memfd_create("fuzz_model.gguf", MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz_model: memfd_create");
        abort();
    }
    if (!write_all(fd, data, size)) {
        perror("fuzz_model: write to memfd");
        abort();
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    lc_model_params mp = lc_model_default_params();
    mp.device    = LC_DEVICE_CPU;
    mp.n_threads = 1;
    lc_model *m  = NULL;
    if (lc_model_load(path, &mp, &m) == LC_OK) {
        run_tiny_generation(m, (int)(size & 1));
        lc_model_free(m);
    } else if (g_verbose) {
        fprintf(stderr, "fuzz_model: load: %s\n", lc_last_error());
    }
    close(fd);
    return 0;
}
