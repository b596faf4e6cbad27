# Same-call A/B from the tune logs. Each selector's search of decode_sparse timed the same
# candidates in that selector's step; here, per bucket, the eval median (same reps for all) of
# the tile shipped for this selector against the tile shipped for the other one. Shipped tiles
# are the autotune table's choices (autotune-<workload>.log).
import json, re
for name in ["paper", "gqa"]:
    chosen = {}
    for line in open(f"autotune-{name}.log"):
        m = re.match(r"decode_sparse \((\w+)\)\s+(\d+)\s+(\S+)\s", line)
        if m:
            chosen[(m.group(1), int(m.group(2)))] = m.group(3)
    recs = [json.loads(l) for l in open(f"tune-log-{name}.jsonl")]
    ev = {}
    for r in recs:
        if r["family"] == "decode_sparse" and r["status"] == "ok" and r["stage"] == "eval":
            ev[(r["workload"].get("selector"), r["workload"]["context"], r["tile_tag"])] = r["median_us"]
    print(f"== {name}: decode_sparse, eval medians (µs) in each selector's step")
    for (sel, ctx), own in sorted(chosen.items(), key=lambda x: (x[0][1], x[0][0])):
        other = chosen[("gaussian" if sel == "topk" else "topk", ctx)]
        a, b = ev.get((sel, ctx, own)), ev.get((sel, ctx, other))
        if own == other:
            print(f"  {ctx:>8} {sel:8} both selectors chose {own}")
        elif a and b:
            print(f"  {ctx:>8} {sel:8} own {own} {a:8.2f}  other's {other} {b:8.2f}  ({b/a:.3f}x)")
        else:
            print(f"  {ctx:>8} {sel:8} own {own} {a}  other's {other} {b} (not both timed at eval)")
