#!/bin/sh
# kv_server and kv_client on rxe0 loopback (10.0.0.1, the test VM's veth0):
#   1. one client puts two keys; a second client, on a connection of its own, gets
#      them back (the store is the server's memory), and a missing key;
#   2. a put the store refuses (a value too long) fails that command alone;
#   3. 1000 rounds of a put and a get: the server's CPU saw one work completion on
#      that connection (the receive that waited for the disconnect), not 2000;
#   4. two clients put the same key 200 times each at once, with values of 3000
#      bytes (three packets at rxe's MTU of 1024, which unlocked writes would
#      interleave), while a third gets it: every put read its slot whole under the
#      slot's lock, and the entry left is one of the two values, whole.
#
#   kv_rxe.sh KV_SERVER KV_CLIENT PORT
set -u
server=$1 client=$2 port=$3
. "$(dirname "$0")/require_rxe0.sh"
. "$(dirname "$0")/background_server.sh"
start_server "$server" --address 10.0.0.1 --port "$port" --slots 64 --slot-size 4096
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
long=$(printf '%04009d' 0)
got=$(kv put big "$long" get colour 2>&1)
check "a value too long fails alone (exit 1)" 1 $?
check "its message, then the next command" \
    "$(printf 'put big: value of 4009 bytes: this store holds up to 4008\ncolour = blue')" "$got"
got=$(kv --repeat 1000 put counter 42 get counter 2>&1)
check "1000 rounds of a put and a get (exit 0)" 0 $?
echo "$got"
wait_for 4 "client disconnected"
check "work completions at the server for those 2000 operations" 1 \
    "$(grep "client disconnected" "$out/server" | tail -1 | sed 's/.*: \([0-9]*\) work completion.*/\1/')"

a=$(head -c 3000 /dev/zero | tr '\0' a)
b=$(head -c 3000 /dev/zero | tr '\0' b)
kv --repeat 200 put same "$a" >"$out/writer_a" 2>&1 &
writer_a=$!
kv --repeat 200 put same "$b" >"$out/writer_b" 2>&1 &
writer_b=$!
kv --repeat 400 get same >"$out/reader" 2>&1
check "a reader during the puts (exit 0)" 0 $?
wait "$writer_a"
check "writer a (exit 0)" 0 $?
wait "$writer_b"
check "writer b (exit 0)" 0 $?
for w in writer_a writer_b; do
    check "$w: puts that found their slot torn under its lock" 0 \
        "$(sed -n 's/.*; \([0-9]*\) puts found their slot torn under its lock/\1/p' "$out/$w")"
done
got=$(kv get same 2>&1)
if [ "$got" = "same = $a" ] || [ "$got" = "same = $b" ]; then
    echo "ok: the entry left is one writer's value, whole"
else
    echo "FAILED: the entry left is neither value whole: $(printf '%s' "$got" | head -c 200)"
    status=1
fi
cat "$out/writer_a" "$out/writer_b"

cat "$out/server"
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
wait "$pid"
check "the server stops on SIGTERM (exit 0)" 0 $?
pid=
exit $status
