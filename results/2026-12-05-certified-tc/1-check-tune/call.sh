# Device call at 5a1a20c: certified rescoring on the tensor cores (`_tc` on the 4-bit certified
# pass) beside the same tiles rescoring with FMAs.
# 1) the GPU suite (--small-only), with the new `_tc` certified checks;
# 2) the certified family tuned alone (`autotune --kernels decode_certified`) on `wide`, `gqa`
#    and `paper` at 32k, 128k and 1M: its tune log times every `_tc` point beside its FMA twin.
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
for w in wide gqa paper; do
  export CUDA_CACHE_PATH=/tmp/jc-$w
  case $w in
    wide) A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"; B=150;;
    gqa) A="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"; B=100;;
    paper) A="--head-dim 32"; B=100;;
  esac
  ph tune-cert-$w $((B + 40)) .gpu/s/autotune --alpha 1.5 $A --kernels decode_certified --contexts 32k,128k,1M --time-budget $B --no-cache --out /tmp/ct-$w
  xz -9c /tmp/ct-$w/tune-log.jsonl > $W/tune-log-cert-$w.jsonl.xz; snap
done
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
for f in $W/tune-log-cert-*.jsonl.xz; do xz -dc $f | python3 scripts/pair_times.py decode_certified _tc "$(basename $f .jsonl.xz)" | grep -E "best|ratio" | sort -t, -k3 | head -60; done
