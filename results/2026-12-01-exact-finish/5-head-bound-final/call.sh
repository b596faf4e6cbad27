# Device call: the head_bound sharing as committed next (2f054aa + wip.diff; the ENTKV_EXP_NOSHARE
# knob, removed before the commit, generates the pass without the sharing): each chunk reads its
# heads' shared bounds before it is scored (4-head-bound-ab read them after the chunk and lost 7%
# at 32k), one index a group (the per-head ones spilled at GQA 8). A/B at `paper`'s tuned tiles
# (bench-paper, two alternating rounds), then the runtime GPU test, the GPU suite
# (--small-only), the engine/C ABI checks, scripts/bench-gpu.sh and `gqa` / `wide` tuned and
# benched beside SDPA. $W is packed after every phase.
PACK=.gpu/e.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
snap() { tar czf "$OUT/r.tgz" -C "$W" .; }
N=.gpu/s/entkv
for round in 1 2; do
  for v in 1 0; do
    if [ $v = 1 ]; then export ENTKV_EXP_NOSHARE=1; else unset ENTKV_EXP_NOSHARE; fi
    ph bp1m-$v-$round 60 $N bench-paper --method certified --n 1048576 --iters 20 --tile 256,1,4,2,3,2,256,2048
    ph bp128k-$v-$round 40 $N bench-paper --method certified --n 131072 --iters 30 --tile 256,1,2,2,3,2,256,2048
    ph bp32k-$v-$round 40 $N bench-paper --method certified --n 32768 --iters 30 --tile 256,1,2,2,3,2,256,2048
  done
done
unset ENTKV_EXP_NOSHARE
for f in $W/bp*.log; do echo "$(basename $f) $(grep step $f | tr -s " " | head -1)"; done
snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
ph engine 100 bash scripts/engine-gpu.sh $W/engine
snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 100 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 60 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
snap
export CUDA_CACHE_PATH=/tmp/jc2
ph autotune-wide 150 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 130 --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 60 .gpu/s/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
tail -4 $W/engine.log; grep -E "certified|topk " $W/bench/*.log 2>/dev/null | head -3; tail -22 $W/bench.log | head -20; grep -hE "^(gqa|wide) " $W/bench-*.log; grep -h median $W/sdpa-*.log
