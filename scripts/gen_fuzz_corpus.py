#!/usr/bin/env python3
"""Write seed inputs for fuzz/fuzz_gguf.c into fuzz/corpus/: a few small valid GGUF images made
with the PyPI `gguf` package's GGUFWriter (every value type, arrays incl. nested, tensors of
several types, a custom alignment) and, when the model is present, the first 16 KiB of
models/SmolLM2-135M-Instruct.Q4_1.gguf (a real header, truncated inside the token list).
Total stays well under 64 KiB. Usage: python3 scripts/gen_fuzz_corpus.py [outdir]
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, quants

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write(path, arch, fill, alignment=None):
    w = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        w.data_alignment = alignment
        w.add_uint32("general.alignment", alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_types(w):
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "hello \"gguf\"\n")
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 2.25)
    w.add_array("a.i32", [1, -2, 3])
    w.add_array("a.f32", [0.5, 1.5])
    w.add_array("a.str", ["<s>", "</s>", "hello", ""])
    w.add_array("a.bool", [True, False])
    w.add_array("a.nested", [[1, 2], [3]])
    w.add_tensor("a", np.arange(8, dtype=np.float32).reshape(2, 4))


def llama_like(w):
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_head_count(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "c", "ab"])
    w.add_token_merges(["a b"])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    w.add_tensor("token_embd.weight", quants.quantize(x, T.Q8_0), raw_dtype=T.Q8_0)
    w.add_tensor("blk.0.attn_q.weight", quants.quantize(x, T.Q4_1), raw_dtype=T.Q4_1)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    w.add_tensor("output.weight", x.astype(np.float16), raw_dtype=T.F16)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "all_types.gguf"), "test", all_types)
    write(os.path.join(out, "llama_like.gguf"), "llama", llama_like)
    write(os.path.join(out, "align64.gguf"), "llama", llama_like, alignment=64)
    write(os.path.join(out, "empty.gguf"), "x", lambda w: None)
    model = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(model):
        with open(model, "rb") as f, open(os.path.join(out, "smollm2_head16k.gguf"), "wb") as o:
            o.write(f.read(16384))
    return 0


if __name__ == "__main__":
    sys.exit(main())
