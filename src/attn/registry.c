/*
 * registry.c — the one list of attention methods (DESIGN.md "Attention methods"): each method's
 * descriptor (attn.h lc_attn_desc: name, summary, settings table and presets, validate,
 * create) lives in its folder; adding a method is one name in LC_ATTN_METHODS. Here also what
 * every method shares: settings strings resolved against a method ("preset=NAME key=value ..."),
 * the factory a context calls, and the public lc_attn_methods / lc_attn_check / lc_attn_help.
 */
#include "attn/attn.h"

#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the registry: one name per method, its descriptor lc_attn_desc_NAME */
#define LC_ATTN_METHODS(X) X(dense) X(infinitehip) X(hip) X(tokenselect) X(streaming)

#define DECLARE(name) extern const lc_attn_desc lc_attn_desc_##name;
#define ENTRY(name) &lc_attn_desc_##name,
#define NAME(name) ", " #name
LC_ATTN_METHODS(DECLARE)
static const lc_attn_desc *const methods[] = {LC_ATTN_METHODS(ENTRY)};
static const char method_names[]           = LC_ATTN_METHODS(NAME);
#define N_METHODS ((int32_t)(sizeof methods / sizeof methods[0]))

const char *lc_attn_methods(void) { return method_names + 2; }

const lc_attn_desc *lc_attn_find(const char *name) {
    if (!name) name = "dense";
    for (int32_t i = 0; i < N_METHODS; i++)
        if (!strcmp(methods[i]->name, name)) return methods[i];
    lc_fail(LC_ERR_NOT_FOUND, "unknown attention method \"%s\" (known: %s)", name,
            lc_attn_methods());
    return NULL;
}

/* the next space-separated token of *s into tok; false at the end */
static bool next_token(const char **s, char *tok, size_t cap) {
    const char *p = *s;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    const char *e = p;
    while (*e && *e != ' ' && *e != '\t' && *e != '\n') e++;
    *s = e;
    if (e == p) return false;
    const size_t n = (size_t)(e - p) < cap - 1 ? (size_t)(e - p) : cap - 1;
    memcpy(tok, p, n);
    tok[n] = 0;
    return true;
}

/* the preset a settings string names (NULL: none), and keys the method does not have, named
 * with the methods that do */
static int scan(const lc_attn_desc *d, const char *str, char *preset, size_t cap,
                bool *has_preset) {
    char tok[256];
    *has_preset = false;
    while (str && next_token(&str, tok, sizeof tok)) {
        char *eq = strchr(tok, '=');
        if (eq) *eq = 0;
        if (!strcmp(tok, "preset")) {
            if (*has_preset)
                return lc_fail(LC_ERR_INVALID_ARG, "%s: more than one preset= in \"%s\"",
                               d->name, str);
            snprintf(preset, cap, "%s", eq ? eq + 1 : "");
            *has_preset = true;
            continue;
        }
        if (!eq || lc_settings_find(&d->settings, tok)) continue; /* apply reports those */
        char   others[128], names[512];
        size_t at = 0;
        others[0] = 0;
        for (int32_t i = 0; i < N_METHODS; i++)
            if (methods[i] != d && lc_settings_find(&methods[i]->settings, tok)) {
                const int n = snprintf(others + at, sizeof others - at, "%s%s", at ? ", " : "",
                                       methods[i]->name);
                if (n > 0 && (size_t)n < sizeof others - at) at += (size_t)n;
            }
        lc_settings_key_names(&d->settings, names, sizeof names);
        if (at)
            return lc_fail(LC_ERR_INVALID_ARG, "%s has no setting \"%s\" (a setting of %s; "
                           "settings of %s: %s)", d->name, tok, others, d->name,
                           names[0] ? names : "none");
        return lc_fail(LC_ERR_INVALID_ARG, "%s has no setting \"%s\" (settings: %s)", d->name,
                       tok, names[0] ? names : "none");
    }
    return LC_OK;
}

int lc_attn_settings_validate(const lc_attn_desc *d, const void *settings) {
    if (!d || !settings)
        return lc_fail(LC_ERR_INVALID_ARG, "lc_attn_settings_validate: NULL argument");
    const int st = lc_settings_check(&d->settings, settings);
    if (st != LC_OK) return st;
    return d->validate ? d->validate(settings) : LC_OK;
}

int lc_attn_settings_parse(const lc_attn_desc *d, const char *str, void **out) {
    if (!d || !out) return lc_fail(LC_ERR_INVALID_ARG, "lc_attn_settings_parse: NULL argument");
    *out = NULL;
    char preset[64];
    bool has_preset;
    int  st = scan(d, str, preset, sizeof preset, &has_preset);
    if (st != LC_OK) return st;
    const lc_settings_table *t = &d->settings;
    void *s = lc_calloc(1, t->size ? t->size : 1, "attention settings");
    if (!s) return LC_ERR_NOMEM;
    if (has_preset || t->n_presets)
        st = lc_settings_preset_apply(t, has_preset ? preset : t->default_preset, s);
    if (st == LC_OK) st = lc_settings_apply(t, s, str);
    if (st == LC_OK) st = lc_attn_settings_validate(d, s);
    if (st != LC_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LC_OK;
}

int64_t lc_attn_fixed_rope_rows(const lc_context_params *p) {
    const lc_attn_desc *d = lc_attn_find(p->attn);
    void               *s = NULL;
    if (!d || !d->fixed_rope_rows || lc_attn_settings_parse(d, p->attn_settings, &s) != LC_OK)
        return 0;
    const int64_t rows = d->fixed_rope_rows(s, p->n_batch);
    free(s);
    return rows;
}

int lc_attn_check(const char *method, const char *settings, char *describe, size_t cap) {
    const lc_attn_desc *d = lc_attn_find(method);
    if (!d) return LC_ERR_NOT_FOUND;
    void *s  = NULL;
    int   st = lc_attn_settings_parse(d, settings, &s);
    if (st == LC_OK && describe && cap) {
        if (d->settings.n_keys) st = lc_settings_describe(&d->settings, s, describe, cap);
        else describe[0] = 0;
    }
    free(s);
    return st;
}

int lc_attn_help(const char *method, char *buf, size_t cap) {
    if (!buf || !cap) return lc_fail(LC_ERR_INVALID_ARG, "lc_attn_help: NULL argument");
    const lc_attn_desc *d = lc_attn_find(method);
    if (!d) return LC_ERR_NOT_FOUND;
    const int n0 = snprintf(buf, cap, "%s: ", d->name);
    size_t    n  = n0 > 0 ? (size_t)n0 : 0;
    lc_text_wrap(buf, cap, &n, (int)n, 2, d->summary);
    if (n >= cap) return lc_fail(LC_ERR_INVALID_ARG, "help: buffer of %zu bytes too small", cap);
    return d->settings.n_keys ? lc_settings_help(&d->settings, buf + n, cap - n) : LC_OK;
}

int lc_attn_create(lc_backend *b, const lc_attn_shape *shape, const lc_context_params *p,
                   lc_attn_method **out) {
    *out                    = NULL;
    const lc_attn_diag diag = {p->sparse_always, p->trace_begin, p->trace_end};
    const lc_attn_desc *d   = lc_attn_find(p->attn);
    if (!d) return LC_ERR_NOT_FOUND;
    void *s  = NULL;
    int   st = lc_attn_settings_parse(d, p->attn_settings, &s);
    if (st != LC_OK) return st;
    if (d->create) st = d->create(b, shape, s, &diag, out);
    else *out = (lc_attn_method *)&lc_attn_dense;
    free(s);
    return st;
}

void lc_attn_method_free(lc_attn_method *m) {
    if (m && m->destroy) m->destroy(m);
}

int lc_attn_last(const lc_attn_method *m, lc_last_selection *out) {
    memset(out, 0, sizeof *out);
    if (!m || !m->last)
        return lc_fail(LC_ERR_UNSUPPORTED, "attention method %s keeps no selections",
                       m ? m->name : "(null)");
    return m->last(m, out);
}
