#!/bin/bash
# Boots the rxe test guest once, runs one command in it and returns the command's
# output and exit status.
#
#   run-in-guest.sh --image DIR [--keep DIR]... [--env NAME]... [--timeout SECS]
#                   [--shell] [--link listen|connect:PORT:ADDR] [--] COMMAND [ARG...]
#
# The guest sees the host's root at the same paths (9p, read-write) with tmpfs over
# /run, /tmp, /var/tmp and /dev/shm, and starts in the current directory. The current
# directory, this script's directory, the run directory and every --keep DIR stay
# the host's even under those scratch directories (a build tree in /tmp works). Before the
# command runs, veth0/veth1 and rxe0 exist (guest-setup.sh). Only the run directory
# DIR/../runs/<id> (console log, exit status) is written by this script; the command
# itself should write only into the build tree. The command gets the host's
# RDMA_ASIO_* variables and each --env NAME that is set on the host.
#
# --link joins this guest to one other guest: a virtio NIC (eth0) on a qemu socket
# backend that listens on, or connects to, 127.0.0.1:PORT (start the listening
# guest first), with address ADDR/24 and the soft-RoCE device rxe1 on it. Nothing
# leaves this machine: the "wire" is a TCP connection on loopback.
#
# RDMA_ASIO_VM_MEMORY (qemu's -m, 2G by default) gives the guest more memory, for a
# benchmark with thousands of connections (each rxe queue pair's rings are kernel
# memory of the guest).
#
# Exit status: the command's, or 124 when the guest was killed after SECS seconds
# (default 1800), or 125 when the guest ended without reporting a status.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image= timeout_s=1800 shell=0 keep=() link= forward=()
while [ $# -gt 0 ]; do
    case "$1" in
    --image) image=$2; shift 2 ;;
    --keep) keep+=("$(cd "$2" && pwd)"); shift 2 ;;
    --env)
        case "$2" in
        [A-Za-z_]*) forward+=("$2") ;;
        *) echo "run-in-guest: --env takes a variable name, not '$2'" >&2; exit 2 ;;
        esac
        shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --shell) shell=1; shift ;;
    --link) link=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "run-in-guest: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ -n "$image" ] || { echo "run-in-guest: --image DIR is required" >&2; exit 2; }
[ $shell = 1 ] || [ $# -gt 0 ] || { echo "run-in-guest: no command given" >&2; exit 2; }
image=$(cd "$image" && pwd)
for f in kernel initrd; do
    [ -f "$image/$f" ] || { echo "run-in-guest: $image/$f missing (run build-guest.sh)" >&2; exit 2; }
done
command -v qemu-system-x86_64 >/dev/null || { echo "run-in-guest: qemu-system-x86_64 missing (install qemu-system-x86)" >&2; exit 2; }

mkdir -p "$image/../runs"
run=$(mktemp -d "$(cd "$image/.." && pwd)/runs/run.XXXXXX")
keep+=("$PWD" "$here" "$(dirname "$run")")
for p in "$run" "${keep[@]}"; do
    case "$p" in
    *[[:space:],]*) echo "run-in-guest: paths with white space or commas are not supported ($p)" >&2; exit 2 ;;
    esac
done
keep_arg=$(IFS=,; echo "${keep[*]}")

{
    echo "# written by run-in-guest.sh"
    # The host's RDMA_ASIO_* settings (test device, ...) reach the command.
    while IFS='=' read -r name value; do
        case "$name" in
        RDMA_ASIO_IN_GUEST | '') ;;
        RDMA_ASIO_*) echo "export $name=$(printf '%q' "$value")" ;;
        esac
    done < <(env)
    for name in "${forward[@]}"; do
        case "$name" in
        *[!A-Za-z0-9_]*) echo "run-in-guest: --env takes a variable name, not '$name'" >&2; exit 2 ;;
        esac
        [ -z "${!name+set}" ] || echo "export $name=$(printf '%q' "${!name}")"
    done
    [ -z "$link" ] || echo "export RDMA_ASIO_GUEST_LINK_ADDR=${link##*:}"
    echo ". $(printf '%q' "$here/guest-setup.sh")"
    echo "cd $(printf '%q' "$PWD") || exit 1"
    echo "if guest_setup >$(printf '%q' "$run/setup.log") 2>&1; then"
    if [ $shell = 1 ]; then
        echo "  echo 'rdma_asio guest: shell (exit to power off)'"
        echo "  setsid -c /bin/bash -i </dev/ttyS0 >/dev/ttyS0 2>&1"
    else
        echo "  echo 'rdma_asio guest: running' $(printf '%q' "$*")"
        printf '  %s\n' "$(printf '%q ' "$@")"
    fi
    echo "  status=\$?"
    echo "else"
    echo "  cat $(printf '%q' "$run/setup.log"); echo 'rdma_asio guest: setup failed'; status=125"
    echo "fi"
    echo "echo \$status >$(printf '%q' "$run/status")"
    echo "echo \"rdma_asio guest: exit status \$status\""
} >"$run/job.sh"

nic=(-nic none)
if [ -n "$link" ]; then
    IFS=: read -r mode port addr <<<"$link"
    case "$mode" in
    listen | connect) ;;
    *) echo "run-in-guest: --link listen|connect:PORT:ADDR, not $link" >&2; exit 2 ;;
    esac
    # A MAC of its own per address, so that the two guests differ.
    last=${addr##*.}
    nic=(-netdev "socket,id=link0,$mode=127.0.0.1:$port"
        -device "virtio-net-pci,netdev=link0,mac=52:54:00:12:34:$(printf %02x "$last")")
fi

# no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check
# can miss its ticks and panic at boot ("IO-APIC + timer doesn't work").
# mitigations=off: the guest runs only the tests and the host's programs, and its
# Spectre guards (retpolines on every indirect call of the kernel, rxe's included)
# are emulated instruction by instruction: 98 rxe tests and 20 interop tests took
# 121 user CPU-seconds of qemu with them off, 128 on.
# cryptomgr.notests: the kernel's self-tests of its crypto algorithms (none of which
# the tests use) took 0.7 s of each boot under emulation.
# -cpu: qemu's default model (qemu64) has no SSSE3, SSE4.1, SSE4.2 or POPCNT, which
# every x86-64 machine of the last fifteen years has (x86-64-v2); clang 14's
# ThreadSanitizer runtime uses SSE4.1 and died there with SIGILL. The whole rxe label in
# one process took the same time with either model (61-69 s wall, 37-45 CPU-s).
qemu=(qemu-system-x86_64 -accel tcg -cpu qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt
    -m "${RDMA_ASIO_VM_MEMORY:-2G}" -smp 2 -no-reboot "${nic[@]}"
    -display none -monitor none
    -kernel "$image/kernel" -initrd "$image/initrd"
    -append "console=ttyS0 panic=-1 loglevel=3 no_timer_check mitigations=off cryptomgr.notests rdma_asio.job=$run/job.sh rdma_asio.keep=$keep_arg"
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap"
    -virtfs "local,path=/usr,mount_tag=hostusr,security_model=none,multidevs=remap,readonly=on")

echo "run-in-guest: booting the test VM (pure emulation: seconds on an idle machine, a minute or more on a busy one)" >&2
started=$(date +%s)
if [ $shell = 1 ]; then
    # signal=off: the terminal passes Ctrl-C to the guest's serial line as a byte,
    # where the guest's tty turns it into SIGINT for the program in the foreground
    # there; qemu itself is not interrupted. `exit` powers the guest off.
    set +e
    "${qemu[@]}" -chardev stdio,id=console,signal=off -serial chardev:console
    rc=$?
    set -e
else
    # The console goes through a FIFO to one reader that strips the CRs, keeps the
    # whole console in the run directory and shows the job's own output, each line as
    # it comes: bash's `read` takes no more than a line from a pipe, where tr or mawk
    # would hold the output back in blocks.
    # Ctrl-C (SIGINT to this script's process group) or SIGTERM stops the guest: qemu
    # runs under timeout in a process group of its own, so this script stops it.
    mkfifo "$run/console.fifo"
    (
        trap '' INT # outlive a Ctrl-C to show the guest's last lines
        on=0
        while IFS= read -r line || [ -n "$line" ]; do
            line=${line%$'\r'}
            printf '%s\n' "$line" >&3
            case "$line" in
            "rdma_asio guest: running"*)
                [ -f "$run/booted" ] || date +%s >"$run/booted" ;;
            esac
            case "$line" in
            "rdma_asio guest: exit status"*) on=2 ;;
            "rdma_asio guest: "*) [ $on = 2 ] || on=1 ;;
            esac
            [ $on != 1 ] || printf '%s\n' "$line"
        done <"$run/console.fifo" 3>"$run/console.log"
    ) &
    filter_pid=$!
    interrupted=
    qemu_pid=
    stop_guest() {
        interrupted=$1
        [ -z "$qemu_pid" ] || kill -TERM "$qemu_pid" 2>/dev/null || true
    }
    trap 'stop_guest 130' INT
    trap 'stop_guest 143' TERM
    trap 'stop_guest 129' HUP
    timeout -k 10 "$timeout_s" "${qemu[@]}" -serial stdio </dev/null >"$run/console.fifo" 2>&1 &
    qemu_pid=$!
    [ -z "$interrupted" ] || stop_guest "$interrupted"
    set +e
    # A trapped signal ends `wait` early: wait again until qemu has really ended.
    while :; do
        wait "$qemu_pid"
        rc=$?
        kill -0 "$qemu_pid" 2>/dev/null || break
    done
    wait "$filter_pid"
    set -e
    rm -f "$run/console.fifo"
    if [ -n "$interrupted" ]; then
        echo "run-in-guest: interrupted; the guest was stopped (console: $run/console.log)" >&2
        exit "$interrupted"
    fi
fi
elapsed=$(($(date +%s) - started))

if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "run-in-guest: guest killed after ${timeout_s} s (console: $run/console.log)" >&2
    exit 124
fi
if [ ! -f "$run/status" ]; then
    if [ -f "$run/console.log" ]; then
        echo "run-in-guest: guest ended without an exit status (qemu rc $rc); console follows" >&2
        tail -n 40 "$run/console.log" >&2 || true
    else
        echo "run-in-guest: guest ended without an exit status (qemu rc $rc)" >&2
    fi
    exit 125
fi
status=$(cat "$run/status")
echo "$elapsed" >"$run/elapsed"
# Seconds from starting qemu to the command starting (the boot cost).
[ ! -f "$run/booted" ] || echo $(($(cat "$run/booted") - started)) >"$run/boot_seconds"
[ "$status" = 0 ] ||
    echo "run-in-guest: command failed with exit status $status after ${elapsed} s in the guest" >&2
exit "$status"
