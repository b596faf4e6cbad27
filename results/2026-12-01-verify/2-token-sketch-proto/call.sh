# Device call: (a) the per-token 4-bit sketch prototype (proto.cu, CUDA C++, not project code);
# (b) compute-sanitizer memcheck and racecheck over `entkv gpu-check --small-only` at b833c17
# (last run 2026-11-29 at 2f5639e; most kernels changed since).
set -u
W=/tmp/r; mkdir -p $W .gpu/s && xz -dc .gpu/v.txz | tar xf - -C .gpu/s
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/jc ENTKV_COMMIT=$(cat .gpu/s/commit)
fin() { cat $W/phases.txt; tar czf $OUT/r.tgz -C $W .; }
trap fin EXIT
{ echo "commit $ENTKV_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $W/nvidia-smi.txt
ph() { local n=$1; local lim=$2; shift 2; local t=$SECONDS; timeout -k 5 $lim "$@" > $W/$n.log 2>&1; echo "$n: $((SECONDS-t)) s exit $?" >> $W/phases.txt; }
P=results/2026-12-01-verify/2-token-sketch-proto
ph nvcc 90 nvcc -O3 -arch=sm_90 -Xptxas -v -o /tmp/proto $P/proto.cu
ph proto 90 /tmp/proto
cat $W/proto.log
for tool in memcheck racecheck; do
  ph sanitizer-$tool 210 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 .gpu/s/entkv gpu-check --small-only
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" $W/sanitizer-$tool.log | tail -5
done
