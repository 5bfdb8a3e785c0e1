/*
 * settings.c — the generic side of the attention methods' settings tables (settings.h): set a
 * key from a string, apply settings strings and presets, range checks, the one-line description
 * and the help text, all driven by a method's table.
 */
#include "attn/settings.h"

#include "longctx.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lc_rope_names[]        = {"auto", "extend", "plain", NULL};
const char *const lc_rope_names_stream[] = {"auto", "extend", "plain", "stream", NULL};
const char *const lc_heads_names[]       = {"all", "group", NULL};

/* key names compare with '-' and '_' alike */
static bool same_key(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

const lc_setting *lc_settings_find(const lc_settings_table *t, const char *key) {
    for (int32_t i = 0; i < t->n_keys; i++)
        if (same_key(t->keys[i].name, key) || (t->keys[i].alias && same_key(t->keys[i].alias, key)))
            return &t->keys[i];
    return NULL;
}

void lc_settings_key_names(const lc_settings_table *t, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (int32_t i = 0; i < t->n_keys; i++) lc_buf_put(buf, cap, &at, "%s%s", i ? ", " : "", t->keys[i].name);
}

static int32_t *int_at(void *s, size_t off) { return (int32_t *)((char *)s + off); }
static const int32_t *cint_at(const void *s, size_t off) {
    return (const int32_t *)((const char *)s + off);
}

/* the enum's names "a, b or c" (sep ", " and the last " or ") */
static void enum_names(const lc_setting *k, const char *sep, const char *last, char *buf,
                       size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (int32_t i = 0; k->values[i]; i++)
        lc_buf_put(buf, cap, &at, "%s%s", i == 0 ? "" : k->values[i + 1] ? sep : last, k->values[i]);
}

static int bad_range(const lc_settings_table *t, const lc_setting *k, const char *v) {
    if (k->type == LC_SETTING_FLOAT)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is outside %g..%g", t->method, k->name, v,
                       k->lo, k->hi);
    return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is outside %.0f..%.0f", t->method, k->name, v,
                   k->lo, k->hi);
}

/* one integer of a key (a whole value or a list element s) */
static int parse_int(const lc_settings_table *t, const lc_setting *k, const char *value,
                     const char *s, int32_t *out) {
    char *end = NULL;
    errno     = 0;
    const long long x = strtoll(s, &end, 10);
    if (!s[0] || errno || !end || *end)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not %s in %.0f..%.0f", t->method,
                       k->name, value, k->type == LC_SETTING_INT_LIST ? "a list of integers"
                                                                     : "an integer",
                       k->lo, k->hi);
    if ((double)x < k->lo || (double)x > k->hi) return bad_range(t, k, value);
    *out = (int32_t)x;
    return LC_OK;
}

static int parse_list(const lc_settings_table *t, const lc_setting *k, const char *v,
                      void *settings) {
    int32_t     vals[LC_SETTING_MAX_LIST];
    int32_t     cnt = 0;
    const char *s   = v;
    while (1) {
        const char *comma = strchr(s, ',');
        const size_t len  = comma ? (size_t)(comma - s) : strlen(s);
        char         buf[32];
        if (cnt == LC_SETTING_MAX_LIST || len == 0 || len >= sizeof buf)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s: expected 1..%d comma-separated "
                           "integers in %.0f..%.0f", t->method, k->name, v, LC_SETTING_MAX_LIST,
                           k->lo, k->hi);
        memcpy(buf, s, len);
        buf[len] = 0;
        const int st = parse_int(t, k, v, buf, &vals[cnt]);
        if (st != LC_OK) return st;
        cnt++;
        if (!comma) break;
        s = comma + 1;
    }
    int32_t *count = int_at(settings, k->count_offset);
    if (k->count == LC_COUNT_MATCH && cnt != *count)
        return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s gives %d values; expected %d, one per stage",
                       t->method, k->name, v, cnt, *count);
    memcpy(int_at(settings, k->offset), vals, sizeof(int32_t) * (size_t)cnt);
    if (k->count == LC_COUNT_SETS) *count = cnt;
    return LC_OK;
}

int lc_settings_set(const lc_settings_table *t, void *settings, const char *key,
                    const char *value) {
    if (!t || !settings || !key || !value)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_set: NULL argument");
    const lc_setting *k = lc_settings_find(t, key);
    if (!k) {
        char names[512];
        lc_settings_key_names(t, names, sizeof names);
        return lc_fail(LC_ERR_INVALID_ARG, "%s has no setting \"%s\" (settings: %s)", t->method,
                       key, names);
    }
    switch (k->type) {
    case LC_SETTING_INT: return parse_int(t, k, value, value, int_at(settings, k->offset));
    case LC_SETTING_INT_LIST: return parse_list(t, k, value, settings);
    case LC_SETTING_FLOAT: {
        char *end = NULL;
        errno     = 0;
        const double x = strtod(value, &end);
        if (!value[0] || errno || !end || *end)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not a number in %g..%g", t->method,
                           k->name, value, k->lo, k->hi);
        if (!(x >= k->lo && x <= k->hi)) return bad_range(t, k, value);
        *(float *)((char *)settings + k->offset) = (float)x;
        return LC_OK;
    }
    case LC_SETTING_ENUM:
        for (int32_t i = 0; k->values[i]; i++)
            if (!strcmp(value, k->values[i])) return *int_at(settings, k->offset) = i, LC_OK;
        char names[256];
        enum_names(k, ", ", " or ", names, sizeof names);
        return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not one of %s", t->method, k->name,
                       value, names);
    case LC_SETTING_BOOL:
        if (!strcmp(value, "0") || !strcmp(value, "1"))
            return *int_at(settings, k->offset) = value[0] - '0', LC_OK;
        return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not 0 or 1", t->method, k->name, value);
    }
    return lc_fail(LC_ERR_INVALID_ARG, "%s: setting %s has an unknown type", t->method, k->name);
}

/* applies the "key=value" tokens of str whose key sets a count (counts) or the others */
static int apply_pass(const lc_settings_table *t, void *settings, const char *str, bool counts) {
    const char *s = str;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != ' ' && *e != '\t' && *e != '\n') e++;
        char tok[256];
        if ((size_t)(e - s) >= sizeof tok)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: setting \"%.32s...\" too long", t->method, s);
        memcpy(tok, s, (size_t)(e - s));
        tok[e - s] = 0;
        s          = e;
        char *eq   = strchr(tok, '=');
        if (!eq || eq == tok)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: \"%s\" is not key=value", t->method, tok);
        *eq = 0;
        if (same_key(tok, "preset")) continue; /* the registry's (lc_attn_settings_parse) */
        const lc_setting *k = lc_settings_find(t, tok);
        const bool sets     = k && k->type == LC_SETTING_INT_LIST && k->count == LC_COUNT_SETS;
        if (sets != counts) continue;
        const int st = lc_settings_set(t, settings, tok, eq + 1);
        if (st != LC_OK) return st;
    }
    return LC_OK;
}

int lc_settings_apply(const lc_settings_table *t, void *settings, const char *str) {
    if (!t || !settings) return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_apply: NULL argument");
    if (!str) return LC_OK;
    const int st = apply_pass(t, settings, str, true);
    return st != LC_OK ? st : apply_pass(t, settings, str, false);
}

int lc_settings_preset_apply(const lc_settings_table *t, const char *name, void *settings) {
    if (!t || !name || !settings)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_preset_apply: NULL argument");
    for (int32_t i = 0; i < t->n_presets; i++) {
        if (strcmp(t->presets[i].name, name)) continue;
        memcpy(settings, t->base, t->size);
        return lc_settings_apply(t, settings, t->presets[i].settings);
    }
    char   names[256];
    size_t at = 0;
    names[0]  = 0;
    for (int32_t i = 0; i < t->n_presets; i++)
        lc_buf_put(names, sizeof names, &at, "%s%s", i ? ", " : "", t->presets[i].name);
    return lc_fail(LC_ERR_NOT_FOUND, "%s has no preset \"%s\" (presets: %s)", t->method, name,
                   t->n_presets ? names : "none");
}

/* the value of k in settings as the settings string writes it */
static void format_value(const lc_setting *k, const void *settings, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = 0;
    const int32_t *v = cint_at(settings, k->offset);
    switch (k->type) {
    case LC_SETTING_INT:
    case LC_SETTING_BOOL: lc_buf_put(buf, cap, &at, "%d", *v); break;
    case LC_SETTING_INT_LIST: {
        const int32_t n = *cint_at(settings, k->count_offset);
        for (int32_t i = 0; i < n && i < LC_SETTING_MAX_LIST; i++)
            lc_buf_put(buf, cap, &at, "%s%d", i ? "," : "", v[i]);
        break;
    }
    case LC_SETTING_FLOAT: lc_buf_put(buf, cap, &at, "%g", (double)*(const float *)v); break;
    case LC_SETTING_ENUM: {
        int32_t n = 0;
        while (k->values[n]) n++;
        if (*v >= 0 && *v < n) lc_buf_put(buf, cap, &at, "%s", k->values[*v]);
        else lc_buf_put(buf, cap, &at, "%d", *v);
        break;
    }
    }
}

int lc_settings_check(const lc_settings_table *t, const void *settings) {
    if (!t || !settings) return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_check: NULL argument");
    for (int32_t i = 0; i < t->n_keys; i++) {
        const lc_setting *k = &t->keys[i];
        const int32_t    *v = cint_at(settings, k->offset);
        bool              ok = true;
        switch (k->type) {
        case LC_SETTING_INT: ok = *v >= k->lo && *v <= k->hi; break;
        case LC_SETTING_BOOL: ok = *v == 0 || *v == 1; break;
        case LC_SETTING_FLOAT: {
            const double x = *(const float *)v;
            ok             = x >= k->lo && x <= k->hi;
            break;
        }
        case LC_SETTING_ENUM:
            ok = *v >= 0;
            for (int32_t j = 0; ok && j <= *v; j++) ok = k->values[j] != NULL;
            break;
        case LC_SETTING_INT_LIST: {
            const int32_t n = *cint_at(settings, k->count_offset);
            if (n < 1 || n > LC_SETTING_MAX_LIST)
                return lc_fail(LC_ERR_INVALID_ARG, "%s: %s has %d values; allowed 1..%d",
                               t->method, k->name, n, LC_SETTING_MAX_LIST);
            for (int32_t j = 0; j < n; j++) ok = ok && v[j] >= k->lo && v[j] <= k->hi;
            break;
        }
        }
        if (ok) continue;
        char val[128];
        format_value(k, settings, val, sizeof val);
        if (k->type == LC_SETTING_BOOL)
            return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not 0 or 1", t->method, k->name, val);
        if (k->type == LC_SETTING_ENUM) {
            char names[256];
            enum_names(k, ", ", " or ", names, sizeof names);
            return lc_fail(LC_ERR_INVALID_ARG, "%s: %s=%s is not one of %s", t->method, k->name,
                           val, names);
        }
        return bad_range(t, k, val);
    }
    return LC_OK;
}

int lc_settings_describe(const lc_settings_table *t, const void *settings, char *buf,
                         size_t cap) {
    if (!t || !settings || !buf || !cap)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_describe: NULL argument");
    size_t at = 0;
    buf[0]    = 0;
    for (int32_t i = 0; i < t->n_keys; i++) {
        char val[128];
        format_value(&t->keys[i], settings, val, sizeof val);
        lc_buf_put(buf, cap, &at, "%s%s=%s", i ? " " : "", t->keys[i].name, val);
    }
    if (at >= cap)
        return lc_fail(LC_ERR_INVALID_ARG, "describe: buffer of %zu bytes too small", cap);
    return LC_OK;
}

int lc_settings_help(const lc_settings_table *t, char *buf, size_t cap) {
    if (!t || !buf || !cap) return lc_fail(LC_ERR_INVALID_ARG, "lc_settings_help: NULL argument");
    void *def = lc_calloc(1, t->size ? t->size : 1, "settings help");
    if (!def) return LC_ERR_NOMEM;
    int st = t->n_presets ? lc_settings_preset_apply(t, t->default_preset, def) : LC_OK;
    if (st != LC_OK) {
        free(def);
        return st;
    }
    size_t at = 0;
    buf[0]    = 0;
    for (int32_t i = 0; i < t->n_keys; i++) {
        const lc_setting *k = &t->keys[i];
        char              vals[160], dv[128];
        if (k->type == LC_SETTING_ENUM) enum_names(k, "|", "|", vals, sizeof vals);
        else if (k->type == LC_SETTING_BOOL) snprintf(vals, sizeof vals, "0|1");
        else if (k->type == LC_SETTING_FLOAT) snprintf(vals, sizeof vals, "%g..%g", k->lo, k->hi);
        else
            snprintf(vals, sizeof vals, "%.0f..%.0f%s", k->lo, k->hi,
                     k->type == LC_SETTING_INT_LIST ? ",..." : "");
        format_value(k, def, dv, sizeof dv);
        lc_buf_put(buf, cap, &at, "  %-13s %s (default %s)\n%16s", k->name, vals, dv, "");
        lc_text_wrap(buf, cap, &at, 16, 16, k->help);
    }
    if (t->n_presets) lc_buf_put(buf, cap, &at, "  presets (preset=NAME; default %s):\n", t->default_preset);
    for (int32_t i = 0; i < t->n_presets; i++)
    {
        lc_buf_put(buf, cap, &at, "    %-11s ", t->presets[i].name);
        lc_text_wrap(buf, cap, &at, 16, 16, t->presets[i].help);
    }
    free(def);
    if (at >= cap) return lc_fail(LC_ERR_INVALID_ARG, "help: buffer of %zu bytes too small", cap);
    return LC_OK;
}
