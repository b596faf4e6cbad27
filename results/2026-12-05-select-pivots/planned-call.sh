# Planned device call for the selection kernels' sample pivots and loads ahead (not run: this
# session had no device).
# Build the new binaries at the commit that lands it (scripts/build-gpu-bins.sh -> .gpu/x.txz) and
# the old ones at 5ea6afa (entkv and autotune only, same packing, -> .gpu/old.txz); run with carry
# [".gpu/x.txz", ".gpu/old.txz"], timeout 400.
# 1) The select_topk and select_gaussian families tuned alone at 128k and 1M on `paper` and `gqa`
#    by each build: the tune logs give every tile's median (µs) in the same call (the A/B).
# 2) `entkv bench` of each build's default bundle, top-k, Gaussian and certified-pruned at 128k and 1M,
#    old / new / old (drift check).
# Expected (interpreter counts, sel_stats.txt): at 1M a streamed head reads its scores 2.06 times
# instead of 4 with 20% fewer lane operations; select_topk at `paper` 1M 120-128 µs -> 60-90 µs (a
# guess: the saved sweeps each wait on L2 and the rest overlap work; the pivots' searches are
# shared-memory work), and
# select_gaussian at `gqa` 1M 83 -> 50-65 µs (docs/perf-notes.md).
PACK=.gpu/x.txz; source scripts/device-call.sh
mkdir -p .gpu/o && xz -dc .gpu/old.txz | tar xf - -C .gpu/o
GQA=(--alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
PAPER=(--alpha 1.5 --head-dim 32)
for b in o s; do
  ph tune-paper-$b 70 .gpu/$b/autotune "${PAPER[@]}" --kernels select_topk,select_gaussian --contexts 128k,1M --time-budget 45 --no-cache --out /tmp/sel-paper-$b
  ph tune-gqa-$b 70 .gpu/$b/autotune "${GQA[@]}" --kernels select_topk,select_gaussian --contexts 128k,1M --time-budget 45 --no-cache --out /tmp/sel-gqa-$b
  for w in paper gqa; do xz -9c /tmp/sel-$w-$b/tune-log.jsonl > $W/tune-log-$w-$b.jsonl.xz; done
done
for b in o s; do .gpu/$b/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 1,2 --kv-dtype f16 --out /tmp/bundle-$b >/dev/null 2>&1; done
for b in o s o; do
  ph bench-paper-$b 50 .gpu/$b/entkv bench --bundle /tmp/bundle-$b --workload paper --n 131072,1048576 --methods topk,gaussian,certified-pruned --no-defaults --out $W/bench-paper-$b-$SECONDS.json
done
for w in paper gqa; do for b in o s; do echo "== $w $b"; xz -dc $W/tune-log-$w-$b.jsonl.xz | python3 -c "
import json,sys
best={}
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['family'] in ('select_topk','select_gaussian'):
        k=(r['family'],r['workload']['context'],r['stage']); best[k]=min(best.get(k,1e9),r['median_us'])
for k in sorted(best): print(k, round(best[k],1))"; done; done
grep -hE " step " $W/bench-*.log | head -20
