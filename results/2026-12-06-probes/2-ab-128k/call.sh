# Device call, any GPU, for a session with ~4 minutes of device time left: only the first
# question of 1-counts-select/call.sh, at 128k alone (the `paper` miss it is about). Branch
# exp/select-barriers (b8cedbf, folder exp/ of .gpu/two.txz): ENTKV_EXP_SELECT=old generates
# main's select_topk, `new` the one with 4 barriers a pass instead of 6. The family tuned alone,
# old new old new, each a fresh tuner process (--no-cache): every candidate's time is in each
# tune log, so the two kernels are compared tile by tile within this call.
PACK=.gpu/two.txz BUILD=exp; source scripts/device-call.sh
for r in o1:old n1:new o2:old n2:new; do
  export ENTKV_EXP_SELECT=${r##*:}
  ph tune-${r%%:*} 50 .gpu/s/autotune --alpha 1.5 --head-dim 32 --contexts 128k --kernels select_topk --no-cache --out $W/ab-${r%%:*}
  snap
done
for d in $W/ab-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
