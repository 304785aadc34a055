#!/bin/sh
# sm_watch on a simulated InfiniBand fabric: run inside test/subnet/fabric.sh, it
# starts sm_watch on Hca2, makes Hca3 join and leave a multicast group and its link
# go down and up, then ends sm_watch with SIGINT (which unsubscribes). Prints what
# sm_watch printed; fails when an expected event is missing.
#
#   test/subnet/fabric.sh WORKDIR -- samples/sm_watch_demo.sh SM_WATCH MCAST_MEMBER
set -u
watch=${1:?usage: sm_watch_demo.sh SM_WATCH MCAST_MEMBER}
member=${2:?usage: sm_watch_demo.sh SM_WATCH MCAST_MEMBER}
: "${RDMA_ASIO_FABRIC_CTL:?run me inside test/subnet/fabric.sh}"
mgid=ff12:401b:ffff:0000:0000:0000:0000:0007
out=sm_watch.out

"$watch" >"$out" 2>&1 &
pid=$!
wait_for() { # PATTERN: bounded wait for a line of sm_watch's output
    i=0
    while ! grep -q "$1" "$out" 2>/dev/null; do
        i=$((i + 1))
        [ $i -le 100 ] || { echo "sm_watch_demo: no '$1' after 10 s" >&2; return 1; }
        sleep 0.1
    done
}
status=0
wait_for "register IBV_SM_EVENT_ALL: ok" || status=1
"$RDMA_ASIO_FABRIC_RUN_AS_HCA3" "$member" join "$mgid" >/dev/null || status=1
wait_for MCG_CREATED || status=1
"$RDMA_ASIO_FABRIC_RUN_AS_HCA3" "$member" leave "$mgid" >/dev/null || status=1
wait_for MCG_DELETED || status=1
echo 'Unlink "Hca3"' >"$RDMA_ASIO_FABRIC_CTL"
wait_for GID_UNAVAIL || status=1
echo 'ReLink "Hca3"' >"$RDMA_ASIO_FABRIC_CTL"
wait_for GID_AVAIL || status=1
kill -INT "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
kill -KILL "$pid" 2>/dev/null && { echo "sm_watch_demo: sm_watch ignored SIGINT" >&2; status=1; }
wait "$pid" || { echo "sm_watch_demo: sm_watch exited with $?" >&2; status=1; }
cat "$out"
grep -q "unsubscribed: ok" "$out" || status=1
exit $status
