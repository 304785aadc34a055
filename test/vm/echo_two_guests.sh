#!/bin/bash
# Two hosts: echo_server in one test guest, echo_client in another, each with its
# own soft-RoCE device (rxe1) on a virtio NIC, the two NICs joined by a qemu socket
# link on 127.0.0.1 (run-in-guest.sh --link). The guests share the host's file
# system, which carries the "server ready" and "client done" flags.
#
#   echo_two_guests.sh BUILD_DIR ECHO_SERVER ECHO_CLIENT
set -u
build=$(cd "${1:?usage: echo_two_guests.sh BUILD_DIR ECHO_SERVER ECHO_CLIENT}" && pwd)
server=$2 client=$3
run=$(mktemp -d "$build/vm/two-guests.XXXXXX")
a_pid=
cleanup() {
    [ -z "$a_pid" ] || kill "$a_pid" 2>/dev/null
    rm -rf "$run"
}
trap cleanup EXIT

# A free port on loopback for the link.
port=
for p in $(seq $((20000 + $$ % 10000)) $((20100 + $$ % 10000))); do
    ss -ltn | grep -q "127.0.0.1:$p " || { port=$p; break; }
done
[ -n "$port" ] || { echo "echo_two_guests: no free port"; exit 1; }

# Each guest runs a script of its own (the run directory is shared with both).
cat >"$run/server.sh" <<SCRIPT
'$server' --address 10.1.0.1 --port 18720 >'$run/server.out' 2>&1 &
pid=\$!
i=0
until grep -q listening '$run/server.out'; do
    i=\$((i + 1)); [ \$i -lt 300 ] || { cat '$run/server.out'; exit 1; }; sleep 0.1
done
touch '$run/ready'
i=0
until [ -f '$run/done' ]; do i=\$((i + 1)); [ \$i -lt 3000 ] || break; sleep 0.1; done
kill -TERM \$pid
wait \$pid
SCRIPT
cat >"$run/client.sh" <<SCRIPT
i=0
until [ -f '$run/ready' ]; do i=\$((i + 1)); [ \$i -lt 3000 ] || exit 1; sleep 0.1; done
'$client' --server 10.1.0.1 --port 18720 --connections 4 --messages 50
status=\$?
touch '$run/done'
exit \$status
SCRIPT

"$build/vm/run" --timeout 400 --link "listen:$port:10.1.0.1" -- sh "$run/server.sh" >"$run/a.log" 2>&1 &
a_pid=$!

# The client's guest connects to the server guest's link: wait until it listens.
i=0
until ss -ltn | grep -q "127.0.0.1:$port "; do
    i=$((i + 1))
    [ $i -lt 1200 ] || { echo "echo_two_guests: the server guest never started"; cat "$run/a.log"; exit 1; }
    sleep 0.1
done

"$build/vm/run" --timeout 400 --link "connect:$port:10.1.0.2" -- sh "$run/client.sh" >"$run/b.log" 2>&1
b_status=$?
wait "$a_pid"
a_status=$?
a_pid=

echo "--- server guest (exit $a_status)"; cat "$run/a.log"; cat "$run/server.out" 2>/dev/null
echo "--- client guest (exit $b_status)"; cat "$run/b.log"
[ "$a_status" = 0 ] && [ "$b_status" = 0 ]
