# Device call at b758014 (tensor-core score passes, tile knob `_tc`). For paper, gqa and wide:
# autotune of decode_dense and decode_sparse only (the _tc points join the grid) at
# 32k/128k/1M, then `entkv bench` of that bundle against its default rows (the FMA tiles) in the
# same process: dense, top-k, Gaussian, each checked against float64 on sampled heads. Then the
# GPU suite (--small-only, with the new _tc paged-decode checks: the interpreter's mma fragment
# layouts against the hardware's) in the time left.
PACK=.gpu/x.txz; source scripts/device-call.sh
B=.gpu/s
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
run_wl() { # workload, autotune args...
  local n=$1; shift
  ph tune-$n 120 $B/autotune --alpha 1.5 "$@" --contexts 32k,128k,1M --kernels decode_dense,decode_sparse --out $W/b-$n
  cp $W/b-$n/tune-log.jsonl $W/tune-log-$n.jsonl 2>/dev/null; cp $W/b-$n/manifest.json $W/manifest-$n.json 2>/dev/null
  ph bench-$n 60 $B/entkv bench --bundle $W/b-$n --workload $n --n 32768,131072,1048576 --methods dense,topk,gaussian --out $W/bench-$n.json
  rm -rf $W/b-$n; snap
}
run_wl paper --head-dim 32
run_wl gqa --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12
run_wl wide --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4
ph gpu-check-small $((560 - SECONDS)) $B/entkv gpu-check --small-only --out $W/gpu-check
for wl in paper gqa wide; do echo "== $wl"; grep -E "^[0-9]+ +[a-z()0-9]+ +(step|decode_dense|decode_sparse) " $W/bench-$wl.log | awk '{print $1,$2,$3,$(NF-4),$(NF-3),$(NF-2),$(NF-1),$NF}'; done
grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL |_tc" $W/gpu-check-small.log | head -20; tail -2 $W/gpu-check-small.log
