# Device call at 3a6e290: the GPU suite again (since b4f267e the checks-only certified pass runs
# unseeded and the wide 4-bit certified default is one lane a token, two tokens); the untuned
# `wide` bundle (`entkv bundle create`, the new default) timed on dense and certified at 32k,
# 128k and 1M, each step checked against float64; then where `paper`'s seeded certified step
# spends its time (it lost 25% at 1M in 3-checks-bench's tune log): `entkv bench-paper` per
# kernel of the plain, `_h` and `_h_seed` tiles at 128k and 1M, with the pairs verify flagged.
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
.gpu/s/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out /tmp/bw > $W/bundle-wide.log 2>&1
ph bench-wide-default 60 .gpu/s/entkv bench --bundle /tmp/bw --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,certified --out $W/bench-wide-default.json
snap
T=256,1,4,2,2,2,256,2048
for n in 1048576 131072; do
  ph paper-seed-$n 60 .gpu/s/entkv bench-paper --method certified --n $n --iters 20 --tile $T --tile $T,h --tile $T,h,seed
done
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL" $W/gpu-check-small.log | head -8
grep -E " step |decode_certified|decode_dense" $W/bench-wide-default.log | grep -v "^\[" | head -12
cat $W/paper-seed-*.log | grep -v "^\[" | tail -12
