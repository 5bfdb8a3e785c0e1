/*
 * bench_args.h — the one command-line parser of the bench programs (included by bench_util.h),
 * driven by a table of the program's options. Every option can be given as NAME=VALUE anywhere
 * on the command line; an option with a position (pos 1, 2, ...) can also be given as the
 * pos-th plain argument, so the programs' old positional command lines (bench/cases/,
 * compare_commits.sh, the results files) keep working. An argument is NAME=VALUE when the text
 * before its first '=' is a name (letters, digits, '_' and '-'), so a plain argument such as
 * bench_infinitehip's preset "3k+heads=group" stays plain. A bad argument (an unknown NAME, a
 * value that is not a number in the option's range or not one of its choices, a plain argument
 * past the last position, an option given twice, a required one missing) is one line on stderr
 * naming it and the valid options, and the program exits with 2; -h / --help prints the table.
 */
#ifndef LC_BENCH_ARGS_H
#define LC_BENCH_ARGS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One option. dst holds the default on entry (an int / int64_t default of 0 can stand for
 * "decided by the other options", as the help says). */
typedef struct bench_opt {
    const char *name;     /* NAME; "steps|rows": either spelling sets it */
    char        type;     /* 'i': int (dst int *); 'l': int64_t; 's': string (dst const char **);
                             'c': one of `choices` (dst int * gets its index) */
    void       *dst;
    const char *choices;  /* 'c': "decode|prefill"; 'i': if set, the value must be one of them */
    long long   lo, hi;   /* 'i', 'l': the allowed range */
    int         pos;      /* 1, 2, ...: also the pos-th plain argument; 0: NAME=VALUE only */
    bool        required;
    const char *help;
} bench_opt;

/* A NAME=VALUE whose NAME is not in the table (e.g. a method setting); 0 if taken. */
typedef int (*bench_extra)(void *ctx, const char *arg);

static inline int bench_args_is_named(const char *a) {
    const char *eq = strchr(a, '=');
    if (!eq || eq == a) return 0;
    for (const char *c = a; c < eq; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return 0;
    return 1;
}

/* whether `len` bytes at s are one of the '|'-separated words of list */
static inline int bench_args_word(const char *list, const char *s, size_t len, int *index) {
    int i = 0;
    for (const char *w = list; w && *w; i++) {
        const char *bar = strchr(w, '|'), *end = bar ? bar : w + strlen(w);
        if ((size_t)(end - w) == len && strncmp(w, s, len) == 0) {
            if (index) *index = i;
            return 1;
        }
        w = bar ? bar + 1 : end;
    }
    return 0;
}

/* the option names, for the error lines: "mode, kv_heads, ..." */
static inline void bench_args_names(FILE *f, const bench_opt *o, int n, const char *extra_help) {
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? ", " : "", o[i].name);
    if (extra_help) fprintf(f, "%s%s", n ? ", " : "", extra_help);
}

static inline void bench_args_usage(FILE *f, const char *prog, const char *synopsis, const bench_opt *o,
                                    int n, const char *extra_help) {
    fprintf(f, "usage: %s %s\noptions (NAME=VALUE anywhere, or plain in the order of their position):\n",
            prog, synopsis);
    for (int i = 0; i < n; i++) {
        char value[96] = "", dflt[96] = "";
        if (o[i].type == 'c' || (o[i].type == 'i' && o[i].choices)) snprintf(value, sizeof value, "%s", o[i].choices);
        else if (o[i].type == 's') snprintf(value, sizeof value, "TEXT");
        else snprintf(value, sizeof value, "%lld..%lld", o[i].lo, o[i].hi);
        if (o[i].required) snprintf(dflt, sizeof dflt, "required");
        else if (o[i].type == 'i') snprintf(dflt, sizeof dflt, "default %d", *(const int *)o[i].dst);
        else if (o[i].type == 'l') snprintf(dflt, sizeof dflt, "default %lld", (long long)*(const int64_t *)o[i].dst);
        else if (o[i].type == 's') {
            const char *s = *(const char *const *)o[i].dst;
            snprintf(dflt, sizeof dflt, "default \"%s\"", s ? s : "");
        } else {
            const char *w = o[i].choices;
            for (int k = *(const int *)o[i].dst; k > 0 && w; k--)
                if ((w = strchr(w, '|'))) w++;
            const char *bar = w ? strchr(w, '|') : NULL;
            snprintf(dflt, sizeof dflt, "default %.*s", w ? (int)(bar ? bar - w : (long)strlen(w)) : 0, w ? w : "");
        }
        char pos[16] = "";
        if (o[i].pos) snprintf(pos, sizeof pos, " [%d]", o[i].pos);
        fprintf(f, "  %s=%s%s: %s (%s)\n", o[i].name, value, pos, o[i].help, dflt);
    }
    if (extra_help) fprintf(f, "  %s\n", extra_help);
}

/* Set one option from its VALUE text; 0 on success, else 2 with a message. */
static inline int bench_args_set(const char *prog, const bench_opt *o, const char *v) {
    if (o->type == 's') {
        *(const char **)o->dst = v;
        return 0;
    }
    if (o->type == 'c') {
        if (bench_args_word(o->choices, v, strlen(v), (int *)o->dst)) return 0;
        fprintf(stderr, "%s: %s=%s: not one of %s\n", prog, o->name, v, o->choices);
        return 2;
    }
    char     *end = NULL;
    errno         = 0;
    long long x   = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < o->lo || x > o->hi ||
        (o->type == 'i' && o->choices && !bench_args_word(o->choices, v, strlen(v), NULL))) {
        if (o->choices) fprintf(stderr, "%s: %s=%s: not one of %s\n", prog, o->name, v, o->choices);
        else fprintf(stderr, "%s: %s=%s: not an integer in %lld..%lld\n", prog, o->name, v, o->lo, o->hi);
        return 2;
    }
    if (o->type == 'i') *(int *)o->dst = (int)x;
    else *(int64_t *)o->dst = (int64_t)x;
    return 0;
}

/* Parse argv[1 .. argc) against the n options of `opts` (at most 64); `extra` (optional) takes
 * the NAME=VALUE arguments whose NAME is not in the table, extra_help says what they are.
 * Returns 0 when the options are set, -1 after printing the usage for -h / --help (exit 0),
 * 2 after one line on stderr naming a bad argument and the valid options (exit 2). */
static inline int bench_args(const char *prog, const char *synopsis, int argc, char **argv,
                             const bench_opt *opts, int n, bench_extra extra, void *extra_ctx,
                             const char *extra_help) {
    bool given[64] = {false};
    int  plain     = 0;
    if (n > 64) return fprintf(stderr, "%s: more than 64 options\n", prog), 2;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        int         k   = -1;
        const char *v   = arg;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            bench_args_usage(stdout, prog, synopsis, opts, n, extra_help);
            return -1;
        }
        if (bench_args_is_named(arg)) {
            const size_t len = (size_t)(strchr(arg, '=') - arg);
            for (int i = 0; i < n && k < 0; i++)
                if (bench_args_word(opts[i].name, arg, len, NULL)) k = i;
            v = arg + len + 1;
            if (k < 0) {
                if (extra && extra(extra_ctx, arg) == 0) continue;
                fprintf(stderr, "%s: unknown option '%s'; the options: ", prog, arg);
                bench_args_names(stderr, opts, n, extra_help);
                fprintf(stderr, " (-h: the table)\n");
                return 2;
            }
        } else {
            plain++;
            for (int i = 0; i < n && k < 0; i++)
                if (opts[i].pos == plain) k = i;
            if (k < 0) {
                fprintf(stderr, "%s: unexpected plain argument %d '%s'; the options: ", prog, plain, arg);
                bench_args_names(stderr, opts, n, extra_help);
                fprintf(stderr, " (-h: the table)\n");
                return 2;
            }
        }
        if (given[k]) {
            fprintf(stderr, "%s: %s given twice (at '%s')\n", prog, opts[k].name, arg);
            return 2;
        }
        given[k] = true;
        if (bench_args_set(prog, &opts[k], v)) return 2;
    }
    for (int i = 0; i < n; i++)
        if (opts[i].required && !given[i]) {
            fprintf(stderr, "%s: missing %s; usage: %s %s (-h: the table)\n", prog, opts[i].name, prog, synopsis);
            return 2;
        }
    return 0;
}

/* In main: parse argc / argv against the array `opts` as bench_args does, or return from main
 * (0 after --help, 2 after a bad argument). BENCH_NAME names the program. */
#define BENCH_ARGS(synopsis, opts, extra, extra_ctx, extra_help)                                  \
    do {                                                                                      \
        const int ar_ = bench_args(BENCH_NAME, synopsis, argc, argv, opts,                    \
                                   (int)(sizeof(opts) / sizeof((opts)[0])), extra, extra_ctx, \
                                   extra_help);                                               \
        if (ar_) return ar_ < 0 ? 0 : ar_;                                                    \
    } while (0)

#endif
