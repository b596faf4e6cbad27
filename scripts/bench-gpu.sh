#!/usr/bin/env bash
# The benchmark run behind docs/benchmarks.md (../shared/BENCH.md protocol), on an H200 with
# the `entkv` and `autotune` binaries of .gpu/ (scripts/build-gpu-bins.sh; carry them):
#   1. the `paper` bundle as a user makes it: `autotune --alpha 1.5 --head-dim 32` (default
#      buckets, ~100–150 s); TUNE=0 makes the untuned one with `entkv bundle create` instead, and
#      $BUNDLE names one to time as it is;
#   2. `entkv bench --no-defaults` of dense, top-k, Gaussian, certified-exact (plain and after
#      page pruning) and auto, then of
#      softmax top-k, at 32k, 128k and 1M tokens (50 timed steps each, 3 heads checked against
#      float64);
#   3. the same on the `peaked` workload (the paper shapes and bundle on page-coherent keys
#      generated on the device, entkv_kernels::peaked): bench-peaked*.json;
#   4. the paper workload over the sweep 4k…1M (`--sweep`, 20 timed steps, 1 head checked) for
#      the plot;
#   5. torch SDPA on the sweep's lengths (they include 32k, 128k, 1M; 50 timed runs each), on
#      `paper` only: SDPA reads every key whatever they are, so its time does not depend on the
#      data, and scripts/bench_report.py reuses these rows for `peaked`'s vs-SDPA column.
# The softmax baseline runs in processes of its own so that a failure there cannot cost the
# entmax records (each process writes its JSON at the end). Each phase is killed past its limit
# (230 s the tuning, 65 s an entmax bench, 70 s the entmax sweep, 30 s each softmax run (~3 s),
# 60 s SDPA: ≤ 580 s in the worst case, one device call); every phase's wall time goes to
# phases.txt.
#
# A device call brings back only a few files, so everything this writes is packed into ONE file,
# OUT/bench.tgz; extract it into results/<date>-bench/ and run
#   python3 scripts/bench_report.py results/<date>-bench
#
#   ENTKV_COMMIT=<commit> scripts/bench-gpu.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-out/bench-gpu}}
mkdir -p "$OUT"
WORK=$(mktemp -d)
BIN=${BIN:-.gpu}
ENTMAX=dense,topk,gaussian,certified,certified-pruned,auto
SWEEP=(4096 8192 16384 32768 65536 131072 262144 524288 1048576)
export ENTKV_COMMIT=${ENTKV_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# One JIT cache for both bench processes: the second loads the bundle's modules from it.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$(mktemp -d)} CUDA_CACHE_MAXSIZE=4294967296
status=0
source scripts/phase.sh
# phase LIMIT NAME LOG CMD...: CMD's output to WORK/LOG (scripts/phase.sh), then its wall time
# and the log's tail printed.
phase() {
  local limit=$1 name=$2 log=$3
  shift 3
  echo "== $name"
  run_phase "$WORK" "$log" "$name" "$limit" "$@" || status=1
  tail -n 1 "$WORK/phases.txt"
  tail -n 25 "$WORK/$log"
}

chmod +x "$BIN/entkv" 2>/dev/null
if [ ! -x "$BIN/entkv" ]; then
  echo "no $BIN/entkv: build it (scripts/build-gpu-bins.sh, or cargo build --release -p entkv-autotune --bin entkv and copy it there) and carry it" >&2
  exit 1
fi
{
  echo "commit $ENTKV_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} | tee "$WORK/nvidia-smi.txt"

if [ -z "${BUNDLE:-}" ]; then
  BUNDLE=$(mktemp -d)/bundle-paper
  if [ "${TUNE:-1}" = 1 ]; then
    # What a user gets from the README's main command: the bundle tuned on this GPU.
    phase 230 "autotune --alpha 1.5 --head-dim 32 (default buckets)" autotune.log \
      "$BIN/autotune" --alpha 1.5 --head-dim 32 --out "$BUNDLE"
  else
    phase 60 "bundle create (paper, untuned)" bundle-create.log \
      "$BIN/entkv" bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 1 --kv-dtype f16 --out "$BUNDLE"
  fi
fi
[ -f "$BUNDLE/manifest.json" ] && cp "$BUNDLE/manifest.json" "$WORK/bundle-manifest.json"
# The tuning run's record of every candidate (status, times, registers, codegen and JIT ms).
[ -f "$BUNDLE/tune-log.jsonl" ] && cp "$BUNDLE/tune-log.jsonl" "$WORK/tune-log.jsonl"

for w in paper peaked; do
  for m in entmax softmax; do
    methods=$ENTMAX suffix=
    [ $m = softmax ] && methods=softmax-topk suffix=-softmax
    limit=65
    [ $m = softmax ] && limit=30
    phase $limit "entkv bench $methods ($w: 32k, 128k, 1M)" "bench-$w$suffix.log" \
      "$BIN/entkv" bench --bundle "$BUNDLE" --no-defaults --workload $w --n 32768,131072,1048576 \
      --methods "$methods" --out "$WORK/bench-$w$suffix.json"
  done
done
for m in entmax softmax; do
  methods=$ENTMAX suffix=
  [ $m = softmax ] && methods=softmax-topk suffix=-softmax
  limit=70
  [ $m = softmax ] && limit=30
  phase $limit "entkv bench $methods (paper sweep 4k…1M)" "bench-sweep$suffix.log" \
    "$BIN/entkv" bench --bundle "$BUNDLE" --no-defaults --workload paper --sweep \
    --methods "$methods" --iters 20 --warmup 5 --check-samples 1 --out "$WORK/bench-sweep$suffix.json"
done

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  phase 60 "torch SDPA (sweep lengths, paper)" sdpa.log \
    python3 scripts/sdpa_baseline.py --workload paper --n "${SWEEP[@]}" --out "$WORK/sdpa.json"
else
  echo "skipping SDPA: no torch with CUDA" | tee "$WORK/sdpa.log"
  status=1
fi

echo "total: $SECONDS s exit $status" | tee -a "$WORK/phases.txt"
tar czf "$OUT/bench.tgz" -C "$WORK" .
tar tzvf "$OUT/bench.tgz"
exit $status
