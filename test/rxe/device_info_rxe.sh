#!/bin/sh
# device_info on rxe0 (the test VM's soft-RoCE device on veth0, 10.0.0.1):
#   1. every GID line names its type and netdev: rxe speaks RoCE v2 only, so the
#      address of veth0 appears once, as RoCE v2 on veth0, and unused entries
#      not at all; an Ethernet port shows no LIDs;
#   2. -l lists rxe0 by name only; -i 1 shows port 1;
#   3. a device or port that does not exist: an error naming it, exit status 1.
#
#   device_info_rxe.sh DEVICE_INFO
set -u
prog=$1
. "$(dirname "$0")/require_rxe0.sh"
status=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAILED: $1 (expected $2, got $3)"; status=1; fi
}
contains() { # WHAT TEXT PATTERN
    if printf '%s\n' "$2" | grep -q -- "$3"; then echo "ok: $1"; else echo "FAILED: $1 (no '$3')"; status=1; fi
}

out=$(timeout 30 "$prog" -d rxe0 2>&1); rc=$?
echo "$out"
check "device_info -d rxe0 exits 0" 0 $rc
contains "the device" "$out" "^hca_id:	rxe0$"
contains "its node GUID" "$out" "node_guid:	*[0-9a-f]\{4\}:[0-9a-f]\{4\}:[0-9a-f]\{4\}:[0-9a-f]\{4\}$"
contains "its firmware" "$out" "fw_ver:"
contains "port 1 active" "$out" "state:	*ACTIVE"
contains "max MTU" "$out" "max_mtu:	*[0-9]* ([1-5])"
contains "active MTU" "$out" "active_mtu:	*[0-9]* ([1-5])"
contains "veth0's address as RoCE v2 on veth0" "$out" "GID\[ *[0-9]*\]:	*0000:0000:0000:0000:0000:ffff:0a00:0001, RoCE v2, veth0$"
check "no GID line without type and netdev" 0 \
    "$(printf '%s\n' "$out" | grep 'GID\[' | grep -cv ', RoCE v2, veth0$')"
check "no LID lines on an Ethernet port" 0 "$(printf '%s\n' "$out" | grep -c 'lid:')"

out=$(timeout 30 "$prog" -l 2>&1); rc=$?
echo "$out"
check "device_info -l exits 0" 0 $rc
contains "-l names rxe0" "$out" "^	rxe0$"
check "-l shows no ports" 0 "$(printf '%s\n' "$out" | grep -c 'port')"

out=$(timeout 30 "$prog" -v -d rxe0 -i 1 2>&1); rc=$?
check "device_info -v -d rxe0 -i 1 exits 0" 0 $rc
contains "-i 1 shows port 1" "$out" "port:	1$"
contains "-v shows the device's limits" "$out" "max_qp:"

out=$(timeout 30 "$prog" -d no_such_dev0 2>&1); rc=$?
echo "$out"
check "an unknown device: exit 1" 1 $rc
contains "an unknown device is named" "$out" "^device_info: no RDMA device called no_such_dev0$"

out=$(timeout 30 "$prog" -d rxe0 -i 2 2>&1); rc=$?
echo "$out"
check "a port rxe0 lacks: exit 1" 1 $rc
contains "the missing port is named" "$out" "^device_info: rxe0 has no port 2"
exit $status
