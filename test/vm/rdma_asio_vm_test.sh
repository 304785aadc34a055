#!/bin/bash
# rdma-asio-vm without booting anything: where it runs a command directly (inside
# the guest, RDMA_ASIO_IN_GUEST), the command's status and output come back, its
# timeout ends it with 124, and bad usage is refused with 2 and a message. (The
# guest itself: the example project's test, label vm.)
#
#   rdma_asio_vm_test.sh RDMA_ASIO_VM
set -u
vm=${1:?usage: rdma_asio_vm_test.sh RDMA_ASIO_VM}
failed=0
fail() { echo "FAILED: $*"; failed=1; }

out=$(RDMA_ASIO_IN_GUEST=1 "$vm" -- sh -c 'echo in-place; exit 7' 2>&1); rc=$?
[ $rc = 7 ] || fail "direct run: status $rc, not 7"
[ "$out" = in-place ] || fail "direct run: output '$out'"

start=$(date +%s)
RDMA_ASIO_IN_GUEST=1 "$vm" --timeout 1 -- sleep 30 >/dev/null 2>&1; rc=$?
took=$(($(date +%s) - start))
[ $rc = 124 ] || fail "--timeout 1: status $rc, not 124"
[ $took -lt 20 ] || fail "--timeout 1 took $took s"

out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --frobnicate -- true 2>&1); rc=$?
[ $rc = 2 ] || fail "unknown option: status $rc, not 2"
echo "$out" | grep -q "unknown option --frobnicate" || fail "unknown option: '$out'"

out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --timeout soon -- true 2>&1); rc=$?
[ $rc = 2 ] || fail "--timeout soon: status $rc, not 2"

# --kernel names one kernel package: not a pattern, not the metapackage.
for pkg in 'linux-image-6.12*-amd64' linux-image-amd64 linux-headers-6.12.95+deb12-amd64; do
    out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --kernel "$pkg" -- true 2>&1); rc=$?
    [ $rc = 2 ] || fail "--kernel $pkg: status $rc, not 2"
    echo "$out" | grep -q "takes a kernel package" || fail "--kernel $pkg: '$out'"
    out=$(RDMA_ASIO_IN_GUEST=1 RDMA_ASIO_KERNEL_PKG=$pkg "$vm" -- true 2>&1); rc=$?
    [ $rc = 2 ] || fail "RDMA_ASIO_KERNEL_PKG=$pkg: status $rc, not 2"
done
out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --kernel linux-image-6.12.95+deb12-amd64 -- echo ok 2>&1); rc=$?
[ $rc = 0 ] && [ "$out" = ok ] || fail "--kernel with a direct run: status $rc, output '$out'"

out=$("$vm" --help 2>/dev/null); rc=$?
[ $rc = 0 ] || fail "--help: status $rc, not 0"
echo "$out" | grep -q "rdma-asio-vm \[--timeout SECS\]" || fail "--help: '$out'"

out=$(RDMA_ASIO_IN_GUEST=1 "$vm" 2>&1); rc=$?
[ $rc = 2 ] || fail "no command: status $rc, not 2"
echo "$out" | grep -q "no command given" || fail "no command: '$out'"

if [ ! -d /sys/class/infiniband ] || [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
    out=$(env -u RDMA_ASIO_IN_GUEST "$vm" --direct -- true 2>&1); rc=$?
    [ $rc = 2 ] || fail "--direct without a device: status $rc, not 2"
    echo "$out" | grep -q "no RDMA device" || fail "--direct without a device: '$out'"
fi

# --server: the client runs once the server says it is ready, the server is stopped
# after (its output prefixed), and the status is the client's.
start=$(date +%s)
out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --server 'sleep 1; echo listening on here; exec sleep 100' \
    -- sh -c 'echo client ran; exit 5' 2>&1); rc=$?
took=$(($(date +%s) - start))
[ $rc = 5 ] || fail "--server: status $rc, not the client's 5"
echo "$out" | grep -qx "client ran" || fail "--server: the client's output missing: '$out'"
echo "$out" | grep -qx "server: listening on here" || fail "--server: the server's output: '$out'"
[ $took -lt 20 ] || fail "--server: the server was not stopped (took $took s)"
out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --server 'echo ready; echo serving >&2; sleep 100' --ready serving \
    -- echo ok 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qx ok || fail "--ready on stderr: status $rc, '$out'"
out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --server 'echo cannot listen; exit 4' -- echo never 2>&1); rc=$?
[ $rc = 3 ] || fail "--server that ends first: status $rc, not 3"
echo "$out" | grep -q "the server ended (status 4) before it printed 'listening'" ||
    fail "--server that ends first: '$out'"
echo "$out" | grep -qx never && fail "--server that ends first: the client ran"
out=$(RDMA_ASIO_IN_GUEST=1 "$vm" --server 'sleep 100' 2>&1); rc=$?
[ $rc = 2 ] || fail "--server without a client: status $rc, not 2"

[ $failed = 0 ] && echo "rdma-asio-vm: direct runs, timeout, --server and usage errors as documented"
exit $failed
