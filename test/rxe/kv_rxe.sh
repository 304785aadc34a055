#!/bin/sh
# kv_server and kv_client on rxe0 loopback (10.0.0.1, the test VM's veth0):
#   1. one client puts two keys; a second client, on a connection of its own, gets
#      them back (the store is the server's memory), and a missing key;
#   2. a put the store refuses (a value too long) fails that command alone;
#   3. 1000 rounds of a put and a get: the server's CPU saw one work completion on
#      that connection (the receive that waited for the disconnect), not 2000.
#
#   kv_rxe.sh KV_SERVER KV_CLIENT PORT
set -u
server=$1 client=$2 port=$3
. "$(dirname "$0")/require_rxe0.sh"
. "$(dirname "$0")/background_server.sh"
start_server "$server" --address 10.0.0.1 --port "$port" --slots 64 --slot-size 128
wait_for 1 listening

status=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAILED: $1 (expected '$2', got '$3')"; status=1; fi
}
kv() { timeout 60 "$client" --server 10.0.0.1 --port "$port" "$@"; }

got=$(kv put colour blue put "two words" "a value with spaces" 2>&1)
check "first client: two puts" "$(printf 'put colour\nput two words')" "$got"
got=$(kv get colour get "two words" get shape 2>&1)
check "second client: the values, and a missing key" \
    "$(printf 'colour = blue\ntwo words = a value with spaces\nshape: not found')" "$got"
long=$(printf '%049d' 0)
got=$(kv put big "$long" get colour 2>&1)
check "a value too long fails alone (exit 1)" 1 $?
check "its message, then the next command" \
    "$(printf 'put big: value of 49 bytes: this store holds up to 48\ncolour = blue')" "$got"
got=$(kv --repeat 1000 put counter 42 get counter 2>&1)
check "1000 rounds of a put and a get (exit 0)" 0 $?
echo "$got"
wait_for 4 "client disconnected"
check "work completions at the server for those 2000 operations" 1 \
    "$(grep "client disconnected" "$out/server" | tail -1 | sed 's/.*: \([0-9]*\) work completion.*/\1/')"
cat "$out/server"
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
wait "$pid"
check "the server stops on SIGTERM (exit 0)" 0 $?
pid=
exit $status
