/*
 * cmd_eval_suite.c — `longctx eval suite`: long-context quality on natural text. RULER-style
 * tasks (Hsieh et al. 2024: single needle, multi-key, multi-value, multi-hop tracing,
 * aggregation, QA), rebuilt on real prose instead of repeated filler: the haystack is the
 * Django 5.1.4 documentation (scripts/get-haystack.sh), the needles are ordinary sentences
 * about people, places and numbers in varied wording, every question is asked in plain words
 * through the model's chat template, and the answer is scored by whether it contains the
 * expected strings (the share found; F1 over the named items for aggregation). The QA task
 * asks for a default value in Django's settings reference after changing that value in the
 * document, so that the model must read it rather than remember it.
 *
 * Per (task, length): the mean score over the trials with a 95% Wilson interval; trial i of n
 * puts the answer at depth (i + u) / n (u uniform), so depths are spread evenly. Results go to
 * stdout, and with --out PREFIX to PREFIX.tsv (summary), PREFIX-trials.tsv (each trial, with
 * its depth and answer) and PREFIX.md (the table, model, method, device, commit, date);
 * scripts/plot_eval.py draws PREFIX.png from one or more summaries.
 */
#include "eval_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SUITE_DEFAULT_HAYSTACK "data/haystack/django-docs.txt"
#define SUITE_DEFAULT_QA_DOC   "data/haystack/django-settings.txt"

typedef enum suite_task {
    S_FACT,       /* one fact, asked back */
    S_MULTIKEY,   /* four facts of one kind about four people, one asked */
    S_MULTIVALUE, /* four cities of one person, all asked */
    S_TWOHOP,     /* project -> leader -> city, with a distractor chain */
    S_AGGREGATE,  /* the three birds sighted most often among 23 sightings */
    S_QA,         /* a (changed) default value in the settings reference */
    S_N_TASKS
} suite_task;

static const char *const k_suite_tasks[S_N_TASKS] = {"fact",   "multikey",  "multivalue",
                                                     "twohop", "aggregate", "qa"};

static void suite_help(void) {
    printf(
        "usage: longctx eval suite -m FILE [--tasks LIST] [--len N[,N...]] [--trials K]\n"
        "                          [--quick] [--out PREFIX] [--haystack FILE] [--qa-doc FILE]\n"
        "                          [--no-chat] [--dump-prompts FILE] [--trace] [--only LIST] [-v]\n"
        "                          [options]\n"
        "\n"
        "Long-context quality on natural text: facts stated once inside real documentation,\n"
        "asked back in plain words through the model's chat template.\n"
        "\n"
        "  --tasks LIST       comma-separated, default all:\n"
        "                       fact        one fact about a person, asked back\n"
        "                       multikey    four facts of one kind about four people, one asked\n"
        "                       multivalue  four cities one person lived in, all asked (score =\n"
        "                                   the share named)\n"
        "                       twohop      a project's leader, the leader's city (plus a\n"
        "                                   distractor chain): which city?\n"
        "                       aggregate   23 bird sightings spread over the text: the three\n"
        "                                   birds seen most often (score = F1 of the birds named)\n"
        "                       qa          the default value of a setting in Django's settings\n"
        "                                   reference, changed in the document so that it\n"
        "                                   cannot be remembered\n"
        "  --len LIST         prompt lengths in tokens, K = 1024, M = 1048576 (default 4K)\n"
        "  --trials K         trials per task and length (default 20 up to 128K, 10 beyond)\n"
        "  --quick            a smoke run: 4K tokens, 3 trials per task\n"
        "  --only LIST        run only these trial numbers (0-based, comma-separated) of each\n"
        "                     task and length; the others' prompts are still drawn, so each\n"
        "                     trial keeps the needle and depth it has in the full run (to\n"
        "                     --trace the trials a full run lost)\n"
        "  --out PREFIX       write PREFIX.tsv, PREFIX-trials.tsv and PREFIX.md\n"
        "  --haystack FILE    the text the facts are hidden in (default %s,\n"
        "                     installed by `make haystack`)\n"
        "  --qa-doc FILE      the settings reference of the qa task (default %s)\n"
        "  --no-chat          plain completion prompts (for base models without a template)\n"
        "  --dump-prompts FILE  write each trial's prompt as text, one line per trial:\n"
        "                     task, length, trial, the expected strings (joined by |), the\n"
        "                     sentence holding the answer, the prompt (tab-separated, escaped)\n"
        "  --trace            follow the sentence holding the answer (sparse methods): after\n"
        "                     each trial, run its prompt again densely with the method probed\n"
        "                     in every layer at the last 16 prompt rows (in the last prefill\n"
        "                     chunk, cut as the run cut it) and at the first decode step, and\n"
        "                     print the true attention mass on the sentence, the part\n"
        "                     of it the method reads, the share of its tokens read and, for\n"
        "                     InfiniteHiP, the share each stage keeps (stderr; PREFIX-trace.tsv\n"
        "                     with --out); InfiniteHiP also prints, per layer and stage, how\n"
        "                     many of them every prefill block and decode step keeps (each\n"
        "                     trial then runs in a context of its own: the span is a context\n"
        "                     setting)\n"
        "  -v, --verbose      print each trial's answer (stderr)\n"
        "\n%s",
        SUITE_DEFAULT_HAYSTACK, SUITE_DEFAULT_QA_DOC, gen_opts_help());
}

/* ---- haystacks: a text as paragraphs, each tokenized on first use --------------------------- */

typedef struct haystack {
    const char *path;
    char *text;
    size_t len;
    int32_t n_para;
    size_t *p_start, *p_len; /* bytes of paragraph i, with the blank line(s) after it */
    int32_t **ids;           /* NULL until tokenized */
    size_t *n_ids;
} haystack;

static void hs_free(haystack *h) {
    if (h->ids)
        for (int32_t i = 0; i < h->n_para; i++)
            free(h->ids[i]);
    free(h->ids), free(h->n_ids), free(h->p_start), free(h->p_len), free(h->text);
    memset(h, 0, sizeof *h);
}

/* Split into paragraphs at blank lines. */
static int hs_load(haystack *h, const char *path) {
    memset(h, 0, sizeof *h);
    h->path = path;
    h->text = cli_read_file("eval suite", path, &h->len);
    if (!h->text) return CLI_ERR;
    size_t cap = 1024;
    h->p_start = malloc(cap * sizeof *h->p_start);
    h->p_len = malloc(cap * sizeof *h->p_len);
    if (!h->p_start || !h->p_len) goto nomem;
    size_t at = 0;
    while (at < h->len && (h->text[at] == '\n' || h->text[at] == '\r'))
        at++;
    while (at < h->len) {
        const char *brk = NULL;
        for (size_t k = at; k + 1 < h->len; k++)
            if (h->text[k] == '\n' &&
                (h->text[k + 1] == '\n' ||
                 (h->text[k + 1] == '\r' && k + 2 < h->len && h->text[k + 2] == '\n'))) {
                brk = h->text + k;
                break;
            }
        size_t end = brk ? (size_t)(brk - h->text) : h->len;
        while (end < h->len && (h->text[end] == '\n' || h->text[end] == '\r'))
            end++;
        if ((size_t)h->n_para == cap) {
            cap *= 2;
            size_t *a = realloc(h->p_start, cap * sizeof *a);
            if (!a) goto nomem;
            h->p_start = a;
            size_t *b = realloc(h->p_len, cap * sizeof *b);
            if (!b) goto nomem;
            h->p_len = b;
        }
        h->p_start[h->n_para] = at;
        h->p_len[h->n_para] = end - at;
        h->n_para++;
        at = end;
    }
    if (h->n_para == 0) {
        fprintf(stderr, "longctx eval suite: %s: no text\n", path);
        hs_free(h);
        return CLI_ERR;
    }
    h->ids = calloc((size_t)h->n_para, sizeof *h->ids);
    h->n_ids = calloc((size_t)h->n_para, sizeof *h->n_ids);
    if (!h->ids || !h->n_ids) goto nomem;
    return CLI_OK;
nomem:
    fprintf(stderr, "longctx eval suite: out of memory reading %s\n", path);
    hs_free(h);
    return CLI_ERR;
}

/* Paragraph i's ids (tokenized now if not yet). NULL after printing a failure. */
static const int32_t *hs_para(haystack *h, const lc_tokenizer *tok, int32_t i, size_t *n) {
    if (!h->ids[i]) {
        int st = lc_tokenizer_encode(tok, h->text + h->p_start[i], h->p_len[i], false, false,
                                     &h->ids[i], &h->n_ids[i]);
        if (st != LC_OK) {
            char where[600];
            snprintf(where, sizeof where, "%s, paragraph at byte %zu", h->path, h->p_start[i]);
            cli_fail("eval suite", where, st);
            return NULL;
        }
        if (!h->ids[i]) { /* an empty encoding: keep a non-NULL marker */
            h->ids[i] = malloc(sizeof(int32_t));
            if (!h->ids[i]) return NULL;
        }
    }
    *n = h->n_ids[i];
    return h->ids[i];
}

/* ---- the entities the needles are made of ---------------------------------------------------- */

static const char *const k_first[] = {
    "Marta", "Tomasz", "Ingrid", "Kwame",  "Lucia",  "Farid",   "Helen",  "Jonas",
    "Amara", "Oskar",  "Priya",  "Mateo",  "Yuki",   "Dmitri",  "Grace",  "Rafael",
    "Sofia", "Henrik", "Nadia",  "Callum", "Leila",  "Bruno",   "Chiara", "Emeka",
    "Agnes", "Tariq",  "Rosa",   "Viktor", "Hannah", "Joaquin", "Elif",   "Patrick"};
static const char *const k_last[] = {
    "Kowalski", "Lindqvist", "Okafor", "Moreau", "Haddad",   "Brennan",  "Tanaka",
    "Novak",    "Ferreira",  "Osei",   "Larsen", "Castillo", "Weber",    "Petrov",
    "Nakamura", "Sullivan",  "Rossi",  "Mbeki",  "Andersen", "Kaplan",   "Duarte",
    "Virtanen", "Whitlock",  "Szabo",  "Abbasi", "Holloway", "Esposito", "Grieve"};
/* plain ASCII names: an answer that drops a diacritic must not be scored wrong */
static const char *const k_city[] = {
    "Lisbon",  "Tallinn",  "Valparaiso", "Lyon",      "Nairobi",    "Edinburgh", "Porto",
    "Hobart",  "Bergen",   "Montevideo", "Ljubljana", "Halifax",    "Marseille", "Tbilisi",
    "Trieste", "Winnipeg", "Cork",       "Ghent",     "Bratislava", "Dunedin",   "Salzburg",
    "Antwerp", "Vilnius",  "Galway",     "Quito",     "Aarhus",     "Zagreb",    "Bologna"};
static const char *const k_name[] = {
    "Kestrel", "Marigold", "Northern Star", "Windrose", "Halcyon", "Silver Heron", "Bluebell",
    "Ospray",  "Lodestar", "Morning Tide",  "Juniper",  "Petrel",  "Saltmarsh",    "Evening Lark"};
static const char *const k_object[] = {
    "teapot",     "rubber boot", "birdhouse",          "flour tin",   "watering can", "cigar box",
    "tool chest", "biscuit jar", "fishing tackle box", "piano stool", "wicker basket"};
static const char *const k_project[] = {"Bluebird",  "Northwind", "Copperleaf", "Foxglove",
                                        "Tidewater", "Redstone",  "Larkspur",   "Silverline",
                                        "Driftwood", "Hawthorn",  "Cloudberry", "Ironbridge"};
static const char *const k_bird[] = {"heron",  "kingfisher", "woodpecker", "cormorant", "owl",
                                     "magpie", "lapwing",    "goldfinch",  "swift",     "curlew"};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* n distinct indices below k (n <= k) */
static void pick_distinct(uint64_t *rng, int k, int n, int *out) {
    for (int i = 0; i < n; i++) {
        int v, dup;
        do {
            v = (int)(eval_rng_next(rng) % (uint64_t)k);
            dup = 0;
            for (int j = 0; j < i; j++)
                dup |= out[j] == v;
        } while (dup);
        out[i] = v;
    }
}

/* The fact templates: a sentence about a person (%1$s) holding a value (%2$s), the question
 * about it, and the kind of value. */
typedef enum vkind { V_CITY, V_NUM, V_NAME, V_OBJECT } vkind;
typedef struct fact_tmpl {
    const char *sentence, *question;
    vkind kind;
} fact_tmpl;

static const fact_tmpl k_facts[] = {
    {"%s was born in %s, though it rarely comes up at work.", "In which city was %s born?", V_CITY},
    {"The invoice that %s sent to the printing company came to %s dollars.",
     "How many dollars did the invoice that %s sent to the printing company come to?", V_NUM},
    {"The door code for the workshop that %s rents is %s, and it has not changed in years.",
     "What is the door code for the workshop that %s rents?", V_NUM},
    {"At the last harbour committee meeting, %s proposed naming the new ferry the %s.",
     "What name did %s propose for the new ferry?", V_NAME},
    {"The grandfather of %s repaired clocks in a small shop in %s for forty years.",
     "In which city did the grandfather of %s repair clocks?", V_CITY},
    {"The parcel addressed to %s was left with the neighbour at house number %s.",
     "At which house number was the parcel addressed to %s left?", V_NUM},
    {"%s keeps a spare set of house keys hidden inside an old %s in the garden shed.",
     "Where does %s keep a spare set of house keys hidden?", V_OBJECT},
    {"Every summer %s rents the same wooden cabin near %s for two weeks.",
     "Near which city does %s rent a wooden cabin every summer?", V_CITY},
};

static const char *const k_lived[] = {
    "%s lived in %s for a couple of years after finishing school.",
    "For a while, %s also had a small apartment in %s.",
    "%s once spent an entire winter working in %s.",
    "Later on, %s moved to %s for a new job.",
};

static const char *const k_sighting[] = {
    "A visitor to the nature reserve reported seeing a %s near the lake.",
    "Someone on the guided walk spotted a %s on the fence by the car park.",
    "The warden noted one more sighting of a %s that morning.",
    "A %s was reported again close to the old boathouse.",
    "On the way back, a family saw a %s in the reeds.",
};

#define MAX_INSERTS 24
#define MAX_EXPECT  4

/* One trial's texts: sentences to insert (each at a depth), the question, the expected
 * strings, and which insert holds the answer (its depth is the trial's depth). */
typedef struct trial {
    int n_ins, key, n_expect, max_tokens;
    bool f1; /* score: F1 of the expected items against every bird named (aggregate) */
    char ins[MAX_INSERTS][400];
    double depth[MAX_INSERTS];
    char question[320];
    char expect[MAX_EXPECT][48];
} trial;

static void value_of(vkind k, uint64_t *rng, int idx, char *out, size_t cap) {
    switch (k) {
    case V_CITY:
        snprintf(out, cap, "%s", k_city[idx % N_OF(k_city)]);
        break;
    case V_NAME:
        snprintf(out, cap, "%s", k_name[idx % N_OF(k_name)]);
        break;
    case V_OBJECT:
        snprintf(out, cap, "%s", k_object[idx % N_OF(k_object)]);
        break;
    case V_NUM:
        snprintf(out, cap, "%u", (unsigned)(eval_rng_next(rng) % 9000u + 1000u));
        break;
    }
}

static int kind_count(vkind k) {
    return k == V_CITY     ? N_OF(k_city)
           : k == V_NAME   ? N_OF(k_name)
           : k == V_OBJECT ? N_OF(k_object)
                           : 1 << 20;
}

static void person(int idx, char *out, size_t cap) {
    snprintf(out, cap, "%s %s", k_first[idx % N_OF(k_first)],
             k_last[(idx * 7 + idx / N_OF(k_first)) % N_OF(k_last)]);
}

/* The needles of a trial of task t whose answer sits at depth d (not qa). */
static void make_trial(suite_task t, uint64_t *rng, double d, trial *tr) {
    memset(tr, 0, sizeof *tr);
    tr->max_tokens = 32;
    int who[4];
    pick_distinct(rng, N_OF(k_first) * 5, 4, who);
    char p[4][64];
    for (int i = 0; i < 4; i++)
        person(who[i], p[i], sizeof p[i]);
    switch (t) {
    case S_FACT:
    case S_MULTIKEY: {
        const fact_tmpl *f = &k_facts[eval_rng_next(rng) % (uint64_t)N_OF(k_facts)];
        const int n = t == S_FACT ? 1 : 4;
        int vi[4];
        pick_distinct(rng, kind_count(f->kind) < 64 ? kind_count(f->kind) : 64, n, vi);
        char v[4][48];
        for (int i = 0; i < n; i++) {
            value_of(f->kind, rng, vi[i], v[i], sizeof v[i]);
            if (f->kind == V_NUM) /* distinct numbers */
                for (int j = 0; j < i; j++)
                    if (!strcmp(v[i], v[j])) value_of(f->kind, rng, 0, v[i], sizeof v[i]), j = -1;
        }
        tr->n_ins = n;
        tr->key = (int)(eval_rng_next(rng) % (uint64_t)n);
        for (int i = 0; i < n; i++) {
            snprintf(tr->ins[i], sizeof tr->ins[i], f->sentence, p[i], v[i]);
            tr->depth[i] = i == tr->key ? d : eval_rng_unit(rng);
        }
        snprintf(tr->question, sizeof tr->question, f->question, p[tr->key]);
        snprintf(tr->expect[0], sizeof tr->expect[0], "%s", v[tr->key]);
        tr->n_expect = 1;
        return;
    }
    case S_MULTIVALUE: {
        int ci[4];
        pick_distinct(rng, N_OF(k_city), 4, ci);
        tr->n_ins = tr->n_expect = 4;
        for (int i = 0; i < 4; i++) {
            snprintf(tr->ins[i], sizeof tr->ins[i], k_lived[i], p[0], k_city[ci[i]]);
            snprintf(tr->expect[i], sizeof tr->expect[i], "%s", k_city[ci[i]]);
            tr->depth[i] = i == 0 ? d : eval_rng_unit(rng);
        }
        /* the first sentence says "after finishing school": keep it first in the text */
        for (int i = 1; i < 4; i++)
            if (tr->depth[i] < tr->depth[0])
                tr->depth[i] = tr->depth[0] + (1 - tr->depth[0]) * eval_rng_unit(rng);
        snprintf(tr->question, sizeof tr->question,
                 "In which cities has %s lived? Name every city mentioned for %s.", p[0], p[0]);
        tr->max_tokens = 64;
        return;
    }
    case S_TWOHOP: {
        int pj[2], ci[2];
        pick_distinct(rng, N_OF(k_project), 2, pj);
        pick_distinct(rng, N_OF(k_city), 2, ci);
        tr->n_ins = 4;
        for (int c = 0; c < 2; c++) {
            snprintf(tr->ins[2 * c], sizeof tr->ins[0], "The %s project is led by %s.",
                     k_project[pj[c]], p[c]);
            snprintf(tr->ins[2 * c + 1], sizeof tr->ins[0],
                     "%s works from the company's office in %s.", p[c], k_city[ci[c]]);
        }
        /* chain 0 is asked: its second hop (the city) at depth d, its first hop anywhere */
        tr->key = 1;
        tr->depth[1] = d;
        tr->depth[0] = eval_rng_unit(rng);
        tr->depth[2] = eval_rng_unit(rng);
        tr->depth[3] = eval_rng_unit(rng);
        snprintf(tr->question, sizeof tr->question,
                 "In which city is the office of the person who leads the %s project?",
                 k_project[pj[0]]);
        snprintf(tr->expect[0], sizeof tr->expect[0], "%s", k_city[ci[0]]);
        tr->n_expect = 1;
        return;
    }
    case S_AGGREGATE: {
        static const int counts[8] = {7, 5, 4, 2, 2, 1, 1, 1}; /* 23 sightings */
        int bi[8];
        pick_distinct(rng, N_OF(k_bird), 8, bi);
        for (int b = 0; b < 8; b++) {
            for (int c = 0; c < counts[b]; c++) {
                const char *tmpl = k_sighting[eval_rng_next(rng) % (uint64_t)N_OF(k_sighting)];
                snprintf(tr->ins[tr->n_ins], sizeof tr->ins[0], tmpl, k_bird[bi[b]]);
                tr->depth[tr->n_ins++] = eval_rng_unit(rng);
            }
        }
        tr->depth[0] = d; /* one sighting of the most frequent bird at the trial's depth */
        tr->key = 0;
        for (int b = 0; b < 3; b++)
            snprintf(tr->expect[b], sizeof tr->expect[b], "%s", k_bird[bi[b]]);
        tr->n_expect = 3;
        tr->f1 = true;
        snprintf(tr->question, sizeof tr->question,
                 "Bird sightings are reported throughout the text above. Which three kinds of "
                 "bird were reported most often? Name only those three.");
        tr->max_tokens = 48;
        return;
    }
    case S_QA:
    case S_N_TASKS:
        return;
    }
}

/* ---- the qa task: a default value in the settings reference -----------------------------------
 */

typedef struct qa_item {
    char name[64];
    int32_t para; /* the paragraph "Default: ``...``" */
    bool numeric; /* else a quoted string */
} qa_item;

/* The settings whose default is a number or a quoted string of 4+ characters. */
static int qa_items(const haystack *doc, qa_item **out, int *n_out) {
    int cap = 0, n = 0;
    qa_item *it = NULL;
    for (int32_t i = 1; i < doc->n_para; i++) {
        const char *p = doc->text + doc->p_start[i];
        size_t l = doc->p_len[i];
        if (l < 14 || strncmp(p, "Default: ``", 11)) continue;
        const char *v = p + 11, *e = memchr(v, '`', l - 11);
        if (!e) continue;
        bool num = e > v, str = false;
        for (const char *q = v; q < e; q++)
            num &= *q >= '0' && *q <= '9';
        if (!num && e - v >= 6 && (*v == '\'' || *v == '"') && e[-1] == *v) str = true;
        if (!num && !str) continue;
        /* the setting's name: the heading "``NAME``" over a line of dashes before it */
        const char *h = doc->text + doc->p_start[i - 1];
        const char *he = memchr(h + 2, '`', doc->p_len[i - 1] > 2 ? doc->p_len[i - 1] - 2 : 0);
        if (strncmp(h, "``", 2) || !he || he - h - 2 <= 0 || he - h - 2 >= 63) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            qa_item *q = realloc(it, (size_t)cap * sizeof *q);
            if (!q) return free(it), CLI_ERR;
            it = q;
        }
        memcpy(it[n].name, h + 2, (size_t)(he - h - 2));
        it[n].name[he - h - 2] = 0;
        it[n].para = i;
        it[n].numeric = num;
        n++;
    }
    *out = it;
    *n_out = n;
    return CLI_OK;
}

/* ---- assembling a prompt --------------------------------------------------------------------- */

typedef struct builder {
    const lc_tokenizer *tok;
    haystack *hay;
    int32_t *pre, *post, *intro, *qa_intro;
    size_t n_pre, n_post, n_intro, n_qa_intro;
    bool bos;
} builder;

typedef struct piece { /* a run of ids placed at a depth of the filler */
    const int32_t *ids;
    size_t n;
    double depth;
    int idx; /* which insert */
} piece;

static int cmp_piece(const void *a, const void *b) {
    const piece *x = a, *y = b;
    return x->depth < y->depth ? -1 : x->depth > y->depth ? 1 : x->idx - y->idx;
}

/* Filler of exactly `fill` tokens from the haystack (whole paragraphs from a random one on,
 * the last one cut), the pieces placed at the paragraph boundaries nearest their depths.
 * at[idx] = where piece idx starts in out. */
static int place(builder *b, uint64_t *rng, int64_t fill, piece *pc, int n_pc, tokbuf *out,
                 int64_t *at) {
    qsort(pc, (size_t)n_pc, sizeof *pc, cmp_piece);
    haystack *h = b->hay;
    int32_t p = (int32_t)(eval_rng_next(rng) % (uint64_t)h->n_para);
    int64_t got = 0;
    int k = 0;
    while (got < fill) {
        size_t n;
        const int32_t *ids = hs_para(h, b->tok, p, &n);
        if (!ids) return CLI_ERR;
        /* the pieces whose depth is nearer this boundary than the next one */
        while (k < n_pc && (double)pc[k].depth * (double)fill <= (double)got + (double)n / 2) {
            at[pc[k].idx] = (int64_t)out->n;
            if (!tb_push(out, pc[k].ids, pc[k].n)) return CLI_ERR;
            k++;
        }
        const size_t take = (int64_t)n < fill - got ? n : (size_t)(fill - got);
        if (!tb_push(out, ids, take)) return CLI_ERR;
        got += (int64_t)take;
        p = (p + 1) % h->n_para;
    }
    for (; k < n_pc; k++) {
        at[pc[k].idx] = (int64_t)out->n;
        if (!tb_push(out, pc[k].ids, pc[k].n)) return CLI_ERR;
    }
    return CLI_OK;
}

/* The trial's question as ids, in the prompt's wording. */
static int encode_question(const builder *b, const trial *tr, bool chat, int32_t **ids, size_t *n) {
    char q[400];
    snprintf(q, sizeof q,
             chat ? "\n\nQuestion: %s Answer briefly." : "\n\nQuestion: %s\nAnswer:", tr->question);
    int st = lc_tokenizer_encode(b->tok, q, strlen(q), false, false, ids, n);
    if (st != LC_OK) cli_fail("eval suite", "tokenizing the question", st);
    return st == LC_OK ? CLI_OK : CLI_ERR;
}

/* The qa task's document: the settings reference with the asked setting's default paragraph
 * replaced (tr->expect[0] is the new value), as ids in doc; *key_at and *key_len: where the
 * replaced paragraph is in it. */
static int qa_document(builder *b, haystack *qa, const qa_item *it, trial *tr, tokbuf *doc,
                       int64_t *key_at, int64_t *key_len) {
    char para[160];
    snprintf(para, sizeof para, it->numeric ? "Default: ``%s``\n\n" : "Default: ``'%s'``\n\n",
             tr->expect[0]);
    int32_t *key = NULL;
    size_t n_key = 0;
    int st = lc_tokenizer_encode(b->tok, para, strlen(para), false, false, &key, &n_key);
    if (st != LC_OK) {
        cli_fail("eval suite", "tokenizing", st);
        return CLI_ERR;
    }
    bool ok = true;
    doc->n = 0;
    for (int32_t p = 0; p < qa->n_para && ok; p++) {
        size_t n = n_key;
        const int32_t *ids = key;
        if (p == it->para)
            *key_at = (int64_t)doc->n;
        else if (!(ids = hs_para(qa, b->tok, p, &n)))
            ok = false;
        ok = ok && tb_push(doc, ids, n);
    }
    free(key);
    *key_len = (int64_t)n_key;
    if (!ok) fprintf(stderr, "longctx eval suite: out of memory\n");
    return ok ? CLI_OK : CLI_ERR;
}

/* One trial of task t at length len with the answer at depth d: its texts in *tr, its prompt
 * in *prompt (doc is scratch), and where the sentence holding the answer is in the prompt. */
static int build_prompt(builder *b, haystack *qa, const qa_item *qi, int n_qi, suite_task t,
                        long long len, double d, bool chat, uint64_t *rng, trial *tr, tokbuf *doc,
                        tokbuf *prompt, int64_t *key_at, int64_t *key_len) {
    int32_t *ins_ids[MAX_INSERTS] = {0}, *q_ids = NULL;
    size_t ins_n[MAX_INSERTS] = {0}, q_n = 0;
    int64_t doc_key = 0;
    int rc = CLI_ERR;
    tokbuf filler = {0};
    if (t == S_QA) {
        memset(tr, 0, sizeof *tr);
        const qa_item *it = &qi[eval_rng_next(rng) % (uint64_t)n_qi];
        if (it->numeric) {
            snprintf(tr->expect[0], sizeof tr->expect[0], "%u",
                     (unsigned)(eval_rng_next(rng) % 900000u + 100000u));
        } else { /* a made-up lower-case name */
            snprintf(tr->expect[0], sizeof tr->expect[0], "%s_%s",
                     k_project[eval_rng_next(rng) % (uint64_t)N_OF(k_project)],
                     k_bird[eval_rng_next(rng) % (uint64_t)N_OF(k_bird)]);
            tr->expect[0][0] = (char)(tr->expect[0][0] - 'A' + 'a');
        }
        snprintf(tr->question, sizeof tr->question,
                 "According to the settings reference above, what is the default value of the "
                 "%s setting?",
                 it->name);
        tr->n_expect = tr->n_ins = 1;
        tr->max_tokens = 32;
        tr->depth[0] = d;
        if (qa_document(b, qa, it, tr, doc, &doc_key, key_len) != CLI_OK) goto out;
    } else {
        make_trial(t, rng, d, tr);
        for (int k = 0; k < tr->n_ins; k++) {
            char sent[416];
            snprintf(sent, sizeof sent, "%s\n\n", tr->ins[k]);
            int st = lc_tokenizer_encode(b->tok, sent, strlen(sent), false, false, &ins_ids[k],
                                         &ins_n[k]);
            if (st != LC_OK) {
                cli_fail("eval suite", "tokenizing", st);
                goto out;
            }
        }
        *key_len = (int64_t)ins_n[tr->key];
    }
    if (encode_question(b, tr, chat, &q_ids, &q_n) != CLI_OK) goto out;
    const int32_t *intro = t == S_QA ? b->qa_intro : b->intro;
    const size_t nintro = t == S_QA ? b->n_qa_intro : b->n_intro;
    prompt->n = 0;
    bool ok = true;
    if (b->bos) {
        const int32_t bos = lc_tokenizer_bos(b->tok);
        ok = tb_push(prompt, &bos, 1);
    }
    ok = ok && tb_push(prompt, b->pre, b->n_pre) && tb_push(prompt, intro, nintro);
    const int64_t base = (int64_t)prompt->n;
    const int64_t room = (int64_t)len - base - (int64_t)(q_n + b->n_post); /* the text's share */
    int64_t ins_tok = 0;
    for (int k = 0; k < tr->n_ins; k++)
        ins_tok += t == S_QA ? (int64_t)doc->n : (int64_t)ins_n[k];
    if (room < ins_tok && t != S_QA) {
        fprintf(stderr,
                "longctx eval suite: --len %lld is too short for the %s task (its fixed "
                "text takes %lld tokens)\n",
                len, k_suite_tasks[t], (long long)(len - room + ins_tok));
        goto out;
    }
    if (room < 64) {
        fprintf(stderr, "longctx eval suite: --len %lld leaves no room for text\n", len);
        goto out;
    }
    if (t == S_QA && (int64_t)doc->n >= room) {
        /* a prompt shorter than the reference: a window of it with the setting at depth d */
        int64_t s = doc_key - (int64_t)(d * (double)(room - *key_len));
        if (s < 0) s = 0;
        if (s + room > (int64_t)doc->n) s = (int64_t)doc->n - room;
        ok = ok && tb_push(prompt, doc->ids + s, (size_t)room);
        *key_at = base + doc_key - s;
        tr->depth[0] = (double)(doc_key - s) / (double)room;
    } else if (ok) {
        piece pc[MAX_INSERTS];
        int n_pc = 0;
        if (t == S_QA)
            pc[n_pc++] = (piece){doc->ids, doc->n, d, 0};
        else
            for (int k = 0; k < tr->n_ins; k++)
                pc[n_pc++] = (piece){ins_ids[k], ins_n[k], tr->depth[k], k};
        int64_t at[MAX_INSERTS];
        ok = ok && place(b, rng, room - ins_tok, pc, n_pc, &filler, at) == CLI_OK &&
             tb_push(prompt, filler.ids, filler.n);
        if (ok) {
            *key_at = base + at[tr->key] + (t == S_QA ? doc_key : 0);
            if (t != S_AGGREGATE) /* the depth the answer landed at */
                tr->depth[tr->key] = (double)(*key_at - base) / (double)room;
        }
    }
    ok = ok && tb_push(prompt, q_ids, q_n) && tb_push(prompt, b->post, b->n_post);
    if (!ok) {
        fprintf(stderr, "longctx eval suite: out of memory\n");
        goto out;
    }
    rc = CLI_OK;
out:
    for (int k = 0; k < MAX_INSERTS; k++)
        free(ins_ids[k]);
    free(q_ids), free(filler.ids);
    return rc;
}

/* ids as text (the tokens' bytes), escaped onto one line of f */
static bool write_text(FILE *f, const lc_tokenizer *tok, const int32_t *ids, size_t n) {
    size_t cap = 4096, len = 0;
    char *raw = malloc(cap);
    if (!raw) return false;
    for (size_t i = 0; i < n; i++) {
        size_t nb = 0;
        const char *b = lc_tokenizer_token_bytes(tok, ids[i], &nb);
        if (!b) nb = 0;
        if (len + nb > cap) {
            while (len + nb > cap)
                cap *= 2;
            char *r = realloc(raw, cap);
            if (!r) return free(raw), false;
            raw = r;
        }
        memcpy(raw + len, b, nb);
        len += nb;
    }
    const size_t ecap = 4 * len + 4;
    char *esc = malloc(ecap);
    if (!esc) return free(raw), false;
    lc_text_escape(esc, ecap, raw, len);
    fputs(esc, f);
    free(esc), free(raw);
    return true;
}

/* ---- scoring ----------------------------------------------------------------------------------
 */

static bool contains_ci(const char *hay, const char *needle) {
    const size_t n = strlen(needle);
    for (const char *h = hay; *h; h++)
        if (!strncasecmp(h, needle, n)) return true;
    return false;
}

static double score_answer(const trial *t, const char *ans) {
    if (!ans) return 0;
    int found = 0;
    for (int k = 0; k < t->n_expect; k++)
        found += contains_ci(ans, t->expect[k]);
    if (!t->f1) return (double)found / t->n_expect;
    int named = 0;
    for (int k = 0; k < N_OF(k_bird); k++)
        named += contains_ci(ans, k_bird[k]);
    if (found == 0 || named == 0) return 0;
    const double prec = (double)found / named, rec = (double)found / t->n_expect;
    return 2 * prec * rec / (prec + rec);
}

/* 95% Wilson interval of a mean score in [0, 1] over n trials */
static void wilson(double mean, int n, double *lo, double *hi) {
    const double z = 1.96, z2 = z * z, nn = n > 0 ? n : 1;
    const double c = (mean + z2 / (2 * nn)) / (1 + z2 / nn);
    const double h = z * sqrt(mean * (1 - mean) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
    *lo = c - h < 0 ? 0 : c - h;
    *hi = c + h > 1 ? 1 : c + h;
}

static bool parse_lens(const char *s, long long *lens, int *n, int max) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v <= 0) goto bad;
        if (*end == 'K' || *end == 'k')
            v *= 1024, end++;
        else if (*end == 'M' || *end == 'm')
            v *= 1048576, end++;
        if (*end && *end != ',') goto bad;
        if (v < 512 || v > (1LL << 30)) {
            fprintf(stderr, "longctx eval suite: --len %lld: out of range [512, 2^30]\n", v);
            return false;
        }
        if (*n == max) {
            fprintf(stderr, "longctx eval suite: --len: at most %d lengths\n", max);
            return false;
        }
        lens[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    if (*n) return true;
bad:
    fprintf(stderr, "longctx eval suite: --len '%s': expected lengths like 4096,16K,1M\n", s);
    return false;
}

static void len_label(long long n, char *buf, size_t cap) {
    if (n % 1048576 == 0)
        snprintf(buf, cap, "%lldM", n / 1048576);
    else if (n % 1024 == 0)
        snprintf(buf, cap, "%lldK", n / 1024);
    else
        snprintf(buf, cap, "%lld", n);
}

typedef struct cell {
    double sum;
    int n;
} cell;

/* a cell's mean score and its 95% interval */
static double cell_stats(const cell *c, double *lo, double *hi) {
    const double mean = c->n ? c->sum / c->n : 0;
    wilson(mean, c->n, lo, hi);
    return mean;
}

/* trials per task at a length: --trials, else 20 up to 128K and 10 beyond */
static long long trials_at(long long trials, long long len) {
    return trials ? trials : len <= 131072 ? 20 : 10;
}

#define MAX_LENS 16
#define MAX_ONLY 4096 /* --only: trial numbers below this */

/* --only LIST: trial numbers, 0-based, comma-separated, each below MAX_ONLY. */
static bool parse_only(const char *v, bool *only) {
    const char *p = v;
    bool any = false;
    while (*p) {
        char *end = NULL;
        errno = 0;
        const long long t = strtoll(p, &end, 10);
        if (end == p || errno || t < 0 || t >= MAX_ONLY || (*end && *end != ',')) {
            fprintf(stderr, "longctx eval suite: --only: '%s' is not a list of trial numbers "
                    "0 .. %d\n", v, MAX_ONLY - 1);
            return false;
        }
        only[t] = any = true;
        p = *end ? end + 1 : end;
    }
    if (!any) fprintf(stderr, "longctx eval suite: --only: empty list\n");
    return any;
}

/* --trace: the trial's prompt again, densely, with the method probed at two forwards: the
 * prompt's last prefill chunk, cut as the run cut it, measured on its last 16 rows (the
 * question and the template after it, as prefill selects for them) and the first decode step (the
 * greedy next token, as decoding selects for it). Per layer: the true attention mass on the
 * answer's sentence, the part of it the method reads, the share of its tokens read, and for
 * InfiniteHiP the share each stage keeps (stderr, and PREFIX-trace.tsv with --out). */
static int trace_trial(lc_model *m, const gen_opts *o, const tokbuf *prompt, int64_t key_at,
                       int64_t key_len, const char *task, long long len, long long trial, FILE *f) {
    lc_model_info info;
    lc_model_get_info(m, &info);
    lc_attn_fidelity *res = calloc((size_t)info.n_layer, sizeof *res);
    if (!res) {
        fprintf(stderr, "longctx eval suite: out of memory\n");
        return CLI_ERR;
    }
    lc_context_params cp = lc_context_default_params();
    gen_context_attn(o, &cp);
    for (int pass = 0; pass < 2; pass++) {
        const char *where = pass ? "decode" : "prompt";
        lc_fidelity_params fp = lc_fidelity_default_params();
        fp.n_rows = 16;
        fp.decode = pass == 1;
        fp.chunks_as_generation = true; /* the question's block as the run formed it */
        fp.n_batch = (int32_t)o->n_batch;
        fp.span_begin = key_at;
        fp.span_end = key_at + key_len;
        cli_progress pr;
        cli_progress_begin(&pr, pass ? "trace: dense pass, first decode step probed"
                                     : "trace: dense pass, last 16 rows probed");
        fp.progress = eval_progress_tokens;
        fp.progress_user = &pr;
        int st = lc_eval_attn_fidelity(m, prompt->ids, (int64_t)prompt->n, &cp, &fp, res);
        cli_progress_end(&pr);
        if (st != LC_OK) {
            cli_fail("eval suite", "--trace", st);
            free(res);
            return CLI_ERR;
        }
        fprintf(stderr,
                "trace: %s %lld trial %lld, answer tokens [%lld, %lld), %s: per layer the true "
                "attention mass on them, the part the method reads, their share read, top-%d "
                "recall\n",
                task, len, trial, (long long)key_at, (long long)(key_at + key_len),
                pass ? "first decode step" : "last 16 prompt rows", fp.top_k);
        for (int32_t l = 0; l < info.n_layer; l++) {
            const lc_attn_fidelity *r = &res[l];
            char stages[96] = "";
            for (int32_t i = 0, at = 0; i < r->n_stages && at < (int)sizeof stages; i++)
                at += snprintf(stages + at, sizeof stages - (size_t)at, " s%d %5.1f%%", i + 1,
                               100 * r->span_stage_read[i]);
            fprintf(stderr,
                    "trace: %s layer %2d %s mass %.4f read %.4f (%5.1f%%) tokens read %5.1f%% "
                    "recall %.3f%s\n",
                    where, l, r->sparse ? "sparse" : "dense ", r->span_mass, r->span_mass_read,
                    r->span_mass > 0 ? 100 * r->span_mass_read / r->span_mass : 0,
                    100 * r->span_read, r->recall, stages);
            if (f) {
                fprintf(f, "%s\t%lld\t%lld\t%s\t%d\t%d\t%d\t%.6g\t%.6g\t%.4f\t%.4f", task, len,
                        trial, where, r->rows, l, r->sparse, r->span_mass, r->span_mass_read,
                        r->span_read, r->recall);
                for (int32_t i = 0; i < LC_HIP_MAX_STAGES; i++)
                    fprintf(f, i < r->n_stages ? "\t%.4f" : "\t", r->span_stage_read[i]);
                fputc('\n', f);
            }
        }
    }
    if (f) fflush(f);
    free(res);
    return CLI_OK;
}

int cmd_eval_suite(int argc, char **argv) {
    gen_opts o;
    gen_opts_default(&o);
    long long lens[MAX_LENS] = {4096};
    int n_lens = 1;
    long long trials = 0; /* 0: 20 up to 128K, 10 beyond */
    bool want[S_N_TASKS], chat = true, verbose = false, trace = false, quick = false;
    bool only[MAX_ONLY] = {false}, only_given = false;
    const char *out_prefix = NULL, *dump_path = NULL, *hay_path = SUITE_DEFAULT_HAYSTACK,
               *qa_path = SUITE_DEFAULT_QA_DOC;
    bool lens_given = false;
    for (int t = 0; t < S_N_TASKS; t++)
        want[t] = true;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = gen_opts_parse(&o, "eval suite", argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            suite_help();
            return CLI_OK;
        } else if (!strcmp(a, "--len")) {
            if (!(v = cli_value("eval suite", argc, argv, &i)) ||
                !parse_lens(v, lens, &n_lens, MAX_LENS))
                return CLI_USAGE;
            lens_given = true;
        } else if (!strcmp(a, "--trials")) {
            if (!(v = cli_value("eval suite", argc, argv, &i)) ||
                !cli_int("eval suite", a, v, 1, 100000, &trials))
                return CLI_USAGE;
        } else if (!strcmp(a, "--tasks")) {
            if (!(v = cli_value("eval suite", argc, argv, &i))) return CLI_USAGE;
            for (int t = 0; t < S_N_TASKS; t++)
                want[t] = false;
            char *copy = strdup(v), *save = NULL;
            if (!copy) return CLI_ERR;
            bool any = false;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int found = -1;
                for (int t = 0; t < S_N_TASKS; t++)
                    if (!strcmp(tok, k_suite_tasks[t])) found = t;
                if (found < 0) {
                    fprintf(stderr,
                            "longctx eval suite: --tasks: unknown task '%s' (known: fact, "
                            "multikey, multivalue, twohop, aggregate, qa)\n",
                            tok);
                    free(copy);
                    return CLI_USAGE;
                }
                want[found] = any = true;
            }
            free(copy);
            if (!any) {
                fprintf(stderr, "longctx eval suite: --tasks: empty list\n");
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--quick")) {
            quick = true;
        } else if (!strcmp(a, "--out")) {
            if (!(out_prefix = cli_value("eval suite", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--haystack")) {
            if (!(hay_path = cli_value("eval suite", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--qa-doc")) {
            if (!(qa_path = cli_value("eval suite", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--dump-prompts")) {
            if (!(dump_path = cli_value("eval suite", argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--no-chat")) {
            chat = false;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else if (!strcmp(a, "--only")) {
            if (!(v = cli_value("eval suite", argc, argv, &i)) || !parse_only(v, only))
                return CLI_USAGE;
            only_given = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else {
            cli_unknown_option("eval suite", a);
            return CLI_USAGE;
        }
    }
    if (quick) {
        if (!lens_given) lens[0] = 4096, n_lens = 1;
        if (!trials) trials = 3;
    }
    if (!gen_opts_check(&o, "eval suite")) return CLI_USAGE;
    o.sampling.temperature = 0.0f; /* greedy: the answers are reproducible */

    int rc = CLI_ERR;
    lc_model *m = NULL;
    lc_context *ctx = NULL;
    haystack hay = {0}, qa = {0};
    qa_item *qi = NULL;
    int n_qi = 0;
    builder bd = {0};
    tokbuf prompt = {0}, doc = {0};
    FILE *f_sum = NULL, *f_tr = NULL, *f_md = NULL, *f_dump = NULL, *f_trace = NULL;
    cell cells[S_N_TASKS][MAX_LENS];
    memset(cells, 0, sizeof cells);
    char *path = NULL;

    if (hs_load(&hay, hay_path) != CLI_OK) {
        if (!strcmp(hay_path, SUITE_DEFAULT_HAYSTACK))
            fprintf(stderr, "longctx eval suite: the default haystack is installed by `make "
                            "haystack` (or give one with --haystack FILE)\n");
        return CLI_ERR;
    }
    if (want[S_QA]) {
        if (hs_load(&qa, qa_path) != CLI_OK) {
            if (!strcmp(qa_path, SUITE_DEFAULT_QA_DOC))
                fprintf(stderr, "longctx eval suite: the qa task's document is installed by "
                                "`make haystack` (or leave qa out of --tasks)\n");
            goto done;
        }
        if (qa_items(&qa, &qi, &n_qi) != CLI_OK) goto done;
        if (n_qi < 1) {
            fprintf(stderr,
                    "longctx eval suite: %s: no setting with a number or quoted string "
                    "as its \"Default: ``...``\" paragraph (the qa task needs Django's settings "
                    "reference)\n",
                    qa_path);
            goto done;
        }
    }
    if ((rc = gen_load("eval suite", &o, &m)) != CLI_OK) goto done;
    rc = CLI_ERR;
    bd.tok = lc_model_tokenizer(m);
    bd.hay = &hay;
    bd.bos = lc_tokenizer_add_bos(bd.tok);
    if (chat && eval_chat_split("eval suite", m, o.chat_template, "--no-chat", &bd.pre, &bd.n_pre,
                                &bd.post, &bd.n_post))
        goto done;
    {
        const char *intro = "Below is a long text. Read it carefully; a question about it "
                            "follows.\n\n";
        const char *qa_intro = "Below is a long text that includes a reference of settings "
                               "and their default values. Read it carefully; a question about "
                               "it follows.\n\n";
        int st =
            lc_tokenizer_encode(bd.tok, intro, strlen(intro), false, false, &bd.intro, &bd.n_intro);
        if (st == LC_OK)
            st = lc_tokenizer_encode(bd.tok, qa_intro, strlen(qa_intro), false, false, &bd.qa_intro,
                                     &bd.n_qa_intro);
        if (st != LC_OK) {
            cli_fail("eval suite", "tokenizing", st);
            goto done;
        }
    }
    /* the haystack must hold the longest prompt without repeating itself */
    long long max_len = 0;
    for (int li = 0; li < n_lens; li++)
        max_len = lens[li] > max_len ? lens[li] : max_len;
    {
        int64_t have = 0;
        for (int32_t i = 0; i < hay.n_para && have < max_len; i++) {
            size_t n;
            if (!hs_para(&hay, bd.tok, i, &n)) goto done;
            have += (int64_t)n;
        }
        if (have < max_len) {
            fprintf(stderr,
                    "longctx eval suite: %s has %lld tokens, fewer than --len %lld: the "
                    "haystack would repeat itself\n",
                    hay_path, (long long)have, max_len);
            goto done;
        }
    }
    if (gen_context("eval suite", &o, m, max_len + 64, &ctx) != CLI_OK) goto done;

    lc_model_info info;
    lc_model_get_info(m, &info);
    char mname[sizeof info.name], dev[256], desc[600], commit[64], date[32];
    lc_text_escape(mname, sizeof mname, info.name, strlen(info.name));
    if (lc_model_device_name(m, dev, sizeof dev) != LC_OK) snprintf(dev, sizeof dev, "unknown");
    gen_attn_describe(&o, desc, sizeof desc);
    cli_commit_name(commit, sizeof commit);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    const char *method = o.attn;

    if (out_prefix) {
        const size_t pl = strlen(out_prefix) + 16;
        path = malloc(pl);
        if (!path) goto done;
        snprintf(path, pl, "%s.tsv", out_prefix);
        if (!(f_sum = fopen(path, "w"))) goto cannot_write;
        snprintf(path, pl, "%s-trials.tsv", out_prefix);
        if (!(f_tr = fopen(path, "w"))) goto cannot_write;
        snprintf(path, pl, "%s.md", out_prefix);
        if (!(f_md = fopen(path, "w"))) goto cannot_write;
        if (trace && !gen_attn_dense(&o)) {
            snprintf(path, pl, "%s-trace.tsv", out_prefix);
            if (!(f_trace = fopen(path, "w"))) goto cannot_write;
            fprintf(f_trace, "task\tlen\ttrial\trows\tn_rows\tlayer\tsparse\tspan_mass\t"
                             "span_mass_read\tspan_read\trecall");
            for (int32_t i = 0; i < LC_HIP_MAX_STAGES; i++)
                fprintf(f_trace, "\tstage%d_read", i + 1);
            fputc('\n', f_trace);
        }
        fprintf(f_sum, "model\tmethod\ttask\tlen\ttrials\tmean\tci_lo\tci_hi\n");
        fprintf(f_tr, "task\tlen\ttrial\tdepth\tn_prompt\tscore\tanswer\n");
    }

    if (dump_path && !(f_dump = fopen(dump_path, "w"))) {
        fprintf(stderr, "longctx eval suite: cannot write %s\n", dump_path);
        goto done;
    }
    int n_tasks = 0;
    for (int t = 0; t < S_N_TASKS; t++)
        n_tasks += want[t];
    int64_t total = 0, total_trials = 0; /* progress in prompt tokens: a 1M trial is not a 4K one */
    for (int li = 0; li < n_lens; li++) {
        long long nt = trials_at(trials, lens[li]);
        if (only_given) { /* only the trials that run */
            long long k = 0;
            for (long long ti = 0; ti < nt && ti < MAX_ONLY; ti++)
                k += only[ti];
            nt = k;
        }
        total += n_tasks * nt * lens[li];
        total_trials += n_tasks * nt;
    }
    printf("longctx eval suite: %s, attention %s, %s, %s prompts\n", mname, desc, dev,
           chat ? "chat" : "completion");
    printf("%-11s %8s %7s %7s  %s\n", "task", "len", "trials", "score", "95% interval");
    fflush(stdout);
    cli_progress pr;
    cli_progress_begin(&pr, "eval suite");
    int64_t done_tok = 0, done_trials = 0;
    char plabel[64];
    uint64_t rng = 0x5EEDC0DEULL ^ (o.sampling.seed * 0x9E3779B97F4A7C15ULL);
    if (!rng) rng = 1;
    for (int li = 0; li < n_lens; li++) {
        const long long len = lens[li];
        const long long nt = trials_at(trials, len);
        char ll[32];
        len_label(len, ll, sizeof ll);
        for (int t = 0; t < S_N_TASKS; t++) {
            if (!want[t]) continue;
            for (long long ti = 0; ti < nt; ti++) {
                const double d = ((double)ti + eval_rng_unit(&rng)) / (double)nt;
                trial tr;
                int64_t key_at = 0, key_len = 0;
                if (build_prompt(&bd, &qa, qi, n_qi, (suite_task)t, len, d, chat, &rng, &tr, &doc,
                                 &prompt, &key_at, &key_len) != CLI_OK)
                    goto done;
                if (f_dump) {
                    fprintf(f_dump, "%s\t%lld\t%lld\t", k_suite_tasks[t], len, ti);
                    for (int k = 0; k < tr.n_expect; k++)
                        fprintf(f_dump, "%s%s", k ? "|" : "", tr.expect[k]);
                    fputc('\t', f_dump);
                    bool w = write_text(f_dump, bd.tok, prompt.ids + key_at, (size_t)key_len);
                    fputc('\t', f_dump);
                    w = w && write_text(f_dump, bd.tok, prompt.ids, prompt.n);
                    fputc('\n', f_dump);
                    if (!w || fflush(f_dump) != 0) {
                        fprintf(stderr, "longctx eval suite: cannot write %s\n", dump_path);
                        goto done;
                    }
                }
                if (only_given && (ti >= MAX_ONLY || !only[ti])) continue;
                lc_request req = {.prompt = prompt.ids,
                                  .n_prompt = prompt.n,
                                  .max_tokens = tr.max_tokens,
                                  .sampling = o.sampling};
                if (trace) { /* InfiniteHiP's diagnosis (attn/infinitehip.c): the traced span
                              * is a context parameter, so this trial gets a context of its own
                              * (and trace_trial's probes the same span) */
                    o.trace_begin = key_at;
                    o.trace_end   = key_at + key_len;
                    if (eval_context_renew("eval suite", &o, m, max_len + 64, &ctx, NULL) != CLI_OK)
                        goto done;
                    fprintf(stderr, "trace: %s len %zu trial %lld depth %.3f answer tokens "
                            "[%lld,%lld)", k_suite_tasks[t], prompt.n, ti, tr.depth[tr.key],
                            (long long)key_at, (long long)(key_at + key_len));
                    /* the sentence token by token, to read the hip-trace lines' masks against */
                    fputs(":", stderr);
                    for (int64_t k = 0; k < key_len && k < 64; k++) {
                        fputc('|', stderr);
                        write_text(stderr, bd.tok, prompt.ids + key_at + k, 1);
                    }
                    fputs("|\n", stderr);
                }
                gen_result res;
                if (gen_run("eval suite", ctx, &req, false, 1LL << 40, &res) != CLI_OK) {
                    free(res.text);
                    goto done;
                }
                const double sc = score_answer(&tr, res.text);
                cells[t][li].sum += sc;
                cells[t][li].n++;
                char ans[1024];
                lc_text_escape(ans, sizeof ans, res.text ? res.text : "", res.text ? res.len : 0);
                if (verbose)
                    fprintf(stderr, "%s %s trial %lld depth %.2f expect %s%s: %.2f <- \"%s\"\n",
                            k_suite_tasks[t], ll, ti, tr.depth[tr.key], tr.expect[0],
                            tr.n_expect > 1 ? ",..." : "", sc, ans);
                if (f_tr) {
                    for (char *c = ans; *c; c++)
                        if (*c == '\t') *c = ' ';
                    fprintf(f_tr, "%s\t%lld\t%lld\t%.4f\t%zu\t%.4f\t%s\n", k_suite_tasks[t], len,
                            ti, tr.depth[tr.key], prompt.n, sc, ans);
                    fflush(f_tr);
                }
                free(res.text);
                if (trace && !gen_attn_dense(&o) &&
                    trace_trial(m, &o, &prompt, key_at, key_len, k_suite_tasks[t], len, ti,
                                f_trace) != CLI_OK)
                    goto done;
                done_tok += len;
                snprintf(plabel, sizeof plabel, "eval suite: trial %lld/%lld,",
                         (long long)++done_trials, (long long)total_trials);
                pr.label = plabel;
                cli_progress_update(&pr, done_tok, total, "tokens");
            }
            const cell *c = &cells[t][li];
            double lo, hi;
            const double mean = cell_stats(c, &lo, &hi);
            cli_progress_end(&pr);
            printf("%-11s %8s %7d %6.1f%%  [%.1f, %.1f]\n", k_suite_tasks[t], ll, c->n, 100 * mean,
                   100 * lo, 100 * hi);
            fflush(stdout);
            if (f_sum) {
                fprintf(f_sum, "%s\t%s\t%s\t%lld\t%d\t%.4f\t%.4f\t%.4f\n", mname, method,
                        k_suite_tasks[t], len, c->n, mean, lo, hi);
                fflush(f_sum);
            }
        }
    }
    cli_progress_end(&pr);
    if (f_md) {
        fprintf(f_md, "# longctx eval suite: %s, %s\n\n", mname, method);
        fprintf(f_md,
                "- model: %s (%s)\n- attention: %s\n- device: %s\n- commit %s, %s\n"
                "- prompts: %s; haystack %s; greedy decoding\n- score: mean over trials, "
                "[95%% Wilson interval], in %%\n\n",
                mname, o.model, desc, dev, commit, date, chat ? "chat template" : "completion",
                hay_path);
        fprintf(f_md, "| task |");
        for (int li = 0; li < n_lens; li++) {
            char ll[32];
            len_label(lens[li], ll, sizeof ll);
            fprintf(f_md, " %s |", ll);
        }
        fprintf(f_md, "\n|---|");
        for (int li = 0; li < n_lens; li++)
            fprintf(f_md, "---|");
        fprintf(f_md, "\n");
        for (int t = 0; t < S_N_TASKS; t++) {
            if (!want[t]) continue;
            fprintf(f_md, "| %s |", k_suite_tasks[t]);
            for (int li = 0; li < n_lens; li++) {
                const cell *c = &cells[t][li];
                double lo, hi;
                const double mean = cell_stats(c, &lo, &hi);
                fprintf(f_md, " %.0f [%.0f–%.0f] (n=%d) |", 100 * mean, 100 * lo, 100 * hi, c->n);
            }
            fprintf(f_md, "\n");
        }
    }
    rc = CLI_OK;
    goto done;
cannot_write:
    fprintf(stderr, "longctx eval suite: cannot write %s\n", path);
done:
    if (f_sum) fclose(f_sum);
    if (f_tr) fclose(f_tr);
    if (f_dump) fclose(f_dump);
    if (f_trace) fclose(f_trace);
    if (f_md && fclose(f_md) != 0) rc = CLI_ERR;
    free(path);
    free(prompt.ids), free(doc.ids);
    free(bd.pre), free(bd.post), free(bd.intro), free(bd.qa_intro);
    free(qi);
    hs_free(&hay), hs_free(&qa);
    lc_context_free(ctx);
    lc_model_free(m);
    return rc;
}
