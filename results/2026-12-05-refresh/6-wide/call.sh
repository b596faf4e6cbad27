# Device call at f706c20 (kernels as HEAD), the session's last device time (~300 s): on an H200
# `wide` autotuned and benched beside SDPA (scripts/bench-workloads.sh OUT wide) for
# docs/benchmarks.md's `wide` section, the workload whose certified default and tuner space
# changed; on any other GPU nothing.
PACK=.gpu/x.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
ph workloads 215 bash scripts/bench-workloads.sh $W wide
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-wide.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -20; grep -h median $W/sdpa-*.log 2>/dev/null
