#!/bin/sh
# Measures rdma_asio's event dispatcher on this host on both of Asio's backends,
# epoll and io_uring, with the same Asio: bench/dispatcher_throughput built twice
# against one Boost (-DRDMA_ASIO_IO_URING=OFF and ON). Per variant and backend:
# events per second in interleaved rounds, and per event the user-space
# instructions (callgrind) and syscalls (strace). The variants: one event per wait
# cycle (callbacks and coroutines, rdma_asio and the bare stream_descriptor loop;
# bench/dispatcher_throughput.cpp says how), the same woken by another thread, and
# going idle (a wait started and cancelled before any event). Writes a Markdown
# table to OUT.
#
#   measure-backends.sh EPOLL_BUILD_DIR IO_URING_BUILD_DIR OUT
#
# BENCH_HOST_ROUNDS (7), BENCH_HOST_EVENTS (100000), BENCH_HOST_THREAD_EVENTS
# (20000). Prints figures; never fails on a timing.
set -eu
epoll_build=$1 uring_build=$2 out=$3
epoll_prog=$epoll_build/bench/dispatcher_throughput
uring_prog=$uring_build/bench/dispatcher_throughput
rounds=${BENCH_HOST_ROUNDS:-7}
events=${BENCH_HOST_EVENTS:-100000}
thread_events=${BENCH_HOST_THREAD_EVENTS:-20000}
small=5000 large=15000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=$epoll_prog
. "$(dirname "$0")/host-measures.sh"

for p in "$epoll_prog" "$uring_prog"; do
    [ -x "$p" ] || { echo "measure-backends: $p missing (cmake --build BUILD_DIR -t dispatcher_throughput)" >&2; exit 1; }
done
# Which backend a program was built for: Asio's io_uring service is in it or not.
if ! grep -q io_uring_service "$uring_prog" || grep -q io_uring_service "$epoll_prog"; then
    echo "measure-backends: $uring_prog must be built with -DRDMA_ASIO_IO_URING=ON, $epoll_prog without" >&2
    exit 1
fi

variants="bare-cb-typed rdma-cb-typed bare-co-typed rdma-co-typed bare-idle rdma-idle"
threaded="bare-cb-typed rdma-cb-typed"
if ! "$epoll_prog" rdma-idle 1 >/dev/null 2>&1; then
    echo "measure-backends: built without mlx5dv: no devx_eventfd variants" >&2
    variants="bare-cb-typed bare-co-typed bare-idle" threaded="bare-cb-typed"
fi

echo "measure-backends: events per second ($rounds rounds of $events events per variant and backend)..." >&2
ctx_rate=$(context)
set --
for v in $variants; do set -- "$@" "epoll.$v|$epoll_prog $v $events" "uring.$v|$uring_prog $v $events"; done
rounds_of "$@"
echo "measure-backends: events per second with a producer thread ($rounds rounds of $thread_events)..." >&2
ctx_thread=$(context)
set --
for v in $threaded; do
    set -- "$@" "epoll.thread-$v|$epoll_prog $v $thread_events --thread" \
        "uring.thread-$v|$uring_prog $v $thread_events --thread"
done
rounds_of "$@"

echo "measure-backends: instructions and syscalls per event (callgrind, strace)..." >&2
ctx_cost=$(context)
for b in epoll uring; do
    eval "prog=\$${b}_prog"
    for v in $variants; do
        [ -n "$have_valgrind" ] && callgrind_of "$b.$v" "$v"
        [ -n "$have_strace" ] && strace_of "$b.$v" "$v"
    done
    for v in $threaded; do
        [ -n "$have_strace" ] && strace_of "$b.thread-$v" "$v" --thread
    done
done

# The Asio both were built with, as their caches record it.
asio_of() { sed -n 's/^Boost_DIR:[A-Z]*=.*Boost-\([0-9.]*\)$/Boost \1/p' "$1/CMakeCache.txt" 2>/dev/null || true; }
asio=$(asio_of "$epoll_build")
[ "$asio" = "$(asio_of "$uring_build")" ] || asio="$asio and $(asio_of "$uring_build"): not the same Asio"
[ -n "$asio" ] || asio="Boost of unknown version"

{
    echo "\`$0 $epoll_build $uring_build $out\`: \`dispatcher_throughput\` on Asio's epoll and io_uring backends, the same Asio"
    echo "($asio) built twice, \`-DRDMA_ASIO_IO_URING=OFF\` and \`ON\`,"
    echo "\`io_context::executor_type\`. Events per second: the median of $rounds interleaved rounds of"
    echo "$events events (cycles for the idle rows); the ratio is io_uring's rate over epoll's, per round."
    echo "Per event: the difference between a $small- and a $large-event run, user-space instructions"
    echo "from \`valgrind --tool=callgrind\`, syscalls from \`strace -f -c\` (by name where at least 0.05)."
    echo "$ctx_rate"
    echo
    echo "| variant | backend | events/s (median) | io_uring / epoll per round (min / median / max) | instructions per event | syscalls per event |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for v in $variants; do
        echo "| $(label "$v") (\`$v\`) | epoll | $(median <"$tmp/rate.epoll.$v") | | $(ipe "epoll.$v") | $(spe "epoll.$v") |"
        echo "| | io_uring | $(median <"$tmp/rate.uring.$v") | $(spread "uring.$v" "epoll.$v") | $(ipe "uring.$v") | $(spe "uring.$v") |"
    done
    echo
    echo "Woken by another thread (\`--thread\`: the consumer sleeps in the kernel until a second thread"
    echo "writes the event): $rounds interleaved rounds of $thread_events events; syscalls per event"
    echo "include the producer thread's request read and event write. $ctx_thread"
    echo
    echo "| variant | backend | events/s (median) | io_uring / epoll per round (min / median / max) | syscalls per event |"
    echo "| --- | --- | --- | --- | --- |"
    for v in $threaded; do
        echo "| $(label "$v") (\`$v --thread\`) | epoll | $(median <"$tmp/rate.epoll.thread-$v") | | $(spe "epoll.thread-$v") |"
        echo "| | io_uring | $(median <"$tmp/rate.uring.thread-$v") | $(spread "uring.thread-$v" "epoll.thread-$v") | $(spe "uring.thread-$v") |"
    done
} >"$out"
cat "$out"
echo "measure-backends: wrote $out" >&2
