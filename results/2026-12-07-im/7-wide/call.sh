# Device call on the warm H100 of 4-docs' second try (6ba9c00, .gpu/im3.txz new/): `wide` as the
# docs run takes it (scripts/bench-workloads.sh: every family tuned at 32k, 128k and 1M, the
# tuned bundle benched, torch SDPA on the same shapes), for an H100 record of the whole `wide`
# table with `_im`; then ncu of the page-pruned walk's rest pass at 128k (default bundle).
PACK=.gpu/im3.txz BUILD=new; source scripts/device-call.sh
cp -P .gpu/s/entkv .gpu/s/autotune .gpu/
ph workloads-wide 200 bash scripts/bench-workloads.sh $W wide
grep -E "^wide " $W/bench-wide.log 2>/dev/null | head -20
snap
E=.gpu/s/entkv
$E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out $W/bundle > $W/create.log 2>&1
NCU="ncu --clock-control none --print-units base --page raw --print-metric-instances details --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
ph ops-wide-pruned 100 $NCU -k regex:^select_certified_rest__ -c 1 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods certified-pruned --iters 1 --warmup 1 --check-samples 1
grep -E "inst_executed.sum|dram__bytes_read.sum|registers_per_thread |warps_active.avg|duration.sum" $W/ops-wide-pruned.log | head
find $W/bundle -type f ! -name manifest.json -delete
