mkdir -p /tmp/r /tmp/g && xz -dc .gpu/x.txz | tar xf - -C /tmp/g
export CUDA_CACHE_PATH=/tmp/jit CUDA_CACHE_MAXSIZE=4294967296
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/r/nvidia-smi.txt
T1=128,1,4,1,4,3,256,2048
T2=128,1,4,2,4,3,256,2048
for v in old g0 g2; do
  for n in 1048576 131072; do
    timeout 60 /tmp/g/entkv-$v bench-paper --method certified --n $n --sketch-bits 4 --tile $T1 --tile $T2 > /tmp/r/$v-s4-$n.txt 2>&1
  done
done
for v in old g0; do timeout 40 /tmp/g/entkv-$v bench-paper --method certified --n 1048576 --sketch-bits 8 --tile $T1 --tile $T2 > /tmp/r/$v-s8-1048576.txt 2>&1; done
for v in old g0; do /tmp/g/entkv-$v bundle create --alpha 1.5 --head-dim 32 --page-size 16 --sketch-bits 4 --out /tmp/B4-$v > /tmp/r/b4-$v.log 2>&1; done
for v in old g0; do timeout 60 /tmp/g/entkv-$v bench --bundle /tmp/B4-$v --no-defaults --n 32768,131072,1048576 --methods certified,certified-pruned --out /tmp/r/s4-$v.json >> /tmp/r/s4-$v.log 2>&1; done
timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:select_certified --launch-skip 2 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --csv /tmp/g/entkv-g0 bench-paper --method certified --n 1048576 --sketch-bits 4 --tile $T1 --iters 1 > /tmp/r/ncu-g0-s4.csv 2>&1
timeout 150 /tmp/g/entkv-g0 gpu-check --small-only --out /tmp/r/gpucheck > /tmp/r/gpucheck.log 2>&1
grep -c PASS /tmp/r/gpucheck.log; grep FAIL /tmp/r/gpucheck.log | head
tar czf $OUT/r.tgz -C /tmp/r .
