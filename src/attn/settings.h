/*
 * settings.h — an attention method's settings declared once, as a table (DESIGN.md "Attention
 * methods"): each setting's name (as on the command line, "tail-block"), type, place in the
 * method's private settings struct, range or value names and one-line help. Generic functions
 * driven by the table set a key from a string, apply a settings string ("key=value ..."; lists
 * comma-separated: "k=32768,8192,2048"), apply a named preset over the method's base defaults,
 * check every value against its range, describe the settings in one line and write the help.
 * Failures name the method, the key and what is allowed: "infinitehip: tail-block=65 is
 * outside 0..64". Checks across keys stay in each method's validate function.
 */
#ifndef LC_ATTN_SETTINGS_H
#define LC_ATTN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LC_SETTING_MAX_LIST 4 /* values of a per-stage list (LC_HIP_MAX_STAGES) */

typedef enum lc_setting_type {
    LC_SETTING_INT,      /* int32_t in lo..hi */
    LC_SETTING_INT_LIST, /* int32_t[LC_SETTING_MAX_LIST], each in lo..hi, with a count */
    LC_SETTING_FLOAT,    /* float in lo..hi */
    LC_SETTING_ENUM,     /* int32_t: the index of one of values[] */
    LC_SETTING_BOOL,     /* int32_t: 0 or 1 */
} lc_setting_type;

/* lists: how the list relates to the count at count_offset */
typedef enum lc_setting_count {
    LC_COUNT_NONE = 0,
    LC_COUNT_SETS,  /* the list sets the count (InfiniteHiP's chunks and k set the stages) */
    LC_COUNT_MATCH, /* the list must give exactly count values (a value per stage) */
} lc_setting_count;

typedef struct lc_setting {
    const char        *name;   /* as on the command line: "tail-block" ('-' and '_' alike) */
    lc_setting_type    type;
    size_t             offset; /* of the value in the method's settings struct */
    lc_setting_count   count;  /* lists only */
    size_t             count_offset; /* lists: the int32_t count the list sets or matches */
    double             lo, hi;       /* int, list and float values */
    const char *const *values;       /* enum: the value names, NULL-terminated (index = value) */
    const char        *help;         /* one line */
    const char        *alias;        /* another accepted name, or NULL */
} lc_setting;

/* Keys several methods share — the same name, meaning and help; each method its own range
 * (T: its settings struct, with the field the key sets) — and the values of their enums. */
#define LC_SETTING_DENSE_LAYERS(T)                                                                 \
    {"dense-layers", LC_SETTING_INT, offsetof(T, dense_layers), 0, 0, 0, 1 << 16, NULL,            \
     "first layers that run dense attention", NULL}
/* unit: what the method's prompt rows are cut into ("block", "chunk") */
#define LC_SETTING_TAIL_BLOCK(T, hi, unit)                                                         \
    {"tail-block", LC_SETTING_INT, offsetof(T, tail_block), 0, 0, 0, (hi), NULL,                   \
     "ours: the prompt's last " unit " selects in " unit "s of this many rows (0: off)", NULL}
#define LC_SETTING_HEADS(T, what)                                                                  \
    {"heads", LC_SETTING_ENUM, offsetof(T, per_group), 0, 0, 0, 0, lc_heads_names,                 \
     "one " what " for all heads, or one per KV head group", NULL}
/* "rope" (lc_hip_rope_mode): auto, extend, plain, and stream for the methods whose pruning can
 * keep the true positions while the attention re-indexes */
extern const char *const lc_rope_names[];
extern const char *const lc_rope_names_stream[];
extern const char *const lc_heads_names[]; /* all, group (per_group 0 / 1) */

/* A named settings string, applied over the base defaults. */
typedef struct lc_settings_preset {
    const char *name;
    const char *settings; /* "key=value ..." */
    const char *help;     /* one line */
} lc_settings_preset;

/* One method's table. */
typedef struct lc_settings_table {
    const char               *method;  /* for messages: "infinitehip" */
    size_t                    size;    /* of the settings struct */
    const void               *base;    /* the base defaults presets apply over (size bytes) */
    const lc_setting         *keys;
    int32_t                   n_keys;
    const lc_settings_preset *presets;
    int32_t                   n_presets;
    const char               *default_preset; /* a name in presets */
} lc_settings_table;

/* The table of a method whose settings struct is type, from its base defaults and its keys[] and
 * presets[] arrays, with the preset "default" as the default. */
#define LC_SETTINGS_TABLE(method, type, base, keys, presets)                                      \
    {(method), sizeof(type), &(base), (keys), (int32_t)(sizeof(keys) / sizeof((keys)[0])),       \
     (presets), (int32_t)(sizeof(presets) / sizeof((presets)[0])), "default"}

/* The setting named key (or its alias), NULL if none. */
const lc_setting *lc_settings_find(const lc_settings_table *t, const char *key);
/* "chunks, k, refresh, ..." (table order) into buf. */
void lc_settings_key_names(const lc_settings_table *t, char *buf, size_t cap);
/* Set one key of settings from value. LC_ERR_INVALID_ARG naming method, key and the allowed
 * values; an unknown key: "<method> has no setting \"key\" (settings: ...)". Per-stage lists
 * (LC_COUNT_MATCH) must give as many values as the current count. */
int lc_settings_set(const lc_settings_table *t, void *settings, const char *key,
                    const char *value);
/* Base defaults, then the preset name's settings string; LC_ERR_NOT_FOUND for an unknown one
 * (the message lists the presets). */
int lc_settings_preset_apply(const lc_settings_table *t, const char *name, void *settings);
/* Apply "key=value key=value ..." (space-separated) over settings: the keys that set a count
 * first, then the others, each group in the order given (so "refresh=4,2 chunks=64,16" sets
 * two stages, then their refreshes). "preset=..." tokens are skipped (lc_attn_settings_parse
 * takes them). */
int lc_settings_apply(const lc_settings_table *t, void *settings, const char *str);
/* Every value within its range (list values up to their count): the first one outside named as
 * lc_settings_set would. */
int lc_settings_check(const lc_settings_table *t, const void *settings);
/* One line, every key=value in table order ("chunks=64,16,1 k=... tail-block=16"). */
int lc_settings_describe(const lc_settings_table *t, const void *settings, char *buf,
                         size_t cap);
/* Help text from the table: one line per key (name, values, default, help), then the presets. */
int lc_settings_help(const lc_settings_table *t, char *buf, size_t cap);

#endif
