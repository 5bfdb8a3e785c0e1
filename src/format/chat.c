/*
 * chat.c — chat templates without a Jinja interpreter (spec/ecosystem-and-style.md §1.7):
 * detect the family of a model's tokenizer.chat_template by substrings, as llama.cpp's
 * llm_chat_detect_template does, and format conversations with built-in formatters whose
 * output equals what the models' Jinja templates render:
 *   chatml   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
 *   llama3   <|start_header_id|>{role}<|end_header_id|>\n\n{trim(content)}<|eot_id|> ...
 *            <|start_header_id|>assistant<|end_header_id|>\n\n
 *            The template's leading bos_token (<|begin_of_text|>) is NOT emitted: the
 *            tokenizer adds BOS (add_bos), as in llama.cpp's built-in llama3 formatter, so
 *            encoding with add_bos gives exactly one BOS.
 *   mistral  [INST] {user} [/INST]{assistant}</s>[INST] ... (Mistral-7B-Instruct v0.1/v0.2;
 *            the template's leading <s> is the tokenizer's BOS). Those templates reject
 *            system messages; like llama.cpp's formatter for them, a system message is
 *            written as "{content}\n" inside the current [INST] turn.
 *   llama3.1 llama3 with the system turn Llama-3.1/3.2/3.3's templates always write:
 *            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" and the
 *            trimmed system message (or nothing) — the date the templates use when the caller
 *            gives none (3.2/3.3 take today's date from strftime_now where it is defined);
 *            tool/ipython messages get the ipython header and their content untrimmed.
 *   gemma    <start_of_turn>{role}\n{trim(content)}<end_of_turn>\n ... <start_of_turn>model\n
 *            (Gemma 1/2/3; the role "assistant" is written "model"). A leading system
 *            message is Gemma 3's: its content and "\n\n" open the first turn that follows
 *            (Gemma 1/2 reject system messages). The leading bos_token is the tokenizer's.
 *   phi3     <|{role}|>\n{content}<|end|>\n ... <|assistant|>\n (Phi-3/Phi-3.5 mini;
 *            roles system, user, assistant: the role is part of the special marker). Without
 *            the generation prompt the template ends with eos_token; like bos_token, that is
 *            left out (it ends a training sample, not a conversation to continue).
 * SmolLM2's and Qwen2's ChatML templates insert a default system prompt when the first
 * message is not a system one: lc_chat_default_system finds it, lc_chat_format_ex applies it.
 * The formatters also record where message text (roles, contents, the default system prompt)
 * lies in the output, so that it is tokenized as plain text (lc_tokenizer_encode_spans): only
 * the template's own markers may become special tokens.
 */
#include "format/chat.h"
#include "util/util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growing string ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
    bool want_spans; /* record where message text goes (spans) */
    lc_text_span *spans;
    size_t n_spans, cap_spans;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_add(sbuf *b, const char *s) {
    sb_addn(b, s, strlen(s));
}

/* Message text (a role or a content): appended and, when spans are wanted, recorded as a
 * plain-text span (empty text records nothing). */
static void sb_add_text(sbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->want_spans) {
        if (b->n_spans == b->cap_spans) {
            size_t cap = b->cap_spans ? b->cap_spans * 2 : 8;
            lc_text_span *p = realloc(b->spans, cap * sizeof *p);
            if (!p) {
                b->oom = true;
                return;
            }
            b->spans = p;
            b->cap_spans = cap;
        }
        b->spans[b->n_spans++] = (lc_text_span){b->n, n};
    }
    sb_addn(b, s, n);
}

/* Whitespace trim as Jinja's |trim on ASCII whitespace (llama.cpp's trim does the same). */
static void sb_add_trimmed(sbuf *b, const char *s) {
    size_t n = strlen(s), a = 0;
    while (a < n && isspace((unsigned char)s[a]))
        a++;
    while (n > a && isspace((unsigned char)s[n - 1]))
        n--;
    sb_add_text(b, s + a, n - a);
}

/* ---- names and detection -------------------------------------------------------------------- */

static const struct {
    const char *name;
    lc_chat_template t;
} k_names[] = {
    {"chatml", LC_CHAT_TEMPLATE_CHATML},
    {"llama3", LC_CHAT_TEMPLATE_LLAMA3},
    {"mistral", LC_CHAT_TEMPLATE_MISTRAL},
    {"gemma", LC_CHAT_TEMPLATE_GEMMA},
    {"phi3", LC_CHAT_TEMPLATE_PHI3},
    {"llama3.1", LC_CHAT_TEMPLATE_LLAMA31},
};

#define NAMES "chatml, llama3, llama3.1, mistral, gemma, phi3"

const char *lc_chat_template_names(void) {
    return NAMES;
}

const char *lc_chat_template_name(lc_chat_template t) {
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (k_names[i].t == t) return k_names[i].name;
    return "none";
}

int lc_chat_template_from_name(const char *name, lc_chat_template *out) {
    if (!name || !out)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_template_from_name: NULL argument");
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strcmp(name, k_names[i].name) == 0) {
            *out = k_names[i].t;
            return LC_OK;
        }
    }
    return lc_fail(LC_ERR_NOT_FOUND,
                   "unknown chat template '%s' (valid names: " NAMES ")", name);
}

/* "<|user|>" followed by a newline as the template writes it: a real one or the escape \n
 * inside a string literal (Phi-3; Phi-4-mini writes the markers without the newline, a
 * different format). */
static bool has_marker_nl(const char *jinja, const char *marker) {
    const size_t n = strlen(marker);
    for (const char *p = strstr(jinja, marker); p; p = strstr(p + 1, marker))
        if (p[n] == '\n' || (p[n] == '\\' && p[n + 1] == 'n')) return true;
    return false;
}

int lc_chat_template_detect(const char *jinja, lc_chat_template *out) {
    if (!out) return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_template_detect: NULL argument");
    *out = LC_CHAT_TEMPLATE_NONE;
    if (!jinja || !*jinja)
        return lc_fail(LC_ERR_NOT_FOUND, "the model has no chat template; name one with "
                                         "--chat-template NAME (" NAMES ")");
    if (strstr(jinja, "<start_of_turn>") && strstr(jinja, "<end_of_turn>")) {
        *out = LC_CHAT_TEMPLATE_GEMMA;
        return LC_OK;
    }
    if (strstr(jinja, "<|im_start|>")) {
        /* llama.cpp: <|im_sep|> is phi4, <end_of_utterance> smolvlm: different formats */
        if (!strstr(jinja, "<|im_sep|>") && !strstr(jinja, "<end_of_utterance>")) {
            *out = LC_CHAT_TEMPLATE_CHATML;
            return LC_OK;
        }
    } else if (strstr(jinja, "[INST]")) {
        /* Llama-2's <<SYS>> variants place system prompts and spaces differently; Mistral's
         * later templates (v0.3, v7/Tekken: '[INST]' + content + '[/INST]', [SYSTEM_PROMPT])
         * drop the spaces around the content that v0.1/v0.2 write: not this format */
        if (!strstr(jinja, "<<SYS>>") && strstr(jinja, "[INST] ") && strstr(jinja, " [/INST]") &&
            !strstr(jinja, "[SYSTEM_PROMPT]")) {
            *out = LC_CHAT_TEMPLATE_MISTRAL;
            return LC_OK;
        }
    } else if (strstr(jinja, "<|start_header_id|>") && strstr(jinja, "<|end_header_id|>")) {
        *out = strstr(jinja, "Cutting Knowledge Date:") ? LC_CHAT_TEMPLATE_LLAMA31
                                                        : LC_CHAT_TEMPLATE_LLAMA3;
        return LC_OK;
    } else if (strstr(jinja, "<|end|>") && has_marker_nl(jinja, "<|user|>") &&
               has_marker_nl(jinja, "<|assistant|>")) {
        /* (Zephyr writes the same markers but ends turns with </s>: not matched) */
        *out = LC_CHAT_TEMPLATE_PHI3;
        return LC_OK;
    }
    char head[64];
    const size_t n = strlen(jinja);
    return lc_fail(LC_ERR_NOT_FOUND,
                   "the model's chat template (%zu bytes, \"%s\") is none of the built-in "
                   "families; name one with --chat-template NAME (" NAMES ")",
                   n, lc_text_escape(head, sizeof head, jinja, n < 40 ? n : 40));
}

/* ---- default system prompt ------------------------------------------------------------------ */

int lc_chat_default_system(const char *jinja, char **out) {
    if (!out) return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_default_system: NULL argument");
    *out = NULL;
    if (!jinja) return LC_OK;
    static const char head[] = "<|im_start|>system";
    static const char tail[] = "<|im_end|>";
    const char *next = jinja;
    for (const char *p = strstr(jinja, head); p; p = strstr(next, head)) {
        const char *s = p + sizeof head - 1;
        next = p + 1;
        if (s[0] == '\n') {
            s += 1;
        } else if (s[0] == '\\' && s[1] == 'n') {
            s += 2;
        } else {
            continue;
        }
        sbuf b = {0};
        bool ok = false;
        const char *q = s;
        for (; *q; q++) {
            if (strncmp(q, tail, sizeof tail - 1) == 0) {
                ok = true;
                break;
            }
            if (*q == '\'' || *q == '"' || (q[0] == '{' && (q[1] == '{' || q[1] == '%')) ||
                (q[0] == '}' && q[1] == '}'))
                break; /* the string literal ends or an expression starts: not a literal */
            if (*q == '\\' && q[1]) {
                char c = q[1] == 'n' ? '\n' : q[1] == 't' ? '\t' : q[1];
                sb_addn(&b, &c, 1);
                q++;
                continue;
            }
            sb_addn(&b, q, 1);
        }
        if (!ok) {
            free(b.p);
            /* a later head before q would scan the same characters in step (its text holds no
             * backslash or stop character) and stop at q too: resume the search at q, so a
             * template of many heads costs linear, not quadratic, time */
            next = q;
            continue;
        }
        if (b.oom) {
            free(b.p);
            return lc_fail(LC_ERR_NOMEM, "out of memory extracting the default system prompt");
        }
        if (!b.p) {
            b.p = malloc(1);
            if (!b.p) return lc_fail(LC_ERR_NOMEM, "out of memory");
            b.p[0] = '\0';
        }
        *out = b.p;
        return LC_OK;
    }
    return LC_OK;
}

/* ---- formatting ----------------------------------------------------------------------------- */

static void format_chatml(sbuf *b, const lc_chat_message *m, size_t n, bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|im_start|>");
        sb_add_text(b, m[i].role, strlen(m[i].role));
        sb_add(b, "\n");
        sb_add_text(b, m[i].content, strlen(m[i].content));
        sb_add(b, "<|im_end|>\n");
    }
    if (add_assistant) sb_add(b, "<|im_start|>assistant\n");
}

static void format_llama3(sbuf *b, const lc_chat_message *m, size_t n, bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|start_header_id|>");
        sb_add_text(b, m[i].role, strlen(m[i].role));
        sb_add(b, "<|end_header_id|>\n\n");
        sb_add_trimmed(b, m[i].content);
        sb_add(b, "<|eot_id|>");
    }
    if (add_assistant) sb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void format_mistral(sbuf *b, const lc_chat_message *m, size_t n) {
    bool in_turn = true;
    sb_add(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            sb_add(b, "[INST] ");
            in_turn = true;
        }
        sb_add_text(b, m[i].content, strlen(m[i].content));
        if (strcmp(m[i].role, "system") == 0) {
            sb_add(b, "\n");
        } else if (strcmp(m[i].role, "user") == 0) {
            sb_add(b, " [/INST]");
        } else {
            sb_add(b, "</s>");
            in_turn = false;
        }
    }
}

static void format_llama31(sbuf *b, const lc_chat_message *m, size_t n, bool add_assistant) {
    size_t i = 0;
    sb_add(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
              "2023\nToday Date: 26 Jul 2024\n\n");
    if (n > 0 && strcmp(m[0].role, "system") == 0) {
        sb_add_trimmed(b, m[0].content);
        i = 1;
    }
    sb_add(b, "<|eot_id|>");
    for (; i < n; i++) {
        const bool tool = strcmp(m[i].role, "tool") == 0 || strcmp(m[i].role, "ipython") == 0;
        sb_add(b, "<|start_header_id|>");
        if (tool) sb_add(b, "ipython");
        else sb_add_text(b, m[i].role, strlen(m[i].role));
        sb_add(b, "<|end_header_id|>\n\n");
        if (tool) sb_add_text(b, m[i].content, strlen(m[i].content));
        else sb_add_trimmed(b, m[i].content);
        sb_add(b, "<|eot_id|>");
    }
    if (add_assistant) sb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void format_gemma(sbuf *b, const lc_chat_message *m, size_t n, bool add_assistant) {
    size_t      i      = 0;
    const char *prefix = NULL; /* Gemma 3: a leading system message opens the first turn */
    if (n > 0 && strcmp(m[0].role, "system") == 0) {
        prefix = m[0].content;
        i      = 1;
    }
    for (size_t first = i; i < n; i++) {
        const char *role = strcmp(m[i].role, "assistant") == 0 ? "model" : m[i].role;
        sb_add(b, "<start_of_turn>");
        sb_add_text(b, role, strlen(role));
        sb_add(b, "\n");
        if (i == first && prefix) {
            sb_add_text(b, prefix, strlen(prefix));
            sb_add(b, "\n\n");
        }
        sb_add_trimmed(b, m[i].content);
        sb_add(b, "<end_of_turn>\n");
    }
    if (add_assistant) sb_add(b, "<start_of_turn>model\n");
}

static void format_phi3(sbuf *b, const lc_chat_message *m, size_t n, bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        /* the role is part of the marker <|user|> (a special token), not message text */
        sb_add(b, "<|");
        sb_add(b, m[i].role);
        sb_add(b, "|>\n");
        sb_add_text(b, m[i].content, strlen(m[i].content));
        sb_add(b, "<|end|>\n");
    }
    if (add_assistant) sb_add(b, "<|assistant|>\n");
}

static bool known_role(const char *role) {
    return strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
           strcmp(role, "assistant") == 0;
}

int lc_chat_format_spans_ex(lc_chat_template t, const char *default_system,
                            const lc_chat_message *msgs, size_t n, bool add_assistant, char **out,
                            lc_text_span **spans, size_t *n_spans) {
    if (!out || (n && !msgs) || (!spans != !n_spans))
        return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_format: NULL argument");
    *out = NULL;
    if (spans) {
        *spans = NULL;
        *n_spans = 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_format: message %zu has no %s", i,
                           msgs[i].role ? "content" : "role");
        if ((t == LC_CHAT_TEMPLATE_MISTRAL || t == LC_CHAT_TEMPLATE_PHI3) &&
            !known_role(msgs[i].role))
        {
            char esc[96];
            return lc_fail(LC_ERR_INVALID_ARG,
                           "lc_chat_format: role '%s' of message %zu is not supported by the "
                           "%s template (system, user, assistant)",
                           lc_text_escape(esc, sizeof esc, msgs[i].role, strlen(msgs[i].role)), i,
                           lc_chat_template_name(t));
        }
    }
    if (t != LC_CHAT_TEMPLATE_CHATML && t != LC_CHAT_TEMPLATE_LLAMA3 &&
        t != LC_CHAT_TEMPLATE_MISTRAL && t != LC_CHAT_TEMPLATE_GEMMA && t != LC_CHAT_TEMPLATE_PHI3 &&
        t != LC_CHAT_TEMPLATE_LLAMA31)
        return lc_fail(LC_ERR_INVALID_ARG,
                       "lc_chat_format: no chat template (%d); use "
                       "--chat-template NAME (" NAMES ")",
                       (int)t);

    /* the default system prompt goes in front when the conversation starts without one */
    const lc_chat_message *m = msgs;
    lc_chat_message *tmp = NULL;
    if (default_system && n > 0 && strcmp(msgs[0].role, "system") != 0) {
        tmp = lc_malloc((n + 1) * sizeof *tmp, "chat messages");
        if (!tmp) return LC_ERR_NOMEM;
        tmp[0] = (lc_chat_message){"system", default_system};
        memcpy(tmp + 1, msgs, n * sizeof *tmp);
        m = tmp;
        n++;
    }
    sbuf b = {0};
    b.want_spans = spans != NULL;
    sb_add(&b, ""); /* an empty conversation still yields a valid "" */
    switch (t) {
    case LC_CHAT_TEMPLATE_CHATML:
        format_chatml(&b, m, n, add_assistant);
        break;
    case LC_CHAT_TEMPLATE_LLAMA3:
        format_llama3(&b, m, n, add_assistant);
        break;
    case LC_CHAT_TEMPLATE_LLAMA31:
        format_llama31(&b, m, n, add_assistant);
        break;
    case LC_CHAT_TEMPLATE_GEMMA:
        format_gemma(&b, m, n, add_assistant);
        break;
    case LC_CHAT_TEMPLATE_PHI3:
        format_phi3(&b, m, n, add_assistant);
        break;
    default:
        format_mistral(&b, m, n);
        break;
    }
    free(tmp);
    if (b.oom) {
        free(b.p);
        free(b.spans);
        return lc_fail(LC_ERR_NOMEM, "out of memory formatting the chat");
    }
    *out = b.p;
    if (spans) {
        *spans = b.spans;
        *n_spans = b.n_spans;
    }
    return LC_OK;
}

int lc_chat_format_ex(lc_chat_template t, const char *default_system, const lc_chat_message *msgs,
                      size_t n, bool add_assistant, char **out) {
    return lc_chat_format_spans_ex(t, default_system, msgs, n, add_assistant, out, NULL, NULL);
}

int lc_chat_format_spans(lc_chat_template t, const lc_chat_message *msgs, size_t n_msgs,
                         bool add_assistant, char **out, lc_text_span **spans, size_t *n_spans) {
    if (!spans || !n_spans)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_chat_format_spans: NULL argument");
    return lc_chat_format_spans_ex(t, NULL, msgs, n_msgs, add_assistant, out, spans, n_spans);
}

int lc_chat_format(lc_chat_template t, const lc_chat_message *msgs, size_t n_msgs,
                   bool add_assistant, char **out) {
    return lc_chat_format_ex(t, NULL, msgs, n_msgs, add_assistant, out);
}
