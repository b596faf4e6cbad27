# Device call at 17125e9 + one line: page_bounds with `.minnctapersm 1024/threads` (at most 64
# registers: 4 CTAs of 256 an SM instead of 3 at 72; ptxas: no spills at paper), against 17125e9
# (r4), untuned default bundles, certified-pruned on paper and peaked at 128k and 1M, r4 first
# and last; then ncu of the variant's page_bounds at paper 1M (call 2 has r4's).
PACK=.gpu/a.txz; source scripts/device-call.sh
for v in r4 mb r4 mb; do
  for wl in paper peaked; do
    ph ab-$v-$wl-$SECONDS 40 .gpu/s/var/entkv-$v bench --bundle .gpu/s/var/b-$v --no-defaults --workload $wl --n 131072,1048576 --methods certified-pruned --check-samples 1 --out $W/ab-$v-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph ncu-page-bounds-mb 90 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --set full .gpu/s/var/entkv-mb bench --bundle .gpu/s/var/b-mb --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench-mb.json
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | page_score_box " $f | grep -v "^\[" | awk '{for(i=1;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) t=$i; print $1, $3, t}'; done
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $W/ncu-page-bounds-mb.log | head -10
