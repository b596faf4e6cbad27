# Device call, any GPU: branch exp/split-tie (6a24775 plus one experiment-only switch,
# exp.diff): ENTKV_X_SPLIT_TIE=fewer makes the certified passes' least-tail split plan keep the
# fewer, longer splits where two split counts cost the same number of chunk-rounds (it keeps the
# most now). At `paper` 128k the t32 `_h` tile ties 44 splits (two waves) with 22 (one wave);
# 1M runs one wave at 3.8 TB/s, 128k two at 2.9 (results/2026-12-06-h200b/3-ncu-bytes).
# m = the default, f = fewer; bench-paper (certified, 128k and 1M) and untuned `wide` and `gqa`
# bundles (certified, certified-pruned, 32k / 128k / 1M), m f m f. The plan is made on the host
# at each launch, so one binary and one bundle serve both.
PACK=.gpu/exp.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
E=.gpu/entkv
T=(256,1,4,2,3,2,256,2048 256,1,4,2,3,2,256,2048,h,seed 32,1,2,2,32,32,256,2048,h 32,1,2,2,32,32,256,2048,h,seed)
tiles=(); for t in "${T[@]}"; do tiles+=(--tile $t); done
ph create-wide 60 $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out $W/wide
ph create-gqa 60 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa
for i in 1 2; do
  for v in m f; do
    [ $v = f ] && export ENTKV_X_SPLIT_TIE=fewer || unset ENTKV_X_SPLIT_TIE
    for n in 131072 1048576; do
      ph paper-$n-$v-$i 60 $E bench-paper --method certified --n $n "${tiles[@]}" --iters 30
    done
    for w in wide gqa; do
      ph bench-$w-$v-$i 60 $E bench --bundle $W/$w --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --no-defaults --out $W/bench-$w-$v-$i.json
    done
  done
done
rm -rf $W/wide $W/gqa
