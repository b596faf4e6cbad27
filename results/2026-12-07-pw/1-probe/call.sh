# Device call, any GPU (the H200 takes results/2026-12-06-h200c's docs run instead): carries
# .gpu/two.txz, folder main/ = e4090bc (the seeded page-pruned walk, `_seed_pw`), exp/ =
# c28fd6d plus results/2026-12-06-probes/exp.diff (select_topk with 4 barriers a pass instead of
# 6 behind ENTKV_EXP_SELECT). In order of value, since the session's device time may cut it short:
# 1. Does `_seed_pw` pay? The certified family tuned alone on `wide` and `gqa` at 128k and 1M
#    (--no-cache): the pruned rows time every seeded point's `_pw` twin beside the unseeded
#    tiles, on iid and `peaked` steps, in one process (tune logs); then the tuned bundles'
#    certified and certified-pruned steps (`entkv bench`, float64-checked on sampled heads).
# 2. The GPU suite (--small-only) at e4090bc.
# 3. The select A/B of results/2026-12-06-probes/2-ab-128k (old new old new at `paper` 128k).
PACK=.gpu/two.txz BUILD=main; source scripts/device-call.sh
E=.gpu/s/entkv
export CUDA_CACHE_PATH=/tmp/jc-pw
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
GQA="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"
ph tune-wide 120 .gpu/s/autotune --alpha 1.5 $WIDE --contexts 128k,1M --kernels decode_certified --time-budget 100 --no-cache --out $W/pw-wide
ph bench-wide 60 $E bench --bundle $W/pw-wide --no-defaults --workload wide --n 131072,1048576 --methods certified,certified-pruned --out $W/bench-wide.json
snap
ph tune-gqa 100 .gpu/s/autotune --alpha 1.5 $GQA --contexts 128k,1M --kernels decode_certified --time-budget 80 --no-cache --out $W/pw-gqa
ph bench-gqa 50 $E bench --bundle $W/pw-gqa --no-defaults --workload gqa --n 131072,1048576 --methods certified,certified-pruned --out $W/bench-gqa.json
snap
ph gpu-check-small 90 $E gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
cp -a .gpu/s/exp/. .gpu/s/
for r in o1:old n1:new o2:old n2:new; do
  export ENTKV_EXP_SELECT=${r##*:}
  ph select-${r%%:*} 50 .gpu/s/autotune --alpha 1.5 --head-dim 32 --contexts 128k --kernels select_topk --no-cache --out $W/ab-${r%%:*}
  snap
done
for d in $W/pw-* $W/ab-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
