# Device call: A/B of the seed estimate's rank cap, 3a6e290 (`o`: the 4th largest sample) against
# 579998b (`s`: the 6th), both binaries in one pack. 1) `entkv bench-paper` of paper's seeded
# certified tile per kernel at 1M and 128k, with the pairs verify flagged, o s o s; 2) the
# certified family tuned alone on `wide` and on `gqa` at 128k and 1M by each build (the tune logs
# time the seeded tiles beside `_h`).
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
T=256,1,4,2,2,2,256,2048
for v in o s o s; do
  for n in 1048576 131072; do
    ph paper-$v-$n-$SECONDS 40 .gpu/s/$v/entkv bench-paper --method certified --n $n --iters 20 --tile $T,h --tile $T,h,seed
  done
done
snap
for v in o s; do
  export CUDA_CACHE_PATH=/tmp/jc-$v
  ph tune-wide-$v 75 .gpu/s/$v/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --kernels decode_certified --contexts 128k,1M --time-budget 50 --no-cache --out /tmp/w-$v
  xz -9c /tmp/w-$v/tune-log.jsonl > $W/tune-log-wide-$v.jsonl.xz; snap
done
for v in o s; do
  export CUDA_CACHE_PATH=/tmp/jc-$v
  ph tune-gqa-$v 70 .gpu/s/$v/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --kernels decode_certified --contexts 128k,1M --time-budget 45 --no-cache --out /tmp/g-$v
  xz -9c /tmp/g-$v/tune-log.jsonl > $W/tune-log-gqa-$v.jsonl.xz; snap
done
for f in $W/paper-*.log; do echo "== $f"; grep -E "_h" $f | sed 's/ kernels / /'; done
for f in $W/tune-log-*.jsonl.xz; do xz -dc $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    if r['status']=='ok' and r['stage']=='eval' and r['tile_tag'].endswith(('_h','_h_seed')): print('$f'.split('/')[-1][9:-9], r['workload']['context'], r['tile_tag'], round(r['median_us'],1))" | sort -k2,2n -k4,4n | awk '{c[$1$2]++; if (c[$1$2]<=4) print}'; done
