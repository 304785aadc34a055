#!/bin/sh
# Runs inside the test VM (or on a host with the device): measures latency,
# throughput and instructions per message side by side, each part in its own
# script (measure-latency.sh, measure-throughput.sh: their settings are there),
# and writes one Markdown report to OUT.
#
#   measure.sh BUILD_DIR OUT
set -eu
build=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Latency in both of ibv_rc_pingpong's modes, spin budgets and idle CPU.
"$(dirname "$0")/measure-latency.sh" "$build" "$tmp/latency.md"
# Throughput against the plain C loop, and the cost per event from 1 to 256 CQs.
"$(dirname "$0")/measure-throughput.sh" "$build" "$tmp/throughput.md"
{
    cat "$tmp/latency.md"
    echo
    cat "$tmp/throughput.md"
} >"$out"
