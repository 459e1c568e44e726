#!/usr/bin/env bash
# `sluice-perf service` from two or more builds in alternating runs (a shared VM drifts by a
# third between minutes, so the builds take turns), one line per run, medians at the end.
# A build is a meson build directory (its tools/sluice-perf and tools/sluice) or a directory
# holding both binaries; `service` starts the `sluice` beside the `sluice-perf` it runs.
#
#   perf/service_ab.sh [-r ROUNDS] BUILD_A BUILD_B [BUILD...] -- SERVICE_ARGS...
#   perf/service_ab.sh -r 6 /tmp/old/build build -- --workers 1 --clients 1 --batch-bytes 4KiB --seconds 3
set -euo pipefail
usage() { sed -n '2,8p' "$0" >&2; exit 2; }
rounds=5
if [ "${1:-}" = "-r" ]; then
  [ $# -ge 2 ] || usage
  rounds=$2
  shift 2
fi
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds+=("$1"); shift; done
[ "${1:-}" = "--" ] || usage
shift
[ ${#builds[@]} -ge 2 ] || usage
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "service_ab.sh: ROUNDS must be a positive integer" >&2; exit 2; }

binaries=()
for build in "${builds[@]}"; do
  if [ -x "$build/tools/sluice-perf" ]; then
    binaries+=("$build/tools/sluice-perf")
  elif [ -x "$build/sluice-perf" ]; then
    binaries+=("$build/sluice-perf")
  else
    echo "service_ab.sh: no sluice-perf in $build or $build/tools" >&2
    exit 2
  fi
done

rows=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$rows" "$errors"' EXIT
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): sluice-perf service $*"
for round in $(seq "$rounds"); do
  for i in "${!binaries[@]}"; do
    json=$("${binaries[$i]}" service "$@" --json 2>"$errors") || {
      echo "service_ab.sh: ${builds[$i]} failed in round $round; its stderr:" >&2
      cat "$errors" >&2
      exit 1
    }
    printf '%s\n' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], round(d["batches_per_s"]), round(d["bandwidth_mb_s"]),
      round(d["p50_us"], 1), round(d["p99_us"], 1))' "$round" "${builds[$i]}" | tee -a "$rows"
  done
done
echo "# medians: build, batches/s, MB/s, p50 us, p99 us"
python3 - "$rows" "${builds[@]}" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for build in sys.argv[2:]:
    mine = [r for r in rows if r[1] == build]
    cols = [statistics.median(float(r[k]) for r in mine) for k in range(2, 6)]
    print(build, *(round(c, 1) if k >= 2 else round(c) for k, c in enumerate(cols)))
EOF
