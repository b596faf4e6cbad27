# Device call, any GPU: where `gqa`'s 128k steps spend their time, for the targets they miss
# (docs/benchmarks.md, H200 at ab58877: top-k 1.88x, certified 3.11x, certified-pruned 4.05x
# their floors), as 7-ncu-wide did for `wide`. Carries .gpu/imma.txz (4c6b49b: the default
# kernels' PTX is e5148c1's). Default bundle, no tuning: the steps timed first, then ncu --set
# full (--clock-control none) of every kernel of one step of each method, plus the DRAM bytes
# and the SASS opcode mix of the certified pass.
PACK=.gpu/imma.txz; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-gqa
E=.gpu/s/entkv
$E bundle create --alpha 1.5 --head-dim 32 --kv-dtype bf16 --group 2 --out $W/bundle > $W/create.log 2>&1
ph time 60 $E bench --bundle $W/bundle --no-defaults --workload gqa --n 131072 --methods topk,certified,certified-pruned --out $W/time.json
snap
NCU="ncu --clock-control none --set full --page details --print-units base"
K='regex:^(page_score|select|decode|certified)'
for m in topk certified certified-pruned; do
  ph ncu-$m 100 $NCU -k "$K" -c 12 $E bench --bundle $W/bundle --no-defaults --workload gqa --n 131072 --methods $m --iters 1 --warmup 1 --check-samples 1
  snap
done
ph ops-certified 60 ncu --clock-control none --print-units base --page raw --print-metric-instances details --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,dram__bytes_read.sum -k regex:^select_certified__ -c 1 $E bench --bundle $W/bundle --no-defaults --workload gqa --n 131072 --methods certified --iters 1 --warmup 1 --check-samples 1
find $W/bundle -type f ! -name manifest.json -delete
for f in $W/ncu-*.log $W/ops-*.log; do xz -9 $f; done
