# Planned device call for the seeded certified pass (not run: this session had no device).
# Build at the commit that lands it (scripts/build-gpu-bins.sh), then run with carry [".gpu/x.txz"].
# 1) The GPU suite (--small-only): every seeded check (4-bit cases with shared bounds, and the
#    SeedDecoy cases that must flag and repair) against float64 on the H200.
# 2) The certified family tuned alone on `wide`, `gqa` and `paper` at 32k/128k/1M: the tune logs
#    time the seeded points beside `_h` and the unshared ones in one process (the A/B), then
#    `entkv bench` of each bundle (tuned rows against the default rows, same process).
# Expected (interpreter counts, results/2026-12-05-seed/interp_rescoring.txt): `wide` 1M rescores
# 12% of K instead of 24%; a guess for its certified step is 2.97 -> 2.0-2.4 ms.
PACK=.gpu/x.txz; source scripts/device-call.sh
B=.gpu/s
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 170 $B/entkv gpu-check --small-only --out $W/gpu-check
snap
WIDE=(--alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4)
GQA=(--alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
ph tune-wide 130 $B/autotune "${WIDE[@]}" --kernels decode_certified --contexts 32k,128k,1M --time-budget 110 --no-cache --out /tmp/b-wide
xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz; cp /tmp/b-wide/manifest.json $W/manifest-wide.json
ph bench-wide 60 $B/entkv bench --bundle /tmp/b-wide --workload wide --n 32768,131072,1048576 --methods certified --out $W/bench-wide.json
snap
ph tune-gqa 100 $B/autotune "${GQA[@]}" --kernels decode_certified --contexts 32k,128k,1M --time-budget 80 --no-cache --out /tmp/b-gqa
xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz; cp /tmp/b-gqa/manifest.json $W/manifest-gqa.json
ph bench-gqa 50 $B/entkv bench --bundle /tmp/b-gqa --workload gqa --n 32768,131072,1048576 --methods certified --out $W/bench-gqa.json
snap
ph tune-paper 100 $B/autotune --alpha 1.5 --head-dim 32 --kernels decode_certified --contexts 32k,128k,1M --time-budget 80 --no-cache --out /tmp/b-paper
xz -9c /tmp/b-paper/tune-log.jsonl > $W/tune-log-paper.jsonl.xz; cp /tmp/b-paper/manifest.json $W/manifest-paper.json
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL |_seed" $W/gpu-check-small.log | grep -E "FAIL|ERR" | head -8; tail -2 $W/gpu-check-small.log
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*.log | awk '{print $1,$2,$(NF-3),$NF}'
for w in wide gqa paper; do echo "== $w"; xz -dc $W/tune-log-$w.jsonl.xz | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['family']=='decode_certified' and '_h' in r['tile_tag']:
        print(r['workload']['context'], r['stage'], r['tile_tag'], r['median_us'])" | sort -n | head -40; done
