#!/usr/bin/env python3
"""plot_eval.py — draw the summaries written by `longctx eval suite --out PREFIX` (PREFIX.tsv)
as one panel per task: score against prompt length (log scale), one line per file (a model
and method), with the 95% interval as a band.

Usage: python3 scripts/plot_eval.py A.tsv [B.tsv ...] -o out.png [--title TEXT]
       [--label A=NAME ...]   (default label: the file's method column and its file name)
"""
import argparse
import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TASKS = ["fact", "multikey", "multivalue", "twohop", "aggregate", "qa"]


def length_label(n):
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % 1024 == 0:
        return f"{n >> 10}K"
    return str(n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default="longctx eval suite")
    ap.add_argument("--label", action="append", default=[],
                    help="FILE=NAME: the legend entry of one file")
    a = ap.parse_args()
    names = dict(x.split("=", 1) for x in a.label)
    series = []  # (label, {task: [(len, mean, lo, hi)]})
    for path in a.tsv:
        rows = defaultdict(list)
        method = "?"
        with open(path) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                method = r["method"]
                rows[r["task"]].append((int(r["len"]), float(r["mean"]), float(r["ci_lo"]),
                                        float(r["ci_hi"])))
        label = names.get(path, f"{method} ({os.path.basename(path)})")
        series.append((label, rows))
    tasks = [t for t in TASKS if any(t in s for _, s in series)]
    if not tasks:
        raise SystemExit("plot_eval: no rows in " + ", ".join(a.tsv))
    cols = min(3, len(tasks))
    nrows = (len(tasks) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    all_lens = sorted({n for _, s in series for v in s.values() for n, *_ in v})
    for i, task in enumerate(tasks):
        ax = axes[i // cols][i % cols]
        for label, s in series:
            pts = sorted(s.get(task, []))
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax.plot(xs, [100 * p[1] for p in pts], marker="o", label=label)
            ax.fill_between(xs, [100 * p[2] for p in pts], [100 * p[3] for p in pts], alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_lens)
        ax.set_xticklabels([length_label(n) for n in all_lens], fontsize=8)
        ax.minorticks_off()
        ax.set_ylim(-3, 103)
        ax.set_title(task)
        ax.set_ylabel("score, %")
        ax.grid(alpha=0.3)
    for j in range(len(tasks), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_eval: wrote {a.out}")


if __name__ == "__main__":
    main()
