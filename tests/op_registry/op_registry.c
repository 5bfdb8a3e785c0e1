/*
 * op_registry.c — the driver of the op test registry (op_registry.h): every CUDA op against
 * its CPU twin over the shape tables of the entries below. One line per (op, shape): the NMSE
 * against the CPU twin (or the mismatches, for exact ops) and pass / fail. Skips (exit 77)
 * where no GPU is present.
 *
 * Arguments, in any order:
 *   OP ...        only these entries (default: all); `list` prints the entries and shapes
 *   perf          time each table-driven shape's device op instead of checking it: 3 warm-up
 *                 runs, then 20 runs between backend timer marks; median, min and max
 *   small         leave out the shapes marked big and shrink the case groups (for runs under
 *                 compute-sanitizer)
 *   shape=TEXT    only the shapes whose label contains TEXT
 *   seed=N        the random inputs' seed (default: the time; printed)
 *   NAME=VALUE    the CUDA backend's tuning (lc_tuning_set, the names of `longctx --tune`),
 *                 e.g. prefill=mma for the mma.sync prefill kernel where wgmma would run
 * ctest runs it once per group of entries under the names the per-op tests had
 * (tests/CMakeLists.txt).
 */
#include "op_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int lc_test_failures = 0, lc_test_checks = 0; /* test_util.h: shared by the entries' files */

static const op_entry *const entries[] = {
    &op_rmsnorm, &op_silu_mul, &op_add,        &op_add_bias,  &op_embed,     &op_rope,
    &op_kv_write, &op_kv_write_e4m3, &op_attn_dense, &op_attn_dense_e4m3, &op_dequant, &op_gemm16,    &op_gemv16,    &op_sample,
    &op_attn_segments, &op_prune_chunks, &op_select_blocks, &op_select_tokens,
    &op_matmul_blocks, &op_matmul_blocks_gemm, &op_embed_blocks,
};
#define N_ENTRIES ((int)(sizeof entries / sizeof entries[0]))

enum { PERF_WARMUP = 3, PERF_RUNS = 20 };

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One table-driven shape: CPU twin, device op on poisoned outputs, compare; then again, and
 * with same_bytes the second run's bytes must equal the first's. */
static void check_table(op_env *e, const op_entry *op, const op_shape *sh, op_result *r) {
    void *st = NULL;
    int   rc = op->make(e, sh, &st);
    if (rc == LC_OK) rc = op->reset(e, st);
    if (rc == LC_OK) rc = op->run(e, st);
    if (rc == LC_OK) rc = e->dev->sync(e->dev);
    if (rc == LC_OK) rc = op->compare(e, st, r);
    CHECKF(rc == LC_OK, "%s %s: %s", op->name, sh->label, lc_last_error());
    if (rc == LC_OK) {
        CHECKF(r->nonfinite == 0 && r->bad == 0 && (op->tol == 0 || r->err < op->tol),
               "%s %s: nmse %.3g (limit %.1g), %lld non-finite, %lld differ", op->name, sh->label,
               r->err, op->tol, (long long)r->nonfinite, (long long)r->bad);
        if (op->same_bytes) {
            op_result again = {0};
            rc = op->reset(e, st);
            if (rc == LC_OK) rc = op->run(e, st);
            if (rc == LC_OK) rc = e->dev->sync(e->dev);
            if (rc == LC_OK) rc = op->compare(e, st, &again);
            CHECKF(rc == LC_OK && again.hash == r->hash, "%s %s: a second run differs from the "
                   "first", op->name, sh->label);
        }
    }
    op->free(e, st);
}

/* One shape's device time: median, min and max over PERF_RUNS runs, in microseconds. */
static int perf_table(op_env *e, const op_entry *op, const op_shape *sh, float us[3]) {
    lc_backend *b  = e->dev;
    void       *st = NULL, *timers = NULL;
    float       ms[PERF_RUNS];
    int         rc = op->make(e, sh, &st);
    if (rc == LC_OK) rc = op->reset(e, st);
    for (int i = 0; rc == LC_OK && i < PERF_WARMUP; i++) rc = op->run(e, st);
    if (rc == LC_OK) rc = b->timers_create(b, 2 * PERF_RUNS, &timers);
    for (int i = 0; rc == LC_OK && i < PERF_RUNS; i++) {
        rc = b->timer_mark(b, timers, 2 * i);
        if (rc == LC_OK) rc = op->run(e, st);
        if (rc == LC_OK) rc = b->timer_mark(b, timers, 2 * i + 1);
    }
    for (int i = 0; rc == LC_OK && i < PERF_RUNS; i++) rc = b->timer_ms(b, timers, 2 * i, 2 * i + 1, &ms[i]);
    if (timers) b->timers_free(b, timers);
    op->free(e, st);
    if (rc != LC_OK) return rc;
    qsort(ms, PERF_RUNS, sizeof(float), cmp_float);
    us[0] = 1e3f * ms[PERF_RUNS / 2], us[1] = 1e3f * ms[0], us[2] = 1e3f * ms[PERF_RUNS - 1];
    return LC_OK;
}

int main(int argc, char **argv) {
    bool        perf = false, small = false, list = false, named[N_ENTRIES] = {false}, any = false;
    const char *only_shape = NULL;
    uint64_t    seed       = (uint64_t)time(NULL);
    lc_tuning   tuning     = lc_tuning_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        int         hit = -1;
        for (int k = 0; k < N_ENTRIES; k++)
            if (!strcmp(a, entries[k]->name)) hit = k;
        if (hit >= 0) named[hit] = any = true;
        else if (!strcmp(a, "perf")) perf = true;
        else if (!strcmp(a, "small")) small = true;
        else if (!strcmp(a, "list")) list = true;
        else if (!strncmp(a, "shape=", 6)) only_shape = a + 6;
        else if (!strncmp(a, "seed=", 5)) seed = strtoull(a + 5, NULL, 10);
        else {
            char name[64];
            snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : 0, a);
            if (!eq || lc_tuning_set(&tuning, name, eq + 1) != LC_OK) {
                fprintf(stderr, "op_registry: '%s' is not an op, perf, small, list, shape=TEXT, "
                        "seed=N or a tuning NAME=VALUE%s%s\n", a, eq ? ": " : "",
                        eq ? lc_last_error() : "");
                return 2;
            }
        }
    }
    lc_backend *dev = NULL, *cpu = NULL;
    if (!list) {
        REQUIRE_CUDA_BACKEND(dev);
        if (lc_backend_cpu_create(0, &cpu) != LC_OK) {
            fprintf(stderr, "op_registry: CPU backend: %s\n", lc_last_error());
            dev->free(dev);
            return 1;
        }
        printf("seed %llu\n", (unsigned long long)seed);
    }
    op_env env = {dev, cpu, 0, tuning, small};
    if (perf && !list) printf("%-12s %-44s %10s %10s %10s\n", "op", "shape", "median us", "min us", "max us");
    for (int k = 0; k < N_ENTRIES; k++) {
        const op_entry *op = entries[k];
        if (any && !named[k]) continue;
        if (list)
            printf("%s: %s (%s)\n", op->name, op->summary,
                   op->check ? "case groups" : op->tol > 0 ? "nmse limit" : "exact");
        for (int32_t si = 0; si < op->n_shapes; si++) {
            const op_shape *sh = &op->shapes[si];
            if ((small && sh->big) || (only_shape && !strstr(sh->label, only_shape))) continue;
            if (list) {
                printf("  %s%s\n", sh->label, sh->big ? " (big)" : "");
                continue;
            }
            env.rng         = ((seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)k << 40 | (uint64_t)si << 8)) | 1;
            dev->tuning     = env.tuning;
            op_result r     = {0};
            const int fails = lc_test_failures;
            if (perf) {
                float us[3];
                if (op->check) continue; /* case groups: checked, not timed */
                const int rc = perf_table(&env, op, sh, us);
                CHECKF(rc == LC_OK, "%s %s: %s", op->name, sh->label, lc_last_error());
                if (rc == LC_OK)
                    printf("%-12s %-44s %10.2f %10.2f %10.2f\n", op->name, sh->label, us[0], us[1], us[2]);
                fflush(stdout);
                continue;
            }
            const int checks = lc_test_checks;
            if (op->check) op->check(&env, sh, &r);
            else check_table(&env, op, sh, &r);
            const bool ok = lc_test_failures == fails;
            if (op->check && op->tol == 0)
                printf("%-12s %-44s %d checks, %d failed  %s\n", op->name, sh->label,
                       lc_test_checks - checks, lc_test_failures - fails, ok ? "pass" : "FAIL");
            else if (op->tol > 0)
                printf("%-12s %-44s nmse %9.3g (limit %.0e)  %s\n", op->name, sh->label, r.err, op->tol,
                       ok ? "pass" : "FAIL");
            else
                printf("%-12s %-44s exact, %lld differ  %s\n", op->name, sh->label, (long long)r.bad,
                       ok ? "pass" : "FAIL");
            fflush(stdout);
        }
    }
    if (list) return 0;
    dev->tuning = env.tuning;
    dev->free(dev), cpu->free(cpu);
    TEST_END();
}
