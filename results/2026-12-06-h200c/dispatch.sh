# H200: the docs run; any other card: the probes of results/2026-12-06-probes (their timings are
# compared within the call only).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash results/2026-12-06-h200c/1-run/call.sh
else
  exec bash results/2026-12-06-probes/1-counts-select/call.sh
fi
