/*
 * test_tuning.c — the backend's tuning (lc_tuning, longctx.h): the default is the zero struct
 * and describes as "default"; every knob takes each of its allowed values by name (with '-' or
 * '_'), sets its field and describes as NAME=VALUE; unknown names and bad values are refused
 * with a message naming the knob (and the allowed values), leaving the struct alone; a field
 * set out of its range through the struct is refused by describe and by lc_model_load.
 */
#include "longctx.h"
#include "test_util.h"

#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static bool msg_has(const char *needle) {
    const char *e = lc_last_error();
    return e && strstr(e, needle) != NULL;
}

/* One accepted NAME=VALUE and the field it sets (as int; bools 0/1). */
typedef struct accept_case {
    const char *name, *value;
    size_t      off;  /* offsetof the field in lc_tuning */
    bool        is_bool;
    int32_t     want;
} accept_case;

#define B(f) offsetof(lc_tuning, f), true
#define I(f) offsetof(lc_tuning, f), false

static const accept_case k_accept[] = {
    {"cuda-graphs", "off", B(no_cuda_graphs), 1},
    {"cuda-graphs", "on", B(no_cuda_graphs), 0},
    {"gemv", "off", B(no_gemv), 1},
    {"gemv", "on", B(no_gemv), 0},
    {"prefill", "mma", B(prefill_mma), 1},
    {"prefill", "auto", B(prefill_mma), 0},
    {"dense-decode", "direct", B(dense_decode_direct), 1},
    {"dense-decode", "staged", B(dense_decode_direct), 0},
    {"sparse-prefill", "mma", B(sparse_prefill_mma), 1},
    {"sparse-prefill", "auto", B(sparse_prefill_mma), 0},
    {"sparse-decode", "prefill", B(sparse_decode_prefill), 1},
    {"sparse-decode", "auto", B(sparse_decode_prefill), 0},
    {"sparse-pdl", "off", B(no_sparse_pdl), 1},
    {"sparse-pdl", "on", B(no_sparse_pdl), 0},
    {"sparse-decode-scan", "thread", I(sparse_decode_scan), LC_TUNE_SCAN_THREAD},
    {"sparse-decode-scan", "warp", I(sparse_decode_scan), LC_TUNE_SCAN_WARP},
    {"sparse-decode-scan", "auto", I(sparse_decode_scan), LC_TUNE_SCAN_AUTO},
    {"rotate-keys", "off", I(rotate_keys), LC_TUNE_OFF},
    {"rotate-keys", "on", I(rotate_keys), LC_TUNE_ON},
    {"rotate-keys", "auto", I(rotate_keys), LC_TUNE_AUTO},
    {"stage-one-cta", "on", B(stage_one_cta), 1},
    {"stage-one-cta", "off", B(stage_one_cta), 0},
    {"stage-tiles", "1", I(stage_tiles), 1},
    {"stage-tiles", "2", I(stage_tiles), 2},
    {"stage-tiles", "4", I(stage_tiles), 4},
    {"stage-tiles", "auto", I(stage_tiles), 0},
    {"stage-transpose", "off", I(stage_transpose), LC_TUNE_TRANSPOSE_OFF},
    {"stage-transpose", "smem", I(stage_transpose), LC_TUNE_TRANSPOSE_SMEM},
    {"stage-transpose", "auto", I(stage_transpose), LC_TUNE_TRANSPOSE_AUTO},
    {"ts-select-path", "kernels", I(ts_select_path), LC_TUNE_TS_KERNELS},
    {"ts-select-path", "fused", I(ts_select_path), LC_TUNE_TS_FUSED},
    {"ts-select-path", "auto", I(ts_select_path), LC_TUNE_TS_AUTO},
    {"ts-select-launches", "1", I(ts_select_launches), 1},
    {"ts-select-launches", "2", I(ts_select_launches), 2},
    {"ts-select-launches", "3", I(ts_select_launches), 3},
    {"ts-select-launches", "auto", I(ts_select_launches), 0},
    {"ts-select-group", "1", I(ts_select_group), 1},
    {"ts-select-group", "37", I(ts_select_group), 37},
    {"ts-select-group", "auto", I(ts_select_group), 0},
    {"profile-sync", "on", B(profile_sync), 1},
    {"profile-sync", "off", B(profile_sync), 0},
};
#define N_ACCEPT ((int)(sizeof k_accept / sizeof k_accept[0]))

/* Values each knob refuses (the first is also refused by every other knob). */
static const struct {
    const char *name, *bad[4];
} k_refuse[] = {
    {"cuda-graphs", {"maybe", "0", "true", "ON"}},
    {"gemv", {"maybe", "1", "", "off "}},
    {"prefill", {"maybe", "wgmma", "on", ""}},
    {"dense-decode", {"fast", "on", "1", ""}},
    {"sparse-prefill", {"maybe", "wgmma", "off", ""}},
    {"sparse-decode", {"maybe", "split", "decode", ""}},
    {"sparse-pdl", {"maybe", "0", "", "no"}},
    {"sparse-decode-scan", {"maybe", "block", "1", ""}},
    {"rotate-keys", {"maybe", "1", "0", ""}},
    {"stage-one-cta", {"maybe", "1", "", "yes"}},
    {"stage-tiles", {"maybe", "3", "8", "0"}},
    {"stage-transpose", {"maybe", "on", "1", "shared"}},
    {"ts-select-path", {"maybe", "kernel", "9", ""}},
    {"ts-select-launches", {"maybe", "0", "4", "-1"}},
    {"ts-select-group", {"maybe", "0", "-3", "2x"}},
    {"profile-sync", {"maybe", "1", "", "sync"}},
};
#define N_REFUSE ((int)(sizeof k_refuse / sizeof k_refuse[0]))

static int32_t field(const lc_tuning *t, const accept_case *c) {
    const char *p = (const char *)t + c->off;
    return c->is_bool ? (int32_t)*(const bool *)p : *(const int32_t *)p;
}

int main(void) {
    char d[512];
    /* the default: all zero, "default" */
    lc_tuning t = lc_tuning_default(), zero;
    memset(&zero, 0, sizeof zero);
    CHECK(memcmp(&t, &zero, sizeof t) == 0);
    CHECK(lc_tuning_describe(&t, d, sizeof d) == LC_OK && !strcmp(d, "default"));
    const lc_model_params mp = lc_model_default_params();
    CHECK(memcmp(&mp.tuning, &zero, sizeof zero) == 0);

    /* the help (the CLI's --tune list): a line per knob, each accepted NAME= at a line's
     * start after the indent, with every accepted value among its words; no line past 100 */
    char help[4096];
    CHECK(lc_tuning_help(26, help, sizeof help) == LC_OK);
    for (int i = 0; i < N_ACCEPT; i++) {
        char line[96];
        snprintf(line, sizeof line, "\n%26s%s=", "", k_accept[i].name);
        const char *at = strstr(help, line + 1) == help ? help : strstr(help, line);
        CHECKF(at != NULL, "--tune help lacks %s", k_accept[i].name);
        if (!at) continue;
        const char *eol = strchr(at + 1, '\n');
        char        vals[160];
        snprintf(vals, sizeof vals, "%.*s", eol ? (int)(eol - at) : 159, at);
        char w1[40], w2[40], w3[40];
        snprintf(w1, sizeof w1, "=%s|", k_accept[i].value);
        snprintf(w2, sizeof w2, "|%s|", k_accept[i].value);
        snprintf(w3, sizeof w3, "|%s ", k_accept[i].value);
        /* a count: its range lo..hi after the word "auto" holds the value */
        int         lo = 0, hi = -1;
        const char *rng = strstr(vals, "=auto|");
        if (rng) sscanf(rng + 6, "%d..%d", &lo, &hi);
        const int v = atoi(k_accept[i].value);
        CHECKF(strstr(vals, w1) || strstr(vals, w2) || strstr(vals, w3) ||
                   (hi >= lo && v >= lo && v <= hi && strstr(vals, "..")),
               "--tune help line \"%s\" lacks the value %s", vals, k_accept[i].value);
    }
    int col = 0, widest = 0;
    for (const char *c = help; *c; c++) {
        col = *c == '\n' ? 0 : col + 1;
        if (col > widest) widest = col;
    }
    CHECKF(widest <= 100, "--tune help: a line of %d columns", widest);
    CHECK(lc_tuning_help(26, help, 64) == LC_ERR_INVALID_ARG);

    /* every knob, every allowed value, alone and with '_' for '-' */
    for (int i = 0; i < N_ACCEPT; i++) {
        const accept_case *c = &k_accept[i];
        for (int underscore = 0; underscore < 2; underscore++) {
            char name[64];
            snprintf(name, sizeof name, "%s", c->name);
            for (char *p = name; underscore && *p; p++)
                if (*p == '-') *p = '_';
            t = lc_tuning_default();
            CHECKF(lc_tuning_set(&t, name, c->value) == LC_OK, "%s=%s: %s", name, c->value,
                   lc_last_error());
            CHECKF(field(&t, c) == c->want, "%s=%s set %d", name, c->value, field(&t, c));
            CHECK(lc_tuning_describe(&t, d, sizeof d) == LC_OK);
            char want[96];
            snprintf(want, sizeof want, "%s=%s", c->name, c->value);
            if (c->want == 0) /* the default again: nothing to describe */
                CHECKF(!strcmp(d, "default"), "%s=%s describes as \"%s\"", name, c->value, d);
            else
                CHECKF(!strcmp(d, want), "%s=%s describes as \"%s\"", name, c->value, d);
        }
    }
    /* several at once, described in table order, set by describe's words again */
    t = lc_tuning_default();
    CHECK(lc_tuning_set(&t, "profile-sync", "on") == LC_OK);
    CHECK(lc_tuning_set(&t, "cuda-graphs", "off") == LC_OK);
    CHECK(lc_tuning_set(&t, "ts-select-group", "5") == LC_OK);
    CHECK(lc_tuning_set(&t, "rotate-keys", "on") == LC_OK);
    CHECK(lc_tuning_describe(&t, d, sizeof d) == LC_OK);
    CHECKF(!strcmp(d, "cuda-graphs=off rotate-keys=on ts-select-group=5 profile-sync=on"), "%s", d);
    {
        lc_tuning u = lc_tuning_default();
        char      copy[512], *sv = NULL;
        snprintf(copy, sizeof copy, "%s", d);
        for (char *kv = strtok_r(copy, " ", &sv); kv; kv = strtok_r(NULL, " ", &sv)) {
            char *eq = strchr(kv, '=');
            CHECK(eq != NULL);
            if (!eq) break;
            *eq = '\0';
            CHECK(lc_tuning_set(&u, kv, eq + 1) == LC_OK);
        }
        char d2[512];
        CHECK(lc_tuning_describe(&u, d2, sizeof d2) == LC_OK && !strcmp(d, d2));
    }
    CHECK(lc_tuning_describe(&t, d, 8) == LC_ERR_INVALID_ARG && msg_has("too small"));
    CHECK(lc_tuning_describe(&t, NULL, 8) == LC_ERR_INVALID_ARG);
    CHECK(lc_tuning_describe(NULL, d, sizeof d) == LC_ERR_INVALID_ARG);

    /* unknown names: refused, naming the name and the known ones; the struct unchanged */
    const lc_tuning before = t;
    const char *bad_names[] = {"", "graphs", "cuda-graph", "LONGCTX_CUDA_GRAPHS", "gemv=off",
                               "ts-select-nb", "stage-tp"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        CHECKF(lc_tuning_set(&t, bad_names[i], "on") == LC_ERR_INVALID_ARG, "%s", bad_names[i]);
        char key[80];
        snprintf(key, sizeof key, "--tune %s ", bad_names[i]);
        CHECKF(msg_has(key) && msg_has("cuda-graphs") && msg_has("profile-sync"), "%s: %s",
               bad_names[i], lc_last_error());
    }
    /* bad values: refused, naming the knob, the value and what it takes */
    for (int i = 0; i < N_REFUSE; i++)
        for (int j = 0; j < 4; j++) {
            const char *v = k_refuse[i].bad[j];
            CHECKF(lc_tuning_set(&t, k_refuse[i].name, v) == LC_ERR_INVALID_ARG, "%s=%s accepted",
                   k_refuse[i].name, v);
            char key[96];
            snprintf(key, sizeof key, "--tune %s=%s: expected ", k_refuse[i].name, v);
            CHECKF(msg_has(key), "%s=%s: %s", k_refuse[i].name, v, lc_last_error());
        }
    CHECK(memcmp(&t, &before, sizeof t) == 0);
    CHECK(lc_tuning_set(&t, "stage-tiles", "3") == LC_ERR_INVALID_ARG &&
          msg_has("expected auto, 1, 2 or 4"));
    CHECK(lc_tuning_set(&t, "rotate-keys", "1") == LC_ERR_INVALID_ARG &&
          msg_has("expected auto, off or on"));
    CHECK(lc_tuning_set(&t, "cuda-graphs", "0") == LC_ERR_INVALID_ARG &&
          msg_has("expected on or off"));
    CHECK(lc_tuning_set(&t, "ts-select-group", "0") == LC_ERR_INVALID_ARG &&
          msg_has("expected auto or an integer in 1 .. "));
    CHECK(lc_tuning_set(NULL, "gemv", "on") == LC_ERR_INVALID_ARG);
    CHECK(lc_tuning_set(&t, NULL, "on") == LC_ERR_INVALID_ARG);
    CHECK(lc_tuning_set(&t, "gemv", NULL) == LC_ERR_INVALID_ARG);

    /* a field out of its range through the struct: describe and lc_model_load refuse it (the
     * load before opening the file), naming the knob */
    const struct {
        size_t      off;
        int32_t     v;
        const char *name;
    } out_of_range[] = {
        {offsetof(lc_tuning, stage_tiles), 3, "stage-tiles"},
        {offsetof(lc_tuning, stage_tiles), 8, "stage-tiles"},
        {offsetof(lc_tuning, rotate_keys), 3, "rotate-keys"},
        {offsetof(lc_tuning, sparse_decode_scan), -1, "sparse-decode-scan"},
        {offsetof(lc_tuning, ts_select_launches), 4, "ts-select-launches"},
        {offsetof(lc_tuning, ts_select_group), -2, "ts-select-group"},
        {offsetof(lc_tuning, ts_select_path), 7, "ts-select-path"},
        {offsetof(lc_tuning, stage_transpose), 3, "stage-transpose"},
    };
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++) {
        lc_model_params p = lc_model_default_params();
        memcpy((char *)&p.tuning + out_of_range[i].off, &out_of_range[i].v, sizeof(int32_t));
        CHECKF(lc_tuning_describe(&p.tuning, d, sizeof d) == LC_ERR_INVALID_ARG &&
                   msg_has(out_of_range[i].name),
               "%s = %d: %s", out_of_range[i].name, out_of_range[i].v, lc_last_error());
        lc_model *m = NULL;
        CHECKF(lc_model_load("/nonexistent/model.gguf", &p, &m) == LC_ERR_INVALID_ARG &&
                   msg_has(out_of_range[i].name) && !m,
               "load with %s = %d: %s", out_of_range[i].name, out_of_range[i].v, lc_last_error());
    }
    TEST_END();
}
