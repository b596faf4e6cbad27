# Device call, any GPU: where `wide`'s 128k steps spend their time, for the targets they miss
# (docs/benchmarks.md: top-k 1.92x, certified 5.59x, certified-pruned 9.71x their floors on the
# H200 at ab58877). Carries .gpu/pw.txz (new/ = e5148c1: `wide`'s default bundle, whose pruned
# certified row is now `_seed_pw`). Default bundle, no tuning. First the steps timed without
# ncu, then ncu --set full (--clock-control none) of every kernel of one step of each method
# (the bench's warm-up step: --warmup 1 --iters 1, one head checked; the data generators and
# the lead kernel filtered out by name).
PACK=.gpu/pw.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-ncu
E=.gpu/s/entkv
$E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out $W/bundle > $W/create.log 2>&1
ph time 80 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods topk,certified,certified-pruned --out $W/time.json
snap
NCU="ncu --clock-control none --set full --page details --print-units base"
K='regex:^(page_score|select|decode|certified)'
for m in topk certified certified-pruned; do
  ph ncu-$m 150 $NCU -k "$K" -c 16 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods $m --iters 1 --warmup 1 --check-samples 1
  snap
done
find $W/bundle -type f ! -name manifest.json -delete
for f in $W/ncu-*.log; do xz -9 -k $f; done
