# Device call, any GPU: as 1-ab, the binary of branch exp/bound-reads at its next commit (the
# head's bound now read once a chunk with a coherent load, `ld.volatile.global`, instead of an
# atomic; exp.diff against 8618649). o = ENTKV_X_OLD_BOUNDS=1 (8618649's reads: after a
# rescoring batch, the head's first only when seeded, atomic), n = the change.
#  1. bench-paper, certified, 128k and 1M, the five tiles of 1-ab; o n o n. With n, also the
#     seeded tiles at 128k with the seed samples' run of one (ENTKV_X_SEED_RUN=1).
#  2. Untuned `wide` and `gqa` bundles of o and n, certified and certified-pruned; o n o n.
PACK=.gpu/exp.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
E=.gpu/entkv
T=(256,1,4,2,3,2,256,2048 256,1,4,2,3,2,256,2048,h 256,1,4,2,3,2,256,2048,h,seed 32,1,2,2,32,32,256,2048,h 32,1,2,2,32,32,256,2048,h,seed)
tiles=(); for t in "${T[@]}"; do tiles+=(--tile $t); done
mk() { [ $1 = o ] && echo 1 || echo 0; }
for v in o n; do
  export ENTKV_X_OLD_BOUNDS=$(mk $v)
  ph create-wide-$v 60 $E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out $W/wide-$v
  ph create-gqa-$v 60 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa-$v
done
for i in 1 2; do
  for v in o n; do
    export ENTKV_X_OLD_BOUNDS=$(mk $v)
    for n in 131072 1048576; do
      ph paper-$n-$v-$i 60 $E bench-paper --method certified --n $n "${tiles[@]}" --iters 30
    done
    [ $v = n ] && ENTKV_X_SEED_RUN=1 ph paper-131072-n-run1-$i 60 $E bench-paper --method certified --n 131072 --tile ${T[2]} --tile ${T[4]} --iters 30
    for w in wide gqa; do
      ph bench-$w-$v-$i 60 $E bench --bundle $W/$w-$v --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --no-defaults --out $W/bench-$w-$v-$i.json
    done
  done
done
rm -rf $W/wide-? $W/gqa-?
grep -h "step" $W/paper-*.log | head -60
