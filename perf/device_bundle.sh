#!/usr/bin/env bash
# Packs what perf/device_pass.sh runs into one folder that runs on an x86-64 Linux host
# without Sluice's Debian packages (a lent GPU machine, a cluster node): the build's
# binaries in the build's own layout with their debug information stripped, the shared
# libraries they load that such a host's C and C++ runtime does not already provide, UCX's
# transport modules, and ucx_perftest and ucx_info for the baselines.
#
#   perf/device_bundle.sh build .device      # here; then, there:
#   source .device/env.sh && perf/device_pass.sh .device/build OUT   # (bash)
#
# glibc, libstdc++, libgcc and zlib stay the host's: they are as new as Debian 12's or newer
# there, and the host's own programs (python3 in the scripts) must keep loading theirs.
# libibverbs travels without its provider plugins (it looks for them in the host's own
# folder), so on a host with an RDMA NIC the bundle's UCX and libfabric see none: the
# bundle is for GPU and many-CPU checks, not for RDMA figures.
set -euo pipefail
build=${1:-build}
out=${2:-.device}
libdir=/usr/lib/x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/build" "$out/lib/ucx" "$out/bin"

binaries=(tools/sluice tools/sluice-perf tests/service_test tests/perf_tool_test)
for b in "$build"/gpu/gpu_*_test "$build"/gpu/gpu_*_benchmark; do
  [ -x "$b" ] && binaries+=("${b#"$build"/}")
done
for b in "${binaries[@]}"; do
  mkdir -p "$out/build/$(dirname "$b")"
  strip --strip-debug -o "$out/build/$b" "$build/$b"
done
cp /usr/bin/ucx_perftest /usr/bin/ucx_info "$out/bin/"
# UCX loads its transport modules from the folder `ucx` beside libucs (or UCX_MODULE_DIR).
cp -L "$libdir"/ucx/libuct_*.so.0 "$out/lib/ucx/"

keep_host='^(linux-vdso|ld-linux|libc\.|libm\.|libstdc\+\+|libgcc_s|libpthread|libdl\.|librt\.|libz\.)'
for f in "$out"/build/*/* "$out"/bin/* "$out"/lib/ucx/*; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ "$name" =~ $keep_host ]]; then cp -L "$path" "$out/lib/$name"; fi
done

cat >"$out/env.sh" <<'ENV'
# Sourced by bash on the host that runs the bundle: its libraries and tools first.
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$bundle/lib/ucx"
export PATH="$bundle/bin:$bundle/build/tools:$PATH"
ENV
du -sh "$out" | awk '{print "bundle: " $1}'
