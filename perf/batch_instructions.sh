#!/bin/bash
# Instructions per batch on the fetch path of `sluice-perf service` (one worker, one client,
# small batches, shared memory), counted by callgrind in the worker and the client: where a
# 2-vCPU VM's batches/s move by a third between runs, these counts move by a few percent, so
# a change to the per-batch work can be compared. Each figure is a function's inclusive count
# divided by the batches served; UCX's own work and the pipeline's are left out. The last
# line of each table counts operator new calls per batch in that process (every thread, the
# worker's pipeline included).
#
#   perf/batch_instructions.sh [BUILD_DIR] [SECONDS] [BATCH_BYTES]
#   SLUICE_KEEP_CALLGRIND=DIR perf/batch_instructions.sh ...   # keeps worker.cg, client.cg
set -euo pipefail
build=${1:-build}
seconds=${2:-8}
batch_bytes=${3:-256}
command -v valgrind >/dev/null || { echo "batch_instructions.sh: needs valgrind" >&2; exit 2; }
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
export UCX_TLS=posix,sysv,cma,self
"$build/tools/sluice" dispatcher --port 0 --host 127.0.0.1 >"$dir/dispatcher" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q "listening on" "$dir/dispatcher" && break; sleep 0.2; done
address=$(grep -o 'ucx://[0-9.]*:[0-9]*' "$dir/dispatcher" | head -1)
[ -n "$address" ] || { cat "$dir/dispatcher" >&2; exit 1; }
slab_bytes=$((batch_bytes + 65536))
valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$dir/worker.cg" \
  "$build/tools/sluice" worker --dispatcher "$address" --host 127.0.0.1 \
  --advertise-host 127.0.0.1 --slab-bytes "$slab_bytes" --slabs 12 --buffer-batches 4 \
  >"$dir/worker" 2>&1 &
worker=$!
pids+=($worker)
for _ in $(seq 150); do grep -q "serving at" "$dir/worker" && break; sleep 0.2; done
grep -q "serving at" "$dir/worker" || { echo "worker did not start:" >&2; cat "$dir/worker" >&2; exit 1; }
elements=$((batch_bytes / 8))
valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$dir/client.cg" \
  "$build/tools/sluice-perf" service-client --dispatcher "$address" \
  --pipeline "range($elements) | batch($elements) | take(1) | cache() | repeat()" --mode off \
  --seconds "$seconds" --slab-bytes "$slab_bytes" --max-outstanding 8 \
  --max-bytes-in-flight 4194304 --device -1 --progress caller --wait-spin auto \
  >"$dir/client.json" 2>"$dir/client.err" || { cat "$dir/client.err" >&2; exit 1; }
kill -TERM "$worker"  # the worker exits cleanly on SIGTERM, and callgrind writes its counts
wait "$worker" 2>/dev/null || true
[ -s "$dir/worker.cg" ] || { echo "callgrind wrote no counts for the worker" >&2; exit 1; }
batches=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["batches"])' \
  "$dir/client.json")
if [ -n "${SLUICE_KEEP_CALLGRIND:-}" ]; then
  mkdir -p "$SLUICE_KEEP_CALLGRIND"
  cp "$dir/worker.cg" "$dir/client.cg" "$SLUICE_KEEP_CALLGRIND/"
fi
echo "batches $batches (${batch_bytes}-byte batches, ${seconds} s under callgrind)"
report() {  # CALLGRIND_FILE NAME... -> "NAME instructions_per_batch"
  # Each call site is "cfn=NAME", then "calls=N ...", then "LINE INCLUSIVE": summed by callee,
  # for the function itself (not a lambda or a template naming it in its arguments).
  python3 - "$batches" "$@" <<'PY'
import sys
batches, path, names = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
totals = dict.fromkeys(names, 0)
callee, take = None, False
for line in open(path, errors="replace"):
    if line.startswith("cfn="):
        callee = next((n for n in names if line[4:].startswith(n + "(")), None)
    elif line.startswith("calls="):
        take = callee is not None
    elif take:
        totals[callee] += int(line.split()[1])
        take = False
for name in names:
    print(f"  {name:<55} {totals[name] / batches:>8.0f}")
PY
}
allocations() {  # CALLGRIND_FILE -> operator new calls per batch, all threads
  python3 - "$batches" "$1" <<'PY'
import sys
batches, path = int(sys.argv[1]), sys.argv[2]
calls, callee_new = 0, False
for line in open(path, errors="replace"):
    if line.startswith("cfn="):
        callee_new = line[4:].startswith("operator new(")
    elif line.startswith("calls=") and callee_new:
        calls += int(line.split()[0][6:])
print(f"  {'operator new calls per batch (every thread)':<55} {calls / batches:>8.2f}")
PY
}
echo "worker (instructions per batch, inclusive)"
report "$dir/worker.cg" sluice::control::Worker::HandleGetElement \
  sluice::proto::GetElementRequest::_InternalParse sluice::control::TaskRunner::MatchRequests \
  sluice::control::TaskRunner::KeepUntilAcknowledged sluice::control::TaskRunner::Reply
allocations "$dir/worker.cg"
echo "client"
report "$dir/client.cg" sluice::control::BatchReader::Fetch \
  sluice::transport::RpcEndpoint::ConnectTo sluice::control::BatchReader::OnTaskFetched \
  sluice::transport::RpcEndpoint::OnMessage sluice::control::BatchReader::OnFetched \
  sluice::control::BatchReader::HandOutInOrder sluice::engine::BatchView::Parse
allocations "$dir/client.cg"
