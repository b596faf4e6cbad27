# Run 1 (08:39 UTC, out-1) lacked --print-metric-instances: totals only; run 2 (out-2) printed the
# per-opcode values without their names (`values`); run 3 (08:40, out-3) has `details`.
# Device call, any GPU: the executed-instruction mix of the certified pass at `wide` 128k (the
# default bundle's seeded r2 tile), per SASS opcode (ncu sass__inst_executed_per_opcode), to size
# what an integer tensor-core form of its dp4a bound chains would remove (docs/perf-notes.md,
# "`wide` at 128k under ncu"). Carries .gpu/pw.txz (new/ = e5148c1).
PACK=.gpu/pw.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-ops
E=.gpu/s/entkv
$E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out $W/bundle > $W/create.log 2>&1
NCU="ncu --clock-control none --print-units base --page raw --print-metric-instances details --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum"
ph ops-wide 150 $NCU -k regex:^select_certified__ -c 1 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods certified --iters 1 --warmup 1 --check-samples 1
snap
ph ops-wide-pruned 150 $NCU -k regex:^select_certified_rest__ -c 1 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods certified-pruned --iters 1 --warmup 1 --check-samples 1
find $W/bundle -type f ! -name manifest.json -delete
