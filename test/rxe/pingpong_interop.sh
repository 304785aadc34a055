#!/bin/sh
# Runs one ping-pong between a server and a client on rxe0 loopback and checks that
# both finish all iterations. Used by ctest to run rdma_asio's rc_pingpong samples
# against rdma-core's real ibv_rc_pingpong in both roles and in each waiting mode.
#
#   pingpong_interop.sh "SERVER_CMD [MODE_OPTIONS]" "CLIENT_CMD [MODE_OPTIONS]" PORT
# SERVER_CMD/CLIENT_CMD are programs taking ibv_rc_pingpong's options, each with the
# options of its waiting mode (none: busy polling; -e: events; -e --spin=USEC ...),
# split on spaces. The two sides' modes are independent, as in ibv_rc_pingpong.
set -u
server=$1 client=$2 port=$3
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
iters=1000
opts="-d $device -g 1 -s 64 -n $iters -p $port"
if [ ! -e "/sys/class/infiniband/$device" ]; then
    if [ -n "${RDMA_ASIO_IN_GUEST:-}${RDMA_ASIO_REQUIRE_DEVICE:-}" ]; then
        echo "FAILED: RDMA device '$device' not found"; exit 1
    fi
    echo "SKIPPED (not passed): RDMA device '$device' not found; run the rxe label in the test VM"
    exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

timeout 120 $server $opts >"$out/server" 2>&1 &
server_pid=$!
# The real client does not retry: wait until the server listens.
i=0
until ss -ltn | grep -q ":$port "; do
    i=$((i + 1))
    if [ $i -gt 100 ]; then
        echo "server never listened on port $port"; cat "$out/server"; exit 1
    fi
    sleep 0.1
done
timeout 120 $client $opts 127.0.0.1 >"$out/client" 2>&1
client_status=$?
wait $server_pid
server_status=$?

echo "--- server ($server): exit $server_status"; cat "$out/server"
echo "--- client ($client): exit $client_status"; cat "$out/client"
[ $server_status = 0 ] && [ $client_status = 0 ] || exit 1
grep -q "^$iters iters in" "$out/server" && grep -q "^$iters iters in" "$out/client" || {
    echo "a side did not report $iters iterations"; exit 1; }

# rdma_asio's samples print their CQ's counters. A wait polls first and only a wait
# that found the CQ empty shows its mode: busy polling spins (spin hits) and never
# arms the CQ or reads an event; -e without a spin budget arms the CQ (arms) and
# never spins, and reads at most one event per arm. When the peer is always ahead
# (a slow build, as under a sanitizer), every wait finds a completion at once: the
# counters then show no arm and no spin, and the line below says the mode did not
# show rather than pretend it did.
check_mode() { # "COMMAND [OPTIONS]" OUTPUT_FILE
    case $1 in ibv_rc_pingpong*) return 0 ;; esac
    line=$(grep "^rdma_asio CQ: " "$2") || { echo "$1: no 'rdma_asio CQ:' line"; return 1; }
    arms=$(echo "$line" | sed 's/.* \([0-9]*\) arms,.*/\1/')
    events=$(echo "$line" | sed 's/.* \([0-9]*\) events,.*/\1/')
    spins=$(echo "$line" | sed 's/.* \([0-9]*\) spin hits.*/\1/')
    case " $1 " in
    *" -e "*--spin=* | *" -e "*--adaptive-spin=*) ;;
    *" -e "*)
        [ "$spins" -eq 0 ] || { echo "$1: event mode spun ($spins spin hits)"; return 1; }
        [ "$events" -le "$arms" ] ||
            { echo "$1: read $events events after only $arms arms"; return 1; }
        [ "$arms" -gt 0 ] ||
            echo "$1: every wait found a completion at once (0 arms): event mode did not show" ;;
    *)
        [ "$arms" -eq 0 ] && [ "$events" -eq 0 ] ||
            { echo "$1: busy polling armed the CQ $arms times, read $events events"; return 1; } ;;
    esac
}
check_mode "$server" "$out/server" && check_mode "$client" "$out/client" || exit 1
echo "OK"
