#!/bin/bash
# run-in-guest.sh with a stand-in for qemu (no image, no emulation): the guest's
# lines reach the caller while the guest still runs, "booting the test VM" comes
# first, and Ctrl-C (SIGINT to the caller's process group, as a terminal sends it)
# stops the guest and ends run-in-guest.sh with a non-zero status. Every wait is
# bounded.
#
#   run_in_guest_test.sh RUN_IN_GUEST_SH WORKDIR
set -u
script=${1:?usage: run_in_guest_test.sh RUN_IN_GUEST_SH WORKDIR}
work=${2:?usage: run_in_guest_test.sh RUN_IN_GUEST_SH WORKDIR}
rm -rf "$work"
mkdir -p "$work/image" "$work/bin" || exit 1
work=$(cd "$work" && pwd)
: >"$work/image/kernel"
: >"$work/image/initrd"

# The stand-in prints a console as qemu does (CR LF), then "runs" until stopped.
cat >"$work/bin/qemu-system-x86_64" <<'FAKE'
#!/bin/sh
echo $$ >"$FAKE_QEMU_PIDFILE"
printf 'SeaBIOS (version 1.16)\r\n'
printf 'rdma_asio guest: running fake-command\r\n'
printf 'a line from the guest\r\n'
exec sleep 300
FAKE
chmod +x "$work/bin/qemu-system-x86_64"

failed=0
fail() { echo "FAILED: $*"; failed=1; }
qemu_pid=
alive() { [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; }
cleanup() { alive && kill -KILL "$qemu_pid"; }
trap cleanup EXIT

# Job control: the run gets a process group of its own, as a terminal's foreground
# job does, and SIGINT is not ignored in it.
set -m
PATH=$work/bin:$PATH FAKE_QEMU_PIDFILE=$work/qemu.pid \
    "$script" --image "$work/image" --timeout 120 -- fake-command \
    >"$work/out" 2>"$work/err" &
pid=$!
set +m

# 1. The guest's line arrives while the guest still runs (not when it ends).
n=0
until grep -q "a line from the guest" "$work/out" 2>/dev/null; do
    n=$((n + 1))
    if [ $n -gt 200 ]; then
        fail "no guest output after 20 s while the guest runs (held back in a buffer?)"
        break
    fi
    sleep 0.1
done
qemu_pid=$(cat "$work/qemu.pid" 2>/dev/null)
alive || fail "the stand-in qemu is not running (pid '$qemu_pid')"
grep -q "booting the test VM" "$work/err" || fail "no 'booting the test VM' line"
if grep -q "$(printf '\r')" "$work/out"; then fail "CR left in the output"; fi

# 2. Ctrl-C: SIGINT to the whole foreground process group.
kill -INT -- "-$pid"
n=0
while kill -0 "$pid" 2>/dev/null; do
    n=$((n + 1))
    if [ $n -gt 300 ]; then
        fail "run-in-guest.sh still running 30 s after SIGINT"
        kill -KILL -- "-$pid" 2>/dev/null
        break
    fi
    sleep 0.1
done
wait "$pid"
status=$?
[ "$status" -ne 0 ] || fail "exit status 0 after Ctrl-C"
n=0
while alive; do
    n=$((n + 1))
    if [ $n -gt 100 ]; then
        fail "the guest (stand-in qemu, pid $qemu_pid) still runs 10 s after run-in-guest.sh ended"
        break
    fi
    sleep 0.1
done
echo "--- stdout"; cat "$work/out"
echo "--- stderr"; cat "$work/err"
echo "--- exit status $status"
[ $failed = 0 ] && echo "passed"
exit $failed
