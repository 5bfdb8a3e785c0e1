/*
 * cmd_chat.c — `longctx chat`: interactive multi-turn chat on the terminal. Lines from
 * standard input are the user's turns; each answer streams to stdout. The KV cache is kept
 * between turns (lc_context_continue): a turn prefills only its own tokens — the end of the
 * previous answer's turn, the question, the next assistant header — not the conversation so
 * far. With -f, the document is read once, before the first question, as the start of the
 * first user turn, and every question after it is asked about it. /clear starts the
 * conversation over (the document stays read), /exit (or end of input) ends; Ctrl-C stops the
 * current answer, not the program. On a terminal, with libedit (LC_HAVE_EDITLINE), the input
 * line is edited and recalled as readline does (arrows, history of the session's lines).
 *
 * How a turn finds its new tokens without a Jinja interpreter: the conversation is formatted
 * with the model's template with the previous answer replaced by a sentinel; what follows the
 * sentinel is the new text (the template's end of the assistant turn, the new user turn and
 * the generation prompt). The answer itself is in the KV cache as the tokens the model
 * generated. The document's case is the same with the sentinel standing for the first
 * question.
 */
#include "gen.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef LC_HAVE_EDITLINE
#include <editline/readline.h>
#endif


static volatile int g_interrupt = 0;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
}

/* A broken assumption about the template (said here; callers print nothing more). */
static int internal(const char *what) {
    fprintf(stderr, "longctx chat: internal error: %s\n", what);
    return LC_ERR_INTERNAL;
}

static void help(void) {
    printf("usage: longctx chat -m FILE [-f FILE] [options]\n"
           "\n"
           "Interactive chat with the model's chat template: each line read from standard input\n"
           "is a user turn, the answer streams to stdout. The KV cache stays between turns, so a\n"
           "turn evaluates only its own new tokens. With -f the file is read once, before the\n"
           "first question, and the questions are about it.\n"
           "\n"
           "  -f, --file FILE         a document to ask about (- : standard input is then not\n"
           "                          available for questions, so - is refused)\n"
           "  --system TEXT           system message\n"
           "  -n, --n-predict N       at most N tokens an answer (default 1024; -1 = until the\n"
           "                          end of the turn or a full context)\n"
           "  --stats                 after each answer, one line on stderr: the tokens the turn\n"
           "                          evaluated, the tokens the KV cache holds, speeds\n"
           "\n"
           "in the chat: /clear starts over (the document stays read), /exit or end of input\n"
           "ends, /help lists these; Ctrl-C stops the current answer. On a terminal the line is\n"
           "edited and the session's lines recalled with the arrow keys (libedit, when the build\n"
           "found it; else the terminal's own editing).\n"
           "\n%s",
           gen_opts_help());
}

typedef struct chat {
    lc_model           *m;
    lc_context         *ctx;
    const lc_tokenizer *tok;
    lc_chat_template    tmpl;
    lc_sampling         sampling;
    int32_t             max_tokens;
    bool                stats;
    const char         *system;
    const char         *doc;      /* the document's text, or NULL */
    lc_chat_message    *msgs;     /* the conversation (contents malloc'd, system not) */
    size_t              n_msgs, cap_msgs;
    int32_t             seq;      /* -1 before the first evaluation */
    int64_t             n_base;   /* KV tokens that /clear keeps (the document's prefix) */
    size_t              base_len; /* bytes of formatted text those tokens stand for */
    int32_t             pending;  /* a sampled token not yet in the KV cache (-1: none) */
    int64_t             keep;     /* KV tokens the next turn keeps (-1: all it holds) */
} chat;

static void chat_drop_turns(chat *c) {
    for (size_t i = 0; i < c->n_msgs; i++)
        if (c->msgs[i].content != c->system) free((char *)c->msgs[i].content);
    c->n_msgs = 0;
    if (c->system && c->cap_msgs) c->msgs[c->n_msgs++] = (lc_chat_message){"system", c->system};
}

static bool chat_push(chat *c, const char *role, const char *text, size_t len) {
    if (c->n_msgs + 2 > c->cap_msgs) {
        const size_t     cap = c->cap_msgs ? 2 * c->cap_msgs : 16;
        lc_chat_message *p   = realloc(c->msgs, cap * sizeof *p);
        if (!p) return false;
        c->msgs     = p;
        c->cap_msgs = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return false;
    memcpy(s, text, len);
    s[len]                   = '\0';
    c->msgs[c->n_msgs++] = (lc_chat_message){role, s};
    return true;
}

/* The user content of the first turn: the document, a blank line, the question. */
static char *first_content(const chat *c, const char *q) {
    const size_t dl = strlen(c->doc), ql = strlen(q);
    char        *s  = malloc(dl + ql + 3);
    if (!s) return NULL;
    memcpy(s, c->doc, dl);
    memcpy(s + dl, "\n\n", 2);
    memcpy(s + dl + 2, q, ql + 1);
    return s;
}

/* A sentinel that no message, the document nor the new text contains, so that it is found
 * exactly where it was put. */
static void pick_sentinel(const chat *c, const char *extra, char *buf, size_t cap) {
    for (unsigned k = 0;; k++) {
        snprintf(buf, cap, "\x1elongctx-turn-%u\x1e", k);
        bool used = (c->doc && strstr(c->doc, buf)) || (extra && strstr(extra, buf));
        for (size_t i = 0; i < c->n_msgs && !used; i++) used = strstr(c->msgs[i].content, buf);
        if (!used) return;
    }
}

static bool has_turns(const chat *c) {
    return c->n_msgs > (c->system ? 1u : 0u);
}

/* The tokens of text[from..] (its plain spans from the formatter, clipped), after the pending
 * token when there is one; BOS when nothing is in the KV cache yet. */
static int encode_tail(chat *c, const char *text, const lc_text_span *spans, size_t n_spans,
                       size_t from, int32_t **ids, size_t *n_ids) {
    const size_t  total = strlen(text), len = total - from;
    lc_text_span *sp  = malloc((n_spans + 1) * sizeof *sp);
    if (!sp) return LC_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n_spans; i++) {
        size_t a = spans[i].start, b = spans[i].start + spans[i].len;
        if (b > total) b = total; /* (a text cut short: the document's prefix) */
        if (b <= from || a >= b) continue;
        if (a < from) a = from;
        sp[k++] = (lc_text_span){a - from, b - a};
    }
    int32_t *t  = NULL;
    size_t   nt = 0;
    const bool bos = c->seq < 0 && lc_tokenizer_add_bos(c->tok);
    int        st  = lc_tokenizer_encode_spans(c->tok, text + from, len, bos, sp, k, &t, &nt);
    free(sp);
    if (st != LC_OK) return st;
    if (c->pending >= 0) {
        int32_t *u = realloc(t, (nt + 1) * sizeof *u);
        if (!u) {
            free(t);
            return LC_ERR_NOMEM;
        }
        memmove(u + 1, u, nt * sizeof *u);
        u[0] = c->pending;
        t    = u;
        nt++;
    }
    *ids   = t;
    *n_ids = nt;
    return LC_OK;
}

/* Format the conversation plus a user turn whose content is `user` (with the last answer, if
 * any, standing as the sentinel) and return the text the KV cache does not hold yet, as tokens. */
/* The conversation so far plus a new user turn `user`, formatted with the model's template and
 * the generation prompt (text and its special-token spans, malloc'd); last_answer non-NULL:
 * the last message's content (the previous answer) replaced by it. */
static int format_with_turn(const chat *c, const char *user, const char *last_answer,
                            char **text, lc_text_span **spans, size_t *n_sp) {
    lc_chat_message *m = malloc((c->n_msgs + 1) * sizeof *m);
    if (!m) return LC_ERR_NOMEM;
    memcpy(m, c->msgs, c->n_msgs * sizeof *m);
    if (last_answer) m[c->n_msgs - 1].content = last_answer;
    m[c->n_msgs] = (lc_chat_message){"user", user};
    *text = NULL, *spans = NULL, *n_sp = 0;
    const int st = lc_model_chat_format_spans(c->m, c->tmpl, m, c->n_msgs + 1, true, text, spans, n_sp);
    free(m);
    return st;
}

static int turn_tokens(chat *c, const char *user, int32_t **ids, size_t *n_ids) {
    const bool answered = has_turns(c) && !strcmp(c->msgs[c->n_msgs - 1].role, "assistant");
    char       sentinel[64];
    pick_sentinel(c, user, sentinel, sizeof sentinel);
    char         *text;
    lc_text_span *spans;
    size_t        n_sp;
    int           st = format_with_turn(c, user, answered ? sentinel : NULL, &text, &spans, &n_sp);
    if (st != LC_OK) return st;
    size_t from = 0;
    if (answered) {
        const char *at = strstr(text, sentinel);
        if (!at) st = internal("the template dropped the previous answer");
        else from = (size_t)(at - text) + strlen(sentinel);
    } else if (c->seq >= 0) {
        from = c->base_len; /* the document's prefix is in the KV cache */
        if (from > strlen(text)) st = internal("the document's prefix moved");
    }
    if (st == LC_OK) st = encode_tail(c, text, spans, n_sp, from, ids, n_ids);
    free(text);
    free(spans);
    return st;
}

/* Read the document once: the first user turn's text up to where the question goes. */
static int read_document(chat *c, bool *stopped) {
    char sentinel[64];
    pick_sentinel(c, NULL, sentinel, sizeof sentinel);
    char *content = first_content(c, sentinel);
    if (!content) return LC_ERR_NOMEM;
    char         *text;
    lc_text_span *spans;
    size_t        n_sp;
    int           st = format_with_turn(c, content, NULL, &text, &spans, &n_sp);
    free(content);
    if (st != LC_OK) return st;
    const char *at = strstr(text, sentinel);
    int32_t    *ids = NULL;
    size_t      n   = 0;
    if (!at) st = internal("the template dropped the question");
    else {
        c->base_len = (size_t)(at - text);
        text[c->base_len] = '\0';
        st = encode_tail(c, text, spans, n_sp, 0, &ids, &n);
    }
    free(text);
    free(spans);
    if (st != LC_OK) return st;
    lc_request req = {.prompt = ids, .n_prompt = n, .max_tokens = 0, .sampling = c->sampling};
    gen_run_opts o = {.progress_min = 2048, .interrupt = &g_interrupt, .keep_seq = &c->seq,
                      .n_keep = -1};
    lc_model_info info;
    lc_model_get_info(c->m, &info);
    if (info.device == LC_DEVICE_CPU && ((int64_t)n > info.n_ctx_train || n > 16384))
        o.cpu_note = &info;
    gen_result res;
    const int rc = gen_run_ex("chat", c->ctx, &req, &o, &res);
    free(res.text);
    free(ids);
    if (rc != CLI_OK) return LC_ERR_INTERNAL; /* (said) */
    *stopped = res.interrupted;
    if (res.interrupted) return LC_OK;
    c->n_base = lc_context_seq_length(c->ctx, c->seq);
    fprintf(stderr, "longctx chat: read the document (%zu tokens); ask about it\n", n);
    return LC_OK;
}

/* One user turn: returns false when the chat cannot go on. */
static bool chat_turn(chat *c, const char *q) {
    const bool first = !has_turns(c);
    char      *owned = c->doc && first ? first_content(c, q) : NULL;
    const char *user = owned ? owned : q;
    if (c->doc && first && !owned) {
        fprintf(stderr, "longctx chat: out of memory\n");
        return false;
    }
    int32_t *ids = NULL;
    size_t   n   = 0;
    int      st  = turn_tokens(c, user, &ids, &n);
    if (st != LC_OK) {
        if (st != LC_ERR_INTERNAL) cli_fail("chat", "the turn", st);
        free(owned);
        return st != LC_ERR_NOMEM && st != LC_ERR_INTERNAL;
    }
    const int64_t held   = c->seq >= 0 ? lc_context_seq_length(c->ctx, c->seq) : 0;
    const int64_t before = c->keep >= 0 && c->keep < held ? c->keep : held;
    lc_request req = {.prompt = ids, .n_prompt = n, .max_tokens = c->max_tokens,
                      .sampling = c->sampling};
    gen_run_opts o = {.stream = true, .progress_min = 2048, .decode_progress = true,
                      .interrupt = &g_interrupt, .keep_seq = &c->seq, .n_keep = c->keep,
                      .quiet_fail = true};
    gen_result res;
    g_interrupt = 0;
    const int rc = gen_run_ex("chat", c->ctx, &req, &o, &res);
    free(ids);
    if (rc != CLI_OK && res.status == LC_ERR_CONTEXT) {
        fprintf(stderr, "longctx chat: %s\n", lc_last_error());
        fprintf(stderr, "longctx chat: the conversation fills the context; /clear starts over\n");
        free(res.text);
        free(owned);
        return true;
    }
    if (rc != CLI_OK) {
        if (res.status) cli_fail("chat", "the turn", res.status);
        free(res.text);
        free(owned);
        return false;
    }
    if (res.interrupted && res.n_generated == 0) {
        /* stopped while reading the question: the turn did not happen, the KV cache goes
         * back to where it was (and a pending token stays pending) */
        fprintf(stderr, "[stopped]\n");
        if (before == 0) {
            lc_context_remove(c->ctx, c->seq);
            c->seq = -1;
        } else {
            c->keep = before;
        }
        free(res.text);
        free(owned);
        return true;
    }
    c->keep = -1;
    if (res.len && res.text[res.len - 1] != '\n') putchar('\n');
    if (res.interrupted) fprintf(stderr, "[stopped]\n");
    fflush(stdout);
    /* the KV cache holds every generated token but the last: an end-of-turn token is written
     * again by the template's text; any other (a cut answer) goes first next turn */
    c->pending = res.finish == LC_FINISH_EOS ? -1 : res.last_token;
    const bool ok = chat_push(c, "user", user, strlen(user)) &&
                    chat_push(c, "assistant", res.text, res.len);
    if (c->stats)
        fprintf(stderr, "longctx chat: turn evaluated %lld new tokens (KV cache %lld -> %lld "
                "tokens) in %.2f s; %d tokens at %.1f tok/s\n", (long long)n, (long long)before,
                (long long)lc_context_seq_length(c->ctx, c->seq), res.prompt_s, res.n_generated,
                res.gen_s > 0 && res.n_generated > 1 ? (res.n_generated - 1) / res.gen_s : 0.0);
    if (res.finish == LC_FINISH_LENGTH && c->max_tokens > 0 && res.n_generated < c->max_tokens)
        fprintf(stderr, "longctx chat: the context is full; /clear starts over\n");
    free(res.text);
    free(owned);
    if (!ok) fprintf(stderr, "longctx chat: out of memory\n");
    return ok;
}

static void chat_clear(chat *c) {
    chat_drop_turns(c);
    c->pending = -1;
    if (c->doc) {
        c->keep = c->n_base; /* the document stays read */
    } else if (c->seq >= 0) {
        lc_context_remove(c->ctx, c->seq);
        c->seq  = -1;
        c->keep = -1;
    }
}

/* One line of standard input without its newline (malloc'd), NULL at the end of input. An
 * interrupted read (Ctrl-C at the prompt) returns "" with *intr set. */
static char *read_line(bool *intr) {
    size_t cap = 256, n = 0;
    char  *s   = malloc(cap);
    *intr      = false;
    if (!s) return NULL;
    for (;;) {
        const int ch = getchar();
        if (ch == EOF) {
            if (ferror(stdin) && g_interrupt) {
                clearerr(stdin);
                g_interrupt = 0;
                *intr       = true;
                s[0]        = '\0';
                return s;
            }
            if (n == 0) {
                free(s);
                return NULL;
            }
            break;
        }
        if (ch == '\n') break;
        if (n + 2 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        s[n++] = (char)ch;
    }
    if (n && s[n - 1] == '\r') n--;
    s[n] = '\0';
    return s;
}

int cmd_chat(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    o.sampling.repeat_penalty        = GEN_CHAT_REPEAT_PENALTY; /* against loops (gen.h) */
    o.sampling.repeat_generated_only = true; /* (an answer may copy from its document) */
    const char *file = NULL, *system = NULL;
    bool        stats     = false;
    long long   n_predict = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int   r = gen_opts_parse(&o, "chat", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value("chat", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--system")) {
            if (!(system = cli_value("chat", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            const char *v = cli_value("chat", argc, argv, &i);
            if (!v || !cli_int("chat", a, v, -1, 1 << 30, &n_predict)) return CLI_USAGE;
            if (n_predict == 0) {
                fprintf(stderr, "longctx chat: -n 0: an answer needs at least one token\n");
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--stats")) {
            stats = true;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            fprintf(stderr, "longctx chat: the questions come from standard input, one a line "
                    "(for one answer to -p use longctx run --chat)\n");
            return CLI_USAGE;
        } else {
            cli_unknown_option("chat", a);
            return CLI_USAGE;
        }
    }
    if (!o.model) {
        fprintf(stderr, "longctx chat: no model given (-m FILE)\n");
        return CLI_USAGE;
    }
    if (file && !strcmp(file, "-")) {
        fprintf(stderr, "longctx chat: -f -: standard input carries the questions; give the "
                "document as a file\n");
        return CLI_USAGE;
    }
    char  *doc     = NULL;
    size_t doc_len = 0;
    if (file && !(doc = cli_read_file("chat", file, &doc_len))) return CLI_ERR;
    if (doc && strlen(doc) != doc_len) {
        fprintf(stderr, "longctx chat: %s contains a NUL byte at offset %zu\n", file, strlen(doc));
        free(doc);
        return CLI_ERR;
    }
    chat c = {.seq = -1, .pending = -1, .keep = -1, .system = system, .doc = doc,
              .stats = stats, .max_tokens = n_predict < 0 ? (1 << 30) : (int32_t)n_predict};
    int rc = gen_load("chat", &o, &c.m);
    if (rc != CLI_OK) {
        free(doc);
        return rc;
    }
    rc         = CLI_ERR;
    c.tok      = lc_model_tokenizer(c.m);
    c.tmpl     = o.chat_template;
    c.sampling = o.sampling;
    {   /* the template first: an unrecognised one is a usage error (name one) */
        lc_chat_message probe = {"user", "x"};
        char           *t     = NULL;
        const int       st    = lc_model_chat_format(c.m, c.tmpl, &probe, 1, true, &t);
        free(t);
        if (st != LC_OK) {
            cli_fail("chat", "the chat template", st);
            rc = st == LC_ERR_NOT_FOUND ? CLI_USAGE : CLI_ERR;
            goto done;
        }
    }
    {
        lc_model_info info;
        lc_model_get_info(c.m, &info);
        /* the context: the model's trained window, or the document and room to talk */
        int64_t need = 0;
        if (doc) {
            int32_t *t  = NULL;
            size_t   nt = 0;
            const int st = lc_tokenizer_encode(c.tok, doc, doc_len, false, false, &t, &nt);
            free(t);
            if (st != LC_OK) {
                cli_fail("chat", file, st);
                goto done;
            }
            need = (int64_t)nt + 4096;
        }
        if (gen_context("chat", &o, c.m, need, &c.ctx) != CLI_OK) goto done;
        if (!o.n_ctx && need > info.n_ctx_train)
            fprintf(stderr, "longctx chat: the document and room to talk (%lld tokens) exceed "
                    "the model's trained context (%d); quality may drop past the trained "
                    "window\n", (long long)need, info.n_ctx_train);
    }
    if (!(c.msgs = malloc(16 * sizeof *c.msgs))) goto done;
    c.cap_msgs = 16;
    chat_drop_turns(&c); /* the system message, when there is one */

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);

    if (doc) {
        bool      stopped = false;
        const int st      = read_document(&c, &stopped);
        if (st == LC_OK && stopped) {
            fprintf(stderr, "longctx chat: stopped while reading %s\n", file);
            rc = 130;
            goto done;
        }
        if (st != LC_OK) {
            if (st != LC_ERR_INTERNAL) cli_fail("chat", file, st);
            goto done;
        }
    }
    const bool interactive = isatty(0) && isatty(1);
    if (interactive)
        fprintf(stderr, "longctx chat: %s; /help for commands, /exit or Ctrl-D to quit\n",
                lc_chat_template_name(c.tmpl != LC_CHAT_TEMPLATE_NONE ? c.tmpl
                                                                      : lc_model_chat_template(c.m)));
    rc = CLI_OK;
    for (;;) {
        bool  intr = false;
        char *line = NULL;
#ifdef LC_HAVE_EDITLINE
        if (interactive) {
            /* libedit's readline: NULL at Ctrl-D, and when Ctrl-C interrupts the read */
            line = readline("> ");
            if (!line && g_interrupt) {
                g_interrupt = 0;
                fputc('\n', stdout);
                continue;
            }
            if (!line) break;
            if (line[0]) add_history(line);
        }
#endif
        if (!line) {
            if (interactive) {
                fputs("> ", stdout);
                fflush(stdout);
            }
            line = read_line(&intr);
        }
        if (!line) break;
        if (intr) {
            fputc('\n', stdout);
            free(line);
            continue;
        }
        char *q = line;
        while (*q == ' ' || *q == '\t') q++;
        size_t ql = strlen(q);
        while (ql && (q[ql - 1] == ' ' || q[ql - 1] == '\t')) ql--;
        q[ql] = '\0';
        bool go_on = true;
        if (!ql) {
        } else if (!strcmp(q, "/exit") || !strcmp(q, "/quit")) {
            go_on = false;
        } else if (!strcmp(q, "/clear")) {
            chat_clear(&c);
            fprintf(stderr, "longctx chat: the conversation starts over%s\n",
                    doc ? " (the document stays read)" : "");
        } else if (!strcmp(q, "/help")) {
            fprintf(stderr, "/clear  start over (the document stays read)\n/exit   end (also "
                    "Ctrl-D)\nCtrl-C  stop the current answer\n");
        } else if (q[0] == '/' && q[1] != '/') {
            fprintf(stderr, "longctx chat: unknown command %s (/help lists them; start a line "
                    "with // to send one beginning with /)\n", q);
        } else {
            go_on = chat_turn(&c, q[0] == '/' ? q + 1 : q);
            if (!go_on) rc = CLI_ERR;
        }
        free(line);
        if (!go_on) break;
    }
    signal(SIGINT, SIG_DFL);
done:
    chat_drop_turns(&c);
    free(c.msgs);
    lc_context_free(c.ctx);
    lc_model_free(c.m);
    free(doc);
    return rc;
}
