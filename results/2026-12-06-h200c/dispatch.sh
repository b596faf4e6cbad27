# One device call for either card: it carries .gpu/two.txz (folder main/: e4090bc's build since
# 2026-12-07 02:33 UTC, 8ac9cfd's before; their default f16/bf16 PTX is 3feea43's byte for byte;
# exp/: c28fd6d plus results/2026-12-06-probes/exp.diff, the select_topk barrier A/B), and each
# call script picks its build with BUILD. H200: the docs run; any other card: the probes of
# results/2026-12-07-pw (their timings are compared within the call only).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash results/2026-12-06-h200c/1-run/call.sh
else
  exec bash results/2026-12-07-pw/1-probe/call.sh
fi
