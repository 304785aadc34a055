#!/bin/sh
# The devx_events sample where no mlx5 device exists: it must fail (exit status 1)
# and say why, naming the devices that are there:
#   devx_events           the samples' "this kernel has no RDMA support" on a
#                         kernel without RDMA, "no mlx5 device" without any RDMA
#                         device, else
#                         "rxe0 is not an mlx5 device" (every device named);
#   devx_events -d DEV    "DEV is not an mlx5 device" for each device present;
#   devx_events -d ABSENT "no RDMA device called ABSENT" (where devices exist).
# Skipped (77) where an mlx5 device exists. With DEVICE, skipped (77) unless that
# device exists, and failing in the test guest (the rxe label runs it there with rxe0).
#
#   sample_without_device.sh PATH_TO_devx_events [DEVICE]
set -u
sample=${1:?usage: sample_without_device.sh PATH_TO_devx_events [DEVICE]}
required=${2:-}
devices=
for dev in /sys/class/infiniband/*; do
    [ -e "$dev" ] || continue
    devices="$devices ${dev##*/}"
    [ -e "$dev/device/driver" ] || continue
    case $(readlink -f "$dev/device/driver") in
    */mlx5_core)
        echo "SKIPPED (not passed): this host has an mlx5 device ($dev)"
        exit 77
        ;;
    esac
done
echo "RDMA devices:${devices:- none}"
if [ -n "$required" ] && [ ! -e "/sys/class/infiniband/$required" ]; then
    [ -z "${RDMA_ASIO_IN_GUEST:-}${RDMA_ASIO_REQUIRE_DEVICE:-}" ] || { echo "FAILED: no $required"; exit 1; }
    echo "SKIPPED (not passed): no $required; run the rxe label in the test VM"
    exit 77
fi
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
out=
run() { # ARGS...: runs the sample, which must exit with 1
    out=$(timeout 20 "$sample" "$@" 2>&1)
    status=$?
    echo "== devx_events $* -> exit status $status"
    echo "$out"
    [ "$status" -eq 1 ] || fail "devx_events $*: exit status $status, expected 1"
}

run
if [ ! -e /sys/class/infiniband_verbs ]; then
    # The message every sample gives on a kernel without RDMA.
    echo "$out" | grep -q "^devx_events: this kernel has no RDMA support" ||
        fail "no 'this kernel has no RDMA support'"
elif [ -z "$devices" ]; then
    echo "$out" | grep -q "^devx_events: no mlx5 device" || fail "no 'no mlx5 device'"
else
    echo "$out" | grep -Eq "^devx_events: .*(is not an mlx5 device|are not mlx5 devices)$" ||
        fail "no 'is not an mlx5 device'"
    for dev in $devices; do
        echo "$out" | grep -Eq "^devx_events: (.*, )?$dev(,| is| are)" || fail "$dev not named"
    done
fi

for dev in $devices; do
    run -d "$dev"
    [ "$out" = "devx_events: $dev is not an mlx5 device" ] || fail "-d $dev: not named"
done

run -d rdma_asio_absent
if [ -n "$devices" ]; then
    [ "$out" = "devx_events: no RDMA device called rdma_asio_absent" ] ||
        fail "-d rdma_asio_absent: no 'no RDMA device called rdma_asio_absent'"
fi

[ "$failures" -eq 0 ] && echo "OK: devx_events says why it has no mlx5 device" || exit 1
