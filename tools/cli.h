/*
 * cli.h — shared helpers of the longctx command-line tool: strict number parsing, reading
 * input files, progress lines on stderr, and the subcommand entry points.
 */
#ifndef LC_CLI_H
#define LC_CLI_H

#include "longctx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* exit codes */
enum { CLI_OK = 0, CLI_ERR = 1, CLI_USAGE = 2 };

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_eval_suite(int argc, char **argv); /* `longctx eval suite` (cmd_eval_suite.c) */
int cmd_bench(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv); /* `longctx bench serve` (cmd_bench_serve.c) */
int cmd_bench_mix(int argc, char **argv);   /* `longctx bench mix` (cmd_bench_mix.c) */
int cmd_gen_model(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* cmd_serve.c (a stub without LC_HAVE_SERVER) */

/* Parse an integer / float option value; on failure print "longctx CMD: OPT: ..." and
 * return false. */
bool cli_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
             long long *out);
bool cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
               double *out);
/* A comma-separated list of 1 .. max integers in [lo, hi] into out[0 .. *n); on failure (a bad
 * item, too many, none) prints which and returns false. */
bool cli_int_list(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
                  long long *out, int max, int *n);
/* Value of an option at argv[*i] (advances *i); prints an error when missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);
/* Read a whole text file (NUL-terminated), checking as it reads: it stops at the first NUL
 * byte or invalid UTF-8 byte (an incomplete character may span reads) and at the input limit
 * (cli_input_limit; a regular file's size is checked before reading), and after a second
 * without data (a FIFO with no writer yet) says "waiting for input on PATH" and waits on.
 * Prints an error naming the path and the byte offset; NULL on any failure. Path "-": standard
 * input. */
char *cli_read_file(const char *cmd, const char *path, size_t *len);
/* mkdir -p: 0, or the errno of the first directory that could not be made. */
int cli_mkdirs(const char *dir);
/* Bytes of input that can be read and tokenized: the host's available memory divided by
 * CLI_BYTES_PER_INPUT_BYTE (at least 1 MiB). */
#define CLI_BYTES_PER_INPUT_BYTE 16
uint64_t cli_input_limit(uint64_t *available);
/* CPU cores this process may run on (affinity mask; else online cores); 0 if unknown. */
long cli_cpu_count(void);
bool  cli_device(const char *cmd, const char *s, lc_device *out);
/* Report a library failure: "longctx CMD: what: <lc_last_error or status>". */
void cli_fail(const char *cmd, const char *what, int status);
void cli_unknown_option(const char *cmd, const char *opt);

/* Progress line on stderr (rewritten in place when stderr is a terminal): done/total, the
 * recent rate, and an ETA that assumes each item costs a little more than the one before it
 * (a prompt: attention over a growing context), fitted to the whole run's average and the
 * recent rate, so it does not promise the early speed for the rest. */
#define CLI_PROGRESS_RING 32
typedef struct cli_progress {
    const char *label;
    double      t0;
    double      last;
    bool        tty;
    bool        shown;
    int64_t     ring_done[CLI_PROGRESS_RING]; /* the last updates: done and when */
    double      ring_t[CLI_PROGRESS_RING];
    int         ring_n, ring_at;
} cli_progress;
/* The ETA model alone (for tests): seconds left from position done of total, el seconds since
 * the start at 0, and a recent rate of per-item cost c_now measured around position x_m. */
double cli_progress_eta(int64_t done, int64_t total, double el, double c_now, double x_m);
void cli_progress_begin(cli_progress *p, const char *label);
void cli_progress_update(cli_progress *p, int64_t done, int64_t total, const char *unit);
void cli_progress_end(cli_progress *p);

double cli_now(void);
/* qsort comparator of doubles, ascending */
int cli_cmp_double(const void *a, const void *b);
/* log(sum_i exp(logits[i])) over V logits (a token's log-prob is its logit minus this), and
 * with n_top > 0 the ids of the n_top largest logits, largest first (the lower id first among
 * equal ones), into top_id[0 .. *n_got) (*n_got = min(n_top, V)). */
double cli_logsumexp_top(const float *logits, int32_t V, int n_top, int32_t *top_id, int *n_got);
/* The commit a report names: $LC_COMMIT (a copy of the tree without git metadata, as on the
 * GPU machine), else `git rev-parse --short HEAD`, else "unknown". */
void cli_commit_name(char *buf, size_t cap);
/* Lowercase, runs of other characters as one '-' (for file names). */
void cli_slug(const char *s, char *out, size_t cap);
/* Log callback: prints library warnings/errors to stderr, prefixed. */
void cli_log(lc_log_level level, const char *msg, void *user);

#endif
