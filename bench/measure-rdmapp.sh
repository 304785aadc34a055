#!/bin/sh
# Runs inside the test VM (or on a host with the device): qp_throughput -o's traffic
# (one co_await per operation) through rdma_asio, through rdmapp
# (bench/rdmapp_throughput.cpp, built by bench/run.sh when RDMAPP_DIR is set) and
# through the plain C loop, at 1 and 64 in flight, in interleaved rounds (one run
# of each per round, so that drift in the emulator's speed hits all three alike).
# Writes a Markdown table to OUT, preceded by the commands that made it.
#
#   measure-rdmapp.sh BUILD_DIR RDMAPP_THROUGHPUT OUT
#
# Environment (defaults): BENCH_ROUNDS (7), BENCH_MESSAGES (100000 per run),
# RDMA_ASIO_TEST_DEVICE (rxe0; rdmapp takes the first device, which in the test VM
# is rxe0).
set -eu
build=$1 rdmapp=$2 out=$3
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
rounds=${BENCH_ROUNDS:-7}
messages=${BENCH_MESSAGES:-100000}
bin=$build/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/device-measures.sh"


# The first connection after boot may wait for the peer's address (RoCE): rdmapp's
# RTR then fails with ETIMEDOUT. A short run first, whose outcome is not counted.
"$rdmapp" -i 1 1000 >/dev/null 2>&1 || true
"$bin/qp_throughput" -o -i 1 1000 >/dev/null 2>&1 || true

echo "measuring rdma_asio, rdmapp and the C loop ($rounds rounds of $messages messages)..." >&2
round=1
while [ "$round" -le "$rounds" ]; do
    for w in 1 64; do
        run_rate "c_$w" "$bin/epoll_throughput" -i "$w" "$messages"
        run_rate "o_$w" "$bin/qp_throughput" -o -i "$w" "$messages"
        run_rate "r_$w" "$rdmapp" -i "$w" "$messages"
    done
    round=$((round + 1))
done

msgs() { column "$1" 1 | median | awk '{ printf "%.0f", $1 / 2 }'; } # completions/s to messages/s
range() { column "$1" 1 | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo / 2, hi / 2 }'; }

{
    echo "Commands (one round; $rounds rounds, interleaved):"
    echo
    echo '```'
    for w in 1 64; do
        echo "$bin/epoll_throughput -i $w $messages"
        echo "$bin/qp_throughput -o -i $w $messages"
        echo "$rdmapp -i $w $messages"
    done
    echo '```'
    echo
    echo "| in flight | rdma_asio messages/s, median (range) | rdmapp messages/s, median (range) | the C loop messages/s, median (range) | rdma_asio / rdmapp per round (min / median / max) | rdma_asio / C per round |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for w in 1 64; do
        echo "| $w | $(msgs "o_$w") ($(range "o_$w")) | $(msgs "r_$w") ($(range "r_$w")) | $(msgs "c_$w") ($(range "c_$w")) | $(rate_spread "o_$w" "r_$w") | $(rate_spread "o_$w" "c_$w") |"
    done
} >"$out"
cat "$out"
