#!/bin/sh
# Runs inside the test VM (or on a host with the device): rdma_asio on Asio's epoll
# and io_uring backends, the same Asio built twice (bench/run.sh builds
# BUILD_DIR-epoll and BUILD_DIR-io_uring against Boost 1.83): completions per second
# of bench/cq_throughput (async_poll in event mode) at 1, 4 and 64 in flight, the
# event-mode round trip of samples/rc_pingpong -e beside ibv_rc_pingpong -e, and at
# 1 in flight (every message waits for a wake-up) and at 64 (it seldom does) the
# user-space instructions and syscalls per message. One run of
# each program per round, interleaved, so that drift in the emulator's speed hits
# both backends alike. Writes Markdown tables to OUT; never fails on a timing.
#
#   measure-backends-device.sh EPOLL_BUILD_DIR IO_URING_BUILD_DIR OUT
#
# Settings: BENCH_ROUNDS (5), BENCH_MESSAGES (20000 per throughput run),
# BENCH_IN_FLIGHT ("1 4 64"), LAT_SIZES ("64 4096"), LAT_ITERS (1000 round trips
# per run up to 1 KiB, half at 4 KiB), BENCH_CALLGRIND ("5000 15000": the two run
# lengths of the instruction and syscall counts), BENCH_COST_IN_FLIGHT ("1 64": where
# they are counted), RDMA_ASIO_TEST_DEVICE (rxe0).
set -eu
epoll_build=$1 uring_build=$2 out=$3
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
rounds=${BENCH_ROUNDS:-5}
messages=${BENCH_MESSAGES:-20000}
in_flight=${BENCH_IN_FLIGHT:-1 4 64}
sizes=${LAT_SIZES:-64 4096}
base_iters=${LAT_ITERS:-1000}
callgrind=${BENCH_CALLGRIND:-5000 15000}
cost_in_flight=${BENCH_COST_IN_FLIGHT:-1 64}
port=19000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/device-measures.sh"

for b in "$epoll_build" "$uring_build"; do
    for p in bench/cq_throughput samples/rc_pingpong; do
        [ -x "$b/$p" ] || { echo "measure-backends-device: $b/$p missing" >&2; exit 1; }
    done
done

round=1
while [ "$round" -le "$rounds" ]; do
    echo "bench: backends round $round of $rounds" >&2
    for w in $in_flight; do
        run_rate "tp.epoll.$w" "$epoll_build/bench/cq_throughput" -i "$w" "$messages"
        run_rate "tp.uring.$w" "$uring_build/bench/cq_throughput" -i "$w" "$messages"
    done
    for s in $sizes; do
        run_once "ref.$s" "$s" ibv_rc_pingpong -e
        run_once "epoll.$s" "$s" "$epoll_build/samples/rc_pingpong" -e
        run_once "uring.$s" "$s" "$uring_build/samples/rc_pingpong" -e
    done
    round=$((round + 1))
done
echo "bench: backends, instructions and syscalls per message" >&2
for b in epoll uring; do
    eval "dir=\$${b}_build"
    for w in $cost_in_flight; do
        instructions "$callgrind" "$dir/bench/cq_throughput" -i "$w" >"$tmp/instr.$b.$w"
        syscalls_per_message "$callgrind" "$dir/bench/cq_throughput" -i "$w" >"$tmp/sys.$b.$w"
    done
done

{
    echo "### Asio's backends on the device: epoll and io_uring"
    echo
    echo "\`$0 $epoll_build $uring_build $out\`: the same programs built twice against one Asio,"
    echo "\`-DRDMA_ASIO_IO_URING=OFF\` and \`ON\`; $rounds interleaved rounds on $device."
    echo
    echo '```'
    for w in $in_flight; do echo "BUILD/bench/cq_throughput -i $w $messages"; done
    for s in $sizes; do
        echo "ibv_rc_pingpong -e -d $device -g 1 -s $s -n $(iters_for "$s") -p PORT  (server; the client adds 127.0.0.1)"
        echo "BUILD/samples/rc_pingpong -e -d $device -g 1 -s $s -n $(iters_for "$s") -p PORT"
    done
    echo '```'
    echo
    echo "| completions in flight | epoll: completions/s (median) | io_uring: completions/s (median) | io_uring / epoll per round (min / median / max) |"
    echo "| --- | --- | --- | --- |"
    for w in $in_flight; do
        echo "| $w | $(median <"$tmp/tp.epoll.$w") | $(median <"$tmp/tp.uring.$w") | $(ratios "$tmp/tp.uring.$w" "$tmp/tp.epoll.$w") |"
    done
    echo
    echo "| size | \`ibv_rc_pingpong -e\`: µs per round trip (median) | \`rc_pingpong -e\` on epoll: µs | on io_uring: µs | io_uring / epoll per round (min / median / max) | epoll / \`ibv_rc_pingpong -e\` | io_uring / \`ibv_rc_pingpong -e\` |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for s in $sizes; do
        echo "| $s B | $(median <"$tmp/lat.ref.$s") | $(median <"$tmp/lat.epoll.$s") | $(median <"$tmp/lat.uring.$s") | $(ratios "$tmp/lat.uring.$s" "$tmp/lat.epoll.$s") | $(ratios "$tmp/lat.epoll.$s" "$tmp/lat.ref.$s") | $(ratios "$tmp/lat.uring.$s" "$tmp/lat.ref.$s") |"
    done
    echo
    echo "Per message (\`cq_throughput -i W N\`, N = ${callgrind% *} and ${callgrind#* }, the difference):"
    echo "user-space instructions (\`valgrind --tool=callgrind\`), syscalls (\`strace -f -c\`)."
    echo
    echo "| in flight W | backend | instructions per message | syscalls per message |"
    echo "| --- | --- | --- | --- |"
    for w in $cost_in_flight; do
        echo "| $w | epoll | $(cat "$tmp/instr.epoll.$w") | $(cat "$tmp/sys.epoll.$w") |"
        echo "| $w | io_uring | $(cat "$tmp/instr.uring.$w") | $(cat "$tmp/sys.uring.$w") |"
    done
    if [ -f "$tmp/failures" ]; then
        echo
        echo "$(wc -l <"$tmp/failures") round-trip runs failed (left out above); bench/run.sh's output has theirs."
    fi
} >"$out"
cat "$out"
