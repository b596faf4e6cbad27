# Device call at 2f054aa + `entkv bench --sketch-bits`: on `wide` (d 128, G 4) the 4-bit
# certified pass rescored a large share of its tokens from K (ncu in 2-ncu-gqa-wide: DRAM 6.7 GB
# at 1M against a 2.3 GB sketch, 12.5% occupancy). Does the 8-bit sketch (16x tighter bound, no
# rescoring pass) win there, and on `gqa`? Each width's certified family tuned at 32k, 128k, 1M
# (autotune --kernels decode_certified), then `entkv bench` of certified at that width.
PACK=.gpu/b.txz; source scripts/device-call.sh
E=.gpu/s/entkv; A=.gpu/s/autotune
WIDE="--alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
GQA="--alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"
for bits in 8 4; do
  export CUDA_CACHE_PATH=/tmp/jw$bits
  ph tune-wide-s$bits 100 $A $WIDE --sketch-bits $bits --contexts 32k,128k,1M --kernels decode_certified --time-budget 80 --out /tmp/bw$bits
  ph bench-wide-s$bits 60 $E bench --bundle /tmp/bw$bits --sketch-bits $bits --workload wide --methods certified --out $W/bench-wide-s$bits.json
  cp /tmp/bw$bits/manifest.json $W/manifest-wide-s$bits.json
  tar czf "$OUT/r.tgz" -C "$W" .
done
export CUDA_CACHE_PATH=/tmp/jg8
ph tune-gqa-s8 80 $A $GQA --sketch-bits 8 --contexts 32k,128k,1M --kernels decode_certified --time-budget 60 --out /tmp/bg8
ph bench-gqa-s8 60 $E bench --bundle /tmp/bg8 --sketch-bits 8 --workload gqa --methods certified --out $W/bench-gqa-s8.json
cp /tmp/bg8/manifest.json $W/manifest-gqa-s8.json
grep -hE "^(wide|gqa) " $W/bench-*.log
