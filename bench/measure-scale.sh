#!/bin/sh
# Runs inside the test VM (or on a host with the device): rpc_server and rpc_client
# (samples/rpc) on rxe0 loopback at several numbers of connections, and prints one
# line per run: connections established per second and calls per second (the
# client's figures; calls start once every connection is up), and the server's
# memory: VmRSS before the client (/proc/PID/status), VmHWM (its peak, with every
# connection open) and VmRSS after the last connection ended, and the bytes it
# registered with ibv_reg_mr (its own "idle" line). The peaks of VmRSS's parts
# (RssAnon: the heap; RssFile + RssShmem: mappings such as the device's queues)
# are sampled every 0.1 s during the run. A run whose counts are not
# exact is printed as failed, with the client's output. Figures only: nothing here
# fails on a figure.
#
#   measure-scale.sh BUILD_DIR
#
# Settings (environment):
#   SCALE_CONNECTIONS  numbers of connections (default "10 100 1000 10000")
#   SCALE_CALLS        calls per run, spread over the connections (default 20000;
#                      at least 2 per connection)
#   SCALE_ROUNDS       runs per number of connections (default 3)
#   SCALE_DEPTH        the server's --depth (default 256); the client's --window
#                      is half of it
#   SCALE_THREADS      the server's --threads (default 1); each thread posts
#                      --depth receives, the client's window stays the same
#   SCALE_DEADLINE     the client's --deadline in seconds (default 900)
#   SCALE_CALLGRIND    connections of a run under valgrind's callgrind, with and
#                      without calls, for the server's instructions per call
#                      (default 100; 0: none)
set -u
build=$1
connections_list=${SCALE_CONNECTIONS:-10 100 1000 10000}
calls=${SCALE_CALLS:-20000}
rounds=${SCALE_ROUNDS:-3}
depth=${SCALE_DEPTH:-256}
threads=${SCALE_THREADS:-1}
window=$((depth / 2))
deadline=${SCALE_DEADLINE:-900}
callgrind_connections=${SCALE_CALLGRIND:-100}
port=18731
server_bin=$build/samples/rpc_server
client_bin=$build/samples/rpc_client
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$out"' EXIT

status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
# Waits at most 600 s for COUNT lines of the server's output matching PATTERN.
wait_for() {
    i=0
    while [ "$(grep -c "$2" "$out/server")" -lt "$1" ]; do
        i=$((i + 1))
        if [ $i -gt 6000 ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "server: no '$2' (x$1)"; cat "$out/server"; return 1
        fi
        sleep 0.1
    done
}
start_server() { # [WRAPPER...]
    port=$((port + 1))
    "$@" "$server_bin" --address 10.0.0.1 --port "$port" --depth "$depth" \
        --threads "$threads" >"$out/server" 2>&1 &
    pid=$!
    wait_for 1 listening
}
stop_server() {
    kill -TERM "$pid"
    wait "$pid"
    pid=
}
# Samples the server's RssAnon and RssFile + RssShmem into $out/peaks (their
# maxima) until $out/sampling is removed.
sample_peaks() {
    touch "$out/sampling"
    (anon=0 mapped=0
     while [ -e "$out/sampling" ]; do
         set -- $(awk '$1 == "RssAnon:" { a = $2 } $1 == "RssFile:" || $1 == "RssShmem:" { m += $2 }
             END { print a + 0, m + 0 }' "/proc/$pid/status" 2>/dev/null)
         [ "${1:-0}" -gt "$anon" ] && anon=$1
         [ "${2:-0}" -gt "$mapped" ] && mapped=$2
         echo "$anon $mapped" >"$out/peaks"
         sleep 0.1
     done) &
}
client() { # CONNECTIONS CALLS_EACH
    "$client_bin" --server 10.0.0.1 --port "$port" --connections "$1" --requests "$2" \
        --window "$window" --deadline "$deadline" >"$out/client" 2>&1
}

echo "rpc_server --depth $depth --threads $threads, rpc_client --window $window, $(nproc) CPUs, $(awk '/MemTotal/ { print $2 }' /proc/meminfo) kB of memory"
echo "connections calls_each connections/s calls/s rss_before_kB hwm_kB rss_after_kB peak_anon_kB peak_mapped_kB registered_B"
for n in $connections_list; do
    each=$((calls / n))
    [ "$each" -ge 2 ] || each=2
    r=0
    while [ $r -lt "$rounds" ]; do
        r=$((r + 1))
        start_server || exit 1
        before=$(status_kb "$pid" VmRSS)
        sample_peaks
        if ! client "$n" "$each"; then
            rm -f "$out/sampling"
            echo "$n $each failed:"; tail -n 5 "$out/client"
            free -k | sed -n 2p
            stop_server
            continue
        fi
        wait_for 1 "^idle: $n connections served" || exit 1
        rm -f "$out/sampling"
        sleep 0.2
        hwm=$(status_kb "$pid" VmHWM) after=$(status_kb "$pid" VmRSS)
        registered=$(sed -n 's/^idle: .*; \([0-9]*\) bytes registered.*/\1/p' "$out/server")
        rates=$(sed -n 's/^connections: [0-9.]* s, \([0-9]*\)\/s; calls and goodbyes: [0-9.]* s, \([0-9]*\) calls\/s$/\1 \2/p' "$out/client")
        echo "$n $each $rates $before $hwm $after $(cat "$out/peaks") $registered"
        stop_server
    done
done

[ "$callgrind_connections" -gt 0 ] || exit 0
command -v valgrind >/dev/null || { echo "callgrind: valgrind is not installed"; exit 0; }
# The server's instructions (user space, as callgrind counts them) in a run with
# calls less those in the same run without: per call, the cost of a call alone.
each=20
for m in 0 "$each"; do
    start_server valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$m" || exit 1
    client "$callgrind_connections" "$m" || { echo "callgrind run with $m calls each failed:"; cat "$out/client"; }
    wait_for 1 "^idle: $callgrind_connections connections served" || exit 1
    stop_server
    ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out/callgrind.$m")
    echo "callgrind: $callgrind_connections connections x $m calls: $ir instructions in the server"
    eval "ir_$m=$ir"
done
echo "callgrind: $(((ir_$each - ir_0) / (callgrind_connections * each))) server instructions per call (difference of the two runs over $((callgrind_connections * each)) calls)"
