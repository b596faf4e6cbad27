#!/usr/bin/env python3
"""Generate docs/benchmarks.md and docs/benchmarks.png from recorded benchmark runs.

    python3 scripts/bench_report.py RESULTS_DIR [RESULTS_DIR ...] [--doc docs/benchmarks.md] [--png docs/benchmarks.png]
        [--without RESULTS_DIR=METHOD ...] [--without RESULTS_DIR=workload:NAME ...]
    python3 scripts/bench_report.py --check docs/benchmarks.md

Workloads come in the order `paper`, `peaked`, then the others (`gqa`, `wide`), which are held to
the targets not tied to `paper` (dense against SDPA, the sparse paths' × floor).
Reads every JSON file in the RESULTS_DIRs (and the JSON files inside a `bench.tgz` there, as
scripts/bench-gpu.sh packs them; subfolders are not read):
  - `entkv bench --out` reports (`records`: one BENCH.md record per method and length, `rows`:
    per-kernel stage times),
  - `entkv gpu-check` reports (`timings`; kept fractions parsed from the `checks` details),
  - scripts/sdpa_baseline.py outputs (a list of records, method `softmax-sdpa`).
All share entkv's TimingRecord fields (date, commit, gpu, driver, workload, method, n, iters,
median/min/p90 ms, bytes, floor_ms). Where several files time the same (workload, method, n), the
record with the most timed runs wins (the 50-run table beats the 20-run sweep), then the later
file on the command line. The doc gets, per workload, the medians per method and length, then per
BENCH.md length (32k, 128k, 1M) medians, time over floor, kept fraction and speedup against torch
SDPA (`peaked`, the `paper` shapes on other data, takes `paper`'s SDPA records: SDPA's time does
not depend on the data); then the performance issue's targets with the measured values, met or
missed, and where missed, where the time goes (the step's kernels when the run timed them;
docs/perf-notes.md). The `peaked` target is computed from `peaked` records and says "not
measured" without them.
`--without DIR=METHOD` leaves out one method's records (and stage rows) of one folder, e.g. a
run of kernels that did not land, and `--without DIR=workload:NAME` one workload's (with the
bundle manifests named for it), e.g. rows a later run remeasured; the doc lists what was left out.
The figure is step latency against context length per method, SDPA included, log-log, over every
length recorded (the sweep when there is one). Needs matplotlib for the figure only.
"""

import argparse
import json
import os
import re
import sys
import tarfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# Record method names (entkv bench's, gpu-check's, the SDPA script's) -> one key per method.
METHODS = {
    "dense": "dense",
    "entmax-dense-paged": "dense",
    "entmax-dense": "dense-contiguous",
    "topk": "topk",
    "entmax-topk": "topk",
    "gaussian": "gaussian",
    "entmax-gaussian": "gaussian",
    "certified": "certified",
    "entmax-certified": "certified",
    "certified-pruned": "certified-pruned",
    "auto": "auto",
    "softmax-topk": "softmax-topk",
    "softmax-sdpa": "sdpa",
}
ORDER = ["dense", "topk", "gaussian", "certified", "certified-pruned", "auto", "softmax-topk", "sdpa",
         "dense-contiguous"]
LABEL = {
    "dense": "entmax dense",
    "topk": "entmax top-k 25%",
    "gaussian": "entmax Gaussian",
    "certified": "certified-exact",
    "certified-pruned": "certified-exact, pages pruned",
    "auto": "auto (dense or certified-exact)",
    "softmax-topk": "softmax top-k 25% (Quest)",
    "sdpa": "torch SDPA (softmax)",
    "dense-contiguous": "entmax dense, contiguous cache",
}
SPARSE = ["topk", "gaussian", "certified", "certified-pruned"]
# The exact methods the certified-exact speedup targets are held to: plain, and after pruning
# (the engine picks per deployment; both give the full-cache output).
CERTIFIED = ["certified", "certified-pruned"]


@dataclass
class Loaded:
    """What `load` read from the results folders."""
    records: list
    stages: list
    sources: list
    # (workload, n) -> the method an `auto` step ran, from its step row's kernel tiers.
    auto_ran: dict = field(default_factory=dict)
    # Result file label -> what the bundle its runs timed was (a bundle-manifest.json beside it).
    bundles: dict = field(default_factory=dict)
    # (folder, method) pairs left out (`--without`).
    without: list = field(default_factory=list)


def bundle_kind(manifest):
    """`tuned on <GPU> (<k> tuned rows)` or `untuned (default rows)` from a bundle manifest."""
    m = manifest.get("manifest", manifest)
    tuned = [r for r in m.get("table", []) if isinstance(r.get("source"), dict) and "tuned" in r["source"]]
    if not tuned:
        return "untuned (every kernel at its default tile)"
    gpu = (m.get("tuned_on") or {}).get("gpu", "?")
    return f"tuned by `autotune` on {gpu} ({len(tuned)} tuned rows)"
BENCH_N = [32768, 131072, 1048576]
# torch SDPA reads every key whatever the keys are, so its time does not depend on the data: a
# workload with another's shapes and different data borrows that workload's SDPA records
# (scripts/bench-gpu.sh times SDPA once, on `paper`).
SDPA_FROM = {"peaked": "paper"}
PEAKED_TARGET = "%s, `peaked`, 1M: ≥ 8× faster than SDPA"
SPLIT = "“Split policy, page lookahead and the top-k floor”"
SELECT = "“The selection kernels”"
CEILING_TBS = 4.28
SELECT_LONG = "“The selection kernels at long contexts: sample pivots, loads a sweep ahead”"
KNOB = "“The page lookahead as a tile knob; default rows per walk”"
MISSES_128K = "“The H200 run of the gated, run-sampled kernels; where the 128k misses spend their time”"
BOUND_READS = "“Shared bounds read every chunk: fewer rows rescored, no faster”"
SPLIT_TIE = "“Least-tail split plans: ties to the fewer, longer splits”"
SPARSE_PLAN = "“The sparse walk's split plan: the default stays”"
SPARSE_128K = "“The sparse walk at 128k: not where its reads land”"
GQA_GAUSS = "“`gqa` Gaussian at 1M: the per-query-head moments”"
WIDE_128K = "“`wide` at 128k under ncu: the certified pass's registers and rescored rows”"
GQA_128K = "“`gqa` at 128k under ncu”"
PERF_NOTES = {
    "dense": "[perf-notes.md](perf-notes.md), “Dense entmax decode”, “Dense entmax decode at 32k: the `auto` target”, “`wide` tiles: longer chunks, one Newton step” and %s" % KNOB,
    "topk": "[perf-notes.md](perf-notes.md), %s, %s, %s, %s, %s, %s and %s" % (SPLIT, SELECT, SELECT_LONG, KNOB, MISSES_128K, SPARSE_PLAN, SPARSE_128K),
    "gaussian": "[perf-notes.md](perf-notes.md), %s, %s, %s, %s and %s" % (SPLIT, SELECT, SELECT_LONG, KNOB, GQA_GAUSS),
    "certified": "[perf-notes.md](perf-notes.md), “The 4-bit certified pass: a warp-local stream and batched rescoring”, “The 4-bit pass is latency-bound: what helped and what did not”, “Seeded head bounds for the certified pass”, “Measured on the H200: seeded bounds, sample pivots”, %s, %s, %s and %s" % (KNOB, MISSES_128K, BOUND_READS, SPLIT_TIE),
    "certified-pruned": "[perf-notes.md](perf-notes.md), “The 4-bit certified pass: a warp-local stream and batched rescoring”, “The 4-bit pass is latency-bound: what helped and what did not”, “Certified-exact with page pruning”, “Page pruning over slices”, %s and %s" % (MISSES_128K, SPLIT_TIE),
}


def n_label(n):
    return f"{n // 1048576}M" if n % 1048576 == 0 else f"{n // 1024}k" if n % 1024 == 0 else str(n)


def json_files(d):
    """(label, bytes) of every JSON file in `d` and in `d/bench.tgz` (extracted copies win)."""
    out = {}
    for p in sorted(d.glob("*.json")):
        out[p.name] = (str(p), p.read_bytes())
    tgz = d / "bench.tgz"
    if tgz.exists():
        with tarfile.open(tgz) as t:
            for m in t.getmembers():
                name = Path(m.name).name
                if m.isfile() and name.endswith(".json") and name not in out:
                    out[name] = (f"{tgz}:{name}", t.extractfile(m).read())
    return out.values()


def kept_from_checks(checks):
    """{(method, n): fraction} from gpu-check's check details (coverage %, kept % of tokens)."""
    kept = {}
    for c in checks:
        m = re.match(r"(\S+) paper n=(\d+)", c.get("check", ""))
        if not m or m.group(1) not in METHODS:
            continue
        key = (METHODS[m.group(1)], int(m.group(2)))
        d = c.get("detail", "")
        cov = re.search(r"coverage ([\d.]+)%", d) or re.search(r"kept ([\d.]+)% of tokens", d)
        if cov:
            kept[key] = float(cov.group(1)) / 100
    return kept


WORKLOAD_PREFIX = "workload:"


def left_out_workload(m):
    """The workload a `--without DIR=workload:NAME` names (NAME), or None for a method."""
    return (m[len(WORKLOAD_PREFIX):] or None) if m.startswith(WORKLOAD_PREFIX) else None


def load(dirs, without=()):
    """Every record (with `key`, `source`, `order`), the stage rows of bench reports, the sources,
    which method each `auto` step ran and which bundle each run timed; `without` holds
    (folder, method) pairs whose records and stage rows are left out."""
    records, stages, sources = [], [], []
    auto_ran, bundles = {}, {}
    for d in map(Path, dirs):
        if not d.is_dir():
            sys.exit(f"{d}: not a directory")
        here = {m for (w, m) in without if Path(w).resolve() == d.resolve()}
        dropped = {m for m in here if left_out_workload(m) is None}
        gone = {left_out_workload(m) for m in here} - {None}
        for label, data in json_files(d):
            try:
                doc = json.loads(data)
            except json.JSONDecodeError:
                continue
            kept = {}
            if isinstance(doc, dict) and "manifest" in doc and re.search(r"bundle-manifest[^/]*\.json$", label):
                if not any(re.search(rf"bundle-manifest-{re.escape(g)}\b", label) for g in gone):
                    bundles[label] = bundle_kind(doc)
                continue
            if isinstance(doc, list):
                recs, kind = doc, "torch SDPA"
            elif isinstance(doc, dict) and "records" in doc:
                recs, kind = doc["records"], "entkv bench"
                stages += [dict(r, source=label) for r in doc.get("rows", [])
                           if r.get("stage") != "step" and METHODS.get(r.get("method")) not in dropped
                           and r.get("workload") not in gone]
                for r in doc.get("rows", []):
                    if r.get("method") == "auto" and r.get("stage") == "step":
                        ran = "certified-exact" if "decode_certified=" in r.get("tier", "") else "dense"
                        auto_ran[(r.get("workload"), r.get("n"))] = ran
            elif isinstance(doc, dict) and "timings" in doc:
                recs, kind = doc["timings"], "entkv gpu-check"
                kept = kept_from_checks(doc.get("checks", []))
            else:
                continue
            recs = [r for r in recs if isinstance(r, dict) and METHODS.get(r.get("method")) and "median_ms" in r
                    and METHODS[r["method"]] not in dropped and r.get("workload") not in gone]
            if not recs:
                continue
            for r in recs:
                r = dict(r, method=METHODS[r["method"]], source=label, order=len(records))
                if r.get("pages_kept") is None:
                    r["pages_kept"] = 1.0 if r["method"] in ("dense", "dense-contiguous", "sdpa") else kept.get((r["method"], r["n"]))
                records.append(r)
            first = recs[0]
            # `entkv bench --data-seed`: records of another draw than the default say so.
            seeds = sorted({r["data_seed"] for r in recs if r.get("data_seed") is not None})
            if seeds:
                kind += " (inputs seed %s)" % ", ".join(map(str, seeds))
            if any(r.get("check_device_ids") for r in recs):
                kind += " (device id check on)"
            sources.append(dict(file=label, kind=kind, commit=first.get("commit"), date=first.get("date"),
                                gpu=first.get("gpu"), driver=first.get("driver"), count=len(recs),
                                start="/".join(sorted({r.get("start", "idle") for r in recs}))))
    if not records:
        sys.exit(f"no benchmark records in {' '.join(dirs)}")
    return Loaded(records, stages, sources, auto_ran, bundles, list(without))


def best(records):
    """{workload: {(method, n): record}}: most timed runs, then the latest file."""
    out = defaultdict(dict)
    for r in records:
        k = (r["method"], r["n"])
        cur = out[r["workload"]].get(k)
        if cur is None or (r.get("iters", 0), r["order"]) >= (cur.get("iters", 0), cur["order"]):
            out[r["workload"]][k] = r
    return out


def stage_times(stages, workload, method, n):
    """The step's kernels' medians (ms) from a bench report that timed them (metadata build aside:
    it is not part of the step)."""
    rows = [s for s in stages if s.get("workload") == workload and s.get("n") == n
            and re.sub(r"\(.*\)$", "", s.get("method", "")) == method and s.get("stage") != "page_meta"]
    if not rows:
        return None
    # The run with the most timed runs (the 50-run table over the sweep), then the latest.
    src = max(reversed(rows), key=lambda s: s.get("iters", 0))["source"]
    return [(s["stage"], s["bundle"]["median_ms"]) for s in rows if s["source"] == src]


def fmt_ms(x):
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def kept_cell(r, ran=None):
    """`ran`: what an `auto` step ran (`Loaded.auto_ran`), whose fraction it reports."""
    k = r.get("pages_kept")
    if k is None:
        return "–"
    if r["method"] in ("dense", "dense-contiguous", "sdpa") or ran == "dense":
        return "all"
    if r["method"] == "certified" or ran == "certified-exact":
        return f"{100 * k:.4f}% of tokens"
    if r["method"] == "certified-pruned":
        return f"{100 * k:.2f}% of pages"
    return f"{100 * k:.1f}% of pages"


def x_floor(r):
    return r["median_ms"] / r["floor_ms"] if r.get("floor_ms") else None


def methods_in(table):
    present = {m for m, _ in table}
    return [m for m in ORDER if m in present]


def rel(path, doc_dir):
    file, _, member = path.partition(":")
    return os.path.relpath(file, doc_dir) + (f" ({member})" if member else "")


# Sections about one workload's misses, added to the method's own.
WORKLOAD_NOTES = {
    (w, m): note
    for w, note in (("wide", WIDE_128K), ("gqa", GQA_128K))
    for m in ("topk", "certified", "certified-pruned")
}


def where_time(stages, workload, m, n):
    """Where a method's step time goes: its kernels' medians and the perf-notes sections."""
    st = stage_times(stages, workload, m, n)
    kernels = ", ".join(f"{s} {fmt_ms(t)} ms" for s, t in st) if st else None
    note = PERF_NOTES.get(m)
    extra = WORKLOAD_NOTES.get((workload, m))
    if note and extra:
        note = f"{note}; for `{workload}`, {extra}"
    return "; ".join(x for x in [kernels and f"kernels: {kernels}", note and f"see {note}"] if x)


def with_borrowed_sdpa(by_workload):
    """Add to each workload of SDPA_FROM the SDPA records of its source workload that it lacks, at
    the lengths it has records of its own, marked `borrowed` with the source's name."""
    for w, src in SDPA_FROM.items():
        if w not in by_workload or src not in by_workload:
            continue
        own = {n for _, n in by_workload[w]}
        for (m, n), r in by_workload[src].items():
            if m == "sdpa" and n in own and (m, n) not in by_workload[w]:
                by_workload[w][(m, n)] = dict(r, borrowed=src)
    return by_workload


def peaked_target(peaked, stages, m):
    """The `peaked` target row of method `m` from the `peaked` table (SDPA borrowed from `paper`
    if need be)."""
    name = PEAKED_TARGET % LABEL[m]
    r = peaked.get((m, 1048576)) if peaked else None
    s = peaked.get(("sdpa", 1048576)) if peaked else None
    if not (r and s):
        missing = f"no `peaked` {LABEL[m]} record at 1M" if not r else "no SDPA record at 1M"
        return (name, f"not measured: {missing} (scripts/bench-gpu.sh times it)", None, None)
    sp = s["median_ms"] / r["median_ms"]
    ok = sp >= 8
    src = f", SDPA of the `{s['borrowed']}` run" if s.get("borrowed") else ""
    return (name, f"{sp:.2f}× ({fmt_ms(r['median_ms'])} ms vs {fmt_ms(s['median_ms'])} ms{src})",
            ok, None if ok else where_time(stages, "peaked", m, 1048576))


def targets(table, stages, workload, peaked=None, auto_ran=None):
    """Rows (target, measured, status, where the time goes) of the performance issue's targets:
    the `paper` ones from `table`, and with them (for `paper`) the `peaked` one from `peaked`.
    `auto_ran` says which method each `auto` step ran (`Loaded.auto_ran`)."""
    rec = lambda m, n: table.get((m, n))
    out = []

    def where(m, n):
        return where_time(stages, workload, m, n)

    d, s = rec("dense", 1048576), rec("sdpa", 1048576)
    if d and s:
        tbs = d["bytes"] / d["median_ms"] / 1e9
        ok = d["median_ms"] <= s["median_ms"] and tbs >= 3.6
        out.append(("dense, 1M: no slower than SDPA and ≥ 3.6 TB/s effective",
                    f"{fmt_ms(d['median_ms'])} ms vs SDPA {fmt_ms(s['median_ms'])} ms; {tbs:.2f} TB/s",
                    ok, None if ok else where("dense", 1048576)))
    else:
        out.append(("dense, 1M: no slower than SDPA and ≥ 3.6 TB/s effective", "not measured", None, None))
    for m in SPARSE:
        if m == "certified-pruned" and not any(rec(m, n) for n in (131072, 1048576)):
            continue
        for n in (131072, 1048576):
            r = rec(m, n)
            name = f"{LABEL[m]}, {n_label(n)}: ≤ 1.3 × its floor"
            if r and x_floor(r):
                ok = x_floor(r) <= 1.3
                # Three decimals where two would round onto the target and hide the verdict.
                x = f"{x_floor(r):.2f}" if f"{x_floor(r):.2f}" != "1.30" else f"{x_floor(r):.3f}"
                out.append((name, f"{x} × ({fmt_ms(r['median_ms'])} ms, floor {fmt_ms(r['floor_ms'])} ms)",
                            ok, None if ok else where(m, n)))
            else:
                out.append((name, "not measured", None, None))
    if workload != "paper":
        # The issue states its other targets (speedups over SDPA, `auto`) for `paper`.
        return out
    for m, factor in [("gaussian", 5)] + [(c, 6) for c in CERTIFIED]:
        r, s = rec(m, 1048576), rec("sdpa", 1048576)
        if m == "certified-pruned" and not r:
            continue
        name = f"{LABEL[m]}, 1M: ≥ {factor}× faster than SDPA"
        if r and s:
            sp = s["median_ms"] / r["median_ms"]
            ok = sp >= factor
            out.append((name, f"{sp:.2f}× ({fmt_ms(r['median_ms'])} ms vs {fmt_ms(s['median_ms'])} ms)",
                        ok, None if ok else where(m, 1048576)))
        else:
            out.append((name, "not measured", None, None))
    if workload == "paper":
        for m in CERTIFIED:
            if m == "certified" or (peaked and (m, 1048576) in peaked):
                out.append(peaked_target(peaked, stages, m))
    a, d = rec("auto", 32768), rec("dense", 32768)
    name = "auto, 32k: ≤ 0.15 ms"
    if a:
        ok = a["median_ms"] <= 0.15
        ran = (auto_ran or {}).get((workload, 32768), "dense or certified-exact")
        out.append((name, f"{fmt_ms(a['median_ms'])} ms (ran {ran})", ok,
                    None if ok else where("dense" if ran == "dense" else "certified", 32768)))
    elif d:
        ok = d["median_ms"] <= 0.15
        out.append((name, f"{fmt_ms(d['median_ms'])} ms — dense's: `Method::Auto` resolves to dense on an "
                    "untuned bundle (no tuned timings to prefer certified-exact)", ok,
                    None if ok else where("dense", 32768)))
    else:
        out.append((name, "not measured", None, None))
    return out


def write_doc(path, loaded, png):
    path.write_text(render_doc(path, loaded, png))


def render_doc(path, loaded, png):
    """The text of the doc at `path` (links relative to its folder; the figure's when `png`)."""
    records, stages, sources = loaded.records, loaded.stages, loaded.sources
    auto_ran = loaded.auto_ran
    doc_dir = path.parent
    by_workload = with_borrowed_sdpa(best(records))
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/bench_report.py: do not edit by hand, rerun it on the results folders. -->",
        "",
        f"Generated by `scripts/bench_report.py` from the files below; every number here comes from them.",
        "Protocol: BENCH.md (the project's benchmark protocol) — one decode step of the whole batch (scoring, selection,",
        "the selected KV reads and the output), CUDA events, median of the timed runs after warm-up, inputs",
        "rotated when they would fit in L2. “start”: `lead` runs were queued behind a short busy kernel, so a",
        "step's launches were all queued when its clock started; `idle` runs (every run before 2026-12-06)",
        "started on an idle stream and include the host's latency of launching the first kernel.",
        "Floor = bytes the method must move / 4.28 TB/s (the H200's",
        "measured copy rate); `entkv bench` counts them with the byte model in",
        "[autotune/src/record.rs](../autotune/src/record.rs) (`step_bytes`: metadata read, the selected K,",
        "V at the support — K and V for softmax —, q and the output), `entkv gpu-check` records with its",
        "own near-identical count. “kept” is the fraction of pages a selector kept (tokens for",
        "certified-exact). “entmax dense” is the paged decode the engine runs (gpu-check's",
        "contiguous-cache decode is listed apart). To remeasure: `scripts/bench-gpu.sh OUT` on an H200 (it packs everything",
        "into `OUT/bench.tgz`) and `scripts/bench-workloads.sh DIR` (`gqa`, `wide`), extract both into `results/<date>-bench/`,",
        "then `python3 scripts/bench_report.py` on the folders that hold them.",
        "",
        "| file | kind | records | commit | date | GPU | driver | start |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in sources:
        lines.append(f"| {rel(s['file'], doc_dir)} | {s['kind']} | {s['count']} | {s['commit']} | {s['date']} "
                     f"| {s['gpu']} | {s['driver']} | {s['start']} |")
    if loaded.without:
        lines.append("")
        for d, m in loaded.without:
            w = left_out_workload(m)
            what = f"`{w}`" if w is not None else LABEL.get(m, m)
            lines.append(f"Left out (`--without`): the {what} records of {rel(d, doc_dir)}.")
    if loaded.bundles:
        lines.append("")
        for label, kind in sorted(loaded.bundles.items()):
            lines.append(f"The bundle timed by the `entkv bench` runs beside {rel(label, doc_dir)}: {kind}.")
    # `paper` and `peaked` (the targets) first, then BENCH.md's other shapes.
    order = {"paper": 0, "peaked": 1}
    for workload, table in sorted(by_workload.items(), key=lambda wt: (order.get(wt[0], 2), wt[0])):
        if workload == "peaked":
            # Its one target sits with `paper`'s, unless there is no `paper` run.
            rows = [] if "paper" in by_workload else [peaked_target(table, stages)]
        else:
            rows = targets(table, stages, workload, by_workload.get("peaked"), loaded.auto_ran)
        if rows:
            title = (f"Targets (`{workload}`)" if workload in order else
                     f"Targets (`{workload}`: the dense and × floor ones; the others are stated for `paper`)")
            lines += ["", f"## {title}", "",
                      "| target | measured | status |", "| --- | --- | --- |"]
        missed = []
        for name, measured, ok, where in rows:
            status = "met" if ok else "not measured" if ok is None else "**missed**"
            lines.append(f"| {name} | {measured} | {status} |")
            if ok is False and where:
                missed.append(f"- {name}: {where}.")
        if missed:
            lines += ["", "Where the time goes, for the missed targets:", ""] + missed
        methods = methods_in(table)
        lengths = sorted({n for _, n in table})
        lines += ["", f"## `{workload}`: median step time (ms)", ""]
        if workload == "peaked":
            lines += ["BENCH.md `peaked`: the `paper` shapes on page-coherent keys generated on the device "
                      "(`entkv_kernels::peaked`: page centroids drifting along the sequence, a few pages "
                      "aligned with the query), so the entmax support sits in a few pages.", ""]
        borrowed = sorted({r["borrowed"] for r in table.values() if r.get("borrowed")})
        if borrowed:
            lines += [f"torch SDPA: the `{borrowed[0]}` run's records (same shapes; SDPA reads every key, "
                      "so its time does not depend on the data).", ""]
        lines += ["| n | " + " | ".join(LABEL[m] for m in methods) + " |",
                  "| --- |" + " --- |" * len(methods)]
        for n in lengths:
            cells = [fmt_ms(table[(m, n)]["median_ms"]) if (m, n) in table else "–" for m in methods]
            lines.append(f"| {n_label(n)} | " + " | ".join(cells) + " |")
        for n in [n for n in BENCH_N if n in lengths]:
            sdpa = table.get(("sdpa", n))
            lines += ["", f"### `{workload}`, n = {n_label(n)}", "",
                      "| method | median ms | min | p90 | runs | kept | GB moved | floor ms | × floor | vs SDPA |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for m in methods:
                r = table.get((m, n))
                if not r:
                    continue
                xf = x_floor(r)
                vs = f"{sdpa['median_ms'] / r['median_ms']:.2f}×" if sdpa else "–"
                lines.append(f"| {LABEL[m]} | {fmt_ms(r['median_ms'])} | {fmt_ms(r['min_ms'])} | {fmt_ms(r['p90_ms'])} "
                             f"| {r.get('iters', '–')} | {kept_cell(r, auto_ran.get((workload, n)) if m == 'auto' else None)} | {r['bytes'] / 1e9:.3f} | {fmt_ms(r['floor_ms'])} "
                             f"| {xf:.2f} | {vs} |" if xf else "| – |")
    if png:
        lines += ["", "## Step latency against context length", "",
                  f"![step latency vs context length]({os.path.relpath(png, doc_dir)})", "",
                  "Log-log, one line per method over every recorded length (the 4k…1M sweep where there is "
                  "one; the tables above hold the medians); the gray dotted line is the floor of reading K "
                  "and V once (SDPA's bytes)."]
    return "\n".join(lines) + "\n"


def generated_from(doc):
    """The folders (in command-line order) and `--without` pairs a generated doc was made from,
    read back from its sources table, its bundle lines and its "Left out" lines."""
    text = doc.read_text()
    base = doc.parent
    dirs = []
    labels = re.findall(r"^\| (\S+?\.json) \|", text, re.M)
    labels += re.findall(r"^The bundle timed by the `entkv bench` runs beside (\S+?\.json):", text, re.M)
    for label in labels:
        d = (base / label.split(":")[0]).parent
        if d not in dirs:
            dirs.append(d)
    by_label = {v: k for k, v in LABEL.items()}
    without = []
    for what, d in re.findall(r"^Left out \(`--without`\): the (.+?) records of (\S+)\.$", text, re.M):
        m = f"{WORKLOAD_PREFIX}{what.strip('`')}" if what.startswith("`") else by_label.get(what, what)
        without.append((str(base / d), m))
    return [str(d) for d in dirs], without


def check_doc(doc):
    """Exit non-zero unless `doc` is what this script makes from the folders it names."""
    dirs, without = generated_from(doc)
    if not dirs:
        sys.exit(f"{doc}: names no results files")
    missing = [d for d in dirs if not Path(d).is_dir()]
    if missing:
        sys.exit(f"{doc}: its results folders are missing: {', '.join(missing)}")
    text = doc.read_text()
    png = doc.with_suffix(".png") if "![step latency vs context length]" in text else None
    fresh = render_doc(doc, load(dirs, without), png)
    if fresh != text:
        import difflib
        diff = difflib.unified_diff(text.splitlines(), fresh.splitlines(), str(doc), "regenerated", lineterm="", n=1)
        sys.exit(f"{doc} differs from what scripts/bench_report.py makes of its results folders:\n"
                 + "\n".join(list(diff)[:40]))
    print(f"{doc}: matches its {len(dirs)} results folder(s)")


def plot(png, records, workload="paper"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no figure", file=sys.stderr)
        return False
    table = best(records).get(workload)
    if not table:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for m in methods_in(table):
        pts = sorted((n, r["median_ms"]) for (mm, n), r in table.items() if mm == m)
        ax.plot([n for n, _ in pts], [t for _, t in pts], marker="o", ms=4, label=LABEL[m],
                ls="--" if m in ("sdpa", "softmax-topk") else "-")
    kv = sorted((n, r["floor_ms"]) for (m, n), r in table.items() if m == "sdpa")
    if kv:
        ax.plot([n for n, _ in kv], [f for _, f in kv], color="gray", ls=":", lw=1, label="K+V floor (4.28 TB/s)")
    ns = sorted({n for _, n in table})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.set_xticklabels([n_label(n) for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("context length (tokens per sequence)")
    ax.set_ylabel("decode step (ms, median)")
    ax.set_title(f"{workload}: batch 8 × 24 heads, d 32, f16, α 1.5 — H200")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--check", metavar="DOC",
                    help="regenerate DOC from the folders it names and fail if it differs (no figure)")
    ap.add_argument("--doc", default="docs/benchmarks.md")
    ap.add_argument("--png", default="docs/benchmarks.png")
    ap.add_argument("--without", action="append", default=[], metavar="DIR=METHOD",
                    help="leave out METHOD's records of the folder DIR, or with METHOD "
                         "`workload:NAME` the workload NAME's (repeatable)")
    a = ap.parse_args()
    if a.check:
        if a.dirs or a.without:
            sys.exit("--check reads its folders from the doc: give no folders or --without")
        check_doc(Path(a.check))
        return
    if not a.dirs:
        sys.exit("give the results folders to generate from (or --check DOC)")
    without = []
    for w in a.without:
        d, sep, m = w.partition("=")
        if not sep or not (left_out_workload(m) or m in set(METHODS.values())):
            sys.exit(f"--without {w}: expected DIR=METHOD with METHOD one of {sorted(set(METHODS.values()))} "
                     "or workload:NAME")
        without.append((d, m))
    loaded = load(a.dirs, without)
    png = Path(a.png) if plot(a.png, loaded.records) else None
    write_doc(Path(a.doc), loaded, png)
    print(f"wrote {a.doc}" + (f" and {a.png}" if png else "") + f" from {len(loaded.records)} records")


if __name__ == "__main__":
    main()
