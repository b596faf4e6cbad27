# Device call at fb4147f: page_bounds with page_bounds_depth = 4/G pages per lane group (call 1:
# depth 1, latency-bound). The GPU suite (--small-only) at fb4147f, then an untuned A/B of the
# depth (2, 4, 8: entkv binaries built from fb4147f with the constant changed, each with its own
# default bundle, .gpu/var), certified-pruned on `paper` and `peaked`, then the tuned benchmark
# run (scripts/bench-gpu.sh) and the engine/C ABI checks.
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
for v in d2 d4 d8; do
  bin=.gpu/s/var/entkv-$v; [ $v = d4 ] && bin=.gpu/s/entkv
  for wl in paper peaked; do
    ph ab-$v-$wl 60 $bin bench --bundle .gpu/s/var/b-$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-$v-$wl.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -1 $W/gpu-check-small.log; tail -2 $W/engine.log
for f in $W/ab-*.log; do echo "== $f"; grep -E "^(131072|1048576) +certified-pruned +(step|page_score_box)" $f; done
tail -22 $W/bench.log
