/*
 * tuning.c — the backend's kernel choices (lc_tuning, longctx.h, where each is documented):
 * one table of knobs (name, field, allowed values, help) drives setting a knob by name (--tune
 * NAME=VALUE), its help, describing the non-default ones (bench, --stats), checking a struct before a
 * backend follows it and hashing it (part of a CUDA graph's key). Zero is every field's
 * default, so the default tuning is the zero struct.
 */
#include "backend/backend.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum knob_kind {
    KNOB_BOOL,  /* a bool field: words[0] is false (the default), words[1] true */
    KNOB_WORDS, /* an int32_t field: the value is the index of its word (NULL: not allowed) */
    KNOB_COUNT, /* an int32_t field: 0 ("auto") or lo .. hi */
} knob_kind;

#define KNOB_MAX_WORDS 5

typedef struct knob {
    const char *name;
    knob_kind   kind;
    size_t      off; /* offsetof(lc_tuning, field) */
    const char *words[KNOB_MAX_WORDS];
    int32_t     lo, hi; /* KNOB_COUNT */
    const char *help;   /* one line: what the knob picks */
} knob;

#define F(field) offsetof(lc_tuning, field)

static const knob k_knobs[] = {
    {"cpu-dot", KNOB_BOOL, F(cpu_q8_dot), {"fp32", "q8"}, 0, 0,
     "CPU decode products of quantised weights: fp32 inputs, or 8-bit inputs with integer dots (AVX-512 VNNI)"},
    {"cuda-graphs", KNOB_BOOL, F(no_cuda_graphs), {"on", "off"}, 0, 0,
     "decode steps replayed as CUDA graphs"},
    {"gemv", KNOB_BOOL, F(no_gemv), {"on", "off"}, 0, 0,
     "our GEMV for decode products (off: cuBLASLt)"},
    {"prefill", KNOB_BOOL, F(prefill_mma), {"auto", "mma"}, 0, 0,
     "dense prefill kernel (auto: wgmma on Hopper)"},
    {"dense-decode", KNOB_BOOL, F(dense_decode_direct), {"staged", "direct"}, 0, 0,
     "dense decode kernel (direct: fp8 codes straight into the mma; unmeasured)"},
    {"sparse-prefill", KNOB_BOOL, F(sparse_prefill_mma), {"auto", "mma"}, 0, 0,
     "the sparse attention's prefill kernel, likewise"},
    {"sparse-decode", KNOB_BOOL, F(sparse_decode_prefill), {"auto", "prefill"}, 0, 0,
     "sparse decode through the prefill kernel"},
    {"sparse-pdl", KNOB_BOOL, F(no_sparse_pdl), {"on", "off"}, 0, 0,
     "the sparse decode merge as a dependent launch"},
    {"sparse-decode-scan", KNOB_WORDS, F(sparse_decode_scan), {"auto", "thread", "warp"}, 0, 0,
     "how sparse decode scans a segment list"},
    {"rotate-keys", KNOB_WORDS, F(rotate_keys), {"auto", "off", "on"}, 0, 0,
     "InfiniteHiP's rotated key tiles in prefill"},
    {"stage-one-cta", KNOB_BOOL, F(stage_one_cta), {"off", "on"}, 0, 0,
     "InfiniteHiP's stages: every chunk wave of a unit in one CTA"},
    {"stage-tiles", KNOB_WORDS, F(stage_tiles), {"auto", "1", "2", NULL, "4"}, 0, 0,
     "InfiniteHiP's stages: 8-chunk tiles per warp"},
    {"stage-transpose", KNOB_WORDS, F(stage_transpose), {"auto", "off", "smem"}, 0, 0,
     "InfiniteHiP's stages: transposed scoring"},
    {"ts-select-path", KNOB_WORDS, F(ts_select_path), {"auto", "kernels", "fused"}, 0, 0,
     "TokenSelect's selection: fused or separate kernels"},
    {"ts-select-launches", KNOB_WORDS, F(ts_select_launches), {"auto", "1", "2", "3"}, 0, 0,
     "TokenSelect's fused path: launches"},
    {"ts-select-group", KNOB_COUNT, F(ts_select_group), {"auto"}, 1, 1 << 20,
     "TokenSelect's separate kernels: query blocks a group"},
    {"profile-sync", KNOB_BOOL, F(profile_sync), {"off", "on"}, 0, 0,
     "bench --profile: time ops by synchronising the device (off: CUDA events)"},
};
#define N_KNOBS ((int)(sizeof k_knobs / sizeof k_knobs[0]))

#undef F

_Static_assert(LC_TUNE_SCAN_WARP == 2 && LC_TUNE_ON == 2 && LC_TUNE_TRANSPOSE_SMEM == 2 &&
                   LC_TUNE_TS_FUSED == 2,
               "the word tables above list the enums' values in order");

/* names compare with '-' and '_' alike */
static bool same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        const char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

static bool *bool_of(lc_tuning *t, const knob *k) { return (bool *)((char *)t + k->off); }
static int32_t *int_of(lc_tuning *t, const knob *k) { return (int32_t *)((char *)t + k->off); }
static bool bool_get(const lc_tuning *t, const knob *k) {
    return *(const bool *)((const char *)t + k->off);
}
static int32_t int_get(const lc_tuning *t, const knob *k) {
    return *(const int32_t *)((const char *)t + k->off);
}

/* "a, b or c" of the knob's allowed values */
static void allowed(const knob *k, char *buf, size_t cap) {
    if (k->kind == KNOB_COUNT) {
        snprintf(buf, cap, "auto or an integer in %d .. %d", k->lo, k->hi);
        return;
    }
    const int n = k->kind == KNOB_BOOL ? 2 : KNOB_MAX_WORDS;
    int       last = 0, at = 0;
    for (int i = 0; i < n; i++)
        if (k->words[i]) last = i;
    buf[0] = '\0';
    for (int i = 0; i < n && at < (int)cap; i++) {
        if (!k->words[i]) continue;
        at += snprintf(buf + at, cap - (size_t)at, "%s%s", i == 0 ? "" : i == last ? " or " : ", ",
                       k->words[i]);
    }
}

lc_tuning lc_tuning_default(void) {
    lc_tuning t;
    memset(&t, 0, sizeof t);
    return t;
}

int lc_tuning_set(lc_tuning *t, const char *name, const char *value) {
    if (!t || !name || !value) return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_set: NULL argument");
    const knob *k = NULL;
    for (int i = 0; i < N_KNOBS && !k; i++)
        if (same_name(name, k_knobs[i].name)) k = &k_knobs[i];
    if (!k) {
        char known[512];
        int  at = 0;
        for (int i = 0; i < N_KNOBS && at < (int)sizeof known; i++)
            at += snprintf(known + at, sizeof known - (size_t)at, "%s%s", i ? ", " : "",
                           k_knobs[i].name);
        return lc_fail(LC_ERR_INVALID_ARG, "unknown tuning knob --tune %s (known: %s)", name,
                       known);
    }
    if (k->kind == KNOB_BOOL) {
        for (int i = 0; i < 2; i++)
            if (!strcmp(value, k->words[i])) return *bool_of(t, k) = i == 1, LC_OK;
    } else if (k->kind == KNOB_WORDS) {
        for (int i = 0; i < KNOB_MAX_WORDS; i++)
            if (k->words[i] && !strcmp(value, k->words[i])) return *int_of(t, k) = i, LC_OK;
    } else {
        if (!strcmp(value, "auto")) return *int_of(t, k) = 0, LC_OK;
        char *end = NULL;
        errno     = 0;
        const long long x = strtoll(value, &end, 10);
        if (value[0] && !errno && end && !*end && x >= k->lo && x <= k->hi)
            return *int_of(t, k) = (int32_t)x, LC_OK;
    }
    char ok[160];
    allowed(k, ok, sizeof ok);
    return lc_fail(LC_ERR_INVALID_ARG, "--tune %s=%s: expected %s", k->name, value, ok);
}

/* the value of knob k in t as its word (or number); NULL when out of its range */
static const char *value_text(const lc_tuning *t, const knob *k, char *num, size_t cap) {
    if (k->kind == KNOB_BOOL) return k->words[bool_get(t, k) ? 1 : 0];
    const int32_t v = int_get(t, k);
    if (k->kind == KNOB_WORDS) return v >= 0 && v < KNOB_MAX_WORDS ? k->words[v] : NULL;
    if (v == 0) return k->words[0];
    if (v < k->lo || v > k->hi) return NULL;
    snprintf(num, cap, "%d", v);
    return num;
}

int lc_tuning_check(const lc_tuning *t) {
    if (!t) return lc_fail(LC_ERR_INVALID_ARG, "tuning: NULL argument");
    for (int i = 0; i < N_KNOBS; i++) {
        char num[16];
        if (!value_text(t, &k_knobs[i], num, sizeof num)) {
            char ok[160];
            allowed(&k_knobs[i], ok, sizeof ok);
            return lc_fail(LC_ERR_INVALID_ARG, "tuning: %s has the value %d; expected %s",
                           k_knobs[i].name, (int)int_get(t, &k_knobs[i]), ok);
        }
    }
    return LC_OK;
}

uint64_t lc_tuning_hash(const lc_tuning *t) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the knobs' values */
    for (int i = 0; i < N_KNOBS; i++) {
        const knob    *k = &k_knobs[i];
        const uint64_t v = k->kind == KNOB_BOOL ? (uint64_t)bool_get(t, k)
                                                : (uint64_t)(uint32_t)int_get(t, k);
        for (int j = 0; j < 4; j++) h = (h ^ ((v >> (8 * j)) & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

int lc_tuning_help(int indent, char *buf, size_t cap) {
    if (!buf || !cap || indent < 0)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_help: bad argument");
    size_t at = 0;
    buf[0]    = '\0';
    for (int i = 0; i < N_KNOBS; i++) {
        const knob *k = &k_knobs[i];
        char        vals[96];
        if (k->kind == KNOB_COUNT) {
            snprintf(vals, sizeof vals, "%s|%d..%d", k->words[0], k->lo, k->hi);
        } else {
            int v = 0;
            for (int j = 0; j < (k->kind == KNOB_BOOL ? 2 : KNOB_MAX_WORDS); j++)
                if (k->words[j])
                    v += snprintf(vals + v, sizeof vals - (size_t)v, "%s%s", v ? "|" : "",
                                  k->words[j]);
        }
        const int n = snprintf(buf + at, cap - at, "%*s%s=%s  ", indent, "", k->name, vals);
        if (n < 0 || (size_t)n >= cap - at) break;
        at += (size_t)n;
        lc_text_wrap(buf, cap, &at, n, indent + 2, k->help);
        if (at >= cap) break;
    }
    if (at >= cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_help: buffer of %zu bytes too small", cap);
    return LC_OK;
}

int lc_tuning_describe(const lc_tuning *t, char *buf, size_t cap) {
    if (!t || !buf || !cap) return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_describe: NULL argument");
    const int st = lc_tuning_check(t);
    if (st != LC_OK) return st;
    size_t at = 0;
    buf[0]    = '\0';
    for (int i = 0; i < N_KNOBS; i++) {
        const knob *k = &k_knobs[i];
        const bool  dflt = k->kind == KNOB_BOOL ? !bool_get(t, k) : int_get(t, k) == 0;
        if (dflt) continue;
        char        num[16];
        const char *v = value_text(t, k, num, sizeof num);
        const int   n = snprintf(buf + at, cap - at, "%s%s=%s", at ? " " : "", k->name, v);
        if (n < 0 || (size_t)n >= cap - at)
            return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_describe: buffer of %zu bytes too small",
                           cap);
        at += (size_t)n;
    }
    if (at == 0 && snprintf(buf, cap, "default") >= (int)cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_tuning_describe: buffer of %zu bytes too small",
                       cap);
    return LC_OK;
}
