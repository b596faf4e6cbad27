# Device call: o = 53ddeaf, n = 29d1588 (a gated certified score-pass CTA returns before its
# prologue). The GPU suite of n, then untuned bundles made by each build: certified and
# certified-pruned at `gqa`, `wide` and `paper` (32k / 128k / 1M), and `bench-paper` with
# `gqa`'s tuned seeded tile at the `paper` shape (per kernel: the gated repair launch),
# in the order o n o n.
PACK=.gpu/ab.txz; source scripts/device-call.sh
spec() {
  case $1 in
    paper) echo --head-dim 32 ;;
    gqa) echo --head-dim 32 --kv-dtype bf16 --group 2 ;;
    wide) echo --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 ;;
  esac
}
for v in o n; do for w in paper gqa wide; do
  .gpu/s/$v/entkv bundle create --alpha 1.5 $(spec $w) --out /tmp/b-$v-$w >/dev/null || exit 1
done; done
ph gpu-check-small 150 .gpu/s/n/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for round in 1 2; do for v in o n; do
  for w in gqa wide paper; do
    ph $w-$round-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/b-$v-$w --workload $w \
      --methods certified,certified-pruned --no-defaults --out $W/bench-$w-$round-$v.json
  done
  for n in 131072 1048576; do
    ph seeded-$n-$round-$v 60 .gpu/s/$v/entkv bench-paper --method certified --n $n --iters 30 \
      --tile 256,1,4,1,2,2,256,2048,h,seed
  done
done; done
