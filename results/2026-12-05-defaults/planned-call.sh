# Planned device call (not run: the session's device time ran out): 4-rank-ab's first part on an H200 (the pack of 4-rank-ab: `o` = 2b763b3, the
# seed's rank cap 6 always; `s` = 7358b76, 4 below 4096 samples): the untuned `wide` bundle's
# certified step at 32k, 128k and 1M, o s o s.
PACK=.gpu/x.txz; source scripts/device-call.sh
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
for v in o s; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out /tmp/wide-$v
done
i=0
for v in o s o s; do
  i=$((i+1)); export CUDA_CACHE_PATH=/tmp/jc-$v
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) ph wide-$i-$v 60 .gpu/s/$v/entkv bench --bundle /tmp/wide-$v --no-defaults --workload wide --n 32768,131072,1048576 --methods certified --out $W/bench-wide-$i-$v.json
done
for f in $W/wide-*.log; do echo "== $f"; grep -E " step " $f; done
