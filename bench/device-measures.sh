# Shell functions the device benchmarks share (bench/measure-throughput.sh,
# bench/measure-latency.sh, bench/measure-backends-device.sh), sourced with these
# set: device (the RDMA device), tmp (a scratch directory), and for run_once
# base_iters (round trips per run at 64 B to 1 KiB) and port (the last TCP port
# used).

# rxe's per-port counters: rcvd_rnr_err counts RNR NAKs a requester received,
# send_rnr_err those a responder sent, completer_retry_err every retransmission
# (after an RNR NAK or a timeout). They count for the whole device: one program
# runs at a time.
hw=/sys/class/infiniband/$device/ports/1/hw_counters
counter() { cat "$hw/$1" 2>/dev/null || echo x; }
snapshot() { echo "$(counter rcvd_rnr_err) $(counter send_rnr_err) $(counter completer_retry_err)"; }
delta() { # before... after...: the three deltas, or n/a where a counter is missing
    awk -v b="$1" -v a="$2" 'BEGIN { n = split(b, x, " "); split(a, y, " ")
        for (i = 1; i <= n; ++i) printf "%s%s", (x[i] == "x" || y[i] == "x") ? "n/a" : y[i] - x[i], i < n ? " " : "\n" }'
}

. "$(dirname "$0")/statistics.sh" # median, ratios

# Column $2 of run $1's lines (run_rate's figures), one per round.
column() { awk -v c="$2" '{ print $c }' "$tmp/$1"; }
# min / median / max of the per-round ratio of run $1 to run $2 (column 1)
rate_spread() { ratios "$tmp/$1" "$tmp/$2"; }

# One run of a program: appends "rate events rnr_received rnr_sent retries" to
# $tmp/NAME. The rate is the figure before "completions/s" or "messages/s".
run_rate() {
    name=$1; shift
    before=$(snapshot)
    "$@" >"$tmp/line"
    after=$(snapshot)
    rate=$(sed -n 's/.* = \([0-9]*\) [a-z]*\/s, \([0-9]*\) events.*/\1 \2/p' "$tmp/line")
    [ -n "$rate" ] || { echo "bench: no figures from $*" >&2; cat "$tmp/line" >&2; exit 1; }
    echo "$rate $(delta "$before" "$after")" >>"$tmp/$name"
}

iters_for() { # SIZE: round trips per run, so larger messages do not take all day
    awk -v n="$base_iters" -v s="$1" 'BEGIN {
        d = s <= 1024 ? 1 : s <= 4096 ? 2 : s <= 16384 ? 4 : 10
        n = int(n / d); print n < 50 ? 50 : n }'
}

# One server/client run of PROGRAM [MODE_OPTIONS] at SIZE: appends the client's
# µs per round trip to $tmp/lat.NAME and its CQ events per round trip (rdma_asio's
# samples print them) to $tmp/ev.NAME; "-" for a run that failed.
run_once() { # NAME SIZE PROGRAM [OPTIONS...]
    name=$1 size=$2; shift 2
    n=$(iters_for "$size")
    port=$((port >= 19999 ? 19000 : port + 1))
    common="-d $device -g 1 -s $size -n $n -p $port"
    timeout 900 "$@" $common >"$tmp/server" 2>&1 &
    pid=$!
    i=0
    while ! ss -ltn | grep -q ":$port " && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
    timeout 900 "$@" $common 127.0.0.1 >"$tmp/client" 2>&1 || true
    wait $pid || true
    usec=$(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' "$tmp/client")
    if [ -z "$usec" ]; then
        echo "bench: failed: $* $common (server and client output follow)" >&2
        cat "$tmp/server" "$tmp/client" >&2
        usec=-
        echo x >>"$tmp/failures"
    fi
    echo "$usec" >>"$tmp/lat.$name"
    events=$(sed -n 's/^rdma_asio CQ: .* \([0-9]*\) events,.*/\1/p' "$tmp/client")
    awk -v e="$events" -v n="$n" 'BEGIN { print e == "" ? "-" : e / n }' >>"$tmp/ev.$name"
}


# Marginal user-space instructions per message of one program (its command with
# the message count last): the difference between two run lengths, so that setup
# does not count. Only the measured process is counted (bench_peer runs outside
# valgrind: no --trace-children).
instructions() {
    lengths=$1; shift
    command -v valgrind >/dev/null || { echo n/a; return; }
    small=${lengths% *} large=${lengths#* }
    for n in $small $large; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n" "$@" "$n" >/dev/null 2>"$tmp/vg.$n" ||
            { echo "n/a"; return; }
    done
    echo $((($(sed -n 's/^summary: //p' "$tmp/cg.$large") - $(sed -n 's/^summary: //p' "$tmp/cg.$small")) / (large - small)))
}
# Syscalls per message of one program (its command with the message count last):
# `strace -f -c` of two run lengths, the difference (bench/strace-difference.awk).
syscalls_per_message() {
    lengths=$1; shift
    command -v strace >/dev/null || { echo n/a; return; }
    small=${lengths% *} large=${lengths#* }
    for n in $small $large; do
        strace -f -c -o "$tmp/st.$n" "$@" "$n" >/dev/null 2>&1 || { echo "n/a"; return; }
    done
    awk -v n=$((large - small)) -f "$(dirname "$0")/strace-difference.awk" "$tmp/st.$small" "$tmp/st.$large"
}
