/*
 * util.c — error recording (thread-local last error), logging callback, allocation
 * helpers and a monotonic clock.
 */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char g_last_error[1024];

static void default_log(lc_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *names[] = {"debug", "info", "warn", "error"};
    fprintf(stderr, "longctx: %s: %s\n", names[level < 4 ? level : 3], msg);
}

static lc_log_fn    g_log_fn    = default_log;
static void        *g_log_user  = NULL;
static lc_log_level g_log_level = LC_LOG_WARN;

void lc_log_set(lc_log_fn fn, void *user, lc_log_level min_level) {
    g_log_fn    = fn;
    g_log_user  = user;
    g_log_level = min_level;
}

static void log_va(lc_log_level level, const char *fmt, va_list ap) {
    if (!g_log_fn || level < g_log_level) return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    g_log_fn(level, buf, g_log_user);
}

void lc_log(lc_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_va(level, fmt, ap);
    va_end(ap);
}

int lc_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    lc_log(LC_LOG_DEBUG, "%s", g_last_error);
    return status;
}

void lc_clear_error(void) { g_last_error[0] = '\0'; }

const char *lc_last_error(void) { return g_last_error; }

const char *lc_status_str(int status) {
    switch (status) {
    case LC_OK: return "ok";
    case LC_ERR_INVALID_ARG: return "invalid argument";
    case LC_ERR_IO: return "i/o error";
    case LC_ERR_FORMAT: return "malformed file";
    case LC_ERR_UNSUPPORTED: return "unsupported";
    case LC_ERR_NOMEM: return "out of memory";
    case LC_ERR_CONTEXT: return "does not fit the context";
    case LC_ERR_NOT_FOUND: return "not found";
    case LC_ERR_INTERNAL: return "internal error";
    case LC_ERR_NUMERIC: return "non-finite values";
    default: return "unknown status";
    }
}

void *lc_malloc(size_t n, const char *what) {
    void *p = malloc(n ? n : 1);
    if (!p) lc_fail(LC_ERR_NOMEM, "out of memory allocating %zu bytes for %s", n, what);
    return p;
}

void *lc_calloc(size_t count, size_t size, const char *what) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) lc_fail(LC_ERR_NOMEM, "out of memory allocating %zu x %zu bytes for %s", count, size, what);
    return p;
}

double lc_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Length of the valid UTF-8 character at p (n bytes available), 0 if invalid: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_char_len(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    size_t        l;
    uint32_t      cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        l  = 2;
        cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        l  = 3;
        cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        l  = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (n < l) return 0;
    for (size_t i = 1; i < l; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if ((l == 3 && cp < 0x800) || (l == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return l;
}

/* The rendering of the character at p[0..n) (n > 0) into unit (4 bytes); returns its length
 * and sets *adv to the bytes it consumes. */
static size_t escape_unit(const unsigned char *p, size_t n, char unit[4], size_t *adv) {
    static const char hex[] = "0123456789abcdef";
    size_t l = utf8_char_len(p, n);
    if (l == 1 && p[0] >= 0x20 && p[0] < 0x7f) {
        *adv = 1;
        if (p[0] != '\\') {
            unit[0] = (char)p[0];
            return 1;
        }
        unit[0] = unit[1] = '\\';
        return 2;
    }
    if (l > 1 && !(p[0] == 0xC2 && p[1] < 0xA0)) { /* not a C1 control */
        memcpy(unit, p, l);
        *adv = l;
        return l;
    }
    unit[0] = '\\';
    unit[1] = 'x';
    unit[2] = hex[p[0] >> 4];
    unit[3] = hex[p[0] & 15];
    *adv    = 1;
    return 4;
}

const char *lc_text_escape(char *buf, size_t cap, const char *s, size_t n) {
    if (!buf || cap == 0) return "";
    const unsigned char *p = (const unsigned char *)s;
    if (!p) n = 0;
    char   unit[4];
    size_t adv, total = 0;
    for (size_t i = 0; i < n && total < cap; i += adv)
        total += escape_unit(p + i, n - i, unit, &adv);
    /* when it does not fit, whole characters up to a limit that leaves room for "..." */
    const bool   cut   = total > cap - 1;
    const size_t limit = cut && cap - 1 >= 3 ? cap - 1 - 3 : cap - 1;
    size_t       j     = 0;
    for (size_t i = 0; i < n; i += adv) {
        size_t u = escape_unit(p + i, n - i, unit, &adv);
        if (j + u > limit) break;
        memcpy(buf + j, unit, u);
        j += u;
    }
    if (cut && cap - 1 >= 3) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}

void lc_buf_put(char *buf, size_t cap, size_t *at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + (*at < cap ? *at : cap), *at < cap ? cap - *at : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *at += (size_t)n;
}

void lc_text_wrap(char *buf, size_t cap, size_t *at, int col, int indent, const char *text) {
    const char *p = text;
    int         c = col;
    bool        first = true; /* nothing written on this line yet */
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        int len = 0;
        while (p[len] && p[len] != ' ') len++;
        if (!first && c + 1 + len > LC_HELP_WIDTH) {
            lc_buf_put(buf, cap, at, "\n%*s", indent, "");
            c     = indent;
            first = true;
        }
        lc_buf_put(buf, cap, at, "%s%.*s", first ? "" : " ", len, p);
        c += (first ? 0 : 1) + len;
        first = false;
        p += len;
    }
    lc_buf_put(buf, cap, at, "\n");
}
