# Device call at b27d393: the dense walk's L2 prefetch (`_pf`) beside the same tiles without it.
# 1) the GPU suite (--small-only), with the new `_pf` checks;
# 2) the dense decode tuned alone (`autotune --kernels decode_dense`) on `wide`, `paper` and `gqa`
#    at 128k and 1M: its tune log times every `_pf` point beside the plain one, in one process.
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
for w in wide paper gqa; do
  export CUDA_CACHE_PATH=/tmp/jc-$w
  case $w in
    wide) A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4";;
    paper) A="--head-dim 32";;
    gqa) A="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12";;
  esac
  ph tune-dense-$w 100 .gpu/s/autotune --alpha 1.5 $A --kernels decode_dense --contexts 128k,1M --time-budget 70 --no-cache --out /tmp/dn-$w
  xz -9c /tmp/dn-$w/tune-log.jsonl > $W/tune-log-dense-$w.jsonl.xz; snap
done
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
for f in $W/tune-log-dense-*.jsonl.xz; do xz -dc $f | python3 scripts/pair_times.py decode_dense _pf "$(basename $f)"; done
