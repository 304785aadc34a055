#!/bin/sh
# Runs one ping-pong between a server and a client on rxe0 loopback and checks that
# both finish all iterations. Used by ctest to run rdma_asio's rc_pingpong samples
# against rdma-core's real ibv_rc_pingpong in both roles.
#
#   pingpong_interop.sh SERVER_CMD CLIENT_CMD PORT
# SERVER_CMD/CLIENT_CMD are programs taking ibv_rc_pingpong's options.
set -u
server=$1 client=$2 port=$3
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
iters=1000
opts="-d $device -g 1 -e -s 64 -n $iters -p $port"
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
