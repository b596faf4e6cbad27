# On the CPU (no GPU), 2026-12-06, at 3feea43 (the kernels of d93a9bf): the selectors' kept
# share per query head on `gqa`'s shapes, one sequence of iid normal keys, every kernel in the
# interpreter. `coverage` in each JSON row is the share of tokens a head kept (mean, std, min,
# max over the 24 query heads).
for n in 131072 1048576; do
  target/release/entkv quality --kv-dtype bf16 --kv-heads 12 --q-heads 24 --n $n --coverage 25 \
    --backend interp --json q-$n.json > q-$n.log 2>&1
done
