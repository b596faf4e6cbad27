#!/usr/bin/env python3
"""Plot and tabulate recorded `entkv quality` runs for docs/quality.md.

    python3 scripts/quality_plot.py RESULTS_DIR [RESULTS_DIR ...] [--doc docs/quality.md] [--png docs/quality.png]
    python3 scripts/quality_plot.py --check RESULTS_DIR [RESULTS_DIR ...]   (the doc's tables, no figure)

Reads every CSV that `entkv quality --csv` wrote in the RESULTS_DIRs (scripts/quality-gpu.sh writes
one per workload; subfolders are not read), draws δ, ρ and R against coverage for entmax and softmax top-k in the style of the
EntmaxKV paper's Figure 2 (one row of panels per key distribution and GQA group, one line per context length and
head dim; Gaussian-aware and certified-exact as single points at the coverage they chose), and
rewrites the measured tables of the doc between its `<!-- quality:begin -->` and
`<!-- quality:end -->` markers, so every number in the doc comes from the files. Needs matplotlib
for the figure (`pip install matplotlib`); without it the tables are still written.
"""

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

BEGIN, END = "<!-- quality:begin -->", "<!-- quality:end -->"


def load(dirs):
    rows = []
    for path in sorted(p for d in dirs for p in Path(d).glob("*.csv")):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                r["file"] = path.name
                rows.append(r)
    if not rows:
        sys.exit(f"no CSV files in {' '.join(dirs)}")
    return rows


def num(r, key):
    v = r.get(key, "")
    return float(v) if v not in ("", None) else None


def workload(r):
    """(keys, GQA group, n, d): what a line of the figure and a table of the doc are about."""
    return (r["source"], int(r["q_heads"]) // int(r["kv_heads"]), int(r["n"]), int(r["head_dim"]))


def keys(w):
    return f"{w[0]} keys" + (f", GQA {w[1]}" if w[1] > 1 else "")


def label(w):
    return f"n = {w[2] // 1024}k, d = {w[3]}"


def group(rows):
    by = defaultdict(list)
    for r in rows:
        by[workload(r)].append(r)
    return dict(sorted(by.items()))


def topk_series(rs, method, key):
    pts = [(num(r, "coverage_mean"), num(r, key)) for r in rs if r["method"] == method]
    return sorted(pts)


def own(rs, method):
    return next((r for r in rs if r["method"] == method), None)


def plot(rows, png):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure (pip install matplotlib)", file=sys.stderr)
        return False
    by = group(rows)
    sources = sorted({w[:2] for w in by})
    metrics = [("delta_mean", "dropped mass δ"), ("rho_mean", "support recall ρ"), ("r_mean", "relative error R")]
    fig, axes = plt.subplots(len(sources), 3, figsize=(13, 3.6 * len(sources)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, source in enumerate(sources):
        ws = [w for w in by if w[:2] == source]
        for j, (key, title) in enumerate(metrics):
            ax = axes[i][j]
            for c, w in enumerate(ws):
                rs = by[w]
                color = colors[c % len(colors)]
                for method, style, name in [("entmax-topk", "-o", "entmax"), ("softmax-topk", "--s", "softmax")]:
                    pts = topk_series(rs, method, key)
                    ax.plot(
                        [100 * x for x, _ in pts],
                        [y for _, y in pts],
                        style,
                        color=color,
                        ms=3.5,
                        lw=1.3,
                        alpha=1.0 if name == "entmax" else 0.75,
                        label=f"{name} top-k, {label(w)}",
                    )
                for method, marker in [("gaussian", "*"), ("certified", "D")]:
                    r = own(rs, method)
                    if r is not None:
                        ax.plot(
                            [100 * num(r, "coverage_mean")],
                            [num(r, key)],
                            marker,
                            color=color,
                            ms=9 if marker == "*" else 5,
                            mec="black",
                            mew=0.5,
                            label=f"{method}, {label(w)}",
                        )
            ax.set_xlabel("KV coverage (% of tokens)")
            ax.set_title(f"{title} — {keys(source)}", fontsize=10)
            ax.grid(alpha=0.3)
            if key == "rho_mean":
                ax.set_ylim(-0.02, 1.02)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7.5, frameon=False)
    fig.suptitle(
        "Entmax vs softmax top-k at matched coverage (α = 1.5, P = 16, f16; means over heads). "
        "★ Gaussian-aware, ◆ certified-exact",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.13, 1, 0.97))
    fig.savefig(png, dpi=130)
    print(f"wrote {png}")
    return True


def fmt(v, digits=4):
    """Exact zeros as 0; four decimals, or two significant digits below 1e-3 (so 1e-6 does not
    read as 0)."""
    if v is None:
        return "–"
    if v == 0:
        return "0"
    if abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.{digits}f}"


def pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


def lower(a, b):
    """Both values formatted, the strictly lower one in bold."""
    fa, fb = fmt(a), fmt(b)
    if a is not None and b is not None and a != b:
        return (f"**{fa}**", fb) if a < b else (fa, f"**{fb}**")
    return fa, fb


# Published figures the measured ones are set beside (EntmaxKV paper, real activations of an
# α = 1.5 checkpoint on RULER; spec §8.1). Table 2: Gaussian-aware selector, mean ± std.
PAPER_GAUSSIAN = [
    ("16k", "0.365 ± 0.106", "0.0003 ± 0.0011", "0.9991 ± 0.0021", "0.0019 ± 0.0068"),
    ("32k", "0.269 ± 0.057", "0.0021 ± 0.0039", "0.9984 ± 0.0022", "0.0093 ± 0.0146"),
]
# Table 3: top-k at 10 % and 50 % coverage (the spec keeps only the ends of the sweep).
PAPER_TOPK = {"entmax": ("0.17", "0.07", "0.77", "0.91"), "softmax": ("0.24", "0.10", "= coverage", "= coverage")}


def beside_paper(by):
    out = [
        "### Beside the paper",
        "",
        "Gaussian-aware (paper Table 2: mean ± std over 6 RULER tasks; minimum ρ 0.9848, maximum R 0.0635):",
        "",
        "| source | context | d | coverage | δ | ρ | R |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for ctx, cov, delta, rho, r in PAPER_GAUSSIAN:
        out.append(f"| paper, real activations | {ctx} | – | {cov} | {delta} | {rho} | {r} |")
    for w, rs in by.items():
        g = own(rs, "gaussian")
        if g is None:
            continue
        ms = lambda k: f"{fmt(num(g, k + '_mean'))} ± {fmt(num(g, k + '_std'))}"
        out.append(
            f"| {keys(w)} (measured) | {w[2] // 1024}k | {w[3]} | {fmt(num(g, 'coverage_mean'), 3)} | "
            f"{ms('delta')} | {ms('rho')} | {ms('r')} |"
        )
    out += [
        "",
        "Top-k at 10 % → 50 % coverage (paper Table 3):",
        "",
        "| source | context | d | entmax δ | softmax δ | entmax ρ | softmax ρ |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    e, s = PAPER_TOPK["entmax"], PAPER_TOPK["softmax"]
    out.append(f"| paper, real activations | – | – | {e[0]} → {e[1]} | {s[0]} → {s[1]} | {e[2]} → {e[3]} | {s[2]} |")
    for w, rs in by.items():
        def at(method, c, key):
            r = next((r for r in rs if r["method"] == method and abs(num(r, "nominal_coverage") - c) < 1e-9), None)
            return fmt(num(r, key)) if r else "–"

        out.append(
            f"| {keys(w)} (measured) | {w[2] // 1024}k | {w[3]} | "
            f"{at('entmax-topk', 0.1, 'delta_mean')} → {at('entmax-topk', 0.5, 'delta_mean')} | "
            f"{at('softmax-topk', 0.1, 'delta_mean')} → {at('softmax-topk', 0.5, 'delta_mean')} | "
            f"{at('entmax-topk', 0.1, 'rho_mean')} → {at('entmax-topk', 0.5, 'rho_mean')} | = coverage |"
        )
    out.append("")
    return out


def tables(rows):
    by = group(rows)
    runs = sorted({(r["backend"], r["commit"], r["date"][:10]) for r in rows})
    first = rows[0]
    out = [
        "Recorded runs: "
        + "; ".join(f"{b}, commit `{c}`, {d}" for b, c, d in runs)
        + f". Batch {first['batch']} × {first['kv_heads']} KV heads, α = {first['alpha']}, "
        f"P = {first['page_size']}, {first['kv_dtype']}. Means over query heads; worst head in parentheses.",
        "",
    ]
    out += beside_paper(by)
    out += [
        "### Gaussian-aware and certified-exact (their own coverage)",
        "",
        "| keys | context | d | method | coverage | δ mean (max) | ρ mean ± std (min) | R mean (max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for w, rs in by.items():
        for m in ["gaussian", "certified"]:
            r = own(rs, m)
            if r is None:
                continue
            out.append(
                f"| {keys(w)} | {w[2] // 1024}k | {w[3]} | {m} | {pct(num(r, 'coverage_mean'))} | "
                f"{fmt(num(r, 'delta_mean'))} ({fmt(num(r, 'delta_max'))}) | "
                f"{fmt(num(r, 'rho_mean'))} ± {fmt(num(r, 'rho_std'))} ({fmt(num(r, 'rho_min'))}) | "
                f"{fmt(num(r, 'r_mean'))} ({fmt(num(r, 'r_max'))}) |"
            )
    out.append("")
    for w, rs in by.items():
        out += [
            f"### Top-k, {keys(w)}, {label(w)} ({rs[0]['backend']})",
            "",
            "| budget | coverage | δ entmax | δ softmax | ρ entmax (min) | ρ softmax (= coverage) | R entmax | R softmax |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        ent = {r["nominal_coverage"]: r for r in rs if r["method"] == "entmax-topk"}
        soft = {r["nominal_coverage"]: r for r in rs if r["method"] == "softmax-topk"}
        for c in sorted(ent, key=float):
            e, s = ent[c], soft.get(c, {})
            # The lower δ and R of the pair in bold.
            d = lower(num(e, "delta_mean"), num(s, "delta_mean"))
            r = lower(num(e, "r_mean"), num(s, "r_mean"))
            out.append(
                f"| {pct(float(c))} ({e['budget_pages']} pages) | {pct(num(e, 'coverage_mean'))} | "
                f"{d[0]} | {d[1]} | {fmt(num(e, 'rho_mean'))} ({fmt(num(e, 'rho_min'))}) | "
                f"{fmt(num(s, 'rho_mean'))} | {r[0]} | {r[1]} |"
            )
        out.append("")
    return "\n".join(out)


def marked_section(body):
    """(text before BEGIN, the section between the markers, text after END), or None without both."""
    if BEGIN not in body or END not in body:
        return None
    head, rest = body.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    return head, current, tail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="folders of `entkv quality --csv` files")
    ap.add_argument("--doc", default="docs/quality.md", help="markdown file whose marked section is rewritten")
    ap.add_argument("--png", default="docs/quality.png", help="figure to write")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; fail unless the doc's marked section is what the folders give")
    args = ap.parse_args()
    rows = load(args.results)
    text = tables(rows)
    doc = Path(args.doc)
    body = doc.read_text() if doc.exists() else ""
    section = marked_section(body)
    generated = f"\n{text}\n"
    if args.check:
        if section is None:
            sys.exit(f"{doc}: no {BEGIN} … {END} section")
        current = section[1]
        if current != generated:
            import difflib
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(doc), "regenerated",
                                        lineterm="", n=1)
            sys.exit(f"{doc}'s tables differ from what {' '.join(args.results)} give:\n"
                     + "\n".join(list(diff)[:40]))
        print(f"{doc}: its tables match {' '.join(args.results)}")
        return
    plot(rows, args.png)
    if section is not None:
        head, _, tail = section
        doc.write_text(f"{head}{BEGIN}{generated}{END}{tail}")
        print(f"rewrote the tables of {doc}")
    else:
        print(text)

if __name__ == "__main__":
    main()
