PTXAS=/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/ptxas
cd /work/main
for hd in 32 64 128; do for g in 1 2 4 8; do for p in 16 64; do for dt in bf16 f16; do for al in --alibi ""; do
d=/tmp/sw3/d${hd}_g${g}_p${p}_$dt$al; rm -rf $d; ./target/release/entkv emit --alpha 1.5 --head-dim $hd --group $g --page-size $p --kv-dtype $dt $al --out $d >/dev/null 2>&1 || { echo "emit fail $d"; continue; }
for f in $d/select_certified*.ptx $d/page_score*.ptx; do $PTXAS -arch=sm_90 -v $f -o /dev/null 2>&1 | awk -v t="d$hd g$g p$p $dt $al" '/Function properties for/{fn=$NF} /spill stores/{ if ($5!=0 || $9!=0) print t" "fn": "$5" "$9}'; done
rm -rf $d
done; done; done; done; done
echo SWEEP3 DONE
