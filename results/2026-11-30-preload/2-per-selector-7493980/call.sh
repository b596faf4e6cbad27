# Device call at 7493980: the sparse decode tuned per selector. `paper` and `gqa` tuned (the
# tune logs hold each selector's timing of every candidate, so the other selector's winner is
# timed in the same search), then benched with the tuned bundles, SDPA beside them.
set -u
W=/tmp/r; mkdir -p $W .gpu/s && xz -dc .gpu/s.txz | tar xf - -C .gpu/s
export CUDA_CACHE_PATH=/tmp/jit CUDA_CACHE_MAXSIZE=4294967296 ENTKV_COMMIT=$(cat .gpu/s/commit)
fin() { cat $W/phases.txt; tar czf $OUT/r.tgz -C $W .; }
trap fin EXIT
{ echo "commit $ENTKV_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $W/nvidia-smi.txt
ph() { local n=$1; local lim=$2; shift 2; local t=$SECONDS; timeout -k 5 $lim "$@" > $W/$n.log 2>&1; echo "$n: $((SECONDS-t)) s exit $?" >> $W/phases.txt; }
ph autotune-paper 130 .gpu/s/autotune --alpha 1.5 --head-dim 32 --out /tmp/b-paper
cp /tmp/b-paper/manifest.json $W/bundle-manifest-paper-tuned.json; cp /tmp/b-paper/tune-log.jsonl $W/tune-log-paper.jsonl
ph bench-paper 100 .gpu/s/entkv bench --bundle /tmp/b-paper --no-defaults --workload paper --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-paper-tuned.json
ph sdpa-paper 30 python3 scripts/sdpa_baseline.py --workload paper --n 32768 131072 1048576 --out $W/sdpa-paper.json
ph autotune-gqa 130 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; cp /tmp/b-gqa/tune-log.jsonl $W/tune-log-gqa.jsonl
ph bench-gqa 60 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
grep -h "decode_sparse" $W/autotune-paper.log $W/autotune-gqa.log | head -20
