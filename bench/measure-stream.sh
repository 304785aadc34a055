#!/bin/sh
# Runs inside the test VM (or on a host with the device): a byte stream's
# throughput and round trip, rdma_asio::stream (bench/stream_throughput) against
# rsocket's rstream (rdmacm-utils) on the same device and an Asio TCP stream
# (stream_throughput --tcp) over the same address, in interleaved rounds (one run
# of each per round and size); then user-space instructions per byte (callgrind).
# Writes a Markdown report to OUT, with the commands that made it.
#
#   measure-stream.sh BUILD_DIR OUT
#
# Environment (defaults): STREAM_ROUNDS (5), STREAM_SIZES ("64 4096 65536 1048576"),
# STREAM_ADDRESS (10.0.0.1: rxe0's address in the test VM), STREAM_MESSAGES
# (messages per throughput run for each size, "8000 4000 800 50"), STREAM_TRIPS
# (round trips per run for each size, "2500 1000 300 25"; both about a second of
# rdma_asio's traffic under qemu TCG), STREAM_CALLGRIND
# ("1 3": the two run lengths of the instruction counts, as multiples of
# STREAM_CALLGRIND_MESSAGES, "2000 500 40 4" messages for each size).
#
# rstream runs in two of its modes: blocking calls (-T b: rsocket polls the CQ for
# its polling_time, then sleeps on the completion channel; rdma_asio's stream sleeps
# on its channel too) and its default, nonblocking calls in a loop (busy polling).
# rdma_asio runs in one process, in two (--role server, --role client, as rstream
# runs), and in two with its CQs busy polling (--busy), beside rstream's own.
set -eu
build=$1 out=$2
rounds=${STREAM_ROUNDS:-5}
sizes=${STREAM_SIZES:-64 4096 65536 1048576}
address=${STREAM_ADDRESS:-10.0.0.1}
messages=${STREAM_MESSAGES:-8000 4000 800 50}
trips=${STREAM_TRIPS:-2500 1000 300 25}
callgrind=${STREAM_CALLGRIND:-1 3}
callgrind_messages=${STREAM_CALLGRIND_MESSAGES:-2000 500 40 4}
bin=$build/bench/stream_throughput
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=19500

. "$(dirname "$0")/statistics.sh" # median, ratios

# The Nth word of LIST (N from 1): a size's count.
nth() { echo "$2" | awk -v n="$1" '{ print $n }'; }
# index of SIZE in $sizes
index_of() { echo "$sizes" | awk -v s="$1" '{ for (i = 1; i <= NF; i++) if ($i == s) print i }'; }
next_port() { port=$((port >= 19899 ? 19500 : port + 1)); }
fail() { # NAME: a run that gave no figure
    echo - >>"$tmp/$1"
    echo x >>"$tmp/failures"
}

# The figure of the run whose output is in $tmp/line (MB/s, or µs per round trip),
# appended to $tmp/NAME; COMMAND names the run when it gave none.
take_figure() { # NAME COMMAND...
    name=$1
    shift
    figure=$(sed -n 's/.* MB_per_s=\([0-9.]*\).*/\1/p; s/.* us_per_round_trip=\([0-9.]*\).*/\1/p' "$tmp/line")
    if [ -z "$figure" ]; then
        echo "bench: failed: $*" >&2
        cat "$tmp/line" >&2
        fail "$name"
        return
    fi
    echo "$figure" >>"$tmp/$name"
}

# One run of stream_throughput, both ends in one process: its figure to $tmp/NAME.
run_stream() { # NAME SIZE COUNT OPTIONS...
    name=$1 size=$2 count=$3
    shift 3
    next_port
    set -- "$bin" -a "$address" -p "$port" -s "$size" -n "$count" -r 1 "$@"
    timeout 300 "$@" >"$tmp/line" 2>&1 || true
    take_figure "$name" "$@"
}

# The same with the server and the client in two processes, as rstream runs: the
# client's figure to $tmp/NAME. The client tries again (up to 40 times) until the
# server listens; a server whose client never came is stopped.
run_stream_split() { # NAME SIZE COUNT OPTIONS...
    name=$1 size=$2 count=$3
    shift 3
    next_port
    set -- -a "$address" -p "$port" -s "$size" -n "$count" -r 1 "$@"
    timeout 300 "$bin" --role server "$@" >"$tmp/server" 2>&1 &
    server=$! i=0
    until timeout 300 "$bin" --role client "$@" >"$tmp/line" 2>&1; do
        i=$((i + 1))
        if [ $i -ge 40 ] || ! kill -0 "$server" 2>/dev/null; then break; fi
        sleep 0.25
    done
    kill "$server" 2>/dev/null || true
    wait "$server" || true
    take_figure "$name" "$bin" --role client "$@"
}

# Runs the client COMMAND... of the rstream server PID until it has its figures (the
# server is not listening yet when a connect fails, with "Connection refused" or
# "rpoll: Success", and then it gets tried again, up to 40 times), then waits for
# the server, which a client that never came would leave waiting: it is stopped.
connect() { # PID COMMAND...
    pid=$1 i=0
    shift
    until timeout 300 "$@" >"$tmp/client" 2>&1 && grep -q '^custom' "$tmp/client"; do
        i=$((i + 1))
        if [ $i -ge 40 ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.25
    done
    grep -q '^custom' "$tmp/client" || kill "$pid" 2>/dev/null || true
    wait "$pid" || true
}

# One server/client run of rstream: appends the client's figure to $tmp/NAME:
# MB/s (SIZE / its µs per transfer) for throughput, 2 x its µs per transfer (a
# transfer is half of a ping-pong) for a round trip. rsocket's listener is not a
# TCP socket, so the client tries again until the server listens.
run_rstream() { # NAME SIZE MODE(throughput|round_trip) COUNT [OPTIONS...]
    name=$1 size=$2 mode=$3 count=$4
    shift 4
    next_port
    if [ "$mode" = throughput ]; then set -- -S "$size" -C "$count" -I 1 "$@"; else set -- -S "$size" -C 1 -I "$count" "$@"; fi
    timeout 300 rstream -p "$port" "$@" >"$tmp/server" 2>&1 &
    server=$!
    connect "$server" rstream -s "$address" -p "$port" "$@"
    usec=$(awk '$1 == "custom" { print $8 }' "$tmp/client")
    if [ -z "$usec" ]; then
        echo "bench: failed: rstream -s $address -p $port $* (server and client output follow)" >&2
        cat "$tmp/server" "$tmp/client" >&2
        fail "$name"
        return
    fi
    if [ "$mode" = throughput ]; then
        awk -v s="$size" -v u="$usec" 'BEGIN { printf "%.3f\n", s / u }' >>"$tmp/$name"
    else
        awk -v u="$usec" 'BEGIN { printf "%.2f\n", 2 * u }' >>"$tmp/$name"
    fi
}

echo "measuring streams ($rounds rounds, sizes: $sizes)..." >&2
round=1
while [ "$round" -le "$rounds" ]; do
    echo "bench: stream round $round of $rounds" >&2
    for s in $sizes; do
        k=$(index_of "$s")
        n=$(nth "$k" "$messages") t=$(nth "$k" "$trips")
        run_stream "tp_a.$s" "$s" "$n"
        run_stream_split "tp_a2.$s" "$s" "$n"
        run_stream_split "tp_ab.$s" "$s" "$n" --busy
        run_rstream "tp_rb.$s" "$s" throughput "$n" -T b
        run_rstream "tp_rp.$s" "$s" throughput "$n"
        run_stream "tp_t.$s" "$s" "$n" --tcp
        run_stream "rt_a.$s" "$s" "$t" --round-trip
        run_stream_split "rt_a2.$s" "$s" "$t" --round-trip
        run_stream_split "rt_ab.$s" "$s" "$t" --round-trip --busy
        run_rstream "rt_rb.$s" "$s" round_trip "$t" -T b
        run_rstream "rt_rp.$s" "$s" round_trip "$t"
        run_stream "rt_t.$s" "$s" "$t" --round-trip --tcp
    done
    round=$((round + 1))
done

# median (min-max) of run NAME's figures, with DIGITS decimals
spread() { # NAME DIGITS
    m=$(median <"$tmp/$1")
    lo=$(awk '$1 != "-"' "$tmp/$1" | sort -g | head -n 1)
    hi=$(awk '$1 != "-"' "$tmp/$1" | sort -g | tail -n 1)
    [ "$m" = - ] && { echo -; return; }
    awk -v m="$m" -v lo="$lo" -v hi="$hi" -v d="$2" 'BEGIN { f = "%." d "f"; printf f " (" f "-" f ")", m, lo, hi }'
}

# Instructions per byte: callgrind's Ir of two run lengths, the difference over the
# bytes written in between (one direction). stream_throughput has both ends in its
# process; so has rstream's client (it writes COUNT messages and reads them back),
# whose server runs outside valgrind.
ir() { sed -n 's/^summary: //p' "$1"; }
per_byte() { # SMALL_IR LARGE_IR BYTES
    awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (a == "" || b == "" || n <= 0) print "n/a"; else printf "%.2f\n", (b - a) / n }'
}
# stream_throughput's messages in a run of -n N (a warm-up round of N/10 first)
sent() { echo $(($1 + ($1 / 10 > 1 ? $1 / 10 : 1))); }
instructions_stream() { # SIZE N OPTIONS...
    size=$1 n=$2
    shift 2
    command -v valgrind >/dev/null || { echo n/a; return; }
    small=$((n * ${callgrind% *})) large=$((n * ${callgrind#* }))
    for c in $small $large; do
        next_port
        timeout 1800 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$c" \
            "$bin" -a "$address" -p "$port" -s "$size" -n "$c" -r 1 "$@" >/dev/null 2>"$tmp/vg.$c" ||
            { echo n/a; return; }
    done
    per_byte "$(ir "$tmp/cg.$small")" "$(ir "$tmp/cg.$large")" $((($(sent "$large") - $(sent "$small")) * size))
}
instructions_rstream() { # SIZE N
    size=$1 n=$2
    command -v valgrind >/dev/null || { echo n/a; return; }
    small=$((n * ${callgrind% *})) large=$((n * ${callgrind#* }))
    for c in $small $large; do
        next_port
        timeout 1800 rstream -p "$port" -S "$size" -C "$c" -T b >"$tmp/server" 2>&1 &
        server=$!
        connect "$server" valgrind --tool=callgrind --callgrind-out-file="$tmp/cgr.$c" \
            --log-file="$tmp/vgr.$c" rstream -s "$address" -p "$port" -S "$size" -C "$c" -T b
        grep -q '^custom' "$tmp/client" || {
            echo "bench: rstream under callgrind failed:" >&2
            cat "$tmp/client" "$tmp/vgr.$c" "$tmp/server" >&2
            echo n/a
            return
        }
    done
    per_byte "$(ir "$tmp/cgr.$small")" "$(ir "$tmp/cgr.$large")" $(((large - small) * size))
}

echo "counting instructions (callgrind)..." >&2
for s in $sizes; do
    c=$(nth "$(index_of "$s")" "$callgrind_messages")
    echo "$s $(instructions_stream "$s" "$c") $(instructions_stream "$s" "$c" --tcp) $(instructions_rstream "$s" "$c")" >>"$tmp/instructions"
done

# The tables of throughput (tp) or round trip (rt), each program's median and
# spread and rdma_asio's per-round ratios. Sleeping: the programs that sleep on
# their completion channel when idle (rdma_asio in one process and in two,
# rstream -T b), and TCP. Busy: the two that poll without sleeping.
table_sleeping() { # PREFIX UNIT
    p=$1 u=$2
    echo "| size | rdma_asio $u | rdma_asio, two processes $u | rstream -T b $u | TCP $u | rdma_asio / rstream -T b | two processes / rstream -T b | rdma_asio / TCP |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    for s in $sizes; do
        echo "| $s B | $(spread "${p}_a.$s" 1) | $(spread "${p}_a2.$s" 1) | $(spread "${p}_rb.$s" 1) | $(spread "${p}_t.$s" 1) | $(ratios "$tmp/${p}_a.$s" "$tmp/${p}_rb.$s") | $(ratios "$tmp/${p}_a2.$s" "$tmp/${p}_rb.$s") | $(ratios "$tmp/${p}_a.$s" "$tmp/${p}_t.$s") |"
    done
}
table_busy() { # PREFIX UNIT
    p=$1 u=$2
    echo "| size | rdma_asio --busy, two processes $u | rstream (busy) $u | rdma_asio --busy / rstream (busy) |"
    echo "| --- | --- | --- | --- |"
    for s in $sizes; do
        echo "| $s B | $(spread "${p}_ab.$s" 1) | $(spread "${p}_rp.$s" 1) | $(ratios "$tmp/${p}_ab.$s" "$tmp/${p}_rp.$s") |"
    done
}

{
    echo "A byte stream, one connection: rdma_asio::stream (\`stream_throughput\`, the default"
    echo "\`stream_options\`: a 256 KiB ring each way; server and client coroutines on one"
    echo "\`io_context\` thread of one process, and split into two processes with"
    echo "\`--role server\` and \`--role client\`), rsocket's \`rstream\` (rdmacm-utils; server and"
    echo "client in two processes; its own default of 512 KiB send and receive buffers) on the"
    echo "same device, and the same program over TCP (\`stream_throughput --tcp\`, TCP_NODELAY)"
    echo "on the same address ($address). $rounds interleaved rounds; each round runs, for each size,"
    echo
    echo '```'
    for s in $sizes; do
        k=$(index_of "$s")
        n=$(nth "$k" "$messages") t=$(nth "$k" "$trips")
        echo "$bin -a $address -p PORT -s $s -n $n -r 1"
        echo "$bin -a $address -p PORT -s $s -n $n -r 1 --role server  # and --role client"
        echo "$bin -a $address -p PORT -s $s -n $n -r 1 --busy --role server  # and client"
        echo "rstream -p PORT -S $s -C $n -I 1 -T b  # server; the client adds -s $address"
        echo "rstream -p PORT -S $s -C $n -I 1"
        echo "$bin -a $address -p PORT -s $s -n $n -r 1 --tcp"
        echo "$bin -a $address -p PORT -s $s -n $t -r 1 --round-trip"
        echo "$bin -a $address -p PORT -s $s -n $t -r 1 --round-trip --role server  # and client"
        echo "$bin -a $address -p PORT -s $s -n $t -r 1 --round-trip --busy --role server  # and client"
        echo "rstream -p PORT -S $s -C 1 -I $t -T b"
        echo "rstream -p PORT -S $s -C 1 -I $t"
        echo "$bin -a $address -p PORT -s $s -n $t -r 1 --round-trip --tcp"
    done
    echo '```'
    echo
    echo "Throughput: \`stream_throughput\` writes N messages one way (\`asio::async_write\`,"
    echo "read with \`asio::async_read\` into a buffer of the message's size) after a warm-up of"
    echo "N/10, timed from the first write to the reader's one-byte answer after the last;"
    echo "\`rstream\` writes N messages one way and N back, timed by its client, MB/s here being"
    echo "the size over its µs per transfer. Round trip: a message written and the same size"
    echo "written back; \`stream_throughput\`'s time of the run over the round trips,"
    echo "\`rstream -C 1\`'s µs per transfer times two. \`rstream -T b\` makes blocking calls"
    echo "(rsocket polls its CQ for a while, then sleeps on the completion channel);"
    echo "without it, nonblocking calls in a loop (busy polling). \`stream_throughput --busy\`"
    echo "gives both connections' CQs \`spin_budget::busy()\` (they poll and never sleep), in"
    echo "two processes as rstream runs. Median of the rounds,"
    echo "min-max in parentheses; ratios per round (min / median / max)."
    echo
    table_sleeping tp "MB/s"
    echo
    table_busy tp "MB/s"
    echo
    echo "Round trip, µs (a ratio below 1: rdma_asio's round trip is the shorter):"
    echo
    table_sleeping rt "µs"
    echo
    table_busy rt "µs"
    echo
    echo "User-space instructions per byte written and read (callgrind, which counts user"
    echo "space only: for TCP it leaves out the kernel's copies, for rxe the kernel's RDMA):"
    echo "the difference between runs of ${callgrind% *} and ${callgrind#* } times the messages below, over the"
    echo "bytes in between. \`stream_throughput\` holds both ends; of \`rstream -T b\` only the"
    echo "client runs under valgrind, which writes the messages and reads them back, so its"
    echo "instructions count a byte's writing and reading as well."
    echo
    echo "| size | messages (x ${callgrind% *}, x ${callgrind#* }) | rdma_asio | TCP | rstream -T b |"
    echo "| --- | --- | --- | --- | --- |"
    while read -r s ia it ir; do
        echo "| $s B | $(nth "$(index_of "$s")" "$callgrind_messages") | $ia | $it | $ir |"
    done <"$tmp/instructions"
    if [ -f "$tmp/failures" ]; then
        echo
        echo "$(wc -l <"$tmp/failures") runs failed and are left out (their output is in the log)."
    fi
} >"$out"
cat "$out"
