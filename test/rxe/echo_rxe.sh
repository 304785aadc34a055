#!/bin/sh
# echo_server and echo_client on rxe0 loopback (10.0.0.1, the test VM's veth0):
#   1. 64 clients x 1000 messages: every echo correct;
#   2. a client that vanishes mid-stream (no disconnect): the server goes on;
#   3. 64 x 1000 again: still correct, and the server's open fds and memory did
#      not grow between the first and the third round.
# After each round the server's count of the messages it echoed is the number of
# echoes the clients got back, exactly.
#
#   echo_rxe.sh ECHO_SERVER ECHO_CLIENT PORT
set -u
server=$1 client=$2 port=$3
clients=${ECHO_CLIENTS:-64} messages=${ECHO_MESSAGES:-1000}
. "$(dirname "$0")/require_rxe0.sh"
. "$(dirname "$0")/background_server.sh"
start_server "$server" --address 10.0.0.1 --port "$port"
fds() { ls "/proc/$pid/fd" | wc -l; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }
wait_for 1 listening

status=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAILED: $1 (expected $2, got $3)"; status=1; fi
}
# The echoes a client got back ("... 64000 echoed, 0 wrong ...").
echoed() { sed -n 's/.* \([0-9]*\) echoed, .*/\1/p' "$1"; }
# The messages the server echoed in all, on its "idle" line once N connections
# were served.
served() { sed -n "s/^idle: $1 connections served, \([0-9]*\) messages$/\1/p" "$out/server" | tail -n 1; }

timeout 600 "$client" --server 10.0.0.1 --port "$port" --connections "$clients" \
    --messages "$messages" >"$out/round1" 2>&1
check "round 1: $clients x $messages echoes" 0 $?
cat "$out/round1"
wait_for 1 "^idle: $clients connections"
check "round 1: the client's echoes" $((clients * messages)) "$(echoed "$out/round1")"
check "round 1: the server echoed what came back" "$(echoed "$out/round1")" "$(served "$clients")"
fds1=$(fds) rss1=$(rss_kb)

timeout 120 "$client" --server 10.0.0.1 --port "$port" --messages 100000 --abort-after 50 \
    >"$out/abrupt" 2>&1
check "a client vanishes after 50 messages (exit 3)" 3 $?
wait_for 1 "^idle: $((clients + 1)) connections"
# 50 came back before it vanished.
check "the server echoed 50 to the vanished client" $((clients * messages + 50)) \
    "$(served $((clients + 1)))"

timeout 600 "$client" --server 10.0.0.1 --port "$port" --connections "$clients" \
    --messages "$messages" >"$out/round3" 2>&1
check "round 3 after the vanished client: $clients x $messages echoes" 0 $?
cat "$out/round3"
wait_for 1 "^idle: $((2 * clients + 1)) connections"
check "round 3: the client's echoes" $((clients * messages)) "$(echoed "$out/round3")"
check "round 3: the server echoed what came back" $((2 * clients * messages + 50)) \
    "$(served $((2 * clients + 1)))"
fds3=$(fds) rss3=$(rss_kb)

check "server fds after round 1 and after round 3" "$fds1" "$fds3"
growth=$((rss3 - rss1))
rss_limit=${ECHO_RSS_LIMIT_KB:-2048}
echo "server RSS: $rss1 kB after round 1, $rss3 kB after round 3 (limit: growth of $rss_limit kB${ECHO_RSS_LIMIT_WHY:+; $ECHO_RSS_LIMIT_WHY})"
if [ "$growth" -gt "$rss_limit" ]; then echo "FAILED: the server grew by $growth kB"; status=1; fi

kill -TERM "$pid"
wait "$pid"
check "server exits cleanly on SIGTERM" 0 $?
pid=
echo "--- server output"; cat "$out/server"
exit $status
