#!/bin/sh
# The README's quick start on rxe0, as the README shows it: quick_start -d rxe0
# prints the port's state, then IBV_EVENT_PORT_ERR when veth0 goes down and
# IBV_EVENT_PORT_ACTIVE when it comes back up. Every wait is bounded; veth0 is up
# and the port ACTIVE again however the test ends.
#
#   quick_start_rxe.sh QUICK_START
set -u
prog=${1:?usage: quick_start_rxe.sh QUICK_START}
port_state=/sys/class/infiniband/rxe0/ports/1/state
. "$(dirname "$0")/require_rxe0.sh"
out=$(mktemp)
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    ip link set veth0 up
    deadline=$(($(date +%s) + 10))
    while ! grep -q ACTIVE "$port_state" && [ "$(date +%s)" -le "$deadline" ]; do
        sleep 0.1
    done
    rm -f "$out"
}
trap cleanup EXIT

fail() {
    echo "FAILED: $*"
    echo "--- quick_start's output:"; cat "$out"
    exit 1
}
# wait_for PATTERN SECONDS: until quick_start printed a line matching PATTERN.
# (By the clock: under emulation each round of the loop takes far longer than its
# sleep.)
wait_for() {
    deadline=$(($(date +%s) + $2))
    while ! grep -q "$1" "$out"; do
        kill -0 "$pid" 2>/dev/null || fail "quick_start exited before printing '$1'"
        [ "$(date +%s)" -le "$deadline" ] || fail "no '$1' within $2 s"
        sleep 0.1
    done
}

"$prog" -d rxe0 >"$out" 2>&1 &
pid=$!
wait_for "^rxe0 port 1: ACTIVE; waiting for events$" 30
ip link set veth0 down || fail "ip link set veth0 down"
wait_for "^IBV_EVENT_PORT_ERR$" 20
ip link set veth0 up || fail "ip link set veth0 up"
wait_for "^IBV_EVENT_PORT_ACTIVE$" 20
echo "--- quick_start's output:"
cat "$out"
echo "quick_start: the port state, PORT_ERR and PORT_ACTIVE as the README shows"
