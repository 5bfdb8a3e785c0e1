/*
 * cmd_inspect.c — `longctx inspect FILE`: a GGUF file's header, metadata and tensor table.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void help(void) {
    printf("usage: longctx inspect [--tensors-only|--meta-only] [--full] FILE\n"
           "\n"
           "Print the GGUF header, every metadata key with its type and value, and the tensor\n"
           "table (name, type, shape, offset, bytes).\n"
           "  --full          print arrays in full (default: first 8 elements)\n"
           "  --meta-only     skip the tensor table\n"
           "  --tensors-only  skip the metadata\n");
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool        full = false, meta = true, tensors = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(argv[i], "--full")) {
            full = true;
        } else if (!strcmp(argv[i], "--meta-only")) {
            tensors = false;
        } else if (!strcmp(argv[i], "--tensors-only")) {
            meta = false;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_unknown_option("inspect", argv[i]);
            return CLI_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "longctx inspect: one file at a time ('%s' is extra)\n", argv[i]);
            return CLI_USAGE;
        }
    }
    if (!path) {
        fprintf(stderr, "longctx inspect: no file given (see longctx inspect --help)\n");
        return CLI_USAGE;
    }
    lc_gguf *g;
    int      st = lc_gguf_open(path, &g);
    if (st != LC_OK) {
        cli_fail("inspect", path, st);
        return CLI_ERR;
    }
    printf("file: %s\nGGUF version %u, alignment %u, %lld metadata keys, %lld tensors\n", path,
           lc_gguf_version(g), lc_gguf_alignment(g), (long long)lc_gguf_n_kv(g),
           (long long)lc_gguf_n_tensors(g));
    static char buf[1 << 16];
    char        name[1024]; /* a key or tensor name, escaped (file bytes never reach the terminal) */
    if (meta) {
        printf("\nmetadata:\n");
        for (int64_t i = 0; i < lc_gguf_n_kv(g); i++) {
            lc_gguf_kv_format(g, i, full ? (size_t)-1 / 2 : 8, buf, sizeof buf);
            const char *key = lc_gguf_kv_key(g, i);
            printf("  %-45s %s\n", lc_text_escape(name, sizeof name, key, strlen(key)), buf);
        }
    }
    if (tensors) {
        printf("\ntensors:\n  %-5s %-40s %-6s %-24s %14s %12s\n", "#", "name", "type", "shape",
               "offset", "bytes");
        uint64_t total = 0;
        for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
            const lc_gguf_tensor *t = lc_gguf_tensor_at(g, i);
            char                  shape[96];
            int                   n = snprintf(shape, sizeof shape, "[");
            for (uint32_t d = 0; d < t->n_dims && n < (int)sizeof shape; d++)
                n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->ne[d]);
            if (n < (int)sizeof shape) snprintf(shape + n, sizeof shape - (size_t)n, "]");
            const char *tn = lc_type_name(t->type);
            printf("  %-5lld %-40s %-6s %-24s %14llu %12llu\n", (long long)i,
                   lc_text_escape(name, sizeof name, t->name, strlen(t->name)),
                   tn ? tn : "?", shape, (unsigned long long)t->offset,
                   (unsigned long long)t->nbytes);
            total += t->nbytes;
        }
        printf("  total tensor data: %llu bytes (%.1f MiB)\n", (unsigned long long)total,
               (double)total / 1048576.0);
    }
    lc_gguf_close(g);
    return CLI_OK;
}
