/*
 * test_profile.c — the profiling backend (backend/profile.c) on the CPU: a generated tiny model
 * run through the wrapped backend gives the same logits as the plain one at every step
 * (prefill and decode); matmul and attn_dense are counted in both phases; times are >= 0 and
 * the categories add up to the total; memory counts the weights exactly as the model does and
 * the KV pools as exactly pages x page bytes, back to zero when the context is freed; the
 * wrapper copies the inner backend's fields and passes through ops it does not time, and
 * counts a tiered pool's two parts apart;
 * TokenSelect's select_tokens, HiP's select_blocks and the sampling op are timed; every op of struct
 * lc_backend is wrapped (a table-driven walk over its function pointers, so an op added to
 * backend.h and forgotten in profile.c fails here) and has its line in the report (kv_read
 * called through the wrapper is counted). Not a timed test: no time is compared with a bound.
 */
#include "backend/profile.h"
#include "longctx.h"
#include "test_util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lc_model *load(const char *path, int profile) {
    lc_model_params mp = lc_model_default_params();
    mp.device          = LC_DEVICE_CPU;
    mp.n_threads       = 2;
    mp.profile         = profile;
    lc_model *m        = NULL;
    int       st       = lc_model_load(path, &mp, &m);
    CHECKF(st == LC_OK, "%s", lc_last_error());
    return m;
}

static lc_context *context(lc_model *m) {
    lc_context_params cp = lc_context_default_params();
    cp.n_ctx             = 256; /* 4 pages of 64 */
    cp.page_size         = 64;
    lc_context *c        = NULL;
    CHECK(lc_context_create(m, &cp, &c) == LC_OK);
    return c;
}

/* Run the same greedy request through both models in lock step; compare logits each step. */
static void same_logits(lc_model *plain, lc_model *prof, int32_t n_vocab) {
    lc_context *ca = context(plain), *cb = context(prof);
    if (!ca || !cb) {
        lc_context_free(ca), lc_context_free(cb);
        return;
    }
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = 30 + (i * 37) % 200; /* ordinary byte tokens */
    lc_request req = {.prompt = prompt, .n_prompt = 40, .max_tokens = 5,
                      .sampling = lc_sampling_default(), .ignore_eos = true};
    req.sampling.temperature = 0.0f;
    int32_t sa, sb;
    CHECK(lc_context_add(ca, &req, &sa) == LC_OK);
    CHECK(lc_context_add(cb, &req, &sb) == LC_OK);
    int  steps = 0, n_gen = 0;
    bool done = false, equal = true;
    while (!done && steps++ < 64) {
        lc_event ea[4], eb[4];
        size_t   na = 0, nb = 0;
        CHECK(lc_context_step(ca, ea, 4, &na) == LC_OK);
        CHECK(lc_context_step(cb, eb, 4, &nb) == LC_OK);
        CHECK(na == nb);
        if (na == 0 || nb == 0) break;
        const float *la = lc_context_logits(ca, sa), *lb = lc_context_logits(cb, sb);
        if (la && lb && memcmp(la, lb, sizeof(float) * (size_t)n_vocab) != 0) equal = false;
        CHECK(ea[0].token == eb[0].token);
        if (ea[0].token >= 0) n_gen++;
        if (ea[0].finish != LC_FINISH_NONE) done = true;
    }
    CHECK(done && n_gen == 5);
    CHECKF(equal, "the profiled forward changed the logits");

    lc_profile_report r;
    CHECK(lc_model_profile(prof, &r) == LC_OK);
    /* a 40-token prompt in one forward, then decode steps (the first token comes from the
     * prefill's logits) */
    CHECKF(r.n_forwards[LC_PROFILE_PREFILL] >= 1, "%lld", (long long)r.n_forwards[LC_PROFILE_PREFILL]);
    CHECKF(r.n_forwards[LC_PROFILE_DECODE] >= 4, "%lld", (long long)r.n_forwards[LC_PROFILE_DECODE]);
    for (int ph = LC_PROFILE_DECODE; ph <= LC_PROFILE_PREFILL; ph++) {
        /* tiny has 2 layers: 7 matmuls each + the output head; one attention per layer */
        CHECK(r.calls[ph][LC_PROFILE_GEMM] == r.n_forwards[ph] * (2 * 7 + 1));
        CHECK(r.calls[ph][LC_PROFILE_ATTENTION] == r.n_forwards[ph] * 2);
        CHECK(r.calls[ph][LC_PROFILE_REST] > 0);
        double sum = 0, sum_ops = 0;
        for (int c = 0; c < LC_PROFILE_N_CAT; c++) {
            CHECK(r.seconds[ph][c] >= 0);
            sum += r.seconds[ph][c];
        }
        for (int i = 0; i < r.n_ops; i++) {
            CHECK(r.ops[i].seconds[ph] >= 0);
            sum_ops += r.ops[i].seconds[ph];
        }
        CHECK(r.total_s[ph] > 0);
        CHECKF(fabs(sum - r.total_s[ph]) <= 1e-12 + 1e-9 * r.total_s[ph], "%g vs %g", sum, r.total_s[ph]);
        CHECKF(fabs(sum_ops - r.total_s[ph]) <= 1e-12 + 1e-9 * r.total_s[ph], "%g vs %g", sum_ops, r.total_s[ph]);
    }
    bool named = false;
    for (int i = 0; i < r.n_ops; i++)
        if (!strcmp(r.ops[i].name, "attn_dense"))
            named = r.ops[i].cat == LC_PROFILE_ATTENTION && r.ops[i].calls[LC_PROFILE_DECODE] > 0;
    CHECK(named);
    CHECK(lc_model_profile_reset(prof) == LC_OK);
    CHECK(lc_model_profile(prof, &r) == LC_OK);
    CHECK(r.total_s[LC_PROFILE_DECODE] == 0 && r.n_forwards[LC_PROFILE_DECODE] == 0 &&
          r.calls[LC_PROFILE_PREFILL][LC_PROFILE_GEMM] == 0);

    /* memory: KV = pages x page bytes exactly (tiny: 2 layers, 2 KV heads, head dim 16, fp32
     * on the CPU, K and V, 64-token pages, 256 tokens = 4 pages) */
    lc_model_info info;
    lc_model_get_info(prof, &info);
    lc_memory_report mr;
    CHECK(lc_model_memory(prof, &mr) == LC_OK);
    const uint64_t page_bytes = 2ull * 2 * 2 * 64 * 16 * 4;
    CHECKF(mr.kv_bytes == 4 * page_bytes, "%llu", (unsigned long long)mr.kv_bytes);
    CHECKF(mr.weight_bytes == info.weight_bytes, "%llu vs %llu",
           (unsigned long long)mr.weight_bytes, (unsigned long long)info.weight_bytes);
    CHECK(mr.other_bytes > 0); /* the forward's workspace */
    CHECK(mr.peak_bytes >= mr.weight_bytes + mr.kv_bytes + mr.other_bytes);
    CHECK(mr.device_total_bytes == 0); /* CPU */
    lc_context_remove(ca, sa);
    lc_context_remove(cb, sb);
    lc_context_free(ca);
    lc_context_free(cb);
    CHECK(lc_model_memory(prof, &mr) == LC_OK);
    CHECKF(mr.kv_bytes == 0 && mr.other_bytes == 0, "%llu %llu", (unsigned long long)mr.kv_bytes,
           (unsigned long long)mr.other_bytes);
    CHECK(mr.peak_bytes >= mr.weight_bytes + 4 * page_bytes);
}

/* calls of the op named name in phase ph of the report, -1 when it is not listed; *cat its
 * category */
static int64_t op_calls(const lc_profile_report *r, const char *name, int ph, int *cat) {
    for (int i = 0; i < r->n_ops; i++)
        if (!strcmp(r->ops[i].name, name)) {
            *cat = r->ops[i].cat;
            return r->ops[i].calls[ph];
        }
    return -1;
}

/* TokenSelect's and HiP's selection ops and the sampling op are timed too (they were passed
 * through untimed, so `bench --profile` counted them as host time): a prompt longer than the
 * methods' budgets, a few greedy tokens, the op counted in both phases, as attention. */
static void sparse_ops_timed(lc_model *prof) {
    for (int method = 0; method < 2; method++) {
        CHECK(lc_model_profile_reset(prof) == LC_OK);
        lc_context_params cp = lc_context_default_params();
        cp.n_ctx             = 512;
        cp.page_size         = 64;
        if (method == 0) {
            cp.attn          = "tokenselect";
            cp.attn_settings = "k=32 init=16 local=64 chunk=64";
        } else {
            cp.attn          = "hip";
            cp.attn_settings = "k=32 sink=16 stream=32 dense-layers=0";
        }
        lc_context *c = NULL;
        CHECKF(lc_context_create(prof, &cp, &c) == LC_OK, "%s", lc_last_error());
        if (!c) continue;
        int32_t prompt[400];
        for (int i = 0; i < 400; i++) prompt[i] = 30 + (i * 53) % 200;
        lc_request req = {.prompt = prompt, .n_prompt = 400, .max_tokens = 4,
                          .sampling = lc_sampling_default(), .ignore_eos = true};
        req.sampling.temperature = 0.0f;
        int32_t sq;
        CHECK(lc_context_add(c, &req, &sq) == LC_OK);
        bool done = false;
        for (int steps = 0; !done && steps < 64; steps++) {
            lc_event ev[4];
            size_t   n = 0;
            CHECKF(lc_context_step(c, ev, 4, &n) == LC_OK, "%s", lc_last_error());
            if (n == 0) break;
            done = ev[0].finish != LC_FINISH_NONE;
        }
        CHECK(done);
        lc_profile_report r;
        CHECK(lc_model_profile(prof, &r) == LC_OK);
        const char *op  = method == 0 ? "select_tokens" : "select_blocks";
        int         cat = -1, scat = -1;
        const int64_t pre = op_calls(&r, op, LC_PROFILE_PREFILL, &cat);
        const int64_t dec = op_calls(&r, op, LC_PROFILE_DECODE, &cat);
        CHECKF(pre > 0 && dec > 0 && cat == LC_PROFILE_ATTENTION, "%s: %lld prefill, %lld decode "
               "calls, category %d", op, (long long)pre, (long long)dec, cat);
        const int64_t smp = op_calls(&r, "sample", LC_PROFILE_DECODE, &scat);
        CHECKF(smp > 0 && scat == LC_PROFILE_REST, "sample: %lld decode calls, category %d",
               (long long)smp, scat);
        lc_context_remove(c, sq);
        lc_context_free(c);
    }
}

/* A tiered allocation for the CPU backend, which has none (its memory is host memory): one
 * plain allocation of both parts, enough for the profiler's byte counts. */
static int n_tiered_live;
static void *stand_in_alloc_tiered(lc_backend *b, size_t dev_bytes, size_t host_bytes,
                                   const char *what) {
    (void)b;
    (void)what;
    n_tiered_live++;
    return malloc(dev_bytes + host_bytes);
}
static void stand_in_dealloc_tiered(lc_backend *b, void *p) {
    (void)b;
    if (p) n_tiered_live--;
    free(p);
}

/* The wrapper on its own: fields copied, untimed ops passed through, ownership of inner; a
 * tiered KV pool counted as its GPU part in kv_bytes (and the peak) and its host part in
 * kv_host_bytes. */
static void wrapper_fields(void) {
    lc_backend *inner = NULL, *w = NULL;
    CHECK(lc_backend_cpu_create(2, &inner) == LC_OK);
    if (!inner) return;
    inner->alloc_tiered   = stand_in_alloc_tiered;
    inner->dealloc_tiered = stand_in_dealloc_tiered;
    CHECK(lc_backend_profile_wrap(inner, false, &w) == LC_OK);
    if (!w) {
        inner->free(inner);
        return;
    }
    CHECK(lc_backend_is_profile(w) && !lc_backend_is_profile(inner));
    CHECK(!strcmp(w->name, inner->name) && w->device == inner->device &&
          w->weight_type == inner->weight_type && w->kv_type == inner->kv_type &&
          w->page_size == inner->page_size && w->n_threads == inner->n_threads &&
          w->impl == inner->impl);
    /* memory-only: the compute ops are the inner's own functions */
    CHECK(w->matmul == inner->matmul && w->attn_dense == inner->attn_dense &&
          w->batch_begin == inner->batch_begin);
    float *x = w->alloc(w, 64 * sizeof(float), "activations");
    CHECK(x != NULL);
    lc_memory_report mr;
    CHECK(lc_backend_profile_memory(w, &mr) == LC_OK && mr.other_bytes == 64 * sizeof(float));
    w->dealloc(w, x);
    CHECK(lc_backend_profile_memory(w, &mr) == LC_OK && mr.other_bytes == 0 &&
          mr.peak_bytes == 64 * sizeof(float));
    CHECK(w->alloc_tiered != inner->alloc_tiered && w->dealloc_tiered != inner->dealloc_tiered);
    void *pool = w->alloc_tiered(w, 4096, 3 * 4096, "kv pool K layer 0");
    CHECK(pool != NULL && n_tiered_live == 1);
    CHECKF(lc_backend_profile_memory(w, &mr) == LC_OK && mr.kv_bytes == 4096 &&
           mr.kv_host_bytes == 3 * 4096 && mr.other_bytes == 0 && mr.peak_bytes == 4096,
           "kv %llu host %llu peak %llu", (unsigned long long)mr.kv_bytes,
           (unsigned long long)mr.kv_host_bytes, (unsigned long long)mr.peak_bytes);
    w->dealloc_tiered(w, pool);
    CHECK(n_tiered_live == 0);
    CHECK(lc_backend_profile_memory(w, &mr) == LC_OK && mr.kv_bytes == 0 &&
          mr.kv_host_bytes == 0);
    lc_profile_report r;
    CHECK(lc_backend_profile_get(w, &r) == LC_OK && r.total_s[LC_PROFILE_DECODE] == 0);
    CHECK(lc_backend_profile_get(inner, &r) == LC_ERR_INVALID_ARG);
    char name[64];
    lc_backend_device_name(w, name, sizeof name);
    CHECK(!strcmp(name, "cpu"));
    w->free(w); /* frees inner too (ASan checks) */
}

/* The fields of struct lc_backend from free to its end are function pointers (backend.h). */
typedef void (*any_fn)(void);
_Static_assert((sizeof(lc_backend) - offsetof(lc_backend, free)) % sizeof(any_fn) == 0,
               "struct lc_backend: the fields from free on are no longer all function pointers");

/* What the wrapper passes through on purpose: queries, graph control (graphs are off while
 * profiling) and the measurement calls it times with. Every other function pointer is an op
 * and must be wrapped. */
static const size_t k_untimed[] = {
    offsetof(lc_backend, mem_info),      offsetof(lc_backend, graph_begin),
    offsetof(lc_backend, graph_end),     offsetof(lc_backend, graph_reset),
    offsetof(lc_backend, sync),          offsetof(lc_backend, device_name),
    offsetof(lc_backend, timers_create), offsetof(lc_backend, timers_free),
    offsetof(lc_backend, timer_mark),    offsetof(lc_backend, timer_ms),
};
/* ... and the memory calls it wraps to count bytes, not to time */
static const size_t k_memory[] = {
    offsetof(lc_backend, free),        offsetof(lc_backend, alloc),
    offsetof(lc_backend, dealloc),     offsetof(lc_backend, weight_load),
    offsetof(lc_backend, weight_free), offsetof(lc_backend, alloc_tiered),
    offsetof(lc_backend, dealloc_tiered),
};

static bool listed(const size_t *list, size_t n, size_t off) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == off) return true;
    return false;
}

static void stand_in(void) {} /* fills the CPU backend's NULL ops; never called */

static any_fn slot(const lc_backend *b, size_t off) {
    any_fn f;
    memcpy(&f, (const char *)b + off, sizeof f);
    return f;
}

/* Every op of the table is wrapped when ops are timed, and the report has a line per timed
 * op; kv_read through the wrapper is counted. */
static void every_op_wrapped(void) {
    const size_t first = offsetof(lc_backend, free), n_untimed = sizeof k_untimed / sizeof k_untimed[0];
    lc_backend  *inner = NULL, *w = NULL;
    CHECK(lc_backend_cpu_create(2, &inner) == LC_OK);
    if (!inner) return;
    /* ops the CPU lacks (upload_async, and any a later backend adds) get a stand-in, so the
     * wrapper's "wrap it when the inner has it" is exercised for them too */
    int stand_ins = 0;
    for (size_t off = first; off < sizeof(lc_backend); off += sizeof(any_fn))
        if (!slot(inner, off) && !listed(k_untimed, n_untimed, off)) {
            const any_fn f = stand_in;
            memcpy((char *)inner + off, &f, sizeof f);
            stand_ins++;
        }
    CHECK(stand_ins >= 1); /* upload_async */
    CHECK(lc_backend_profile_wrap(inner, true, &w) == LC_OK);
    if (!w) {
        inner->free(inner);
        return;
    }
    int timed = 0;
    for (size_t off = first; off < sizeof(lc_backend); off += sizeof(any_fn)) {
        const size_t field = (off - first) / sizeof(any_fn); /* 0: free */
        if (listed(k_untimed, n_untimed, off)) {
            CHECKF(slot(w, off) == slot(inner, off), "field %zu after free (offset %zu): a "
                   "query or measurement call, expected passed through", field, off);
            continue;
        }
        CHECKF(slot(w, off) != slot(inner, off) && slot(w, off) != NULL,
               "field %zu after free (offset %zu) of struct lc_backend is not wrapped by the "
               "profiler (backend/profile.c): bench --profile would not count it", field, off);
        if (!listed(k_memory, sizeof k_memory / sizeof k_memory[0], off)) timed++;
    }
    lc_profile_report r;
    CHECK(lc_backend_profile_get(w, &r) == LC_OK);
    CHECKF(r.n_ops == timed && r.n_ops <= LC_PROFILE_MAX_OPS, "report lines %d, timed ops %d",
           r.n_ops, timed);
    for (int i = 0; i < r.n_ops; i++)
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(r.ops[i].name, r.ops[j].name) != 0, "op %s listed twice", r.ops[i].name);
    w->free(w); /* the stand-ins are never called; free is the CPU's own */

    /* a real call through the wrapper is counted under its name */
    CHECK(lc_backend_cpu_create(2, &inner) == LC_OK);
    if (!inner) return;
    CHECK(lc_backend_profile_wrap(inner, true, &w) == LC_OK);
    if (!w) {
        inner->free(inner);
        return;
    }
    float                  pool[2 * 8 * 4] = {0}, out[2 * 4];
    const int32_t          table[1]        = {0};
    const lc_kv_layer_view kv              = {pool, pool, 8, 2, 4, NULL, false, NULL};
    CHECK(w->kv_read(w, &kv, table, 3, 1, LC_KV_VALUES, out) == LC_OK);
    CHECK(lc_backend_profile_get(w, &r) == LC_OK);
    int cat = -1;
    CHECKF(op_calls(&r, "kv_read", LC_PROFILE_OUTSIDE, &cat) == 1 && cat == LC_PROFILE_REST,
           "kv_read: %lld calls, category %d", (long long)op_calls(&r, "kv_read",
           LC_PROFILE_OUTSIDE, &cat), cat);
    w->free(w);
}

int main(void) {
    const char *dir = getenv("TMPDIR");
    char        path[512];
    snprintf(path, sizeof path, "%s/lc_test_profile_%d.gguf", dir && *dir ? dir : "/tmp",
             (int)getpid());
    lc_gen_params gp = {.config = "tiny", .path = path, .type = LC_GEN_BF16, .seed = 7};
    CHECKF(lc_model_generate(&gp) == LC_OK, "%s", lc_last_error());

    lc_model *plain = load(path, LC_PROFILE_OFF);
    lc_model *prof  = load(path, LC_PROFILE_OPS);
    lc_model *mem   = load(path, LC_PROFILE_MEMORY);
    if (plain && prof && mem) {
        lc_model_info info;
        lc_model_get_info(plain, &info);
        same_logits(plain, prof, info.n_vocab);
        sparse_ops_timed(prof);
        lc_profile_report r;
        lc_memory_report  mr;
        CHECK(lc_model_profile(plain, &r) == LC_ERR_INVALID_ARG);
        CHECK(lc_model_memory(plain, &mr) == LC_ERR_INVALID_ARG);
        CHECK(lc_model_profile(mem, &r) == LC_OK && r.n_forwards[LC_PROFILE_PREFILL] == 0);
        CHECK(lc_model_memory(mem, &mr) == LC_OK && mr.weight_bytes == info.weight_bytes);
        char name[64];
        CHECK(lc_model_device_name(prof, name, sizeof name) == LC_OK && !strcmp(name, "cpu"));
        lc_model_params bad = lc_model_default_params();
        bad.profile         = 7;
        lc_model *m         = NULL;
        CHECK(lc_model_load(path, &bad, &m) == LC_ERR_INVALID_ARG && m == NULL);
    }
    lc_model_free(plain);
    lc_model_free(prof);
    lc_model_free(mem);
    wrapper_fields();
    every_op_wrapped();
    remove(path);
    TEST_END();
}
