# Device call: the certified finish for exact candidates (a pass that rescores appends exact
# scores only: τ over them is the answer, no rescoring round, no second solve). One binary
# (2f43c61 + wip.diff); ENTKV_EXP_FINISH=0 gives the old finish for the A/B (two alternating
# rounds, bench-paper at the tuned tiles). Then, at the new finish: the runtime GPU test, the GPU
# suite (--small-only), the engine/C ABI checks and scripts/bench-gpu.sh. $W is packed after
# every phase (this call may meet the end of the session's device time).
PACK=.gpu/d.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
snap() { tar czf "$OUT/r.tgz" -C "$W" .; }
N=.gpu/s/entkv
for round in 1 2; do
  for v in 0 1; do
    export ENTKV_EXP_FINISH=$v
    ph bp1m-$v-$round 60 $N bench-paper --method certified --n 1048576 --iters 20 --tile 256,1,4,1,3,2,256,2048
    ph bp128k-$v-$round 40 $N bench-paper --method certified --n 131072 --iters 30 --tile 256,1,2,2,3,2,256,2048
    ph bp32k-$v-$round 40 $N bench-paper --method certified --n 32768 --iters 30 --tile 128,1,4,2,0,2,256,2048
  done
done
unset ENTKV_EXP_FINISH
snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1; snap
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check; snap
ph engine 120 bash scripts/engine-gpu.sh $W/engine; snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
for f in $W/bp*.log; do echo "== $f"; grep -E "step" $f | head -3; done
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/engine.log; grep -E "^paper +certified|^peaked +certified " $W/bench.log | head
