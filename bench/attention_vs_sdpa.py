#!/usr/bin/env python3
"""attention_vs_sdpa.py — one layer of dense attention, ours (bench_attention, attention.cu) vs
PyTorch SDPA (cuDNN and flash backends, enable_gqa) on the same GPU in one run: decode (one
query over N keys) and causal prefill (N queries over N keys), bf16, Llama-3.1-8B shape
(32 query / 8 KV heads, dim 128) and SmolLM2 shape (9 / 3, dim 64). Also measures the copy
bandwidth and the bf16 GEMM rate so each number can be read against the physical limit.

usage: attention_vs_sdpa.py BUILD_DIR [--out FILE] [--quick] [--modes decode,prefill] [--fp8]
--fp8 also times ours over the fp8 KV layout (bench_attention kv=e4m3; issue 23) at every shape:
its time, its speed over our fp16 pools, and its bytes (codes + scales) against the copy rate.
Writes a markdown table (GPU, date, commit from $LC_COMMIT) to --out and prints it.
"""
import argparse
import datetime
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_cuda(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0)
    ts.sort()
    return ts[len(ts) // 2]


def copy_bandwidth():
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    us = time_cuda(lambda: y.copy_(x), 10)
    del x, y
    torch.cuda.empty_cache()
    return 2 * (2 << 30) / (us * 1e-6)  # bytes read + written per second


def gemm_rate():
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    us = time_cuda(lambda: a @ b, 10)
    del a, b
    torch.cuda.empty_cache()
    return 2 * 8192**3 / (us * 1e-6)


def sdpa_us(backend, mode, h, g, d, n, reps):
    nq = 1 if mode == "decode" else n
    q = torch.randn(1, h * g, nq, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(1, h, n, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(1, h, n, d, dtype=torch.bfloat16, device="cuda")
    causal = mode == "prefill"
    try:
        with sdpa_kernel([backend]):
            us = time_cuda(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                  enable_gqa=True), reps)
    except RuntimeError as e:
        print(f"  sdpa {backend.name} {mode} n={n}: not run ({str(e).splitlines()[0][:80]})",
              file=sys.stderr)
        us = None
    del q, k, v
    torch.cuda.empty_cache()
    return us


def ours_us(build, mode, h, g, d, n, reps, kv="f16"):
    r = subprocess.run([os.path.join(build, "bench_attention"), mode, str(h), str(g), str(d),
                        str(n), str(reps), "kv=" + kv], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  ours {mode} n={n}: failed: {r.stderr.strip()}", file=sys.stderr)
        return None
    return float(r.stdout.split()[5])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--modes", default="decode,prefill", help="comma-separated: decode, prefill")
    ap.add_argument("--fp8", action="store_true", help="also ours over the fp8 KV layout")
    a = ap.parse_args()
    gpu = torch.cuda.get_device_name(0)
    bw = copy_bandwidth()
    fl = gemm_rate()
    K = 1024
    shapes = [("Llama-3.1-8B", 8, 4, 128), ("SmolLM2", 3, 3, 64)]
    dec_n = [32 * K, 128 * K, 512 * K, 1024 * K]
    pre_n = [8 * K, 32 * K] if a.quick else [8 * K, 32 * K, 128 * K]
    rows = []
    for name, h, g, d in shapes:
        for mode, ns in (("decode", dec_n), ("prefill", pre_n)):
            if mode not in a.modes.split(","):
                continue
            for n in ns:
                reps = 50 if mode == "decode" else (3 if n >= 128 * K else 10)
                ours = ours_us(a.build, mode, h, g, d, n, reps)
                ours8 = ours_us(a.build, mode, h, g, d, n, reps, "e4m3") if a.fp8 else None
                cud = sdpa_us(SDPBackend.CUDNN_ATTENTION, mode, h, g, d, n, reps)
                fla = sdpa_us(SDPBackend.FLASH_ATTENTION, mode, h, g, d, n, reps)
                kv_bytes = 2 * n * h * d * 2
                flops = 4 * h * g * d * n * (1 if mode == "decode" else n / 2)
                rows.append((name, mode, n, ours, cud, fla, kv_bytes, flops, ours8, 2 * n * h * (d + 4)))
                print(f"{name} {mode} {n}: ours {ours} cudnn {cud} flash {fla} ours fp8 {ours8}",
                      file=sys.stderr)

    def f(x, spec="{:.1f}"):
        return "n/a" if x is None else spec.format(x)

    date = datetime.date.today().isoformat()
    lines = [f"# Dense attention, one layer, bf16: ours vs PyTorch SDPA",
             "",
             f"GPU: {gpu}; date {date}; commit {os.environ.get('LC_COMMIT', 'unknown')}; "
             f"torch {torch.__version__}. Measured in this run: copy {bw / 1e12:.2f} TB/s "
             f"(bytes read + written), bf16 GEMM 8192^3 {fl / 1e12:.0f} TFLOP/s.",
             "",
             "Times are medians of CUDA-event timings after warm-up (decode 50 runs, prefill "
             "10, 3 at 128K). Decode: one query over N keys, batch 1; bytes = K + V read once; "
             "'of copy' = that rate over the measured copy rate. Prefill: causal, N queries over "
             "N keys; FLOPs = 4·heads·dim·N²/2. Ours reads pre-RoPE keys from 64-token pages and "
             "rotates them in the kernel; SDPA reads contiguous, already-rotated keys.",
             "",
             "| shape | mode | keys | ours µs | cuDNN µs | flash µs | ours / cuDNN speed | "
             "ours TB/s or TFLOP/s | of limit |" + (" ours fp8 µs | fp8 / f16 speed | fp8 of "
                                                   "limit |" if a.fp8 else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if a.fp8 else "")]
    if a.fp8:
        lines.insert(-2, "fp8: our kernel over the fp8 layout (e4m3 codes + an fp32 scale per "
                     "token and head: 2·N·heads·(dim + 4) bytes); decode's limit is those bytes "
                     "over the copy rate, prefill's the GEMM rate.\n")
    for name, mode, n, ours, cud, fla, kvb, flops, ours8, b8 in rows:
        ratio = (cud / ours) if (ours and cud) else None
        if mode == "decode":
            rate = kvb / (ours * 1e-6) / 1e12 if ours else None
            lim = (kvb / (ours * 1e-6)) / bw if ours else None
        else:
            rate = flops / (ours * 1e-6) / 1e12 if ours else None
            lim = (flops / (ours * 1e-6)) / fl if ours else None
        line = (f"| {name} | {mode} | {n // K}K | {f(ours)} | {f(cud)} | {f(fla)} | "
                f"{f(ratio, '{:.2f}x')} | {f(rate, '{:.2f}')} | {f(lim, '{:.0%}')} |")
        if a.fp8:
            sp = (ours / ours8) if (ours and ours8) else None
            if mode == "decode":
                lim8 = (b8 / (ours8 * 1e-6)) / bw if ours8 else None
            else:
                lim8 = (flops / (ours8 * 1e-6)) / fl if ours8 else None
            line += f" {f(ours8)} | {f(sp, '{:.2f}x')} | {f(lim8, '{:.0%}')} |"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
