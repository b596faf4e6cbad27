# One device call for either card: it carries .gpu/two.txz (folder main/ = .gpu/one.txz, 3feea43's
# build; exp/ = .gpu/exp.txz, exp/select-barriers b8cedbf), and each call script picks its build
# with BUILD. H200: the docs run; any other card: the probes of results/2026-12-06-probes (their
# timings are compared within the call only).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash results/2026-12-06-h200c/1-run/call.sh
else
  exec bash results/2026-12-06-probes/1-counts-select/call.sh
fi
