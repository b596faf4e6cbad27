#!/usr/bin/env bash
# The autotune acceptance run on a GPU machine (binaries from .gpu/, see
# scripts/build-gpu-bins.sh):
#   1. `autotune --alpha 1.5 --head-dim 32` with the default buckets, timed (target ≤ 120 s);
#   2. kill a second run mid-way (SIGKILL) and `--resume` it: every record written before the
#      kill is still in the log, none is measured twice;
#   3. `entkv verify` (GPU) and `entkv bench` of the tuned bundle against its default rows.
#
#   scripts/autotune-gpu.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-out/autotune-gpu}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/nvidia-smi.txt"
export XDG_CACHE_HOME="$OUT/cache"   # a fresh cache: the first run measures everything

echo "== autotune (default buckets)"
rm -rf "$OUT/tuned" "$OUT/cache"
TIMEFORMAT="autotune wall %R s"
{ time .gpu/autotune --alpha 1.5 --head-dim 32 --out "$OUT/tuned" >"$OUT/autotune.log" 2>&1 || status=1; } 2>>"$OUT/autotune.log"
tail -45 "$OUT/autotune.log"

echo "== kill mid-run, then --resume (decode_dense + select_topk at 32k, no cache)"
rm -rf "$OUT/resume"
args=(--alpha 1.5 --head-dim 32 --contexts 32768 --kernels decode_dense,select_topk --no-cache --out "$OUT/resume")
timeout -s KILL 12 .gpu/autotune "${args[@]}" >"$OUT/resume-killed.log" 2>&1
cp "$OUT/resume/tune-log.jsonl" "$OUT/resume-before.jsonl" 2>/dev/null || : >"$OUT/resume-before.jsonl"
.gpu/autotune "${args[@]}" --resume >"$OUT/resume.log" 2>&1 || status=1
python3 - "$OUT/resume-before.jsonl" "$OUT/resume/tune-log.jsonl" <<'PY' | tee "$OUT/resume-check.txt" || status=1
import json, sys
def load(p):
    out = []
    for line in open(p):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by the kill
    return out
before, after = load(sys.argv[1]), load(sys.argv[2])
key = lambda r: json.dumps({k: v for k, v in r.items() if k not in ("timestamp", "unix_s")}, sort_keys=True)
keys_after = [key(r) for r in after]
lost = [k for k in map(key, before) if k not in keys_after]
dups = len(keys_after) - len(set(keys_after))
print(f"records before the kill: {len(before)}, after resume: {len(after)}, lost: {len(lost)}, duplicated: {dups}")
sys.exit(1 if lost or dups else 0)
PY

echo "== entkv verify (GPU) of the tuned bundle"
.gpu/entkv verify "$OUT/tuned" >"$OUT/verify.log" 2>&1 || status=1
tail -5 "$OUT/verify.log"

echo "== entkv bench: tuned vs default rows"
ENTKV_COMMIT=${ENTKV_COMMIT:-unknown} .gpu/entkv bench --bundle "$OUT/tuned" --workload paper \
  --n 32768,131072,1048576 --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1 || status=1
tail -60 "$OUT/bench.log"
exit $status
