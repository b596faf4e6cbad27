# Device call at ab58877 (.gpu/one.txz), any GPU (the GPU is in nvidia-smi.txt): where the two
# 128k `paper` steps that miss their targets spend time inside their kernels. ncu --set full
# (--clock-control none) of
#  - `select_topk` at its tuned 128k tile (t512_i16, tuned here first: `autotune --kernels
#    select_topk --contexts 128k`), one step of `entkv bench --methods topk`;
#  - the certified pass (`select_certified`) at the H200-tuned 128k tile
#    (t256 l1 r4 n2 m3 c2 f256 s2048, df04a1e's bundle) and at its 1M tile
#    (t32 l1 r2 n2 m32 c32 f256 s2048 h) at 128k and 1M, through `entkv bench-paper --method
#    certified` (timed without ncu first).
PACK=.gpu/one.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
ph tune-select 120 .gpu/autotune --alpha 1.5 --head-dim 32 --contexts 128k --kernels select_topk --out $W/bund
ls $W/bund | head  # kept here: manifest.json, tune-log.jsonl.xz and tune-summary.json (the PTX is rebuilt by `entkv bundle create`)
NCU="ncu --clock-control none --set full --page details --print-units base"
ph ncu-select 150 $NCU -k regex:select_topk --launch-skip 4 -c 1 .gpu/entkv bench --bundle $W/bund --workload paper --n 131072 --methods topk --no-defaults --iters 2 --warmup 2 --check-samples 1
T128=256,1,4,2,3,2,256,2048; T1M=32,1,2,2,32,32,256,2048,h
ph time-cert 100 bash -c ".gpu/entkv bench-paper --method certified --n 131072 --tile $T128 --tile $T1M --iters 30"
ph ncu-cert-128k 150 $NCU -k regex:select_certified --launch-skip 4 -c 1 .gpu/entkv bench-paper --method certified --n 131072 --tile $T128 --iters 3
ph ncu-cert-128k-t32 150 $NCU -k regex:select_certified --launch-skip 4 -c 1 .gpu/entkv bench-paper --method certified --n 131072 --tile $T1M --iters 3
ph ncu-cert-1m-t32 150 $NCU -k regex:select_certified --launch-skip 4 -c 1 .gpu/entkv bench-paper --method certified --n 1048576 --tile $T1M --iters 3
