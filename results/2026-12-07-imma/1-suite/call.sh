# Device call, any GPU: the GPU suite (--small-only) at the commit that adds the integer
# tensor-core mma (`mma_i8`, m16n8k32 s8/u8) with its four suite checks against a plain host
# product (kernels-gen/src/mma_checks.rs): the hardware's byte-fragment layout against the
# interpreter's and the PTX ISA's. Carries .gpu/imma.txz (one build).
PACK=.gpu/imma.txz; source scripts/device-call.sh
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E "mma m16n8k32" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
