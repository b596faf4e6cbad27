# Device call after ../3-checks-bench on the same warm machine (its tuned bundles in /tmp/b-gqa,
# /tmp/b-wide; the default bundle where they are gone): where the certified pass's time goes at
# 128k, the length where `paper` (1.9x), `gqa` (4.2x) and `wide` (11.9x) miss their floors most.
# ncu (--clock-control none) of one select_certified launch (the 4-bit pass) per workload:
# speed of light, occupancy, launch stats, warp states, memory, compute.
PACK=.gpu/x.txz; source scripts/device-call.sh
E=.gpu/s/entkv
NCU="/usr/local/cuda/bin/ncu --clock-control none -c 1"
SECT="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
[ -d /tmp/b-paper ] || $E bundle create --alpha 1.5 --head-dim 32 --out /tmp/b-paper > $W/bundle-paper.log 2>&1
[ -d /tmp/b-gqa ] || $E bundle create --alpha 1.5 --head-dim 32 --kv-dtype bf16 --group 2 --out /tmp/b-gqa > $W/bundle-gqa.log 2>&1
[ -d /tmp/b-wide ] || $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out /tmp/b-wide > $W/bundle-wide.log 2>&1
for w in gqa wide paper; do
  cp /tmp/b-$w/manifest.json $W/manifest-$w.json 2>/dev/null
  ph ncu-$w-cert 90 $NCU -k regex:select_certified__ $SECT $E bench --bundle /tmp/b-$w --no-defaults --workload $w --n 131072 --iters 1 --warmup 0 --check-samples 1 --methods certified
  snap
done
for f in $W/ncu-*-cert.log; do echo "== $f"; grep -E "select_certified|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Grid Size|Block Size|Warp Cycles Per Issued|No Eligible|Stall" $f | head -24; done
