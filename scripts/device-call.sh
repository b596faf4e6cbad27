# Sourced by a device call's script (results/<date>-*/<n>-*/call.sh): the preamble every
# recorded call repeated.
#
#   PACK=.gpu/x.txz; source scripts/device-call.sh
#   ph NAME LIMIT_S CMD...     # runs CMD, stdout+stderr to $W/NAME.log, killed past LIMIT_S
#   snap                       # packs $W into $OUT/r.tgz now (what a call cut short brings back)
#   ph_build B NAME LIMIT_S CMD... # `ph` with ENTKV_COMMIT set to build folder B's commit, so
#                              # that the records an A/B's builds write name their own commit
#   docs_run [paper|workloads|all] # the docs/benchmarks.md run on an H200 (below)
#
# It unpacks $PACK (an xz tar from scripts/pack-gpu.sh: `entkv`, `autotune` a link to it and a
# `commit` file, or one folder a build, each with its `commit`) into .gpu/s, points the
# driver's JIT cache at /tmp/jc (4 GiB), records the commit(s) and the GPU in
# $W/nvidia-smi.txt, and on exit prints $W/phases.txt and packs $W into $OUT/r.tgz (the one
# file a call brings back). BUILD=NAME picks folder NAME of a pack of several builds as the one
# build at .gpu/s (so one carried pack can serve calls that choose their build on the device).
set -u
W=${W:-/tmp/r}
mkdir -p "$W" .gpu/s
xz -dc "$PACK" | tar xf - -C .gpu/s
if [ -n "${BUILD:-}" ]; then
  [ -f ".gpu/s/$BUILD/commit" ] || { echo "no build $BUILD in $PACK" >&2; exit 1; }
  cp -a ".gpu/s/$BUILD/." .gpu/s/
fi
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-/tmp/jc}
# A pack of one build has .gpu/s/commit; a pack of several (an A/B) has one a build folder.
if [ -f .gpu/s/commit ]; then
  export ENTKV_COMMIT=$(cat .gpu/s/commit)
else
  export ENTKV_COMMIT=$(for f in .gpu/s/*/commit; do printf '%s:%s ' "$(basename "$(dirname "$f")")" "$(cat "$f")"; done)
fi
snap() { tar czf "$OUT/r.tgz" -C "$W" .; }
device_call_finish() {
  cat "$W/phases.txt" 2>/dev/null
  snap
}
trap device_call_finish EXIT
{
  echo "commit $ENTKV_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} >"$W/nvidia-smi.txt"
source "$(dirname "${BASH_SOURCE[0]}")/phase.sh"
ph() {
  local name=$1
  shift
  run_phase "$W" "$name.log" "$name" "$@"
}
ph_build() {
  local build=$1
  shift
  [ -f ".gpu/s/$build/commit" ] || { echo "no build $build in $PACK" >&2; return 1; }
  ENTKV_COMMIT=$(cat ".gpu/s/$build/commit") ph "$@"
}
# docs_run [paper|workloads|gqa|wide|all]: the run behind docs/benchmarks.md, on an H200 only
# (another card is recorded in $W/nvidia-smi.txt and nothing runs). `paper`: scripts/bench-gpu.sh
# (`paper` autotuned, then `paper`, `peaked`, the sweep and torch SDPA; ~180 s); `workloads`:
# `gqa` and `wide` tuned and benched beside SDPA (scripts/bench-workloads.sh), then the GPU
# suite (~390 s); `gqa` or `wide`: that workload alone (~150 s); `all`: everything. Each part
# keeps its SDPA in its own call.
docs_run() {
  local part=${1:-all}
  case $part in
    paper | workloads | gqa | wide | all) ;;
    *)
      echo "docs_run: unknown part '$part' (paper, workloads, gqa, wide or all)" >&2
      return 1
      ;;
  esac
  if ! grep -q H200 "$W/nvidia-smi.txt"; then
    echo "not an H200: $(cat "$W/nvidia-smi.txt")"
    return 0
  fi
  cp -P .gpu/s/entkv .gpu/s/autotune .gpu/
  case $part in
    all | paper)
      ph bench 200 bash scripts/bench-gpu.sh "$W/bench"
      snap
      ;;
  esac
  local w
  for w in gqa:150 wide:160; do
    case $part in
      all | workloads | "${w%%:*}")
        ph "workloads-${w%%:*}" "${w##*:}" bash scripts/bench-workloads.sh "$W" "${w%%:*}"
        snap
        ;;
    esac
  done
  case $part in all | workloads) ;; *) return 0 ;; esac
  ph gpu-check-small 80 .gpu/entkv gpu-check --small-only --out "$W/gpu-check"
  grep -E '^gpu-check:' "$W/gpu-check-small.log"
  grep -E " FAIL " "$W/gpu-check-small.log" | head -8
}
