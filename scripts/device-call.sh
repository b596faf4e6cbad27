# Sourced by a device call's script (results/<date>-*/<n>-*/call.sh): the preamble every
# recorded call repeated.
#
#   PACK=.gpu/x.txz; source scripts/device-call.sh
#   ph NAME LIMIT_S CMD...     # runs CMD, stdout+stderr to $W/NAME.log, killed past LIMIT_S
#   snap                       # packs $W into $OUT/r.tgz now (what a call cut short brings back)
#   ph_build B NAME LIMIT_S CMD... # `ph` with ENTKV_COMMIT set to build folder B's commit, so
#                              # that the records an A/B's builds write name their own commit
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
