#!/bin/sh
# Runs inside the test VM (or on a host with the device): measures latency,
# throughput and instructions per completion side by side (throughput in
# measure-throughput.sh), and writes a Markdown report to OUT.
#
#   measure.sh BUILD_DIR OUT
set -eu
build=$1 out=$2
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
iters=${BENCH_ITERS:-5000}
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

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# Latency programs, measured in interleaved rounds: one run of each per round, so
# that drift in the emulator's speed hits all of them alike. Single runs under
# emulation vary by tens of percent; the table gives medians over the rounds and
# the spread of the per-round ratio to `ibv_rc_pingpong -e`.
rounds=${BENCH_ROUNDS:-7}
set -- \
    "ref_e|ibv_rc_pingpong -e" \
    "ref_poll|ibv_rc_pingpong" \
    "ours_co|$build/samples/rc_pingpong" \
    "ours_cb|$build/samples/rc_pingpong_callbacks" \
    "ours_spin|$build/samples/rc_pingpong --spin=100" \
    "ours_adaptive|$build/samples/rc_pingpong --adaptive-spin=100"
echo "measuring latency ($rounds rounds of $iters round trips of 64 bytes each)..." >&2
round=1
while [ $round -le $rounds ]; do
    for entry in "$@"; do
        name=${entry%%|*}
        latency_once ${entry#*|} >>"$tmp/lat.$name"
    done
    round=$((round + 1))
done
lat() { median <"$tmp/lat.$1"; }
# min / median / max of the per-round ratio of program $1 to program $2
spread() {
    paste "$tmp/lat.$1" "$tmp/lat.$2" | awk '{ printf "%.2f\n", $1 / $2 }' | sort -n >"$tmp/r"
    echo "$(head -n 1 "$tmp/r") / $(median <"$tmp/r") / $(tail -n 1 "$tmp/r")"
}
row() { # name, label
    echo "| $2 | $(lat "$1") | $(spread "$1" ref_e) | $(spread "$1" ref_poll) |"
}

{
    echo "| round-trip latency, 64 B, $iters iterations, $rounds interleaved rounds | µs per round trip (median) | per-round ratio to \`ibv_rc_pingpong -e\` (min / median / max) | per-round ratio to busy polling (min / median / max) |"
    echo "| --- | --- | --- | --- |"
    row ref_e "\`ibv_rc_pingpong -e\` (blocking events)"
    row ref_poll "\`ibv_rc_pingpong\` (busy polling)"
    row ours_co "rdma_asio \`rc_pingpong\` (coroutines)"
    row ours_cb "rdma_asio \`rc_pingpong_callbacks\`"
    row ours_spin "rdma_asio \`rc_pingpong --spin=100\`"
    row ours_adaptive "rdma_asio \`rc_pingpong --adaptive-spin=100\`"
} >"$out"
"$(dirname "$0")/measure-throughput.sh" "$build" "$tmp/throughput.md" && { echo; cat "$tmp/throughput.md"; } >>"$out"
cat "$out"
