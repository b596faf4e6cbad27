# Device call: the certified pass at one token a lane (local ptxas 13 with no register cap:
# 66 registers for the 4-bit pass at 128 threads, 80 at 256, against 158 at four tokens), so
# 24–32 warps an SM. Same binary as 13-one-warp-ctas (2bae4a6 + token-grid-f0195bf.patch).
PACK=.gpu/w.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T="--tile 128,1,4,1,4,3,256,2048 --tile 256,1,1,1,3,3,256,2048 --tile 256,1,1,1,4,3,256,2048 --tile 128,1,1,1,6,3,256,2048 --tile 128,1,1,1,8,3,256,2048 --tile 512,1,1,1,2,3,256,2048 --tile 256,1,1,2,3,3,256,2048"
for n in 1048576 131072; do
  ph s4-$n 150 $E bench-paper --method certified --n $n --sketch-bits 4 $T
  ph s8-$n 150 $E bench-paper --method certified --n $n --sketch-bits 8 $T
done
tail -n 8 $W/s*.log
