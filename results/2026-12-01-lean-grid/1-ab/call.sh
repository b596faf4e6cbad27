# Device call: A/B of the 4-bit certified pass, old = 738e1d0 binaries (same PTX as b69402e),
# new = b69402e + wip.diff (lane groups take consecutive tokens of one page; one-byte query
# weights with a centred rounding term; odd nibbles in place). bench-paper (iid `paper`) at
# 1M / 128k / 32k, two alternating rounds, tuned tiles of 0ba9a75's bundle + the default;
# `peaked` 1M through each binary's untuned bundle; ncu per-kernel times of the certified and
# top-k steps at 128k (new binary).
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/o/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,4,2,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T32="--tile 256,1,2,2,3,2,256,2048 --tile 128,1,2,2,0,2,256,2048"
for round in 1 2; do
  for v in o n; do
    E=$N; [ $v = o ] && E=$O
    ph bp1m-$v-$round 120 $E bench-paper --method certified --n 1048576 --iters 20 $T1M
    ph bp128k-$v-$round 60 $E bench-paper --method certified --n 131072 --iters 30 $T128
    ph bp32k-$v-$round 60 $E bench-paper --method certified --n 32768 --iters 30 $T32
  done
done
for v in o s; do
  ph peaked-$v 90 $N bench --bundle .gpu/s/$v/bundle --no-defaults --workload peaked --methods certified --n 1048576 --iters 20 --check-samples 1
done
ph ncu-cert128k 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:"select_certified|decode_certified" -c 4 --section SpeedOfLight --section LaunchStats --section Occupancy $N bench-paper --method certified --n 131072 --iters 1 --tile 256,1,4,2,3,2,256,2048
ph ncu-topk128k 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:"page_score|select_topk|decode_sparse" -c 8 --section SpeedOfLight --section LaunchStats --section Occupancy $N bench --bundle .gpu/s/s/bundle --no-defaults --workload paper --methods topk --n 131072 --iters 1 --warmup 1 --check-samples 1
for f in $W/bp*.log; do echo "== $f"; grep -E "step|select_certified" $f | head -8; done
grep -E "certified" $W/peaked-*.log | head
grep -E "^  [a-z_]+.*\(|Duration|Waves|Registers|Achieved Occ|Memory Throughput|DRAM Through" $W/ncu-*.log | head -80
