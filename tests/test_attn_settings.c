/*
 * test_attn_settings.c — the attention methods' settings tables (attn/settings.h) and registry
 * (attn/registry.c): for every registered method, every key round-trips through set and
 * describe, every preset applies and validates, and bad keys, values and keys of another method
 * fail with one line naming the method, the key and what is allowed; each method's default
 * preset is what lc_context_default_params gave before the settings became strings.
 */
#include "attn/attn.h"
#include "attn/hip/hip.h"
#include "attn/infinitehip/infinitehip.h"
#include "attn/tokenselect/tokenselect.h"
#include "longctx.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* src with every run of spaces and newlines as one space, into dst[cap] */
static void squeeze(const char *src, char *dst, size_t cap) {
    size_t n = 0;
    for (const char *c = src; *c && n + 1 < cap; c++) {
        const bool sp = *c == ' ' || *c == '\n';
        if (sp && (n == 0 || dst[n - 1] == ' ')) continue;
        dst[n++] = sp ? ' ' : *c;
    }
    dst[n] = 0;
}

static bool msg_has(const char *needle) {
    const char *e = lc_last_error();
    const bool  ok = e && strstr(e, needle) != NULL;
    if (!ok) fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e ? e : "(none)", needle);
    return ok;
}

/* the registered methods, by name */
static int methods(const lc_attn_desc **out, int cap) {
    char names[256];
    snprintf(names, sizeof names, "%s", lc_attn_methods());
    int n = 0;
    for (char *t = strtok(names, ", "); t && n < cap; t = strtok(NULL, ", ")) {
        out[n] = lc_attn_find(t);
        CHECKF(out[n] != NULL, "method %s not found", t);
        if (out[n]) n++;
    }
    return n;
}

/* the value "key=VALUE" of a description */
static bool described(const char *desc, const char *key, char *val, size_t cap) {
    const size_t n = strlen(key);
    for (const char *p = desc; p && *p; p = strchr(p, ' '), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, n) || p[n] != '=') continue;
        const char  *v = p + n + 1, *e = strchr(v, ' ');
        const size_t len = e ? (size_t)(e - v) : strlen(v);
        if (len >= cap) return false;
        memcpy(val, v, len);
        val[len] = 0;
        return true;
    }
    return false;
}

/* every key: its described value sets back to the same description; a second value in range
 * changes it */
static void check_round_trip(const lc_attn_desc *d) {
    const lc_settings_table *t = &d->settings;
    void *s = NULL, *s2 = malloc(t->size ? t->size : 1);
    CHECK(lc_attn_settings_parse(d, NULL, &s) == LC_OK && s && s2);
    if (!s || !s2) return;
    char desc[1024], desc2[1024], val[128];
    CHECK(lc_settings_describe(t, s, desc, sizeof desc) == LC_OK);
    for (int32_t i = 0; i < t->n_keys; i++) {
        const lc_setting *k = &t->keys[i];
        CHECKF(described(desc, k->name, val, sizeof val), "%s: %s not described (%s)", d->name,
               k->name, desc);
        memcpy(s2, s, t->size);
        CHECKF(lc_settings_set(t, s2, k->name, val) == LC_OK, "%s: %s=%s: %s", d->name, k->name,
               val, lc_last_error());
        CHECK(lc_settings_describe(t, s2, desc2, sizeof desc2) == LC_OK);
        CHECKF(!strcmp(desc, desc2) && !memcmp(s, s2, t->size), "%s: %s=%s does not round-trip",
               d->name, k->name, val);
        /* another value: the enum's other name, the bool's other value, lo of a number */
        char other[128];
        if (k->type == LC_SETTING_ENUM) snprintf(other, sizeof other, "%s", k->values[0]);
        else if (k->type == LC_SETTING_BOOL) snprintf(other, sizeof other, "%s", val[0] == '1' ? "0" : "1");
        else if (k->type == LC_SETTING_FLOAT) snprintf(other, sizeof other, "%g", k->lo);
        else if (k->type == LC_SETTING_INT) snprintf(other, sizeof other, "%.0f", k->lo);
        else {
            /* a list: lo in every place, as many as the count */
            const int32_t n = *(const int32_t *)((const char *)s + k->count_offset);
            size_t        at = 0;
            for (int32_t j = 0; j < n; j++)
                at += (size_t)snprintf(other + at, sizeof other - at, "%s%.0f", j ? "," : "", k->lo);
        }
        CHECKF(lc_settings_set(t, s2, k->name, other) == LC_OK, "%s: %s=%s: %s", d->name, k->name,
               other, lc_last_error());
        CHECK(lc_settings_describe(t, s2, desc2, sizeof desc2) == LC_OK);
        CHECKF(described(desc2, k->name, val, sizeof val) && !strcmp(val, other),
               "%s: %s=%s described as %s", d->name, k->name, other, val);
        /* out of range, and not a value at all */
        if (k->type == LC_SETTING_INT || k->type == LC_SETTING_INT_LIST) {
            char bad[64];
            snprintf(bad, sizeof bad, "%.0f", k->hi + 1);
            char want[160];
            snprintf(want, sizeof want, "%s: %s=%s is outside %.0f..%.0f", d->name, k->name, bad,
                     k->lo, k->hi);
            CHECK(lc_settings_set(t, s2, k->name, bad) == LC_ERR_INVALID_ARG && msg_has(want));
        }
        char want[160];
        snprintf(want, sizeof want, "%s: %s=x", d->name, k->name);
        CHECK(lc_settings_set(t, s2, k->name, "x") == LC_ERR_INVALID_ARG && msg_has(want));
    }
    free(s), free(s2);
}

static void check_presets(const lc_attn_desc *d) {
    const lc_settings_table *t = &d->settings;
    for (int32_t i = 0; i < t->n_presets; i++) {
        char str[96], desc[1024];
        snprintf(str, sizeof str, "preset=%s", t->presets[i].name);
        CHECKF(lc_attn_check(d->name, str, desc, sizeof desc) == LC_OK, "%s %s: %s", d->name, str,
               lc_last_error());
    }
    if (t->n_presets) {
        /* the default preset is what no settings give */
        char a[1024], b[1024], str[96];
        snprintf(str, sizeof str, "preset=%s", t->default_preset);
        CHECK(lc_attn_check(d->name, NULL, a, sizeof a) == LC_OK);
        CHECK(lc_attn_check(d->name, str, b, sizeof b) == LC_OK && !strcmp(a, b));
        char want[96];
        snprintf(want, sizeof want, "%s has no preset \"nope\" (presets: %s", d->name,
                 t->presets[0].name);
        CHECK(lc_attn_check(d->name, "preset=nope", NULL, 0) == LC_ERR_NOT_FOUND && msg_has(want));
    }
    char help[8192], flat[8192], want[512];
    CHECK(lc_attn_help(d->name, help, sizeof help) == LC_OK);
    /* every text appears (its words, wrapped at any space) and no line passes 100 columns */
    squeeze(help, flat, sizeof flat);
    squeeze(d->summary, want, sizeof want);
    CHECKF(strstr(flat, want) != NULL, "%s: the summary is not in the help", d->name);
    for (int32_t i = 0; i < t->n_keys; i++) {
        squeeze(t->keys[i].help, want, sizeof want);
        CHECKF(strstr(flat, want) != NULL, "%s: the help of %s is not in the help", d->name,
               t->keys[i].name);
    }
    int col = 0, widest = 0;
    for (const char *c = help; *c; c++) {
        col = *c == '\n' ? 0 : col + 1;
        if (col > widest) widest = col;
    }
    CHECKF(widest <= 100, "%s: a help line of %d columns", d->name, widest);
}

/* the defaults of lc_context_default_params before settings strings (issue 22) */
static void check_defaults(void) {
    const lc_context_params cp = lc_context_default_params();
    CHECK(cp.attn == NULL && cp.attn_settings == NULL);
    void *s = NULL;
    lc_infinitehip_params ih = {0}, f64 = {0};
    CHECK(lc_attn_settings_parse(&lc_attn_desc_infinitehip, NULL, &s) == LC_OK);
    if (s) ih = *(lc_infinitehip_params *)s, free(s), s = NULL;
    CHECK(lc_settings_preset_apply(&lc_attn_desc_infinitehip.settings, "3k-fine64", &f64) == LC_OK);
    f64.tail_block = 16;
    CHECK(memcmp(&ih, &f64, sizeof ih) == 0); /* 3k-fine64 + tail-block 16 */
    CHECK(ih.n_stages == 3 && ih.chunk[0] == 64 && ih.chunk[1] == 16 && ih.chunk[2] == 1 &&
          ih.k[0] == 32768 && ih.k[1] == 8192 && ih.k[2] == 2048 && ih.refresh[0] == 16 &&
          ih.refresh[1] == 8 && ih.refresh[2] == 4 && ih.q_stride[0] == 4 && ih.q_stride[2] == 1 &&
          ih.overlap == 1 && ih.n_sink == 256 && ih.n_stream == 1024 && ih.block_q == 64 &&
          ih.first_layers == 3 && ih.first_k == 4096 && ih.rope == LC_HIP_ROPE_AUTO);
    lc_hipattn_params hp = {0};
    CHECK(lc_attn_settings_parse(&lc_attn_desc_hip, NULL, &s) == LC_OK);
    if (s) hp = *(lc_hipattn_params *)s, free(s), s = NULL;
    CHECK(hp.k == 2048 && hp.tail_block == 8 && hp.block_q == 32 && hp.block_k == 2 &&
          hp.q_stride == 2 && hp.k_stride == 1 && hp.n_sink == 128 && hp.n_stream == 512 &&
          hp.dense_layers == 3 && hp.refresh == 8 && hp.per_group == 1);
    lc_tokenselect_params ts = {0};
    CHECK(lc_attn_settings_parse(&lc_attn_desc_tokenselect, NULL, &s) == LC_OK);
    if (s) ts = *(lc_tokenselect_params *)s, free(s), s = NULL;
    CHECK(ts.tail_block == 16 && ts.k == 2048 && ts.n_init == 128 && ts.n_local == 512 &&
          ts.chunk == 512 && ts.theta == 0.9f && ts.gqa_mod == 0 && ts.dense_layers == 0);
    CHECK(lc_attn_settings_parse(&lc_attn_desc_tokenselect, "preset=paper", &s) == LC_OK);
    CHECK(s && ((lc_tokenselect_params *)s)->tail_block == 0);
    free(s);
    /* the descriptions the result files grep */
    char d[1024];
    CHECK(lc_attn_check("infinitehip", NULL, d, sizeof d) == LC_OK &&
          !strcmp(d, "chunks=64,16,1 k=32768,8192,2048 refresh=16,8,4 q-stride=4,4,1 "
                     "kv-descent=0,0,0 block-q=64 sink=256 stream=1024 first-layers=3 "
                     "first-k=4096 dense-layers=0 rope=auto heads=all stagger=0 overlap=1 "
                     "tail-block=16 attn-span=0"));
    CHECK(lc_attn_check("hip", NULL, d, sizeof d) == LC_OK &&
          !strcmp(d, "k=2048 block-q=32 block-k=2 q-stride=2 k-stride=1 sink=128 stream=512 "
                     "dense-layers=3 refresh=8 rope=auto heads=group tail-block=8"));
    CHECK(lc_attn_check("tokenselect", NULL, d, sizeof d) == LC_OK &&
          !strcmp(d, "k=2048 init=128 local=512 chunk=512 theta=0.9 gqa=group rope=auto "
                     "dense-layers=0 tail-block=16"));
}

/* settings strings: presets, order, the messages of bad ones */
static void check_strings(void) {
    char d[1024];
    /* keys over the named preset; lists that set the stage count apply first */
    CHECK(lc_attn_check("infinitehip", "refresh=4,2 preset=3k chunks=64,16 k=2048,2048 first-k=2048", d,
                        sizeof d) == LC_OK &&
          strstr(d, "chunks=64,16 k=2048,2048 refresh=4,2 "));
    CHECK(lc_attn_check("infinitehip", "preset=3k refresh=4,2", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("infinitehip: refresh=4,2 gives 2 values; expected 3"));
    CHECK(lc_attn_check("infinitehip", "tail-block=65", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("infinitehip: tail-block=65 is outside 0..64"));
    CHECK(lc_attn_check("infinitehip", "foo=1", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("infinitehip has no setting \"foo\" (settings: chunks, k, refresh, q-stride"));
    CHECK(lc_attn_check("tokenselect", "chunks=64", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("tokenselect has no setting \"chunks\" (a setting of infinitehip; settings of "
                  "tokenselect: k, init"));
    CHECK(lc_attn_check("infinitehip", "theta=0.5", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("(a setting of tokenselect;"));
    CHECK(lc_attn_check("dense", "k=1", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("dense has no setting \"k\" (a setting of infinitehip, hip, tokenselect; "
                  "settings of dense: none)"));
    CHECK(lc_attn_check("hip", "preset=2k preset=512", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("more than one preset"));
    CHECK(lc_attn_check("hip", "k", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("hip: \"k\" is not key=value"));
    CHECK(lc_attn_check("hip", "rope=yarn", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("hip: rope=yarn is not one of auto, extend, plain or stream"));
    CHECK(lc_attn_check("tokenselect", "theta=3", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("tokenselect: theta=3 is outside -1..2"));
    CHECK(lc_attn_check("tokenselect", "local=256", NULL, 0) == LC_ERR_INVALID_ARG &&
          msg_has("tokenselect: local=256; allowed chunk (512)"));
    CHECK(lc_attn_check("streamingllm", NULL, NULL, 0) == LC_ERR_NOT_FOUND &&
          msg_has("unknown attention method \"streamingllm\" (known: dense, infinitehip"));
    /* '-' and '_' alike; InfiniteHiP's "chunk" is "chunks" */
    CHECK(lc_attn_check("infinitehip", "tail_block=8 chunk=64,16,1", d, sizeof d) == LC_OK &&
          strstr(d, "tail-block=8"));
}

int main(void) {
    const lc_attn_desc *ds[16];
    const int           n = methods(ds, 16);
    CHECK(n >= 4);
    for (int i = 0; i < n; i++) {
        check_round_trip(ds[i]);
        check_presets(ds[i]);
    }
    check_defaults();
    check_strings();
    TEST_END();
}
