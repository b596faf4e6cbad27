#!/usr/bin/env bash
# BENCH.md's `gqa` and `wide` workloads on a GPU, for docs/benchmarks.md beside the `paper` run
# of scripts/bench-gpu.sh: each autotuned (`--no-cache`; tune-log-<w>.jsonl.xz and
# bundle-manifest-<w>-tuned.json kept), its bundle benched at 32k, 128k and 1M, every method
# checked against float64 on sampled heads (bench-<w>-tuned.json), and torch SDPA on the same
# shapes (sdpa-<w>.json). Each phase is killed past its limit (≤ 390 s in all) and its wall time
# goes to OUT/phases.txt. The binaries come from $BIN (default .gpu; scripts/build-gpu-bins.sh).
#
#   scripts/bench-workloads.sh OUT [WORKLOAD...]     (default: gqa wide)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/bench-workloads.sh OUT [gqa] [wide]}
shift
WORKLOADS=(gqa wide)
[ $# -eq 0 ] || WORKLOADS=("$@")
BIN=${BIN:-.gpu}
mkdir -p "$OUT"
status=0
source scripts/phase.sh
# phase NAME LIMIT CMD...: CMD's output to OUT/NAME.log (scripts/phase.sh).
phase() {
  local name=$1
  shift
  run_phase "$OUT" "$name.log" "$name" "$@" || status=1
}
for w in "${WORKLOADS[@]}"; do
  case $w in gqa | wide) ;; *) echo "unknown workload $w (gqa, wide)" >&2; exit 2 ;; esac
  # A JIT cache of each workload's own: the tuner's worker processes fill it.
  export CUDA_CACHE_PATH=/tmp/jc-$w CUDA_CACHE_MAXSIZE=4294967296
  if [ $w = gqa ]; then
    shape=(--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
    sdpa=(--batch 8 --heads 24 --kv-heads 12 --head-dim 32)
    # Took 66 s on the H200 at ab58877; 43541a6 adds the `_seed_pw` points to the pruned rows.
    tune=(--time-budget 95 --no-cache)
    limit=115
  else
    shape=(--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4)
    sdpa=(--batch 4 --heads 32 --kv-heads 8 --head-dim 128)
    tune=(--contexts 32k,128k,1M --time-budget 100 --no-cache)
    limit=125
  fi
  bundle=$(mktemp -d)/bundle-$w
  phase autotune-$w $limit "$BIN/autotune" --alpha 1.5 "${shape[@]}" "${tune[@]}" --out "$bundle"
  cp "$bundle/manifest.json" "$OUT/bundle-manifest-$w-tuned.json"
  xz -9c "$bundle/tune-log.jsonl" >"$OUT/tune-log-$w.jsonl.xz"
  phase bench-$w 50 "$BIN/entkv" bench --bundle "$bundle" --no-defaults --workload $w \
    --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned \
    --out "$OUT/bench-$w-tuned.json"
  phase sdpa-$w 30 python3 scripts/sdpa_baseline.py --workload $w "${sdpa[@]}" \
    --n 32768 131072 1048576 --out "$OUT/sdpa-$w.json"
done
exit $status
