#!/usr/bin/env bash
# Caller-driven against thread progress for readers, with and without a consumer's step per
# batch (`sluice-perf service --step`): the figures behind `--progress auto`'s choice. Runs of
# the two modes alternate; each line is one run, and the summary gives each case's median.
#
#   perf/progress_modes.sh build [runs] [seconds]     # e.g. on a many-CPU host: 2 2
#
# Cases: 4 KiB, 64 KiB and 1 MiB batches, 1 worker -> 1 client, with steps of 0, 50 us and
# 500 us, then 64 KiB from 2 workers to 2 clients without a step. A step keeps the reader's CPU
# busy while it holds the batch, so a reader that drives its own transport cannot drive it
# meanwhile; `input_wait_fraction` is the share of the clients' time spent waiting in Next().
# BUDGET (seconds, default 420) bounds the whole run: cases that would start later are skipped.
set -uo pipefail
build=${1:-build}
runs=${2:-2}
seconds=${3:-2}
budget=${BUDGET:-420}
perf=$build/tools/sluice-perf
started=$(date +%s)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cpus ($(taskset -pc $$ 2>/dev/null | sed 's/.*: //') usable)," \
  "UCX_TLS=${UCX_TLS:-unset}, ${runs} runs of ${seconds} s per mode and case"
echo "# case progress run: batches/s input_wait_fraction p50_us p99_us"

one() {  # one CASE PROGRESS RUN ARGS...
  local name=$1 progress=$2 run=$3
  shift 3
  local r
  r=$(timeout $((seconds + 60)) "$perf" service --seconds "$seconds" --progress "$progress" \
    --json "$@" 2>/dev/null) || { echo "$name $progress $run: failed"; return; }
  local line
  line=$(echo "$r" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.0f %.3f %.1f %.1f" % (r["batches_per_s"], r["input_wait_fraction"], r["p50_us"], r["p99_us"]))')
  echo "$name $progress $run: $line"
  echo "$name $progress $line" >>"$results"
}

cases=()
for size in 4KiB 64KiB 1MiB; do
  for step in 0 50us 500us; do cases+=("$size step=$step|--batch-bytes $size --step $step"); done
done
cases+=("64KiB 2x2 step=0|--batch-bytes 64KiB --workers 2 --clients 2")
for entry in "${cases[@]}"; do
  name=${entry%%|*}
  name=${name// /_}
  read -r -a args <<<"${entry#*|}"
  for run in $(seq "$runs"); do
    if [ $(($(date +%s) - started + 2 * (seconds + 3))) -gt "$budget" ]; then
      echo "$name: skipped, the ${budget} s budget is spent"
      continue 2
    fi
    one "$name" caller "$run" "${args[@]}"
    one "$name" thread "$run" "${args[@]}"
  done
done

echo "# medians: case: caller (batches/s, wait share, p99 us) | thread (same) | caller/thread batches/s"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, mode, *v = line.split()
    rows.setdefault(name, {}).setdefault(mode, []).append([float(x) for x in v])
for name, modes in rows.items():
    med = {m: [statistics.median(col) for col in zip(*vals)] for m, vals in modes.items()}
    c, t = med.get("caller"), med.get("thread")
    fmt = lambda m: "%.0f, %.2f, %.0f" % (m[0], m[1], m[3]) if m else "-"
    ratio = "%.2f" % (c[0] / t[0]) if c and t and t[0] else "-"
    print(f"{name}: {fmt(c)} | {fmt(t)} | {ratio}")
PY
