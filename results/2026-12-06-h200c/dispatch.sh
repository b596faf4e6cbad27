# One device call for either card: it carries .gpu/two.txz (folder main/: 8ac9cfd's build since
# 2026-12-07, whose f16/bf16 PTX is 3feea43's byte for byte, the build before it; exp/ =
# .gpu/exp.txz, exp/select-barriers b8cedbf), and each call script picks its build with BUILD. H200: the docs run; any other card: the probes of results/2026-12-06-probes (their
# timings are compared within the call only).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash results/2026-12-06-h200c/1-run/call.sh
else
  exec bash results/2026-12-06-probes/1-counts-select/call.sh
fi
