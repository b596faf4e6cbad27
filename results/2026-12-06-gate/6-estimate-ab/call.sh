# Device call: o = bfae77f (seed samples in runs), n = a180887 (the estimate sweeps gathered samples
# in shared memory). The GPU suite of n, then, in the order o n o n: `bench-paper`
# (per kernel; iid `paper`) of seeded tiles and their unseeded twins at 128k and 1M (the
# tuned `paper` tiles and `gqa`'s seeded one), and `wide`'s untuned bundle (seeded default),
# certified at 32k / 128k / 1M.
PACK=.gpu/ab.txz; source scripts/device-call.sh
for v in o n; do
  .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 \
    --out /tmp/b-$v-wide >/dev/null || exit 1
done
ph gpu-check-small 150 .gpu/s/n/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for round in 1 2; do for v in o n; do
  ph p128k-$round-$v 60 .gpu/s/$v/entkv bench-paper --method certified --n 131072 --iters 30 \
    --tile 256,1,4,2,3,2,256,2048 --tile 256,1,4,2,3,2,256,2048,h,seed --tile 256,1,4,1,2,2,256,2048,h,seed
  ph p1m-$round-$v 60 .gpu/s/$v/entkv bench-paper --method certified --n 1048576 --iters 30 \
    --tile 32,1,2,2,32,32,256,2048,h --tile 32,1,2,2,32,32,256,2048,h,seed \
    --tile 256,1,4,2,3,2,256,2048,h,seed --tile 256,1,4,1,2,2,256,2048,h,seed
  ph wide-$round-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/b-$v-wide --workload wide \
    --methods certified --no-defaults --out $W/bench-wide-$round-$v.json
done; done
