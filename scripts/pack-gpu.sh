#!/usr/bin/env bash
# Pack this checkout's release `entkv` for a device call (scripts/device-call.sh's PACK): the
# stripped binary, `autotune` as a link to it (`entkv` started under that name is `autotune`),
# and a `commit` file. One LLVM-linked binary instead of two: 11.7 MB against 13.4 for both
# binaries. The device's working-tree limit (64 MiB) counts the tracked tree (~25 MiB since
# results/ keeps its large logs xz-compressed, plus ~3 MiB of tar overhead for ~4200 files) and
# the carried pack: builds of one A/B share most of their bytes in xz's window, so a pack of two
# is ~13 MB and of three ~15.5 MB.
#
#   scripts/pack-gpu.sh OUT.txz            # builds, then packs
#   scripts/pack-gpu.sh OUT.txz NAME       # packs into folder NAME/ (several builds: an A/B),
#                                          # adding to OUT.txz's folders if it exists
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/pack-gpu.sh OUT.txz [NAME]}
name=${2:-}
source scripts/own-target.sh
cargo build --release -p entkv-autotune --bin entkv
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
if [ -n "$name" ] && [ -f "$out" ]; then
  xz -dc "$out" | tar xf - -C "$stage"
fi
dir=$stage/$name
rm -rf "$dir" && mkdir -p "$dir"
cp target/release/entkv "$dir/"
strip "$dir/entkv"
ln -s entkv "$dir/autotune"
git rev-parse --short HEAD >"$dir/commit"
git diff --quiet HEAD -- . ':!results' || echo "warning: uncommitted changes are in the build of $(cat "$dir/commit")" >&2
tar cf - -C "$stage" . | xz -T0 -9 >"$out"
ls -la "$out"
