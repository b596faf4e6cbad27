# Device call, any GPU: does the seeded page-pruned walk (`_seed_pw`) pay at `paper` and `gqa`
# too, whose full-walk defaults are unseeded (so their pruned defaults are too)? Carries
# .gpu/pw.txz (new/ = e5148c1). The certified family tuned alone (--no-cache) at 8k, 32k, 128k
# and 1M: the pruned rows time each seeded point's `_pw` twin beside the unseeded tiles, on iid
# and `peaked` steps, in one process (tune logs; read with scripts/pair_times.py).
PACK=.gpu/pw.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-tune
GQA="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"
ph tune-paper 200 .gpu/s/autotune --alpha 1.5 --head-dim 32 --contexts 8k,32k,128k,1M --kernels decode_certified --time-budget 170 --no-cache --out $W/tune-paper
snap
ph tune-gqa 200 .gpu/s/autotune --alpha 1.5 $GQA --contexts 8k,32k,128k,1M --kernels decode_certified --time-budget 170 --no-cache --out $W/tune-gqa
for d in $W/tune-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
