# Device call: as 1-ab, with the new pass loading each token of the next chunk as soon as the
# current token is scored (LLVM hoists them: a register double buffer). new = b69402e + wip.diff.
# bench-paper (iid `paper`) at 1M / 128k / 32k, one round, old then new; `peaked` 1M through
# each binary's untuned bundle; ncu stall statistics of the new pass at 1M.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/o/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,4,2,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T32="--tile 256,1,2,2,3,2,256,2048 --tile 128,1,2,2,0,2,256,2048"
for round in 1; do
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
ph ncu-1m 150 /usr/local/cuda/bin/ncu --clock-control none -k regex:"select_certified" -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $N bench-paper --method certified --n 1048576 --iters 1 --tile 256,1,4,1,3,2,256,2048
for f in $W/bp*.log; do echo "== $f"; grep -E "step|select_certified" $f | head -8; done
grep -E "certified" $W/peaked-*.log | head
grep -E "Duration|Registers|Achieved Occ|DRAM Through|Issued Warp|Eligible|Warp Cycles Per Issued|stalled" $W/ncu-*.log | head -30
