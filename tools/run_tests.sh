#!/usr/bin/env bash
# One command: install, build, check formatting, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
tools/check_format.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
