# Device call: the 4-bit pass with fewer instructions a token (shift-based page/slot addresses,
# terms held in registers, lane-local filters) — b61c9dd + wip.diff + warp_stream.rs (not
# committed). gpu-check --small-only (correctness, 8-bit too), bench-paper 4-bit at 1M for tiles
# × RB, 128k/32k, the 8-bit default tile, and ncu of one 4-bit tile.
PACK=.gpu/e.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T="--tile 128,1,2,2,8,8,256,2048 --tile 256,1,2,2,4,4,256,2048 --tile 256,1,1,2,5,5,256,2048 --tile 256,1,1,2,0,4,256,2048 --tile 128,1,4,2,4,4,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
for rb in 16 64; do
  RB=$rb ph s4-rb$rb-1048576 120 $E bench-paper --method certified --n 1048576 --sketch-bits 4 $T
done
RB=16 ph s4-rb16-131072 90 $E bench-paper --method certified --n 131072 --sketch-bits 4 $T
RB=16 ph s4-rb16-32768 90 $E bench-paper --method certified --n 32768 --sketch-bits 4 $T
ph s8-1048576 60 $E bench-paper --method certified --n 1048576 --sketch-bits 8 --tile 128,1,4,2,4,3,256,2048
RB=16 ph ncu 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats $E bench-paper --method certified --n 1048576 --sketch-bits 4 --iters 1 --tile 128,1,2,2,8,8,256,2048
ph gpu-check 200 $E gpu-check --small-only --out $W/gpu-check
tail -n 8 $W/s*.log; grep -E "Duration|Throughput|Achieved Occupancy|Registers Per|Issued Warp|Executed Ipc|Warp Cycles Per Issued|No Eligible" $W/ncu.log | head -20; grep -cE " PASS " $W/gpu-check.log; grep -E " FAIL " $W/gpu-check.log | head
