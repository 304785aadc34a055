#!/bin/sh
# Runs inside the test VM (or on a host with the device): measures latency,
# throughput and instructions per completion side by side, and writes a Markdown
# report to OUT.
#
#   measure.sh BUILD_DIR OUT
set -eu
build=$1 out=$2
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
iters=${BENCH_ITERS:-5000}
messages=${BENCH_MESSAGES:-100000}
port=18700
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# usec/iter of one client/server run of a pingpong program with the given options.
latency_once() {
    prog=$1; shift
    port=$((port + 1))
    $prog -d "$device" -g 1 -s 64 -n "$iters" -p $port "$@" >"$tmp/server" 2>&1 &
    pid=$!
    while ! ss -ltn | grep -q ":$port "; do sleep 0.05; done
    $prog -d "$device" -g 1 -s 64 -n "$iters" -p $port "$@" 127.0.0.1 >"$tmp/client" 2>&1
    wait $pid
    sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' "$tmp/client"
}

# The median of three runs: single runs under emulation vary by tens of percent.
latency() {
    for run in 1 2 3; do latency_once "$@"; done | sort -n | sed -n 2p
}

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

echo "measuring latency ($iters round trips of 64 bytes each)..." >&2
ref_e=$(latency ibv_rc_pingpong -e)
ref_poll=$(latency ibv_rc_pingpong)
ours_co=$(latency "$build/samples/rc_pingpong")
ours_cb=$(latency "$build/samples/rc_pingpong_callbacks")
ours_spin=$(latency "$build/samples/rc_pingpong" --spin=100)
ours_adaptive=$(latency "$build/samples/rc_pingpong" --adaptive-spin=100)

echo "measuring throughput ($messages messages, 64 in flight)..." >&2
set -- $(rate "$build/bench/epoll_throughput"); c_rate=$1 c_events=$2 c_acks=$3
set -- $(rate "$build/bench/cq_throughput"); a_rate=$1 a_events=$2 a_acks=$3

echo "counting instructions (callgrind)..." >&2
c_ipc=$(instructions_per_completion "$build/bench/epoll_throughput")
a_ipc=$(instructions_per_completion "$build/bench/cq_throughput")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
per_event() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "no events" }'; }

{
    echo "| round-trip latency, 64 B, $iters iterations | µs per round trip | ratio to \`ibv_rc_pingpong -e\` | ratio to busy polling |"
    echo "| --- | --- | --- | --- |"
    echo "| \`ibv_rc_pingpong -e\` (blocking events) | $ref_e | 1.00 | $(ratio "$ref_e" "$ref_poll") |"
    echo "| \`ibv_rc_pingpong\` (busy polling) | $ref_poll | $(ratio "$ref_poll" "$ref_e") | 1.00 |"
    echo "| rdma_asio \`rc_pingpong\` (coroutines) | $ours_co | $(ratio "$ours_co" "$ref_e") | $(ratio "$ours_co" "$ref_poll") |"
    echo "| rdma_asio \`rc_pingpong_callbacks\` | $ours_cb | $(ratio "$ours_cb" "$ref_e") | $(ratio "$ours_cb" "$ref_poll") |"
    echo "| rdma_asio \`rc_pingpong --spin=100\` | $ours_spin | $(ratio "$ours_spin" "$ref_e") | $(ratio "$ours_spin" "$ref_poll") |"
    echo "| rdma_asio \`rc_pingpong --adaptive-spin=100\` | $ours_adaptive | $(ratio "$ours_adaptive" "$ref_e") | $(ratio "$ours_adaptive" "$ref_poll") |"
    echo
    echo "| throughput, 64 B sends, 64 in flight, $messages messages | completions/s | ratio to plain C | CQ events | ack calls | ack calls per event | instructions per completion |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    echo "| plain C epoll loop (\`bench/epoll_throughput.c\`) | $c_rate | 1.00 | $c_events | $c_acks | $(per_event "$c_acks" "$c_events") | $c_ipc |"
    echo "| rdma_asio coroutines (\`bench/cq_throughput.cpp\`) | $a_rate | $(ratio "$a_rate" "$c_rate") | $a_events | $a_acks | $(per_event "$a_acks" "$a_events") | $a_ipc |"
} >"$out"
cat "$out"
