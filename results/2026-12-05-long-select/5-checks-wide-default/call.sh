# Device call at b4f267e: the GPU suite again (the checks-only certified pass now runs unseeded;
# the wide 4-bit certified default is one lane a token, two tokens), then the untuned `wide`
# bundle (`entkv bundle create`, the new default) timed on dense and certified at 32k, 128k and
# 1M, each step checked against float64.
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
.gpu/s/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out /tmp/bw > $W/bundle-wide.log 2>&1
ph bench-wide-default 60 .gpu/s/entkv bench --bundle /tmp/bw --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,certified --out $W/bench-wide-default.json
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL" $W/gpu-check-small.log | head -8
grep -E " step |decode_certified" $W/bench-wide-default.log | grep -v "^\[" | head -12
