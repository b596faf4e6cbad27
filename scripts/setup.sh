#!/usr/bin/env bash
# Install what entkv needs on a fresh Debian 12 / Ubuntu machine: LLVM 19 (static libraries, for
# the NVPTX code generator) and ptxas (from PyPI, to assemble and check the generated PTX without
# a GPU). Rust (cargo) must already be installed. Safe to run again.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need_apt=0
for p in llvm-19-dev libpolly-19-dev zlib1g-dev libzstd-dev libffi-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    llvm-19-dev libpolly-19-dev zlib1g-dev libzstd-dev libffi-dev python3-pip >/dev/null
fi

if ! python3 -c "import nvidia.cuda_nvcc" >/dev/null 2>&1; then
  python3 -m pip install -q nvidia-cuda-nvcc-cu12 2>/dev/null \
    || python3 -m pip install -q --break-system-packages nvidia-cuda-nvcc-cu12
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
echo "setup: LLVM $(/usr/lib/llvm-19/bin/llvm-config --version), ptxas $(python3 -c 'import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])')/bin/ptxas, $(cargo --version)"
