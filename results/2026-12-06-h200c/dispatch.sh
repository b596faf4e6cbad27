# H200: the docs run; any other card: the `gqa` Gaussian profile.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash results/2026-12-06-h200c/1-run/call.sh
else
  exec bash results/2026-12-06-gqa-gauss/1-profile/call.sh
fi
