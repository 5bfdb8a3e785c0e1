/*
 * params_parse.h — parsing of method knobs given as NAME=VALUE strings (--hip-*, --ts-*), shared
 * by the settings files of the attention methods; every failure names the option (with its
 * command-line prefix) and the allowed values.
 */
#ifndef LC_PARAMS_PARSE_H
#define LC_PARAMS_PARSE_H

#include "longctx.h"
#include "util/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* option names compare with '-' and '_' alike */
static inline bool lc_same_opt(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

/* an integer in [lo, hi]; prefix is "hip" or "ts" (the message says --PREFIX-OPT=VALUE) */
static inline int lc_opt_int(const char *prefix, const char *opt, const char *v, int64_t lo,
                             int64_t hi, int32_t *out) {
    char *end = NULL;
    errno     = 0;
    long long x = strtoll(v, &end, 10);
    if (!v[0] || errno || !end || *end || x < lo || x > hi)
        return lc_fail(LC_ERR_INVALID_ARG, "--%s-%s=%s: expected an integer in %lld .. %lld",
                       prefix, opt, v, (long long)lo, (long long)hi);
    *out = (int32_t)x;
    return LC_OK;
}

static inline int lc_opt_float(const char *prefix, const char *opt, const char *v, double lo,
                               double hi, float *out) {
    char *end = NULL;
    errno     = 0;
    double x  = strtod(v, &end);
    if (!v[0] || errno || !end || *end || !(x >= lo && x <= hi))
        return lc_fail(LC_ERR_INVALID_ARG, "--%s-%s=%s: expected a number in %g .. %g", prefix,
                       opt, v, lo, hi);
    *out = (float)x;
    return LC_OK;
}

/* auto|extend|plain|stream (stream only when allow_stream) */
static inline int lc_opt_rope(const char *prefix, const char *v, bool allow_stream, int32_t *out) {
    if (!strcmp(v, "auto")) return *out = LC_HIP_ROPE_AUTO, LC_OK;
    if (!strcmp(v, "extend")) return *out = LC_HIP_ROPE_EXTEND, LC_OK;
    if (!strcmp(v, "plain")) return *out = LC_HIP_ROPE_PLAIN, LC_OK;
    if (allow_stream && !strcmp(v, "stream")) return *out = LC_HIP_ROPE_STREAM, LC_OK;
    return lc_fail(LC_ERR_INVALID_ARG, "--%s-rope=%s: expected auto, extend, plain%s", prefix, v,
                   allow_stream ? " or stream" : "");
}

static inline const char *lc_rope_mode_name(int32_t r) {
    return r == LC_HIP_ROPE_EXTEND ? "extend" : r == LC_HIP_ROPE_PLAIN ? "plain"
           : r == LC_HIP_ROPE_STREAM ? "stream" : "auto";
}

#endif
