#!/usr/bin/env python3
"""gen_logits_fixtures.py — reference logits for the reference models, kept as test fixtures.

--preset smollm2 (the default): SmolLM2-135M-Instruct, models/SmolLM2-135M-Instruct.Q4_1.gguf,
  writes tests/fixtures/logits/transformers.txt (the reference tests check against) and, when
  llama-cpp-python is importable, tests/fixtures/logits/llamacpp.txt (a second, independent
  reference, for information).
--preset qwen: Qwen2.5-Coder-1.5B-Instruct, models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
  (scripts/get-model-qwen.sh), the same prompts (its own chat template), written to
  tests/fixtures/logits/qwen/ (read by tests/test_qwen_logits_slow.c).

References
  transformers  Hugging Face transformers loads the GGUF through the `gguf` package,
                dequantises every tensor to fp32 and runs its Llama forward in fp32 on the
                CPU. That is what our engine does (fp32 weights dequantised at load, fp32
                compute), so this is the reference tests compare to.
  llamacpp      llama.cpp (llama-cpp-python) evaluates the same token ids. It multiplies the
                Q4_1 weights against activations quantised to Q8_1 (and keeps K/V in f16),
                so its log-probs differ from the fp32 forward: by 0.1 to 0.6 at the top-20
                ids for this small model (the header of llamacpp.txt has the numbers; an
                fp64 numpy forward with simulated Q8 activations moves by the same amount,
                while one without matches transformers to 2e-5). Not a pass/fail reference.

Prompt token ids come from the transformers GGUF tokenizer with special tokens parsed and no
BOS (both models' tokenizer.ggml.add_bos_token is false). The script also tokenizes every prompt
with llama.cpp and prints any difference (the same ids are fed to both references either way).

File format (plain text, one record per line, fields separated by single spaces; readable with
fscanf, no JSON). Lines starting with '#' are comments. Every record starts with a keyword;
every list is preceded by its length:

    model FILE                         the GGUF file name
    source NAME VERSION                transformers 4.x / llamacpp 0.x
    prompt NAME                        starts a prompt block; NAME has no spaces
    ids N ID1 ... IDN                  prompt token ids
    top K ID LOGPROB ... (K pairs)     log-softmax of the last prompt position, K best ids
                                       sorted by decreasing log-prob (K = 40)
    greedy N ID1 ... IDN               greedy continuation (N = 32), EOS not treated as a stop
    gmargin N M1 ... MN                for each greedy step, log-prob gap between the best and
                                       the second-best token (small gap = near tie)
    prefix P K ID LOGPROB ...          log-softmax at the last position of the prefix of the
                                       first P prompt ids (only for some prompts: P = 1..8 and
                                       a few longer ones), K pairs as in `top`
    end                                ends the prompt block

Log-probs are written with 6 decimals. Usage:

    python3 scripts/gen_logits_fixtures.py [--preset smollm2|qwen] [--model PATH] [--out DIR]
                                           [--no-llamacpp]

Needs: torch, transformers, gguf, jinja2 (and llama-cpp-python for the second reference).
"""
import argparse
import os
import sys

import numpy as np

from fixture_common import greedy_with_margins, llamacpp_no_extra_bufts, log_softmax, top_pairs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Per model: the GGUF under models/, the fixture folder, and the chat prompt the model's own
# template must render for "What is the capital of France?" (its default system prompt).
PRESETS = {
    "smollm2": {
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llamacpp_matmul": "Q4_1 x Q8_1",
        "out": os.path.join("tests", "fixtures", "logits"),
        "chat": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                "<|im_end|>\n<|im_start|>assistant\n",
    },
    "qwen": {
        "model": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
        "llamacpp_matmul": "Q4_K/Q6_K x Q8_K",
        "out": os.path.join("tests", "fixtures", "logits", "qwen"),
        "chat": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                "assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                "<|im_end|>\n<|im_start|>assistant\n",
    },
}

TOP_K = 40

N_GREEDY = 32
PREFIX_LENS = [1, 2, 3, 4, 5, 6, 7, 8, 17, 64, 129, 200]

PARAGRAPH = (
    "The history of the printing press begins in the middle of the fifteenth century, when "
    "Johannes Gutenberg, a goldsmith from Mainz, combined several existing technologies into a "
    "single system for producing books. Movable type had been used in East Asia for centuries, "
    "first with ceramic and later with wooden and metal characters, but the large number of "
    "characters in Chinese writing made the method laborious. Gutenberg's alphabet needed only a "
    "few dozen letters, numerals and marks of punctuation, so a printer could cast many copies of "
    "each and reuse them page after page. He developed a hand mould that produced letters of "
    "uniform height, an alloy of lead, tin and antimony that melted at a low temperature and "
    "cooled quickly, and an oil-based ink that stuck to metal better than the water-based inks "
    "used by scribes. The press itself was adapted from the screw presses that farmers used to "
    "make wine and olive oil. Around 1455 his workshop completed a Bible of about 1,280 pages, "
    "printed in two columns of forty-two lines each; fewer than fifty copies survive today. "
    "Within a few decades printing shops had opened in more than two hundred European towns, and "
    "by 1500 they had produced millions of volumes. The cost of books fell sharply, literacy "
    "spread beyond the clergy and the nobility, scholars could compare identical copies of the "
    "same text, and new ideas travelled faster than any government or church could control them. "
    "Historians still debate how much of the Reformation, the Scientific Revolution and the rise "
    "of the modern state can be traced back to this one machine."
)

CODE = (
    "def fibonacci(n: int) -> list[int]:\n"
    "    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n"
    "    seq = [0, 1]\n"
    "    while len(seq) < n:\n"
    "        seq.append(seq[-1] + seq[-2])\n"
    "    return seq[:n]\n"
    "\n"
    "\n"
    "if __name__ == \"__main__\":\n"
    "    print(fibonacci(12))  # 144 is the 13th\n"
)

# Chosen so that no greedy step of the reference is a near tie (best-second gap >= 0.1).
SENTENCE = "Once upon a time, in a small village at the edge of a great forest, there lived"


def chat_prompt(gguf_path, expected):
    """Render the conversation with the chat template stored in the GGUF, as llama.cpp,
    transformers and the model card do (default system prompt, generation prompt); it must
    give `expected`."""
    import gguf
    import jinja2

    r = gguf.GGUFReader(gguf_path)
    tmpl = r.fields["tokenizer.chat_template"].contents()
    env = jinja2.Environment()
    text = env.from_string(tmpl).render(
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
    )
    assert text == expected, repr(text)
    return text


def prompts(gguf_path, chat_expected):
    # (name, text, record prefixes?)
    return [
        ("chat_capital", chat_prompt(gguf_path, chat_expected), False),
        ("sentence", SENTENCE, False),
        ("code", CODE, False),
        ("paragraph", PARAGRAPH, True),
    ]


def fmt_pairs(pairs):
    return " ".join("%d %.6f" % (i, v) for i, v in pairs)


# ---- transformers -------------------------------------------------------------------------

def run_transformers(gguf_path, plist):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    d, f = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    out = {"version": transformers.__version__, "prompts": []}
    for name, text, want_prefix in plist:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        rec = {"name": name, "text": text, "ids": ids}
        with torch.no_grad():
            o = model(torch.tensor([ids]), use_cache=True)
            logits = o.logits[0].double().numpy()  # [T, vocab]
            rec["top"] = top_pairs(log_softmax(logits[-1]), TOP_K)
            if want_prefix:
                rec["prefix"] = [(p, top_pairs(log_softmax(logits[p - 1]), TOP_K))
                                 for p in PREFIX_LENS if p <= len(ids)]
            # Greedy continuation with the KV cache, EOS not a stop (like ignore_eos).
            cache = {"past": o.past_key_values}

            def step(t):
                o2 = model(torch.tensor([[t]]), past_key_values=cache["past"], use_cache=True)
                cache["past"] = o2.past_key_values
                return o2.logits[0, -1].double().numpy()

            greedy, rec["gmargin"] = greedy_with_margins(logits[-1], step, N_GREEDY)
            rec["greedy"] = greedy
        out["prompts"].append(rec)
        print("transformers %-13s %4d ids  top1 %d (%.4f)  greedy: %r" % (
            name, len(ids), rec["top"][0][0], rec["top"][0][1], tok.decode(greedy)),
            file=sys.stderr)
    return out, tok


# ---- llama.cpp ----------------------------------------------------------------------------

def read_fixture(path):
    """Parse a fixture file written by write() (used for the llama.cpp pass)."""
    out = {"prompts": []}
    cur = None
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            k = w[0]
            if k == "prompt":
                cur = {"name": w[1]}
                out["prompts"].append(cur)
            elif k == "ids":
                cur["ids"] = [int(x) for x in w[2:]]
            elif k == "top":
                cur["top"] = [(int(w[i]), float(w[i + 1])) for i in range(2, len(w), 2)]
            elif k == "greedy":
                cur["greedy"] = [int(x) for x in w[2:]]
            elif k == "gmargin":
                cur["gmargin"] = [float(x) for x in w[2:]]
            elif k == "prefix":
                cur.setdefault("prefix", []).append(
                    (int(w[1]), [(int(w[i]), float(w[i + 1])) for i in range(3, len(w), 2)]))
    return out


def run_llamacpp(gguf_path, ref):
    import llama_cpp

    llamacpp_no_extra_bufts()
    n_max = max(len(p["ids"]) for p in ref["prompts"]) + N_GREEDY + 16
    llm = llama_cpp.Llama(model_path=gguf_path, n_ctx=max(512, n_max), n_batch=512,
                          n_threads=os.cpu_count(), logits_all=True, verbose=False, seed=0)
    out = {"version": llama_cpp.__version__, "prompts": []}
    for p in ref["prompts"]:
        lids = llm.tokenize(p["text"].encode("utf-8"), add_bos=False, special=True)
        ids = p["ids"]
        rec = {"name": p["name"], "ids": ids, "llama_ids": list(lids)}
        llm.reset()
        llm.eval(ids)
        scores = np.array(llm.scores[: llm.n_tokens], dtype=np.float64)
        rec["top"] = top_pairs(log_softmax(scores[-1]), TOP_K)
        if "prefix" in p:
            rec["prefix"] = [(pl, top_pairs(log_softmax(scores[pl - 1]), TOP_K))
                             for pl, _ in p["prefix"]]
        def step(t):
            llm.eval([t])
            return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)

        rec["greedy"], rec["gmargin"] = greedy_with_margins(scores[-1], step, N_GREEDY)
        out["prompts"].append(rec)
    return out


def compare(ref, other, top=20):
    """max |Δ log-prob| over ref's top `top` ids, at the last position, per prompt."""
    res = {}
    for pr, po in zip(ref["prompts"], other["prompts"]):
        # Need the other side's full distribution at the ref's top ids: recompute from pairs
        # when present, else mark missing (ids outside other's top-40 are unlikely).
        od = dict(po["top"])
        d = 0.0
        for i, v in pr["top"][:top]:
            if i not in od:
                d = float("inf")
                break
            d = max(d, abs(v - od[i]))
        pre = 0.0
        for (pl, a), (_, b) in zip(pr.get("prefix", []), po.get("prefix", [])):
            bd = dict(b)
            for i, v in a[:top]:
                pre = max(pre, abs(v - bd[i]) if i in bd else float("inf"))
        ng = 0
        for a, b in zip(pr["greedy"], po["greedy"]):
            if a != b:
                break
            ng += 1
        res[pr["name"]] = (d, pr["top"][0][0] == po["top"][0][0], ng, pre)
    return res


def write(path, src, version, model_name, data, header_lines):
    with open(path, "w") as f:
        f.write("# Reference logits for %s, written by scripts/gen_logits_fixtures.py\n"
                % model_name)
        f.write("# (format documented at the top of that script).\n")
        for h in header_lines:
            f.write("# " + h + "\n")
        f.write("model %s\n" % model_name)
        f.write("source %s %s\n" % (src, version))
        for p in data["prompts"]:
            f.write("prompt %s\n" % p["name"])
            f.write("ids %d %s\n" % (len(p["ids"]), " ".join(map(str, p["ids"]))))
            f.write("top %d %s\n" % (len(p["top"]), fmt_pairs(p["top"])))
            f.write("greedy %d %s\n" % (len(p["greedy"]), " ".join(map(str, p["greedy"]))))
            f.write("gmargin %d %s\n" % (len(p["gmargin"]),
                                          " ".join("%.4f" % m for m in p["gmargin"])))
            for pl, pairs in p.get("prefix", []):
                f.write("prefix %d %d %s\n" % (pl, len(pairs), fmt_pairs(pairs)))
            f.write("end\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="smollm2",
                    help="which reference model (default model path and output folder)")
    ap.add_argument("--model", help="GGUF path (default: models/<the preset's file>)")
    ap.add_argument("--out", help="output folder (default: the preset's)")
    ap.add_argument("--no-llamacpp", action="store_true", help="only transformers.txt")
    ap.add_argument("--llamacpp-only", action="store_true",
                    help="only llamacpp.txt, from the ids in an existing transformers.txt")
    a = ap.parse_args()
    preset = PRESETS[a.preset]
    a.model = a.model or os.path.join(ROOT, "models", preset["model"])
    a.out = a.out or os.path.join(ROOT, preset["out"])

    os.makedirs(a.out, exist_ok=True)
    model_name = os.path.basename(a.model)
    ref_path = os.path.join(a.out, "transformers.txt")
    if not a.llamacpp_only:
        plist = prompts(a.model, preset["chat"])
        ref, _tok = run_transformers(a.model, plist)
        write(ref_path, "transformers", ref["version"], model_name, ref,
              ["transformers GGUF loader, every tensor dequantised to fp32, fp32 CPU forward.",
               "Prompt ids: transformers GGUF tokenizer, special tokens parsed, no BOS."])
        if a.no_llamacpp:
            return 0
        # llama.cpp runs in a process of its own (torch and ggml each bring an OpenMP runtime).
        import subprocess
        return subprocess.call([sys.executable, os.path.abspath(__file__), "--llamacpp-only",
                                "--preset", a.preset, "--model", a.model, "--out", a.out])

    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama_cpp not importable: llamacpp.txt not written", file=sys.stderr)
        return 0
    ref = read_fixture(ref_path)
    texts = {name: text for name, text, _ in prompts(a.model, preset["chat"])}
    for p in ref["prompts"]:
        p["text"] = texts[p["name"]]
    lc = run_llamacpp(a.model, ref)
    cmp = compare(ref, lc)
    hdr = ["llama.cpp (llama-cpp-python %s) on the same ids as transformers.txt;" % lc["version"],
           "%s matmuls (AMX extra buffers off), f16 K/V: log-probs differ from the" %
           preset["llamacpp_matmul"],
           "fp32 reference by activation quantisation noise. Versus transformers.txt: max",
           "|dlogprob| over its top 20 at the last position, same top-1, greedy ids equal",
           "before the first difference, and max |dlogprob| over the prefix records:"]
    for name, (d, same, ng, pre) in cmp.items():
        has_prefix = any("prefix" in p for p in ref["prompts"] if p["name"] == name)
        hdr.append("  %-13s max_dlp=%.4f top1_same=%d greedy_prefix_match=%d/%d prefix_dlp=%s"
                   % (name, d, int(same), ng, N_GREEDY,
                      ("%.4f" % pre) if has_prefix else "-"))
    for pr, po in zip(ref["prompts"], lc["prompts"]):
        if pr["ids"] != po["llama_ids"]:
            hdr.append("  tokenization differs for %s: llama.cpp gives %d ids (%s...)"
                       % (pr["name"], len(po["llama_ids"]),
                          " ".join(map(str, po["llama_ids"][:16]))))
        else:
            hdr.append("  tokenization of %s identical in llama.cpp" % pr["name"])
    for h in hdr:
        print(h, file=sys.stderr)
    write(os.path.join(a.out, "llamacpp.txt"), "llamacpp", lc["version"], model_name, lc, hdr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
