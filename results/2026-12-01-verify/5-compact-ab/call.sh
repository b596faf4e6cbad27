# Device call: A/B of the finish passes' compaction (the kept candidates, and the support, are
# compacted before their K / V rows load) against b833c17's finish passes. One binary (HEAD +
# the change, uncommitted) benches two untuned bundles made with `entkv bundle create`: b-old by
# b833c17's binary, b-new by this one (only decode_certified/dense/sparse PTX differ). Two
# alternating rounds; `paper` 32k/128k/1M, `peaked`, `gqa`.
set -u
W=/tmp/r; mkdir -p $W .gpu/s && xz -dc .gpu/r.txz | tar xf - -C .gpu/s
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/jc ENTKV_COMMIT=$(cat .gpu/s/commit)
fin() { cat $W/phases.txt; tar czf $OUT/r.tgz -C $W .; }
trap fin EXIT
{ echo "commit $ENTKV_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $W/nvidia-smi.txt
ph() { local n=$1; local lim=$2; shift 2; local t=$SECONDS; timeout -k 5 $lim "$@" > $W/$n.log 2>&1; echo "$n: $((SECONDS-t)) s exit $?" >> $W/phases.txt; }
E=.gpu/s/entkv; S=.gpu/s
M=dense,topk,gaussian,certified,certified-pruned
for r in 1 2; do
  for v in old new; do
    ph paper-$v-$r 150 $E bench --bundle $S/b-$v --no-defaults --workload paper --n 32768,131072 --methods $M --out $W/paper-$v-$r.json
  done
done
for v in old new; do
  ph paper1m-$v 150 $E bench --bundle $S/b-$v --no-defaults --workload paper --n 1048576 --methods dense,topk,gaussian,certified --out $W/paper1m-$v.json
  ph peaked-$v 100 $E bench --bundle $S/b-$v --no-defaults --workload peaked --n 32768,131072 --methods certified,certified-pruned,gaussian --out $W/peaked-$v.json
  ph gqa-$v 100 $E bench --bundle $S/bg-$v --no-defaults --workload gqa --n 32768,131072 --methods dense,topk,certified --out $W/gqa-$v.json
done
python3 - $W <<'PY'
import json,sys,glob,os,collections
W=sys.argv[1]; t=collections.defaultdict(dict)
for f in sorted(glob.glob(W+'/*.json')):
    tag=os.path.basename(f)[:-5]
    for r in json.load(open(f))['rows']:
        if r['stage']!='step': continue
        key=(tag.split('-')[0], r['method'], r['n'])
        t[key].setdefault(tag.split('-')[1],[]).append(r['bundle']['median_ms'])
for k,v in sorted(t.items()):
    o=v.get('old',[]); n=v.get('new',[])
    print(k, 'old', ['%.4f'%x for x in o], 'new', ['%.4f'%x for x in n], 'new/old %.3f'%(min(n)/min(o)) if o and n else '')
PY
grep -h "check" $W/*.log | grep -c "ok ("
grep -h "FAIL\|mismatch" $W/*.log | head
