# Device call: does the certified pass lose its time to block barriers? One-warp CTAs make every
# block collective warp-local (a rescoring stalls only its own warp). HEAD (2bae4a6) with
# 11-token-grid-ab/token-grid-f0195bf.patch applied (not landed), `entkv bench-paper --method
# certified`, 1M and 128k, 4-bit (per-token grid with rescoring) and 8-bit.
PACK=.gpu/w.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T="--tile 128,1,4,2,4,3,256,2048 --tile 32,1,4,2,16,3,256,2048 --tile 32,1,8,2,16,3,256,2048 --tile 64,1,4,2,8,3,256,2048 --tile 32,1,4,1,16,3,256,2048"
for n in 1048576 131072; do
  ph s4-$n 150 $E bench-paper --method certified --n $n --sketch-bits 4 $T
  ph s8-$n 150 $E bench-paper --method certified --n $n --sketch-bits 8 --tile 128,1,4,1,4,3,256,2048 $T
done
tail -n 7 $W/s*.log
