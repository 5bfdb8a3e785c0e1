/*
 * chat.h — internal chat-template helpers beyond the public lc_chat_* API (include/longctx.h):
 * formatting with a template's built-in default system prompt, and extracting that prompt
 * from a ChatML Jinja template (SmolLM2, Qwen2 insert one when the conversation has none).
 */
#ifndef LC_CHAT_H
#define LC_CHAT_H

#include "longctx.h"

#include <stdbool.h>
#include <stddef.h>

/* As lc_chat_format; when default_system is non-NULL and the first message is not a system
 * message, a system message with that content is inserted first (what SmolLM2's and Qwen2's
 * templates do). With no messages nothing is inserted (as those templates). */
int lc_chat_format_ex(lc_chat_template t, const char *default_system, const lc_chat_message *msgs,
                      size_t n, bool add_assistant, char **out);
/* As lc_chat_format_ex, with the plain-text spans of lc_chat_format_spans when spans and
 * n_spans are non-NULL (both NULL: none); the inserted default system prompt is a span too. */
int lc_chat_format_spans_ex(lc_chat_template t, const char *default_system,
                            const lc_chat_message *msgs, size_t n, bool add_assistant, char **out,
                            lc_text_span **spans, size_t *n_spans);

/* Find a literal default system prompt in a ChatML Jinja template: the first string literal
 * "<|im_start|>system\n<text><|im_end|>" whose <text> is a plain literal (no Jinja
 * expressions). LC_OK with *out malloc'd (caller frees), or LC_OK with *out = NULL when the
 * template has none. */
int lc_chat_default_system(const char *jinja, char **out);

#endif
