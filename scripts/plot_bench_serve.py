#!/usr/bin/env python3
"""plot_bench_serve.py — latency percentiles against request rate from `longctx bench serve`
result files (one JSON per rate, `--result-file`; vllm bench serve's files read the same):
one panel each for time to first token, time per output token and end-to-end latency, a line
per percentile, and the output token throughput. Tooling only (matplotlib).

Usage: plot_bench_serve.py RESULT.json [RESULT.json ...] -o OUT.png [--title TEXT]
"""
import argparse
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    runs = []
    for path in a.results:
        with open(path) as f:
            d = json.load(f)
        rate = d.get("request_rate")
        if rate in (None, "inf") or not isinstance(rate, (int, float)):
            # all at once: plot at the measured request throughput instead
            rate = d.get("request_throughput", 0.0)
        runs.append((float(rate), d))
    if not runs:
        sys.exit("plot_bench_serve: no results")
    runs.sort(key=lambda r: r[0])
    rates = [r for r, _ in runs]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for ax, metric, label in zip(axes[:3], ["ttft", "tpot", "e2el"],
                                 ["time to first token (ms)", "time per output token (ms)",
                                  "end-to-end latency (ms)"]):
        keys = sorted({k for _, d in runs for k in d
                       if re.fullmatch(r"p[0-9.]+_%s_ms" % metric, k)},
                      key=lambda k: float(k[1:].split("_")[0]))
        for k in keys:
            ax.plot(rates, [d.get(k, float("nan")) for _, d in runs], marker="o",
                    label=k.split("_")[0].upper())
        ax.plot(rates, [d.get("mean_%s_ms" % metric, float("nan")) for _, d in runs],
                marker="x", linestyle="--", label="mean")
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[3].plot(rates, [d.get("output_throughput", 0) for _, d in runs], marker="o")
    axes[3].set_xlabel("request rate (req/s)")
    axes[3].set_ylabel("output tokens/s")
    axes[3].grid(alpha=0.3)
    d0 = runs[0][1]
    fig.suptitle(a.title or "%s — %s prompts, %s completed at the first rate" % (
        d0.get("model_id"), d0.get("num_prompts"), d0.get("completed")))
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("plot_bench_serve: wrote", a.out)


if __name__ == "__main__":
    main()
