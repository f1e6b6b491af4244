#!/usr/bin/env bash
# Installs what the AMD compile gate needs on a machine without an AMD GPU (Debian 12):
# clang-19 (a HIP-capable device compiler) and Debian's HIP 5.2 headers. The gate only emits
# assembly (-S), so no linker (lld) and no ROCm device libraries are needed.
# Idempotent: does nothing when both are already present.
set -euo pipefail

if command -v clang-19 >/dev/null 2>&1 && [ -f /usr/include/hip/hip_runtime.h ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install_amd_compile_tools.sh: must run as root (or with sudo available) to apt-get install" >&2
    exit 1
  fi
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { $SUDO apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
         clang-19 libamdhip64-dev; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install_amd_compile_tools.sh: failed to install clang-19 and libamdhip64-dev (see apt output above)" >&2
  exit 1
fi

if ! command -v clang-19 >/dev/null 2>&1 || [ ! -f /usr/include/hip/hip_runtime.h ]; then
  echo "install_amd_compile_tools.sh: packages installed but clang-19 or /usr/include/hip/hip_runtime.h is still missing" >&2
  exit 1
fi
echo "AMD compile tools ready: $(clang-19 --version | head -n 1)"
