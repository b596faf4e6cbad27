# Device call at 17125e9 (landed page passes): PAGE_BOUNDS_ROUNDS A/B now that each round's
# block-table entries load a round early (r4 = 17125e9; r6 spills 8 B in ptxas, r8 76
# registers, both built from that tree with the const changed), untuned default bundles,
# certified-pruned on paper and peaked at 128k and 1M; r4 again last for drift. Then ncu
# (--clock-control none, --set full) of page_bounds at paper 1M for r4 and r8.
PACK=.gpu/a.txz; source scripts/device-call.sh
for r in 4 6 8 4; do
  for wl in paper peaked; do
    ph ab-r$r-$wl-$SECONDS 40 .gpu/s/var/entkv-r$r bench --bundle .gpu/s/var/b-r$r --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-r$r-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
for r in 4 8; do
  ph ncu-page-bounds-r$r 90 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --set full .gpu/s/var/entkv-r$r bench --bundle .gpu/s/var/b-r$r --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench-r$r.json
done
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | page_score_box " $f | grep -v "^\[" | awk '{print $1, $2, $3, $(NF-3)}'; done
for r in 4 8; do echo "== ncu r$r"; grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|L1/TEX Hit|L2 Hit|Warp Cycles Per Issued" $W/ncu-page-bounds-r$r.log | head -16; done
