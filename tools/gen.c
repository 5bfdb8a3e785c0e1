/*
 * gen.c — generation driver shared by the subcommands (see gen.h).
 */
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gen_opts_default(gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->device      = LC_DEVICE_AUTO;
    o->n_ctx       = 0;
    o->n_batch     = 512;
    o->page_size   = 64;
    o->sampling    = lc_sampling_default();
    o->sampling.seed = 0xC0FFEE;
    o->chat_template = LC_CHAT_TEMPLATE_NONE;
    o->attn          = "dense";
    o->tuning        = lc_tuning_default();
}

static const char *common_help(void) {
    return "model and sampling options:\n"
           "  -m, --model FILE        GGUF model (llama, mistral, qwen2)\n"
           "  -c, --ctx N             context size in tokens (default: the model's trained context)\n"
           "  -b, --batch N           prompt tokens per step (default 512)\n"
           "  --prefill-token-layers N  layer-segmented prefill (SparseServe): a prompt chunk of\n"
           "                          R tokens advances N/R layers a step (at least one) in a\n"
           "                          forward of its own, its hidden state kept between steps,\n"
           "                          so decode tokens beside it wait for about N token-layers\n"
           "                          of prompt work a step; same results (default 0: chunked\n"
           "                          prefill, a chunk through every layer in one step)\n"
           "  -t, --threads N         CPU threads (default: all cores)\n"
           "  --device cpu|cuda|auto  compute device (default auto: the GPU when there is one)\n"
           "  --page-size N           KV page size in tokens, power of two (default 64; the CUDA\n"
           "                          kernels need 64)\n"
           "  --kv-tokens N           KV cache capacity in tokens, all sequences (default: the context)\n"
           "  --kv-gb X               KV cache capacity in GiB (the token count follows from the\n"
           "                          model: layers x KV heads x head dim x 2 x element size)\n"
           "  --kv-type auto|f16|f32|fp8  KV element type (default auto: f16 on CUDA, f32 on the\n"
           "                          CPU). fp8: CUDA, e4m3 with a scale per token and head\n"
           "                          (about 1.94x the tokens per GiB at head dim 128; lossy,\n"
           "                          see bench/NOTES.md section 64); --attn dense, infinitehip\n"
           "                          or streaming\n"
           "  --kv-host-gb X, --kv-host-tokens N  of the capacity, this much in pinned host\n"
           "                          memory (the host tier; GPU: the kernels read it over PCIe,\n"
           "                          same results, slower by what they read there; the GPU tier\n"
           "                          is filled first). Default: none\n"
           "  --kv-gpu-gb X, --kv-gpu-tokens N  the GPU tier: this much on the GPU, the rest of\n"
           "                          the capacity in host memory; with a host tier given too, the\n"
           "                          capacity is the two together\n"
           "  --kv-slot-cache-gb X, --kv-slot-cache-tokens N  with a host tier: this much GPU\n"
           "                          memory, besides the GPU tier, as the slot cache of the\n"
           "                          sparse attention's host reads (infinitehip, hip, streaming):\n"
           "                          the slabs a refreshed selection (or the window) reads are\n"
           "                          copied into GPU slots (LRU) and read there; same results.\n"
           "                          Default: none\n"
           "  --ws-batch-control      with a slot cache: decode sequences join a step in arrival\n"
           "                          order while their working sets (the host slabs their last\n"
           "                          selection read) fit the slots; the rest wait (SparseServe)\n"
           "  --overcommit            allocate even when the weights or the context (KV cache,\n"
           "                          RoPE table, workspace) do not fit the memory there is\n"
           "                          (default: refuse before allocating, with the numbers and\n"
           "                          the most tokens that fit); with it a run may be killed\n"
           "                          for want of memory or swap once the cache fills\n"
           "  --weights native|f32|f16|bf16|auto  how weight matrices are held. CPU: native\n"
           "                          (auto: the file's own types read from its mapped pages,\n"
           "                          no copy: resident memory about the file's size; the\n"
           "                          products dequantise as they go), f32 (dequantised once at\n"
           "                          load, 4 bytes a weight, the exact reference) or f16\n"
           "                          (rounded, 2 bytes).\n"
           "                          CUDA: native (auto: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,\n"
           "                          Q5_K, Q6_K kept as the file's blocks, read by the decode\n"
           "                          products and dequantised to f16 slices for prompt\n"
           "                          products; other types in f16), f16 or bf16 (every\n"
           "                          matrix dequantised once at load)\n"
           "  --temp T                temperature, 0 = greedy (default 0.8)\n"
           "  --top-k N               top-k, 0 = off (default 40)\n"
           "  --top-p P               nucleus sampling, 1 = off (default 0.95)\n"
           "  --min-p P               min-p, 0 = off (default 0.05)\n"
           "  --repeat-penalty X      repetition penalty, 1 = off (default 1.1 for run and chat,\n"
           "                          against loops on small models; 1 for eval and bench)\n"
           "  --repeat-last-n N       window of the repetition penalty (default 64)\n"
           "  --repeat-scope generated|all  what the penalty's window looks at: the tokens\n"
           "                          generated so far (run and chat: an answer may copy from\n"
           "                          its document) or prompt tokens too (eval, bench; llama.cpp)\n"
           "  --seed S                random seed (default fixed, so runs repeat)\n"
           "  --chat-template NAME    chatml | llama3 | llama3.1 | mistral | gemma | phi3 (default:\n"
           "                          the family of the model's own template)\n"
           "  --check-numerics        debug: look for NaN/Inf after every layer and name the\n"
           "                          first one (slow; without it, non-finite logits are still\n"
           "                          caught and the layer named)\n"
           "  --tune NAME=VALUE       one of the backend's kernel choices (repeatable; for\n"
           "                          comparisons: every choice computes the same function,\n"
           "                          the defaults are the fastest measured; the CPU has none):\n";
}

/* after the --tune knobs (lc_tuning_help) */
static const char *attn_help(void) {
    return "\nattention options:\n"
           "  --attn NAME             attention method (default dense; see below)\n"
           "  --preset NAME           the method's preset (below; default: its \"default\")\n"
           "  --attn-set KEY=VALUE    one of the method's settings, applied after the preset\n"
           "                          (repeatable; lists comma-separated: k=32768,8192,2048)\n"
           "  --hip-KEY=VALUE         --attn-set KEY=VALUE for --attn infinitehip or hip\n"
           "  --ts-KEY=VALUE          --attn-set KEY=VALUE for --attn tokenselect\n";
}

const char *gen_opts_help(void) {
    /* the common options, the --tune knobs and every method's settings, from their tables */
    static char buf[32768];
    size_t      at = (size_t)snprintf(buf, sizeof buf, "%s", common_help());
    if (lc_tuning_help(26, buf + at, sizeof buf - at) == LC_OK) at += strlen(buf + at);
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s", attn_help());
    char        names[256];
    snprintf(names, sizeof names, "%s", lc_attn_methods());
    for (char *tok = strtok(names, ", "); tok && at < sizeof buf; tok = strtok(NULL, ", ")) {
        buf[at++] = '\n';
        if (at < sizeof buf && lc_attn_help(tok, buf + at, sizeof buf - at) == LC_OK)
            at += strlen(buf + at);
    }
    return buf;
}

bool gen_attn_dense(const gen_opts *o) { return !o->attn || !strcmp(o->attn, "dense"); }

int gen_opts_parse(gen_opts *o, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    long long   n;
    double      x;
#define VAL()                                                                                 \
    do {                                                                                      \
        if (!(v = cli_value(cmd, argc, argv, i))) return -1;                                  \
    } while (0)
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        VAL();
        o->model = v;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx") || !strcmp(a, "--ctx-size")) {
        VAL();
        if (!cli_int(cmd, a, v, 1, 1 << 30, &o->n_ctx)) return -1; /* (no -c: the default) */
    } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
        VAL();
        if (!cli_int(cmd, a, v, 1, 65536, &o->n_batch)) return -1;
    } else if (!strcmp(a, "--prefill-token-layers")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, 1 << 30, &o->prefill_token_layers)) return -1;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        VAL();
        if (!cli_int(cmd, a, v, 1, 1024, &n)) return -1;
        o->threads = (int)n;
    } else if (!strcmp(a, "--device")) {
        VAL();
        if (!cli_device(cmd, v, &o->device)) return -1;
    } else if (!strcmp(a, "--weights")) {
        VAL();
        if (!strcmp(v, "f32")) o->weights = LC_WEIGHTS_F32;
        else if (!strcmp(v, "f16")) o->weights = LC_WEIGHTS_F16;
        else if (!strcmp(v, "bf16")) o->weights = LC_WEIGHTS_BF16;
        else if (!strcmp(v, "native")) o->weights = LC_WEIGHTS_NATIVE;
        else if (!strcmp(v, "auto")) o->weights = LC_WEIGHTS_AUTO;
        else {
            fprintf(stderr, "longctx %s: --weights: '%s' is not one of native, f32, f16, bf16, "
                    "auto\n", cmd, v);
            return -1;
        }
    } else if (!strcmp(a, "--page-size")) {
        VAL();
        if (!cli_int(cmd, a, v, 16, 1024, &o->page_size)) return -1;
        if (o->page_size & (o->page_size - 1)) {
            fprintf(stderr, "longctx %s: --page-size: %lld is not a power of two\n", cmd, o->page_size);
            return -1;
        }
    } else if (!strcmp(a, "--kv-tokens")) {
        VAL();
        if (!cli_int(cmd, a, v, 1, 1LL << 31, &o->kv_tokens)) return -1;
    } else if (!strcmp(a, "--kv-type")) {
        VAL();
        if (!strcmp(v, "auto") || !strcmp(v, "f16") || !strcmp(v, "f32")) {
            o->kv_type = LC_KV_AUTO; /* the backend's own; checked against it below */
            o->kv_type_name = v;
        } else if (!strcmp(v, "fp8")) {
            o->kv_type = LC_KV_FP8, o->kv_type_name = v;
        } else {
            fprintf(stderr, "longctx %s: --kv-type: '%s' (auto, f16 on CUDA, f32 on the CPU, or "
                    "fp8; the CUDA pools hold f16 since NOTES section 36, not bf16)\n", cmd, v);
            return -1;
        }
    } else if (!strcmp(a, "--kv-gb")) {
        VAL();
        if (!cli_float(cmd, a, v, 0.001, 1e6, &o->kv_gb)) return -1;
    } else if (!strcmp(a, "--kv-host-tokens") || !strcmp(a, "--kv-gpu-tokens")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, 1LL << 31, a[5] == 'h' ? &o->kv_host_tokens : &o->kv_gpu_tokens))
            return -1;
    } else if (!strcmp(a, "--kv-host-gb") || !strcmp(a, "--kv-gpu-gb")) {
        VAL();
        if (!cli_float(cmd, a, v, 0, 1e6, a[5] == 'h' ? &o->kv_host_gb : &o->kv_gpu_gb)) return -1;
    } else if (!strcmp(a, "--kv-slot-cache-tokens")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, 1LL << 31, &o->kv_slot_tokens)) return -1;
    } else if (!strcmp(a, "--kv-slot-cache-gb")) {
        VAL();
        if (!cli_float(cmd, a, v, 0, 1e6, &o->kv_slot_gb)) return -1;
    } else if (!strcmp(a, "--ws-batch-control")) {
        o->ws_batch_control = true;
    } else if (!strcmp(a, "--overcommit")) {
        o->overcommit = true;
    } else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
        VAL();
        if (!cli_float(cmd, a, v, 0, 100, &x)) return -1;
        o->sampling.temperature = (float)x;
    } else if (!strcmp(a, "--top-k")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, 1 << 30, &n)) return -1;
        o->sampling.top_k = (int32_t)n;
    } else if (!strcmp(a, "--top-p")) {
        VAL();
        if (!cli_float(cmd, a, v, 1e-6, 1, &x)) return -1;
        o->sampling.top_p = (float)x;
    } else if (!strcmp(a, "--min-p")) {
        VAL();
        if (!cli_float(cmd, a, v, 0, 1, &x)) return -1;
        o->sampling.min_p = (float)x;
    } else if (!strcmp(a, "--repeat-penalty")) {
        VAL();
        if (!cli_float(cmd, a, v, 1e-3, 10, &x)) return -1;
        o->sampling.repeat_penalty = (float)x;
    } else if (!strcmp(a, "--repeat-last-n")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, 1 << 20, &n)) return -1;
        o->sampling.repeat_last_n = (int32_t)n;
    } else if (!strcmp(a, "--check-numerics")) {
        o->check_numerics = true;
    } else if (!strcmp(a, "--tune")) {
        VAL();
        const char  *eq  = strchr(v, '=');
        const size_t len = eq ? (size_t)(eq - v) : 0;
        char         name[64];
        if (!eq || len == 0 || len >= sizeof name) {
            fprintf(stderr, "longctx %s: --tune: '%s' is not NAME=VALUE (see --help)\n", cmd, v);
            return -1;
        }
        memcpy(name, v, len);
        name[len] = '\0';
        if (lc_tuning_set(&o->tuning, name, eq + 1) != LC_OK) {
            fprintf(stderr, "longctx %s: %s\n", cmd, lc_last_error());
            return -1;
        }
    } else if (!strcmp(a, "--seed")) {
        VAL();
        if (!cli_int(cmd, a, v, 0, INT64_MAX, &n)) return -1;
        o->sampling.seed = (uint64_t)n;
    } else if (!strcmp(a, "--attn")) {
        VAL();
        if (lc_attn_check(v, "", NULL, 0) == LC_ERR_NOT_FOUND) {
            fprintf(stderr, "longctx %s: --attn: unknown method '%s' (known: %s)\n", cmd, v,
                    lc_attn_methods());
            return -1;
        }
        o->attn = v;
    } else if (!strcmp(a, "--preset")) {
        VAL();
        o->preset = v;
    } else if (!strncmp(a, "--hip-", 6) || !strncmp(a, "--ts-", 5) || !strcmp(a, "--attn-set")) {
        const bool  set = !strcmp(a, "--attn-set");
        const bool  ts  = a[2] == 't';
        if (set) VAL();
        const char *nm  = set ? v : a + (ts ? 5 : 6);
        const char *eq  = strchr(nm, '=');
        const size_t len = eq ? (size_t)(eq - nm) : strlen(nm);
        if (len == 0 || len >= sizeof o->knob_buf[0] ||
            o->n_knobs == (int)(sizeof o->knob_name / sizeof o->knob_name[0])) {
            fprintf(stderr, "longctx %s: bad option '%s'\n", cmd, a);
            return -1;
        }
        if (eq) v = eq + 1;
        else if (set) {
            fprintf(stderr, "longctx %s: --attn-set: '%s' is not KEY=VALUE\n", cmd, nm);
            return -1;
        } else VAL();
        char *buf = o->knob_buf[o->n_knobs];
        memcpy(buf, nm, len);
        buf[len]                      = 0;
        o->knob_prefix[o->n_knobs]    = set ? "" : ts ? "ts" : "hip";
        o->knob_name[o->n_knobs]      = buf;
        o->knob_val[o->n_knobs++]     = v;
    } else if (!strcmp(a, "--repeat-scope")) {
        VAL();
        if (strcmp(v, "generated") && strcmp(v, "all")) {
            fprintf(stderr, "longctx %s: --repeat-scope: '%s' is not generated or all\n", cmd, v);
            return -1;
        }
        o->sampling.repeat_generated_only = !strcmp(v, "generated");
    } else if (!strcmp(a, "--chat-template")) {
        VAL();
        if (lc_chat_template_from_name(v, &o->chat_template) != LC_OK) {
            fprintf(stderr, "longctx %s: --chat-template: unknown template '%s' (known: %s)\n",
                    cmd, v, lc_chat_template_names());
            return -1;
        }
    } else {
        return 0;
    }
#undef VAL
    return 1;
}

/* appends "text" to o->attn_settings; false when it does not fit */
static bool settings_add(gen_opts *o, const char *cmd, const char *key, const char *value) {
    const size_t at = strlen(o->attn_settings), cap = sizeof o->attn_settings;
    const int    n  = snprintf(o->attn_settings + at, cap - at, "%s%s=%s", at ? " " : "", key,
                               value);
    if (n < 0 || (size_t)n >= cap - at) {
        fprintf(stderr, "longctx %s: too many attention settings\n", cmd);
        return false;
    }
    return true;
}

bool gen_opts_check(gen_opts *o, const char *cmd) {
    const char *method = o->attn ? o->attn : "dense";
    if (o->preset) {
        if (gen_attn_dense(o)) {
            fprintf(stderr, "longctx %s: --preset needs --attn NAME (one of %s; the method is "
                    "dense)\n", cmd, lc_attn_methods());
            return false;
        }
        if (!settings_add(o, cmd, "preset", o->preset)) return false;
        o->preset = NULL; /* applied */
    }
    for (int i = 0; i < o->n_knobs; i++) {
        const char *pre = o->knob_prefix[i];
        const bool  ok  = !pre[0] ||
                        (!strcmp(pre, "ts") ? !strcmp(method, "tokenselect")
                                            : !strcmp(method, "infinitehip") ||
                                                  !strcmp(method, "hip"));
        if (!ok) {
            fprintf(stderr, "longctx %s: --%s-%s needs --attn %s (the method is %s)\n", cmd, pre,
                    o->knob_name[i], !strcmp(pre, "ts") ? "tokenselect" : "infinitehip or hip",
                    method);
            return false;
        }
        if (!settings_add(o, cmd, o->knob_name[i], o->knob_val[i])) return false;
    }
    o->n_knobs = 0; /* applied */
    if (lc_attn_check(method, o->attn_settings, NULL, 0) != LC_OK) {
        fprintf(stderr, "longctx %s: %s\n", cmd, lc_last_error());
        return false;
    }
    return true;
}

void gen_attn_describe(const gen_opts *o, char *buf, size_t cap) {
    char d[1024];
    if (gen_attn_dense(o)) snprintf(buf, cap, "dense");
    else
        snprintf(buf, cap, "%s (%s)", o->attn,
                 lc_attn_check(o->attn, o->attn_settings, d, sizeof d) == LC_OK ? d : "?");
}

void gen_tuning_describe(const gen_opts *o, char *buf, size_t cap) {
    if (lc_tuning_describe(&o->tuning, buf, cap) != LC_OK) snprintf(buf, cap, "?");
}

void gen_context_attn(const gen_opts *o, lc_context_params *cp) {
    cp->check_numerics = o->check_numerics;
    cp->trace_begin    = o->trace_begin;
    cp->trace_end      = o->trace_end;
    cp->attn           = o->attn;
    cp->attn_settings  = o->attn_settings[0] ? o->attn_settings : NULL;
}

static void load_progress(int64_t done, int64_t total, void *user) {
    cli_progress_update(user, done, total, "tensors");
}

int gen_load(const char *cmd, gen_opts *o, lc_model **model) {
    if (!gen_opts_check(o, cmd)) return CLI_USAGE;
    if (!o->model) {
        fprintf(stderr, "longctx %s: no model given (-m FILE)\n", cmd);
        return CLI_USAGE;
    }
    cli_progress    pr;
    lc_model_params mp = lc_model_default_params();
    mp.device          = o->device;
    mp.n_threads       = o->threads;
    mp.weights         = o->weights;
    mp.profile         = o->profile;
    mp.overcommit      = o->overcommit;
    mp.tuning          = o->tuning;
    mp.progress        = load_progress;
    mp.progress_user   = &pr;
    cli_progress_begin(&pr, "loading");
    pr.last  = cli_now(); /* only show progress for slow loads */
    int st   = lc_model_load(o->model, &mp, model);
    cli_progress_end(&pr);
    if (st != LC_OK) {
        cli_fail(cmd, o->model, st);
        return CLI_ERR;
    }
    /* more threads than cores: they take turns, and every OpenMP barrier waits for the
     * slowest (measured: 7x slower); one line, then go on */
    lc_model_info info;
    const long    cores = cli_cpu_count();
    if (o->threads > 0 && cores > 0 && o->threads > cores &&
        lc_model_get_info(*model, &info) == LC_OK && info.device == LC_DEVICE_CPU)
        fprintf(stderr, "longctx %s: warning: -t %d is more than the %ld CPU cores this process "
                "may use; the threads will take turns on them and run several times slower "
                "(leave -t out to use %ld)\n", cmd, o->threads, cores, cores);
    return CLI_OK;
}

int gen_context(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                lc_context **ctx) {
    return gen_context_progress(cmd, o, m, need_ctx, NULL, NULL, ctx);
}

static int gen_kv_tiers(const char *cmd, const gen_opts *o, const lc_model_info *info,
                        lc_context_params *cp);
static int gen_kv_slot_cache(const char *cmd, const gen_opts *o, double per_token,
                             lc_context_params *cp);

/* KV bytes a token takes (gen.h) */
double gen_kv_bytes_per_token(const lc_model_info *info, lc_kv_type kv_type) {
    if (kv_type == LC_KV_FP8) /* a code per element, a 4-byte scale per (token, head) */
        return 2.0 * info->n_layer * info->n_head_kv * (info->head_dim + 4.0);
    return 2.0 * info->n_layer * info->n_head_kv * info->head_dim *
           (info->device == LC_DEVICE_CUDA ? 2 : 4);
}

int gen_context_params(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                       lc_context_params *out) {
    lc_context_params cp = lc_context_default_params();
    lc_model_info     info;
    lc_model_get_info(m, &info);
    cp.n_ctx = (int32_t)(o->n_ctx ? o->n_ctx : (need_ctx > info.n_ctx_train ? need_ctx : info.n_ctx_train));
    cp.n_batch   = (int32_t)o->n_batch;
    cp.prefill_token_layers = (int32_t)o->prefill_token_layers;
    cp.page_size = (int32_t)o->page_size;
    gen_context_attn(o, &cp);
    if (o->kv_tokens > 0) cp.kv_tokens = o->kv_tokens;
    if (o->kv_type_name && (!strcmp(o->kv_type_name, "f16") || !strcmp(o->kv_type_name, "f32")) &&
        !strcmp(o->kv_type_name, "f16") == (info.device != LC_DEVICE_CUDA)) {
        fprintf(stderr, "longctx %s: --kv-type %s: the %s backend holds KV in %s (or fp8 on "
                "CUDA)\n", cmd, o->kv_type_name, info.device == LC_DEVICE_CUDA ? "CUDA" : "CPU",
                info.device == LC_DEVICE_CUDA ? "f16" : "f32");
        return CLI_ERR;
    }
    cp.kv_type    = o->kv_type;
    cp.overcommit = o->overcommit;
    cp.ws_batch_control = o->ws_batch_control;
    if (o->kv_gb > 0) {
        const double per_token = gen_kv_bytes_per_token(&info, o->kv_type);
        const double tokens = o->kv_gb * 1073741824.0 / per_token;
        if (tokens < 1) {
            fprintf(stderr, "longctx %s: --kv-gb %g holds no token of this model (%.0f bytes "
                    "each)\n", cmd, o->kv_gb, per_token);
            return CLI_ERR;
        }
        cp.kv_tokens = tokens > 2147483647.0 ? 2147483647 : (int64_t)tokens;
    }
    if (o->n_seq_max > 0) cp.n_seq_max = o->n_seq_max;
    if (gen_kv_tiers(cmd, o, &info, &cp) != CLI_OK ||
        gen_kv_slot_cache(cmd, o, gen_kv_bytes_per_token(&info, o->kv_type), &cp) != CLI_OK)
        return CLI_ERR;
    *out = cp;
    return CLI_OK;
}

/* The slot cache (--kv-slot-cache-*) into cp.kv_slot_cache_tokens; it needs a host tier. */
static int gen_kv_slot_cache(const char *cmd, const gen_opts *o, double per_token,
                             lc_context_params *cp) {
    if (o->kv_slot_tokens <= 0 && o->kv_slot_gb <= 0) return CLI_OK;
    if (o->kv_slot_tokens > 0 && o->kv_slot_gb > 0) {
        fprintf(stderr, "longctx %s: give the KV slot cache in tokens or in GiB, not both\n", cmd);
        return CLI_ERR;
    }
    if (cp->kv_host_tokens <= 0) {
        fprintf(stderr, "longctx %s: --kv-slot-cache-* caches the KV host tier: give one "
                "(--kv-host-gb / --kv-gpu-gb)\n", cmd);
        return CLI_ERR;
    }
    const double t = o->kv_slot_tokens > 0 ? (double)o->kv_slot_tokens
                                           : o->kv_slot_gb * 1073741824.0 / per_token;
    cp->kv_slot_cache_tokens = t > 2147483647.0 ? 2147483647 : t < 1 ? 1 : (int64_t)t;
    return CLI_OK;
}

/* The KV tiers (--kv-host-*, --kv-gpu-*) into cp.kv_tokens / cp.kv_host_tokens: a host tier
 * alone is that much of the capacity; a GPU tier alone leaves the rest of the capacity to the
 * host; both set the capacity to their sum (then --kv-tokens / --kv-gb may not be given). */
static int gen_kv_tiers(const char *cmd, const gen_opts *o, const lc_model_info *info,
                        lc_context_params *cp) {
    const double per_token = gen_kv_bytes_per_token(info, o->kv_type);
    const bool host_set = o->kv_host_tokens > 0 || o->kv_host_gb > 0;
    const bool gpu_set  = o->kv_gpu_tokens > 0 || o->kv_gpu_gb > 0;
    if (!host_set && !gpu_set) return CLI_OK;
    if ((o->kv_host_tokens > 0 && o->kv_host_gb > 0) || (o->kv_gpu_tokens > 0 && o->kv_gpu_gb > 0)) {
        fprintf(stderr, "longctx %s: give a KV tier in tokens or in GiB, not both\n", cmd);
        return CLI_ERR;
    }
    const double  host = o->kv_host_tokens > 0 ? (double)o->kv_host_tokens
                                               : o->kv_host_gb * 1073741824.0 / per_token;
    const double  gpu  = o->kv_gpu_tokens > 0 ? (double)o->kv_gpu_tokens
                                              : o->kv_gpu_gb * 1073741824.0 / per_token;
    const int64_t total_default = cp->kv_tokens > 0 ? cp->kv_tokens
                                                    : (int64_t)cp->n_ctx * cp->n_seq_max;
    if (host_set && gpu_set) {
        if (o->kv_tokens > 0 || o->kv_gb > 0) {
            fprintf(stderr, "longctx %s: with both KV tiers given the capacity is their sum: "
                    "leave out --kv-tokens / --kv-gb\n", cmd);
            return CLI_ERR;
        }
        const double t = host + gpu;
        cp->kv_tokens      = t > 2147483647.0 ? 2147483647 : (int64_t)t;
        cp->kv_host_tokens = (int64_t)host;
    } else if (host_set) {
        cp->kv_tokens      = total_default;
        cp->kv_host_tokens = host >= (double)total_default ? total_default : (int64_t)host;
    } else {
        cp->kv_tokens      = total_default;
        cp->kv_host_tokens = gpu >= (double)total_default ? 0 : total_default - (int64_t)gpu;
    }
    if (cp->kv_tokens < 1) {
        fprintf(stderr, "longctx %s: the KV tiers hold no token of this model (%.0f bytes "
                "each)\n", cmd, per_token);
        return CLI_ERR;
    }
    return CLI_OK;
}

int gen_context_progress(const char *cmd, const gen_opts *o, lc_model *m, int64_t need_ctx,
                         lc_progress_fn progress, void *user, lc_context **ctx) {
    lc_context_params cp;
    if (gen_context_params(cmd, o, m, need_ctx, &cp) != CLI_OK) return CLI_ERR;
    cp.prefill_progress = progress;
    cp.progress_user    = user;
    int st              = lc_context_create(m, &cp, ctx);
    if (st != LC_OK) {
        cli_fail(cmd, "creating the context", st);
        return CLI_ERR;
    }
    return CLI_OK;
}

int gen_run(const char *cmd, lc_context *ctx, const lc_request *req, bool stream,
            int64_t progress_min, gen_result *res) {
    const gen_run_opts o = {.stream = stream, .progress_min = progress_min};
    return gen_run_ex(cmd, ctx, req, &o, res);
}

/* The expected prompt time of a CPU run from the first chunk's rate (one line, up front): the
 * cost of a token at position x is a (the projections and the FFN: 2 flops a parameter) plus
 * b x (attention: 4 flops per key, query head and head dimension in every layer), b from the
 * flop ratio at the measured rate. The attention kernels run below the GEMMs' flop rate, so
 * this is a lower bound rather than a promise; the progress line then tracks the truth. */
static void cpu_prompt_note(const char *cmd, const gen_run_opts *o, int64_t n_first, double t,
                            int64_t n_prompt) {
    const lc_model_info *m = o->cpu_note;
    if (n_first <= 0 || t <= 0 || m->n_params == 0) return;
    const double a  = t / (double)n_first;
    const double b  = a * 4.0 * m->n_layer * m->n_head * m->head_dim / (2.0 * (double)m->n_params);
    const double N  = (double)n_prompt;
    const double s  = a * N + b * N * N / 2;
    char         when[64];
    if (s < 120) snprintf(when, sizeof when, "%.0f s", s);
    else if (s < 7200) snprintf(when, sizeof when, "%.0f min", s / 60);
    else snprintf(when, sizeof when, "%.1f h", s / 3600);
    fprintf(stderr, "longctx %s: a %lld-token prompt on the CPU: expect at least %s for the "
            "prompt (%.0f tok/s on the first %lld tokens, slower as the context grows)%s\n",
            cmd, (long long)n_prompt, when, (double)n_first / t, (long long)n_first,
            o->cpu_note_sparse
                ? "; the sparse methods are faster only on a GPU: on the CPU their kernels are "
                  "reference code, slower than dense"
                : "; the sparse methods (--attn infinitehip, hip, tokenselect) need a GPU to "
                  "be faster than dense");
}

int gen_run_ex(const char *cmd, lc_context *ctx, const lc_request *req, const gen_run_opts *o,
               gen_result *res) {
    memset(res, 0, sizeof *res);
    res->last_token = -1;
    const bool    stream = o->stream;
    const int64_t progress_min = o->progress_min;
    int32_t seq = o->keep_seq ? *o->keep_seq : -1;
    int     st  = seq >= 0 ? lc_context_continue(ctx, seq, o->n_keep, req)
                           : lc_context_add(ctx, req, &seq);
    if (st != LC_OK) {
        res->status = st;
        if (!o->quiet_fail) cli_fail(cmd, "the request", st);
        return CLI_ERR;
    }
    if (o->keep_seq) *o->keep_seq = seq;
    size_t cap = 1024;
    res->text  = malloc(cap);
    if (!res->text) {
        if (!o->keep_seq) lc_context_remove(ctx, seq);
        fprintf(stderr, "longctx %s: out of memory\n", cmd);
        return CLI_ERR;
    }
    res->text[0]  = '\0';
    res->n_prompt = (int64_t)req->n_prompt;
    cli_progress pr;
    cli_progress_begin(&pr, "prompt");
    const bool   show   = (int64_t)req->n_prompt >= progress_min;
    const double t0     = cli_now();
    double       t_first = 0;
    int          rc     = CLI_OK;
    double      *tok_t  = NULL; /* when each generated token arrived */
    size_t       n_tok_t = 0, cap_tok_t = 0;
    bool         noted  = o->cpu_note == NULL;
    /* decode progress (tokens done/total, tok/s) on long generations: on a terminal, unless
     * the answer streams to the same terminal (the text is the progress there, and a line
     * rewritten in place would overwrite it); in a log only when the prompt's progress shows
     * too (progress_min) */
    cli_progress dpr;
    cli_progress_begin(&dpr, "generating");
    const bool out_tty = isatty(1), same_tty = stream && out_tty && dpr.tty;
    const bool dshow   = o->decode_progress && !same_tty && (dpr.tty || show) &&
                       req->max_tokens >= 2;
    const int64_t dtotal = req->max_tokens >= (1 << 30) ? 0 : req->max_tokens;
    for (;;) {
        if (o->interrupt && *o->interrupt) { /* the caller stops this answer */
            res->interrupted = true;
            break;
        }
        lc_event ev[4];
        size_t   n_ev;
        st = lc_context_step(ctx, ev, 4, &n_ev);
        if (st != LC_OK) {
            cli_progress_end(&pr);
            cli_fail(cmd, "generation", st);
            rc = CLI_ERR;
            break;
        }
        if (n_ev == 0) break;
        const lc_event *e = &ev[0];
        if (e->token >= 0) res->last_token = e->token;
        if (show && e->n_prompt_done <= e->n_prompt && e->token < 0 && e->finish == LC_FINISH_NONE)
            cli_progress_update(&pr, e->n_prompt_done, e->n_prompt, "tokens");
        if (!noted && e->token < 0 && e->n_prompt_done > 0) {
            noted = true;
            if (e->n_prompt_done < e->n_prompt) {
                cli_progress_end(&pr);
                cpu_prompt_note(cmd, o, e->n_prompt_done, cli_now() - t0, e->n_prompt);
            }
        }
        const double t_ev = e->token >= 0 ? cli_now() : 0;
        if (e->token >= 0) {
            if (n_tok_t == cap_tok_t) {
                const size_t nc = cap_tok_t ? 2 * cap_tok_t : 64;
                double      *nt = realloc(tok_t, sizeof(double) * nc);
                if (nt) tok_t = nt, cap_tok_t = nc;
            }
            if (n_tok_t < cap_tok_t) tok_t[n_tok_t++] = t_ev;
        }
        if (e->token >= 0 && t_first == 0) {
            t_first = t_ev;
            if (show) {
                cli_progress_update(&pr, e->n_prompt, e->n_prompt, "tokens");
                cli_progress_end(&pr);
            }
            dpr.t0 = dpr.last = t_ev; /* the first line after one interval */
        }
        if (dshow && e->token >= 0)
            cli_progress_update(&dpr, e->n_generated, dtotal, "tokens");
        if (e->text_len) {
            if (res->len + e->text_len + 1 > cap) {
                while (res->len + e->text_len + 1 > cap) cap *= 2;
                char *t = realloc(res->text, cap);
                if (!t) {
                    fprintf(stderr, "longctx %s: out of memory\n", cmd);
                    rc = CLI_ERR;
                    break;
                }
                res->text = t;
            }
            memcpy(res->text + res->len, e->text, e->text_len);
            res->len += e->text_len;
            res->text[res->len] = '\0';
            if (stream) {
                fwrite(e->text, 1, e->text_len, stdout);
                fflush(stdout);
            }
        }
        res->n_generated = e->n_generated;
        if (e->finish != LC_FINISH_NONE) {
            res->finish = e->finish;
            if (e->finish == LC_FINISH_ERROR) {
                fprintf(stderr, "longctx %s: the sequence could not go on: %s\n", cmd,
                        e->error ? e->error : "(no reason given)");
                rc = CLI_ERR;
            }
            break;
        }
    }
    cli_progress_end(&dpr);
    cli_progress_end(&pr); /* (a request stopped during its prompt) */
    const double t1 = cli_now();
    if (t_first == 0) t_first = t1;
    res->prompt_s = t_first - t0;
    res->gen_s    = t1 - t_first;
    res->step_median_s = 0;
    if (n_tok_t >= 2) { /* the intervals, in place, sorted: the median */
        for (size_t i = 0; i + 1 < n_tok_t; i++) tok_t[i] = tok_t[i + 1] - tok_t[i];
        qsort(tok_t, n_tok_t - 1, sizeof(double), cli_cmp_double);
        const size_t n = n_tok_t - 1;
        res->step_median_s = n % 2 ? tok_t[n / 2] : 0.5 * (tok_t[n / 2 - 1] + tok_t[n / 2]);
    }
    free(tok_t);
    if (!o->keep_seq) lc_context_remove(ctx, seq);
    return rc;
}

void gen_random_prompt(const lc_tokenizer *tok, int32_t n_vocab, uint64_t seed, int32_t *prompt,
                       long long n) {
    uint64_t s = seed ? seed : 12345;
    for (long long i = 0; i < n; i++) {
        int32_t id;
        do {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            id = (int32_t)(s % (uint64_t)n_vocab);
        } while (lc_tokenizer_is_eog(tok, id) || id == lc_tokenizer_bos(tok));
        prompt[i] = id;
    }
}
