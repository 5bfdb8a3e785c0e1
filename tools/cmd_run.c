/*
 * cmd_run.c — `longctx run`: answer a prompt (optionally about a file) with a GGUF model,
 * streaming the answer to stdout; prompt progress and timings on stderr.
 */
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: longctx run -m FILE (-p TEXT | -f FILE [-p QUESTION]) [options]\n"
           "\n"
           "Generate a continuation (or, with --chat, an assistant answer) and stream it to\n"
           "stdout. With -f, the file's text comes first and -p's text (a question) after it.\n"
           "\n"
           "  -p, --prompt TEXT       prompt text (or the question about -f's file)\n"
           "  -f, --file FILE         read a (long) input from a file (- : standard input)\n"
           "  --chat                  format as a chat conversation with the model's template;\n"
           "                          the file, prompt and system text are then always plain\n"
           "                          text (only the template's markers are special tokens)\n"
           "  --system TEXT           system message for --chat\n"
           "  -n, --n-predict N       tokens to generate (default 256; -1 = until the end)\n"
           "  --stop STR              stop when STR is generated (repeatable)\n"
           "  --ignore-eos            keep generating past end-of-turn tokens\n"
           "  --no-special            without --chat: treat special-token text such as\n"
           "                          <|im_start|> in the prompt as plain text (default: parsed\n"
           "                          as special tokens, as llama.cpp's completion does)\n"
           "  --stats                 print timings (and the --tune choices) on stderr at the end\n"
           "\n%s",
           gen_opts_help());
}

int cmd_run(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.repeat_penalty        = GEN_CHAT_REPEAT_PENALTY; /* against loops (gen.h) */
    o.sampling.repeat_generated_only = true; /* (an answer may copy from its document) */
    const char *prompt = NULL, *file = NULL, *system = NULL;
    bool        chat = false, ignore_eos = false, special = true, stats = false;
    long long   n_predict = 256;
    const char *stops[16];
    size_t      n_stops = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int         r = gen_opts_parse(&o, "run", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = cli_value("run", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value("run", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--system")) {
            if (!(system = cli_value("run", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            const char *v = cli_value("run", argc, argv, &i);
            if (!v || !cli_int("run", a, v, -1, 1 << 30, &n_predict)) return CLI_USAGE;
        } else if (!strcmp(a, "--stop")) {
            const char *v = cli_value("run", argc, argv, &i);
            if (!v) return CLI_USAGE;
            if (n_stops == sizeof stops / sizeof stops[0]) {
                fprintf(stderr, "longctx run: at most 16 --stop strings\n");
                return CLI_USAGE;
            }
            stops[n_stops++] = v;
        } else if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = true;
        } else if (!strcmp(a, "--no-special")) {
            special = false;
        } else if (!strcmp(a, "--stats")) {
            stats = true;
        } else {
            cli_unknown_option("run", a);
            return CLI_USAGE;
        }
    }
    if (!prompt && !file) {
        fprintf(stderr, "longctx run: give a prompt with -p TEXT or an input with -f FILE (see --help)\n");
        return CLI_USAGE;
    }
    if (!o.model) {
        fprintf(stderr, "longctx run: no model given (-m FILE)\n");
        return CLI_USAGE;
    }
    if (prompt && !prompt[0] && !file) {
        fprintf(stderr, "longctx run: -p: the prompt is empty\n");
        return CLI_USAGE;
    }

    char  *doc = NULL, *text = NULL;
    size_t doc_len = 0;
    if (file && !(doc = cli_read_file("run", file, &doc_len))) return CLI_ERR;
    /* the user text: file, then the question */
    size_t plen = prompt ? strlen(prompt) : 0;
    text        = malloc(doc_len + plen + 3);
    if (!text) {
        free(doc);
        fprintf(stderr, "longctx run: out of memory\n");
        return CLI_ERR;
    }
    size_t tl = 0;
    if (doc) {
        memcpy(text, doc, doc_len);
        tl = doc_len;
        if (prompt) {
            memcpy(text + tl, "\n\n", 2);
            tl += 2;
        }
    }
    if (prompt) {
        memcpy(text + tl, prompt, plen);
        tl += plen;
    }
    text[tl] = '\0';
    free(doc);
    if (strlen(text) != tl) {
        fprintf(stderr, "longctx run: the input contains a NUL byte at offset %zu\n", strlen(text));
        free(text);
        return CLI_ERR;
    }

    lc_model   *m   = NULL;
    lc_context *ctx = NULL;
    int32_t    *ids = NULL;
    size_t      n_ids = 0;
    char       *formatted = NULL;
    int         rc  = gen_load("run", &o, &m);
    if (rc != CLI_OK) goto done;
    rc = CLI_ERR;
    const lc_tokenizer *tok = lc_model_tokenizer(m);
    const char         *final_text = text;
    int st;
    if (chat) {
        /* the document, question and system text are always plain text: only the template's
         * markers become special tokens (--no-special changes nothing here) */
        lc_chat_message msgs[2];
        size_t          nm = 0;
        if (system) msgs[nm++] = (lc_chat_message){"system", system};
        msgs[nm++] = (lc_chat_message){"user", text};
        st         = lc_model_chat_tokenize(m, o.chat_template, msgs, nm, true, &ids, &n_ids);
        if (st == LC_ERR_NOT_FOUND) { /* no template we know: --chat-template says which */
            cli_fail("run", "--chat", st);
            rc = CLI_USAGE;
            goto done;
        }
    } else {
        st = lc_tokenizer_encode(tok, final_text, strlen(final_text), lc_tokenizer_add_bos(tok),
                                 special, &ids, &n_ids);
    }
    if (st != LC_OK) {
        cli_fail("run", file ? file : "prompt", st);
        goto done;
    }
    if (n_ids == 0) { /* (a usage error: nothing to answer) */
        fprintf(stderr, "longctx run: the prompt is empty\n");
        rc = CLI_USAGE;
        goto done;
    }
    lc_model_info info;
    lc_model_get_info(m, &info);
    int64_t want = (int64_t)n_ids + (n_predict < 0 ? 0 : n_predict);
    /* without -c the context grows to the prompt plus -n: it cannot pass the engine's 2^30 */
    if (!o.n_ctx && want > (1 << 30)) {
        fprintf(stderr, "longctx run: -n %lld: the prompt (%zu tokens) and the tokens to generate "
                "need a context of %lld tokens, past the largest there is (1,073,741,824 = 2^30); "
                "give a smaller -n, or -n -1 to generate until the context is full\n",
                n_predict, n_ids, (long long)want);
        rc = CLI_USAGE;
        goto done;
    }
    /* (the context, and with it the memory check, before the note, so a refusal is one line) */
    if (gen_context("run", &o, m, want, &ctx) != CLI_OK) goto done;
    if (!o.n_ctx && want > info.n_ctx_train) {
        fprintf(stderr, "longctx run: the prompt (%zu tokens) plus -n %lld exceeds the model's "
                "trained context (%d); using -c %lld (quality may drop past the trained window)\n",
                n_ids, n_predict, info.n_ctx_train, (long long)want);
    }
    lc_request req = {.prompt     = ids,
                      .n_prompt   = n_ids,
                      .max_tokens = n_predict < 0 ? (1 << 30) : (int32_t)n_predict,
                      .sampling   = o.sampling,
                      .stop       = stops,
                      .n_stop     = n_stops,
                      .ignore_eos = ignore_eos};
    gen_result res;
    /* a long prompt on the CPU: one line up front with the time to expect (after the first
     * chunk, from its rate) and where the sparse methods help */
    const bool long_cpu = info.device == LC_DEVICE_CPU &&
                          ((int64_t)n_ids > info.n_ctx_train || n_ids > 16384);
    const gen_run_opts ro = {.stream          = true,
                             .progress_min    = 2048,
                             .decode_progress = true,
                             .cpu_note        = long_cpu ? &info : NULL,
                             .cpu_note_sparse = !gen_attn_dense(&o)};
    rc = gen_run_ex("run", ctx, &req, &ro, &res);
    if (rc == CLI_OK) {
        if (res.len && res.text[res.len - 1] != '\n') putchar('\n');
        fflush(stdout);
        if (stats || n_ids >= 2048) {
            const char *why[] = {"none", "eos", "length", "stop", "error"};
            fprintf(stderr,
                    "longctx: prompt %lld tokens in %.2f s (%.1f tok/s); generated %d tokens in "
                    "%.2f s (%.1f tok/s); finish: %s\n",
                    (long long)res.n_prompt, res.prompt_s,
                    res.prompt_s > 0 ? (double)res.n_prompt / res.prompt_s : 0.0, res.n_generated,
                    res.gen_s, res.gen_s > 0 && res.n_generated > 1 ? (res.n_generated - 1) / res.gen_s : 0.0,
                    why[res.finish]);
            char tune[512];
            gen_tuning_describe(&o, tune, sizeof tune);
            if (stats) fprintf(stderr, "longctx: tuning: %s\n", tune);
            lc_attn_stats as = {0, 0};
            if (lc_context_attn_stats(ctx, &as) == LC_OK && as.selected + as.reused > 0)
                fprintf(stderr,
                        "longctx: %s decode selections (per layer and step): %lld computed, %lld "
                        "reused (%.1f%%)\n",
                        o.attn, (long long)as.selected,
                        (long long)as.reused,
                        100.0 * (double)as.reused / (double)(as.selected + as.reused));
        }
    }
    /* a finish the user did not ask for is said even without --stats: the context filled up
       before -n tokens (the reason is "length" either way) */
    if (rc == CLI_OK && res.finish == LC_FINISH_LENGTH && n_predict >= 0 &&
        res.n_generated < n_predict)
        fprintf(stderr, "longctx run: stopped after %d of %lld tokens: the context is full "
                "(%lld prompt tokens; a larger -c gives more room)\n", res.n_generated, n_predict,
                (long long)n_ids);
    free(res.text);
done:
    free(ids);
    free(formatted);
    free(text);
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}
