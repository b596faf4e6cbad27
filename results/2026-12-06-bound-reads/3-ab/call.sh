# Device call, any GPU: branch exp/bound-reads at its third commit (exp.diff against 8618649).
# Reading the head's bound every chunk cost more than it spared, with an atomic (1-ab) or a
# coherent load (2-ab). Variants, each kernel generated under its switches:
#   o   ENTKV_X_OLD_BOUNDS=1: 8618649's reads (after a rescoring batch; the head's first only
#       when seeded; atomic);
#   n0  the CTA's bound every chunk, the head's before the first chunk (seeded or not) and
#       after each batch (ENTKV_X_HEAD_EVERY=0);
#   n8, n32  n0 plus the head's every 8 / 32 chunks.
# bench-paper (certified, 128k and 1M, 1-ab's five tiles) and untuned `wide` and `gqa` bundles
# (certified, certified-pruned; 32k / 128k / 1M); o n0 n8 n32, twice.
PACK=.gpu/exp.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
E=.gpu/entkv
T=(256,1,4,2,3,2,256,2048 256,1,4,2,3,2,256,2048,h 256,1,4,2,3,2,256,2048,h,seed 32,1,2,2,32,32,256,2048,h 32,1,2,2,32,32,256,2048,h,seed)
tiles=(); for t in "${T[@]}"; do tiles+=(--tile $t); done
env_of() { case $1 in o) echo "ENTKV_X_OLD_BOUNDS=1";; n0) echo "ENTKV_X_HEAD_EVERY=0";; n8) echo "ENTKV_X_HEAD_EVERY=8";; n32) echo "ENTKV_X_HEAD_EVERY=32";; esac; }
V=(o n0 n8 n32)
for v in "${V[@]}"; do
  ph create-wide-$v 60 env $(env_of $v) $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out $W/wide-$v
  ph create-gqa-$v 60 env $(env_of $v) $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa-$v
done
for i in 1 2; do
  for v in "${V[@]}"; do
    for n in 131072 1048576; do
      ph paper-$n-$v-$i 60 env $(env_of $v) $E bench-paper --method certified --n $n "${tiles[@]}" --iters 30
    done
    for w in wide gqa; do
      ph bench-$w-$v-$i 60 $E bench --bundle $W/$w-$v --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --no-defaults --out $W/bench-$w-$v-$i.json
    done
  done
done
rm -rf $W/wide-* $W/gqa-*
