#!/bin/bash
# rdma-asio-vm --server: starts a server, waits until it says it is ready, runs the
# client, then stops the server. Every wait is bounded.
#
#   serve-then-run.sh READY_TEXT 'SERVER COMMAND LINE' CLIENT [ARG...]
#
# The server is a shell command line (sh -c), started first in a process group of
# its own; READY_TEXT must appear in a line of its output (stdout or stderr) within
# 60 s. Then the client runs (no time limit of its own: rdma-asio-vm's --timeout
# bounds the whole run). Afterwards the server's group gets SIGTERM, then SIGKILL
# after 5 s, and its output is printed, each line prefixed "server: ", on stderr.
# Exit status: the client's; 3 when the server ended, or did not get ready, first.
set -u
ready=${1:?usage: serve-then-run.sh READY_TEXT SERVER CLIENT [ARG...]}
server_cmd=${2:?usage: serve-then-run.sh READY_TEXT SERVER CLIENT [ARG...]}
shift 2
[ $# -gt 0 ] || { echo "rdma-asio-vm: --server needs a client command after it" >&2; exit 2; }

out=$(mktemp)
server=
stop_server() {
    [ -n "$server" ] || return 0
    kill -TERM -- "-$server" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
    sed 's/^/server: /' "$out" >&2
}
trap 'stop_server; rm -f "$out"' EXIT
trap 'exit 130' INT TERM

# A group of its own, so that stopping it stops what the command line started.
setsid sh -c "$server_cmd" >"$out" 2>&1 </dev/null &
server=$!
deadline=$(($(date +%s) + 60))
until grep -qF -- "$ready" "$out"; do
    if ! kill -0 "$server" 2>/dev/null; then
        wait "$server"
        echo "rdma-asio-vm: the server ended (status $?) before it printed '$ready'" >&2
        exit 3
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "rdma-asio-vm: the server did not print '$ready' within 60 s" >&2
        exit 3
    fi
    sleep 0.1
done
"$@"
status=$?
exit $status
