PTXAS=/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/ptxas
cd /work/main
for a in 2 1.25 3; do
for cfg in "32 2" "32 3" "64 2" "128 4" "32 1" "128 8"; do set -- $cfg; hd=$1; g=$2
for p in 16 64; do for dt in bf16 f16; do for al in --alibi ""; do
d=/tmp/sw7/a${a}_d${hd}_g${g}_p${p}_$dt$al; rm -rf $d; ./target/release/entkv emit --alpha $a --head-dim $hd --group $g --page-size $p --kv-dtype $dt $al --out $d >/dev/null 2>&1 || { echo "emit fail $d"; continue; }
for f in $d/select_certified*.ptx $d/page_score*.ptx $d/page_meta*.ptx; do $PTXAS -arch=sm_90 -v $f -o /dev/null 2>&1 | awk -v t="a$a d$hd g$g p$p $dt $al" '/Function properties for/{fn=$NF} /spill stores/{ if ($5!=0 || $9!=0) print t" "fn": "$5" "$9}'; done
rm -rf $d
done; done; done; done; done
echo SWEEP7 DONE
