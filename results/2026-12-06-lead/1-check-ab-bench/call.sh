# Device call: 350e8c3 (`s`: page_score_moments takes its blocks KV head fastest, and every timed
# region starts behind a busy lead kernel) against f706c20 (`o`, kernels as 8fd7ab4), both builds
# in one pack. On any GPU: the GPU suite of `s`; `paper` top-k, Gaussian and certified at 128k and
# 1M on each build's untuned bundle, o / s --idle-start / s, twice (o against s --idle-start is the
# remap; s --idle-start against s is the timing method); torch SDPA with and without its lead.
# (docs/benchmarks.md's runs did not fit the session's last device time.)
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
S=$(cat .gpu/s/s/commit)
ENTKV_COMMIT=$S ph gpu-check-small 150 .gpu/s/s/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for v in o s; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 32 --out /tmp/paper-$v
done
i=0
for r in o s-idle s o s-idle s; do
  i=$((i+1)); v=${r%-idle}; flag=; [ $r = s-idle ] && flag=--idle-start
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph paper-$i-$r 60 .gpu/s/$v/entkv bench --bundle /tmp/paper-$v --no-defaults --workload paper --n 131072,1048576 --methods topk,gaussian,certified $flag --out $W/bench-paper-$i-$r.json
done
ENTKV_COMMIT=$S ph sdpa-idle 45 python3 scripts/sdpa_baseline.py --workload paper --n 32768 131072 1048576 --idle-start --out $W/sdpa-idle.json
ENTKV_COMMIT=$S ph sdpa-lead 45 python3 scripts/sdpa_baseline.py --workload paper --n 32768 131072 1048576 --out $W/sdpa-lead.json
snap
for f in $W/paper-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z]+ +(step|page_score|select|decode)" $f | cut -c1-150; done
grep -h median $W/sdpa-*.log
