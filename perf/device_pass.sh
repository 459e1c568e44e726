#!/usr/bin/env bash
# One pass over what only a lent GPU machine (16 CPUs, a CUDA GPU) can measure, sized for one
# call of the `device` tool: the host's readiness (`sluice-perf doctor`), the GPU
# destinations (perf/gpu_check.sh), the issue-3 ratios against ucx_perftest
# (perf/run_ratios.sh), small batches under both progress modes, and slab pools on huge
# pages against base pages. Each part has its own time limit, so a slow one cannot starve
# the rest; logs go to OUT.
#
#   source .device/env.sh && perf/device_pass.sh .device/build "$OUT"   # perf/device_bundle.sh
set -uo pipefail
build=${1:-build}
out=${2:-device-pass}
mkdir -p "$out"
perf=$build/tools/sluice-perf
field() { python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join(str(r.get(k)) for k in sys.argv[1:]))" "$@"; }
part() { echo; echo "## $* ($(date -u +%T))"; }

echo "# $(date -u +%FT%TZ) $(nproc) cpus, $(uname -r), $(nvidia-smi --query-gpu=name,driver_version \
  --format=csv,noheader 2>&1 | head -1)"
missing=$(for f in "$build"/*/*; do ldd "$f"; done 2>&1 | grep 'not found' | sort -u)
[ -n "$missing" ] && echo "libraries not found: $missing"

part "sluice-perf doctor"
timeout 30 "$perf" doctor 2>&1 | head -40

part "perf/gpu_check.sh (RUNS=${GPU_RUNS:-1})"
RUNS=${GPU_RUNS:-1} timeout "${GPU_LIMIT:-200}" perf/gpu_check.sh "$build" "$out/gpu" 2>&1

part "perf/run_ratios.sh $build ${RATIO_RUNS:-2}"
timeout "${RATIO_LIMIT:-270}" perf/run_ratios.sh "$build" "${RATIO_RUNS:-2}" 2>&1

part "4 KiB batches, 1 worker -> 1 client, caller against thread progress (batches/s p50 p99 us)"
for run in 1 2 3; do
  for progress in caller thread; do
    r=$(timeout 30 "$perf" service --workers 1 --clients 1 --batch-bytes 4KiB --seconds 2 \
      --progress "$progress" --json 2>>"$out/small.err")
    echo "run=$run progress=$progress: $(echo "$r" | field batches_per_s p50_us p99_us)"
  done
done

part "slab pools on huge pages against base pages, service 1 -> 1, shm (MB/s p50 us huge_pages)"
for size in 1MiB 16MiB; do
  for run in 1 2; do
    for pages in off auto; do
      r=$(SLUICE_HUGE_PAGES=$pages UCX_TLS=posix,sysv,cma,self timeout 30 "$perf" service \
        --workers 1 --clients 1 --batch-bytes "$size" --seconds 3 --mode off --json \
        2>>"$out/pages.err")
      echo "size=$size run=$run SLUICE_HUGE_PAGES=$pages: $(echo "$r" | field bandwidth_mb_s p50_us huge_pages)"
    done
  done
done
part "coordinated reads against uncoordinated, 2 workers -> 2 clients, 64 KiB (batches/s p50 us)"
for run in 1 2; do
  for coordinated in "" --coordinated; do
    r=$(timeout 40 "$perf" service --workers 2 --clients 2 --batch-bytes 64KiB --seconds 3 \
      $coordinated --json 2>>"$out/coordinated.err")
    echo "run=$run ${coordinated:-uncoordinated}: $(echo "$r" | field batches_per_s p50_us per_worker_batches)"
  done
done
part "done"
