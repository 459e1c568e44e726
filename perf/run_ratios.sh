#!/usr/bin/env bash
# Measures Sluice against ucx_perftest in one script, on the same machine and UCX_TLS, and
# prints the ratios that perf/RESULTS.md records. Usage: perf/run_ratios.sh [build-dir]
set -euo pipefail
build=${1:-build}
perf="$build/tools/sluice-perf"
port=$((20000 + RANDOM % 10000))

perftest() {  # TLS TEST SIZE ITERS [EXTRA] -> the Final: line (column 7: MiB/s, 4: latency us)
  local tls=$1 test=$2 size=$3 iters=$4 extra=${5:-}
  UCX_TLS=$tls ucx_perftest -p $port $extra >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  local line
  line=$(UCX_TLS=$tls ucx_perftest 127.0.0.1 -p $port $extra -t "$test" -s "$size" -n "$iters" -w 100 2>/dev/null | grep '^Final:' || true)
  wait $server 2>/dev/null || true
  port=$((port + 1))
  echo "$line"
}

echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cpus, UCX $(ucx_info -v | sed -n 's/# Version //p')"
for tls in "posix,sysv,cma,self" "tcp,self"; do
  for size in 1048576 16777216; do
    iters=$(( size >= 16777216 ? 300 : 3000 ))
    ref=$(perftest "$tls" ucp_am_bw $size $iters | awk '{printf "%.1f", $7 * 1.048576}')
    ours=$(UCX_TLS=$tls "$perf" transport --size $size --iterations $iters --latency-iterations 0 --json \
      | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["bandwidth_mb_s"])')
    echo "bandwidth tls=$tls size=$size sluice=${ours}MB/s ucx_perftest_am_bw=${ref}MB/s ratio=$(python3 -c "print('%.2f' % ($ours/$ref))")"
  done
  # With UCX watching for dead peers (UCP_ERR_HANDLING_MODE_PEER) on both sides: the
  # baseline is then `ucp_am_bw -e`. Sluice's default leaves this to its bootstrap socket
  # on tcp and shm (TransportOptions::ucx_peer_failure). shm has no such mode in UCX 1.13.
  if [ "$tls" = "tcp,self" ]; then
  ref=$(perftest "$tls" ucp_am_bw 1048576 3000 -e | awk '{printf "%.1f", $7 * 1.048576}')
  ours=$(UCX_TLS=$tls "$perf" transport --size 1048576 --iterations 3000 --latency-iterations 0 \
    --ucx-peer-failure ucx --json | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["bandwidth_mb_s"])')
  echo "bandwidth tls=$tls size=1048576 ucx-peer-failure=ucx sluice=${ours}MB/s ucx_perftest_am_bw_e=${ref}MB/s ratio=$(python3 -c "print('%.2f' % ($ours/$ref))")"
  fi
  # Latency is noisy on a shared VM: three alternating runs of each, medians compared.
  refs=(); threads=(); callers=()
  for run in 1 2 3; do
    refs+=("$(perftest "$tls" ucp_am_lat 8 50000 | awk '{printf "%.2f", $4}')")
    for progress in thread caller; do
      v=$(UCX_TLS=$tls "$perf" transport --size 65536 --iterations 10 --latency-iterations 50000 \
        --progress $progress --json | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["latency_us"])')
      if [ $progress = thread ]; then threads+=("$v"); else callers+=("$v"); fi
    done
  done
  python3 - "$tls" "${refs[*]}" "${threads[*]}" "${callers[*]}" <<'PY'
import statistics, sys
tls, refs, threads, callers = sys.argv[1], *[[float(v) for v in a.split()] for a in sys.argv[2:]]
ref = statistics.median(refs)
for name, runs in (("thread", threads), ("caller", callers)):
    ours = statistics.median(runs)
    print(f"latency tls={tls} progress={name} sluice={ours:.2f}us (runs {runs}) "
          f"ucx_perftest_am_lat={ref:.2f}us (runs {refs}) ratio={ours / ref:.2f}")
PY
  svc=$(UCX_TLS=$tls "$perf" service --workers 1 --clients 1 --batch-bytes 1MiB --seconds 8 --mode off --json)
  tr=$(UCX_TLS=$tls "$perf" transport --size 1MiB --iterations 3000 --latency-iterations 0 --json \
    | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["bandwidth_mb_s"])')
  echo "service tls=$tls $svc transport_1MiB=${tr}MB/s ratio=$(echo "$svc" | python3 -c "import json,sys; print('%.2f' % (json.load(sys.stdin)['bandwidth_mb_s']/$tr))")"
done
