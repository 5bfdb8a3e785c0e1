/*
 * test_chat.c — chat templates: detection on real template strings, names, and formatting
 * checked against tests/fixtures/tokenizer/chat.txt (rendered from the models' Jinja
 * templates by scripts/gen_tokenizer_fixtures.py), including SmolLM2's default system prompt.
 */
#include "format/chat.h"
#include "format/gguf.h"
#include "test_util.h"

#include <string.h>

#define FIX LC_SOURCE_DIR "/tests/fixtures/tokenizer/"

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = '\0';
    fclose(f);
    return p;
}

static int hexval(int c) {
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

/* Decode a hex string (up to whitespace) into a malloc'd NUL-terminated string. */
static char *unhex(const char *h) {
    size_t n = 0;
    while (h[n] && h[n] != '\n' && h[n] != ' ' && h[n] != '\r')
        n++;
    char *s = malloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; i++)
        s[i] = (char)(hexval(h[2 * i]) * 16 + hexval(h[2 * i + 1]));
    s[n / 2] = '\0';
    return s;
}

static void test_names(void) {
    lc_chat_template t;
    CHECK(lc_chat_template_from_name("chatml", &t) == LC_OK && t == LC_CHAT_TEMPLATE_CHATML);
    CHECK(lc_chat_template_from_name("llama3", &t) == LC_OK && t == LC_CHAT_TEMPLATE_LLAMA3);
    CHECK(lc_chat_template_from_name("mistral", &t) == LC_OK && t == LC_CHAT_TEMPLATE_MISTRAL);
    CHECK(lc_chat_template_from_name("gemma", &t) == LC_OK && t == LC_CHAT_TEMPLATE_GEMMA);
    CHECK(lc_chat_template_from_name("phi3", &t) == LC_OK && t == LC_CHAT_TEMPLATE_PHI3);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_GEMMA), "gemma") == 0);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_PHI3), "phi3") == 0);
    CHECK(lc_chat_template_from_name("llama3.1", &t) == LC_OK && t == LC_CHAT_TEMPLATE_LLAMA31);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_LLAMA31), "llama3.1") == 0);
    CHECK(lc_chat_template_from_name("vicuna", &t) == LC_ERR_NOT_FOUND);
    CHECKF(strstr(lc_last_error(), "chatml") && strstr(lc_last_error(), "llama3") &&
               strstr(lc_last_error(), "mistral"),
           "message should list valid names: %s", lc_last_error());
    CHECK(lc_chat_template_from_name("", &t) == LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_from_name("ChatML", &t) == LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_from_name(NULL, &t) == LC_ERR_INVALID_ARG);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_CHATML), "chatml") == 0);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_LLAMA3), "llama3") == 0);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_MISTRAL), "mistral") == 0);
    CHECK(strcmp(lc_chat_template_name(LC_CHAT_TEMPLATE_NONE), "none") == 0);
}

static void test_detect(void) {
    static const struct {
        const char *file;
        lc_chat_template want;
    } cases[] = {
        {"template_smollm2.jinja", LC_CHAT_TEMPLATE_CHATML},
        {"template_qwen25.jinja", LC_CHAT_TEMPLATE_CHATML},
        {"template_llama3.jinja", LC_CHAT_TEMPLATE_LLAMA3},
        {"template_mistral.jinja", LC_CHAT_TEMPLATE_MISTRAL},
        {"../chat/template_gemma2.jinja", LC_CHAT_TEMPLATE_GEMMA},
        {"../chat/template_gemma3.jinja", LC_CHAT_TEMPLATE_GEMMA},
        {"../chat/template_phi3.jinja", LC_CHAT_TEMPLATE_PHI3},
        {"../chat/template_phi35.jinja", LC_CHAT_TEMPLATE_PHI3},
        {"../chat/template_llama31.jinja", LC_CHAT_TEMPLATE_LLAMA31},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, FIX "%s", cases[i].file);
        char *j = read_file(path);
        CHECKF(j != NULL, "cannot read %s", path);
        if (!j) continue;
        lc_chat_template t = LC_CHAT_TEMPLATE_NONE;
        int rc = lc_chat_template_detect(j, &t);
        CHECKF(rc == LC_OK && t == cases[i].want, "%s: rc %d template %d", cases[i].file, rc, t);
        free(j);
    }
    lc_chat_template t;
    CHECK(lc_chat_template_detect("{{ messages }}", &t) == LC_ERR_NOT_FOUND);
    CHECKF(strstr(lc_last_error(), "--chat-template") != NULL, "%s", lc_last_error());
    CHECK(lc_chat_template_detect("", &t) == LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_detect(NULL, &t) == LC_ERR_NOT_FOUND);
    CHECKF(strstr(lc_last_error(), "--chat-template") != NULL, "%s", lc_last_error());
    /* phi4 (<|im_sep|>) is ChatML-like but a different format */
    CHECK(lc_chat_template_detect("<|im_start|>{{role}}<|im_sep|>", &t) == LC_ERR_NOT_FOUND);
    /* Llama-2 <<SYS>> is not the mistral format */
    CHECK(lc_chat_template_detect("[INST] <<SYS>>\\n{{sys}}\\n<</SYS>>", &t) == LC_ERR_NOT_FOUND);
    /* Mistral v0.1/v0.2 write '[INST] ' + content + ' [/INST]'; v0.3 drops the space before
     * [/INST], v7 both and adds [SYSTEM_PROMPT]: refused (named by --chat-template instead) */
    CHECK(lc_chat_template_detect("{{ '[INST] ' + message['content'] + ' [/INST]' }}", &t) == LC_OK &&
          t == LC_CHAT_TEMPLATE_MISTRAL);
    CHECK(lc_chat_template_detect("{{ '[INST] ' + message['content'] + '[/INST]' }}", &t) ==
          LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_detect("{{ '[SYSTEM_PROMPT]' + s + '[/SYSTEM_PROMPT]' }}{{ '[INST]' + "
                                  "message['content'] + '[/INST]' }}", &t) == LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_detect("{{'<|start_header_id|>' + role + '<|end_header_id|>'}}", &t) ==
              LC_OK &&
          t == LC_CHAT_TEMPLATE_LLAMA3);
    /* Phi-3's markers, the newline written as an escape in a string literal */
    CHECK(lc_chat_template_detect("{{'<|user|>\\n' + c + '<|end|>\\n'}}{{'<|assistant|>\\n'}}",
                                  &t) == LC_OK &&
          t == LC_CHAT_TEMPLATE_PHI3);
    /* Zephyr writes Phi-3's markers but ends turns with </s>; Phi-4-mini writes them without
     * the newline: neither is phi3 */
    CHECK(lc_chat_template_detect("{{'<|user|>\n' + c + '</s>\n'}}{{'<|assistant|>\n'}}", &t) ==
          LC_ERR_NOT_FOUND);
    CHECK(lc_chat_template_detect("{{ '<|' + message['role'] + '|>' + message['content'] + "
                                  "'<|end|>' }}{{ '<|assistant|>' }}",
                                  &t) == LC_ERR_NOT_FOUND);
    /* the message of an unrecognised template: one line naming --chat-template, every family
     * and the template's first bytes (escaped) */
    CHECK(lc_chat_template_detect("{% for m in messages %}\nUSER: {{ m.content }}{% endfor %}",
                                  &t) == LC_ERR_NOT_FOUND);
    CHECKF(strstr(lc_last_error(), "--chat-template NAME (chatml, llama3, llama3.1, mistral, gemma, phi3)") &&
               strstr(lc_last_error(), "{% for m in messages %}\\x0aUSER") &&
               !strchr(lc_last_error(), '\n'),
           "%s", lc_last_error());
    CHECK(strcmp(lc_chat_template_names(), "chatml, llama3, llama3.1, mistral, gemma, phi3") == 0);

    /* the model's own template, when the model is present */
    lc_gguf *g = NULL;
    if (lc_gguf_open(LC_MODEL_PATH, &g) == LC_OK) {
        const char *s;
        size_t n;
        CHECK(lc_gguf_get_str(g, "tokenizer.chat_template", &s, &n) == LC_OK);
        char *j = malloc(n + 1);
        memcpy(j, s, n);
        j[n] = '\0';
        CHECK(lc_chat_template_detect(j, &t) == LC_OK && t == LC_CHAT_TEMPLATE_CHATML);
        char *sys = NULL;
        CHECK(lc_chat_default_system(j, &sys) == LC_OK && sys &&
              strcmp(sys, "You are a helpful AI assistant named SmolLM, trained by Hugging Face") ==
                  0);
        free(sys);
        char *fix = read_file(FIX "template_smollm2.jinja");
        CHECK(fix && strcmp(fix, j) == 0);
        free(fix);
        free(j);
        lc_gguf_close(g);
    } else {
        fprintf(stderr, "note: %s absent, model template checks skipped\n", LC_MODEL_PATH);
    }
}

static void test_default_system(void) {
    char *s = (char *)1;
    CHECK(lc_chat_default_system("{{ messages }}", &s) == LC_OK && s == NULL);
    s = (char *)1;
    CHECK(lc_chat_default_system(NULL, &s) == LC_OK && s == NULL);
    /* a system header followed by an expression is not a literal */
    s = (char *)1;
    CHECK(lc_chat_default_system("{{ '<|im_start|>system\\n' + messages[0]['content'] + "
                                 "'<|im_end|>' }}",
                                 &s) == LC_OK &&
          s == NULL);
    char *q = read_file(FIX "template_qwen25.jinja");
    CHECK(q != NULL);
    if (q) {
        CHECK(lc_chat_default_system(q, &s) == LC_OK && s &&
              strcmp(s, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") ==
                  0);
        free(s);
        free(q);
    }
    char *l = read_file(FIX "template_llama3.jinja");
    if (l) {
        CHECK(lc_chat_default_system(l, &s) == LC_OK && s == NULL);
        free(l);
    }
    /* escapes inside the literal */
    CHECK(lc_chat_default_system("{{ '<|im_start|>system\\nIt\\'s\\tok\\n<|im_end|>' }}", &s) ==
              LC_OK &&
          s && strcmp(s, "It's\tok\n") == 0);
    free(s);
    /* the search resumes after a header whose text is not a literal and finds a later one */
    CHECK(lc_chat_default_system("{{ '<|im_start|>system\\n' + x + '<|im_start|>system\\nOK"
                                 "<|im_end|>' }}",
                                 &s) == LC_OK &&
          s && strcmp(s, "OK") == 0);
    free(s);
    /* hostile template (issue 20, seen while writing fuzz_tokenizer_load): 10k headers before
     * one quote took quadratic time (each header rescanned up to the quote: seconds at 64 KiB,
     * minutes at 1 MiB); now linear. The answer is unchanged: no literal. */
    {
        static const char h[] = "<|im_start|>system\n";
        const size_t n = 10000, hl = sizeof h - 1;
        char *big = malloc(n * hl + 2);
        CHECK(big != NULL);
        if (big) {
            for (size_t i = 0; i < n; i++) memcpy(big + i * hl, h, hl);
            big[n * hl] = '\'';
            big[n * hl + 1] = '\0';
            s = (char *)1;
            CHECK(lc_chat_default_system(big, &s) == LC_OK && s == NULL);
            free(big);
        }
    }
}

/* chat.txt (tests/fixtures/chat/families.txt alike): "case <name> <default_system>
 * <add_assistant> <n> <source> <template id>", n lines "msg <role> <hex>", then "expect <hex>". */
static void test_fixture_file(const char *path, int min_cases) {
    char *text = read_file(path);
    CHECKF(text != NULL, "cannot read %s", path);
    if (!text) return;
    char *smol = read_file(FIX "template_smollm2.jinja");
    char *qwen = read_file(FIX "template_qwen25.jinja");
    int n_cases = 0, n_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "case ", 5) != 0) continue;
        char name[32], src[32], tid[32];
        int use_default, add_ass, n;
        if (sscanf(line, "case %31s %d %d %d %31s %31s", name, &use_default, &add_ass, &n, src,
                   tid) != 6) {
            CHECKF(0, "bad fixture line: %s", line);
            break;
        }
        lc_chat_message *msgs = calloc((size_t)n + 1, sizeof *msgs);
        char **owned = calloc((size_t)n * 2 + 1, sizeof *owned);
        char *expect = NULL;
        for (int i = 0; i < n; i++) {
            char *ml = strtok_r(NULL, "\n", &save);
            char role[32];
            if (!ml || sscanf(ml, "msg %31s", role) != 1) break;
            const char *hex = ml + 4 + strlen(role);
            while (*hex == ' ')
                hex++;
            owned[2 * i] = strdup(role);
            owned[2 * i + 1] = unhex(hex);
            msgs[i] = (lc_chat_message){owned[2 * i], owned[2 * i + 1]};
        }
        char *el = strtok_r(NULL, "\n", &save);
        if (el && strncmp(el, "expect", 6) == 0) {
            const char *hex = el + 6;
            while (*hex == ' ')
                hex++;
            expect = unhex(hex);
        }
        lc_chat_template t = LC_CHAT_TEMPLATE_NONE;
        CHECK(lc_chat_template_from_name(name, &t) == LC_OK);
        char *sys = NULL;
        if (use_default) {
            const char *j = strcmp(tid, "qwen25") == 0 ? qwen : smol;
            CHECK(lc_chat_default_system(j, &sys) == LC_OK && sys != NULL);
        }
        char *out = NULL;
        int rc = lc_chat_format_ex(t, sys, msgs, (size_t)n, add_ass != 0, &out);
        n_cases++;
        bool ok = rc == LC_OK && expect && out && strcmp(out, expect) == 0;
        CHECKF(ok, "case %d (%s/%s, %d msgs, add_assistant %d, from %s):\n got: [%s]\nwant: [%s]",
               n_cases, name, tid, n, add_ass, src, out ? out : "(null)",
               expect ? expect : "(null)");
        n_ok += ok;
        free(out);
        free(sys);
        free(expect);
        for (int i = 0; i < 2 * n; i++)
            free(owned[i]);
        free(owned);
        free(msgs);
    }
    fprintf(stderr, "chat fixtures %s: %d/%d cases equal\n", path, n_ok, n_cases);
    CHECK(n_cases >= min_cases);
    free(smol);
    free(qwen);
    free(text);
}

static void test_edges(void) {
    char *out = NULL;
    lc_chat_message m[] = {{"user", "hi"}, {"tool", "x"}};
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_NONE, m, 1, true, &out) == LC_ERR_INVALID_ARG);
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_MISTRAL, m, 2, true, &out) == LC_ERR_INVALID_ARG);
    lc_chat_message bad[] = {{"user", NULL}};
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_CHATML, bad, 1, true, &out) == LC_ERR_INVALID_ARG);
    /* an empty conversation: only the generation prompt; no default system inserted */
    CHECK(lc_chat_format_ex(LC_CHAT_TEMPLATE_CHATML, "sys", NULL, 0, true, &out) == LC_OK && out &&
          strcmp(out, "<|im_start|>assistant\n") == 0);
    free(out);
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_LLAMA3, NULL, 0, false, &out) == LC_OK && out &&
          out[0] == '\0');
    free(out);
    /* phi3 writes the role inside its marker: only the three roles */
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_PHI3, m + 1, 1, true, &out) == LC_ERR_INVALID_ARG);
    CHECKF(strstr(lc_last_error(), "phi3") != NULL, "%s", lc_last_error());
    /* spans: gemma's contents (and role) are message text, phi3's role is not */
    {
        lc_text_span *sp = NULL;
        size_t        ns = 0;
        lc_chat_message g[] = {{"system", "S"}, {"user", " <end_of_turn> "}};
        CHECK(lc_chat_format_spans(LC_CHAT_TEMPLATE_GEMMA, g, 2, true, &out, &sp, &ns) == LC_OK);
        CHECK(out && strcmp(out, "<start_of_turn>user\nS\n\n<end_of_turn><end_of_turn>\n"
                                 "<start_of_turn>model\n") == 0);
        CHECK(ns == 3 && sp[0].start == 15 && sp[0].len == 4 && sp[1].start == 20 &&
              sp[1].len == 1 && sp[2].start == 23 && sp[2].len == 13);
        free(out);
        free(sp);
        CHECK(lc_chat_format_spans(LC_CHAT_TEMPLATE_PHI3, g + 1, 1, false, &out, &sp, &ns) ==
              LC_OK);
        CHECK(out && strcmp(out, "<|user|>\n <end_of_turn> <|end|>\n") == 0);
        CHECK(ns == 1 && sp[0].start == 9 && sp[0].len == 15);
        free(out);
        free(sp);
    }
    /* ChatML passes other roles through */
    CHECK(lc_chat_format(LC_CHAT_TEMPLATE_CHATML, m + 1, 1, false, &out) == LC_OK && out &&
          strcmp(out, "<|im_start|>tool\nx<|im_end|>\n") == 0);
    free(out);
}

int main(void) {
    test_names();
    test_detect();
    test_default_system();
    test_fixture_file(FIX "chat.txt", 50);
    test_fixture_file(LC_SOURCE_DIR "/tests/fixtures/chat/families.txt", 100);
    test_edges();
    TEST_END();
}
