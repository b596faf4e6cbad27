# Device call (after 1-check-ab-bench): on an H200 the GPU suite, then the benchmark run behind
# docs/benchmarks.md (scripts/bench-gpu.sh: `paper` autotuned, paper, peaked, sweep, SDPA), then
# `gqa` and `wide` autotuned and benched beside SDPA (scripts/bench-workloads.sh), all with the
# `s` build of .gpu/ab.txz (350e8c3: every timed run behind the lead kernel, `start: lead` in
# the records); on any other GPU nothing. Supersedes 2026-12-05-refresh/4-bench (f706c20).
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
cp .gpu/s/s/entkv .gpu/s/s/autotune .gpu/
export ENTKV_COMMIT=$(cat .gpu/s/s/commit)
# SKIP_CHECK=1: the suite already ran in this call or on this warm machine (1-check-ab-bench,
# same build); END_S: the seconds this script may use in all (585 alone).
if [ "${SKIP_CHECK:-0}" != 1 ]; then
  ph gpu-check-small 120 .gpu/entkv gpu-check --small-only --out $W/gpu-check
  snap
  grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
fi
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph workloads $((${END_S:-585} - SECONDS)) bash scripts/bench-workloads.sh $W
snap
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-gqa.log $W/bench-wide.log 2>/dev/null | cut -c1-150 | head -40
