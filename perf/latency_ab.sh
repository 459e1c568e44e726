#!/usr/bin/env bash
# Small-message latency of two builds of Sluice, against ucx_perftest's ucp_am_lat, in
# alternating runs (a shared VM drifts by a third between minutes, so A and B take turns).
# One line per round with one-way microseconds; medians and bests at the end.
#
#   perf/latency_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR [RUNS] [UCX_TLS]
#   perf/latency_ab.sh /tmp/old/build build 15 posix,sysv,cma,self
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,7p' "$0" >&2; exit 2; }
old="$1/tools/sluice-perf"
new="$2/tools/sluice-perf"
runs=${3:-15}
export UCX_TLS=${4:-posix,sysv,cma,self}
for binary in "$old" "$new"; do
  [ -x "$binary" ] || { echo "latency_ab.sh: no $binary" >&2; exit 2; }
done
port=$((30000 + RANDOM % 10000))
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

am_lat() {  # PORT -> ucp_am_lat's mean one-way latency in us, as Sluice's figures are means
  # (the Final line: iterations, median, average, overall average, ...)
  timeout 60 ucx_perftest -p "$1" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  timeout 60 ucx_perftest 127.0.0.1 -p "$1" -t ucp_am_lat -s 8 -n 50000 -w 100 2>/dev/null |
    awk '/^Final:/ {print $4}'
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
sluice_lat() {  # BINARY -> "RPC BARE" one-way us
  timeout 120 "$1" transport --size 65536 --iterations 10 --latency-iterations 50000 \
    --progress caller --json | python3 -c 'import json, sys; d = json.load(sys.stdin)
print("%.3f %.3f" % (d["latency_us"], d["message_latency_us"]))'
}

echo "# $(date -u +%FT%TZ) UCX_TLS=$UCX_TLS, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ucp_am_lat | old RPC, bare message | new RPC, bare message (one-way us)"
for round in $(seq "$runs"); do
  row="$(am_lat $((port + round))) $(sluice_lat "$old") $(sluice_lat "$new")"
  # A run that failed printed nothing: its round is dropped, not half-counted.
  if [[ $row =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9.]+$ ]]; then
    echo "$row" | tee -a "$rows"
  else
    echo "round $round dropped (a run failed): '$row'" >&2
  fi
done
[ -s "$rows" ] || { echo "latency_ab.sh: every round failed" >&2; exit 1; }
python3 - "$rows" <<'PY'
import statistics, sys
columns = list(zip(*[map(float, line.split()) for line in open(sys.argv[1]) if line.strip()]))
names = ["ucp_am_lat", "old RPC", "old bare", "new RPC", "new bare"]
for name, values in zip(names, columns):
    print(f"{name:>10}: median {statistics.median(values):.3f} us, best {min(values):.3f}")
am = statistics.median(columns[0])
for name, values in zip(names[1:], columns[1:]):
    print(f"{name:>10} / ucp_am_lat: median {statistics.median(values) / am:.2f}, "
          f"best {min(values) / min(columns[0]):.2f}")
PY
