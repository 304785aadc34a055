#!/bin/sh
# rpc_server and rpc_client on rxe0 loopback (10.0.0.1, the test VM's veth0):
#   1. 20 connections x 5 calls, then 200 connections x 5 calls, at once each:
#      the client's counts are exact (every connection established, every
#      response verified, every goodbye answered with the connection's count of
#      calls), and so are the server's after each round;
#   2. the server's registered bytes and posted receives are the same after 20
#      and after 200 connections: its receive memory does not follow them;
#   3. a client that goes without its goodbyes (its --deadline passes in the
#      middle of its calls, and it exits, leaving 10 connections to the kernel):
#      the server ends those 10 sessions (async_wait_error), counts them failed
#      and goes idle again;
#   4. a client that wants more requests in flight than the server posts
#      receives fails, saying so (exit 1);
#   5. a server with --threads 2 runs two threads, makes a pool (CQs, shared
#      receive queue, buffers) on each, and hands the 200 connections to them in
#      turn: exact counts in all, 100 connections and 500 calls on each thread,
#      twice the receive memory of one thread.
#
#   rpc_rxe.sh RPC_SERVER RPC_CLIENT PORT
set -u
server=$1 client=$2 port=$3
depth=64 window=32
. "$(dirname "$0")/require_rxe0.sh"
. "$(dirname "$0")/background_server.sh"
start_server "$server" --address 10.0.0.1 --port "$port" --depth "$depth"
wait_for 1 listening

status=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAILED: $1 (expected '$2', got '$3')"; status=1; fi
}
rpc() { timeout 600 "$client" --server 10.0.0.1 --port "$port" "$@"; }
# The server's Nth "idle" line, without the registered memory.
idle_counts() { grep '^idle:' "$out/server" | sed -n "$1p" | sed 's/;.*//'; }
idle_memory() { grep '^idle:' "$out/server" | sed -n "$1p" | sed 's/.*; //'; }

rounds=0 served=0 calls=0
for connections in 20 200; do
    rpc --connections "$connections" --requests 5 --window "$window" --deadline 500 >"$out/client" 2>&1
    check "$connections connections x 5 calls (exit 0)" 0 $?
    cat "$out/client"
    check "$connections connections: the client's counts" \
        "$connections of $connections connections established, $((connections * 5)) of $((connections * 5)) requests sent, $((connections * 5)) responses verified, 0 wrong, $connections goodbyes confirmed, 0 connections failed" \
        "$(sed -n '/connections established/p' "$out/client")"
    rounds=$((rounds + 1)) served=$((served + connections)) calls=$((calls + connections * 5))
    wait_for "$rounds" '^idle:'
    check "$connections connections: the server's counts" \
        "idle: $served connections served, $calls calls answered, 0 failed, 0 bad requests" \
        "$(idle_counts "$rounds")"
done
# 2 x depth buffers of 32 bytes, whatever the number of connections.
check "registered memory and posted receives after 20 connections" \
    "$((2 * depth * 32)) bytes registered, $depth receives posted" "$(idle_memory 1)"
check "the same after 200 connections" "$(idle_memory 1)" "$(idle_memory 2)"

rpc --connections 10 --requests 100000000 --window "$window" --deadline 3 >"$out/vanished" 2>&1
check "a client stopped by its deadline (exit 1)" 1 $?
sed -n '/^deadline:/p' "$out/vanished"
rounds=$((rounds + 1))
wait_for "$rounds" '^idle:'
# Each session ends once: by its queue pair's error watch, or, when a response
# was being sent as the client went, by that send's failure (both count as failed).
check "its 10 sessions end without goodbyes" 10 \
    "$(grep -cE '(ended without its goodbye|^send on QP [0-9]+): ' "$out/server")"
check "and the server is idle again, 10 failed" \
    "idle: $served connections served, N calls answered, 10 failed, 0 bad requests" \
    "$(idle_counts "$rounds" | sed 's/, [0-9]* calls answered/, N calls answered/')"

rpc --window $((depth + 1)) --deadline 60 >"$out/too_wide" 2>&1
check "a window wider than the server's depth fails (exit 1)" 1 $?
check "and says why" "connection 0: the server posts $depth receives, fewer than --window $((depth + 1))" \
    "$(sed -n '/^connection 0:/p' "$out/too_wide")"

kill -TERM "$pid"
wait "$pid"
check "the server stops on SIGTERM (exit 0)" 0 $?
pid=
echo "--- server output"; cat "$out/server"

# 5. Two threads.
start_server "$server" --address 10.0.0.1 --port "$((port + 1))" --depth "$depth" --threads 2
wait_for 1 listening
timeout 600 "$client" --server 10.0.0.1 --port "$((port + 1))" --connections 200 --requests 5 \
    --window "$window" --deadline 500 >"$out/client" 2>&1
check "--threads 2: 200 connections x 5 calls (exit 0)" 0 $?
cat "$out/client"
check "--threads 2: the client's counts" \
    "200 of 200 connections established, 1000 of 1000 requests sent, 1000 responses verified, 0 wrong, 200 goodbyes confirmed, 0 connections failed" \
    "$(sed -n '/connections established/p' "$out/client")"
wait_for 1 '^idle:'
check "--threads 2: the server's counts and memory (two pools)" \
    "idle: 200 connections served, 1000 calls answered, 0 failed, 0 bad requests; $((4 * depth * 32)) bytes registered, $((2 * depth)) receives posted" \
    "$(grep '^idle:' "$out/server")"
check "--threads 2: each thread's share" \
    "  thread 0: 100 connections served, 500 calls answered|  thread 1: 100 connections served, 500 calls answered" \
    "$(grep '^  thread ' "$out/server" | paste -sd '|')"
check "--threads 2: a pool on each thread" 2 "$(grep -c "^device rxe0 (thread [01]): $depth receives posted" "$out/server")"
check "--threads 2: the server's threads" 2 "$(ls "/proc/$pid/task" | wc -l)"
kill -TERM "$pid"
wait "$pid"
check "--threads 2: the server stops on SIGTERM (exit 0)" 0 $?
pid=
echo "--- server output (--threads 2)"; cat "$out/server"
exit $status
