# Device call at 53ddeaf (.gpu/one.txz) with the untuned bundles of `paper`, `gqa` and `wide`
# (`entkv bundle create`, carried in .gpu/bund.txz): every kernel's duration in a 128k step of
# top-k, Gaussian and certified (ncu --clock-control none, gpu__time_duration only), to see where
# the steps above their floors spend the time between the big passes.
PACK=.gpu/one.txz; source scripts/device-call.sh
xz -dc .gpu/bund.txz | tar xf - -C .gpu
for w in paper gqa wide; do
  ph ncu-$w 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .gpu/s/entkv bench --bundle .gpu/bund/$w --workload $w --n 131072 --methods topk,gaussian,certified \
    --no-defaults --iters 2 --warmup 1 --check-samples 1
done
