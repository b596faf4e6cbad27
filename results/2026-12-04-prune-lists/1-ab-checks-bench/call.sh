# Device call at 4c29896: A/B of the certified pruning's selection lists (v0 = 368a084's entkv,
# every pruned row writes its list; v1 = 4c29896's: rows the full walk takes, kept > 3/4 of
# their pages, write none), each benching its own untuned bundle (group 1) on paper and peaked at
# 128k and 1M, with plain certified (no pruning) as a control; v0 runs again last to bound drift.
# Then, with 4c29896's binaries: the runtime GPU test, the GPU suite (--small-only), the tuned
# benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh; the tuner now also refines
# around the first round's fastest point, feb297d) and the engine/C ABI checks.
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
for v in 0 1 0; do
  for wl in paper peaked; do
    ph ab-v$v-$wl-$SECONDS 40 .gpu/s/var/entkv-v$v bench --bundle .gpu/s/var/b-v$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned,certified --check-samples 1 --out $W/ab-v$v-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 170 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 60 bash scripts/engine-gpu.sh $W/engine
snap
for f in $W/ab-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z-]+ +(step|select_topk|decode_certified) " $f | awk '{for(i=4;i<=NF;i++) if($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/){print $1, $2, $3, $i; break}}'; done
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log; tail -24 $W/bench.log
