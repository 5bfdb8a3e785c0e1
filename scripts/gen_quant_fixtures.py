#!/usr/bin/env python3
"""Generate tests/fixtures/quant/*.bin: raw ggml blocks + the fp32 values that the PyPI `gguf`
package (an independent reference, not written here) dequantises them to. tests/test_quant.c
dequantises the same bytes with lc_dequantize and requires bit-identical results.

For types the package can quantize (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) half the blocks are
quantized from random data (plus edge cases: zeros, constants, specials for F16/BF16) and half
are random-but-valid raw blocks; for dequantize-only types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) all
blocks are random bytes with the fp16 scale fields set to finite values.

File layout (all little-endian):
    offset 0   char[4] magic "LCQF"
    offset 4   u32     format version (1)
    offset 8   u32     ggml type id
    offset 12  u32     n: number of elements (a multiple of the block size)
    offset 16  u32     raw_bytes: size of the block data
    offset 20  u32     flags: bit 0 = source fp32 values follow the reference values
    offset 24  u8      raw[raw_bytes]
    then       f32     ref[n]        dequantised by gguf.quants.dequantize
    then       f32     src[n]        (flag bit 0) the values that were quantized to raw;
                                     only written for F16/BF16, where the test also checks
                                     lc_fp32_to_fp16 / lc_fp32_to_bf16 against the package

Usage: python3 scripts/gen_quant_fixtures.py [outdir]   (default tests/fixtures/quant)
Deterministic (fixed seed).
"""
import os
import struct
import sys

import numpy as np
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

# byte offsets of the fp16 scale fields inside one block, per type
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTIZABLE = {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}

rng = np.random.default_rng(20261122)


def random_blocks(qtype, n_blocks):
    blck, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for b in range(n_blocks):
        for off in HALF_FIELDS[qtype]:
            if b == 0:
                v = np.float16(6e-6)  # a subnormal fp16 scale
            elif b == 1:
                v = np.float16(0.0)
            else:
                v = np.float16(rng.uniform(-2.0, 2.0))
            raw[b, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    return raw.reshape(-1)


def source_values(n):
    x = rng.standard_normal(n).astype(np.float32)
    x[:32] = 0.0                                   # an all-zero block (d = 0)
    x[32:64] = 0.25                                # a constant block
    x[64:96] *= np.float32(1000.0)                 # a large block
    x[96:128] *= np.float32(1e-4)                  # a tiny block
    return x


def specials_f16():
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.0, 65520.0, -65520.0, 1e9,
            6.103515625e-05, 6.1e-05, 5.960464477539063e-08, 2.9802322387695312e-08,
            2.98023224e-08 * 1.0000001, 8.940696716308594e-08, 1e-8, 1e-12, 1.0009765625,
            1.00048828125, 1.00146484375, 2049.0, 2051.0, 3.0517578125e-05, -1.5e-7]
    return np.array(vals, dtype=np.float32)


def specials_bf16():
    nan_payload = np.frombuffer(struct.pack("<I", 0x7f800001), dtype=np.float32)[0]
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, nan_payload, 3.4028235e38, 3.39e38, 1e-40,
            1.00390625, 1.005859375, 1.0029296875, 1.0009765625, -2.5, 1e-45]
    return np.array(vals, dtype=np.float32)


def write(path, qtype, raw, ref, src=None):
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    ref = np.ascontiguousarray(ref, dtype=np.float32).reshape(-1)
    n = ref.size
    with open(path, "wb") as f:
        f.write(b"LCQF")
        f.write(struct.pack("<IIIII", 1, int(qtype), n, raw.size, 1 if src is not None else 0))
        f.write(raw.tobytes())
        f.write(ref.astype("<f4").tobytes())
        if src is not None:
            f.write(np.ascontiguousarray(src, dtype="<f4").tobytes())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant")
    os.makedirs(out, exist_ok=True)

    # F16 / BF16: quantized from data with special values; src kept for conversion checks
    for qtype, specials in ((T.F16, specials_f16()), (T.BF16, specials_bf16())):
        x = np.concatenate([specials, source_values(1024 - specials.size)])
        x[200:264] = rng.uniform(-1e-4, 1e-4, 64).astype(np.float32)   # fp16 subnormal range
        x[264:300] = rng.uniform(-1e5, 1e5, 36).astype(np.float32)    # fp16 overflow range
        with np.errstate(over="ignore"):  # values beyond the fp16 range become inf
            raw = quants.quantize(x, qtype).view(np.uint8)
        ref = quants.dequantize(raw.view(np.uint8).copy(), qtype)
        write(os.path.join(out, qtype.name.lower() + ".bin"), qtype, raw, ref, x)

    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
        blck, size = GGML_QUANT_SIZES[qtype]
        if qtype in QUANTIZABLE:
            x = source_values(16 * blck)
            q = quants.quantize(x.reshape(1, -1), qtype).reshape(-1)
            raw = np.concatenate([q, random_blocks(qtype, 16)])
        else:
            raw = random_blocks(qtype, 4)
        ref = quants.dequantize(raw.reshape(1, -1), qtype).reshape(-1)
        assert ref.size * size == raw.size * blck
        write(os.path.join(out, qtype.name.lower() + ".bin"), qtype, raw, ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
