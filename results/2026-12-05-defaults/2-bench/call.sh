# Device call at 2b763b3 (`s` of 1-untuned-ab's pack; `o` unused), right after 1-untuned-ab on
# the same warm H200: the tuned benchmark run behind docs/benchmarks.md with the seed's rank cap
# at 6, the sparse pass's `_la` knob and the per-walk defaults.
# On an H200: the tuned benchmark run (scripts/bench-gpu.sh), then `gqa` and `wide` autotuned
# (their tune logs time the `_la` points beside the plain ones) and benched beside SDPA;
# on an H100 (times not comparable with the H200's; not what ran): the sparse decode tuned
# alone on `gqa` and `wide` at 128k and 1M (`_la` against plain).
# (Comments rewritten after the call; the commands are what ran.)
PACK=.gpu/x.txz; source scripts/device-call.sh
cp .gpu/s/s/entkv .gpu/s/s/autotune .gpu/ && cp .gpu/s/s/* .gpu/s/
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
snap
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
export CUDA_CACHE_PATH=/tmp/jc2
ph autotune-gqa 90 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 50 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-wide 125 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 100 --no-cache --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 50 .gpu/s/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
else
for w in gqa wide; do
  export CUDA_CACHE_PATH=/tmp/jc-$w
  if [ $w = gqa ]; then A="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"; else A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"; fi
  ph tune-sparse-$w 80 .gpu/s/autotune --alpha 1.5 $A --kernels decode_sparse --contexts 128k,1M --time-budget 60 --no-cache --out /tmp/sp-$w
  xz -9c /tmp/sp-$w/tune-log.jsonl > $W/tune-log-sparse-$w.jsonl.xz; snap
done
fi
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
tail -14 $W/bench.log 2>/dev/null | grep -v "^-"
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*-tuned.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -40; grep -h median $W/sdpa-*.log 2>/dev/null
for f in $W/tune-log-*.jsonl.xz; do xz -dc $f | python3 -c "
import json,sys
best={}
for l in sys.stdin:
    r=json.loads(l)
    if r['status']!='ok' or r['stage']!='eval' or r['family']!='decode_sparse': continue
    key=(r['workload']['context'], r['workload'].get('selector',''), r['tile_tag'].endswith('_la'))
    if key not in best or r['median_us']<best[key][0]: best[key]=(r['median_us'], r['tile_tag'])
for k in sorted(best): print('$f'.split('/')[-1], k, round(best[k][0],1), best[k][1])"; done
