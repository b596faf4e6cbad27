# Device call for an H200 only: `wide` alone of the docs run's workloads half at ddb41b0 (for a
# session with ~370 s of device time left; 2-workloads, ~390 s, never met an H200): `wide` tuned
# and benched beside torch SDPA (~160 s). Carries .gpu/docs.txz (ddb41b0; the code since is
# PTX-identical). Afterwards: python3 scripts/bench_report.py
# results/2026-12-07-h200/1-docs/out-paper/bench results/2026-12-06-h200b/1-check-bench <this out/>
# --without results/2026-12-06-h200b/1-check-bench=workload:wide (the gqa rows stay ab58877's
# until 2-workloads runs).
PACK=.gpu/docs.txz; source scripts/device-call.sh; docs_run wide
