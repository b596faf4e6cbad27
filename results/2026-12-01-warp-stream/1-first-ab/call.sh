# Device call: the warp-local candidate stream for 4-bit per-token sketches (first run). HEAD
# b61c9dd + token-grid patch + warp_stream.rs (not committed; diff beside this file).
# `entkv gpu-check --small-only`, then `bench-paper --method certified --sketch-bits 4` at 1M,
# 128k, 32k for one-token-a-lane tiles, with the rescoring's K row read in batches of RB bytes
# (env, read at kernel generation), and the 8-bit pass's default tile for reference.
PACK=.gpu/e.txz; source scripts/device-call.sh
E=.gpu/s/entkv
ph gpu-check 200 $E gpu-check --small-only --out $W/gpu-check
T="--tile 256,1,1,2,0,4,256,2048 --tile 256,1,1,2,5,5,256,2048 --tile 256,1,1,2,6,6,256,2048 --tile 256,1,2,2,4,4,256,2048 --tile 128,1,2,2,8,8,256,2048 --tile 256,2,2,2,0,4,256,2048 --tile 128,1,4,2,4,4,256,2048"
for rb in 64 32 16; do
  RB=$rb ph s4-rb$rb-1048576 120 $E bench-paper --method certified --n 1048576 --sketch-bits 4 $T
done
RB=32 ph s4-rb32-131072 90 $E bench-paper --method certified --n 131072 --sketch-bits 4 $T
RB=32 ph s4-rb32-32768 90 $E bench-paper --method certified --n 32768 --sketch-bits 4 $T
ph s8-1048576 60 $E bench-paper --method certified --n 1048576 --sketch-bits 8 --tile 128,1,4,2,4,3,256,2048
tail -n 8 $W/s*.log; tail -n 5 $W/gpu-check.log
