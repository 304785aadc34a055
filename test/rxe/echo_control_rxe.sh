#!/bin/sh
# echo_server and echo_client on rxe0 loopback (10.0.0.1, the test VM's veth0):
# what happens at the edges of a run.
#   1. message size: a client asking for 128-byte messages from a 64-byte server
#      is rejected, the server prints "server uses 64-byte messages, client asked
#      for 128", the client that the server rejected its size, and the client
#      exits 1 without a latency line; a client of the
#      server's size (short options) is served and prints its latencies;
#   2. draining: the first SIGINT says "draining 1 connection", refuses new
#      connections but keeps the open one; when it ends the server exits 0;
#   3. forced stop: a second SIGINT stops the server at once (exit status 130)
#      with its 2 connections open; their client fails, without a latency line;
#   4. no server: a client of 10.0.0.99 (nobody has it on rxe0's network) exits 1
#      naming the address, its port and the step that failed.
# Every wait is bounded.
#
#   echo_control_rxe.sh ECHO_SERVER ECHO_CLIENT PORT    (uses PORT and PORT+1)
set -u
server=$1 client=$2 port=$3
. "$(dirname "$0")/require_rxe0.sh"
out=$(mktemp -d)
pids=
cleanup() {
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$out"
}
trap cleanup EXIT

status=0
ok() { echo "ok: $1"; }
failed() { echo "FAILED: $1"; status=1; }
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then ok "$1"; else failed "$1 (expected $2, got $3)"; fi
}
has() { # WHAT FILE PATTERN
    if grep -q -- "$3" "$out/$2"; then ok "$1"; else failed "$1 (no '$3' in $2)"; cat "$out/$2"; fi
}
lacks() { # WHAT FILE PATTERN
    if grep -q -- "$3" "$out/$2"; then failed "$1 ('$3' in $2)"; cat "$out/$2"; else ok "$1"; fi
}
# Bounded by the clock, not by a count of polls: in the emulated guest each poll
# (a fork of grep) takes a noticeable time of its own.
now() { date +%s; }
wait_for() { # FILE COUNT PATTERN: wait up to 60 s for COUNT lines matching PATTERN
    deadline=$(($(now) + 60))
    while [ "$(grep -c -- "$3" "$out/$1")" -lt "$2" ]; do
        if [ "$(now)" -gt "$deadline" ]; then
            echo "FAILED: no '$3' (x$2) in $1 after 60 s"
            for f in "$out"/*; do echo "--- $(basename "$f")"; cat "$f"; done
            exit 1
        fi
        sleep 0.2
    done
}
# (In this shell, not in $(...): only the parent can wait for a process.)
wait_exit() { # PID SECONDS: rc=its exit status, or "still running" after SECONDS
    deadline=$(($(now) + $2))
    while kill -0 "$1" 2>/dev/null; do
        if [ "$(now)" -gt "$deadline" ]; then rc="still running"; return; fi
        sleep 0.2
    done
    wait "$1"
    rc=$?
}

echo "== 1. message sizes"
"$server" -a 10.0.0.1 -p "$port" -s 64 >"$out/server1" 2>&1 &
s1=$!
pids="$pids $s1"
wait_for server1 1 "^listening"
timeout 120 "$client" -a 10.0.0.1 -p "$port" -s 128 -n 10 >"$out/mismatch" 2>&1
check "a client asking for 128-byte messages exits 1" 1 $?
cat "$out/mismatch"
has "the client says the server rejected its size" mismatch "the server rejected the connection: it uses another message size than 128 bytes"
lacks "no latency line after the failed run" mismatch "latency"
wait_for server1 1 "rejected: server uses 64-byte messages, client asked for 128"
ok "the server names both sizes"
timeout 120 "$client" --server 10.0.0.1 --port "$port" --size 64 --messages 10 >"$out/match" 2>&1
check "a client of the server's size exits 0" 0 $?
cat "$out/match"
has "its latency line" match "latency us: p50"

echo "== 2. the first SIGINT drains"
"$client" -a 10.0.0.1 -p "$port" -n 1000000000 >"$out/long" 2>&1 &
c1=$!
pids="$pids $c1"
wait_for server1 2 "^connection accepted"
kill -INT "$s1"
wait_for server1 1 "^draining 1 connection (no new ones)"
ok "the server says it drains 1 connection"
timeout 120 "$client" -a 10.0.0.1 -p "$port" -n 10 >"$out/late" 2>&1
check "a client arriving while it drains is refused (exit 1)" 1 $?
cat "$out/late"
lacks "no latency line after the refused run" late "latency"
check "the server still runs while a connection is open" 0 "$(kill -0 "$s1" 2>/dev/null; echo $?)"
check "the open connection still runs" 0 "$(kill -0 "$c1" 2>/dev/null; echo $?)"
kill -KILL "$c1" # its connection ends (the kernel disconnects it)
wait_exit "$s1" 60
check "the server exits 0 when the last connection ended" 0 "$rc"
has "its closing line" server1 "^stopped: "
echo "--- server output"; cat "$out/server1"

echo "== 3. a second SIGINT stops at once"
p2=$((port + 1))
"$server" --address 10.0.0.1 --port "$p2" >"$out/server2" 2>&1 &
s2=$!
pids="$pids $s2"
wait_for server2 1 "^listening"
"$client" --server 10.0.0.1 --port "$p2" --connections 2 --messages 1000000000 \
    >"$out/two" 2>&1 &
c2=$!
pids="$pids $c2"
wait_for server2 2 "^connection accepted"
kill -INT "$s2"
wait_for server2 1 "^draining 2 connections"
kill -INT "$s2"
wait_exit "$s2" 30
check "the second SIGINT: exit status 130" 130 "$rc"
has "it says so" server2 "^second signal: stopping at once, 2 connections still open"
has "and what it served" server2 "^stopped at once: "
wait_exit "$c2" 120
check "its client fails (exit 1)" 1 "$rc"
cat "$out/two"
has "the client says the connections were lost" two "^connection [01]: "
lacks "no latency line after the failed run" two "latency"
echo "--- server output"; cat "$out/server2"

echo "== 4. a client of an address nobody has names it, and the step"
timeout 120 "$client" -a 10.0.0.99 -p "$port" -n 1 >"$out/nobody" 2>&1
check "a client of 10.0.0.99 exits 1" 1 $?
cat "$out/nobody"
has "it names the address, the port and the step" nobody \
    "^connection 0: rdma_asio::async_connect: 10.0.0.99 port $port: resolving the address timed out"
exit $status
