# Device call, any GPU, 3feea43 (.gpu/one.txz; kernels as d93a9bf). Two questions left by
# results/2026-12-06-gqa-gauss and results/2026-12-06-sel-pattern:
# 1. Do the Gaussian selector's kept counts vary by (sequence, KV head) enough to explain its
#    sparse walk's longer drain? `entkv bench` records now carry `pages_kept_range` (the
#    smallest and largest share of its pages one (sequence, KV head) kept): `gqa` and `paper`,
#    top-k and Gaussian, untuned bundles, 32k / 128k / 1M.
# 2. Where does `select_topk`'s chain spend its time at `paper` 128k on its tuned tile? Tune the
#    family alone at 128k (as results/2026-12-06-h200b/2-ncu-128k did), then ncu --set full with
#    the SASS source view of one launch.
PACK=.gpu/one.txz; source scripts/device-call.sh
E=.gpu/s/entkv
ph create-gqa 60 $E bundle create --alpha 1.5 --head-dim 32 --group 2 --kv-dtype bf16 --out $W/gqa
ph create-paper 60 $E bundle create --alpha 1.5 --head-dim 32 --out $W/paper
for w in gqa paper; do
  ph bench-$w 90 $E bench --bundle $W/$w --workload $w --no-defaults --check-samples 1 --n 32768,131072,1048576 --methods topk,gaussian --iters 20 --out $W/bench-$w.json
done
ph tune-select 120 .gpu/s/autotune --alpha 1.5 --head-dim 32 --contexts 128k --kernels select_topk --out $W/bund
B="--bundle $W/bund --workload paper --n 131072 --methods topk --no-defaults --iters 2 --warmup 2 --check-samples 1"
NCU="ncu --clock-control none --set full"
ph ncu-select 90 $NCU --page details --print-units base -k regex:select_topk --launch-skip 4 -c 1 $E bench $B
ph ncu-select-src 90 $NCU --import-source yes --page source --print-source sass -k regex:select_topk --launch-skip 4 -c 1 $E bench $B
xz -9 $W/ncu-select-src.log
rm -rf $W/gqa $W/paper; find $W/bund -type f ! -name manifest.json ! -name "tune-*" -delete
ls $W/bund
