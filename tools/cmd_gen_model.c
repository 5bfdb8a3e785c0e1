/*
 * cmd_gen_model.c — `longctx gen-model --arch A --config NAME --out FILE [--type T] [--seed S]`:
 * write a random-weight GGUF with a real model's configuration (lc_model_generate), for speed
 * work at real sizes without downloads.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void help(void) {
    printf("usage: longctx gen-model --arch llama|qwen2 --config NAME --out FILE [--type T]\n"
           "                         [--seed S]\n"
           "\n"
           "Write a GGUF model with the architecture, shapes and metadata of a real model, random\n"
           "weights (std 0.02, deterministic in the seed) and a synthetic byte-level BPE tokenizer\n"
           "of the same vocabulary size. It loads and runs like any GGUF (for speed work; its\n"
           "output is noise).\n"
           "\n"
           "  --arch A       llama or qwen2; must match the config\n"
           "  --config NAME  llama: llama-3.1-8b, llama-3.2-1b, smollm2-135m, tiny, tiny-llama3,\n"
           "                 tiny-hd64, tiny-k;\n"
           "                 qwen2: qwen2.5-7b, tiny-qwen2 (tiny*: small test models)\n"
           "  --out FILE     output path (overwritten)\n"
           "  --type T       weight type (norms and biases stay f32): bf16 (default), q8_0, q4_0,\n"
           "                 q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, or q4_k_m (q4_k with q6_k for the\n"
           "                 output head and for attn_v and ffn_down in the first and last eighth\n"
           "                 of the layers and every third between, as llama.cpp's Q4_K_M). The\n"
           "                 k types need rows of a multiple of 256 values; other matrices fall\n"
           "                 back as llama.cpp's quantiser does: q4_k to q5_0, q5_k to q5_1, q6_k\n"
           "                 to q8_0. Round-to-nearest per block: valid files of the type, not as\n"
           "                 accurate as llama-quantize's\n"
           "  --seed S       random seed (default 0); same seed, same bytes\n");
}

typedef struct progress_ctx {
    cli_progress bar;
} progress_ctx;

static void on_progress(int64_t done, int64_t total, void *user) {
    progress_ctx *p = user;
    cli_progress_update(&p->bar, done, total, "tensors");
}

int cmd_gen_model(int argc, char **argv) {
    const char *arch = NULL, *config = NULL, *out = NULL, *type = "bf16";
    long long   seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--arch")) {
            if (!(arch = cli_value("gen-model", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--config")) {
            if (!(config = cli_value("gen-model", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            if (!(out = cli_value("gen-model", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--type")) {
            if (!(type = cli_value("gen-model", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--seed")) {
            const char *v = cli_value("gen-model", argc, argv, &i);
            if (!v || !cli_int("gen-model", "--seed", v, 0, INT64_MAX, &seed)) return CLI_USAGE;
        } else {
            cli_unknown_option("gen-model", a);
            return CLI_USAGE;
        }
    }
    if (!arch || !config || !out) {
        fprintf(stderr, "longctx gen-model: need --arch, --config and --out (see --help)\n");
        return CLI_USAGE;
    }
    if (strcmp(arch, "llama") != 0 && strcmp(arch, "qwen2") != 0) {
        fprintf(stderr, "longctx gen-model: --arch: '%s' is not one of llama, qwen2\n", arch);
        return CLI_USAGE;
    }
    const char *config_arch = lc_gen_config_arch(config);
    if (!config_arch) {
        fprintf(stderr, "longctx gen-model: --config: '%s' is not one of %s\n", config,
                lc_gen_config_names());
        return CLI_USAGE;
    }
    if (strcmp(config_arch, arch) != 0) {
        fprintf(stderr, "longctx gen-model: --arch %s does not match --config %s (its arch is %s)\n",
                arch, config, config_arch);
        return CLI_USAGE;
    }
    lc_gen_type t;
    if (lc_gen_type_parse(type, &t) != LC_OK) {
        fprintf(stderr, "longctx gen-model: --type: %s\n", lc_last_error());
        return CLI_USAGE;
    }
    progress_ctx pc;
    cli_progress_begin(&pc.bar, "writing");
    lc_gen_params p = {.config = config, .path = out, .type = t, .seed = (uint64_t)seed,
                       .progress = on_progress, .progress_user = &pc};
    const double t0 = cli_now();
    int          st = lc_model_generate(&p);
    cli_progress_end(&pc.bar);
    if (st != LC_OK) {
        cli_fail("gen-model", out, st);
        return CLI_ERR;
    }
    struct stat sb;
    long long   size = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    fprintf(stderr, "longctx gen-model: wrote %s (%s, %s, %.2f GB) in %.1f s\n", out, config, type,
            (double)size / 1e9, cli_now() - t0);
    return CLI_OK;
}
