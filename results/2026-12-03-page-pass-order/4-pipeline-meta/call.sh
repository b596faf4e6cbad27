# Device call at 17125e9 + a software pipeline in page_bounds (PIPELINE_META: the next round's
# metadata loads issued before a round's sums, the entries two rounds ahead; 74 registers, no
# spills at paper) against 17125e9 (r4), untuned default bundles, certified-pruned on paper and
# peaked at 128k and 1M, r4 first and last; then ncu of the variant's page_bounds at paper 1M.
PACK=.gpu/a.txz; source scripts/device-call.sh
for v in r4 pm r4 pm; do
  for wl in paper peaked; do
    ph ab-$v-$wl-$SECONDS 40 .gpu/s/var/entkv-$v bench --bundle .gpu/s/var/b-$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-$v-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph ncu-page-bounds-pm 90 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --set full .gpu/s/var/entkv-pm bench --bundle .gpu/s/var/b-pm --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench-pm.json
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | page_score_box " $f | grep -v "^\[" | awk '{for(i=1;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) t=$i; print $1, $3, t}'; done
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $W/ncu-page-bounds-pm.log | head -10
