mkdir -p /tmp/r && xz -dc .gpu/x.txz | tar xf - -C .gpu
export CUDA_CACHE_PATH=/tmp/jit CUDA_CACHE_MAXSIZE=4294967296
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/r/nvidia-smi.txt
for v in old new; do E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out /tmp/b-$v > /tmp/r/bundle-$v.log 2>&1; done
b() { E=.gpu/entkv; [ $1 = old ] && E=.gpu/entkv-old; timeout 70 $E bench --bundle /tmp/b-$1 --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian --out /tmp/r/$1-$2.json > /tmp/r/$1-$2.log 2>&1; }
b old 1; b new 1
timeout 110 .gpu/entkv gpu-check --small-only --out /tmp/r/gpucheck > /tmp/r/gpucheck.log 2>&1
b new 2; b old 2
tar czf $OUT/r.tgz -C /tmp/r .
