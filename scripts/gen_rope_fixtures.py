#!/usr/bin/env python3
"""gen_rope_fixtures.py — RoPE frequencies and attention factors from Hugging Face
transformers' rope initialisers (transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS), the
reference for tests/test_rope.c.

Output tests/fixtures/rope/rope.txt, one case per line:
  case NAME TYPE BASE N_ROT FACTOR ORIG_CTX LOW_FREQ HIGH_FREQ ATTN_FACTOR N f0 f1 ... f(N-1)
TYPE is none|linear|llama3|yarn; f_i are inverse frequencies (radians per position).
Usage: python3 scripts/gen_rope_fixtures.py   (needs torch + transformers)
"""
import os

import torch  # noqa: F401  (transformers needs it)
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CASES = [
    # name, type, base, head_dim, factor, orig_ctx, low, high
    ("smollm2", "default", 100000.0, 64, 1.0, 8192, 1.0, 4.0),
    ("llama2", "default", 10000.0, 128, 1.0, 4096, 1.0, 4.0),
    ("linear4", "linear", 10000.0, 128, 4.0, 4096, 1.0, 4.0),
    ("llama31", "llama3", 500000.0, 128, 8.0, 8192, 1.0, 4.0),
    ("llama32", "llama3", 500000.0, 64, 32.0, 8192, 1.0, 4.0),
    ("yarn4", "yarn", 1000000.0, 128, 4.0, 32768, 1.0, 4.0),
    ("yarn16", "yarn", 10000.0, 64, 16.0, 4096, 1.0, 4.0),
]


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "rope", "rope.txt")
    lines = ["# RoPE inverse frequencies from transformers' ROPE_INIT_FUNCTIONS "
             "(scripts/gen_rope_fixtures.py)"]
    for name, typ, base, hd, factor, orig, low, high in CASES:
        params = {"rope_type": typ, "rope_theta": base}
        if typ != "default":
            params["factor"] = factor
        if typ in ("llama3", "yarn"):
            params["original_max_position_embeddings"] = orig
        if typ == "llama3":
            params["low_freq_factor"] = low
            params["high_freq_factor"] = high
        cfg = LlamaConfig(hidden_size=hd * 8, num_attention_heads=8, head_dim=hd,
                          max_position_embeddings=int(orig * factor), rope_parameters=params)
        if typ == "default":
            inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).double() / hd))
            att = 1.0
        else:
            inv, att = ROPE_INIT_FUNCTIONS[typ](cfg, "cpu")
        ctype = {"default": "none"}.get(typ, typ)
        vals = " ".join(f"{float(v):.9e}" for v in inv)
        lines.append(f"case {name} {ctype} {base} {hd} {factor} {orig} {low} {high} "
                     f"{float(att):.9f} {len(inv)} {vals}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
