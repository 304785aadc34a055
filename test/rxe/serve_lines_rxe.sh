#!/bin/sh
# A stream server sample and line_echo's client on rxe0 loopback (10.0.0.1), in one
# run of rdma-asio-vm --server, as docs/first-service.md runs them: the server
# listens, line_echo -c sends three lines and prints each echo, in order; the
# server is stopped after. Every wait is bounded (rdma-asio-vm's --timeout, and 60 s
# for the server to listen).
#
#   serve_lines_rxe.sh RDMA_ASIO_VM SERVER LINE_ECHO PORT
set -u
vm=${1:?usage: serve_lines_rxe.sh RDMA_ASIO_VM SERVER LINE_ECHO PORT}
server=${2:?} client=${3:?} port=${4:?}
. "$(dirname "$0")/require_rxe0.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$vm" --timeout 120 --server "$server -a 10.0.0.1 -p $port" -- \
    "$client" -c 10.0.0.1 -p "$port" one "two words" three >"$out/client" 2>"$out/server"
status=$?
fail() {
    echo "FAILED: $*"
    echo "--- server (and rdma-asio-vm):"; cat "$out/server"
    echo "--- client:"; cat "$out/client"
    exit 1
}
[ $status = 0 ] || fail "rdma-asio-vm --server exited with $status"
printf 'one\ntwo words\nthree\n' | cmp -s - "$out/client" || fail "the echoes differ"
grep -q "^server: listening on 10.0.0.1 port $port" "$out/server" ||
    fail "the server's output is not shown"
echo "ok: $(basename "$server") echoed three lines in order"
