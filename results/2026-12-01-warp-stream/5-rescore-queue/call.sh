# Device call: rescoring queued per warp and done a batch at a time (one token a lane), after
# the lean-loop changes — b61c9dd + wip.diff + warp_stream.rs (not committed). bench-paper
# certified 4-bit tiles at 1M, 128k, 32k; ncu of one tile at 1M; 8-bit default for reference.
PACK=.gpu/e.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T="--tile 64,1,2,2,16,16,256,2048 --tile 64,1,4,2,8,8,256,2048 --tile 128,1,2,2,8,8,256,2048 --tile 256,1,2,2,4,4,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 128,1,4,2,4,4,256,2048 --tile 32,1,2,2,32,32,256,2048 --tile 256,1,1,2,5,5,256,2048 --tile 128,1,2,2,0,6,256,2048"
for n in 1048576 131072 32768; do
  ph s4-$n 120 $E bench-paper --method certified --n $n --sketch-bits 4 $T
done
ph s8-1048576 60 $E bench-paper --method certified --n 1048576 --sketch-bits 8 --tile 128,1,4,2,4,3,256,2048
ph ncu 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats --section SchedulerStats $E bench-paper --method certified --n 1048576 --sketch-bits 4 --iters 1 --tile 64,1,2,2,16,16,256,2048
tail -n 9 $W/s*.log; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issued Warp|Executed Instructions  |No Eligible" $W/ncu.log | head -20
