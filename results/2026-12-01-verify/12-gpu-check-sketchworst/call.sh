# Device call: the GPU suite (`entkv gpu-check --small-only`) with the certified checks on
# KeyData::SketchWorst (sketch errors aligned with the query: the bounds near their worst case).
PACK=.gpu/g.txz; source scripts/device-call.sh
ph gpu-check-small 300 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E "SketchWorst" $W/gpu-check-small.log | head -20
grep -cE " PASS" $W/gpu-check-small.log; grep -E "FAIL" $W/gpu-check-small.log | head -5; tail -2 $W/gpu-check-small.log
