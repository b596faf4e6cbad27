#!/usr/bin/env bash
# The recorded runs behind docs/quality.md: `entkv quality` at 16k and 32k tokens, d = 32 and 64,
# α = 1.5, P = 16, f16, batch 2 × 16 heads, on iid normal and on peaked keys (BENCH.md), every
# selector's kernels on the GPU. One CSV (and the printed table) per run under OUT_DIR.
#
#   scripts/quality-gpu.sh [OUT_DIR]
#
# ENTKV: the entkv binary (default .gpu/entkv; build it with
#   cargo build --release -p entkv-autotune --bin entkv).
# BACKEND: gpu (default) or interp (the same sweep in the CPU interpreter, for a cross-check).
# NS, DIMS, DATA: override the lengths, head dims and key data swept; QHEADS: query heads (default
# 16, one per KV head; 32 gives GQA groups of 2, files named `quality-<data>-g2-…`).
# ENTKV_COMMIT: recorded in every row (default: `git describe --always --dirty` when there is a .git).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-out/quality}}
ENTKV=${ENTKV:-.gpu/entkv}
BACKEND=${BACKEND:-gpu}
NS=${NS:-"16384 32768"}
DIMS=${DIMS:-"32 64"}
DATA=${DATA:-"normal peaked"}
QHEADS=${QHEADS:-16}
tag=""
if [ "$QHEADS" != 16 ]; then tag="-g$((QHEADS / 16))"; fi
export ENTKV_COMMIT=${ENTKV_COMMIT:-$(git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)}
mkdir -p "$OUT"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"
fi
for data in $DATA; do
  for d in $DIMS; do
    for n in $NS; do
      name="quality-$data$tag-d$d-n$n"
      echo "== $name"
      "$ENTKV" quality --backend "$BACKEND" --data "$data" --head-dim "$d" --n "$n" \
        --batch 2 --q-heads "$QHEADS" --kv-heads 16 --alpha 1.5 --page-size 16 --kv-dtype f16 --seed 1 \
        --coverage 5,10,15,20,30,40,50 --csv "$OUT/$name.csv" | tee "$OUT/$name.txt"
    done
  done
done
