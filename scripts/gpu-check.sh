#!/usr/bin/env bash
# Run every GPU test and benchmark of entkv on a machine with an NVIDIA GPU, print a table.
#
#   scripts/gpu-check.sh [OUT_DIR]
#
# Binaries come from .gpu/ when present (built elsewhere by scripts/build-gpu-bins.sh, for GPU
# machines without a Rust toolchain), otherwise they are built here with cargo.
# Writes OUT_DIR/{gpu-check.log,report.json,sdpa.json,runtime-gpu.log,sanitizer-*.log}.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-out/gpu-check}}
mkdir -p "$OUT"
if [ -x .gpu/entkv ]; then
  BIN=.gpu
else
  cargo build --release -p entkv-autotune --bins || exit 1
  BIN=target/release
fi
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"

echo "== runtime GPU tests"
if [ -x "$BIN/runtime-gpu-tests" ]; then
  "$BIN/runtime-gpu-tests" --nocapture --test-threads=1 >"$OUT/runtime-gpu.log" 2>&1 || status=1
else
  cargo test --release -p entkv-runtime --test gpu -- --nocapture --test-threads=1 >"$OUT/runtime-gpu.log" 2>&1 || status=1
fi
grep -E "^(PASS|FAIL|SUMMARY)|test result" "$OUT/runtime-gpu.log" | tail -5

echo "== entkv gpu-check"
"$BIN/entkv" gpu-check --out "$OUT" 2>&1 | tee "$OUT/gpu-check.log" || status=1

echo "== torch SDPA baseline (same shapes)"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 scripts/sdpa_baseline.py --out "$OUT/sdpa.json" 2>&1 | tee "$OUT/sdpa.log" || status=1
else
  echo "skipping SDPA: no torch with CUDA" | tee "$OUT/sdpa.log"
fi

if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool (small cases)"
    # API return codes are not reported: the runtime probes cuFuncGetParamInfo past the last
    # parameter on purpose (that is how the parameter count is found).
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 "$BIN/entkv" gpu-check --small-only \
      >"$OUT/sanitizer-$tool.log" 2>&1 || { status=1; echo "compute-sanitizer $tool: FAILED"; }
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" "$OUT/sanitizer-$tool.log" | tail -3
  done
else
  echo "compute-sanitizer not found: skipping memcheck/racecheck"
fi

exit $status
