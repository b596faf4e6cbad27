# Device call: the 4-bit certified pass with exact rescoring of the tokens that clear the
# running bound (WIP commit 3ca678c) against the 8-bit pass (the gated 4-bit pass of b833c17 did
# not fit the carry limit beside it; results/2026-11-30-stream-gate has it), `entkv bench-paper --method certified` (untuned, tiles given), 1M and 128k.
set -u
W=/tmp/r; mkdir -p $W .gpu/s && xz -dc .gpu/r.txz | tar xf - -C .gpu/s
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/jc ENTKV_COMMIT=$(cat .gpu/s/commit)
fin() { cat $W/phases.txt; tar czf $OUT/r.tgz -C $W .; }
trap fin EXIT
{ echo "commit $ENTKV_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $W/nvidia-smi.txt
ph() { local n=$1; local lim=$2; shift 2; local t=$SECONDS; timeout -k 5 $lim "$@" > $W/$n.log 2>&1; echo "$n: $((SECONDS-t)) s exit $?" >> $W/phases.txt; }
T8="--tile 128,1,4,1,4,3,256,2048 --tile 128,1,4,2,4,3,256,2048"
T4="--tile 128,1,4,2,4,3,256,2048 --tile 128,1,4,2,3,3,256,2048 --tile 128,1,4,1,3,3,256,2048 --tile 128,1,2,2,4,3,256,2048 --tile 256,1,4,2,2,3,256,2048 --tile 128,1,8,2,2,3,256,2048"
for n in 1048576 131072; do
  ph s8-$n 120 .gpu/s/entkv bench-paper --method certified --n $n --sketch-bits 8 $T8
  ph s4-$n 200 .gpu/s/entkv bench-paper --method certified --n $n --sketch-bits 4 $T4
done
tail -n 12 $W/*.log
