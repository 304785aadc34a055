#!/bin/sh
# The benchmark command: builds, then measures in the test VM on rxe (or on this
# host with --direct) and writes the tables to docs/performance-figures.md.
#
#   bench/run.sh [--direct | --help]
#
# With RDMAPP_DIR set to a checkout of github.com/howardlau1999/rdmapp that you
# fetched (the project ships none of its code), it also builds that library and
# bench/rdmapp_throughput.cpp against it, and measures one co_await per operation
# through rdma_asio, rdmapp and the C loop in the same boot (bench/measure-rdmapp.sh).
#
# A byte stream, rdma_asio::stream against rsocket's rstream (rdmacm-utils) and an
# Asio TCP stream, runs in a boot of its own (bench/measure-stream.sh; its STREAM_*
# settings reach the guest).
#
# Asio's epoll and io_uring backends are compared on the host (bench/measure-backends.sh)
# with Boost 1.83 (scripts/fetch-boost), in two more trees, BUILD_DIR-epoll and
# BUILD_DIR-io_uring.
#
# Settings: RDMA_ASIO_BUILD_DIR (build-bench), BENCH_TIMEOUT (5400 s for the guest
# part), and the BENCH_*, LAT_*, IDLE_* and STREAM_* settings of measure-latency.sh,
# measure-throughput.sh and measure-stream.sh, which reach the guest.
set -eu
cd "$(dirname "$0")/.."
case "${1:-}" in
-h | --help) sed -n '2,/^set /s/^# \{0,1\}//p' bench/run.sh && exit 0 ;;
esac
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
# Asio's two backends side by side on the host, with the same Asio: Boost 1.83
# (scripts/fetch-boost; Debian 12's own Asio is too old for io_uring), built twice.
boost_1_83=$(scripts/fetch-boost)
for backend in epoll io_uring; do
    uring=OFF
    [ "$backend" = io_uring ] && uring=ON
    cmake -S . -B "$build-$backend" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMA_ASIO_ASIO=boost \
        -DRDMA_ASIO_IO_URING=$uring -DBoost_DIR="$boost_1_83" \
        -DRDMA_ASIO_BUILD_TESTS=OFF >/dev/null
    cmake --build "$build-$backend" -j "$(nproc)" -t dispatcher_throughput cq_throughput rc_pingpong
done
backends_report=$build/bench/performance-backends.md
bench/measure-backends.sh "$build-epoll" "$build-io_uring" "$backends_report"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)
backends_device_report=$build/bench/performance-backends-device.md
stream_report=$build/bench/performance-stream.md
if [ "${1:-}" = --direct ]; then
    bench/measure.sh "$build" "$report"
    bench/measure-backends-device.sh "$build-epoll" "$build-io_uring" "$backends_device_report"
    bench/measure-stream.sh "$build" "$stream_report"
else
    # The guest sees only the settings named on its command line: pass on the
    # BENCH_*, LAT_*, IDLE_* and STREAM_* ones of the measure scripts.
    set --
    for name in $(env | sed -n 's/^\(\(BENCH\|LAT\|IDLE\|STREAM\)_[A-Z_]*\)=.*/\1/p'); do
        eval "set -- \"\$@\" \"$name=\$$name\""
    done
    # The timeout leaves room for the default settings on a busy host.
    "$build/vm/run" --timeout "${BENCH_TIMEOUT:-5400}" -- env "$@" bench/measure.sh "$build" "$report"
    # A boot of its own (the guest gets one command line, words only).
    "$build/vm/run" --timeout "${BENCH_TIMEOUT:-5400}" -- env "$@" \
        bench/measure-backends-device.sh "$build-epoll" "$build-io_uring" "$backends_device_report"
    # The byte stream against rstream and TCP: all three in this one boot.
    "$build/vm/run" --timeout "${BENCH_TIMEOUT:-5400}" -- env "$@" \
        bench/measure-stream.sh "$build" "$stream_report"
fi
rdmapp_report=$build/bench/performance-rdmapp.md
rm -f "$rdmapp_report"
if [ -n "${RDMAPP_DIR:-}" ]; then
    cmake -S "$RDMAPP_DIR" -B "$build-rdmapp" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DRDMAPP_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build "$build-rdmapp" -j "$(nproc)"
    ${CXX:-g++} -std=c++20 -O2 -g -I"$RDMAPP_DIR/include" bench/rdmapp_throughput.cpp \
        "$build-rdmapp/librdmapp.a" -libverbs -lpthread -o "$build/bench/rdmapp_throughput"
    if [ "${1:-}" = --direct ]; then
        bench/measure-rdmapp.sh "$build" "$build/bench/rdmapp_throughput" "$rdmapp_report"
    else
        "$build/vm/run" --timeout "${BENCH_TIMEOUT:-5400}" -- env "$@" \
            bench/measure-rdmapp.sh "$build" "$build/bench/rdmapp_throughput" "$rdmapp_report"
    fi
fi
minutes=$((($(date +%s) - started + 59) / 60))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kernel=$(cat "$build/vm/guest/kernel-version" 2>/dev/null || uname -r)
{
    cat bench/performance-header.md
    echo
    echo "Measured $(date -u +%Y-%m-%d) with \`bench/run.sh\`: soft-RoCE (rxe0 loopback), kernel $kernel,"
    echo "qemu TCG with 2 vCPUs on a $(nproc)-core host, RelWithDebInfo build. The device part took"
    echo "$minutes minutes; the host's load average (1, 5, 15 min) was $load_before before it and"
    echo "$load_after after it."
    echo
    cat "$report"
    echo
    echo "## The dispatcher alone, on the host"
    echo
    cat "$host_report"
    echo
    echo "## Asio's backends, epoll and io_uring"
    echo
    cat "$backends_device_report"
    echo
    echo "### The dispatcher on the host"
    echo
    cat "$backends_report"
    echo
    echo "## A byte stream: rdma_asio::stream, rstream and TCP"
    echo
    cat "$stream_report"
    if [ -f "$rdmapp_report" ]; then
        echo
        echo "## One co_await per operation: rdma_asio, rdmapp and the C loop"
        echo
        cat "$rdmapp_report"
    fi
} >docs/performance-figures.md
if [ -f "${host_report%.md}-callgrind.md" ]; then
    cp "${host_report%.md}-callgrind.md" docs/performance-host-callgrind.md
fi
echo "bench: wrote docs/performance-figures.md"
