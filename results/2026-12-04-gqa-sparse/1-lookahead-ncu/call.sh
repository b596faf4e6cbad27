# Device call at 35fabc7 plus a temporary knob (ENTKV_LA=1 at bundle creation turns the sparse
# score pass's page lookahead on for every spec; shipped: f16, G = 1, no ALiBi only). A/B on
# `gqa` (d 32, G 2, bf16) of untuned bundles: la0 = shipped (no lookahead at bf16 G 2), la1 =
# lookahead (ptxas here: 128 registers, 20 B spilled at the default tile); la0 runs first and
# last. Then ncu of the sparse score pass (default tile) at gqa 1M and paper 1M top-k: why the
# gqa pass runs at ~2.9 TB/s where paper's runs at ~3.8.
PACK=.gpu/x.txz; source scripts/device-call.sh
for v in 0 1 0; do
  ph ab-la$v-$SECONDS 40 .gpu/s/entkv bench --bundle .gpu/s/b-la$v --no-defaults --workload gqa --n 131072,1048576 --methods topk,gaussian --check-samples 1 --out $W/ab-la$v-$SECONDS.json
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph ncu-gqa 120 ncu --clock-control none --kernel-name regex:decode_sparse_score --launch-skip 3 --launch-count 1 --set full .gpu/s/entkv bench --bundle .gpu/s/b-la0 --no-defaults --workload gqa --n 1048576 --methods topk --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-gqa.json
snap
ph ncu-paper 120 ncu --clock-control none --kernel-name regex:decode_sparse_score --launch-skip 3 --launch-count 1 --set full .gpu/s/entkv bench --bundle .gpu/s/b-p --no-defaults --workload paper --n 1048576 --methods topk --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-paper.json
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | decode_sparse " $f | grep -v "^\[" | awk '{print $1, $2, $3, $(NF-3)}'; done
for f in $W/ncu-*.log; do echo "== $f"; grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Block Limit|Grid Size|Waves Per SM|L2 Hit|L1/TEX Hit" $f | head -24; done
