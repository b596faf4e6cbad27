# Device call at 61e7a58: A/B of the page passes' grid order and block-table loads, four builds
# of `entkv` from that tree differing only in two consts (abi PAGE_PASS_HEADS_FASTEST,
# kernels-gen score.rs TABLE_LOADS): v0 = page blocks on grid x, entries loaded in their round
# (813b4f7's kernels); v1 = kv heads on grid x; v2 = v1 + every round's entries first; v3 = v1 +
# the next round's entries loaded during a round (61e7a58 as committed). Each benches its own
# untuned bundle (group 1) on paper and peaked at 128k and 1M; v0 runs again last to bound drift.
# Then, with 61e7a58's binaries: the runtime GPU test, the GPU suite (--small-only), the tuned
# benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh), the engine/C ABI checks and
# `gqa` tuned and benched beside SDPA.
# (Afterwards, here: the A/B files moved into ab/, which scripts/bench_report.py does not read,
# and bench.tgz extracted into bench-run/ with its tune log xz-compressed.)
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
for v in 0 1 2 3 0; do
  for wl in paper peaked; do
    ph ab-v$v-$wl-$SECONDS 40 .gpu/s/var/entkv-v$v bench --bundle .gpu/s/var/b-v$v --no-defaults --workload $wl --n 131072,1048576 --methods topk,certified,certified-pruned --check-samples 1 --out $W/ab-v$v-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 170 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
ph bench 170 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 60 bash scripts/engine-gpu.sh $W/engine
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 70 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 25 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-gqa-tuned.json
ph sdpa-gqa 20 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | page_bounds | page_score_box " $f; done
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log; tail -22 $W/bench.log; grep -hE "^gqa " $W/bench-*.log; grep -h median $W/sdpa-*.log
