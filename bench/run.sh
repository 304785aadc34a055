#!/bin/sh
# The benchmark command: builds, then measures in one test-VM boot on rxe (or on
# this host with --direct) and writes the table to docs/performance.md.
#
#   bench/run.sh [--direct]
set -eu
cd "$(dirname "$0")/.."
build=${RDMA_ASIO_BUILD_DIR:-build-bench} # its own tree: RelWithDebInfo
scripts/install-deps
command -v valgrind >/dev/null || echo "bench: valgrind missing: no instruction counts (apt-get install valgrind)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)"
mkdir -p "$build/bench"
report=$build/bench/performance-table.md
# The dispatcher alone on this host (no device, no VM), before the VM takes the CPUs.
host_report=$build/bench/performance-host.md
bench/measure-host.sh "$build" "$host_report"
if [ "${1:-}" = --direct ]; then
    bench/measure.sh "$build" "$report"
else
    "$build/vm/run" --timeout 3000 -- bench/measure.sh "$build" "$report"
fi
kernel=$(cat "$build/vm/guest/kernel-version" 2>/dev/null || uname -r)
{
    cat bench/performance-header.md
    echo
    echo "Measured $(date -u +%Y-%m-%d) with \`bench/run.sh\`: soft-RoCE (rxe0 loopback), kernel $kernel,"
    echo "qemu TCG with 2 vCPUs on a 2-core host, RelWithDebInfo build."
    echo
    cat "$report"
    echo
    echo "## The dispatcher alone, on the host"
    echo
    cat "$host_report"
} >docs/performance.md
if [ -f "${host_report%.md}-callgrind.md" ]; then
    cp "${host_report%.md}-callgrind.md" docs/performance-host-callgrind.md
fi
echo "bench: wrote docs/performance.md"
