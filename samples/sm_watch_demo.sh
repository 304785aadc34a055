#!/bin/sh
# sm_watch on a simulated InfiniBand fabric: run inside test/subnet/fabric.sh, it
# starts sm_watch on Hca2, makes Hca3 join and leave a multicast group and its link
# go down and up, then ends sm_watch with SIGINT (which unsubscribes). Shows what
# sm_watch prints as it prints it, waits (bounded) for each event, and fails naming
# every event that did not arrive.
#
#   test/subnet/fabric.sh WORKDIR -- samples/sm_watch_demo.sh SM_WATCH MCAST_MEMBER
set -u
watch=${1:?usage: sm_watch_demo.sh SM_WATCH MCAST_MEMBER}
member=${2:?usage: sm_watch_demo.sh SM_WATCH MCAST_MEMBER}
: "${RDMA_ASIO_FABRIC_CTL:?run me inside test/subnet/fabric.sh}"
# shellcheck disable=SC2034 # read by demo_lib.sh
demo_name=sm_watch_demo
# shellcheck source=samples/demo_lib.sh
. "$(dirname "$0")/demo_lib.sh"
mgid=ff12:401b:ffff:0000:0000:0000:0000:0007
limit=10 # seconds for each event; the fabric answers in well under one

echo "== sm_watch on Hca2: subscribing to the subnet manager's events (opensm on Hca1)"
demo_follow sm_watch.out
"$watch" >sm_watch.out 2>&1 &
pid=$!
if demo_wait_for "sm_watch's subscription (register ... ok)" $limit "register IBV_SM_EVENT_ALL: ok"; then
    echo "-- joining multicast group $mgid from Hca3 (expect MCG_CREATED)"
    "$RDMA_ASIO_FABRIC_RUN_AS_HCA3" "$member" join "$mgid" >/dev/null ||
        demo_missing "Hca3 could not join $mgid"
    demo_wait_for MCG_CREATED $limit MCG_CREATED
    echo "-- Hca3 leaving the group (expect MCG_DELETED)"
    "$RDMA_ASIO_FABRIC_RUN_AS_HCA3" "$member" leave "$mgid" >/dev/null ||
        demo_missing "Hca3 could not leave $mgid"
    demo_wait_for MCG_DELETED $limit MCG_DELETED
    echo "-- unplugging Hca3's link (expect GID_UNAVAIL)"
    echo 'Unlink "Hca3"' >"$RDMA_ASIO_FABRIC_CTL"
    demo_wait_for GID_UNAVAIL $limit GID_UNAVAIL
    echo "-- plugging Hca3's link back in (expect GID_AVAIL)"
    echo 'ReLink "Hca3"' >"$RDMA_ASIO_FABRIC_CTL"
    demo_wait_for GID_AVAIL $limit GID_AVAIL
fi
echo "-- Ctrl-C (SIGINT) to sm_watch (expect 'unsubscribed: ok' and exit status 0)"
kill -INT "$pid" 2>/dev/null
if demo_wait_exit "$pid" 5; then
    demo_wait_for "sm_watch's unsubscription (unsubscribed: ok)" 0 "unsubscribed: ok"
    [ "$demo_status" -eq 0 ] || demo_missing "sm_watch's clean exit: exit status $demo_status"
else
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    demo_show
    demo_missing "sm_watch's exit on SIGINT: still running after 5 s (killed)"
fi
demo_end
