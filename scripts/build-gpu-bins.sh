#!/usr/bin/env bash
# Build the binaries scripts/gpu-check.sh runs into .gpu/ (ignored by git), stripped, so they can
# be carried to a GPU machine that has no Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
source scripts/own-target.sh
cargo build --release -p entkv-autotune --bins
cp target/release/entkv target/release/autotune .gpu/
# Path of a test binary built by `cargo test --no-run` (package $1, test target $2).
test_bin() {
  cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]==sys.argv[1] and m.get("executable"): print(m["executable"])' "$2"
}
cp "$(test_bin entkv-runtime gpu)" .gpu/runtime-gpu-tests
cp "$(test_bin entkv-tests engine_gpu)" .gpu/engine-gpu-tests
if [ -d capi ]; then
  cargo build --release -p entkv-capi
  cp target/release/libentkv.so .gpu/
fi
strip .gpu/* 2>/dev/null || true
# The default bundle the engine checks use (scripts/engine-gpu.sh).
rm -rf .gpu/bundle
.gpu/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 1,4 --out .gpu/bundle
ls -la .gpu
