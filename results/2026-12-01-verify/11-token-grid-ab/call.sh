# Device call: the certified pass over the per-token 4-bit grid with rescoring (branch
# token-sketch, WIP commit in `commit`) against the 8-bit pass, `entkv bench-paper --method
# certified` (untuned tiles), 1M / 128k / 32k.
PACK=.gpu/t.txz; source scripts/device-call.sh
E=.gpu/s/entkv
T4="--tile 128,1,4,2,4,3,256,2048 --tile 128,1,4,2,3,3,256,2048 --tile 128,1,2,2,4,3,256,2048 --tile 256,1,2,2,2,3,256,2048 --tile 64,1,4,2,8,3,256,2048 --tile 128,1,4,1,3,3,256,2048"
for n in 1048576 131072 32768; do
  ph s8-$n 100 $E bench-paper --method certified --n $n --sketch-bits 8 --tile 128,1,4,1,4,3,256,2048 --tile 128,1,4,2,4,3,256,2048
  ph s4-$n 200 $E bench-paper --method certified --n $n --sketch-bits 4 $T4
done
tail -n 8 $W/s*.log
