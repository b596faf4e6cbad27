# Device call at b44f374: why the certified pass (and the dense decode) run so far from their
# floors on `wide` (d 128, G 4) and `gqa` (d 32, G 2) when `paper` certified is at 1.23x. Each
# family tuned at 1M only (autotune --kernels), then ncu (--clock-control none) of one launch:
# speed of light, occupancy, launch stats, warp states, memory; the certified pass also with
# source counters per SASS instruction.
PACK=.gpu/a.txz; source scripts/device-call.sh
E=.gpu/s/entkv
NCU="/usr/local/cuda/bin/ncu --clock-control none -c 1"
SECT="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
export CUDA_CACHE_PATH=/tmp/jcw
ph tune-wide 120 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 1M --kernels decode_certified,decode_dense --time-budget 90 --out /tmp/bw
RUNW="$E bench --bundle /tmp/bw --no-defaults --workload wide --n 1048576 --iters 1 --warmup 0 --check-samples 1"
ph ncu-wide-cert 60 $NCU -k regex:select_certified $SECT $RUNW --methods certified
ph ncu-wide-dense 60 $NCU -k regex:decode_dense_score $SECT $RUNW --methods dense
ph ncu-wide-cert-src 60 $NCU -k regex:select_certified --section SourceCounters --section WarpStateStats --page source --print-source sass --csv $RUNW --methods certified
xz -9 $W/ncu-wide-cert-src.log
tar czf "$OUT/r.tgz" -C "$W" .
export CUDA_CACHE_PATH=/tmp/jcg
ph tune-gqa 90 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --contexts 1M --kernels decode_certified --time-budget 60 --out /tmp/bg
RUNG="$E bench --bundle /tmp/bg --no-defaults --workload gqa --n 1048576 --iters 1 --warmup 0 --check-samples 1 --methods certified"
ph ncu-gqa-cert 60 $NCU -k regex:select_certified $SECT $RUNG
cp /tmp/bw/manifest.json $W/manifest-wide.json; cp /tmp/bg/manifest.json $W/manifest-gqa.json
grep -E "select_certified|decode_dense" -A0 $W/tune-*.log | tail -5
for f in $W/ncu-wide-cert.log $W/ncu-wide-dense.log $W/ncu-gqa-cert.log; do echo "== $f"; grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issued Ipc|Executed Ipc|Grid Size|Block Size|Warp Cycles Per Issued|No Eligible|Stall" $f | head -30; done
