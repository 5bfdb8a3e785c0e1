#!/usr/bin/env python3
"""bench_llamacpp.py — llama.cpp (llama-cpp-python) CPU speed on a GGUF model, the peer that
`longctx bench` compares our CPU path with.

For each context length C: a fresh llama.cpp context with n_ctx = C + 64, n_batch 512 and
n_threads = --threads evaluates a prompt of C random token ids (seeded; ids that are not special
tokens), which gives prompt tokens/s, then decodes --gen tokens greedily after it, one token per
llama_decode, which gives decode tokens/s (at a context of C..C+gen). A 16-token warm-up runs
first so the mapping is paged in.

stdout: one line per context, exactly
    llamacpp ctx=512 prompt_tps=1234.5 decode_tps=67.8
(anything else goes to stderr). Options: --model, --contexts 512,2048,8192, --threads N
(default: all cores), --gen N (default 32), --seed, --extra-bufts (see no_extra_bufts()).
"""
import argparse
import os
import sys
import time

import numpy as np

from fixture_common import llamacpp_no_extra_bufts as no_extra_bufts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_one(llama_cpp, model, ctx, threads, n_gen, rng):
    llm = llama_cpp.Llama(model_path=model, n_ctx=ctx + 64, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, logits_all=False, verbose=False)
    n_vocab = llm.n_vocab()
    # Ordinary tokens only: skip the low ids, which hold the special/control tokens.
    prompt = rng.integers(256, n_vocab, size=ctx).tolist()

    llm.eval(prompt[:16])  # warm-up
    llm.reset()

    t0 = time.perf_counter()
    llm.eval(prompt)
    t_prompt = time.perf_counter() - t0

    t0 = time.perf_counter()
    for _ in range(n_gen):
        # logits_all is off, so llm.scores is not filled: read the last row from the context.
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
        llm.eval([int(np.argmax(logits))])
    t_gen = time.perf_counter() - t0
    if hasattr(llm, "close"):
        llm.close()
    return ctx / t_prompt, (n_gen / t_gen if n_gen > 0 else 0.0), t_prompt, t_gen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--contexts", default="512,2048,8192",
                    help="comma-separated prompt lengths in tokens")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--gen", type=int, default=32, help="tokens decoded after each prompt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra-bufts", action="store_true",
                    help="keep llama.cpp's extra buffer types (AMX); off by default, see above")
    a = ap.parse_args()

    try:
        import llama_cpp
    except ImportError:
        log("bench_llamacpp: llama-cpp-python is not installed (pip install llama-cpp-python)")
        return 2
    if not os.path.exists(a.model):
        log("bench_llamacpp: model %s not found (run scripts/get-model.sh)" % a.model)
        return 2

    extra = "on" if a.extra_bufts else ("off" if no_extra_bufts() else "n/a")
    contexts = [int(x) for x in a.contexts.split(",") if x.strip()]
    rng = np.random.default_rng(a.seed)
    log("bench_llamacpp: llama-cpp-python %s, model %s, threads %d, gen %d, "
        "extra bufts %s" % (llama_cpp.__version__, os.path.basename(a.model), a.threads, a.gen,
                            extra))
    for ctx in contexts:
        ptps, dtps, tp, tg = bench_one(llama_cpp, a.model, ctx, a.threads, a.gen, rng)
        log("  ctx %d: prompt %.2f s, decode %d tokens %.2f s" % (ctx, tp, a.gen, tg))
        print("llamacpp ctx=%d prompt_tps=%.1f decode_tps=%.1f" % (ctx, ptps, dtps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
