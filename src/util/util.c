/*
 * util.c — error recording (thread-local last error), logging callback, allocation
 * helpers and a monotonic clock.
 */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

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
