# Sourced by every guest job, inside the chroot into the host root, before the
# job's command: a veth pair and the soft-RoCE device rxe0 on veth0.
#   veth0 10.0.0.1/24 <-> veth1 10.0.0.2/24, rxe0 on veth0 (gid index 1: IPv4-mapped)
# These addresses exist only inside the guest, which has no network of its own.
guest_setup() {
    ip link set lo up
    ip link add veth0 type veth peer name veth1
    ip addr add 10.0.0.1/24 dev veth0
    ip addr add 10.0.0.2/24 dev veth1
    ip link set veth0 up
    ip link set veth1 up
    rxe_on rxe0 veth0 || return 1
    [ -z "${RDMA_ASIO_GUEST_LINK_ADDR:-}" ] || link_setup "$RDMA_ASIO_GUEST_LINK_ADDR"
}

# The NIC joined to another guest (run-in-guest.sh --link): eth0 with ADDR/24 and
# rxe1 on it.
link_setup() {
    ip addr add "$1/24" dev eth0 || return 1
    ip link set eth0 up
    rxe_on rxe1 eth0
}

# rxe_on DEVICE NETDEV: adds the soft-RoCE device and waits (10 s at most) for its
# port, which turns ACTIVE once the netdev carrier is up.
rxe_on() {
    rdma link add "$1" type rxe netdev "$2" || return 1
    i=0
    while ! rdma link show "$1/1" 2>/dev/null | grep -q 'state ACTIVE'; do
        i=$((i + 1))
        [ $i -lt 100 ] || { echo "guest: $1/1 not ACTIVE after 10 s"; return 1; }
        sleep 0.1
    done
}
