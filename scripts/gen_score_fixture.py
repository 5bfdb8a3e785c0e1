#!/usr/bin/env python3
"""gen_score_fixture.py — per-token log-probs of a text under SmolLM2-135M-Instruct, the
reference for teacher-forced scoring (lc_context_score, `longctx eval ppl`).

Hugging Face transformers loads models/SmolLM2-135M-Instruct.Q4_1.gguf (dequantised to fp32,
fp32 forward on the CPU, the same reference as scripts/gen_logits_fixtures.py) and evaluates the
paragraph and the code of that script joined by a blank line, tokenized without special tokens
and without BOS. Writes tests/fixtures/logits/score.txt:

    model FILE
    source transformers VERSION
    ids N ID1 ... IDN
    logprob M LP1 ... LPM      M = N - 1; LPt = log p(ids[t] | ids[0..t)), t = 1 .. N-1
    nll MEAN                   mean of -LP over the M positions (its exp is the perplexity)

Log-probs have 6 decimals. Usage: python3 scripts/gen_score_fixture.py [--model PATH] [--out F]
Needs: torch, transformers, gguf.
"""
import argparse
import os
import sys

import numpy as np

from fixture_common import log_softmax
from gen_logits_fixtures import CODE, DEFAULT_MODEL, PARAGRAPH, ROOT

DEFAULT_OUT = os.path.join(ROOT, "tests", "fixtures", "logits", "score.txt")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=DEFAULT_OUT)
    a = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d, f = os.path.split(os.path.abspath(a.model))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    ids = tok(PARAGRAPH + "\n\n" + CODE, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double().numpy()
    lp = [float(log_softmax(logits[t - 1])[ids[t]]) for t in range(1, len(ids))]
    nll = -float(np.mean(lp))
    with open(a.out, "w") as out:
        out.write("# Per-token log-probs (teacher forcing), written by scripts/gen_score_fixture.py\n")
        out.write("model %s\n" % f)
        out.write("source transformers %s\n" % transformers.__version__)
        out.write("ids %d %s\n" % (len(ids), " ".join(map(str, ids))))
        out.write("logprob %d %s\n" % (len(lp), " ".join("%.6f" % v for v in lp)))
        out.write("nll %.6f\n" % nll)
    print("%d ids, mean nll %.4f, perplexity %.3f -> %s" % (len(ids), nll, np.exp(nll), a.out),
          file=sys.stderr)


if __name__ == "__main__":
    main()
