#!/bin/bash
# Instructions per RpcEndpoint::Call round trip in the in-process loopback benchmark, counted
# by callgrind: deterministic, so a change to the RPC layer can be compared on a noisy VM
# where perf/rpc_benchmark.cc's nanoseconds move by a third between runs.
#
#   perf/rpc_instructions.sh [BUILD_DIR]    # prints "calls N instructions_per_call M"
set -euo pipefail
build=${1:-build}
command -v valgrind >/dev/null || { echo "rpc_instructions.sh: needs valgrind" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --compress-strings=no --toggle-collect='*BM_RpcCall*' \
  --callgrind-out-file="$out" "$build/perf/sluice_rpc_benchmark" \
  --benchmark_filter='BM_RpcCall$' --benchmark_min_time=0.2 >/dev/null 2>&1
# Each call site of RpcEndpoint::Call is "cfn=NAME", "calls=N ...", then "LINE INCLUSIVE".
awk '
  /^cfn=/ { in_call = ($0 ~ /^cfn=sluice::transport::RpcEndpoint::Call\(/ && $0 !~ /::\{lambda/); next }
  in_call && /^calls=/ { split($1, c, "="); calls += c[2]; getline; ir += $2; in_call = 0 }
  END {
    if (calls == 0) { print "rpc_instructions.sh: no RpcEndpoint::Call found" > "/dev/stderr"; exit 1 }
    printf "calls %d instructions_per_call %d\n", calls, ir / calls
  }' "$out"
