# Device call at 53ddeaf (the gated stream's T scaled with the chunk): the GPU suite; then, on an
# H200 only, `gqa` and `wide` autotuned and benched beside torch SDPA (scripts/bench-workloads.sh)
# for docs/benchmarks.md (`paper`'s PTX is unchanged since df04a1e, so its rows stand).
PACK=.gpu/one.txz; source scripts/device-call.sh
ph gpu-check-small 150 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
tar czf "$OUT/r.tgz" -C "$W" .
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
if grep -q H200 $W/nvidia-smi.txt; then
  BIN=.gpu/s ph workloads 420 scripts/bench-workloads.sh $W/bench gqa wide
  cat $W/bench/phases.txt
fi
