#!/usr/bin/env python3
"""plot_serve_mix.py — one PNG of bench/runs/issue25-serve-mix.sh's results: for each run
directory (label=DIR) and each --prefill-token-layers value found there (short-TL.json and
long-TL.json, `longctx bench serve`'s vllm-style JSON), the short requests' ITL p99 and mean
TTFT, and the long requests' mean TTFT, as grouped bars. Also prints the table as Markdown.

usage: plot_serve_mix.py OUT.png LABEL=DIR [LABEL=DIR ...]
"""
import glob, json, os, re, sys

def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], []
    for arg in sys.argv[2:]:
        label, _, d = arg.partition("=")
        for f in sorted(glob.glob(os.path.join(d, "short-*.json")),
                        key=lambda p: int(re.findall(r"-(\d+)\.json$", p)[0])):
            tl = int(re.findall(r"-(\d+)\.json$", f)[0])
            s = json.load(open(f))
            lf = os.path.join(d, f"long-{tl}.json")
            l = json.load(open(lf)) if os.path.exists(lf) else {}
            runs.append((f"{label}\nTL {tl}" if tl else f"{label}\nchunked", tl, s, l, label))
    print("| run | TL | short ITL p99 ms | short TPOT p99 ms | short TTFT mean / p99 s | "
          "long TTFT mean s | output tok/s | goodput req/s | short completed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, tl, s, l, label in runs:
        print(f"| {label} | {tl or 'chunked'} | {s['p99_itl_ms']:.1f} | {s['p99_tpot_ms']:.1f} | "
              f"{s['mean_ttft_ms'] / 1e3:.2f} / {s['p99_ttft_ms'] / 1e3:.2f} | "
              f"{l.get('mean_ttft_ms', float('nan')) / 1e3:.2f} | {s['output_throughput']:.0f} | "
              f"{s.get('request_goodput', float('nan')):.2f} | {s['completed']} |")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
    names = [r[0] for r in runs]
    x = range(len(runs))
    for a, (vals, title, unit) in zip(ax, [
            ([r[2]["p99_itl_ms"] for r in runs], "short requests: ITL p99", "ms"),
            ([r[2]["mean_ttft_ms"] / 1e3 for r in runs], "short requests: mean TTFT", "s"),
            ([r[3].get("mean_ttft_ms", 0) / 1e3 for r in runs], "long requests: mean TTFT", "s")]):
        a.bar(x, vals, color=["#888" if r[1] == 0 else "#3a7" for r in runs])
        a.set_xticks(list(x))
        a.set_xticklabels([n.replace("\n", " ") for n in names], fontsize=7, rotation=30, ha="right")
        a.set_title(title)
        a.set_ylabel(unit)
        for i, v in enumerate(vals):
            a.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)

main()
