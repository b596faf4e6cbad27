# Device call: where the 4-bit pass's instructions go. b61c9dd + wip.diff + warp_stream.rs (q'
# in shared f32 for the rescoring, one-stage loads for the 8-bit pass). SASS of two tiles
# (ptxas + cuobjdump), ncu source counters (per-SASS-instruction executions) of the best tile
# at 1M, and bench-paper 4-bit tiles at 1M.
PACK=.gpu/e.txz; source scripts/device-call.sh
E=.gpu/s/entkv
for f in .gpu/s/ptx/*.ptx; do b=$(basename $f .ptx); /usr/local/cuda/bin/ptxas -arch=sm_90 -v $f -o /tmp/$b.cubin > $W/ptxas-$b.log 2>&1; /usr/local/cuda/bin/cuobjdump -sass /tmp/$b.cubin > $W/sass-$b.txt 2>&1; done
T="--tile 64,1,2,2,16,16,256,2048 --tile 64,1,4,2,8,8,256,2048 --tile 64,1,1,2,16,16,256,2048 --tile 128,1,2,2,8,8,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 128,1,4,2,4,4,256,2048 --tile 32,1,2,2,32,32,256,2048"
RB=16 ph s4-rb16-1048576 120 $E bench-paper --method certified --n 1048576 --sketch-bits 4 $T
RB=16 ph ncu 300 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified -c 1 --section SourceCounters --section InstructionStats --section WarpStateStats --page source --print-source sass --csv $E bench-paper --method certified --n 1048576 --sketch-bits 4 --iters 1 --tile 64,1,2,2,16,16,256,2048
RB=16 ph ncu-details 300 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified -c 1 --section SpeedOfLight --section InstructionStats --section WarpStateStats --section SchedulerStats --section Occupancy $E bench-paper --method certified --n 1048576 --sketch-bits 4 --iters 1 --tile 64,1,2,2,16,16,256,2048
tail -n 8 $W/s4*.log; wc -l $W/ncu.log $W/sass-*.txt; grep -E "Executed Instructions|Issued Warp|Duration|Stall" $W/ncu-details.log | head
