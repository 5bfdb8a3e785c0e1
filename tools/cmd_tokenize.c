/*
 * cmd_tokenize.c — `longctx tokenize -m FILE -p TEXT`: token ids (and pieces) of a text,
 * using only the tokenizer metadata of the GGUF (weights are not loaded).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: longctx tokenize -m FILE (-p TEXT | -f FILE) [--pieces] [--bos] [--no-special]\n"
           "\n"
           "  -m, --model FILE   GGUF model (only its tokenizer is read)\n"
           "  -p, --prompt TEXT  text to tokenize\n"
           "  -f, --file FILE    read the text from a file (- : standard input)\n"
           "  --pieces           print 'id<TAB>piece' lines instead of a list of ids\n"
           "  --bos              prepend BOS when the model asks for it\n"
           "  --no-special       treat special-token text (e.g. <|im_start|>) as plain text\n"
           "  --count            print only the number of tokens\n");
}

static void print_piece(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\t') fputs("\\t", stdout);
        else if (ch == '\\') fputs("\\\\", stdout);
        else if (ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
        else if (ch >= 0x80) { /* valid UTF-8 kept; C1 controls, partial and bad bytes escaped */
            size_t e = i;
            while (e < n && (unsigned char)p[e] >= 0x80) e++;
            char esc[256];
            for (size_t c = i; c < e; c += 32) /* 32 bytes render in at most 128 */
                fputs(lc_text_escape(esc, sizeof esc, p + c, e - c < 32 ? e - c : 32), stdout);
            i = e - 1;
        } else putchar(ch);
    }
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool        pieces = false, bos = false, special = true, count = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value("tokenize", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = cli_value("tokenize", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value("tokenize", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "--bos")) {
            bos = true;
        } else if (!strcmp(a, "--no-special")) {
            special = false;
        } else if (!strcmp(a, "--count")) {
            count = true;
        } else {
            cli_unknown_option("tokenize", a);
            return CLI_USAGE;
        }
    }
    if (!model || (!prompt && !file) || (prompt && file)) {
        fprintf(stderr, "longctx tokenize: need -m FILE and one of -p TEXT / -f FILE (see --help)\n");
        return CLI_USAGE;
    }
    char  *text = NULL;
    size_t len  = 0;
    if (file) {
        if (!(text = cli_read_file("tokenize", file, &len))) return CLI_ERR;
    }
    lc_gguf      *g   = NULL;
    lc_tokenizer *tok = NULL;
    int32_t      *ids = NULL;
    size_t        n   = 0;
    int           rc  = CLI_ERR;
    int           st  = lc_gguf_open(model, &g);
    if (st != LC_OK) {
        cli_fail("tokenize", model, st);
        goto done;
    }
    if ((st = lc_tokenizer_load(g, &tok)) != LC_OK) {
        cli_fail("tokenize", "loading the tokenizer", st);
        goto done;
    }
    st = lc_tokenizer_encode(tok, file ? text : prompt, file ? len : strlen(prompt),
                             bos && lc_tokenizer_add_bos(tok), special, &ids, &n);
    if (st != LC_OK) {
        cli_fail("tokenize", file ? file : "prompt", st);
        goto done;
    }
    if (count) {
        printf("%zu\n", n);
    } else if (pieces) {
        for (size_t i = 0; i < n; i++) {
            size_t      pl;
            const char *p = lc_tokenizer_token_bytes(tok, ids[i], &pl);
            printf("%d\t", ids[i]);
            print_piece(p ? p : "", p ? pl : 0);
            putchar('\n');
        }
    } else {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("]\n");
    }
    rc = CLI_OK;
done:
    free(ids);
    lc_tokenizer_free(tok);
    lc_gguf_close(g);
    free(text);
    return rc;
}
