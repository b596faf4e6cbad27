# Device call at 2b763b3 (`s` of the pack): where the time goes in the score passes behind three
# missed targets at 1M, ncu (--clock-control none) of one launch each on the untuned bundles
# (their tiles are what the tuned runs of 2-bench chose or close to it): `wide` dense (3.23 TB/s,
# target 3.6), `wide` top-k's sparse pass (`_la`), `gqa` top-k's sparse pass (1.38x its floor).
PACK=.gpu/x.txz; source scripts/device-call.sh
E=.gpu/s/s/entkv
NCU="/usr/local/cuda/bin/ncu --clock-control none -c 1"
SECT="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
$E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out /tmp/u-wide > $W/bundle-wide.log 2>&1
$E bundle create --alpha 1.5 --head-dim 32 --kv-dtype bf16 --group 2 --out /tmp/u-gqa > $W/bundle-gqa.log 2>&1
ph ncu-wide-dense 120 $NCU -k regex:decode_dense_score__ $SECT $E bench --bundle /tmp/u-wide --no-defaults --workload wide --n 1048576 --iters 1 --warmup 0 --check-samples 1 --methods dense
snap
ph ncu-wide-topk 120 $NCU -k regex:decode_sparse_score__ $SECT $E bench --bundle /tmp/u-wide --no-defaults --workload wide --n 1048576 --iters 1 --warmup 0 --check-samples 1 --methods topk
snap
ph ncu-gqa-topk 120 $NCU -k regex:decode_sparse_score__ $SECT $E bench --bundle /tmp/u-gqa --no-defaults --workload gqa --n 1048576 --iters 1 --warmup 0 --check-samples 1 --methods topk
for f in $W/ncu-*.log; do echo "== $f"; grep -E "_score__|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Grid Size|Block Size|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth" $f | head -24; done
