# Device call: same-binary A/B of the finish passes' threshold solve. entkv is HEAD (the warp
# solve) plus a throwaway switch, ENTKV_AB_BLOCK_SOLVE, that makes the generator emit the block
# solve as before (not committed). Untuned bundles, `paper` and `peaked`.
set -u
W=/tmp/r; mkdir -p $W .gpu/s && xz -dc .gpu/r.txz | tar xf - -C .gpu/s
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/jc ENTKV_COMMIT=$(cat .gpu/s/commit)
fin() { cat $W/phases.txt; tar czf $OUT/r.tgz -C $W .; }
trap fin EXIT
{ echo "commit $ENTKV_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $W/nvidia-smi.txt
ph() { local n=$1; local lim=$2; shift 2; local t=$SECONDS; timeout -k 5 $lim "$@" > $W/$n.log 2>&1; echo "$n: $((SECONDS-t)) s exit $?" >> $W/phases.txt; }
ph bundle-warp 100 .gpu/s/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/bw
ENTKV_AB_BLOCK_SOLVE=1 ph bundle-block 100 .gpu/s/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/bb
M=dense,topk,gaussian,certified,certified-pruned
for r in 1 2; do
  ph paper-block-$r 150 .gpu/s/entkv bench --bundle /tmp/bb --no-defaults --workload paper --n 32768,131072 --methods $M --out $W/paper-block-$r.json
  ph paper-warp-$r 150 .gpu/s/entkv bench --bundle /tmp/bw --no-defaults --workload paper --n 32768,131072 --methods $M --out $W/paper-warp-$r.json
done
ph peaked-block 100 .gpu/s/entkv bench --bundle /tmp/bb --no-defaults --workload peaked --n 32768,131072 --methods certified,certified-pruned,gaussian --out $W/peaked-block.json
ph peaked-warp 100 .gpu/s/entkv bench --bundle /tmp/bw --no-defaults --workload peaked --n 32768,131072 --methods certified,certified-pruned,gaussian --out $W/peaked-warp.json
ph paper1m-block 150 .gpu/s/entkv bench --bundle /tmp/bb --no-defaults --workload paper --n 1048576 --methods certified,topk --out $W/paper1m-block.json
ph paper1m-warp 150 .gpu/s/entkv bench --bundle /tmp/bw --no-defaults --workload paper --n 1048576 --methods certified,topk --out $W/paper1m-warp.json
for f in $W/*.log; do echo "== $f"; grep -E "^(paper|peaked) " $f; grep -c "ok (" $f; done
