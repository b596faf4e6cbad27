# Planned device call (not run yet), at the newest commit. 1) `gqa` and `wide` as a user makes them
# (autotune of every family), benched with every entmax method beside torch SDPA. 2) ncu of wide's
# tuned dense score pass at 1M, in the time left. The GPU suite at the new defaults (wide and gqa's
# sparse decode on tensor-core tiles) runs in results/2026-12-05-seed/planned-call.sh, with the
# seeded checks. (A planned A/B of the page lookahead on tensor-core tiles
# was dropped: three refused machine starts had spent the device time it needed.)
PACK=.gpu/x.txz; source scripts/device-call.sh
B=.gpu/s
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
WIDE=(--alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16)
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 90 $B/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 40 $B/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
snap
ph autotune-wide 140 $B/autotune "${WIDE[@]}" --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 120 --no-cache --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 50 $B/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
snap
ph ncu-wide-dense $((575 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_dense_score --launch-skip 3 --launch-count 1 --set full $B/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 1048576 --methods dense --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-wide-dense.json
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*-tuned.log | awk '{print $1,$2,$(NF-3),$NF}'; grep -h median $W/sdpa-*.log
for f in $W/ncu-*.log; do echo "== $f"; grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Executed Ipc A" $f | head -8; done
