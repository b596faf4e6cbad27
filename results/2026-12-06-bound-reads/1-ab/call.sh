# Device call, any GPU: the binary of branch exp/bound-reads (main's per-chunk bound reads, at
# 8618649 plus the change, with two experiment-only switches read when kernels are generated:
# ENTKV_X_OLD_BOUNDS=1 turns the change off, ENTKV_X_SEED_RUN sets the seed samples' run).
# o = ENTKV_X_OLD_BOUNDS=1 (a warp reads the CTA's and the head's bound only after a rescoring
# batch, the head's first only when seeded: 8618649's behaviour), n = the change.
#  1. bench-paper, certified, 128k and 1M: the tuned 128k tile (t256 r4 m3), with `_h`, seeded,
#     and the 1M tile (t32 r2 m32 c32 `_h`) and its seeded twin; o n o n.
#  2. Untuned `wide` and `gqa` bundles of o and n (`entkv bundle create`), certified and
#     certified-pruned at 32k / 128k / 1M; o n o n.
#  3. The certified family alone tuned for `gqa` at 32k with the seed run 4 and 1 (n): does
#     bfae77f's run of four cost the seeded tile there (the tuner's iid + `peaked` mean)?
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
    for w in wide gqa; do
      ph bench-$w-$v-$i 60 $E bench --bundle $W/$w-$v --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --no-defaults --out $W/bench-$w-$v-$i.json
    done
  done
done
rm -rf $W/wide-? $W/gqa-?
unset ENTKV_X_OLD_BOUNDS
gqa=(--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
for i in 1 2; do
  for run in 4 1; do
    ENTKV_X_SEED_RUN=$run ph tune-gqa-r$run-$i 60 .gpu/autotune --alpha 1.5 "${gqa[@]}" --contexts 32k --kernels decode_certified --no-cache --out $W/t
    xz -9c $W/t/tune-log.jsonl >$W/tune-gqa-r$run-$i.jsonl.xz; rm -rf $W/t
  done
done
grep -h "step" $W/paper-*.log | head -40
