# Device call: the gated stream's threshold T, 32 for every group (h = dccb66f) against
# T = max(32, chunk_len·G/16) (sc, uncommitted: `gqa`'s dense tile 192, its sparse tile 128;
# `wide` stays 32, identical PTX), after 1-ab found T = 128 up to 2 points better than 32 on
# `gqa` and worse on `wide`. `gqa` dense, top-k and Gaussian at 32k / 128k / 1M on each build's
# untuned bundle, h sc h sc.
PACK=.gpu/ab.txz; source scripts/device-call.sh
for v in h sc; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out /tmp/gqa-$v
done
i=0
for v in h sc h sc; do
  i=$((i+1))
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph gqa-$i-$v 40 .gpu/s/$v/entkv bench --bundle /tmp/gqa-$v --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian --out $W/bench-gqa-$i-$v.json
done
for f in $W/gqa-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z0-9()-]+ +step " $f | awk '{for(i=4;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) {split($i,a,"/"); printf "%s %s %s\n", $1, $2, a[1]; break}}'; done
