/*
 * longctx.h — the only public API of liblongctx.
 *
 * longctx runs llama-family GGUF models (llama, mistral, qwen2) over very long inputs. This
 * header exposes: status codes and logging, GGUF inspection, the tokenizer and chat
 * templates, the backend's tuning, model loading, and an engine ("context") that advances a
 * set of sequences one step at a time (prefill chunks and decode tokens), with sampling and
 * stop conditions.
 *
 * Conventions: opaque handles, functions named lc_<noun>_<verb>, int status (LC_OK = 0,
 * negative LC_ERR_* on failure). After a failure, lc_last_error() returns a one-line message
 * for the calling thread that says what went wrong and where. The library never prints to
 * stdout and never exits; it logs through the callback set with lc_log_set(). A NULL
 * pointer where a count says there is data (prompt, stop strings, events, messages, text) is
 * LC_ERR_INVALID_ARG, never a read through it.
 *
 * Lifetimes (which handle must outlive which):
 *   - lc_gguf: the file stays mapped until lc_gguf_close; lc_gguf_tensor pointers and
 *     strings read from it die with it. lc_tokenizer_load copies what it needs: a tokenizer
 *     outlives its lc_gguf. lc_gguf_open_memory does not copy: the caller's bytes must
 *     outlive the handle.
 *   - lc_model: lc_model_free releases the caller's handle; a context holds its model, so
 *     the model (weights, tokenizer, backend) is freed when its last context is freed, and
 *     freeing the model first is allowed. Pointers obtained from the model
 *     (lc_model_tokenizer) stay valid while the model lives, i.e. while the caller's handle
 *     or any context of it does.
 *   - lc_context: event text, event errors and lc_context_logits rows are valid until the
 *     next lc_context_step / lc_context_score / lc_context_remove on that context.
 *   - Every lc_*_free / close accepts NULL; freeing twice is a caller bug.
 *
 * Threads:
 *   - lc_last_error is per thread. lc_log_set is not synchronised: call it before other
 *     threads use the library; the callback may be called from any thread that calls in.
 *   - A context, and a tokenizer's lc_detok state, are used by one thread at a time.
 *   - Reading functions of a model, tokenizer or lc_gguf (info, encode, token bytes, chat
 *     formatting) may be called from several threads at once.
 *   - Contexts of one model on the CPU backend may run steps on different threads at once
 *     (weights are read-only; each context owns its KV cache and scratch). On the CUDA
 *     backend, the model's backend keeps per-model scratch and one stream: calls into
 *     different contexts of one CUDA model must not overlap (serialise them, or serve many
 *     sequences from one context, which is what it is for). Creating and freeing contexts
 *     follows the same rule as stepping them.
 */
#ifndef LONGCTX_H
#define LONGCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and logging ---------------------------------------------------------------- */

enum lc_status {
    LC_OK              = 0,
    LC_ERR_INVALID_ARG = -1, /* a caller-supplied value is out of range */
    LC_ERR_IO          = -2, /* open/read/mmap failed */
    LC_ERR_FORMAT      = -3, /* a file is malformed (GGUF, tokenizer metadata, ...) */
    LC_ERR_UNSUPPORTED = -4, /* valid but not supported (arch, quant type, backend) */
    LC_ERR_NOMEM       = -5, /* allocation failed */
    LC_ERR_CONTEXT     = -6, /* the request does not fit the context / KV capacity */
    LC_ERR_NOT_FOUND   = -7, /* a key, tensor, sequence or name does not exist */
    LC_ERR_INTERNAL    = -8, /* an invariant broke: a bug */
    LC_ERR_NUMERIC     = -9, /* NaN or Inf appeared in the model's computation (broken
                                weights or values out of range); the message names where */
};

const char *lc_status_str(int status);
/* Message of the last failure in the calling thread ("" if none). Valid until the next call
 * into the library from this thread. */
const char *lc_last_error(void);

typedef enum lc_log_level {
    LC_LOG_DEBUG = 0,
    LC_LOG_INFO  = 1,
    LC_LOG_WARN  = 2,
    LC_LOG_ERROR = 3,
    LC_LOG_NONE  = 4,
} lc_log_level;

typedef void (*lc_log_fn)(lc_log_level level, const char *msg, void *user);
/* Route library logs to fn (NULL: discard). Messages below min_level are dropped. Default:
 * WARN and above to stderr. */
void lc_log_set(lc_log_fn fn, void *user, lc_log_level min_level);

/* Render n bytes of s (text from a file or a peer: names, metadata, token text) safely for a
 * terminal or a log line: printable ASCII and valid UTF-8 characters are kept; control
 * characters (ESC, CR, LF, TAB, ...), DEL, C1 controls (U+0080..U+009F), bytes of invalid
 * UTF-8 become "\xHH" and a backslash becomes "\\". Writes at most cap bytes including the
 * terminating NUL; a rendering that does not fit is cut at a character boundary and ends in
 * "..." (when cap is at least 4). Every message of the library that quotes file content goes through it. Returns buf
 * ("" when buf is NULL or cap is 0). s may be NULL when n is 0. */
const char *lc_text_escape(char *buf, size_t cap, const char *s, size_t n);

/* ---- build ----------------------------------------------------------------------------- */
/* What this library is: its version, the commit it was built from ("unknown" outside a git
 * checkout), whether it has the CUDA backend and for which GPU architectures ("" without). */
typedef struct lc_build_info {
    const char *version;
    const char *commit;
    bool        cuda;
    const char *cuda_archs;
} lc_build_info;
lc_build_info lc_build(void);
/* The name of the GPU the CUDA backend would use (device 0) into buf: LC_OK, or
 * LC_ERR_UNSUPPORTED (with lc_last_error saying why) when the build has no CUDA backend or the
 * machine no usable device. */
int lc_gpu_name(char *buf, size_t cap);

/* ---- GGUF files ------------------------------------------------------------------------ */

typedef struct lc_gguf lc_gguf;

typedef enum lc_gguf_type {
    LC_GGUF_TYPE_INVALID = -1, /* returned for an index out of range */
    LC_GGUF_TYPE_UINT8   = 0,
    LC_GGUF_TYPE_INT8    = 1,
    LC_GGUF_TYPE_UINT16  = 2,
    LC_GGUF_TYPE_INT16   = 3,
    LC_GGUF_TYPE_UINT32  = 4,
    LC_GGUF_TYPE_INT32   = 5,
    LC_GGUF_TYPE_FLOAT32 = 6,
    LC_GGUF_TYPE_BOOL    = 7,
    LC_GGUF_TYPE_STRING  = 8,
    LC_GGUF_TYPE_ARRAY   = 9,
    LC_GGUF_TYPE_UINT64  = 10,
    LC_GGUF_TYPE_INT64   = 11,
    LC_GGUF_TYPE_FLOAT64 = 12,
} lc_gguf_type;

/* One tensor of the file. ne[0] is the contiguous (row) dimension, as in ggml. */
typedef struct lc_gguf_tensor {
    const char *name;    /* NUL-terminated copy */
    uint32_t    n_dims;  /* 1..4 */
    uint64_t    ne[4];   /* unused dims are 1 */
    uint32_t    type;    /* ggml type id (enum lc_type) */
    uint64_t    offset;  /* from the start of the data section */
    uint64_t    nbytes;  /* bytes of the tensor data */
    const void *data;    /* points into the mapping */
} lc_gguf_tensor;

/* Map and parse a GGUF file (v2 or v3). Every count, length, offset and dimension is checked;
 * errors name the field and the byte offset. */
int  lc_gguf_open(const char *path, lc_gguf **out);
/* Parse a GGUF image already in memory (not copied: data must outlive the handle). */
int  lc_gguf_open_memory(const void *data, size_t size, lc_gguf **out);
void lc_gguf_close(lc_gguf *g);

uint32_t lc_gguf_version(const lc_gguf *g);
uint32_t lc_gguf_alignment(const lc_gguf *g);
int64_t  lc_gguf_n_kv(const lc_gguf *g);
int64_t  lc_gguf_n_tensors(const lc_gguf *g);
/* Index of key, or -1 when absent. */
int64_t      lc_gguf_find_key(const lc_gguf *g, const char *key);
const char  *lc_gguf_kv_key(const lc_gguf *g, int64_t i);
lc_gguf_type lc_gguf_kv_type(const lc_gguf *g, int64_t i);
/* Element type and count when the value is an array (else LC_ERR_INVALID_ARG). */
int lc_gguf_kv_array_info(const lc_gguf *g, int64_t i, lc_gguf_type *elem_type, uint64_t *n);
/* Human-readable rendering of a value; long arrays abbreviated to max_elems elements.
 * Always NUL-terminates buf (truncating). */
int lc_gguf_kv_format(const lc_gguf *g, int64_t i, size_t max_elems, char *buf, size_t cap);

const lc_gguf_tensor *lc_gguf_tensor_at(const lc_gguf *g, int64_t i);
/* NULL when absent. */
const lc_gguf_tensor *lc_gguf_find_tensor(const lc_gguf *g, const char *name);
/* "f32", "q4_1", ... or NULL for an unknown id. */
const char *lc_type_name(uint32_t type);

/* ---- tokenizer and chat templates ------------------------------------------------------ */

typedef struct lc_tokenizer lc_tokenizer;

/* Build the tokenizer described by a GGUF file's tokenizer.ggml.* metadata. */
int  lc_tokenizer_load(const lc_gguf *g, lc_tokenizer **out);
void lc_tokenizer_free(lc_tokenizer *t);

int32_t lc_tokenizer_n_vocab(const lc_tokenizer *t);
int32_t lc_tokenizer_bos(const lc_tokenizer *t); /* -1 if none */
int32_t lc_tokenizer_eos(const lc_tokenizer *t); /* -1 if none */
bool    lc_tokenizer_add_bos(const lc_tokenizer *t);
/* True for tokens that end a generation (EOS, EOT, <|im_end|>, ...). */
bool lc_tokenizer_is_eog(const lc_tokenizer *t, int32_t id);

/* Encode len bytes of UTF-8 text. add_bos: prepend BOS if the model wants one.
 * parse_special: recognise special-token text such as "<|im_start|>" as single tokens;
 * otherwise it is tokenized as plain text. On LC_OK *ids is a malloc'd array of *n_ids ids
 * (caller frees with free()). Invalid UTF-8 is an error (LC_ERR_INVALID_ARG, byte offset in
 * lc_last_error()). */
int lc_tokenizer_encode(const lc_tokenizer *t, const char *text, size_t len, bool add_bos,
                        bool parse_special, int32_t **ids, size_t *n_ids);

/* A byte range [start, start + len) of a text. */
typedef struct lc_text_span {
    size_t start, len;
} lc_text_span;

/* As lc_tokenizer_encode with parse_special on, except inside the n_plain plain spans (any
 * order, may overlap, each within the text): a special token is recognised only where none of
 * its bytes lies in a plain span, so plain text is tokenized exactly as with parse_special
 * off (user-defined tokens still match there, as they do with it off). This is how untrusted
 * text (a document, a question, a chat message) is kept from forging control tokens such as
 * "<|im_start|>" while a template's own markers stay special: without special-token text
 * in the plain spans the ids equal lc_tokenizer_encode's with parse_special on.
 * LC_ERR_INVALID_ARG for a span outside the text. */
int lc_tokenizer_encode_spans(const lc_tokenizer *t, const char *text, size_t len, bool add_bos,
                              const lc_text_span *plain, size_t n_plain, int32_t **ids,
                              size_t *n_ids);
/* Raw bytes a token stands for (byte-level mapping undone), not NUL-terminated; NULL for an
 * invalid id. Control tokens render as their text. */
const char *lc_tokenizer_token_bytes(const lc_tokenizer *t, int32_t id, size_t *len);
/* The vocabulary entry as stored (e.g. "Ġthe"). */
const char *lc_tokenizer_token_text(const lc_tokenizer *t, int32_t id);

/* Incremental detokeniser: feeds token ids, emits only whole UTF-8 characters. */
typedef struct lc_detok {
    unsigned char pending[8];
    size_t        n_pending;
} lc_detok;
/* Appends the printable bytes of id to out (cap bytes, NUL-terminated); *n_out = bytes
 * written. Bytes of an unfinished UTF-8 character stay pending; an invalid sequence is
 * replaced by U+FFFD (3 bytes each). cap must be >= 64 + 3 x the token's length. */
int lc_detok_push(lc_detok *d, const lc_tokenizer *t, int32_t id, char *out, size_t cap,
                  size_t *n_out);
/* Emits whatever is pending (as U+FFFD if incomplete). */
int lc_detok_flush(lc_detok *d, char *out, size_t cap, size_t *n_out);

typedef enum lc_chat_template {
    LC_CHAT_TEMPLATE_NONE    = 0,
    LC_CHAT_TEMPLATE_CHATML  = 1, /* SmolLM2, Qwen2 */
    LC_CHAT_TEMPLATE_LLAMA3  = 2,
    LC_CHAT_TEMPLATE_MISTRAL = 3, /* [INST] ... [/INST] */
    LC_CHAT_TEMPLATE_GEMMA   = 4, /* <start_of_turn>user ... <end_of_turn> (Gemma 1-3) */
    LC_CHAT_TEMPLATE_PHI3    = 5, /* <|user|>\n ... <|end|> (Phi-3, Phi-3.5) */
    LC_CHAT_TEMPLATE_LLAMA31 = 6, /* "llama3.1": llama3 with the dated system turn of
                                     Llama-3.1/3.2/3.3 */
} lc_chat_template;

typedef struct lc_chat_message {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} lc_chat_message;

/* Detect the template family from a Jinja template string (tokenizer.chat_template) by the
 * markers it writes (no Jinja is interpreted): chatml (Qwen, SmolLM), llama3, llama3.1,
 * mistral, gemma, phi3. LC_ERR_NOT_FOUND, with a one-line message naming --chat-template and
 * the families, for a template that is none of them (or none at all). */
int lc_chat_template_detect(const char *jinja, lc_chat_template *out);
/* The family names, ", "-separated: "chatml, llama3, llama3.1, mistral, gemma, phi3". */
const char *lc_chat_template_names(void);
/* From a name (one of lc_chat_template_names). LC_ERR_NOT_FOUND for other names. */
int         lc_chat_template_from_name(const char *name, lc_chat_template *out);
const char *lc_chat_template_name(lc_chat_template t);
/* Format a conversation; add_assistant: end with the assistant turn header. *out is
 * malloc'd (caller frees). */
int lc_chat_format(lc_chat_template t, const lc_chat_message *msgs, size_t n_msgs,
                   bool add_assistant, char **out);
/* As lc_chat_format, also returning where the message text lies in *out: *spans (malloc'd,
 * caller frees; may be NULL when *n_spans is 0) lists, in order, the bytes of every role and
 * content (as written: llama3's trimmed content). Everything else is the template's own text.
 * Give the spans to lc_tokenizer_encode_spans so that message text is tokenized as plain
 * text. */
int lc_chat_format_spans(lc_chat_template t, const lc_chat_message *msgs, size_t n_msgs,
                         bool add_assistant, char **out, lc_text_span **spans, size_t *n_spans);

/* ---- tuning: the backend's kernel choices ---------------------------------------------- */

/* Which kernels and launch variants the backend uses, for comparisons, benchmarks and tests.
 * Every choice computes the same function (within the rounding of the kernels a test compares
 * them at); the defaults are the fastest measured. The library reads no environment variables:
 * this struct (lc_model_params.tuning) is the only switch. Zero in every field is the default
 * (lc_tuning_default); each field names the value lc_tuning_set takes ("--tune NAME=VALUE" on
 * the command line). Fields that name a kernel the build or the GPU does not have fall back to
 * what there is. The CPU backend has one kernel per op and ignores them all. */
typedef enum lc_tune_switch {
    LC_TUNE_AUTO = 0, /* the backend decides per call */
    LC_TUNE_OFF  = 1,
    LC_TUNE_ON   = 2,
} lc_tune_switch;

typedef enum lc_tune_scan {
    LC_TUNE_SCAN_AUTO   = 0, /* a warp per range of segments for long lists, else per thread */
    LC_TUNE_SCAN_THREAD = 1, /* per-thread ranges of segments for every list */
    LC_TUNE_SCAN_WARP   = 2, /* warp ranges for every list */
} lc_tune_scan;

typedef enum lc_tune_ts_path {
    LC_TUNE_TS_AUTO    = 0, /* the fused cooperative kernel for calls of at most 8 blocks
                               (decode), the separate kernels for larger calls */
    LC_TUNE_TS_KERNELS = 1, /* always the separate kernels (9 launches a group of blocks) */
    LC_TUNE_TS_FUSED   = 2, /* always the fused kernel (groups of at most 8 blocks) */
} lc_tune_ts_path;

typedef enum lc_tune_transpose {
    LC_TUNE_TRANSPOSE_AUTO = 0, /* decode-sized launches score transposed (relative RoPE: keys
                                   straight into registers) */
    LC_TUNE_TRANSPOSE_OFF  = 1, /* never transposed */
    LC_TUNE_TRANSPOSE_SMEM = 2, /* transposed, always through shared memory */
} lc_tune_transpose;

typedef struct lc_tuning {
    /* model forward (CPU) */
    bool    cpu_q8_dot; /* cpu-dot=q8: decode products (1-4 input rows) over native Q4_0,
                           Q4_1, Q8_0, Q4_K and Q6_K weights quantise the input rows to 8 bits
                           per 32 values and multiply integers (AVX-512 VNNI; llama.cpp's
                           arithmetic, not the weights' exact products); prompt products stay
                           on fp32 tiles, which measured faster; fp32, the default: the
                           dequantised weights times the fp32 inputs */
    /* model forward (CUDA) */
    bool    no_cuda_graphs; /* cuda-graphs=off: decode steps are never captured and replayed
                               as CUDA graphs (on: they are, except on a model loaded with
                               LC_PROFILE_OPS, whose ops are timed one by one) */
    bool    no_gemv;        /* gemv=off: every matrix product through cuBLASLt (on: products
                               of 1-4 rows, decode, through our GEMV on the fp32 inputs) */
    bool    prefill_mma;    /* prefill=mma: dense prefill attention on the mma.sync kernel
                               (auto: the wgmma kernel on Hopper when the build has sm_90a) */
    bool    dense_decode_direct; /* dense-decode=direct: dense decode attention on the direct
                                    kernel (fp8 codes straight into the mma fragments, queries
                                    rotated once a page for the CTA, any number of query heads
                                    per KV head; not yet measured on a GPU: bench/NOTES.md 65);
                                    staged, the default: fp8 pages dequantised through a shared
                                    fp16 stage, 1..16 query heads per KV head */
    /* sparse attention (InfiniteHiP, HiP, TokenSelect: op attn_segments) */
    bool    sparse_prefill_mma;    /* sparse-prefill=mma: the mma.sync kernel (auto: wgmma on
                                      Hopper with sm_90a, as the dense prefill) */
    bool    sparse_decode_prefill; /* sparse-decode=prefill: calls of one-row blocks (decode)
                                      take the prefill kernels too (auto: the split kernels) */
    bool    no_sparse_pdl;         /* sparse-pdl=off: the decode merge is an ordinary launch
                                      (on: a programmatic dependent of the split kernel, sm_90) */
    int32_t sparse_decode_scan;    /* sparse-decode-scan=auto|thread|warp (lc_tune_scan): how
                                      the decode kernel scans a segment list */
    int32_t rotate_keys; /* rotate-keys=auto|off|on (lc_tune_switch): InfiniteHiP with plain
                            RoPE in a prefill-sized call rotates the prefill sequences' keys once
                            per layer into fp16 tiles its kernels read (auto: when the call reads
                            keys at least twice as often as that pass touches them) */
    /* InfiniteHiP pruning stages (op prune_chunks) */
    bool    stage_one_cta;   /* stage-one-cta=on: every chunk wave of a unit in one CTA (and up
                                to 4 blocks a CTA in the first stage), the select reading the
                                scores from global memory (off: spread over the GPU) */
    int32_t stage_tiles;     /* stage-tiles=auto|1|2|4: 8-chunk tiles per warp (0: auto, from
                                the launch size) */
    int32_t stage_transpose; /* stage-transpose=auto|off|smem (lc_tune_transpose) */
    /* TokenSelect selection (op select_tokens) */
    int32_t ts_select_path;     /* ts-select-path=auto|kernels|fused (lc_tune_ts_path) */
    int32_t ts_select_launches; /* ts-select-launches=auto|1|2|3: launches of the fused path (0:
                                   auto, 1: fingerprints and logits inside the fused kernel;
                                   2: fingerprints a launch of their own; 3: logits too) */
    int32_t ts_select_group;    /* ts-select-group=auto|N: at most N query blocks a group of
                                   the separate kernels (0: as many as a 256 MiB scratch
                                   budget holds) */
    /* profiling (lc_model_params.profile = LC_PROFILE_OPS on CUDA) */
    bool    profile_sync; /* profile-sync=on: the device synchronised before and after each op,
                             wall time (off: CUDA events around each op, device time) */
} lc_tuning;

/* Every field at its default (all zero). */
lc_tuning lc_tuning_default(void);
/* One field by name, as --tune NAME=VALUE: cuda-graphs=on|off gemv=on|off prefill=auto|mma
 * dense-decode=staged|direct sparse-prefill=auto|mma sparse-decode=auto|prefill sparse-pdl=on|off
 * sparse-decode-scan=auto|thread|warp rotate-keys=auto|off|on stage-one-cta=off|on
 * stage-tiles=auto|1|2|4 stage-transpose=auto|off|smem ts-select-path=auto|kernels|fused
 * ts-select-launches=auto|1|2|3 ts-select-group=auto|N profile-sync=off|on ('-' and '_' alike).
 * LC_ERR_INVALID_ARG with a message naming the knob and its allowed values for an unknown name
 * or a bad value (t is then unchanged). */
int lc_tuning_set(lc_tuning *t, const char *name, const char *value);
/* One line per field, indented by indent columns: "NAME=VALUES  what it picks" (the CLI's
 * --tune help); LC_ERR_INVALID_ARG when cap bytes do not hold it. */
int lc_tuning_help(int indent, char *buf, size_t cap);
/* The fields that differ from the default as "NAME=VALUE NAME=VALUE", or "default"; cap bytes
 * with the NUL (LC_ERR_INVALID_ARG when it does not fit, or for a field out of its range). */
int lc_tuning_describe(const lc_tuning *t, char *buf, size_t cap);

/* ---- model ----------------------------------------------------------------------------- */

typedef struct lc_model lc_model;

typedef enum lc_device {
    LC_DEVICE_AUTO = 0, /* CUDA when this build has it and a GPU is present, else the CPU */
    LC_DEVICE_CPU  = 1,
    LC_DEVICE_CUDA = 2,
} lc_device;

/* Progress of a long operation: done out of total units. */
typedef void (*lc_progress_fn)(int64_t done, int64_t total, void *user);

/* How a backend holds weight matrices. */
typedef enum lc_weight_format {
    LC_WEIGHTS_AUTO   = 0, /* the backend's default: native (CPU without AVX-512: f32 where
                              that copy fits) */
    LC_WEIGHTS_F32    = 1, /* CPU: dequantised once at load to fp32, the reference */
    LC_WEIGHTS_F16    = 2, /* CPU and CUDA: values rounded to fp16 (CPU: half the traffic of
                              f32) */
    LC_WEIGHTS_BF16   = 3, /* CUDA: every matrix rounded to bf16 */
    LC_WEIGHTS_NATIVE = 4, /* every matrix in the file's own type. CPU: read from the file's
                              mapped pages (no copy: resident memory is about the file's size),
                              the products dequantise rows or tiles as they go, so the values
                              multiplied are those of f32. CUDA: the file's bytes in GPU memory
                              for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K (and F16,
                              BF16), the others converted to f16 with a log line; decode
                              products read the blocks (fp32 inputs, the exact weights), larger
                              ones dequantise slices of rows to f16 for the tensor cores */
} lc_weight_format;

typedef struct lc_model_params {
    lc_device        device;
    int              n_threads; /* 0: all cores */
    lc_weight_format weights;
    lc_progress_fn progress;  /* loading progress (tensors), may be NULL */
    void          *progress_user;
    int            profile;   /* lc_profile_mode (below); 0: off */
    /* false (default): before loading, the weights as the backend will hold them (CPU: 4 bytes
     * an element for f32, 2 for f16; CUDA: 2) are compared with the memory there is (host:
     * MemAvailable, within a cgroup limit; CUDA: the GPU's free memory), and a model that does
     * not fit is refused with LC_ERR_NOMEM and the numbers. true: load anyway (the CLI's
     * --overcommit). */
    bool           overcommit;
    lc_tuning      tuning;    /* the backend's kernel choices (above); default all zero. A
                                 field out of its range fails the load (LC_ERR_INVALID_ARG) */
} lc_model_params;

lc_model_params lc_model_default_params(void);
/* The host's memory in bytes: *available = what can be allocated without swapping
 * (/proc/meminfo MemAvailable, lowered to what a cgroup memory limit leaves), *total = its
 * physical memory (or the cgroup limit). Either may be NULL. What the memory checks of
 * lc_model_load and lc_context_create compare with. */
int lc_host_memory(uint64_t *available, uint64_t *total);
int             lc_model_load(const char *path, const lc_model_params *params, lc_model **out);
/* Release the caller's handle. Contexts of the model keep it alive; it is freed with the
 * last of them (see "Lifetimes" above). NULL is a no-op. */
void            lc_model_free(lc_model *m);

typedef struct lc_model_info {
    char     arch[32];
    char     name[96];
    int32_t  n_layer;
    int32_t  n_embd;
    int32_t  n_head;
    int32_t  n_head_kv;
    int32_t  head_dim;
    int32_t  n_ff;
    int32_t  n_vocab;
    int32_t  n_ctx_train;
    float    rope_freq_base;
    float    norm_eps;
    uint64_t n_params;
    uint64_t weight_bytes; /* bytes of weights as held by the backend */
    lc_device device;
    int32_t  n_threads;    /* CPU threads the backend uses */
} lc_model_info;

int                 lc_model_get_info(const lc_model *m, lc_model_info *info);

/* ---- profiling and memory accounting (for benchmarks) ---------------------------------- */

typedef enum lc_profile_mode {
    LC_PROFILE_OFF    = 0,
    LC_PROFILE_MEMORY = 1, /* count the backend's memory (weights, KV pools, the rest); no cost
                              per op */
    LC_PROFILE_OPS    = 2, /* also time every op: CPU wall time; CUDA events around each op
                              (device time; tuning.profile_sync: the device synchronised
                              before and after each op, wall time). On CUDA this turns the
                              model's CUDA graphs off (as tuning.no_cuda_graphs): ops replayed
                              from a graph cannot be timed one by one */
} lc_profile_mode;

typedef enum lc_profile_cat {
    LC_PROFILE_ATTENTION = 0, /* attn_dense, prune_chunks, attn_segments, select_tokens, select_blocks */
    LC_PROFILE_GEMM      = 1, /* matmul (the projections, the FFN and the output head) */
    LC_PROFILE_REST      = 2, /* every other op: norms, RoPE, KV write, copies, ... */
    LC_PROFILE_N_CAT     = 3,
} lc_profile_cat;

typedef enum lc_profile_phase {
    LC_PROFILE_DECODE  = 0, /* forwards in which every sequence has one new row */
    LC_PROFILE_PREFILL = 1, /* other forwards */
    LC_PROFILE_OUTSIDE = 2, /* ops outside a forward (setup), and before the first one */
    LC_PROFILE_N_PHASE = 3,
} lc_profile_phase;

#define LC_PROFILE_MAX_OPS 24

typedef struct lc_profile_op {
    const char    *name; /* the op table's field name: "matmul", "attn_dense", ... */
    lc_profile_cat cat;
    double         seconds[LC_PROFILE_N_PHASE];
    int64_t        calls[LC_PROFILE_N_PHASE];
} lc_profile_op;

typedef struct lc_profile_report {
    const char   *timing; /* how ops were timed (static text) */
    int64_t       n_forwards[LC_PROFILE_N_PHASE];
    double        seconds[LC_PROFILE_N_PHASE][LC_PROFILE_N_CAT];
    int64_t       calls[LC_PROFILE_N_PHASE][LC_PROFILE_N_CAT];
    double        total_s[LC_PROFILE_N_PHASE]; /* = the sum over categories */
    int32_t       n_ops;
    lc_profile_op ops[LC_PROFILE_MAX_OPS];
} lc_profile_report;

/* Op times since the load or the last reset. LC_ERR_INVALID_ARG when the model was loaded
 * without a profile mode; with LC_PROFILE_MEMORY the times and counts stay zero. */
int lc_model_profile(const lc_model *m, lc_profile_report *out);
int lc_model_profile_reset(lc_model *m);

typedef struct lc_memory_report {
    uint64_t weight_bytes; /* weights as the backend holds them */
    uint64_t kv_bytes;     /* KV page pools live now in backend memory (all layers, K and V;
                              a tiered pool's GPU tier) */
    uint64_t kv_host_bytes; /* the host tier of tiered KV pools live now (pinned host memory;
                               not in peak_bytes, which counts backend memory) */
    uint64_t other_bytes;  /* other backend allocations live now: activations, tables */
    uint64_t peak_bytes;   /* the most of the three together at any time */
    /* GPU (0 on the CPU): the device as cudaMemGetInfo sees it, all processes and the CUDA
     * context included; peak_used is the most seen, sampled at each allocation, at the start
     * of every forward with LC_PROFILE_OPS, and at each lc_model_memory call */
    uint64_t device_total_bytes, device_used_bytes, device_peak_used_bytes;
} lc_memory_report;

/* LC_ERR_INVALID_ARG unless the model was loaded with a profile mode. */
int lc_model_memory(lc_model *m, lc_memory_report *out);
/* The compute device's name: the GPU's (cudaGetDeviceProperties) or "cpu". */
int lc_model_device_name(const lc_model *m, char *buf, size_t cap);
/* ---- random-weight models of real configurations (for speed work without downloads) ---- */


/* Weight type of a generated model (norms, biases and rope factors stay f32). The K types
 * (256-value blocks) fall back for a matrix whose rows are not a multiple of 256 values, as
 * llama.cpp's quantiser does: q4_K to q5_0, q5_K to q5_1, q6_K to q8_0. LC_GEN_Q4_K_M: q4_K,
 * with q6_K for output.weight and for attn_v and ffn_down of layers l < n/8, l >= 7n/8 and
 * every third between ((l - n/8) % 3 == 2), the tensor mix of llama.cpp's Q4_K_M files. The
 * values are round-to-nearest from each block's range (format/quantize.h), close to but not
 * as accurate as llama-quantize's. */
typedef enum lc_gen_type {
    LC_GEN_BF16   = 0,
    LC_GEN_Q8_0   = 1,
    LC_GEN_Q4_0   = 2,
    LC_GEN_Q4_1   = 3,
    LC_GEN_Q5_0   = 4,
    LC_GEN_Q5_1   = 5,
    LC_GEN_Q4_K   = 6,
    LC_GEN_Q5_K   = 7,
    LC_GEN_Q6_K   = 8,
    LC_GEN_Q4_K_M = 9,
} lc_gen_type;

typedef struct lc_gen_params {
    const char    *config;  /* "llama-3.1-8b", "llama-3.2-1b", "qwen2.5-7b", "smollm2-135m", "tiny" */
    const char    *path;    /* output GGUF file (overwritten) */
    lc_gen_type    type;    /* out of range: LC_ERR_INVALID_ARG */
    uint64_t       seed;    /* same seed, config and type: byte-identical file */
    lc_progress_fn progress; /* tensors written / total, may be NULL */
    void          *progress_user;
} lc_gen_params;

/* Write a GGUF file with the architecture, shapes and metadata of a named configuration,
 * deterministic random weights (std ~0.02, norms 1.0) and a synthetic byte-level BPE
 * tokenizer of the configuration's vocabulary size; lc_model_load reads it like any GGUF.
 * Streams tensor by tensor (memory stays small at any size). Fails with LC_ERR_NOT_FOUND for
 * an unknown config, LC_ERR_IO naming the path when writing fails (the partial file is
 * removed). */
int lc_model_generate(const lc_gen_params *p);
/* A generated type's name ("q4_k_m"; NULL if out of range), the names ", "-separated, and
 * the type of a name (LC_ERR_NOT_FOUND with the names if none). */
const char *lc_gen_type_name(lc_gen_type t);
const char *lc_gen_type_names(void);
int         lc_gen_type_parse(const char *name, lc_gen_type *out);
/* Architecture ("llama", "qwen2") of a named configuration, NULL if unknown. */
const char *lc_gen_config_arch(const char *config);
/* The known configuration names, ", "-separated (for messages). */
const char *lc_gen_config_names(void);

const lc_tokenizer *lc_model_tokenizer(const lc_model *m);
/* The chat template the model's metadata names (NONE if absent or unrecognised). */
lc_chat_template lc_model_chat_template(const lc_model *m);
/* Format a conversation the way the model's own template does (including a default system
 * prompt the template inserts). tmpl overrides the template when not NONE. Fails with
 * LC_ERR_NOT_FOUND when the model names no known template and no override is given. */
int lc_model_chat_format(const lc_model *m, lc_chat_template tmpl, const lc_chat_message *msgs,
                         size_t n_msgs, bool add_assistant, char **out);
/* As lc_model_chat_format with the spans of lc_chat_format_spans (the inserted default system
 * prompt is message text too). */
int lc_model_chat_format_spans(const lc_model *m, lc_chat_template tmpl,
                               const lc_chat_message *msgs, size_t n_msgs, bool add_assistant,
                               char **out, lc_text_span **spans, size_t *n_spans);
/* Format a conversation (as lc_model_chat_format) and tokenize it for the model in one call:
 * BOS when the model wants one, the template's markers as special tokens, and every role and
 * message content as plain text (lc_tokenizer_encode_spans): a message cannot forge a turn
 * with "<|im_start|>system\n..." or end one early. *ids is malloc'd (caller frees). Fails as
 * lc_model_chat_format does, or with LC_ERR_INVALID_ARG for invalid UTF-8 in a message. */
int lc_model_chat_tokenize(const lc_model *m, lc_chat_template tmpl, const lc_chat_message *msgs,
                           size_t n_msgs, bool add_assistant, int32_t **ids, size_t *n_ids);

/* ---- attention methods ------------------------------------------------------------------ */

/* A method is named by a string ("dense", "infinitehip", "hip", "tokenselect") and set by a
 * settings string "preset=NAME key=value key=value ..." (space-separated; list values
 * comma-separated: "k=32768,8192,2048"): the keys are applied over the named preset (or the
 * method's default preset when none is named). Each method declares its settings once, as a
 * table: lc_attn_help writes it. Bad settings fail with LC_ERR_INVALID_ARG and one line naming
 * the method, the key and what is allowed (lc_last_error): "infinitehip: tail-block=65 is
 * outside 0..64". */

/* The registered methods, comma-separated: "dense, infinitehip, hip, tokenselect, streaming". */
const char *lc_attn_methods(void);
/* Check a method's settings (method NULL: dense; settings NULL: its default preset); on success
 * write their one-line description (every key=value in table order, for logs and result files;
 * "" for dense) into describe (may be NULL). LC_ERR_NOT_FOUND for an unknown method,
 * LC_ERR_INVALID_ARG for bad settings. */
int lc_attn_check(const char *method, const char *settings, char *describe, size_t cap);
/* The method's summary, settings (name, values, default, help) and presets, one per line. */
int lc_attn_help(const char *method, char *buf, size_t cap);

#define LC_HIP_MAX_STAGES 4 /* most InfiniteHiP stages (lc_attn_fidelity) */

/* ---- evaluation: a sparse method against dense attention on a real forward -------------- */

/* One layer's numbers over the probed rows (the last n_rows positions of the text, or the
 * first decode step). */
typedef struct lc_attn_fidelity {
    double  recall;     /* mean over probed rows and query heads of: the part of the true
                           attention mass of the row's top_k keys that falls on keys the method
                           reads (1 = every top key read) */
    double  out_rel_l2; /* ||o_method - o_dense|| / ||o_dense|| over the probed rows */
    double  keys_read;  /* mean keys a probed row reads (sink + selection + window) */
    int32_t rows;       /* rows probed */
    bool    sparse;     /* false: this layer read every key (a dense layer, or a context the
                           budgets cover) */
    /* a followed span of tokens [span_begin, span_end) (e.g. the sentence holding an answer),
     * means over probed rows and query heads; 0 without a span: */
    double  span_mass;      /* the true attention mass on the span's keys */
    double  span_mass_read; /* the part of span_mass on span keys the method reads */
    double  span_read;      /* the share of the span's keys the method reads */
    int32_t n_stages;       /* InfiniteHiP: its stages (0 for the other methods), and */
    double  span_stage_read[LC_HIP_MAX_STAGES]; /* the share of the span's keys each stage's
                                                   output keeps */
} lc_attn_fidelity;

/* What lc_eval_attn_fidelity probes. */
typedef struct lc_fidelity_params {
    int32_t top_k;   /* recall of the true attention mass of each row's top_k keys (2048) */
    int32_t n_rows;  /* probe the last n_rows positions of the text (64) */
    int32_t n_batch; /* prefill chunk (512) */
    bool    decode;  /* instead, probe the first decode step: one row, the greedy next token
                        after the text, with the method's decode path (false) */
    bool    chunks_as_generation; /* prefill in chunks of n_batch from the start, as a request
                                     does, run the method on the whole last chunk (its query
                                     blocks as generation forms them) and measure its last
                                     n_rows rows (false: those rows form a chunk of their own) */
    int64_t span_begin, span_end; /* span_begin < span_end: also follow the tokens
                                     [span_begin, span_end) (the span_* fields: a needle
                                     diagnostic); otherwise none (0, 0) */
    lc_progress_fn progress;      /* prefill tokens done/total, may be NULL */
    void          *progress_user;
} lc_fidelity_params;
lc_fidelity_params lc_fidelity_default_params(void);

struct lc_context_params;
/* Run the model densely over tokens (prefill chunks of fp->n_batch; the last n_rows tokens in a
 * chunk of their own, or one decode step after them), and at that forward run the sparse
 * method p->attn (with its settings from p; not dense) on the same queries and paged keys of
 * every layer: out[layer] compares it with dense attention. The true attention probabilities
 * are computed in double on the host (keys rotated at their true positions). out: n_layer
 * entries. */
int lc_eval_attn_fidelity(lc_model *m, const int32_t *tokens, int64_t n_tokens,
                          const struct lc_context_params *p, const lc_fidelity_params *fp,
                          lc_attn_fidelity *out);

/* ---- engine: a context advances a set of sequences ------------------------------------- */

typedef struct lc_context lc_context;

/* How a context's KV cache holds keys and values (lc_context_params.kv_type). */
typedef enum lc_kv_type {
    LC_KV_AUTO = 0, /* the backend's own element type: fp32 on the CPU, fp16 on CUDA */
    LC_KV_FP8  = 1, /* CUDA: fp8 e4m3 codes with one fp32 scale per (token, KV head), keys
                       centred on the layer's key bias: 132 bytes a token and head at head dim
                       128, against fp16's 256, so about 1.94x the tokens in the same memory.
                       Lossy (NOTES section 64 has its accuracy); read by the dense, infinitehip
                       and streaming methods (hip and tokenselect refuse it at
                       lc_context_create), on GPUs of compute capability 8.9 or newer */
} lc_kv_type;

typedef struct lc_context_params {
    int32_t        n_ctx;     /* max tokens per sequence; 0: the model's trained context */
    int32_t        n_seq_max; /* sequences alive at once */
    int32_t        n_batch;   /* max tokens per step (prefill chunk) */
    int32_t        page_size; /* KV page size in tokens (power of two) */
    int64_t        kv_tokens; /* KV capacity in tokens over all sequences; 0: n_ctx*n_seq_max */
    lc_progress_fn prefill_progress; /* prompt tokens done/total per step, may be NULL */
    void          *progress_user;
    const char    *attn;          /* the attention method (lc_attn_methods); NULL or "dense":
                                     dense (the default) */
    const char    *attn_settings; /* its settings string (lc_attn_check); NULL: the method's
                                     default preset. attn and attn_settings need to stay valid
                                     only during lc_context_create / lc_eval_attn_fidelity */
    bool check_numerics; /* debug: after every layer of every forward, look for NaN/Inf in the
                            hidden state and stop at the first layer and block (attention or
                            feed-forward) that made one (a download and a scan per layer; no
                            CUDA graphs). Off: only the logits are checked, every step for free
                            (in the sampling op); when they are non-finite the step is re-run
                            with these checks to name the layer */
    /* diagnostics of the sparse methods (tests, `longctx eval --trace`); off by default: */
    bool    sparse_always; /* InfiniteHiP, HiP and TokenSelect run their sparse path even where
                              their budget covers every key (otherwise they run dense attention
                              there, which is the same function) */
    int64_t trace_begin, trace_end; /* trace_begin < trace_end (InfiniteHiP): after the stages
                              of a forward, one line per layer to stderr with how many of the
                              positions [trace_begin, trace_end) (a needle's tokens) each stage's
                              output keeps for one query block whose rows lie past trace_end:
                              the forward's last prefill block, or a decode block whose stages
                              were recomputed. Nothing when the span is empty (0, 0) */
    int32_t prefill_token_layers; /* 0 (default): a prompt chunk (n_batch rows) runs every layer
                              in the step that takes it, beside the decode tokens (chunked
                              prefill). N > 0: layer-segmented prefill (SparseServe), N the
                              prompt work a step may add, in rows x layers: prompts whose whole
                              remaining work fits what is left of N join the step's batch whole,
                              in sequence order (a short prompt waits for no long one); then the
                              first other prompt still prefilling advances in a forward of its
                              own before the decode batch, a chunk of R rows through
                              max(1, left / R) layers a step, its residual stream kept in backend
                              memory between steps (n_batch x n_embd floats). So the decode tokens
                              of a step wait for at most N + R token-layers of prompt work. A
                              segmented prompt's results are exactly those of the prompt alone;
                              an injected one shares the batch, as under chunked prefill */
    int32_t score_rows;    /* lc_context_score: at most this many logit rows per forward,
                              1 .. 512 (0: 512; fewer cut a short text into several forwards) */
    /* false (default): before allocating, what the context needs (the KV pages for kv_tokens,
     * the RoPE table, the forward workspace, per-sequence buffers) is compared with the memory
     * where each lives (CPU backend: the host's available memory; CUDA: the GPU's free memory
     * for the KV, table and workspace, the host's for the rest), and a context that does not
     * fit is refused with LC_ERR_NOMEM, the numbers and the most tokens that would fit. true:
     * allocate anyway (the CLI's --overcommit; on the CPU, KV pages are then backed by memory
     * only as they fill). */
    bool overcommit;
    int64_t kv_host_tokens; /* of kv_tokens, how many the KV cache holds in pinned host memory
                              (the host tier, issue 24; 0, the default: none). CUDA: the pools'
                              first pages are GPU memory, the rest host memory the kernels read
                              and write over PCIe at the same addresses; a sequence takes GPU
                              pages first and host pages when none is left, so every method runs
                              over it unchanged and gives the same results, slower by what it
                              reads from the host. The GPU tier is rounded up to the mapping
                              granularity (2 MiB per pool), so it may hold a few more tokens.
                              CPU backend: all KV is host memory; the split is only counted.
                              Needs a GPU and driver that map host memory through CUDA's
                              virtual memory API (else lc_context_create fails, saying so) */
    int64_t kv_slot_cache_tokens; /* with a host tier: tokens' worth of GPU pages, besides
                              kv_tokens, set aside as the slot cache of the sparse attention's
                              reads (issue 24; 0, the default: none). After each decode step the
                              slabs (layer, page, KV head) of host pages that a sequence's
                              freshly recomputed selection, sink and window read are copied into
                              slots (least recently used evicted), and the following steps'
                              sparse attention reads the copies; misses read the host page in
                              place. Results are those without it, bit for bit. Methods whose
                              decode reads are known after the step: infinitehip, hip (their
                              kept selections), streaming (sink and window); dense and
                              tokenselect are refused */
    lc_kv_type kv_type;    /* the KV cache's element type (LC_KV_AUTO, the default) */
    bool ws_batch_control; /* with a slot cache: SparseServe's working-set-aware batch size
                              control. A decode sequence's working set is the host slabs its
                              last recomputed selection read (with sink and window; the largest
                              layer's); each step the decode sequences join in arrival order
                              while the sum fits the slot cache's slots a layer, the first
                              always, and the others wait a step with their KV where it is
                              (nothing recomputed). One not measured yet counts as the largest
                              measured. false (default): every decode sequence runs each step */
} lc_context_params;

/* Pages of a context's KV cache by tier (lc_context_params.kv_host_tokens), and in use. */
typedef struct lc_kv_usage {
    int32_t page_size;
    int64_t gpu_pages, gpu_used;   /* the backend's memory (CPU backend: host memory too) */
    int64_t host_pages, host_used; /* pinned host memory */
    /* the slot cache (kv_slot_cache_tokens; zeros without): slots per layer (pages x KV heads),
     * slots in use over all layers, and since creation: slabs found, brought in (each a K and
     * a V copy of slab_bytes), evicted, and asked for past a layer's slots in one step (read
     * in place); bytes gathered into slots and of slab maps uploaded */
    int32_t  slab_bytes;
    int64_t  cache_slots, cache_used;
    uint64_t cache_hits, cache_misses, cache_evictions, cache_overflow;
    uint64_t cache_bytes_in, cache_map_bytes;
    /* working sets (ws_batch_control): the sum over generating sequences, in slabs, and the
     * decode sequences the control held in the last step */
    int64_t ws_slabs;
    int32_t ws_held;
} lc_kv_usage;
int lc_context_kv_usage(const lc_context *c, lc_kv_usage *out);

lc_context_params lc_context_default_params(void);
int               lc_context_create(lc_model *m, const lc_context_params *p, lc_context **out);
void              lc_context_free(lc_context *c);

typedef struct lc_sampling {
    float    temperature; /* 0: greedy */
    int32_t  top_k;       /* 0: off */
    float    top_p;       /* 1: off */
    float    min_p;       /* 0: off */
    float    repeat_penalty; /* 1: off */
    int32_t  repeat_last_n;  /* window of the penalty */
    uint64_t seed;
    bool     repeat_generated_only; /* the penalty's window holds only the tokens generated
                                       since the request's prompt (lc_context_continue: since
                                       its new tokens), never prompt tokens, so an answer may
                                       copy from its document and question freely; false (the
                                       default, as llama.cpp): the last repeat_last_n tokens,
                                       prompt included */
} lc_sampling;

lc_sampling lc_sampling_default(void);

#define LC_MAX_STOP     64
#define LC_MAX_STOP_LEN 4096

typedef struct lc_request {
    const int32_t     *prompt; /* copied */
    size_t             n_prompt;
    int32_t            max_tokens; /* 0: only evaluate the prompt (logits stay readable) */
    lc_sampling        sampling;
    const char *const *stop; /* stop strings, copied: at most LC_MAX_STOP, each at most
                                LC_MAX_STOP_LEN bytes (NULL or "" entries are skipped) */
    size_t             n_stop;
    bool               ignore_eos;
} lc_request;

typedef enum lc_finish {
    LC_FINISH_NONE   = 0,
    LC_FINISH_EOS    = 1, /* the model ended the turn */
    LC_FINISH_LENGTH = 2, /* max_tokens or the context is full */
    LC_FINISH_STOP   = 3, /* a stop string matched */
    LC_FINISH_ERROR  = 4, /* the sequence could not go on (KV cache full, non-finite logits);
                             the event's error says why */
} lc_finish;

/* Admit a sequence. Fails with LC_ERR_CONTEXT (message with the numbers) when the prompt does
 * not fit n_ctx or the free KV capacity. */
int lc_context_add(lc_context *c, const lc_request *r, int32_t *seq_id);
/* Drop a sequence and free its pages. */
int lc_context_remove(lc_context *c, int32_t seq_id);
/* Go on with a sequence (multi-turn chat, a document read once and questions after it): its
 * KV cache keeps the first n_keep tokens it holds (-1: all of them; see lc_context_seq_length)
 * and r->prompt's tokens are evaluated after them as a prompt (prefill chunks), then
 * generation goes on per r (max_tokens, sampling, stop strings and ignore_eos of r, counted
 * afresh; the repeat penalty's window reaches back into the kept tokens). Only the new tokens
 * are prefilled. The sequence may have finished (reported its finish) or be stopped midway by
 * the caller no longer stepping it; either way the KV holds what was evaluated: the prompt and
 * every generated token but the last one sampled (pass that one first in r->prompt to keep
 * it). Fails with LC_ERR_CONTEXT when n_keep plus the new tokens do not fit n_ctx or the free
 * KV pages (the sequence is then unchanged), LC_ERR_INVALID_ARG for a sequence that ended with
 * LC_FINISH_ERROR or n_keep above what it holds, LC_ERR_NOT_FOUND for an unknown id. The
 * attention method's per-sequence state carries over (dense: exact, the same as one longer
 * prompt). */
int lc_context_continue(lc_context *c, int32_t seq_id, int64_t n_keep, const lc_request *r);
/* How many tokens a sequence's KV cache holds (evaluated positions); -1 for an unknown id. */
int64_t lc_context_seq_length(const lc_context *c, int32_t seq_id);

/* What one step did for one sequence. text points into the context and is valid until the
 * next step; it holds the newly printable output (stop strings withheld). */
typedef struct lc_event {
    int32_t     seq_id;
    int32_t     token;          /* sampled token, -1 if none this step (prefill) */
    const char *text;
    size_t      text_len;
    int64_t     n_prompt_done;  /* prompt tokens evaluated so far */
    int64_t     n_prompt;
    int32_t     n_generated;
    lc_finish   finish;         /* != NONE: the sequence is done */
    const char *error;          /* finish == LC_FINISH_ERROR: why, one line (e.g. "non-finite
                                   logits ... first at layer 3, feed-forward output"); NULL
                                   otherwise. Valid until the next step */
} lc_event;

/* Advance every live sequence by one step (a prefill chunk or one decode token) and report
 * one event for each sequence that took part or finished; *n_events = number written. Every
 * event is always delivered: cap must be at least the number of live sequences that have not
 * reported their finish (n_seq_max is always enough), else LC_ERR_INVALID_ARG before anything
 * advances. Returns LC_OK with *n_events = 0 when no sequence is live. A sequence whose logits
 * turn non-finite finishes with LC_FINISH_ERROR and an error naming the layer; the others go
 * on. */
int lc_context_step(lc_context *c, lc_event *events, size_t cap, size_t *n_events);

/* Logits (n_vocab floats) of the last evaluated position of a sequence; valid until its next
 * step. NULL if the sequence has not evaluated anything. */
const float *lc_context_logits(const lc_context *c, int32_t seq_id);
int32_t      lc_context_n_vocab(const lc_context *c);

/* Decode selection counters of the context's attention method since the context was made,
 * summed over sequences and layers (zeros for dense and InfiniteHiP): how many (sequence,
 * layer) decode steps computed a new selection and how many reused the previous one
 * (TokenSelect: selection-cache misses and hits; HiP: mask estimations and steps between). */
typedef struct lc_attn_stats {
    int64_t selected; /* steps that computed a selection */
    int64_t reused;   /* steps that reused the previous one */
} lc_attn_stats;
int lc_context_attn_stats(const lc_context *c, lc_attn_stats *out);

/* Teacher-forced scoring (perplexity, prompt log-probs). A range of positions [begin, end) of
 * a token sequence. */
typedef struct lc_score_range {
    int64_t begin, end;
} lc_score_range;

/* Evaluate tokens[0 .. n_tokens) as a new sequence of the context (prefill chunks of at most
 * n_batch rows, the context's attention method) and write logprob[t] = log p(tokens[t] |
 * tokens[0 .. t)) for every t in the ranges (sorted, disjoint, 1 <= begin < end <= n_tokens);
 * other entries are left as they are. Its KV pages are returned before it returns; other
 * sequences are not touched. Needs a second forward workspace (n_batch rows, 512 logit rows,
 * or the context's score_rows) while it runs. Progress (tokens done / n_tokens) goes to the
 * context's prefill_progress.
 * LC_ERR_CONTEXT when the tokens do not fit n_ctx or the free KV pages. */
int lc_context_score(lc_context *c, const int32_t *tokens, int64_t n_tokens,
                     const lc_score_range *ranges, int32_t n_ranges, double *logprob);

#ifdef __cplusplus
}
#endif
#endif /* LONGCTX_H */
