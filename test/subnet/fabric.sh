#!/bin/sh
# Runs ONE command inside a fresh simulated InfiniBand fabric, then checks the SA and
# cleans up.
#
#   fabric.sh WORKDIR -- command [args...]
#
# Fabric: one switch "Switch1" with Hca1, Hca2, Hca3 on its ports 1-3 (ibsim), opensm
# on Hca1 (under umad2sim). The command runs with WORKDIR as its cwd, attached to Hca2
# as an SM-capable client (SIM_SET_ISSM=1, so that ibsim hands it the SA's Reports).
# It gets these variables:
#   LD_PRELOAD SIM_HOST=Hca2 SIM_SET_ISSM=1 IBSIM_SOCKNAME  umad2sim attachment
#   RDMA_ASIO_FABRIC_CTL          FIFO feeding ibsim's console: write lines such as
#                                 'Unlink "Hca3"' or 'ReLink "Hca3"' to it
#   RDMA_ASIO_FABRIC_DIR          WORKDIR (absolute)
#   RDMA_ASIO_FABRIC_SM_LOG       opensm's log file
#   RDMA_ASIO_FABRIC_RUN_AS_HCA3  a script that runs its arguments attached to Hca3
#   RDMA_ASIO_FABRIC_HCA2_GID, RDMA_ASIO_FABRIC_HCA3_GID  port GIDs (fe80::...)
#   RDMA_ASIO_FABRIC_HCA2_LID, RDMA_ASIO_FABRIC_HCA3_LID, RDMA_ASIO_FABRIC_SM_LID
#
# After the command: unless FABRIC_EXPECT_SUBSCRIPTIONS=1, fails when `saquery IIR`
# still lists a subscription from Hca2; fails when opensm logged a Report nobody
# acknowledged (ERR 1A06, or ERR 5401 for class 0x3 at its exit). Exit status: the
# command's (124 when it timed out), 1 when a check or the set-up failed, 77 when the
# needed packages are missing (1 then too when RDMA_ASIO_REQUIRE_FABRIC is set). When
# the command fails, opensm's ERR lines are printed too.
#
# opensm runs with umad2sim_address_fix.c preloaded (built into WORKDIR with $CC, or
# cc), which mends an uninitialised field of umad2sim's that made the SA refuse an
# unsubscribe now and then.
#
# Knobs: FABRIC_TIMEOUT (seconds for the command, default 120), FABRIC_OSM_FLAGS
# (extra opensm options, e.g. "-D 0x07"), UMAD2SIM_LIB (path of libumad2sim.so),
# FABRIC_PRELOAD (libraries to preload before libumad2sim.so into the command and
# what it runs through run-as-hca3, not into ibsim, opensm or the checks: a
# sanitizer runtime that must come first, see test/CMakeLists.txt), FABRIC_OSM_PRELOAD
# (libraries to preload into opensm, between the address fix and libumad2sim.so).
# Ctrl-C (or SIGTERM, SIGHUP) while the command runs: fabric.sh sends SIGINT to the
# command's process group first and waits (10 s at most) for it, while opensm still
# answers (a watcher's unsubscription succeeds), then stops opensm and ibsim, which
# run in sessions of their own so that the terminal's Ctrl-C does not reach them.
# WORKDIR keeps ibsim.log, osm.log, osm.out and opensm's dumps for debugging.
# shellcheck disable=SC2317 # functions run from traps look unreachable to shellcheck
set -u

me=fabric.sh
# Resolved before anything changes directory: a relative $0 (test/subnet/fabric.sh run
# from the checkout's root, as the README does) means nothing once we are in WORKDIR.
here=$(cd "$(dirname "$0")" && pwd -P) || exit 1
say() { printf '%s: %s\n' "$me" "$*" >&2; }

if [ $# -lt 3 ] || [ "$2" != "--" ]; then
    echo "usage: $me WORKDIR -- command [args...]" >&2
    exit 2
fi
workdir_arg=$1
shift 2
# The command runs in WORKDIR: a relative path to it is taken from where fabric.sh was
# started, as a shell would (its arguments are passed as they are).
case "$1" in
/*) ;;
*/*)
    cmd_dir=$(cd "$(dirname "$1")" 2>/dev/null && pwd -P) || {
        printf '%s: %s: no such directory\n' "$me" "$(dirname "$1")" >&2
        exit 2
    }
    cmd_path=$cmd_dir/$(basename "$1")
    shift
    set -- "$cmd_path" "$@"
    ;;
esac

# ---- prerequisites -------------------------------------------------------------------
lib=${UMAD2SIM_LIB:-}
if [ -z "$lib" ]; then
    for f in /usr/lib/*/umad2sim/libumad2sim.so /usr/lib64/umad2sim/libumad2sim.so \
             /usr/lib/umad2sim/libumad2sim.so /usr/local/lib/umad2sim/libumad2sim.so; do
        if [ -f "$f" ]; then lib=$f; break; fi
    done
fi
missing=
command -v ibsim >/dev/null 2>&1 || missing="$missing ibsim-utils"
[ -n "$lib" ] && [ -f "$lib" ] || missing="$missing libumad2sim0"
PATH=$PATH:/usr/sbin:/sbin
export PATH
command -v opensm >/dev/null 2>&1 || missing="$missing opensm"
command -v saquery >/dev/null 2>&1 && command -v ibaddr >/dev/null 2>&1 ||
    missing="$missing infiniband-diags"
command -v timeout >/dev/null 2>&1 || missing="$missing coreutils(timeout)"
command -v setsid >/dev/null 2>&1 || missing="$missing util-linux(setsid)"
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || missing="$missing a-C-compiler($cc)"
command -v ps >/dev/null 2>&1 || missing="$missing procps"
if [ -n "$missing" ]; then
    # The test command needs the fabric: there, a missing package is a failure.
    if [ -n "${RDMA_ASIO_REQUIRE_FABRIC:-}" ]; then
        say "FAILED: missing packages:$missing (scripts/install-deps installs them)"
        exit 1
    fi
    say "skipped: missing packages:$missing (scripts/install-deps installs them)"
    exit 77
fi

# ---- work directory --------------------------------------------------------------------
mkdir -p "$workdir_arg" || exit 1
W=$(cd "$workdir_arg" && pwd -P) || exit 1
cd "$W" || exit 1
rm -rf ./sys-* ./ibsim.ctl ./run-as-hca3 ./net ./ibsim.log ./osm.log ./osm.out ./iir.out

sock="rdma_asio_fabric.$$.$(printf '%s' "$W" | cksum | cut -d' ' -f1)"
fifo=$W/ibsim.ctl
wrapper=$W/run-as-hca3
cmd_timeout=${FABRIC_TIMEOUT:-120}

ibsim_pid=
osm_pid=
cmd_pid=
cmd_pgid=

# Waits (bounded, in tenths of a second) for process $1 to end; returns 1 if it did not.
wait_gone() {
    n=0
    while kill -0 "$1" 2>/dev/null; do
        [ "$n" -ge "$2" ] && return 1
        sleep 0.1
        n=$((n + 1))
    done
    return 0
}

stop_pid() { # pid tenths
    [ -n "$1" ] || return 0
    if kill -0 "$1" 2>/dev/null; then
        kill -TERM "$1" 2>/dev/null
        wait_gone "$1" "$2" || { say "killing $1 hard"; kill -KILL "$1" 2>/dev/null; }
    fi
    wait "$1" 2>/dev/null
    return 0
}

# Whether process group $1 has a live (not zombie) member.
group_alive() {
    ps -e -o pgid= -o stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'
}

# Waits (bounded, in tenths of a second) for process group $1 to end.
wait_group_gone() {
    n=0
    while group_alive "$1"; do
        [ "$n" -ge "$2" ] && return 1
        sleep 0.1
        n=$((n + 1))
    done
    return 0
}

cleanup() {
    trap '' INT TERM
    # The command's process group (timeout makes one), stragglers included: SIGINT
    # first, as a Ctrl-C, so that a watcher unsubscribes while opensm still answers
    # (opensm and ibsim run in sessions of their own: the terminal's Ctrl-C does not
    # reach them). Then TERM, then KILL.
    # (dash's kill takes no "--": "-PGID" right after the signal is a group)
    if [ -n "$cmd_pid" ]; then
        kill -INT "-$cmd_pid" 2>/dev/null || kill -INT "$cmd_pid" 2>/dev/null
        if ! wait_group_gone "$cmd_pid" 100; then
            kill -TERM "-$cmd_pid" 2>/dev/null
            if ! wait_group_gone "$cmd_pid" 20; then
                say "killing the command hard"
                kill -KILL "-$cmd_pid" 2>/dev/null
                kill -KILL "$cmd_pid" 2>/dev/null
            fi
        fi
        wait_gone "$cmd_pid" 20 && wait "$cmd_pid" 2>/dev/null
    fi
    [ -n "$cmd_pgid" ] && kill -KILL "-$cmd_pgid" 2>/dev/null
    stop_pid "$osm_pid" 50
    if [ -n "$ibsim_pid" ] && kill -0 "$ibsim_pid" 2>/dev/null; then
        echo Quit >&3 2>/dev/null
        wait_gone "$ibsim_pid" 30 || stop_pid "$ibsim_pid" 20
    fi
    [ -n "$ibsim_pid" ] && wait "$ibsim_pid" 2>/dev/null
    exec 3>&-
    rm -f "$fifo"
    rm -rf "$W"/sys-*
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- net file --------------------------------------------------------------------------
cat >"$W/net" <<'EOF'
Switch 8 "Switch1"
[1] "Hca1"[1]
[2] "Hca2"[1]
[3] "Hca3"[1]

Hca 1 "Hca1"
[1] "Switch1"[1]

Hca 1 "Hca2"
[1] "Switch1"[2]

Hca 1 "Hca3"
[1] "Switch1"[3]
EOF

# ---- opensm's fix for umad2sim ----------------------------------------------------------
# umad2sim leaves part of a received MAD's address uninitialised, and opensm then
# refuses an unsubscribe now and then: umad2sim_address_fix.c says how. Built here,
# so that the fabric is the same however it is started.
address_fix=$W/umad2sim_address_fix.so
# (Built again when its source differs from the copy kept beside it.)
if [ ! -f "$address_fix" ] || ! cmp -s "$here/umad2sim_address_fix.c" "$W/umad2sim_address_fix.c"; then
    if ! "$cc" -shared -fPIC -O2 -o "$address_fix.tmp" "$here/umad2sim_address_fix.c" -ldl \
        >"$W/address_fix.out" 2>&1; then
        say "building umad2sim_address_fix.so failed:"
        cat "$W/address_fix.out" >&2
        exit 1
    fi
    cp "$here/umad2sim_address_fix.c" "$W/umad2sim_address_fix.c" &&
        mv "$address_fix.tmp" "$address_fix" || exit 1
fi

# ---- ibsim -----------------------------------------------------------------------------
mkfifo "$fifo" || exit 1
IBSIM_SOCKNAME=$sock
export IBSIM_SOCKNAME
setsid ibsim -s "$W/net" <"$fifo" >"$W/ibsim.log" 2>&1 &
ibsim_pid=$!
# Read-write open of a FIFO does not block (Linux); fd 3 keeps the console open.
exec 3<>"$fifo"

n=0
until grep -q 'Network simulator ready' "$W/ibsim.log" 2>/dev/null; do
    if ! kill -0 "$ibsim_pid" 2>/dev/null || [ "$n" -ge 100 ]; then
        say "ibsim did not come up; $W/ibsim.log:"
        cat "$W/ibsim.log" >&2
        exit 1
    fi
    sleep 0.1
    n=$((n + 1))
done

# ---- opensm on Hca1 --------------------------------------------------------------------
# -d0: ignore other SMs (the subscriber's port claims IsSM); -d2: flush the log per line.
# shellcheck disable=SC2086 # FABRIC_OSM_FLAGS is a list of options
SIM_HOST=Hca1 OSM_TMP_DIR=$W OSM_CACHE_DIR=$W LD_PRELOAD="$address_fix ${FABRIC_OSM_PRELOAD:+$FABRIC_OSM_PRELOAD }$lib" \
    setsid opensm -f "$W/osm.log" -e -d0 -d2 -s 5 ${FABRIC_OSM_FLAGS:-} \
    </dev/null >"$W/osm.out" 2>&1 3>&- &
osm_pid=$!

n=0
until grep -q 'SUBNET UP' "$W/osm.log" 2>/dev/null; do
    if ! kill -0 "$osm_pid" 2>/dev/null || [ "$n" -ge 300 ]; then
        say "opensm did not bring the subnet up; see $W/osm.log; $W/osm.out:"
        cat "$W/osm.out" >&2
        exit 1
    fi
    sleep 0.1
    n=$((n + 1))
done

# ---- addresses -------------------------------------------------------------------------
# `ibaddr` prints "GID fe80::10:3 LID start 0x3 end 0x3" for the local port.
addr_of() { # node -> "GID LID"
    SIM_HOST=$1 LD_PRELOAD=$lib timeout -k 2 10 ibaddr </dev/null 2>/dev/null 3>&- |
        awk '$1 == "GID" { print $2, $5; exit }'
}
hca1=$(addr_of Hca1)
hca2=$(addr_of Hca2)
hca3=$(addr_of Hca3)
if [ -z "$hca1" ] || [ -z "$hca2" ] || [ -z "$hca3" ]; then
    say "could not read the port addresses of Hca1-3 (ibaddr)"
    exit 1
fi

# ---- the Hca3 wrapper ------------------------------------------------------------------
cat >"$wrapper" <<EOF
#!/bin/sh
# Runs its arguments attached to Hca3 of the fabric in $W.
unset SIM_SET_ISSM
SIM_HOST=Hca3
LD_PRELOAD="\${FABRIC_PRELOAD:+\$FABRIC_PRELOAD }$lib"
IBSIM_SOCKNAME='$sock'
export SIM_HOST LD_PRELOAD IBSIM_SOCKNAME
exec "\$@"
EOF
chmod +x "$wrapper"

# ---- the command -----------------------------------------------------------------------
exec 4<&0
(
    RDMA_ASIO_FABRIC_CTL=$fifo
    RDMA_ASIO_FABRIC_DIR=$W
    RDMA_ASIO_FABRIC_SM_LOG=$W/osm.log
    RDMA_ASIO_FABRIC_RUN_AS_HCA3=$wrapper
    RDMA_ASIO_FABRIC_HCA2_GID=${hca2% *}
    RDMA_ASIO_FABRIC_HCA2_LID=$((${hca2#* }))
    RDMA_ASIO_FABRIC_HCA3_GID=${hca3% *}
    RDMA_ASIO_FABRIC_HCA3_LID=$((${hca3#* }))
    RDMA_ASIO_FABRIC_SM_LID=$((${hca1#* }))
    SIM_HOST=Hca2
    SIM_SET_ISSM=1
    LD_PRELOAD="${FABRIC_PRELOAD:+$FABRIC_PRELOAD }$lib"
    export RDMA_ASIO_FABRIC_CTL RDMA_ASIO_FABRIC_DIR RDMA_ASIO_FABRIC_SM_LOG \
        RDMA_ASIO_FABRIC_RUN_AS_HCA3 RDMA_ASIO_FABRIC_HCA2_GID RDMA_ASIO_FABRIC_HCA2_LID \
        RDMA_ASIO_FABRIC_HCA3_GID RDMA_ASIO_FABRIC_HCA3_LID RDMA_ASIO_FABRIC_SM_LID \
        SIM_HOST SIM_SET_ISSM LD_PRELOAD IBSIM_SOCKNAME
    # timeout puts the command into a process group of its own (pgid = this pid)
    exec timeout -k 5 "$cmd_timeout" "$@"
) <&4 4<&- 3>&- &
cmd_pid=$!
exec 4<&-
wait "$cmd_pid"
rc=$?
[ "$rc" -eq 124 ] && say "the command timed out after ${cmd_timeout}s"
# stragglers the command left in its process group: TERM now, KILL at the end
cmd_pgid=$cmd_pid
cmd_pid=
kill -TERM "-$cmd_pgid" 2>/dev/null

# ---- checks ----------------------------------------------------------------------------
failed=0
if [ "${FABRIC_EXPECT_SUBSCRIPTIONS:-0}" != 1 ]; then
    if ! FABRIC_PRELOAD='' "$wrapper" timeout -k 2 15 saquery IIR </dev/null >"$W/iir.out" 2>&1 3>&-; then
        say "check: saquery IIR failed:"
        cat "$W/iir.out" >&2
        failed=1
    else
        # Each record starts with "InformInfoRecord dump:" and names its subscriber.
        left=$(awk -v gid="${hca2% *}" '
            /InformInfoRecord dump:/ { if (rec != "" && hit) printf "%s", rec; rec = ""; hit = 0 }
            { rec = rec $0 "\n" }
            /SubscriberGID/ { n = split($0, f, "."); if (f[n] == gid) hit = 1 }
            END { if (rec != "" && hit) printf "%s", rec }' "$W/iir.out")
        if [ -n "$left" ]; then
            say "check: subscriptions from Hca2 (${hca2% *}) remain:"
            printf '%s\n' "$left" >&2
            failed=1
        fi
    fi
fi
# Unacknowledged Reports: opensm logs ERR 1A06 when the send fails (ibsim finds no
# client to deliver to), or, under umad2sim, which never times a send out, evicts
# them as still outstanding when it exits (ERR 5401 ... mgmt class 0x3): stop it first.
stop_pid "$osm_pid" 50
osm_pid=
unacked=$(grep -e 'ERR 1A06' -e 'ERR 5401.*mgmt class 0x3' "$W/osm.log")
if [ -n "$unacked" ]; then
    say "check: opensm logged unacknowledged Reports:"
    printf '%s\n' "$unacked" >&2
    failed=1
fi

# A failed command: what opensm said went wrong (a refused request, say, is ERR 43xx),
# since the work directory is gone when the run was a CI's.
if [ "$rc" -ne 0 ] && grep -q 'ERR ' "$W/osm.log" 2>/dev/null; then
    say "opensm's errors during the command ($W/osm.log):"
    grep 'ERR ' "$W/osm.log" | head -n 40 >&2
fi

if [ "$rc" -eq 0 ] && [ "$failed" -ne 0 ]; then
    rc=1
fi
exit "$rc"
