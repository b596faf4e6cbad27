# Device call, any GPU: branch exp/sel-pattern (d93a9bf plus experiment-only switches, exp.diff).
# Is the sparse score pass slower per byte than the dense walk (78% against 84% of DRAM peak at
# `paper` 128k, results/2026-12-06-sparse-plan) because of where its reads land?
# - ENTKV_EXP_SEL=shared: before `entkv bench` times `decode_sparse` alone, every (sequence, KV
#   head) gets KV head 0's selection of its sequence (same count), so a sequence's 24 heads read
#   the same physical pages, as the dense walk's heads do. `own` leaves the selector's pages.
# - ENTKV_TOPK_FRAC: top-k keeps this fraction of the pages instead of a quarter (0.5, 1.0).
# One untuned `paper` bundle; top-k at 128k and 1M for each pattern; ncu of the score pass at
# 128k for each (launch 9: the sparse stage's, after the rewrite); top-k keeping every page
# beside dense at 128k.
# The pack holds the exp/sel-pattern build (exp/) and d93a9bf's (main/, unused here).
PACK=.gpu/both.txz; source scripts/device-call.sh
export ENTKV_COMMIT=exp-sel-pattern:$(cat .gpu/s/exp/commit)
cp -P .gpu/s/exp/entkv .gpu/s/exp/autotune .gpu/
E=.gpu/entkv
B="--bundle $W/paper --workload paper --no-defaults --check-samples 1"
ph create-paper 60 $E bundle create --alpha 1.5 --head-dim 32 --out $W/paper
# Most telling first: the device time left to the session was about four minutes.
for v in own shared; do
  export ENTKV_EXP_SEL=$v
  ph bench-$v 60 $E bench $B --n 131072,1048576 --methods topk --iters 30 --out $W/bench-$v.json
done
NCU="ncu --clock-control none --set full --page details --print-units base"
for v in shared own; do
  export ENTKV_EXP_SEL=$v
  ph ncu-$v-128k 60 $NCU -k regex:decode_sparse_score --launch-skip 8 -c 1 $E bench $B --n 131072 --methods topk --iters 2 --warmup 2
done
unset ENTKV_EXP_SEL
export ENTKV_TOPK_FRAC=1.0
ph bench-frac1.0 60 $E bench $B --n 131072 --methods topk,dense --iters 30 --out $W/bench-frac1.0.json
unset ENTKV_TOPK_FRAC
rm -rf $W/paper
