/*
 * cli.c — helpers shared by the subcommands (see cli.h).
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
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

int cli_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cli_logsumexp_top(const float *logits, int32_t V, int n_top, int32_t *top_id, int *n_got) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < V; i++) sum += exp((double)(logits[i] - mx));
    int n = 0;
    for (int32_t i = 0; i < V && n_top > 0; i++) { /* insertion into a short sorted list */
        if (n == n_top && logits[i] <= logits[top_id[n_top - 1]]) continue;
        int at = n < n_top ? n++ : n_top - 1;
        while (at > 0 && logits[top_id[at - 1]] < logits[i]) top_id[at] = top_id[at - 1], at--;
        top_id[at] = i;
    }
    if (n_got) *n_got = n;
    return (double)mx + log(sum);
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

bool cli_int_list(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
                  long long *out, int max, int *n) {
    char *copy = strdup(s), *save = NULL;
    if (!copy) {
        fprintf(stderr, "longctx %s: %s: out of memory\n", cmd, opt);
        return false;
    }
    bool good = true;
    *n        = 0;
    for (char *t = strtok_r(copy, ",", &save); t && good; t = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            fprintf(stderr, "longctx %s: %s: at most %d values\n", cmd, opt, max);
            good = false;
        } else {
            good = cli_int(cmd, opt, t, lo, hi, &out[(*n)++]);
        }
    }
    free(copy);
    if (good && !*n) {
        fprintf(stderr, "longctx %s: %s: empty list\n", cmd, opt);
        good = false;
    }
    return good;
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

/* Worst case of memory per input byte while an input is tokenized and run:
 *   the file's buffer and the prompt text built from it (cmd_run copies it): 2;
 *   a chat-formatted copy: 1;
 *   token ids: at most one token per byte (byte-level BPE), 4 bytes each, in a vector that
 *   doubles: 8, 12 while realloc moves it;
 *   the tokenizer's special-token map (1 per byte);
 * = 16. Typical text is 3-4 bytes a token, so this leaves room for the model and the KV, whose
 * own check comes when the context is made. */
uint64_t cli_input_limit(uint64_t *available) {
    uint64_t avail = 0;
    if (lc_host_memory(&avail, NULL) != LC_OK) avail = UINT64_MAX / 2; /* unknown: no limit */
    if (available) *available = avail;
    const uint64_t limit = avail / CLI_BYTES_PER_INPUT_BYTE;
    return limit < (1u << 20) ? (1u << 20) : limit;
}

long cli_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 0;
}

static void fmt_bytes(uint64_t b, char *buf, size_t cap) {
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double             v      = (double)b;
    int                u      = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* "waiting for input" after a second in a blocking open or first read (async-signal-safe) */
static char   g_wait_msg[600];
static size_t g_wait_len;
static void   on_wait_alarm(int sig) {
    (void)sig;
    ssize_t r = write(2, g_wait_msg, g_wait_len);
    (void)r;
}

/* Check s[from, n) as UTF-8 text without NUL. Returns where the next check starts (an
 * incomplete character at the end waits for more bytes unless eof); *bad = offset of the first
 * bad byte (SIZE_MAX: none) and *why what is wrong with it. */
static size_t text_check(const unsigned char *s, size_t from, size_t n, bool eof, size_t *bad,
                         const char **why) {
    *bad = SIZE_MAX;
    size_t i = from;
    while (i < n) {
        const unsigned char c = s[i];
        if (c && c < 0x80) {
            i++;
            continue;
        }
        if (c == 0) {
            *bad = i, *why = "a NUL byte";
            return i;
        }
        size_t        need;
        unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (no overlongs, no
                                               surrogates, nothing past U+10FFFF) */
        if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else {
            *bad = i, *why = "invalid UTF-8";
            return i;
        }
        for (size_t k = 1; k < need; k++) {
            if (i + k >= n) {
                if (eof) *bad = i, *why = "invalid UTF-8 (a character cut off by the end)";
                return i;
            }
            const unsigned char b = s[i + k];
            if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) {
                *bad = i, *why = "invalid UTF-8";
                return i;
            }
        }
        i += need;
    }
    return i;
}

char *cli_read_file(const char *cmd, const char *path, size_t *len) {
    uint64_t       avail = 0;
    const uint64_t limit = cli_input_limit(&avail);
    char           s_lim[32], s_avail[32], s_size[32];
    fmt_bytes(limit, s_lim, sizeof s_lim);
    fmt_bytes(avail, s_avail, sizeof s_avail);
    /* a FIFO without a writer blocks in open, one without data in read: say so after 1 s */
    const bool stdin_in = strcmp(path, "-") == 0; /* "-": standard input */
    if (stdin_in) path = "standard input";
    const int wl = snprintf(g_wait_msg, sizeof g_wait_msg, "longctx %s: waiting for input on %s\n",
                            cmd, path);
    g_wait_len   = wl < 0 ? 0 : (size_t)wl < sizeof g_wait_msg ? (size_t)wl : sizeof g_wait_msg - 1;
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wait_alarm;
    sa.sa_flags   = SA_RESTART; /* open and read go on waiting after the message */
    sigemptyset(&sa.sa_mask);
    const bool armed = sigaction(SIGALRM, &sa, &old_sa) == 0;
    if (armed) alarm(1);
    char  *buf = NULL;
    size_t n = 0, cap = 0, checked = 0;
    int    fd = stdin_in ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "longctx %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        fprintf(stderr, "longctx %s: %s is %s\n", cmd, path,
                S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a readable file");
        goto fail;
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > limit) {
        fmt_bytes((uint64_t)st.st_size, s_size, sizeof s_size);
        fprintf(stderr, "longctx %s: %s is %s, more than the %s of input this machine can "
                "tokenize (%s of memory available / %d bytes per input byte at worst); give a "
                "shorter input\n", cmd, path, s_size, s_lim, s_avail, CLI_BYTES_PER_INPUT_BYTE);
        goto fail;
    }
    /* a regular file: its size, the NUL and one byte to see the end in */
    cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 2 : (size_t)1 << 16;
    buf = malloc(cap);
    for (bool eof = false; buf && !eof;) {
        if (n + 1 >= cap) { /* a stream, or a file that grew: double, up to the limit + 1 */
            size_t ncap = cap * 2 > limit + 2 ? (size_t)limit + 2 : cap * 2;
            char  *nb   = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                fprintf(stderr, "longctx %s: out of memory reading %s (%zu bytes read)\n", cmd,
                        path, n);
                goto fail;
            }
            buf = nb, cap = ncap;
        }
        size_t  want = cap - 1 - n < ((size_t)1 << 24) ? cap - 1 - n : (size_t)1 << 24;
        ssize_t r    = read(fd, buf + n, want);
        if (armed) alarm(0); /* data or the end came: no "waiting" message from here on */
        if (r < 0) {
            fprintf(stderr, "longctx %s: error reading %s at byte offset %zu: %s\n", cmd, path, n,
                    strerror(errno));
            goto fail;
        }
        n += (size_t)r;
        eof = r == 0;
        size_t      bad;
        const char *why = "";
        checked = text_check((const unsigned char *)buf, checked, n, eof, &bad, &why);
        if (bad != SIZE_MAX) {
            fprintf(stderr, "longctx %s: %s: %s at byte offset %zu (byte 0x%02X)%s\n", cmd, path,
                    why, bad, (unsigned char)buf[bad],
                    buf[bad] ? "" : "; the input must be UTF-8 text");
            goto fail;
        }
        if (n > limit) {
            fprintf(stderr, "longctx %s: %s: more than the %s of input this machine can tokenize "
                    "(%s of memory available / %d bytes per input byte at worst); stopped "
                    "reading there; give a shorter input\n", cmd, path, s_lim, s_avail,
                    CLI_BYTES_PER_INPUT_BYTE);
            goto fail;
        }
    }
    if (!buf) {
        fprintf(stderr, "longctx %s: out of memory reading %s (%zu bytes read)\n", cmd, path, n);
        goto fail;
    }
    if (armed) alarm(0), sigaction(SIGALRM, &old_sa, NULL);
    close(fd);
    buf[n] = '\0';
    *len   = n;
    return buf;
fail:
    if (armed) alarm(0), sigaction(SIGALRM, &old_sa, NULL);
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
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
    p->label  = label;
    p->t0     = cli_now();
    p->last   = 0;
    p->tty    = isatty(2);
    p->shown  = false;
    p->ring_n = p->ring_at = 0;
}

double cli_progress_eta(int64_t done, int64_t total, double el, double c_now, double x_m) {
    if (done <= 0 || total <= done) return 0.0;
    const double n = (double)done, N = (double)total, c_avg = el / n;
    if (c_now <= 0) c_now = c_avg;
    /* cost per item c(x) = a + b x: its mean over [0, n) is a + b n / 2 (= c_avg), its value
       near x_m is c_now (x_m past n / 2: a recent window) */
    double b = x_m - n / 2 > n / 8 ? (c_now - c_avg) / (x_m - n / 2) : 0.0;
    if (b < 0) b = 0; /* speeding up: assume the recent rate holds */
    const double a = c_now - b * x_m;
    const double eta = a * (N - n) + b * (N * N - n * n) / 2;
    return eta > 0 ? eta : 0.0;
}

void cli_progress_update(cli_progress *p, int64_t done, int64_t total, const char *unit) {
    const double now = cli_now();
    const bool known = total > 0; /* (0: no total, e.g. a generation until the end) */
    if ((!known || done < total) && now - p->last < (p->tty ? 0.2 : 2.0)) return;
    if (known && done >= total && !p->shown) return; /* finished before the first line was due */
    p->last          = now;
    const double el  = now - p->t0;
    /* the recent rate: since the oldest remembered update at least a second ago */
    p->ring_done[p->ring_at] = done, p->ring_t[p->ring_at] = now;
    p->ring_at               = (p->ring_at + 1) % CLI_PROGRESS_RING;
    if (p->ring_n < CLI_PROGRESS_RING) p->ring_n++;
    double  c_now = 0, x_m = 0;
    for (int k = p->ring_n; k >= 2 && c_now == 0; k--) {
        const int i = (p->ring_at - k + 2 * CLI_PROGRESS_RING) % CLI_PROGRESS_RING;
        if (now - p->ring_t[i] >= 1.0 && done > p->ring_done[i]) {
            c_now = (now - p->ring_t[i]) / (double)(done - p->ring_done[i]);
            x_m   = ((double)done + (double)p->ring_done[i]) / 2;
        }
    }
    const double rate = c_now > 0 ? 1.0 / c_now : el > 0 ? (double)done / el : 0.0;
    const double eta  = cli_progress_eta(done, total, el, c_now, x_m);
    if (!known)
        fprintf(stderr, "%s%s %lld %s, %.1f %s/s%s", p->tty ? "\r" : "", p->label,
                (long long)done, unit, rate, unit, p->tty ? "\033[K" : "\n");
    else
        fprintf(stderr, "%s%s %lld/%lld %s (%.0f%%), %.1f %s/s, ETA %.0f s%s",
                p->tty ? "\r" : "", p->label, (long long)done, (long long)total, unit,
                100.0 * (double)done / (double)total, rate, unit, eta, p->tty ? "\033[K" : "\n");
    fflush(stderr);
    p->shown = true;
}

void cli_progress_end(cli_progress *p) {
    if (p->shown && p->tty) fputc('\n', stderr);
    p->shown = false;
}

void cli_slug(const char *s, char *out, size_t cap) {
    size_t n    = 0;
    bool   dash = false;
    for (; *s && n + 1 < cap; s++) {
        if (isalnum((unsigned char)*s) || *s == '.' || *s == '_') {
            if (dash && n) out[n++] = '-';
            if (n + 1 < cap) out[n++] = (char)tolower((unsigned char)*s);
            dash = false;
        } else {
            dash = true;
        }
    }
    out[n] = '\0';
}

void cli_commit_name(char *buf, size_t cap) {
    const char *env = getenv("LC_COMMIT");
    buf[0]          = '\0';
    if (env && env[0]) {
        snprintf(buf, cap, "%s", env);
        return;
    }
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (p) {
        if (fgets(buf, (int)cap, p)) buf[strcspn(buf, "\r\n")] = '\0';
        pclose(p);
    }
    if (!buf[0]) snprintf(buf, cap, "unknown");
}

int cli_mkdirs(const char *dir) {
    char path[4096];
    if (!dir || !dir[0]) return 0;
    if (strlen(dir) >= sizeof path) return ENAMETOOLONG;
    strcpy(path, dir);
    for (char *p = path + 1;; p++) {
        const bool end = *p == '\0';
        if (*p == '/' || end) {
            const char c = *p;
            *p           = '\0';
            struct stat st;
            if (stat(path, &st) != 0) {
                if (mkdir(path, 0777) != 0 && errno != EEXIST) return errno;
            } else if (!S_ISDIR(st.st_mode)) {
                return ENOTDIR;
            }
            *p = c;
        }
        if (end) break;
    }
    return 0;
}
