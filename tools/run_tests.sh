#!/usr/bin/env bash
# One command: install, build, check formatting, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
tools/check_format.sh
# What this host gives the data path, in the log: timings in tests and benchmarks depend on it.
timeout 60 build/tools/sluice-perf doctor || echo "sluice-perf doctor failed (rc=$?); the tests run anyway"
meson test -C build --print-errorlogs --num-processes 2 "$@"
