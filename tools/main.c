/*
 * main.c — the longctx command-line tool: dispatches to the subcommands (run, chat, inspect,
 * tokenize, eval, bench, gen-model, serve), each a thin main over include/longctx.h.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: longctx COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  run       generate text from a prompt or a file (streams to stdout)\n"
            "  chat      interactive multi-turn chat (optionally about a file read once)\n"
            "  inspect   print a GGUF file's metadata and tensor table\n"
            "  tokenize  print the token ids (and pieces) of a text\n"
            "  eval      long-context evaluation: suite (natural-text tasks), passkey, ppl, fidelity\n"
            "  bench     prompt and generation speed at several context lengths\n"
            "  gen-model write a random-weight GGUF with a real model's configuration\n"
            "  serve     an OpenAI-compatible HTTP server (chat, completions, streaming)\n"
            "\n"
            "'longctx COMMAND --help' shows the options of a command; 'longctx --version' the\n"
            "version, commit, CUDA build and GPU.\n");
}

int main(int argc, char **argv) {
    lc_log_set(cli_log, NULL, LC_LOG_WARN);
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        const lc_build_info b = lc_build();
        char                gpu[256];
        const int           st = lc_gpu_name(gpu, sizeof gpu);
        printf("longctx %s (commit %s)\nCUDA: %s%s\nGPU: %s\n", b.version, b.commit,
               b.cuda ? "built for " : "not built", b.cuda ? b.cuda_archs : "",
               st == LC_OK ? gpu : lc_last_error());
        return CLI_OK;
    }
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "chat") == 0) return cmd_chat(argc - 1, argv + 1);
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "gen-model") == 0) return cmd_gen_model(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0) return cmd_serve(argc - 1, argv + 1);
    fprintf(stderr, "longctx: unknown command '%s' (see longctx --help)\n", cmd);
    return CLI_USAGE;
}
