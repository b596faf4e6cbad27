#!/usr/bin/env bash
# Everything CI checks: formatting, lints, rustdoc warnings, and every test (CPU interpreter
# runs of all kernels against float64 references; every emitted PTX assembled by ptxas with 0
# spills). GPU tests skip with a printed reason when there is no GPU; run scripts/gpu-check.sh
# on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# A worktree sharing target/ must not leave its crates to be tested here.
source scripts/own-target.sh
export ENTKV_REQUIRE_PTXAS=1
cargo fmt --all --check
# docs/benchmarks.md and docs/quality.md's tables are generated from recorded runs: they must be
# what those give.
python3 scripts/bench_report.py --check docs/benchmarks.md
python3 scripts/quality_plot.py --check results/2026-11-29-quality results/2026-11-29-quality/gqa
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test --workspace
