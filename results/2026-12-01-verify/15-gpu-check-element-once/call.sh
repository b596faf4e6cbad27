# Device call: the GPU suite after the finish passes resolve a candidate's element once (the
# certified finish's global path; its staged path's PTX is unchanged).
PACK=.gpu/g.txz; source scripts/device-call.sh
ph gpu-check-small 300 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -cE " PASS" $W/gpu-check-small.log; grep -E "FAIL" $W/gpu-check-small.log | head -5; tail -2 $W/gpu-check-small.log
