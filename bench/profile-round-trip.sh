#!/bin/sh
# Runs inside the test VM (or on a host with the device): what one 64 B round trip
# of rdma_asio::stream costs, both ends in one process (stream_throughput
# --round-trip), in user-space instructions (callgrind) and system calls
# (strace -f -c). Each is the difference of a short and a long run over the round
# trips between them, so that start-up and the warm-up cancel out. Prints one
# line each; keeps callgrind's files in OUT_DIR for callgrind_annotate.
#
#   profile-round-trip.sh BUILD_DIR OUT_DIR [SHORT LONG]   (default 1000 3000)
#
# Environment: PROFILE_ADDRESS (10.0.0.1: rxe0's address in the test VM),
# PROFILE_SIZE (64), PROFILE_ARGS (more stream_throughput options, e.g. "--spin 10").
set -eu
build=$1 out=$2 short=${3:-1000} long=${4:-3000}
address=${PROFILE_ADDRESS:-10.0.0.1}
size=${PROFILE_SIZE:-64}
bin=$build/bench/stream_throughput
mkdir -p "$out"
port=19900

# stream_throughput adds a tenth of its count as warm-up: the long run has
# (long - short) * 1.1 round trips more than the short one.
trips=$(((long - short) * 11 / 10))

run() { # TOOL N: one run under TOOL (callgrind or strace)
    port=$((port + 1))
    case $1 in
    callgrind)
        valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$2" \
            "$bin" -a "$address" -p "$port" -s "$size" -n "$2" -r 1 --round-trip \
            ${PROFILE_ARGS:-} >"$out/run.callgrind.$2" 2>&1
        ;;
    strace)
        strace -f -c -o "$out/strace.$2" \
            "$bin" -a "$address" -p "$port" -s "$size" -n "$2" -r 1 --round-trip \
            ${PROFILE_ARGS:-} >"$out/run.strace.$2" 2>&1
        ;;
    esac
}
total() { # the instructions a callgrind file counts
    sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$1" | head -n 1
}

for n in "$short" "$long"; do
    run callgrind "$n"
    run strace "$n"
done
a=$(total "$out/callgrind.$short")
b=$(total "$out/callgrind.$long")
echo "instructions per round trip: $(((b - a) / trips)) ($trips round trips between runs of $short and $long)"
printf 'system calls per round trip: '
awk -f "$(dirname "$0")/strace-difference.awk" -v n="$trips" "$out/strace.$short" "$out/strace.$long"
echo
