"""Step and selection-stage medians (ms) of the three `entkv bench` runs of this call, in run
order: 5ea6afa, 7223572, 5ea6afa again (drift). python3 bench_ab.py > bench_ab.txt"""
import json, glob
runs = sorted(glob.glob("bench-paper-*.json"), key=lambda f: int(f.split("-")[-1][:-5]))
table = {}
for f in runs:
    for r in json.load(open(f))["rows"]:
        if r["stage"] in ("step", "select_topk", "select_gaussian"):
            table.setdefault((r["n"], r["method"], r["stage"]), []).append(r["bundle"]["median_ms"])
print("n        method            stage            " + "  ".join(f"{f[12:-5]:>10}" for f in runs))
for (n, m, st), v in sorted(table.items()):
    print(f"{n:<8} {m:<17} {st:<16} " + "  ".join(f"{x:10.4f}" for x in v))
