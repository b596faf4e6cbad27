# Device call at d4aaee0 (0629431's kernels; the review after it changed no PTX). It is the planned
# call of ../planned-call.sh, gqa before wide. (7223572's kernels: select_topk sample pivots and loads a sweep ahead,
# select_gaussian loads ahead, the seeded certified pass `_seed` in the tuner's space; 387e82a
# JIT-compiles gpu-check's suite in worker processes; 0629431 skips the pivots where the keys
# between them would not fit). Whichever GPU comes:
# 1) the GPU suite (--small-only: every interpreter check of the kernel suite on the GPU against
#    float64, with the seeded/decoy certified checks and the select_topk pivot checks);
# on an H200:
# 2) the tuned benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh: autotune, paper,
#    peaked, sweep, SDPA), then `gqa` and `wide` as a user makes them (autotune of every family;
#    the tune logs time the seeded certified points beside `_h`), benched beside SDPA;
# on an H100 (times not comparable with the H200's):
# 2') the certified family tuned alone on `wide` at 128k and 1M (seeded against `_h` tiles in
#    the same tune log), then select_topk tuned alone at 1M on `paper` and `gqa`: the thin tiles
#    (t512_i4, t256_i8) against ../2-select-ab's tune logs of 7223572 on another H100.
# (The runtime GPU test and the engine/C ABI checks passed at 7223572 in ../2-select-ab.)
PACK=.gpu/x.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
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
export CUDA_CACHE_PATH=/tmp/jc3
ph tune-wide-cert 100 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --kernels decode_certified --contexts 128k,1M --time-budget 80 --no-cache --out /tmp/cert-wide
xz -9c /tmp/cert-wide/tune-log.jsonl > $W/tune-log-cert-wide.jsonl.xz; snap
ph tune-paper 60 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kernels select_topk --contexts 1M --time-budget 45 --no-cache --out /tmp/sel-paper
ph tune-gqa 60 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --kernels select_topk --contexts 1M --time-budget 45 --no-cache --out /tmp/sel-gqa
for w in paper gqa; do xz -9c /tmp/sel-$w/tune-log.jsonl > $W/tune-log-sel-$w.jsonl.xz; done
fi
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
tail -14 $W/bench.log 2>/dev/null | grep -v "^-"
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*-tuned.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -40; grep -h median $W/sdpa-*.log 2>/dev/null
for w in paper gqa; do [ -f $W/tune-log-sel-$w.jsonl.xz ] && xz -dc $W/tune-log-sel-$w.jsonl.xz | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['stage']=='eval': print('$w', r['tile_tag'], round(r['median_us'],1))"; done
[ -f $W/tune-log-cert-wide.jsonl.xz ] && xz -dc $W/tune-log-cert-wide.jsonl.xz | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['stage']=='eval': print('cert-wide', r['workload']['context'], r['tile_tag'], round(r['median_us'],1))"
