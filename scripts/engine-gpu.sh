#!/usr/bin/env bash
# The runtime/bundle acceptance run on a GPU machine: a bundle made by `entkv bundle create`, the
# engine test (every method against the reference, CUDA-graph replay after the block table
# changes) and the C ABI + Python/torch example.
#
#   scripts/engine-gpu.sh [OUT_DIR]      (binaries from .gpu/, see scripts/build-gpu-bins.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-out/engine-gpu}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"

# The bundle: made here by `entkv bundle create` when the binary is present, else the one
# scripts/build-gpu-bins.sh made into .gpu/bundle with the same binary (the LLVM-linked `entkv`
# and the test binary together exceed what can be carried to a GPU machine).
BUNDLE=.gpu/bundle
if [ -x .gpu/entkv ]; then
  echo "== entkv bundle create / verify"
  BUNDLE="$OUT/bundle"
  rm -rf "$BUNDLE"
  ( time .gpu/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 1,4 --out "$BUNDLE" ) \
    >"$OUT/bundle-create.log" 2>&1 || status=1
  .gpu/entkv bundle verify "$BUNDLE" 2>&1 | tee -a "$OUT/bundle-create.log" || status=1
fi
cp "$BUNDLE/manifest.json" "$OUT/bundle-manifest.json"

echo "== engine GPU test"
ENTKV_BUNDLE="$BUNDLE" .gpu/engine-gpu-tests --nocapture --test-threads=1 >"$OUT/engine-gpu.log" 2>&1 || status=1
grep -E "^(PASS|FAIL)|failures|test result|panicked" "$OUT/engine-gpu.log" | tail -80

if [ -f .gpu/libentkv.so ]; then
  echo "== C ABI + Python (ctypes, torch)"
  python3 examples/python/entkv_decode.py --lib .gpu/libentkv.so --bundle "$BUNDLE" \
    >"$OUT/python-example.log" 2>&1 || status=1
  tail -30 "$OUT/python-example.log"
  echo "== C ABI + Python with the device-side id check"
  python3 examples/python/entkv_decode.py --lib .gpu/libentkv.so --bundle "$BUNDLE" \
    --check-device-ids >"$OUT/python-example-checked.log" 2>&1 || status=1
  tail -20 "$OUT/python-example-checked.log"
fi
rm -rf "$OUT/bundle"   # the manifest is kept beside the logs
exit $status
