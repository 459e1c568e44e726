#!/usr/bin/env bash
# The GPU destinations on a machine with a CUDA GPU, in one run: the gpu/ tests (which skip
# without a GPU, so a CI machine never runs them), the `--device` integration tests, the
# staged copy benchmark, and `sluice-perf service` landing in host memory against landing in
# device memory, alternated. Prints one summary; full logs go to OUT.
#
#   perf/gpu_check.sh build gpu-check        # BUILD holds gpu/, tools/ and tests/ of a build
#
# A test that skips here counts as a failure (on a GPU machine only the tests of what happens
# without one may skip). The service runs use shared memory: under the default UCX_TLS, UCX's
# peer watch would put the same-host processes on tcp (docs/design.md, "Peer failure").
set -uo pipefail
build=${1:-build}
out=${2:-gpu-check}
runs=${RUNS:-2}
mkdir -p "$out"
failures=0

echo "# $(date -u +%FT%TZ) $(nproc) cpus; $(nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>&1 | head -1)"

# run_gtest NAME LIMIT_S CMD... -> one line: passed / skipped / failed, and the failures.
run_gtest() {
  local name=$1 limit=$2
  shift 2
  local log="$out/tests.log"
  echo "=== $name" >>"$log"
  timeout "$limit" "$@" >"$out/last.log" 2>&1
  local rc=$?
  cat "$out/last.log" >>"$log"
  local passed skipped
  passed=$(grep -c '^\[       OK \]' "$out/last.log")
  # The tests of what happens without a GPU skip here, by design; any other skip is a failure.
  skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z0-9_/]+\.[A-Za-z0-9_/]+ \(' "$out/last.log" |
    grep -vc 'WithoutGpu')
  echo "$name: rc=$rc passed=$passed skipped=$skipped"
  grep -E '^\[  FAILED  \] [A-Za-z0-9_/]+\.|Failure' "$out/last.log" | sort -u | head -8 |
    sed 's/^/    /'
  if [ "$rc" -ne 0 ] || [ "$skipped" -ne 0 ] || [ "$passed" -eq 0 ]; then
    failures=$((failures + 1))
  fi
}

echo "## tests"
for t in cuda_probe device_buffer copy_engine device_batch_reader ucx_memory_probe \
  control_batch_source; do
  run_gtest "gpu_${t}_test" 300 "$build/gpu/gpu_${t}_test"
done
UCX_TLS=posix,sysv,cma,self SLUICE_BINARY="$build/tools/sluice" run_gtest \
  "service_test --device" 300 "$build/tests/service_test" --gtest_filter='*Device*'
SLUICE_PERF_BINARY="$build/tools/sluice-perf" run_gtest "perf_tool_test --device" 300 \
  "$build/tests/perf_tool_test" --gtest_filter='*Device*'
rm -f "$out/last.log"

echo "## staged host-to-device copies (DeviceCopyEngine against one cudaMemcpy at a time)"
timeout 300 "$build/gpu/gpu_copy_engine_benchmark" --benchmark_min_time=0.3 \
  --benchmark_out="$out/copy_engine.json" --benchmark_out_format=json >"$out/last.log" 2>&1
rc=$?
grep -vE '^ *(L[123]|CPU Caches|Load Average)' "$out/last.log" | head -40
if [ "$rc" -ne 0 ] || grep -q 'ERROR OCCURRED\|skipped, no usable GPU' "$out/last.log"; then
  echo "gpu_copy_engine_benchmark: exit status $rc, or a case reported an error or skipped"
  failures=$((failures + 1))
fi
rm -f "$out/last.log"

echo "## sluice-perf service over shared memory, 1 worker -> 1 client, host against device landing"
export UCX_TLS=${UCX_TLS:-posix,sysv,cma,self}
field() { python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join(str(r.get(k)) for k in sys.argv[1:]))" "$@"; }
for size in 1MiB 16MiB; do
  for run in $(seq "$runs"); do
    for device in -1 0; do
      r=$(timeout 120 "$build/tools/sluice-perf" service --batch-bytes "$size" --seconds 4 \
        --device "$device" --json 2>>"$out/service.err")
      if [ -z "$r" ]; then
        echo "size=$size device=$device run=$run: failed: $(tail -1 "$out/service.err")"
        failures=$((failures + 1))
        continue
      fi
      echo "$r" >>"$out/service.jsonl"
      echo "size=$size device=$device run=$run: $(echo "$r" | field bandwidth_mb_s p50_us p99_us \
        copied_bytes_per_delivered_byte bytes_copied_to_device_per_delivered_byte)"
    done
  done
done
echo "(columns: MB/s, p50 us, p99 us, CPU-copied bytes per byte, bytes copied to the device per byte)"

echo "## ${failures} failures (test binaries that failed or skipped, service runs that failed)"
exit $((failures > 0))
