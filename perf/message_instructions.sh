#!/bin/bash
# Instructions per call of the UCX message path, in both processes of `sluice-perf transport`
# (8-byte RPCs and bare messages, caller progress, shared memory), counted by callgrind.
# The count is deterministic where a 2-vCPU VM's wall clock moves by a third between runs;
# what polling costs while waiting is left out (it depends on timing), what each message
# costs is in. UCX's own functions are listed beside Sluice's for scale.
#
#   perf/message_instructions.sh [BUILD_DIR]   # one table per process: calls, Ir per call
set -euo pipefail
build=${1:-build}
command -v valgrind >/dev/null || { echo "message_instructions.sh: needs valgrind" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
UCX_TLS=posix,sysv,cma,self valgrind --tool=callgrind --trace-children=yes \
  --compress-strings=no --callgrind-out-file="$dir/out.%p" "$build/tools/sluice-perf" transport \
  --size 65536 --iterations 10 --latency-iterations 20000 --progress caller --json \
  >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; exit 1; }
for out in "$dir"/out.*; do
  # Each call site is "cfn=NAME", then "calls=N ...", then "LINE INCLUSIVE": summed by callee.
  awk '
    /^cfn=/ { callee = substr($0, 5); next }
    /^calls=/ { split($1, c, "="); n = c[2]; getline; calls[callee] += n; ir[callee] += $2 }
    END {
      client = 0
      for (f in calls) if (index(f, "RpcEndpoint::Call(") > 0) client = 1
      print client ? "client: sends requests, handles replies on the calling thread" \
                   : "server: replies from inside UCX callbacks (inline handlers)"
      n = split("UcxTransport::Send(|UcxTransport::DoSend(|UcxTransport::SendAtOnce(|UcxTransport::IssueSend(|UcxTransport::OnSendComplete(|UcxTransport::RunDeferred(|UcxTransport::OnActiveMessage(|RpcEndpoint::SendFrame(|RpcEndpoint::OnMessage(|MessageEchoServer::OnMessage(|ucp_am_send_nbx|ucp_am_handler", want, "|")
      for (i = 1; i <= n; ++i) {
        for (f in calls) {
          if (index(f, want[i]) == 0 || index(f, "_Function_handler") > 0 || calls[f] < 1000) continue
          name = want[i]; sub(/\($/, "", name)
          printf "  %-32s %9d calls %7.0f Ir/call\n", name, calls[f], ir[f] / calls[f]
        }
      }
    }' "$out"
done
