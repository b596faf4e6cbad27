# Device call at 20313e6: page_bounds with its own lane mapping (two lanes a page at `paper`,
# depth 2). The GPU suite (--small-only), an untuned A/B of the mapping (lanes a page × depth:
# l2d2 = 20313e6; l2d1 built from it with the depth changed; l4d4 = fb4147f; l1d1 held 168
# registers and was left out to fit the carry limit), each
# binary with its own default bundle (.gpu/var), certified-pruned on `paper` and `peaked`; ncu
# (full set) of 20313e6's page_bounds at `paper` 1M; the tuned benchmark run; the engine checks.
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
for v in l2d2 l2d1 l4d4; do
  bin=.gpu/s/var/entkv-$v; [ $v = l2d2 ] && bin=.gpu/s/entkv
  for wl in paper peaked; do
    ph ab-$v-$wl 60 $bin bench --bundle .gpu/s/var/b-$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-$v-$wl.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph ncu-page-bounds 90 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --set full .gpu/s/entkv bench --bundle .gpu/s/var/b-l2d2 --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench.json
snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -1 $W/gpu-check-small.log; tail -2 $W/engine.log
for f in $W/ab-*.log; do echo "== $f"; grep -E "^(131072|1048576) +certified-pruned +(step|page_score_box)" $f | awk '{print $1, $3, $(NF-3)}'; done
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall" $W/ncu-page-bounds.log | head -20
tail -22 $W/bench.log
