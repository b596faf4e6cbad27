# Device call: the seed estimate's rank cap by sample count (7358b76, `s`: the 4th largest below
# 4096 samples, the 6th from there) against 2b763b3 (`o`: the 6th always), both builds in one
# pack. 1) the untuned `wide` bundle (seeded certified default) of each build, certified at 32k,
# 128k, 1M, o s o s; 2) `paper`'s seeded certified tile per kernel (`entkv bench-paper`, the
# pairs repaired printed) at 128k and 1M, o s; 3) the certified family tuned alone on `gqa` at
# 32k, 128k, 1M by each build (the tune logs time the seeded tiles).
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
for v in o s; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out /tmp/wide-$v
done
i=0
for v in o s o s; do
  i=$((i+1)); export CUDA_CACHE_PATH=/tmp/jc-$v
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) ph wide-$i-$v 60 .gpu/s/$v/entkv bench --bundle /tmp/wide-$v --no-defaults --workload wide --n 32768,131072,1048576 --methods certified --out $W/bench-wide-$i-$v.json
done
snap
T=256,1,4,2,2,2,256,2048
for v in o s; do
  export CUDA_CACHE_PATH=/tmp/jc-$v
  for n in 131072 1048576; do
    ph paper-$v-$n 40 .gpu/s/$v/entkv bench-paper --method certified --n $n --iters 20 --tile $T,h --tile $T,h,seed
  done
done
snap
for v in o s; do
  export CUDA_CACHE_PATH=/tmp/jc-$v
  ph tune-gqa-$v 75 .gpu/s/$v/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --kernels decode_certified --contexts 32k,128k,1M --time-budget 50 --no-cache --out /tmp/g-$v
  xz -9c /tmp/g-$v/tune-log.jsonl > $W/tune-log-gqa-$v.jsonl.xz; snap
done
for f in $W/wide-*.log; do echo "== $f"; grep -E " step " $f; done
for f in $W/paper-*.log; do echo "== $f"; grep -E "_h|repair" $f | sed 's/ kernels / /' | head -8; done
for f in $W/tune-log-gqa-*.jsonl.xz; do xz -dc $f | python3 -c "
import json,sys
best={}
for l in sys.stdin:
    r=json.loads(l)
    if r['status']!='ok' or r['stage']!='eval' or r['family']!='decode_certified' or r['workload'].get('selector'): continue
    k=(r['workload']['context'], r['workload'].get('data'), r['tile_tag'].endswith('_seed'))
    if k not in best or r['median_us']<best[k][0]: best[k]=(r['median_us'], r['tile_tag'])
for k in sorted(best): print('$f'.split('/')[-1], k, round(best[k][0],1), best[k][1])"; done
