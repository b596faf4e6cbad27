# Three device calls on the warm H100 right after 1-ab (run as given in the device tool's
# command field; no device-call.sh: they reused 1-ab's unpacked .gpu/s/main, d93a9bf).
# ncu durations of every kernel of a `paper` 128k top-k step (untuned bundle), then ncu --set full
# and a SASS source view of the sparse finish pass and of select_topk (the untuned t512_i8 tile).
E=.gpu/s/main/entkv; $E bundle create --alpha 1.5 --head-dim 32 --out /tmp/pb
B="--bundle /tmp/pb --workload paper --no-defaults --check-samples 1 --n 131072 --methods topk --iters 2 --warmup 1"
ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_active.avg,dram__bytes_read.sum,launch__grid_size $E bench $B > $OUT/ncu-kernels.log 2>&1
for k in decode_sparse_finish:finish select_topk:select; do
  ncu --clock-control none --set full --page details --print-units base -k regex:${k%%:*} --launch-skip 2 -c 1 $E bench $B > $OUT/ncu-${k##*:}-128k.log 2>&1
  ncu --clock-control none --set full --import-source yes --page source --print-source sass -k regex:${k%%:*} --launch-skip 2 -c 1 $E bench $B > $OUT/ncu-${k##*:}-src.log 2>&1
done
