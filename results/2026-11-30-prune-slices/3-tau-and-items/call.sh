set -x
mkdir -p /tmp/r
cd .gpu && xz -dc x.txz | tar xf - && cd ..
nvidia-smi > /tmp/r/nvidia-smi.txt
for v in old new new16 new32; do
  E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  I=; [ $v = new16 ] && I=16; [ $v = new32 ] && I=32
  if [ -n "$I" ]; then export ENTKV_PRUNE_ITEMS=$I; else unset ENTKV_PRUNE_ITEMS; fi
  $E bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/b-$v > /tmp/r/bundle-$v.log 2>&1
done
for rep in 1 2; do for v in old new new16 new32; do
  E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  I=; [ $v = new16 ] && I=16; [ $v = new32 ] && I=32
  if [ -n "$I" ]; then export ENTKV_PRUNE_ITEMS=$I; else unset ENTKV_PRUNE_ITEMS; fi
  for w in paper peaked; do
    $E bench --bundle /tmp/b-$v --no-defaults --workload $w --n 32768,131072,1048576 --methods certified-pruned --out /tmp/r/$v-$w-$rep.json > /tmp/r/$v-$w-$rep.log 2>&1
  done
done; done
NCU=/usr/local/cuda/bin/ncu
for v in new new16; do
  I=; [ $v = new16 ] && I=16
  if [ -n "$I" ]; then export ENTKV_PRUNE_ITEMS=$I; else unset ENTKV_PRUNE_ITEMS; fi
  $NCU --clock-control none -k regex:'select_pruned|prune_' --launch-skip 0 --launch-count 3 --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --csv .gpu/entkv bench --bundle /tmp/b-$v --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 3 --warmup 1 --check-samples 1 > /tmp/r/ncu-$v.csv 2>/tmp/r/ncu-$v.err
done
unset ENTKV_PRUNE_ITEMS
tar czf $OUT/r.tgz -C /tmp/r .
