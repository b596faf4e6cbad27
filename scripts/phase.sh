# Sourced by the device scripts (device-call.sh, bench-gpu.sh, bench-workloads.sh): the one way
# they run a timed phase.
#
#   run_phase DIR LOG NAME LIMIT_S CMD...
#
# Runs CMD with stdout+stderr to DIR/LOG, killed past LIMIT_S (so a hang cannot keep the results
# from being packed), appends "NAME: <wall> s exit <rc>" to DIR/phases.txt and returns CMD's
# exit status.
run_phase() {
  local dir=$1 log=$2 name=$3 limit=$4 t=$SECONDS rc
  shift 4
  timeout -k 5 "$limit" "$@" >"$dir/$log" 2>&1
  rc=$?
  echo "$name: $((SECONDS - t)) s exit $rc" >>"$dir/phases.txt"
  return $rc
}
