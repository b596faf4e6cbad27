# Device call with scripts/pack-gpu.sh's pack (one `entkv`, `autotune` a link to it; kernels as
# bfae77f). On an H200: `gqa` and `wide` autotuned and benched beside torch SDPA
# (scripts/bench-workloads.sh) for docs/benchmarks.md. On any other GPU: the link tunes one
# family (`select_topk`, 32k, its JIT workers started from the link's target) and the bundle
# verifies, to show the single-binary pack works.
PACK=.gpu/one.txz; source scripts/device-call.sh
if grep -q H200 $W/nvidia-smi.txt; then
  BIN=.gpu/s ph workloads 300 scripts/bench-workloads.sh $W gqa wide
  exit 0
fi
ph tune-link 90 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kernels select_topk --contexts 32k --no-cache --out /tmp/b-link
ph verify-link 60 .gpu/s/entkv verify --bundle /tmp/b-link
grep -E "JIT workers|error" $W/tune-link.log | head -3
