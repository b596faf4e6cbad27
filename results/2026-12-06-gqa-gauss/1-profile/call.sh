# Device call, any GPU, d93a9bf's binary (main/ of .gpu/both.txz): why `gqa` Gaussian at 1M is
# 1.50x its floor while top-k at the same kept fraction is 1.30x (results/2026-12-06-h200b:
# page_score_moments 271 us against page_score_box 206 us for about the same metadata bytes;
# decode_sparse 519 us against 466 us at 25.1% and 25.0% of pages, on different tuned tiles).
# One untuned `gqa` bundle, so both selectors' sparse walks run the same decode tile:
# - bench of both methods at 128k and 1M (per-stage medians);
# - ncu (duration, DRAM bytes, SM activity, occupancy) of every kernel of one step of each at 1M;
# - ncu --set full of the two page passes at 1M.
PACK=.gpu/both.txz; source scripts/device-call.sh
export ENTKV_COMMIT=$(cat .gpu/s/main/commit)
sed -i "1s/.*/commit $ENTKV_COMMIT/" $W/nvidia-smi.txt
E=.gpu/s/main/entkv
ph create-gqa 60 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa
B="--bundle $W/gqa --workload gqa --no-defaults --check-samples 1"
ph bench 90 $E bench $B --n 131072,1048576 --methods topk,gaussian --iters 30 --out $W/bench-gqa.json
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size
for m in topk gaussian; do
  ph ncu-step-$m 90 ncu --clock-control none --metrics $M $E bench $B --n 1048576 --methods $m --iters 1 --warmup 1
done
NCU="ncu --clock-control none --set full --page details --print-units base"
for k in page_score_moments:gaussian page_score_box:topk; do
  ph ncu-${k%%:*} 90 $NCU -k regex:${k%%:*} --launch-skip 1 -c 1 $E bench $B --n 1048576 --methods ${k##*:} --iters 1 --warmup 1
done
rm -rf $W/gqa
