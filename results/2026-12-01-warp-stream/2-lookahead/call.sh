# Device call: warp stream + pages looked up a chunk ahead + next chunk's loads before the
# rescoring (b61c9dd + wip.diff + warp_stream.rs, not committed). bench-paper certified 4-bit at
# 1M for tiles × RB (bytes of a K row a rescoring loads at once), then 128k/32k, then ncu.
PACK=.gpu/e.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T="--tile 256,1,1,2,6,6,256,2048 --tile 256,1,1,2,5,5,256,2048 --tile 128,1,1,2,12,12,256,2048 --tile 256,1,2,2,4,4,256,2048 --tile 128,1,2,2,8,8,256,2048 --tile 256,2,2,2,5,5,256,2048 --tile 256,1,1,2,0,4,256,2048"
for rb in 16 32; do
  RB=$rb ph s4-rb$rb-1048576 120 $E bench-paper --method certified --n 1048576 --sketch-bits 4 $T
done
RB=16 ph s4-rb16-131072 90 $E bench-paper --method certified --n 131072 --sketch-bits 4 $T
RB=16 ph s4-rb16-32768 90 $E bench-paper --method certified --n 32768 --sketch-bits 4 $T
RB=16 ph ncu 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats $E bench-paper --method certified --n 1048576 --sketch-bits 4 --iters 1 --tile 256,1,1,2,6,6,256,2048
tail -n 8 $W/s*.log; grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|Warp Cycles|Issued Warp|Theoretical Occ" $W/ncu.log | head -40
