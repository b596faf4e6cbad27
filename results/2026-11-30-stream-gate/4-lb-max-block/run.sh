mkdir -p /tmp/r /tmp/g && xz -dc .gpu/x.txz | tar xf - -C .gpu
export CUDA_CACHE_PATH=/tmp/jit CUDA_CACHE_MAXSIZE=4294967296
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/r/nvidia-smi.txt
.gpu/entkv-old bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/B-old > /tmp/r/b-old.log 2>&1
.gpu/entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/B-new > /tmp/r/b-new.log 2>&1
for i in 1 2; do for v in old new; do for w in paper peaked; do
  E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  timeout 60 $E bench --bundle /tmp/B-$v --no-defaults --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --out /tmp/r/$v-$w-$i.json >> /tmp/r/$v.log 2>&1
done; done; done
timeout 150 .gpu/entkv gpu-check --small-only --out /tmp/r/gpucheck > /tmp/r/gpucheck.log 2>&1
grep -c PASS /tmp/r/gpucheck.log; grep FAIL /tmp/r/gpucheck.log | head
timeout 120 bash scripts/engine-gpu.sh /tmp/r/engine > /tmp/r/engine.log 2>&1; tail -15 /tmp/r/engine.log
tar czf $OUT/r.tgz -C /tmp/r .
