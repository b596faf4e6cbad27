#!/usr/bin/env python3
"""Pair a tune log's tiles with and without one tag flag (a tile knob such as `_tc`).

    xz -dc tune-log.jsonl.xz | python3 scripts/pair_times.py FAMILY FLAG [LABEL]

Reads the tuner's JSON lines on stdin and prints, per (context, selector), every timed tile that
has a twin differing only by FLAG (a `_name` component of the tag, wherever it sits: `_h_tc_seed`
pairs with `_h_seed`), the median µs of each and their ratio, then the best tile with and without
the flag. Only `ok` evaluations of FAMILY measured by the run itself count (not records it
reused from the device cache, `from_cache`: another process timed those); the fastest of a
tile's evaluations is taken when it was timed more than once (the refinement re-times).
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    family, flag = sys.argv[1], sys.argv[2]
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    best = {}
    for line in sys.stdin:
        r = json.loads(line)
        if r.get("status") != "ok" or r.get("family") != family or r.get("median_us") is None:
            continue
        if r.get("from_cache"):
            continue
        w = r["workload"]
        key = (w["context"], w.get("selector") or "")
        tiles = best.setdefault(key, {})
        tag = r["tile_tag"]
        tiles[tag] = min(tiles.get(tag, float("inf")), r["median_us"])
    for (ctx, sel), tiles in sorted(best.items()):
        head = f"{label} {family} n={ctx}{' ' + sel if sel else ''}"
        with_f = {t: v for t, v in tiles.items() if f"{flag}_" in t + "_"}
        plain = {t: v for t, v in tiles.items() if t not in with_f}
        for t, v in sorted(with_f.items(), key=lambda x: x[1]):
            base = (t + "_").replace(f"{flag}_", "_", 1)[:-1]
            if base in plain:
                print(f"{head}: {base} {plain[base]:.1f} us, {flag} {v:.1f} us, ratio {v / plain[base]:.3f}")
        for name, group in (("plain", plain), (flag, with_f)):
            if group:
                t, v = min(group.items(), key=lambda x: x[1])
                print(f"{head}: best {name} {t} {v:.1f} us")


if __name__ == "__main__":
    main()
