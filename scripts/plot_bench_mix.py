#!/usr/bin/env python3
"""plot_bench_mix.py — plot the per-step TSV written by `longctx bench mix` into a PNG: for each
--token-layers setting, the decode inter-token latency of every step against the time since
the long prompt arrived (its first token marked), so chunked prefill's tall stalls and
segmented prefill's longer, flatter window are seen side by side.

Usage: python3 scripts/plot_bench_mix.py bench-mix-....tsv out.png [--title TEXT]
"""
import argparse
import csv
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("png")
    ap.add_argument("--title", default="decode inter-token latency while a long prompt prefills")
    a = ap.parse_args()
    steps = defaultdict(list)  # setting -> [(phase, ms)]
    with open(a.tsv) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["phase"] != "before":
                steps[int(row["token_layers"])].append((row["phase"], float(row["ms"])))
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for tl in sorted(steps):
        t, xs, ys, first = 0.0, [], [], None
        for phase, ms in steps[tl]:
            t += ms / 1e3
            xs.append(t)
            ys.append(ms)
            if phase == "after" and first is None:
                first = xs[-2] if len(xs) > 1 else 0.0
        label = "chunked prefill" if tl == 0 else f"segmented, {tl} token-layers/step"
        (line,) = ax.plot(xs, ys, lw=1, label=label)
        if first is not None:
            ax.axvline(first, color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("seconds since the long prompt arrived (dotted: its first token)")
    ax.set_ylabel("step time = decode ITL (ms)")
    ax.set_yscale("log")
    ax.set_title(a.title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)


if __name__ == "__main__":
    main()
