#!/usr/bin/env bash
# Install what entkv needs on a fresh Debian 12 / Ubuntu machine: LLVM 19 (static libraries, for
# the NVPTX code generator) and ptxas (from PyPI, to assemble and check the generated PTX without
# a GPU: CUDA 13.0's, the version of the H200 driver's JIT, so its spill report is the GPU's).
# Rust (cargo) must already be installed. Safe to run again.
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

PTXAS_PKG="nvidia-cuda-nvcc==13.0.88"
ptxas_dir() { python3 -c 'import nvidia.cu13 as m; print(list(m.__path__)[0])' 2>/dev/null; }
if [ ! -x "$(ptxas_dir)/bin/ptxas" ]; then
  python3 -m pip install -q "$PTXAS_PKG" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages "$PTXAS_PKG"
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
echo "setup: LLVM $(/usr/lib/llvm-19/bin/llvm-config --version), ptxas $(ptxas_dir)/bin/ptxas, $(cargo --version)"
