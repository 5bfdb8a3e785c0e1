#!/usr/bin/env python3
"""plot_passkey.py — plot the TSV written by `longctx eval passkey --out FILE.tsv` as a
heat map (context length x needle depth, cell = accuracy) into a PNG.

Usage: python3 scripts/plot_passkey.py results.tsv out.png [--title TEXT]
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
    ap.add_argument("--title", default="passkey retrieval accuracy")
    a = ap.parse_args()
    acc = defaultdict(dict)
    with open(a.tsv) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            acc[int(row["len"])][float(row["depth"])] = int(row["correct"]) / int(row["trials"])
    lens = sorted(acc)
    depths = sorted({d for v in acc.values() for d in v})
    grid = [[acc[n].get(d, float("nan")) for n in lens] for d in depths]
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(lens), 1.2 + 0.6 * len(depths)))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(lens)), [f"{n // 1024}K" if n >= 1024 else str(n) for n in lens])
    ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{100 * v:.0f}%", ha="center", va="center", fontsize=9)
    ax.set_title(a.title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)
    print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
