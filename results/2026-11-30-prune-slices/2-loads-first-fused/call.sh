set -x
mkdir -p /tmp/r
cd .gpu && xz -dc x.txz | tar xf - && cd ..
nvidia-smi > /tmp/r/nvidia-smi.txt
for v in old new; do
  E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  $E bundle create --alpha 1.5 --head-dim 32 --page-size 16 --out /tmp/b-$v > /tmp/r/bundle-$v.log 2>&1
done
for rep in 1 2; do for v in old new; do
  E=.gpu/entkv; [ $v = old ] && E=.gpu/entkv-old
  for w in paper peaked; do
    $E bench --bundle /tmp/b-$v --no-defaults --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --out /tmp/r/$v-$w-$rep.json > /tmp/r/$v-$w-$rep.log 2>&1
  done
done; done
NCU=/usr/local/cuda/bin/ncu
$NCU --clock-control none -k regex:'select_pruned|prune_mark|page_bounds' --launch-skip 0 --launch-count 6 --section SpeedOfLight --csv .gpu/entkv bench --bundle /tmp/b-new --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 3 --warmup 1 --check-samples 1 > /tmp/r/ncu-new.csv 2>/tmp/r/ncu-new.err
$NCU --clock-control none -k regex:'select_pruned|page_bounds' --launch-skip 0 --launch-count 4 --section SpeedOfLight --csv .gpu/entkv-old bench --bundle /tmp/b-old --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 3 --warmup 1 --check-samples 1 > /tmp/r/ncu-old.csv 2>/tmp/r/ncu-old.err
timeout 200 .gpu/entkv gpu-check --small-only --out /tmp/r/gpucheck > /tmp/r/gpucheck.log 2>&1
tar czf $OUT/r.tgz -C /tmp/r .
