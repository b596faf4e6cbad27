# Device call: every split of a head shares its threshold bound through `head_bound` (global
# atomics, reset by a `certified_init` kernel each step). One binary (2f054aa + wip.diff);
# ENTKV_EXP_NOSHARE=1 generates the pass without the sharing (the init still runs) for the A/B
# at `paper`'s tuned tiles (bench-paper, two alternating rounds). Then at the sharing: the
# runtime GPU test, the GPU suite (--small-only), the engine/C ABI checks, and `wide` certified
# tuned and benched (was 0.268 / 0.863 / 3.845 ms in 1-checks-bench-b44f374).
PACK=.gpu/c.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
snap() { tar czf "$OUT/r.tgz" -C "$W" .; }
N=.gpu/s/entkv
for round in 1 2; do
  for v in 1 0; do
    if [ $v = 1 ]; then export ENTKV_EXP_NOSHARE=1; else unset ENTKV_EXP_NOSHARE; fi
    ph bp1m-$v-$round 60 $N bench-paper --method certified --n 1048576 --iters 20 --tile 256,1,4,2,3,2,256,2048
    ph bp128k-$v-$round 40 $N bench-paper --method certified --n 131072 --iters 30 --tile 256,1,2,2,3,2,256,2048
    ph bp32k-$v-$round 40 $N bench-paper --method certified --n 32768 --iters 30 --tile 256,1,2,2,3,2,256,2048
  done
done
unset ENTKV_EXP_NOSHARE
snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
ph engine 100 bash scripts/engine-gpu.sh $W/engine
snap
export CUDA_CACHE_PATH=/tmp/jcw
ph tune-wide 100 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --kernels decode_certified --time-budget 70 --out /tmp/bw
ph bench-wide 60 $N bench --bundle /tmp/bw --workload wide --methods certified --out $W/bench-wide.json
cp /tmp/bw/manifest.json $W/manifest-wide.json
for f in $W/bp*.log; do echo "$(basename $f) $(grep step $f | tr -s " " | head -1)"; done
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/engine.log; grep -E "^wide " $W/bench-wide.log
