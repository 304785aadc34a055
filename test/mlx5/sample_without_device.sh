#!/bin/sh
# The devx_events sample on a host without an mlx5 device: it must fail (status
# non-zero) and say "no mlx5 device". Skipped (77) where an mlx5 device exists.
set -u
sample=${1:?usage: sample_without_device.sh PATH_TO_devx_events}
for dev in /sys/class/infiniband/*; do
    [ -e "$dev/device/driver" ] || continue
    case $(readlink -f "$dev/device/driver") in
    */mlx5_core)
        echo "SKIPPED (not passed): this host has an mlx5 device ($dev)"
        exit 77
        ;;
    esac
done
out=$(timeout 20 "$sample" 2>&1)
status=$?
echo "$out"
echo "exit status: $status"
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "FAILED: expected a non-zero exit"; exit 1; }
echo "$out" | grep -q "^devx_events: no mlx5 device" || { echo "FAILED: no clear error"; exit 1; }
