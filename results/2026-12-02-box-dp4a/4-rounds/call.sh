# Device call at c09ee58: page_bounds in PAGE_BOUNDS_ROUNDS = 4 rounds a CTA (the integer weights
# once for all). The GPU suite (--small-only) at c09ee58, an untuned A/B of the rounds (r4 =
# c09ee58; r8 built from it with the constant changed; r1 = 20313e6), each binary with its own
# default bundle (.gpu/var), certified-pruned on `paper` and `peaked`; the tuned benchmark run;
# the engine/C ABI checks.
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
for v in r4 r8 r1; do
  bin=.gpu/s/var/entkv-$v; [ $v = r4 ] && bin=.gpu/s/entkv
  for wl in paper peaked; do
    ph ab-$v-$wl 60 $bin bench --bundle .gpu/s/var/b-$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-$v-$wl.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -1 $W/gpu-check-small.log; tail -2 $W/engine.log
for f in $W/ab-*.log; do echo "== $f"; grep -E "^(131072|1048576) +certified-pruned +(step|page_score_box)" $f | awk '{print $1, $3, $(NF-4), $(NF-2)}'; done
tail -22 $W/bench.log
