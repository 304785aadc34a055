#!/bin/sh
# What the README's main command shows on soft-RoCE (run inside the test VM, where
# veth0 carries rxe0): the devices, then async_watch catching a port going down and
# up and a GID being added and removed, then a clean exit on SIGINT; then the
# rdma_cm echo service with 8 clients of 200 messages each.
#
# Each part waits until its sample is ready, and each action until its event has
# arrived (bounded: the emulated guest is slow, async_watch alone takes seconds to
# start), showing the samples' output as it comes. Ends with the list of what did
# not arrive and exit status 1, or exit status 0 when every promise was kept.
#
#   rxe_demo.sh BUILD_DIR
set -u
build=${1:?usage: rxe_demo.sh BUILD_DIR}
# shellcheck disable=SC2034 # read by demo_lib.sh
demo_name=rxe_demo
# shellcheck source=samples/demo_lib.sh
. "$(dirname "$0")/demo_lib.sh"
limit=60 # seconds for each event or start-up (emulation on a busy machine: 15 s is seen)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rxe_demo.XXXXXX") || exit 1
samples=$build/samples

# shellcheck disable=SC2317 # run from the EXIT trap
cleanup() {
    # Leave the guest as the demo found it, however it ended.
    [ -z "${watcher:-}" ] || kill -KILL "$watcher" 2>/dev/null
    [ -z "${client:-}" ] || kill -KILL "$client" 2>/dev/null
    [ -z "${server:-}" ] || kill -KILL "$server" 2>/dev/null
    ip addr del 10.0.0.7/24 dev veth0 2>/dev/null
    ip link set veth0 up 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== device_info: the RDMA devices, their ports and GIDs"
"$samples/device_info" || demo_missing "device_info: exit status $?"

count() { grep -c -E "$1" "$tmp/watch.out" 2>/dev/null || true; }

echo
echo "== async_watch -d rxe0: rxe0's asynchronous events while its netdev veth0 goes"
echo "   down and up and an address is added to it and removed, then Ctrl-C (SIGINT)"
demo_follow "$tmp/watch.out"
"$samples/async_watch" -d rxe0 >"$tmp/watch.out" 2>&1 &
watcher=$!
if demo_wait_for "async_watch's start (watching rxe0)" $limit "watching rxe0"; then
    echo "-- ip link set veth0 down (expect IBV_EVENT_PORT_ERR)"
    ip link set veth0 down
    demo_wait_for "IBV_EVENT_PORT_ERR after veth0 went down" $limit IBV_EVENT_PORT_ERR
    echo "-- ip link set veth0 up (expect IBV_EVENT_PORT_ACTIVE)"
    ip link set veth0 up
    demo_wait_for "IBV_EVENT_PORT_ACTIVE after veth0 came up" $limit IBV_EVENT_PORT_ACTIVE
    gids=$(count IBV_EVENT_GID_CHANGE)
    echo "-- ip addr add 10.0.0.7/24 dev veth0 (expect IBV_EVENT_GID_CHANGE: a GID added)"
    ip addr add 10.0.0.7/24 dev veth0
    demo_wait_for "IBV_EVENT_GID_CHANGE after the address was added" $limit \
        IBV_EVENT_GID_CHANGE $((gids + 1))
    gids=$(count IBV_EVENT_GID_CHANGE)
    echo "-- ip addr del 10.0.0.7/24 dev veth0 (expect IBV_EVENT_GID_CHANGE: a GID removed)"
    ip addr del 10.0.0.7/24 dev veth0
    demo_wait_for "IBV_EVENT_GID_CHANGE after the address was removed" $limit \
        IBV_EVENT_GID_CHANGE $((gids + 1))
fi
echo "-- Ctrl-C (SIGINT) to async_watch (expect 'stopping' and exit status 0)"
kill -INT "$watcher" 2>/dev/null
if demo_wait_exit "$watcher" $limit; then
    demo_wait_for "async_watch's 'stopping' on SIGINT" 0 "stopping"
    [ "$demo_status" -eq 0 ] || demo_missing "async_watch's clean exit on SIGINT: exit status $demo_status"
else
    demo_missing "async_watch's exit on SIGINT: still running after $limit s (killed)"
fi
kill -KILL "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
watcher=

echo
echo "== echo_server on 10.0.0.1 (rxe0), echo_client: 8 rdma_cm connections x 200 messages"
echo "   (latencies in this emulated guest on soft-RoCE are not hardware figures)"
demo_follow "$tmp/server.out"
"$samples/echo_server" --address 10.0.0.1 --port 18710 >"$tmp/server.out" 2>&1 &
server=$!
if demo_wait_for "echo_server's start (listening on 10.0.0.1)" $limit "listening on 10.0.0.1"; then
    echo "-- echo_client --server 10.0.0.1 --connections 8 --messages 200 (expect 1600 echoed, 0 wrong;"
    echo "   the server: 8 connections served, 1600 messages)"
    # In the background, so that the server's lines show while the client runs (its
    # accepts), and the client's result when it ends.
    timeout -k 5 300 "$samples/echo_client" --server 10.0.0.1 --port 18710 --connections 8 \
        --messages 200 >"$tmp/client.out" 2>&1 &
    client=$!
    if demo_wait_exit "$client" 310; then client=; else demo_status=124; fi
    sed 's/^/    /' "$tmp/client.out"
    if [ "$demo_status" -eq 124 ]; then
        demo_missing "echo_client's result: still running after 300 s (killed)"
    elif [ "$demo_status" -ne 0 ]; then
        demo_missing "echo_client's clean run: exit status $demo_status"
    elif ! grep -q "1600 echoed, 0 wrong, 0 connections failed" "$tmp/client.out"; then
        demo_missing "echo_client's result (1600 echoed, 0 wrong, 0 connections failed)"
    else
        # The server counts what it echoed: the same 1600.
        demo_wait_for "echo_server's count of the same messages (idle: 8 connections served, 1600 messages)" \
            $limit "^idle: 8 connections served, 1600 messages$"
    fi
fi
echo "-- Ctrl-C (SIGINT) to echo_server (expect exit status 0)"
kill -INT "$server" 2>/dev/null
if demo_wait_exit "$server" $limit; then
    [ "$demo_status" -eq 0 ] || demo_missing "echo_server's clean exit on SIGINT: exit status $demo_status"
else
    demo_missing "echo_server's exit on SIGINT: still running after $limit s (killed)"
fi
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
server=

echo
demo_end
