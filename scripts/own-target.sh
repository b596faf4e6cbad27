# Sourced by the scripts that build a binary to carry to the device (pack-gpu.sh,
# build-gpu-bins.sh) and by test.sh, from the checkout's root, before cargo builds.
#
# A worktree of an A/B often shares this checkout's target/ (a symlink). Seen 2026-12-06: after
# a build in the worktree, `cargo build` here finished at once and left the worktree's binary in
# target/release, so a pack of main held the experiment's binary; touching this tree's sources
# made cargo rebuild from them. So when target/ was last built from another checkout (or
# nobody says which), touch this tree's tracked files before building.
built_from=target/.built-from
here=$(pwd -P)
last=$(cat "$built_from" 2>/dev/null || true)
# Outside a git checkout (an exported tree) there is no worktree to share target/ with.
if [ "$last" != "$here" ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "target/ was last built from ${last:-an unknown checkout}: rebuilding this checkout's crates" >&2
  git ls-files -z -- . ':!results' ':!docs' | xargs -0 touch
  mkdir -p target/
  echo "$here" >"$built_from"
fi
