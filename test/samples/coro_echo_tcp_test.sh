#!/bin/sh
# The TCP original of docs/from-tcp.md's first example, on the host's loopback:
# coro_echo_server_tcp serves, a client (Python's socket module) sends three lines
# and reads each back. The RDMA form gets the same check on rxe
# (test/rxe/serve_lines_rxe.sh); this one shows the diff's other side works.
#
#   coro_echo_tcp_test.sh SERVE_THEN_RUN CORO_ECHO_SERVER_TCP PORT
set -u
runner=${1:?usage: coro_echo_tcp_test.sh SERVE_THEN_RUN CORO_ECHO_SERVER_TCP PORT}
server=${2:?} port=${3:?}
out=$(timeout 120 "$runner" listening "$server -a 127.0.0.1 -p $port" python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
for line in (b"one\n", b"two words\n", b"three\n"):
    s.sendall(line)
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            sys.exit("the server closed the connection")
        got += chunk
    sys.stdout.write(got.decode())
' "$port" 2>&1)
status=$?
[ $status = 0 ] || { echo "FAILED: status $status"; echo "$out"; exit 1; }
expected=$(printf 'one\ntwo words\nthree\nserver: listening on 127.0.0.1 port %s' "$port")
[ "$(echo "$out" | grep -v '^server: echo ended')" = "$expected" ] ||
    { echo "FAILED: output differs:"; echo "$out"; exit 1; }
echo "ok: three lines echoed over TCP"
