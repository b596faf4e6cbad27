# Same-tile A/B of the seeded certified tiles tuned by 3a6e290 (o, rank 4) and 579998b (s, rank
# 6) in one call: tune-log-{wide,gqa}-{o,s}.jsonl.xz -> ab_seed.txt.
import json, lzma, collections
for w in ["wide", "gqa"]:
    t = {}
    for v in "os":
        d = collections.defaultdict(list)
        for l in lzma.open("tune-log-%s-%s.jsonl.xz" % (w, v), "rt"):
            r = json.loads(l)
            if r["status"] == "ok" and r["stage"] == "eval" and r["tile_tag"].endswith("_seed"):
                d[(r["workload"]["context"], r["tile_tag"])].append(r["median_us"])
        t[v] = {k: min(x) for k, x in d.items()}
    both = sorted(set(t["o"]) & set(t["s"]))
    for c in sorted({k[0] for k in both}):
        ks = [k for k in both if k[0] == c]
        ratios = [t["s"][k] / t["o"][k] for k in ks]
        best_o = min(t["o"][k] for k in t["o"] if k[0] == c); best_s = min(t["s"][k] for k in t["s"] if k[0] == c)
        print("%s %7d: %2d seeded tiles in both, s/o %.3f-%.3f (median %.3f); best seeded o %.1f us, s %.1f us"
              % (w, c, len(ks), min(ratios), max(ratios), sorted(ratios)[len(ratios)//2], best_o, best_s))
