# Device call, any GPU (the warm H100 of 4-docs): the certified pass at `wide` 128k with `_im`
# (the default bundle at 6ba9c00: t128 r2 c2 `_h_tc_seed_im`) under ncu, as
# results/2026-12-07-pw/9-opcodes (the `dp4a` pass at e5148c1): executed instructions per SASS
# opcode, DRAM bytes, registers and occupancy (launch stats). Carries .gpu/im3.txz (new/).
PACK=.gpu/im3.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-ops
E=.gpu/s/entkv
$E bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out $W/bundle > $W/create.log 2>&1
NCU="ncu --clock-control none --print-units base --page raw --print-metric-instances details --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__cycles_active.avg"
ph ops-wide 150 $NCU -k regex:^select_certified__ -c 1 $E bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods certified --iters 1 --warmup 1 --check-samples 1
grep -E "inst_executed.sum|dram__bytes|registers|warps_active|duration" $W/ops-wide.log | head
find $W/bundle -type f ! -name manifest.json -delete
