# Device call, any GPU: branch exp/select-barriers (b8cedbf = 22b2b52 plus one kernel change
# behind a generation-time switch, exp.diff; folder exp/ of .gpu/two.txz). ENTKV_EXP_SELECT=old
# generates main's kernels, `new` select_topk with 4 barriers a pass instead of 6. In order of
# value, since the session's device time may cut the call short:
# 1. Is the new select_topk faster? The family tuned alone at 128k and 1M, old new old new, each
#    a fresh tuner process (--no-cache): every candidate's time is in each tune log.
# 2. The GPU suite (--small-only) on the new kernels.
# 3. Do the Gaussian selector's kept counts vary by (sequence, KV head) enough to explain its
#    sparse walk's longer drain (results/2026-12-06-gqa-gauss)? `entkv bench` records carry
#    `pages_kept_range` since 3feea43: `gqa` and `paper`, top-k and Gaussian, untuned, 32k–1M.
# 4. Where does `select_topk`'s chain spend its time at `paper` 128k on its tuned tile (old)?
#    ncu --set full with the SASS source view of one launch, on the bundle tuned in o1.
PACK=.gpu/two.txz BUILD=exp; source scripts/device-call.sh
E=.gpu/s/entkv
for r in o1:old n1:new o2:old n2:new; do
  export ENTKV_EXP_SELECT=${r##*:}
  ph tune-${r%%:*} 60 .gpu/s/autotune --alpha 1.5 --head-dim 32 --contexts 128k,1M --kernels select_topk --no-cache --out $W/ab-${r%%:*}
done
snap
export ENTKV_EXP_SELECT=new
ph gpu-check-small 90 $E gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
export ENTKV_EXP_SELECT=old
ph create-gqa 30 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa
ph bench-gqa 60 $E bench --bundle $W/gqa --workload gqa --no-defaults --check-samples 1 --n 32768,131072,1048576 --methods topk,gaussian --iters 20 --out $W/bench-gqa.json
rm -rf $W/gqa
snap
B="--bundle $W/ab-o1 --workload paper --n 131072 --methods topk --no-defaults --iters 2 --warmup 2 --check-samples 1"
NCU="ncu --clock-control none --set full"
ph ncu-select-src 60 $NCU --import-source yes --page source --print-source sass -k regex:select_topk --launch-skip 4 -c 1 $E bench $B
xz -9 $W/ncu-select-src.log
for d in $W/ab-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
