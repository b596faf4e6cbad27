#!/usr/bin/env bash
# Build the binaries scripts/gpu-check.sh runs into .gpu/ (ignored by git), stripped, so they can
# be carried to a GPU machine that has no Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
cargo build --release -p entkv-autotune --bins
cp target/release/entkv target/release/autotune .gpu/
t=$(cargo test --release -p entkv-runtime --test gpu --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="gpu" and m.get("executable"): print(m["executable"])')
cp "$t" .gpu/runtime-gpu-tests
strip .gpu/* 2>/dev/null || true
ls -la .gpu
