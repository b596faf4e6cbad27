# Sourced by the scripts that build a binary to carry to the device (pack-gpu.sh,
# build-gpu-bins.sh), from the checkout's root, before `cargo build`.
#
# A worktree of an A/B often shares this checkout's target/ (a symlink). Cargo then keys the
# workspace crates' artifacts by crate, not by checkout: after a build in the other tree, this
# tree's sources are older than the artifacts, so `cargo build` here finishes at once and leaves
# the other tree's binary in target/release (seen 2026-12-06: a pack of main held the
# experiment's binary). So when target/ was last built from another checkout (or nobody says
# which), touch this tree's tracked files and cargo rebuilds its crates from them.
built_from=target/.built-from
here=$(pwd -P)
if [ "$(cat "$built_from" 2>/dev/null)" != "$here" ]; then
  echo "target/ was last built from $(cat "$built_from" 2>/dev/null || echo "an unknown checkout"): rebuilding this checkout's crates" >&2
  git ls-files -z -- . ':!results' ':!docs' | xargs -0 touch
  mkdir -p target/
  echo "$here" >"$built_from"
fi
