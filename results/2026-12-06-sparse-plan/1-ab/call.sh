# Device call, any GPU: branch exp/sparse-plan (5aaa765 plus one experiment-only switch,
# exp.diff): ENTKV_EXP_SPARSE_PLAN picks the sparse walk's split plan. w4 = the default
# (MostCtas, about four waves: at `paper` 128k top-k 5 splits of 2 chunks, 960 CTAs), w2 / w1 =
# MostCtas aiming at two / one wave (fewer, longer splits), lt = LeastTail. The plan is made on
# the host at each launch, so one binary and one untuned bundle a workload serve every variant.
# Top-k and Gaussian, `gqa`, `wide` at 32k / 128k / 1M, `paper` also at 8k and 256k; variants in
# turn, twice. Then ncu of the sparse and the dense score pass at `paper` 128k.
PACK=.gpu/exp.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
E=.gpu/entkv
ph create-paper 60 $E bundle create --alpha 1.5 --head-dim 32 --out $W/paper
ph create-wide 60 $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out $W/wide
ph create-gqa 60 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa
for i in 1 2; do
  for v in w4 w2 w1 lt; do
    export ENTKV_EXP_SPARSE_PLAN=$v
    for w in paper gqa wide; do
      N=32768,131072,1048576; [ $w = paper ] && N=8192,32768,131072,262144,1048576
      ph bench-$w-$v-$i 60 $E bench --bundle $W/$w --workload $w --n $N --methods topk,gaussian --no-defaults --out $W/bench-$w-$v-$i.json
    done
  done
done
# Where the sparse walk's 128k time goes against the dense walk's (default plan): ncu, one launch each.
unset ENTKV_EXP_SPARSE_PLAN
NCU="ncu --clock-control none --set full --page details --print-units base"
ph ncu-sparse-128k 120 $NCU -k regex:decode_sparse_score --launch-skip 4 -c 1 $E bench --bundle $W/paper --workload paper --n 131072 --methods topk --no-defaults --iters 2 --warmup 2 --check-samples 1
ph ncu-dense-128k 120 $NCU -k regex:decode_dense_score --launch-skip 4 -c 1 $E bench --bundle $W/paper --workload paper --n 131072 --methods dense --no-defaults --iters 2 --warmup 2 --check-samples 1
rm -rf $W/paper $W/wide $W/gqa
