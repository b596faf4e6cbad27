# Device call at f706c20 (kernels as HEAD): on an H200 the GPU suite, then `gqa` and `wide`
# autotuned and benched beside SDPA (scripts/bench-workloads.sh) for docs/benchmarks.md's
# `gqa` and `wide` sections (`paper`'s kernels have not changed since the 2b763b3 run there);
# on any other GPU nothing. (4-bench, the whole run, found no H200 in four tries.)
PACK=.gpu/x.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
ph workloads 330 bash scripts/bench-workloads.sh $W
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-gqa.log $W/bench-wide.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -40; grep -h median $W/sdpa-*.log 2>/dev/null
