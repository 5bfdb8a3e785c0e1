#!/usr/bin/env python3
"""gen_fuzz_seeds.py — seed GGUF files for fuzz/fuzz_model.c (fuzz/corpus-model/) and
fuzz/fuzz_tokenizer_load.c (fuzz/corpus-tokenizer-load/). Self-contained (a small GGUF v3
writer on `struct`, weights from a seeded random.Random), so the output is byte-identical on
every run and needs no Python packages.

corpus-model/: tiny loadable models (hidden 32, head_dim 16, 1-2 layers, a 105-token byte-level
BPE vocabulary of printable ASCII, space and newline (inputs of other bytes lose them), or a
SentencePiece one), every file well under libFuzzer's -max_len 65536 (small inputs fuzz faster):
  llama_q8_tied        llama, Q8_0/Q4_0 matrices, tied output, ChatML template with a default
                       system prompt, the full 262-token vocabulary (every byte)
  llama_untied_q4      separate Q8_0 output.weight, Q4_1, rope scaling linear x2, llama3
                       template, pre llama-bpe, add_bos
  qwen2_bias_q5        qwen2 (NEOX RoPE), q/k/v biases, GQA 2, Q5_0/Q5_1, freq_base 1e6
  mistral_kquant       general.architecture "mistral", ffn 256 with Q4_K/Q6_K ffn_down, mistral
                       template
  llama_kquant2        Q6_K ffn_down, BF16 attention, unknown template
  llama_kquant_q2      Q2_K ffn_down, no chat template
  llama_kquant_q3q5    2 layers, Q3_K and Q5_K ffn_down, phi4-like template
  llama_rope_freqs     rope_freqs.weight present, llama3 rope scaling
  llama_yarn_keylen    yarn scaling, attention.key_length 32 (n_head*head_dim != hidden), F16,
                       Q5_0 embeddings
  llama_spm            SentencePiece tokenizer (<0xXX> byte tokens, scores), Q4_1 embeddings
  llama_missing_ffn    blk.0.ffn_up.weight missing (must fail cleanly)

corpus-tokenizer-load/: tokenizer metadata only (no tensors): byte-level BPE with every
pre-tokenizer family and an unknown one, SentencePiece with and without byte tokens, all
token types, special ids (incl. -1 and out of range), chat templates of each family plus
ChatML with escaped default system prompts, phi4-like and Llama-2 <<SYS>> templates, a
vocabulary with missing bytes, duplicate and empty token texts, missing/odd keys.

Usage: python3 scripts/gen_fuzz_seeds.py [--model-out DIR] [--tok-out DIR]
"""
import argparse
import os
import random
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# ggml tensor types: id -> (block size, bytes per block)
T_F32, T_F16, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_Q8_0 = 0, 1, 2, 3, 6, 7, 8
T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K, T_BF16 = 10, 11, 12, 13, 14, 30
TYPES = {T_F32: (1, 4), T_F16: (1, 2), T_BF16: (1, 2), T_Q4_0: (32, 18), T_Q4_1: (32, 20),
         T_Q5_0: (32, 22), T_Q5_1: (32, 24), T_Q8_0: (32, 34), T_Q2_K: (256, 84),
         T_Q3_K: (256, 110), T_Q4_K: (256, 144), T_Q5_K: (256, 176), T_Q6_K: (256, 210)}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gval(ty, v):
    if ty == STR:
        return gstr(v)
    if ty == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for it in items:
            out += gval(et, it)
        return out
    return struct.pack(SCALAR_FMT[ty], v)


class Gguf:
    """Minimal GGUF v3 writer: add key/values and tensors, then bytes()."""

    def __init__(self, alignment=32):
        self.kv = []
        self.tensors = []
        self.alignment = alignment
        if alignment != 32:
            self.add("general.alignment", U32, alignment)

    def add(self, key, ty, v):
        self.kv.append((key, ty, v))

    def arr(self, key, et, items):
        self.add(key, ARR, (et, list(items)))

    def tensor(self, name, ne, ty, data):
        self.tensors.append((name, list(ne), ty, data))

    def bytes(self):
        out = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, ty, v in self.kv:
            out += gstr(k) + struct.pack("<I", ty) + gval(ty, v)
        off = 0
        offsets = []
        for name, ne, ty, data in self.tensors:
            offsets.append(off)
            off += len(data)
            off = (off + self.alignment - 1) // self.alignment * self.alignment
        for (name, ne, ty, data), o in zip(self.tensors, offsets):
            out += gstr(name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", ty, o)
        out += b"\0" * ((-len(out)) % self.alignment)
        data_start = len(out)
        for (name, ne, ty, data), o in zip(self.tensors, offsets):
            out += b"\0" * (data_start + o - len(out)) + data
        return out


# ---- tensor data ------------------------------------------------------------------------------

def f16(x):
    return struct.pack("<e", x)


def rand_bytes(rng, n):
    return bytes(rng.randrange(256) for _ in range(n))


def block(rng, ty, std):
    """One block of type ty with values of roughly std (scales kept finite and small)."""
    if ty == T_Q8_0:
        return f16(std / 64) + bytes((rng.randrange(-127, 128)) & 0xFF for _ in range(32))
    if ty == T_Q4_0:
        return f16(std / 4) + rand_bytes(rng, 16)
    if ty == T_Q4_1:
        return f16(std / 8) + f16(-std) + rand_bytes(rng, 16)
    if ty == T_Q5_0:
        return f16(std / 8) + rand_bytes(rng, 4) + rand_bytes(rng, 16)
    if ty == T_Q5_1:
        return f16(std / 16) + f16(-std) + rand_bytes(rng, 4) + rand_bytes(rng, 16)
    d, dmin = f16(std / 32), f16(std / 64)
    if ty == T_Q2_K:   # scales[16] qs[64] d dmin
        return rand_bytes(rng, 80) + d + dmin
    if ty == T_Q3_K:   # hmask[32] qs[64] scales[12] d
        return rand_bytes(rng, 108) + d
    if ty == T_Q4_K:   # d dmin scales[12] qs[128]
        return d + dmin + rand_bytes(rng, 140)
    if ty == T_Q5_K:   # d dmin scales[12] qh[32] qs[128]
        return d + dmin + rand_bytes(rng, 172)
    if ty == T_Q6_K:   # ql[128] qh[64] scales[16] d
        return rand_bytes(rng, 208) + d
    raise ValueError(ty)


def tensor_data(rng, ty, cols, rows, std=0.3, mean=0.0):
    n = cols * rows
    if ty == T_F32:
        return b"".join(struct.pack("<f", mean + rng.gauss(0, std)) for _ in range(n))
    if ty == T_F16:
        return b"".join(f16(mean + rng.gauss(0, std)) for _ in range(n))
    if ty == T_BF16:
        return b"".join(struct.pack("<I", (struct.unpack("<I", struct.pack("<f", mean + rng.gauss(
            0, std)))[0] >> 16))[:2] for _ in range(n))
    bs, _ = TYPES[ty]
    assert cols % bs == 0, (ty, cols)
    return b"".join(block(rng, ty, std) for _ in range(n // bs))


# ---- vocabularies -----------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's byte -> printable code point map."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("Ġ", "a")]
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]


def bpe_vocab(specials, skip_bytes=()):
    b2u = bytes_to_unicode()
    toks = [b2u[b] for b in range(256) if b not in skip_bytes]
    for a, b in MERGES:
        if a in toks and b in toks:
            toks.append(a + b)
    merges = ["%s %s" % m for m in MERGES if m[0] + m[1] in toks]
    types = [1] * len(toks) + [3] * len(specials)
    return toks + list(specials), types, merges


# bytes a "small" vocabulary leaves out: all but printable ASCII, space and newline
SMALL_SKIP = frozenset(b for b in range(256) if not (0x20 <= b < 0x7F or b == 0x0A))


def add_bpe(w, pre, specials=CHATML_SPECIALS, bos=None, eos=None, add_bos=None, skip_bytes=(),
            types=True):
    toks, ty, merges = bpe_vocab(specials, skip_bytes)
    w.add("tokenizer.ggml.model", STR, "gpt2")
    if pre is not None:
        w.add("tokenizer.ggml.pre", STR, pre)
    w.arr("tokenizer.ggml.tokens", STR, toks)
    if types:
        w.arr("tokenizer.ggml.token_type", I32, ty)
    w.arr("tokenizer.ggml.merges", STR, merges)
    if bos is not None:
        w.add("tokenizer.ggml.bos_token_id", U32, toks.index(bos))
    if eos is not None:
        w.add("tokenizer.ggml.eos_token_id", U32, toks.index(eos))
    if add_bos is not None:
        w.add("tokenizer.ggml.add_bos_token", BOOL, add_bos)
    return len(toks)


def spm_vocab(byte_tokens=True):
    toks = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]
    if byte_tokens:
        toks += ["<0x%02X>" % b for b in range(256)]
        types += [6] * 256
    pieces = ["▁", "▁t", "he", "▁the", "▁a", "in", "er", "[INST]", "[/INST]", "a", "b", "c", "e",
              "h", "t", "i", "n", "r", ".", "!"]
    toks += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (len(toks) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    return toks, types, scores


def add_spm(w, byte_tokens=True, add_space_prefix=None):
    toks, types, scores = spm_vocab(byte_tokens)
    w.add("tokenizer.ggml.model", STR, "llama")
    w.arr("tokenizer.ggml.tokens", STR, toks)
    w.arr("tokenizer.ggml.token_type", I32, types)
    w.arr("tokenizer.ggml.scores", F32, scores)
    w.add("tokenizer.ggml.bos_token_id", U32, 1)
    w.add("tokenizer.ggml.eos_token_id", U32, 2)
    w.add("tokenizer.ggml.unknown_token_id", U32, 0)
    if add_space_prefix is not None:
        w.add("tokenizer.ggml.add_space_prefix", BOOL, add_space_prefix)
    return len(toks)


# ---- chat templates (written for these seeds; shapes like the families' real ones) -----------

TPL_CHATML_DEFAULT = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a small helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
TPL_CHATML_NEWLINE = (
    "{%- if messages[0].role != \"system\" %}{{- \"<|im_start|>system\n"
    "Be brief: \\\"quoted\\\"\\tand\\\\slashes.<|im_end|>\n\" }}{%- endif %}"
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}")
TPL_CHATML_EXPR = (
    "{{ '<|im_start|>system\\n' + system_message + '<|im_end|>\\n' }}"
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] }}{% endfor %}")
TPL_LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}")
TPL_MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token }}{% endif %}{% endfor %}")
TPL_LLAMA2_SYS = (
    "{% if messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + messages[0]['content']"
    " + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for m in messages %}{{ '[INST] ' + m['content'] + "
    "' [/INST]' }}{% endfor %}")
TPL_PHI4 = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content']"
            " + '<|im_end|>' }}{% endfor %}")
TPL_UNKNOWN = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}"


# ---- models -----------------------------------------------------------------------------------

def model(name, arch="llama", layers=1, embd=32, heads=2, kv=2, hd=16, ff=32, types=None,
          untied=False, bias=False, rope=None, rope_freqs=False, key_length=False,
          tokenizer="chatml", template=TPL_CHATML_DEFAULT, skip_tensors=(), seed=1,
          small_vocab=True):
    """A loadable tiny model (bytes). types: dict of role (embd, attn, ffn,
    down, downL for layer L only, out) -> ggml type."""
    t = {"embd": T_Q4_0, "attn": T_Q8_0, "ffn": T_Q8_0, "down": T_Q8_0, "out": T_F16}
    t.update(types or {})
    rng = random.Random(seed)
    w = Gguf()
    w.add("general.architecture", STR, arch)
    w.add("general.name", STR, "fuzz-" + name)
    if tokenizer == "spm":
        n_vocab = add_spm(w)
    elif tokenizer == "llama3":
        n_vocab = add_bpe(w, "llama-bpe", LLAMA3_SPECIALS, bos="<|begin_of_text|>",
                          eos="<|eot_id|>", add_bos=True,
                          skip_bytes=SMALL_SKIP if small_vocab else ())
    else:
        n_vocab = add_bpe(w, {"chatml": "smollm", "qwen2": "qwen2"}.get(tokenizer, "gpt-2"),
                          eos="<|im_end|>", skip_bytes=SMALL_SKIP if small_vocab else ())
    if template is not None:
        w.add("tokenizer.chat_template", STR, template)
    a = arch
    w.add(a + ".block_count", U32, layers)
    w.add(a + ".context_length", U32, 256)
    w.add(a + ".embedding_length", U32, embd)
    w.add(a + ".feed_forward_length", U32, ff)
    w.add(a + ".attention.head_count", U32, heads)
    w.add(a + ".attention.head_count_kv", U32, kv)
    w.add(a + ".attention.layer_norm_rms_epsilon", F32, 1e-5)
    w.add(a + ".rope.freq_base", F32, 1e6 if arch == "qwen2" else 10000.0)
    if key_length:
        w.add(a + ".attention.key_length", U32, hd)
        w.add(a + ".attention.value_length", U32, hd)
    w.add(a + ".rope.dimension_count", U32, hd)
    if rope:
        kind = rope[0]
        w.add(a + ".rope.scaling.type", STR, kind)
        w.add(a + ".rope.scaling.factor", F32, rope[1])
        w.add(a + ".rope.scaling.original_context_length", U32, 64)
        if kind == "yarn":
            w.add(a + ".rope.scaling.yarn_beta_fast", F32, 32.0)
            w.add(a + ".rope.scaling.yarn_beta_slow", F32, 1.0)
        if kind == "llama3":
            w.add(a + ".rope.scaling.low_freq_factor", F32, 1.0)
            w.add(a + ".rope.scaling.high_freq_factor", F32, 4.0)
    Q, KV = heads * hd, kv * hd
    tens = [("token_embd.weight", embd, n_vocab, t["embd"], 0.5, 0.0)]
    for l in range(layers):
        p = "blk.%d." % l
        tens += [(p + "attn_norm.weight", embd, 1, T_F32, 0.1, 1.0),
                 (p + "attn_q.weight", embd, Q, t["attn"], 0.3, 0.0),
                 (p + "attn_k.weight", embd, KV, t["attn"], 0.3, 0.0),
                 (p + "attn_v.weight", embd, KV, t["attn"], 0.3, 0.0),
                 (p + "attn_output.weight", Q, embd, t["attn"], 0.3, 0.0),
                 (p + "ffn_norm.weight", embd, 1, T_F32, 0.1, 1.0),
                 (p + "ffn_gate.weight", embd, ff, t["ffn"], 0.3, 0.0),
                 (p + "ffn_up.weight", embd, ff, t["ffn"], 0.3, 0.0),
                 (p + "ffn_down.weight", ff, embd, t.get("down%d" % l, t["down"]), 0.3, 0.0)]
        if bias:
            tens += [(p + "attn_q.bias", Q, 1, T_F32, 0.3, 0.0),
                     (p + "attn_k.bias", KV, 1, T_F32, 0.3, 0.0),
                     (p + "attn_v.bias", KV, 1, T_F32, 0.3, 0.0)]
    tens.append(("output_norm.weight", embd, 1, T_F32, 0.1, 1.0))
    if untied:
        tens.append(("output.weight", embd, n_vocab, t["out"], 0.3, 0.0))
    if rope_freqs:
        tens.append(("rope_freqs.weight", hd // 2, 1, T_F32, 0.2, 1.5))
    for nm, cols, rows, ty, std, mean in tens:
        if nm in skip_tensors:
            continue
        ne = [cols] if rows == 1 else [cols, rows]
        w.tensor(nm, ne, ty, tensor_data(rng, ty, cols, rows, std, mean))
    return w.bytes()


MODELS = {
    "llama_q8_tied": dict(small_vocab=False),
    "llama_untied_q4": dict(untied=True, types={"attn": T_Q4_1, "ffn": T_Q4_0, "out": T_Q8_0},
                            rope=("linear", 2.0), tokenizer="llama3", template=TPL_LLAMA3, seed=2),
    "qwen2_bias_q5": dict(arch="qwen2", kv=1, bias=True, types={"attn": T_Q5_0, "ffn": T_Q5_1,
                          "down": T_Q5_1}, tokenizer="qwen2", template=TPL_CHATML_NEWLINE, seed=3),
    "mistral_kquant": dict(arch="mistral", ff=256, types={"down": T_Q4_K, "ffn": T_Q4_0},
                           template=TPL_MISTRAL, seed=4),
    "llama_kquant2": dict(ff=256, types={"attn": T_BF16, "ffn": T_Q4_0, "down": T_Q6_K},
                          template=TPL_UNKNOWN, seed=5),
    "llama_kquant_q2": dict(ff=256, types={"down": T_Q2_K, "ffn": T_Q4_1}, seed=9,
                            template=None),
    "llama_kquant_q3q5": dict(layers=2, ff=256, types={"down": T_Q3_K, "down1": T_Q5_K,
                                                       "ffn": T_Q4_0, "attn": T_Q4_0},
                              seed=10, template=TPL_PHI4),
    "llama_rope_freqs": dict(rope=("llama3", 8.0), rope_freqs=True, seed=6),
    "llama_yarn_keylen": dict(hd=32, key_length=True, kv=1, rope=("yarn", 4.0),
                              types={"attn": T_F16, "ffn": T_F16, "down": T_F16, "embd": T_Q5_0},
                              seed=7),
    "llama_spm": dict(tokenizer="spm", template=TPL_MISTRAL,
                      types={"attn": T_Q8_0, "ffn": T_Q4_0, "embd": T_Q4_1}, seed=8),
    "llama_missing_ffn": dict(skip_tensors=("blk.0.ffn_up.weight",), seed=11),
}


# ---- tokenizer-only seeds ---------------------------------------------------------------------

def tok_seed(fill):
    w = Gguf()
    w.add("general.architecture", STR, "llama")
    fill(w)
    return w.bytes()


def odd_types(w):
    """Byte-level BPE with every token type, duplicates, an empty text, user tokens."""
    toks, ty, merges = bpe_vocab(CHATML_SPECIALS + ["<tool>", "</s>", "<pad>", "<unused0>", ""])
    toks += ["Ġthe", "Ġthe", "<|im_end|>"]
    ty = ty[:-5] + [4, 1, 3, 5, 1] + [1, 2, 1]
    w.add("tokenizer.ggml.model", STR, "gpt2")
    w.add("tokenizer.ggml.pre", STR, "default")
    w.arr("tokenizer.ggml.tokens", STR, toks)
    w.arr("tokenizer.ggml.token_type", I32, ty)
    w.arr("tokenizer.ggml.merges", STR, merges)
    w.add("tokenizer.ggml.bos_token_id", I32, -1)
    w.add("tokenizer.ggml.eos_token_id", U32, len(toks) - 1)
    w.add("tokenizer.ggml.eot_token_id", U32, toks.index("<|im_end|>"))
    w.add("tokenizer.ggml.eom_token_id", U64, 5)
    w.add("tokenizer.ggml.padding_token_id", I32, toks.index("<pad>"))
    w.add("tokenizer.ggml.seperator_token_id", U16, 7)
    w.add("tokenizer.ggml.unknown_token_id", I8, 3)
    w.add("tokenizer.ggml.add_bos_token", BOOL, True)
    w.add("tokenizer.chat_template", STR, TPL_CHATML_NEWLINE)


TOK_SEEDS = {
    "bpe_smollm_chatml": lambda w: (add_bpe(w, "smollm", eos="<|im_end|>", bos="<|endoftext|>"),
                                    w.add("tokenizer.chat_template", STR, TPL_CHATML_DEFAULT)),
    "bpe_qwen2_chatml_nl": lambda w: (add_bpe(w, "qwen2", eos="<|im_end|>"),
                                      w.add("tokenizer.chat_template", STR, TPL_CHATML_NEWLINE)),
    "bpe_llama3": lambda w: (add_bpe(w, "llama-bpe", LLAMA3_SPECIALS, bos="<|begin_of_text|>",
                                     eos="<|eot_id|>", add_bos=True),
                             w.add("tokenizer.chat_template", STR, TPL_LLAMA3)),
    "bpe_gpt2_phi4": lambda w: (add_bpe(w, "gpt2", types=False),
                                w.add("tokenizer.chat_template", STR, TPL_PHI4)),
    "bpe_unknown_pre_expr": lambda w: (add_bpe(w, "no-such-pre", bos="<|im_start|>", add_bos=True),
                                       w.add("tokenizer.chat_template", STR, TPL_CHATML_EXPR)),
    "bpe_missing_bytes": lambda w: (add_bpe(w, None, skip_bytes=set(range(0, 32)) | {0x20, 0x7F},
                                            eos="<|endoftext|>"),
                                    w.add("tokenizer.chat_template", STR, "")),
    "bpe_odd_types": odd_types,
    "spm_mistral": lambda w: (add_spm(w), w.add("tokenizer.chat_template", STR, TPL_MISTRAL)),
    "spm_llama2_nobytes": lambda w: (add_spm(w, byte_tokens=False, add_space_prefix=False),
                                     w.add("tokenizer.chat_template", STR, TPL_LLAMA2_SYS)),
    "spm_unknown_tpl": lambda w: (add_spm(w), w.add("tokenizer.chat_template", STR, TPL_UNKNOWN)),
    "no_merges": lambda w: (w.add("tokenizer.ggml.model", STR, "gpt2"),
                            w.arr("tokenizer.ggml.tokens", STR, ["a", "b", "ab"]),
                            w.arr("tokenizer.ggml.merges", STR, [])),
    "bad_model": lambda w: (w.add("tokenizer.ggml.model", STR, "bert"),
                            w.arr("tokenizer.ggml.tokens", STR, ["a"]),
                            w.add("tokenizer.chat_template", STR, TPL_CHATML_DEFAULT)),
}


def write(path, data):
    assert len(data) <= 65536, (path, len(data))
    with open(path, "wb") as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-out", default=os.path.join(ROOT, "fuzz", "corpus-model"))
    ap.add_argument("--tok-out", default=os.path.join(ROOT, "fuzz", "corpus-tokenizer-load"))
    a = ap.parse_args()
    os.makedirs(a.model_out, exist_ok=True)
    os.makedirs(a.tok_out, exist_ok=True)
    for name, kw in MODELS.items():
        write(os.path.join(a.model_out, "seed_%s.gguf" % name), model(name, **kw))
    for name, fill in TOK_SEEDS.items():
        write(os.path.join(a.tok_out, "seed_%s.gguf" % name), tok_seed(fill))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
