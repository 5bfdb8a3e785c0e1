/*
 * eval_common.c — shared pieces of the evaluation commands: token buffer, trial generator,
 * chat template split, a traced trial's context (see eval_common.h).
 */
#include "eval_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tb_push(tokbuf *b, const int32_t *ids, size_t n) {
    if (n == 0) return true; /* ids may be NULL (an empty chat prefix): memcpy must not see it */
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n)
            cap *= 2;
        int32_t *p = realloc(b->ids, cap * sizeof *p);
        if (!p) return false;
        b->ids = p;
        b->cap = cap;
    }
    memcpy(b->ids + b->n, ids, n * sizeof *ids);
    b->n += n;
    return true;
}

void eval_progress_tokens(int64_t done, int64_t total, void *user) {
    cli_progress_update(user, done, total, "tokens");
}

uint64_t eval_rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

double eval_rng_unit(uint64_t *s) {
    return (double)(eval_rng_next(s) >> 11) * 0x1.0p-53;
}

/* Bytes [a, b) of a formatted chat, with the message text in it (spans) as plain text and the
 * template's markers as special tokens. */
static int encode_part(const char *cmd, const lc_tokenizer *t, const char *text, size_t a, size_t b,
                       const lc_text_span *spans, size_t n_spans, int32_t **ids, size_t *n) {
    lc_text_span *part = malloc((n_spans ? n_spans : 1) * sizeof *part);
    if (!part) {
        fprintf(stderr, "longctx %s: out of memory\n", cmd);
        return LC_ERR_NOMEM;
    }
    size_t np = 0;
    for (size_t i = 0; i < n_spans; i++) {
        size_t s0 = spans[i].start > a ? spans[i].start : a;
        size_t s1 = spans[i].start + spans[i].len < b ? spans[i].start + spans[i].len : b;
        if (s1 > s0) part[np++] = (lc_text_span){s0 - a, s1 - s0};
    }
    int st = lc_tokenizer_encode_spans(t, text + a, b - a, false, part, np, ids, n);
    free(part);
    if (st != LC_OK) cli_fail(cmd, "tokenizing", st);
    return st;
}

int eval_chat_split(const char *cmd, const lc_model *m, lc_chat_template tmpl,
                    const char *no_chat_option, int32_t **pre, size_t *n_pre, int32_t **post,
                    size_t *n_post) {
    *pre = *post = NULL;
    *n_pre = *n_post = 0;
    char *formatted = NULL;
    lc_text_span *spans = NULL;
    size_t n_spans = 0;
    lc_chat_message msg = {"user", "\x01"}; /* a marker where the text goes */
    int st = lc_model_chat_format_spans(m, tmpl, &msg, 1, true, &formatted, &spans, &n_spans);
    if (st == LC_ERR_NOT_FOUND && no_chat_option) { /* one line, with the way out */
        fprintf(stderr, "longctx %s: %s, or %s for plain completion prompts\n", cmd,
                lc_last_error(), no_chat_option);
        return st;
    }
    if (st != LC_OK) {
        cli_fail(cmd, "chat template", st);
        return st;
    }
    const lc_tokenizer *tok = lc_model_tokenizer(m);
    const size_t flen = strlen(formatted);
    const char *at = strchr(formatted, '\x01');
    if (!at) { /* a template that drops the user's text cannot carry a prompt */
        fprintf(stderr, "longctx %s: the chat template does not include the user's message\n", cmd);
        st = LC_ERR_INVALID_ARG;
    } else {
        const size_t mark = (size_t)(at - formatted);
        st = encode_part(cmd, tok, formatted, 0, mark, spans, n_spans, pre, n_pre);
        if (st == LC_OK)
            st = encode_part(cmd, tok, formatted, mark + 1, flen, spans, n_spans, post, n_post);
    }
    if (st != LC_OK) {
        free(*pre), free(*post);
        *pre = *post = NULL;
        *n_pre = *n_post = 0;
    }
    free(spans);
    free(formatted);
    return st;
}

int eval_context_renew(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                       lc_context **ctx, lc_attn_stats *base) {
    if (*ctx && base) {
        lc_attn_stats st = {0, 0};
        const int     rc = lc_context_attn_stats(*ctx, &st);
        if (rc != LC_OK) {
            cli_fail(cmd, "selection counters", rc);
            return CLI_ERR;
        }
        base->selected += st.selected, base->reused += st.reused;
    }
    lc_context_free(*ctx);
    *ctx = NULL;
    return gen_context(cmd, o, m, need_ctx, ctx);
}

int eval_attn_stats(const lc_context *ctx, const lc_attn_stats *base, lc_attn_stats *out) {
    const int st = lc_context_attn_stats(ctx, out);
    if (st == LC_OK) out->selected += base->selected, out->reused += base->reused;
    return st;
}
