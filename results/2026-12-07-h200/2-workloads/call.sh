# Device call for an H200 only, planned: the `gqa` and `wide` half of the docs run at ddb41b0
# (1-docs ran the `paper` half): both workloads tuned and benched beside torch SDPA, then the GPU
# suite (~390 s). Carries .gpu/docs.txz (scripts/pack-gpu.sh at ddb41b0). Afterwards:
# python3 scripts/bench_report.py results/2026-12-07-h200/1-docs/out-paper/bench <this out/>.
PACK=.gpu/docs.txz; source scripts/device-call.sh; docs_run workloads
