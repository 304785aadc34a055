#!/bin/sh
# docs/work-requests.md's first program on rxe0, run as the doc runs it (no
# argument: the first device) and with the device named: queue pair b receives
# a's message whole, the program says so and exits 0. A device that does not exist
# is reported as such and the exit status is 1. Every run is bounded (timeout).
#
#   first_work_request_rxe.sh FIRST_WORK_REQUEST
set -u
prog=${1:?usage: first_work_request_rxe.sh FIRST_WORK_REQUEST}
. "$(dirname "$0")/require_rxe0.sh"
failed=0
fail() {
    echo "FAILED: $*"
    failed=1
}

# check_run DEVICE_PATTERN [ARG]: one run that must deliver the message.
check_run() {
    pattern=$1
    shift
    out=$(timeout 60 "$prog" "$@" 2>&1)
    status=$?
    echo "\$ first_work_request $*"
    echo "$out"
    [ "$status" -eq 0 ] || fail "exit status $status, expected 0"
    line=$(echo "$out" | grep -E "^$pattern: QP [0-9]+ received [0-9]+ bytes: hello from QP [0-9]+\$")
    [ -n "$line" ] || { fail "no line '$pattern: QP N received N bytes: hello from QP N'"; return; }
    [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "more than one line of output"
    bytes=$(echo "$line" | sed 's/.* received \([0-9]*\) bytes: .*/\1/')
    message=${line#*bytes: }
    [ "$bytes" -eq "${#message}" ] || fail "received $bytes bytes, but the message '$message' has ${#message}"
    receiver=$(echo "$line" | sed 's/.*: QP \([0-9]*\) received.*/\1/')
    sender=${message#hello from QP }
    [ "$receiver" != "$sender" ] || fail "the receiving QP is the sending one ($sender)"
}

check_run '[^ :]+'
check_run rxe0 rxe0

out=$(timeout 60 "$prog" rdma_asio_absent 2>&1)
status=$?
echo "\$ first_work_request rdma_asio_absent"
echo "$out (exit status $status)"
[ "$status" -eq 1 ] || fail "exit status $status for a missing device, expected 1"
echo "$out" | grep -q "^first_work_request: .*no RDMA device with that name" ||
    fail "the error does not say that the device does not exist"
# ... naming the name asked for and the devices there are, so the user can fix it.
echo "$out" | grep -q "'rdma_asio_absent'" || fail "the error does not name the device asked for"
echo "$out" | grep -q "devices present:.* rxe0" || fail "the error does not list the devices present"

[ "$failed" -eq 0 ] || exit 1
echo "first_work_request: the message arrived whole, as docs/work-requests.md shows"
