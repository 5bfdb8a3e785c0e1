/*
 * cli.c — helpers shared by the subcommands (see cli.h).
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_log(lc_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "longctx: %s: %s\n", names[level < 4 ? level : 3], msg);
}

bool cli_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
             long long *out) {
    char *end;
    errno       = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0') {
        fprintf(stderr, "longctx %s: %s: '%s' is not an integer\n", cmd, opt, s);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "longctx %s: %s: %lld is out of range [%lld, %lld]\n", cmd, opt, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
               double *out) {
    char *end;
    errno    = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v)) {
        fprintf(stderr, "longctx %s: %s: '%s' is not a number\n", cmd, opt, s);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "longctx %s: %s: %g is out of range [%g, %g]\n", cmd, opt, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "longctx %s: option %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

char *cli_read_file(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "longctx %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || S_ISDIR(st.st_mode)) {
        fprintf(stderr, "longctx %s: %s is not a regular file\n", cmd, path);
        fclose(f);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char  *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0) break;
    }
    if (!buf) {
        fprintf(stderr, "longctx %s: out of memory reading %s\n", cmd, path);
        fclose(f);
        return NULL;
    }
    if (ferror(f)) {
        fprintf(stderr, "longctx %s: error reading %s: %s\n", cmd, path, strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len   = n;
    return buf;
}

bool cli_device(const char *cmd, const char *s, lc_device *out) {
    if (strcmp(s, "cpu") == 0) *out = LC_DEVICE_CPU;
    else if (strcmp(s, "cuda") == 0) *out = LC_DEVICE_CUDA;
    else if (strcmp(s, "auto") == 0) *out = LC_DEVICE_AUTO;
    else {
        fprintf(stderr, "longctx %s: --device: '%s' is not one of cpu, cuda, auto\n", cmd, s);
        return false;
    }
    return true;
}

void cli_fail(const char *cmd, const char *what, int status) {
    const char *msg = lc_last_error();
    if (msg && msg[0] && strstr(msg, what)) /* the message already names it */
        fprintf(stderr, "longctx %s: %s\n", cmd, msg);
    else
        fprintf(stderr, "longctx %s: %s: %s\n", cmd, what, msg && msg[0] ? msg : lc_status_str(status));
}

void cli_unknown_option(const char *cmd, const char *opt) {
    fprintf(stderr, "longctx %s: unknown option '%s' (see longctx %s --help)\n", cmd, opt, cmd);
}

void cli_progress_begin(cli_progress *p, const char *label) {
    p->label = label;
    p->t0    = cli_now();
    p->last  = 0;
    p->tty   = isatty(2);
    p->shown = false;
}

void cli_progress_update(cli_progress *p, int64_t done, int64_t total, const char *unit) {
    const double now = cli_now();
    if (done < total && now - p->last < (p->tty ? 0.2 : 2.0)) return;
    if (done >= total && !p->shown) return; /* finished before the first line was due */
    p->last          = now;
    const double el  = now - p->t0;
    const double rate = el > 0 ? (double)done / el : 0.0;
    const double eta  = rate > 0 ? (double)(total - done) / rate : 0.0;
    fprintf(stderr, "%s%s %lld/%lld %s (%.0f%%), %.1f %s/s, ETA %.0f s%s", p->tty ? "\r" : "",
            p->label, (long long)done, (long long)total, unit,
            total ? 100.0 * (double)done / (double)total : 100.0, rate, unit, eta,
            p->tty ? "\033[K" : "\n");
    fflush(stderr);
    p->shown = true;
}

void cli_progress_end(cli_progress *p) {
    if (p->shown && p->tty) fputc('\n', stderr);
    p->shown = false;
}
