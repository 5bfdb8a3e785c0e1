/*
 * util.h — internal helpers shared by every layer: error recording, logging, checked
 * arithmetic, timers. Not part of the public API.
 */
#ifndef LC_UTIL_H
#define LC_UTIL_H

#include "longctx.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define LC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LC_PRINTF(a, b)
#endif

/* Record a failure message for lc_last_error(), log it at ERROR level, return status. */
int lc_fail(int status, const char *fmt, ...) LC_PRINTF(2, 3);
/* Clear the thread's last error. */
void lc_clear_error(void);
void lc_log(lc_log_level level, const char *fmt, ...) LC_PRINTF(2, 3);

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool lc_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool lc_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool lc_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* malloc/calloc that record LC_ERR_NOMEM with what was being allocated. */
void *lc_malloc(size_t n, const char *what);
void *lc_calloc(size_t count, size_t size, const char *what);

/* Monotonic seconds. */
double lc_time_s(void);

/* Append printf-style text to buf (cap bytes) at *at, *at advanced by what would have been
 * written (it may pass cap when the text does not fit, as snprintf counts; buf stays
 * NUL-terminated within cap). */
void lc_buf_put(char *buf, size_t cap, size_t *at, const char *fmt, ...) LC_PRINTF(4, 5);

/* Help text's widest line, in columns (the CLI's help fits 100). */
#define LC_HELP_WIDTH 100
/* Append text to buf (cap bytes; *at: bytes written so far, which may pass cap when it does not
 * fit, as snprintf counts) from column col of the current line, its words wrapped so that no
 * line passes LC_HELP_WIDTH columns (a longer word gets a line of its own), continuation lines
 * indented by indent; ends the line. */
void lc_text_wrap(char *buf, size_t cap, size_t *at, int col, int indent, const char *text);

#endif
