#!/usr/bin/env python3
"""plot_e2e.py — draw the tables of bench/e2e_methods.sh (OUT/<tag>/<tag>.md, rows `| method |
context | prompt tok/s | TTFT s | decode tok/s (mean) | decode tok/s (median step) | peak GiB |`)
as prompt and decode tokens/s against context, one line per method, several tables together.

Usage: python3 scripts/plot_e2e.py A.md [B.md ...] -o out.png [--title TEXT]
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    for line in open(path, encoding="utf-8"):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) >= 6 and re.fullmatch(r"\d+", c[1] or ""):
            try:
                yield c[0], int(c[1]), float(c[2]), float(c[5])
            except ValueError:
                continue  # a run that produced no number ("–")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tables", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    data = {}
    for t in a.tables:
        for m, ctx, prompt, decode in rows(t):
            data.setdefault(m, {})[ctx] = (prompt, decode)
    if not data:
        raise SystemExit("plot_e2e: no rows")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for m, pts in sorted(data.items()):
        xs = sorted(pts)
        axes[0].plot(xs, [pts[x][0] / 1e3 for x in xs], marker="o", label=m)
        axes[1].plot(xs, [pts[x][1] for x in xs], marker="o", label=m)
    for ax, what in zip(axes, ("prompt, thousand tokens/s", "decode, tokens/s (median step)")):
        ax.set_xscale("log", base=2)
        xs = sorted({x for p in data.values() for x in p})
        ax.set_xticks(xs, [f"{x // 1024}K" if x < 1 << 20 else f"{x >> 20}M" for x in xs])
        ax.set_ylabel(what)
        ax.set_xlabel("context")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title, fontsize=10)
    fig.savefig(a.out, dpi=110)
    print(f"plot_e2e: wrote {a.out}")


if __name__ == "__main__":
    main()
