#!/usr/bin/env bash
# One pass over what only a lent GPU machine (16 CPUs, a CUDA GPU) can measure, sized for one
# call of the `device` tool: the host's readiness (`sluice-perf doctor`), the GPU
# destinations (perf/gpu_check.sh), the issue-3 ratios against ucx_perftest
# (perf/run_ratios.sh), small batches under both progress modes, slab pools on huge pages
# against base pages, and coordinated reads. Results go to stdout, logs and errors to OUT.
# Each part has its own time limit, and the whole pass PASS_BUDGET seconds (540 by default,
# under the device tool's 600 per call): a part that would start with too little of it left
# is skipped and says so, so one slow part shortens the rest rather than losing the output.
#
#   source .device/env.sh && perf/device_pass.sh .device/build "$OUT"   # perf/device_bundle.sh
set -uo pipefail
build=${1:-build}
out=${2:-device-pass}
mkdir -p "$out"
perf=$build/tools/sluice-perf
budget=${PASS_BUDGET:-540}
started=$(date +%s)
# limit SECONDS -> SECONDS, or what is left of the budget if less; 0 when under 15 s are left.
limit() {
  local left=$((budget - ($(date +%s) - started)))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# have SECONDS: true while a run of that long still fits the budget; else says so.
have() {
  [ "$(limit "$1")" -ge "$1" ] && return 0
  echo "skipped (the rest of this part): the pass's ${budget} s are spent"
  return 1
}
field() { python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join(str(r.get(k)) for k in sys.argv[1:]))" "$@"; }
part() { echo; echo "## $* ($(date -u +%T))"; }

echo "# $(date -u +%FT%TZ) $(nproc) cpus, $(uname -r), $(nvidia-smi --query-gpu=name,driver_version \
  --format=csv,noheader 2>&1 | head -1)"
missing=$(for f in "$build"/*/*; do ldd "$f"; done 2>&1 | grep 'not found' | sort -u)
[ -n "$missing" ] && echo "libraries not found: $missing"

# timed LIMIT CMD...: CMD under LIMIT seconds or what is left of the budget, or skipped.
timed() {
  local t
  t=$(limit "$1")
  shift
  if [ "$t" -eq 0 ]; then echo "skipped: the pass's ${budget} s are spent"; return; fi
  timeout "$t" "$@"
}

part "sluice-perf doctor"
timed 30 "$perf" doctor 2>&1 | head -40

part "perf/gpu_check.sh (RUNS=${GPU_RUNS:-1})"
RUNS=${GPU_RUNS:-1} timed "${GPU_LIMIT:-180}" perf/gpu_check.sh "$build" "$out/gpu" 2>&1

part "perf/run_ratios.sh $build ${RATIO_RUNS:-2}"
timed "${RATIO_LIMIT:-240}" perf/run_ratios.sh "$build" "${RATIO_RUNS:-2}" 2>&1

part "4 KiB batches, 1 worker -> 1 client, caller against thread progress (batches/s p50 p99 us)"
for run in 1 2 3; do
  for progress in caller thread; do
    have 10 || break 2
    r=$(timed 30 "$perf" service --workers 1 --clients 1 --batch-bytes 4KiB --seconds 2 \
      --progress "$progress" --json 2>>"$out/small.err")
    echo "run=$run progress=$progress: $(echo "$r" | field batches_per_s p50_us p99_us)"
  done
done

part "slab pools on huge pages against base pages, service 1 -> 1, shm (MB/s p50 us huge_pages)"
for size in 1MiB 16MiB; do
  for run in 1 2; do
    for pages in off auto; do
      have 10 || break 3
      r=$(SLUICE_HUGE_PAGES=$pages UCX_TLS=posix,sysv,cma,self timed 30 "$perf" service \
        --workers 1 --clients 1 --batch-bytes "$size" --seconds 3 --mode off --json \
        2>>"$out/pages.err")
      echo "size=$size run=$run SLUICE_HUGE_PAGES=$pages: $(echo "$r" | field bandwidth_mb_s p50_us huge_pages)"
    done
  done
done
part "coordinated reads against uncoordinated, 2 workers -> 2 clients, 64 KiB (batches/s p50 us)"
for run in 1 2; do
  for coordinated in "" --coordinated; do
    have 10 || break 2
    r=$(timed 40 "$perf" service --workers 2 --clients 2 --batch-bytes 64KiB --seconds 3 \
      $coordinated --json 2>>"$out/coordinated.err")
    echo "run=$run ${coordinated:-uncoordinated}: $(echo "$r" | field batches_per_s p50_us per_worker_batches)"
  done
done
part "done"
