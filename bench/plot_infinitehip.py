#!/usr/bin/env python3
"""plot_infinitehip.py — PNG plots of the InfiniteHiP evaluation (tooling only).

  passkey:  accuracy vs prompt length, one line per method, from the TSV files that
            `longctx eval passkey --out FILE` writes (len, depth, trials, correct);
  fidelity: recall of the top-k attention mass and output error per layer, one line per
            (file, length), from `longctx eval fidelity --out FILE` TSVs;
  ppl:      perplexity of the window before each length vs the length, one line per method,
            from `longctx eval ppl --out FILE` TSVs (attn, len, window, nll, ppl);
  latency:  attention µs per layer vs context, one line per method, from one TSV with the
            columns method, keys, us (e.g. bench/results/methods-decode-h100-2026-11-22.tsv,
            copied from the benchmarks' output); FILE.tsv names that TSV, LABEL its y-axis.

usage: plot_infinitehip.py passkey OUT.png LABEL=FILE.tsv [LABEL=FILE.tsv ...]
       plot_infinitehip.py fidelity OUT.png LABEL=FILE.tsv [LABEL=FILE.tsv ...]
       plot_infinitehip.py ppl OUT.png LABEL=FILE.tsv [LABEL=FILE.tsv ...]
       plot_infinitehip.py latency OUT.png LABEL=FILE.tsv
(PLOT_TITLE overrides the passkey and ppl titles.)
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def passkey(out, series, title="Passkey retrieval, SmolLM2-135M-Instruct"):
    plt.figure(figsize=(7, 4))
    for label, path in series:
        acc = defaultdict(lambda: [0, 0])
        for r in read(path):
            acc[int(r["len"])][0] += float(r["correct"])
            acc[int(r["len"])][1] += int(r["trials"])
        xs = sorted(acc)
        plt.plot(xs, [100.0 * acc[x][0] / acc[x][1] for x in xs], marker="o", label=label)
    plt.xscale("log", base=2)
    plt.xlabel("prompt tokens")
    plt.ylabel("accuracy (%)")
    plt.ylim(-5, 105)
    plt.axvline(8192, color="grey", ls=":", lw=1)
    plt.text(8192, 100, " trained window", color="grey", fontsize=8, va="top")
    plt.grid(alpha=0.3)
    plt.legend()
    plt.title(title)
    plt.tight_layout()
    plt.savefig(out, dpi=120)


def fidelity(out, series):
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for label, path in series:
        by_len = defaultdict(list)
        for r in read(path):
            by_len[int(r["len"])].append((int(r["layer"]), float(r["recall"]), float(r["out_rel_l2"])))
        for n, rows in sorted(by_len.items()):
            rows.sort()
            ax[0].plot([r[0] for r in rows], [r[1] for r in rows], marker=".", label=f"{label} {n // 1024}K")
            ax[1].plot([r[0] for r in rows], [r[2] for r in rows], marker=".", label=f"{label} {n // 1024}K")
    ax[0].set_ylabel("recall of the top-2048 attention mass")
    ax[1].set_ylabel("output relative L2 vs dense")
    for a in ax:
        a.set_xlabel("layer")
        a.grid(alpha=0.3)
    ax[0].set_ylim(0, 1.02)
    ax[1].legend(fontsize=7)
    fig.suptitle("InfiniteHiP vs dense on the same queries and keys, SmolLM2-135M-Instruct")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def ppl(out, series, title):
    plt.figure(figsize=(7, 4))
    window = None
    for label, path in series:
        rows = sorted((int(r["len"]), float(r["ppl"]), int(r["window"])) for r in read(path))
        window = rows[0][2] if rows else window
        plt.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label)
    plt.xscale("log", base=2)
    plt.yscale("log")
    plt.xlabel("context length (tokens)")
    plt.ylabel(f"perplexity of the last {window} tokens" if window else "perplexity")
    plt.axvline(8192, color="grey", ls=":", lw=1)
    plt.text(8192, plt.ylim()[1], " trained window", color="grey", fontsize=8, va="top")
    plt.grid(alpha=0.3, which="both")
    plt.legend()
    plt.title(title)
    plt.tight_layout()
    plt.savefig(out, dpi=120)


def latency(out, ylabel, path, title):
    by_method = defaultdict(list)
    for r in read(path):
        by_method[r["method"]].append((int(r["keys"]), float(r["us"])))
    plt.figure(figsize=(7, 4))
    for method, pts in by_method.items():
        pts.sort()
        plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
    plt.xscale("log", base=2)
    plt.yscale("log")
    plt.xlabel("context (keys)")
    plt.ylabel(ylabel)
    plt.grid(alpha=0.3, which="both")
    plt.legend(fontsize=8)
    plt.title(title)
    plt.tight_layout()
    plt.savefig(out, dpi=120)


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("passkey", "fidelity", "ppl", "latency"):
        print(__doc__)
        return 2
    series = [a.rsplit("=", 1) for a in sys.argv[3:]]  # LABEL may contain "="
    import os
    if sys.argv[1] == "passkey":
        title = os.environ.get("PLOT_TITLE", "Passkey retrieval, SmolLM2-135M-Instruct")
        passkey(sys.argv[2], series, title)
    elif sys.argv[1] == "latency":
        title = os.environ.get("PLOT_TITLE", "Attention per layer")
        latency(sys.argv[2], series[0][0], series[0][1], title)
    elif sys.argv[1] == "ppl":
        title = os.environ.get("PLOT_TITLE", "Perplexity vs context, SmolLM2-135M-Instruct")
        ppl(sys.argv[2], series, title)
    else:
        fidelity(sys.argv[2], series)
    return 0


if __name__ == "__main__":
    sys.exit(main())
