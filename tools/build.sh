#!/usr/bin/env bash
# Installs dependencies (if missing) and builds Sluice into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
if [ ! -f build/build.ninja ]; then meson setup build; fi
ninja -C build -j"${SLUICE_JOBS:-2}"
