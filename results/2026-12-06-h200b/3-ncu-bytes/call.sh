# Device call at ab58877 (.gpu/one.txz), any GPU: call 2's ncu put the certified pass's DRAM
# traffic at ~0.67 GB at `paper` 128k (26.6 B a token, model 20) and ~4.25 GB at 1M (21.1 B).
# Which bytes: DRAM read/write and L2 sectors per source, at 128k and 1M, the same tile
# (t32 l1 r2 n2 m32 c32 f256 s2048 h), with ncu's cache flush (default) and without.
PACK=.gpu/one.txz; source scripts/device-call.sh
T=32,1,2,2,32,32,256,2048,h
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_atom.sum,lts__t_sectors_srcunit_tex_op_red.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum
for n in 131072 1048576; do
  for cc in all none; do
    ph ncu-$n-$cc 120 ncu --clock-control none --cache-control $cc --metrics $M --print-units base -k regex:'select_certified|decode_certified' --launch-skip 4 -c 2 .gpu/s/entkv bench-paper --method certified --n $n --tile $T --iters 3
  done
done
