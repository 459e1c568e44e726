#!/usr/bin/env bash
# One command: install, build, and run the main job -- an embedded local cluster (dispatcher
# and workers in one process) reading a pipeline, then a summary. Extra arguments go to
# `sluice local` (e.g. --workers 4 --pipeline 'range(100000) | batch(64)').
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh >&2
exec build/tools/sluice local "$@"
