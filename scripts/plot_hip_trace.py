#!/usr/bin/env python3
"""plot_hip_trace.py — draw the InfiniteHiP selection trace of `longctx eval suite --trace`
(its stderr: the `trace: ... answer tokens` and `hip-trace layer ...` lines) as one heatmap per
trial: a row per (forward, stage) — the question's last prefill block, then each decode step
that recomputed a stage — a column per layer, the colour the share of the answer's sentence
that stage kept (issue 21 part 4: which stage loses the needle, in which layer).

Usage: python3 scripts/plot_hip_trace.py RUN.err [LABEL] [RUN2.err LABEL2 ...] -o out.png
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

TRIAL = re.compile(r"^trace: (\w+) len (\d+) trial (\d+) depth ([\d.]+) answer tokens \[(\d+),(\d+)\)")
LINE = re.compile(r"^hip-trace layer (\d+) (prefill|decode) pos (\d+) needle \[(\d+), (\d+)\):((?: s\d \d+/\d+)+)")


def parse(path):
    """{(task, trial, depth): {(row label): {layer: share}}} with rows in first-seen order."""
    out, cur, n_prompt, last_prefill = {}, None, None, {}
    for line in open(path, errors="replace"):
        m = TRIAL.match(line)
        if m:
            cur = (m.group(1), int(m.group(3)), float(m.group(4)))
            n_prompt = int(m.group(2))
            out.setdefault(cur, {})
            continue
        m = LINE.match(line)
        if not m or cur is None:
            continue
        layer, phase, pos = int(m.group(1)), m.group(2), int(m.group(3))
        if phase == "prefill" and pos < n_prompt - 1:
            continue  # earlier prefill chunks: only the block holding the question is drawn
        for st, k, n in re.findall(r"s(\d) (\d+)/(\d+)", m.group(6)):
            label = (f"question s{st}" if phase == "prefill"
                     else f"step {pos - n_prompt} s{st}")
            out[cur].setdefault(label, {})[layer] = int(k) / max(int(n), 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="RUN.err [LABEL] pairs")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    runs, i = [], 0
    while i < len(a.runs):
        path = a.runs[i]
        label = a.runs[i + 1] if i + 1 < len(a.runs) and not a.runs[i + 1].endswith(".err") else path
        i += 2 if label != path else 1
        runs.append((label, parse(path)))
    panels = [(lab, key, rows) for lab, d in runs for key, rows in d.items() if rows]
    if not panels:
        raise SystemExit("plot_hip_trace: no hip-trace lines")
    height = sum(0.9 + 0.26 * len(p[2]) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, height), squeeze=False,
                             layout="constrained")
    for ax, (lab, (task, trial, depth), rows) in zip(axes[:, 0], panels):
        n_layer = 1 + max(max(v) for v in rows.values())
        labels = list(rows)
        m = np.full((len(labels), n_layer), np.nan)
        for r, lbl in enumerate(labels):
            for layer, share in rows[lbl].items():
                m[r, layer] = share
        im = ax.imshow(m, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xticks(range(0, n_layer, 2), [str(x) for x in range(0, n_layer, 2)], fontsize=7)
        ax.set_title(f"{lab}: {task} trial {trial}, depth {depth:.2f} — share of the answer's "
                     "sentence kept", fontsize=8)
    axes[-1, 0].set_xlabel("layer")
    fig.colorbar(im, ax=axes[:, 0].tolist(), shrink=0.6)
    fig.savefig(a.out, dpi=110)
    print(f"plot_hip_trace: wrote {a.out}")


if __name__ == "__main__":
    main()
