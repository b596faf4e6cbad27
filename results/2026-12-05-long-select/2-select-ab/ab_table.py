"""The A/B of this call: every selection tile both builds timed (tune logs, eval stage), the
same tile side by side, and each build's best. Run here: python3 ab_table.py > ab_table.txt"""
import json, lzma, collections

def load(w, b):
    t = collections.defaultdict(list)
    for l in lzma.open(f"tune-log-{w}-{b}.jsonl.xz", "rt"):
        r = json.loads(l)
        if r["status"] == "ok" and r["stage"] == "eval":
            t[(r["family"], r["workload"]["context"], r["tile_tag"])].append(r["median_us"])
    return {k: min(v) for k, v in t.items()}

for w in ("paper", "gqa"):
    o, s = load(w, "o"), load(w, "s")
    print(f"== {w}: median µs per tile, 5ea6afa (old) vs 7223572 (new)")
    for fam in ("select_topk", "select_gaussian"):
        for n in (131072, 1048576):
            keys = sorted(k for k in o if k[0] == fam and k[1] == n and k in s)
            ratios = [s[k] / o[k] for k in keys]
            bo = min(o[k] for k in o if k[0] == fam and k[1] == n)
            bs = min(s[k] for k in s if k[0] == fam and k[1] == n)
            print(f"{fam} n={n}: best {bo:.1f} -> {bs:.1f} µs; {len(keys)} tiles in both, new/old "
                  f"median {sorted(ratios)[len(ratios)//2]:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
            for k in keys:
                print(f"    {k[2]:<24} {o[k]:8.1f} {s[k]:8.1f}  {s[k]/o[k]:.3f}")
