#!/usr/bin/env python3
"""gen_tiny_models.py — tiny random-weight GGUF models of the llama family, and reference
logits for them from Hugging Face transformers, kept as test fixtures (tests/test_archs.c).

Writes into tests/fixtures/tiny/ (default):

  qwen2.gguf         arch qwen2: q/k/v biases, NEOX RoPE pairing (x[i] with x[i+d/2]),
                     rope.freq_base 1e6, 4 heads / 2 KV heads (GQA 2), head_dim 32,
                     tied output (no output.weight), tokenizer pre "qwen2"
  mistral.gguf       a Mistral as GGUF files spell it: general.architecture "llama" (llama.cpp
                     has no "mistral" architecture, only mistral3/mistral4; see below), 4 heads
                     / 1 KV head (GQA 4), head_dim 128 with hidden 64
                     (attention.key_length/value_length and rope.dimension_count 128, so
                     n_head*head_dim != n_embd), freq_base 1e6, tied output, pre "gpt-2".
                     transformers builds LlamaForCausalLM for it: its switch to
                     MistralForCausalLM (general.name == "mistral") fails in this version
                     ("Unknown gguf model_type: mistral in gguf-py"), and Mistral differs from
                     Llama only by a 4096-token sliding window, which these prompts never reach.
  llama-untied.gguf  arch llama: separate output.weight, 4 heads / 4 KV heads (no GQA),
                     head_dim 32 with hidden 64 (decoupled too), llama.rope.scaling.type
                     "linear" with factor 2, pre "llama-bpe"
  <name>.txt         reference log-probs and greedy continuations (format below)

Models: 2 layers, F16 matrices and F32 norms/biases (values drawn in fp32 and rounded to fp16,
so a reader that dequantises to fp32 sees exactly the model). Vocabulary: the 256 GPT-2 byte
symbols (id = byte value), 14 merges and 2 control tokens (272 tokens). Weights are random
normal with scales picked so that logits and attention scores are far from uniform (logit
std ~1) — otherwise top-1 and greedy picks would be near ties.

Tensor layout conventions. The files are written directly in llama.cpp's layout, as if by
convert_hf_to_gguf: for llama (and so mistral) the Q/K rows are in llama.cpp's "permuted"
order, i.e. RoPE rotates adjacent pairs (LLAMA_ROPE_TYPE_NORM); for qwen2 they are in HF order
and RoPE rotates x[i] with x[i+d/2] (LLAMA_ROPE_TYPE_NEOX). transformers' GGUF loader undoes
the llama permutation (LlamaTensorProcessor._reverse_permute_weights, chosen by
general.architecture == "llama") and then applies rotate_half, which is exactly llama.cpp's reading; qwen2 tensors pass unchanged.
One gap in transformers' loader is handled here explicitly: it ignores <arch>.rope.scaling.*
for llama (only gpt-oss reads them), so the script sets rope_type "linear", factor 2.0 in
the config's rope_parameters before from_pretrained — the value the file's metadata states. The
llama.cpp cross-check (below) reads the scaling from the file itself and confirms it.
A file with general.architecture "mistral" (which our engine accepts as an alias of llama)
cannot be made here: gguf-py/transformers raise "Unknown gguf model_type: mistral" and
llama.cpp rejects the architecture, so there is no reference for it.

llama.cpp cross-check (unless --no-llamacpp): every model is also written with F32 tensors
(same values) to a temporary directory and evaluated by llama.cpp in a separate
process with an F32 KV cache on the same prompt ids; the max |d log-prob| over the reference's
top 20 and the greedy agreement are printed and written into the header of each .txt file.

Reference prompts: for each model two prompts of random token ids (seeded; lengths 20 and 70,
normal tokens only). transformers (fp32, CPU) gives the log-softmax of the last prompt
position and a greedy continuation of N_GREEDY tokens with the KV cache. A prompt is
re-drawn (next seed) until every greedy step's best-second log-prob gap is >= MIN_MARGIN, so
that a correct fp32 engine cannot pick a different token by rounding.

Fixture format (plain text, one record per line, fields separated by single spaces, readable
with fscanf; lines starting with '#' are comments; every list is preceded by its length):

    model FILE                      the GGUF file name (same directory)
    source transformers VERSION
    prompt NAME                     starts a prompt block; NAME has no spaces
    ids N ID1 ... IDN               prompt token ids
    top K ID LOGPROB ... (K pairs)  log-softmax at the last prompt position, K = 20 best ids,
                                    by decreasing log-prob
    greedy N ID1 ... IDN            greedy continuation (N = 8), EOS not a stop
    gmargin N M1 ... MN             best - second-best log-prob at each greedy step
    end                             ends the prompt block

Log-probs have 7 decimals. Usage:

    python3 scripts/gen_tiny_models.py [--out DIR] [--no-llamacpp]

Needs numpy, gguf, torch, transformers (and llama-cpp-python for the cross-check).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from fixture_common import greedy_with_margins, llamacpp_no_extra_bufts, log_softmax, top_pairs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "tests", "fixtures", "tiny")

TOP_K = 20

N_GREEDY = 8
PROMPT_LENS = [20, 70]
MIN_MARGIN = 2e-3
N_LAYER = 2

# name -> configuration. arch: general.architecture; hd: head_dim; kv: KV heads.
MODELS = {
    "qwen2": dict(arch="qwen2", embd=128, heads=4, kv=2, hd=32, ff=64, base=1e6,
                  bias=True, untied=False, scaling=None, pre="qwen2", seed=1, eps=1e-6),
    "mistral": dict(arch="llama", embd=64, heads=4, kv=1, hd=128, ff=48, base=1e6,
                    bias=False, untied=False, scaling=None, pre="gpt-2", seed=2, eps=1e-5),
    "llama-untied": dict(arch="llama", embd=64, heads=4, kv=4, hd=32, ff=128, base=10000.0,
                         bias=False, untied=True, scaling=("linear", 2.0), pre="llama-bpe",
                         seed=3, eps=1e-5),
}

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("Ġ", "a"),
          ("o", "n"), ("r", "e"), ("Ġ", "s"), ("a", "t"), ("e", "n"), ("Ġ", "o"),
          ("o", "r"), ("Ġ", "w")]
SPECIALS = ["<|endoftext|>", "<|im_start|>"]


def bytes_to_unicode():
    """GPT-2's byte -> printable code point map (openai/gpt-2 encoder.py)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def vocab():
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    for a, b in MERGES:
        assert a in tokens and b in tokens, (a, b)
        tokens.append(a + b)
    n_normal = len(tokens)
    tokens += SPECIALS
    types = [1] * n_normal + [3] * len(SPECIALS)
    return tokens, types, ["%s %s" % m for m in MERGES], n_normal


def make_weights(cfg):
    """Random weights in GGUF (llama.cpp) layout; numpy shapes are [rows, cols] (ne reversed)."""
    rng = np.random.default_rng(cfg["seed"])
    tokens, _, _, _ = vocab()
    V, E, H, KV, D, F = len(tokens), cfg["embd"], cfg["heads"], cfg["kv"], cfg["hd"], cfg["ff"]

    def mat(rows, cols, std):
        return (rng.standard_normal((rows, cols)) * std).astype(np.float16)

    def vec(n, mean, std):
        return (mean + rng.standard_normal(n) * std).astype(np.float16).astype(np.float32)

    t = {"token_embd.weight": mat(V, E, 0.1)}
    for l in range(N_LAYER):
        p = "blk.%d." % l
        t[p + "attn_norm.weight"] = vec(E, 1.0, 0.2)
        t[p + "attn_q.weight"] = mat(H * D, E, 0.3 / np.sqrt(E) * 4)
        t[p + "attn_k.weight"] = mat(KV * D, E, 0.3 / np.sqrt(E) * 4)
        t[p + "attn_v.weight"] = mat(KV * D, E, 1.0 / np.sqrt(E))
        if cfg["bias"]:
            t[p + "attn_q.bias"] = vec(H * D, 0.0, 0.5)
            t[p + "attn_k.bias"] = vec(KV * D, 0.0, 0.5)
            t[p + "attn_v.bias"] = vec(KV * D, 0.0, 0.2)
        t[p + "attn_output.weight"] = mat(E, H * D, 1.0 / np.sqrt(H * D))
        t[p + "ffn_norm.weight"] = vec(E, 1.0, 0.2)
        t[p + "ffn_gate.weight"] = mat(F, E, 1.0 / np.sqrt(E))
        t[p + "ffn_up.weight"] = mat(F, E, 1.0 / np.sqrt(E))
        t[p + "ffn_down.weight"] = mat(E, F, 1.0 / np.sqrt(F))
    t["output_norm.weight"] = vec(E, 1.0, 0.2)
    if cfg["untied"]:
        t["output.weight"] = mat(V, E, 0.15)
    return t


def write_gguf(path, name, cfg, tensors, f32=False):
    import gguf

    arch = cfg["arch"]
    tokens, types, merges, _ = vocab()
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny-" + name)
    w.add_context_length(2048)
    w.add_embedding_length(cfg["embd"])
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(cfg["ff"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_rope_freq_base(cfg["base"])
    w.add_rope_dimension_count(cfg["hd"])
    if cfg["hd"] * cfg["heads"] != cfg["embd"]:
        w.add_key_length(cfg["hd"])
        w.add_value_length(cfg["hd"])
    if cfg["scaling"]:
        kind, factor = cfg["scaling"]
        w.add_rope_scaling_type({"linear": gguf.RopeScalingType.LINEAR}[kind])
        w.add_rope_scaling_factor(factor)
    w.add_file_type(0 if f32 else 1)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(cfg["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 2)
    w.add_add_bos_token(False)
    for k, v in tensors.items():
        w.add_tensor(k, v.astype(np.float32) if f32 else v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- transformers -------------------------------------------------------------------------

def load_transformers(path, cfg):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    d, f = os.path.split(os.path.abspath(path))
    config = AutoConfig.from_pretrained(d, gguf_file=f)
    if cfg["scaling"]:
        kind, factor = cfg["scaling"]
        rp = dict(config.rope_parameters)  # keeps rope_theta from the file
        rp.update(rope_type=kind, factor=factor)
        config.rope_parameters = rp
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, config=config,
                                                 dtype=torch.float32)
    model.eval()
    c = model.config
    rp = getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None)
    print("transformers %-13s %s  rope %s  head_dim %s  tied %s" % (
        os.path.basename(path), type(model).__name__, rp, getattr(c, "head_dim", None),
        c.tie_word_embeddings), file=sys.stderr)
    return model


def run_prompt(model, ids):
    import torch

    with torch.no_grad():
        o = model(torch.tensor([ids]), use_cache=True)
        last = o.logits[0, -1].double().numpy()
        rec = {"ids": list(ids), "top": top_pairs(log_softmax(last), TOP_K)}
        cache = {"past": o.past_key_values}

        def step(t):
            o2 = model(torch.tensor([[t]]), past_key_values=cache["past"], use_cache=True)
            cache["past"] = o2.past_key_values
            return o2.logits[0, -1].double().numpy()

        greedy, rec["gmargin"] = greedy_with_margins(last, step, N_GREEDY)
        rec["greedy"] = greedy
        # sanity: the cached continuation equals a full re-evaluation of the last step
        full = model(torch.tensor([list(ids) + greedy[:-1]])).logits[0, -1].double().numpy()
        assert int(np.argmax(full)) == greedy[-1]
    return rec


def reference(path, cfg, n_normal):
    model = load_transformers(path, cfg)
    out = []
    for j, n in enumerate(PROMPT_LENS):
        seed = 1000 * cfg["seed"] + 10 * j
        while True:
            ids = np.random.default_rng(seed).integers(0, n_normal, size=n).tolist()
            rec = run_prompt(model, ids)
            if min(rec["gmargin"]) >= MIN_MARGIN and rec["top"][0][1] - rec["top"][1][1] >= MIN_MARGIN:
                break
            seed += 1
        rec["name"] = "random%d_seed%d" % (n, seed)
        out.append(rec)
    return out


def write_fixture(path, model_file, version, recs, header):
    with open(path, "w") as f:
        f.write("# Reference for %s, written by scripts/gen_tiny_models.py (format documented "
                "there).\n" % model_file)
        for h in header:
            f.write("# " + h + "\n")
        f.write("model %s\n" % model_file)
        f.write("source transformers %s\n" % version)
        for r in recs:
            f.write("prompt %s\n" % r["name"])
            f.write("ids %d %s\n" % (len(r["ids"]), " ".join(map(str, r["ids"]))))
            f.write("top %d %s\n" % (len(r["top"]),
                                     " ".join("%d %.7f" % p for p in r["top"])))
            f.write("greedy %d %s\n" % (len(r["greedy"]), " ".join(map(str, r["greedy"]))))
            f.write("gmargin %d %s\n" % (len(r["gmargin"]),
                                          " ".join("%.5f" % m for m in r["gmargin"])))
            f.write("end\n")


# ---- llama.cpp (separate process: torch and ggml each bring an OpenMP runtime) -------------

def llamacpp_main(job_path):
    """Evaluate the jobs in job_path ({name: {gguf, prompts: [ids...]}}) and print JSON."""
    import llama_cpp

    llamacpp_no_extra_bufts()
    jobs = json.load(open(job_path))
    res = {"version": llama_cpp.__version__, "models": {}}
    for name, job in jobs.items():
        llm = llama_cpp.Llama(model_path=job["gguf"], n_ctx=256, n_batch=256, n_threads=1,
                              logits_all=True, verbose=False, seed=0,
                              type_k=0, type_v=0)  # GGML_TYPE_F32 K/V
        recs = []
        for ids in job["prompts"]:
            llm.reset()
            llm.eval(ids)
            last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            lp0 = log_softmax(last)
            greedy = []
            for _ in range(N_GREEDY):
                nxt = int(np.argmax(log_softmax(last)))
                greedy.append(nxt)
                llm.eval([nxt])
                last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            recs.append({"lp": lp0.tolist(), "greedy": greedy})
        res["models"][name] = recs
        llm.close() if hasattr(llm, "close") else None
    print(json.dumps(res))
    return 0


def llamacpp_check(refs, cfgs, tmp):
    """Write F32 copies, run llama.cpp in a child process, return {name: [header lines]}."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama_cpp not importable: no cross-check", file=sys.stderr)
        return {}
    jobs = {}
    for name, (cfg, tensors, recs) in refs.items():
        p = os.path.join(tmp, name + "-f32.gguf")
        write_gguf(p, name, cfg, tensors, f32=True)
        jobs[name] = {"gguf": p, "prompts": [r["ids"] for r in recs]}
    jp = os.path.join(tmp, "jobs.json")
    json.dump(jobs, open(jp, "w"))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--llamacpp-job", jp],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        raise SystemExit("llama.cpp child failed")
    lc = json.loads(out.stdout.strip().splitlines()[-1])
    hdr = {}
    for name, (cfg, _, recs) in refs.items():
        lines = ["llama.cpp cross-check (llama-cpp-python %s, F32 copy of this model, F32 "
                 "K/V, same ids):" % lc["version"]]
        for r, o in zip(recs, lc["models"][name]):
            lp = np.array(o["lp"])
            d = max(abs(lp[i] - v) for i, v in r["top"])
            same = int(np.argmax(lp)) == r["top"][0][0]
            ng = 0
            for a, b in zip(r["greedy"], o["greedy"]):
                if a != b:
                    break
                ng += 1
            lines.append("  %-18s max|dlogprob| over top %d = %.2e  top1_same=%d  greedy "
                         "%d/%d equal" % (r["name"], TOP_K, d, int(same), ng, N_GREEDY))
        for l in lines:
            print("%-13s %s" % (name, l), file=sys.stderr)
        hdr[name] = lines
    return hdr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--llamacpp-job", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.llamacpp_job:
        return llamacpp_main(a.llamacpp_job)

    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    _, _, _, n_normal = vocab()
    refs = {}
    for name, cfg in MODELS.items():
        path = os.path.join(a.out, name + ".gguf")
        tensors = make_weights(cfg)
        write_gguf(path, name, cfg, tensors)
        recs = reference(path, cfg, n_normal)
        for r in recs:
            print("transformers %-13s %-18s top1 %d (%.4f)  min gap %.4f  greedy %s" % (
                name, r["name"], r["top"][0][0], r["top"][0][1], min(r["gmargin"]),
                r["greedy"]), file=sys.stderr)
        refs[name] = (cfg, tensors, recs)
        print("%s: %d bytes" % (path, os.path.getsize(path)), file=sys.stderr)

    hdr = {}
    if not a.no_llamacpp:
        with tempfile.TemporaryDirectory() as tmp:
            hdr = llamacpp_check(refs, MODELS, tmp)
    for name, (cfg, _, recs) in refs.items():
        desc = ["%s: arch %s, %d layers, hidden %d, %d heads / %d KV heads, head_dim %d, ffn %d,"
                % (name, cfg["arch"], N_LAYER, cfg["embd"], cfg["heads"], cfg["kv"], cfg["hd"],
                   cfg["ff"]),
                "  rope base %g, scaling %s, %s output, q/k/v biases %s; transformers fp32 CPU."
                % (cfg["base"], cfg["scaling"], "untied" if cfg["untied"] else "tied",
                   "yes" if cfg["bias"] else "no")]
        write_fixture(os.path.join(a.out, name + ".txt"), name + ".gguf",
                      transformers.__version__, recs, desc + hdr.get(name, []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
