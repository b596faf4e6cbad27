mkdir -p /tmp/r /tmp/g && xz -dc .gpu/x.txz | tar xf - -C /tmp/g
export CUDA_CACHE_PATH=/tmp/jit CUDA_CACHE_MAXSIZE=4294967296
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/r/nvidia-smi.txt
T1=128,1,4,1,4,3,256,2048
T2=128,1,8,1,3,3,256,2048
for v in old new; do
  for n in 1048576 131072; do
    timeout 60 /tmp/g/entkv-$v bench-paper --method certified --n $n --sketch-bits 4 --tile $T1 --tile $T2 > /tmp/r/$v-s4-$n.txt 2>&1
    timeout 40 /tmp/g/entkv-$v bench-paper --method certified --n $n --sketch-bits 8 --tile $T1 > /tmp/r/$v-s8-$n.txt 2>&1
  done
done
for v in old new; do /tmp/g/entkv-$v bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/B-$v > /tmp/r/b-$v.log 2>&1; done
for v in old new; do timeout 60 /tmp/g/entkv-$v bench --bundle /tmp/B-$v --no-defaults --n 131072,1048576 --methods dense,certified,certified-pruned --out /tmp/r/$v.json > /tmp/r/$v.log 2>&1; done
tar czf $OUT/r.tgz -C /tmp/r .
