#!/bin/sh
# A server sample and a client on rxe0 loopback (10.0.0.1), in one run of
# rdma-asio-vm --server, as docs/first-service.md runs them: the server listens on
# 10.0.0.1 port PORT, the client runs and must print EXPECTED exactly; the server is
# stopped after and its "listening" line must be among its output. Every wait is
# bounded (rdma-asio-vm's --timeout, and 60 s for the server to listen).
#
#   serve_and_ask_rxe.sh RDMA_ASIO_VM SERVER PORT EXPECTED CLIENT [ARG...]
set -u
vm=${1:?usage: serve_and_ask_rxe.sh RDMA_ASIO_VM SERVER PORT EXPECTED CLIENT [ARG...]}
server=${2:?} port=${3:?} expected=${4?}
shift 4
. "$(dirname "$0")/require_rxe0.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$vm" --timeout 120 --server "$server -a 10.0.0.1 -p $port" -- "$@" >"$out/client" 2>"$out/server"
status=$?
fail() {
    echo "FAILED: $*"
    echo "--- server (and rdma-asio-vm):"; cat "$out/server"
    echo "--- client:"; cat "$out/client"
    exit 1
}
[ $status = 0 ] || fail "rdma-asio-vm --server exited with $status"
printf '%s\n' "$expected" | cmp -s - "$out/client" || fail "the client's output is not '$expected'"
grep -q "^server: listening on 10.0.0.1 port $port" "$out/server" ||
    fail "the server's output is not shown"
echo "ok: $(basename "$server") answered $(basename "$1") as expected"
