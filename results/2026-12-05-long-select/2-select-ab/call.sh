# Device call: the runtime GPU test, the GPU suite (--small-only: the seeded/decoy certified checks
# and the new select_topk checks against float64) and the engine/C ABI checks at 7223572, then an
# A/B of the selection kernels' sample pivots and loads a sweep ahead (7223572, `s`)
# against the build before them (5ea6afa, `o`), both carried in one pack (.gpu/c.txz: s/ and o/).
# 1) The select_topk and select_gaussian families tuned alone at 128k and 1M on `paper` and `gqa`
#    by each build: the tune logs give every tile's median (µs) in the same call.
# 2) `entkv bench` of each build's default bundle, top-k, Gaussian and certified-pruned at 128k
#    and 1M, old / new / old (drift check).
# Expected (interpreter counts, results/2026-12-05-select-pivots/sel_stats.txt): at 1M a streamed
# head reads its scores 2.06 times instead of 4 with 20% fewer lane operations; select_topk at
# `paper` 1M 120-128 µs -> 60-90 µs (a guess), select_gaussian at `gqa` 1M 83 -> 50-65 µs.
PACK=.gpu/c.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
cp -r .gpu/s/s/* .gpu/
export ENTKV_COMMIT=$(cat .gpu/s/s/commit)
ph runtime-gpu 60 .gpu/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 200 .gpu/entkv gpu-check --small-only --out $W/gpu-check
snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
snap
GQA=(--alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
PAPER=(--alpha 1.5 --head-dim 32)
for b in o s; do
  export CUDA_CACHE_PATH=/tmp/jc-$b ENTKV_COMMIT=$(cat .gpu/s/$b/commit)
  ph tune-paper-$b 70 .gpu/s/$b/autotune "${PAPER[@]}" --kernels select_topk,select_gaussian --contexts 128k,1M --time-budget 45 --no-cache --out /tmp/sel-paper-$b
  ph tune-gqa-$b 70 .gpu/s/$b/autotune "${GQA[@]}" --kernels select_topk,select_gaussian --contexts 128k,1M --time-budget 45 --no-cache --out /tmp/sel-gqa-$b
  for w in paper gqa; do xz -9c /tmp/sel-$w-$b/tune-log.jsonl > $W/tune-log-$w-$b.jsonl.xz; done
  snap
done
for b in o s; do CUDA_CACHE_PATH=/tmp/jc-$b .gpu/s/$b/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 1,2 --kv-dtype f16 --out /tmp/bundle-$b >/dev/null 2>&1; done
for b in o s o; do
  export ENTKV_COMMIT=$(cat .gpu/s/$b/commit)
  CUDA_CACHE_PATH=/tmp/jc-$b ph bench-paper-$b-$SECONDS 50 .gpu/s/$b/entkv bench --bundle /tmp/bundle-$b --workload paper --n 131072,1048576 --methods topk,gaussian,certified-pruned --no-defaults --out $W/bench-paper-$b-$SECONDS.json
done
for w in paper gqa; do for b in o s; do echo "== $w $b"; xz -dc $W/tune-log-$w-$b.jsonl.xz | python3 -c "
import json,sys
best={}
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['family'] in ('select_topk','select_gaussian'):
        k=(r['family'],r['workload']['context'],r['stage']); best[k]=min(best.get(k,1e9),r['median_us'])
for k in sorted(best): print(k, round(best[k],1))"; done; done
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log
grep -hE "^[0-9]+ +[a-z()0-9-]+ +(step|select_topk|select_gaussian) " $W/bench-*.log | head -40
