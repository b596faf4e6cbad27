# Device call: 32-bit positions in the 4-bit certified pass's page lookups and sketch addresses
# (i32-positions.diff on a35f6eb) against a35f6eb, same call, alternating binaries twice, at the
# default tile and the best small-CTA tile; `paper` 1M, 128k, 32k.
PACK=.gpu/c.txz; source scripts/device-call.sh
T="--tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048 --tile 256,1,4,1,3,2,256,2048"
for round in 1 2; do
  for b in a35f6eb i32; do
    for n in 1048576 131072 32768; do
      ph $b-$n-r$round 60 .gpu/s/entkv-$b bench-paper --method certified --n $n --sketch-bits 4 --iters 20 $T
    done
  done
done
for f in $W/*-r*.log; do echo "== $(basename $f)"; cat $f; done
