#!/bin/sh
# Runs inside the test VM (or on a host with the device): measures latency,
# throughput and instructions per completion side by side, and writes a Markdown
# report to OUT.
#
#   measure.sh BUILD_DIR OUT
set -eu
build=$1 out=$2
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
messages=${BENCH_MESSAGES:-100000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# Latency in both of ibv_rc_pingpong's modes, spin budgets and idle CPU: its own
# script (settings there), its tables first in the report.
"$(dirname "$0")/measure-latency.sh" "$build" "$tmp/latency.md"

rate() { # completions/s, events and ack calls of one throughput run
    "$@" "$messages" | sed -n 's/.* = \([0-9]*\) completions\/s, \([0-9]*\) events, \([0-9]*\) ack calls/\1 \2 \3/p'
}

# Marginal user-space instructions per completion: the difference between two
# runs of different lengths, so that setup is not counted.
instructions_per_completion() {
    prog=$1
    command -v valgrind >/dev/null || { echo "n/a (no valgrind)"; return; }
    small=5000 large=15000
    for n in $small $large; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n" "$prog" $n >/dev/null 2>"$tmp/vg.$n"
    done
    ir_small=$(sed -n 's/^summary: //p' "$tmp/cg.$small")
    ir_large=$(sed -n 's/^summary: //p' "$tmp/cg.$large")
    echo $(((ir_large - ir_small) / (2 * (large - small))))
}


echo "measuring throughput ($messages messages, 64 in flight)..." >&2
set -- $(rate "$build/bench/epoll_throughput"); c_rate=$1 c_events=$2 c_acks=$3
set -- $(rate "$build/bench/cq_throughput"); a_rate=$1 a_events=$2 a_acks=$3

echo "counting instructions (callgrind)..." >&2
c_ipc=$(instructions_per_completion "$build/bench/epoll_throughput")
a_ipc=$(instructions_per_completion "$build/bench/cq_throughput")

per_event() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "no events" }'; }

{
    cat "$tmp/latency.md"
    echo
    echo "| throughput, 64 B sends, 64 in flight, $messages messages | completions/s | ratio to plain C | CQ events | ack calls | ack calls per event | instructions per completion |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    echo "| plain C epoll loop (\`bench/epoll_throughput.c\`) | $c_rate | 1.00 | $c_events | $c_acks | $(per_event "$c_acks" "$c_events") | $c_ipc |"
    echo "| rdma_asio coroutines (\`bench/cq_throughput.cpp\`) | $a_rate | $(ratio "$a_rate" "$c_rate") | $a_events | $a_acks | $(per_event "$a_acks" "$a_events") | $a_ipc |"
} >"$out"
cat "$out"
