#!/bin/bash
# Device call: random-access read rates (torch), 2026-12-03.
set -u
W=/tmp/r; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $W/nvidia-smi.txt
git rev-parse --short HEAD >> $W/nvidia-smi.txt
python3 results/2026-12-03-page-access/1-random-gather/gather_triton.py $W/gather.json > $W/gather.log 2>&1
echo "exit $?" >> $W/gather.log
cat $W/gather.log
tar czf $OUT/r.tgz -C $W .
