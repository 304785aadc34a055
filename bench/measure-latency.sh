#!/bin/sh
# Runs inside the test VM (or on a host with the device): round-trip latency of
# rdma-core's ibv_rc_pingpong against rdma_asio's rc_pingpong samples in both of
# the original's modes, the samples' spin budgets against busy polling, and the CPU
# time an idle process with spin budgets spends; writes Markdown tables to OUT.
# Figures only: nothing here fails on a timing (a run that fails is reported).
#
#   measure-latency.sh BUILD_DIR OUT
#
# Settings (environment):
#   BENCH_ROUNDS       interleaved rounds (default 5)
#   LAT_ITERS          round trips per run at 64 B to 1 KiB (default 2000); 4 KiB
#                      runs do half, 16 KiB a quarter, 64 KiB a tenth (at least 50)
#   LAT_SIZES          message sizes in bytes (default "64 256 1024 4096 16384 65536")
#   LAT_SPIN_SIZE      message size of the spin-budget table (default 64)
#   LAT_SPIN_BUDGETS   fixed budgets in µs (default "10 30 100 300")
#   LAT_ADAPTIVE       adaptive budgets' limits in µs (default "100 300")
#   IDLE_MODES         idle_cpu modes (default "adaptive:300 fixed:300 busy")
#   IDLE_TRAFFIC       seconds of traffic before the idle window (default 2)
#   IDLE_SECONDS       the idle window (default 10)
#   RDMA_ASIO_TEST_DEVICE  the device (default rxe0)
# How long: a round is 54 runs with the defaults (24 in event mode, 24 busy-polling,
# 6 spin budgets), each starting a server and a client, which under qemu TCG costs
# a few seconds before any traffic; the idle CPU table adds 3 x 12 s. Measured on a
# 2-core host shared with two other guests: BENCH_ROUNDS=2 LAT_ITERS=100 took about
# 15 minutes (about 10 s a run, mostly start-up). The defaults (5 rounds, 20 times
# the traffic) take about 40 minutes there, about half that on an idle host.
set -eu
build=$1 out=$2
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
rounds=${BENCH_ROUNDS:-5}
base_iters=${LAT_ITERS:-2000}
sizes=${LAT_SIZES:-64 256 1024 4096 16384 65536}
spin_size=${LAT_SPIN_SIZE:-64}
spin_budgets=${LAT_SPIN_BUDGETS:-10 30 100 300}
adaptive_limits=${LAT_ADAPTIVE:-100 300}
idle_modes=${IDLE_MODES:-adaptive:300 fixed:300 busy}
idle_traffic=${IDLE_TRAFFIC:-2}
idle_seconds=${IDLE_SECONDS:-10}
co=$build/samples/rc_pingpong
cb=$build/samples/rc_pingpong_callbacks
ops=$build/samples/rc_pingpong_ops
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=19000

. "$(dirname "$0")/device-measures.sh"

med() { median <"$tmp/lat.$1" | awk '{ print $1 == "-" ? "-" : sprintf("%.1f", $1) }'; } # NAME: median µs
events() { median <"$tmp/ev.$1" | awk '{ print $1 == "-" ? "-" : sprintf("%.2f", $1) }'; }
# min / median / max of the per-round ratio of NAME to REFERENCE
spread() { ratios "$tmp/lat.$1" "$tmp/lat.$2"; }
failed() { [ -f "$tmp/failures" ] && wc -l <"$tmp/failures" || echo 0; }

# The programs of each table, one run of each per round, in this order, so that
# drift in the emulator's speed hits all of them alike.
round=1
while [ "$round" -le "$rounds" ]; do
    echo "bench: latency round $round of $rounds" >&2
    for s in $sizes; do
        run_once "ev_ref.$s" "$s" ibv_rc_pingpong -e
        run_once "ev_co.$s" "$s" "$co" -e
        run_once "ev_cb.$s" "$s" "$cb" -e
        run_once "ev_ops.$s" "$s" "$ops" -e
        run_once "bp_ref.$s" "$s" ibv_rc_pingpong
        run_once "bp_co.$s" "$s" "$co"
        run_once "bp_cb.$s" "$s" "$cb"
        run_once "bp_ops.$s" "$s" "$ops"
    done
    for b in $spin_budgets; do
        run_once "spin.$b" "$spin_size" "$co" -e --spin="$b"
    done
    for b in $adaptive_limits; do
        run_once "adaptive.$b" "$spin_size" "$co" -e --adaptive-spin="$b"
    done
    round=$((round + 1))
done

# Per round, the best fixed budget's figure: the yardstick of the adaptive rows.
set -- $spin_budgets
for b in "$@"; do echo "$tmp/lat.spin.$b"; done | xargs paste |
    awk '{ best = "-"; for (i = 1; i <= NF; i++) if ($i != "-" && (best == "-" || $i < best)) best = $i; print best }' \
        >"$tmp/lat.best_fixed"

echo "bench: idle CPU" >&2
for m in $idle_modes; do
    if timeout 600 "$build/bench/idle_cpu" "$m" "$idle_traffic" "$idle_seconds" >"$tmp/idle" 2>&1; then
        sed -n 's/^idle_cpu [^ ]*: 2 waits pending for \([0-9.]*\) s: \([0-9.]*\) s CPU (user \([0-9.]*\) s, system \([0-9.]*\) s); before: \([0-9]*\) messages in \([0-9.]*\) s, \([0-9]*\) spin hits, \([0-9]*\) events$/\1 \2 \3 \4 \5 \6 \7 \8/p' \
            "$tmp/idle" >"$tmp/idle.$m"
    fi
    [ -s "$tmp/idle.$m" ] || { echo "bench: idle_cpu $m failed:" >&2; cat "$tmp/idle" >&2; }
done

iters_list() { for s in $sizes; do printf '%s B: %s; ' "$s" "$(iters_for "$s")"; done | sed 's/; $//'; }
commands() { # PROGRAM-WITH-MODE...: the command lines of a table, one per program and size
    echo '```'
    echo "# each: server, then client (the same plus 127.0.0.1), one pair at a time;"
    echo "# PORT: a fresh TCP port per run; $rounds interleaved rounds"
    for s in $2; do
        for p in $1; do
            echo "$p -d $device -g 1 -s $s -n $(iters_for "$s") -p PORT" | tr '|' ' '
        done
    done
    echo '```'
}

{
    echo "### Round trip, event mode"
    echo
    commands "ibv_rc_pingpong|-e $co|-e $cb|-e $ops|-e" "$sizes"
    echo
    echo "| size | \`ibv_rc_pingpong -e\`: µs per round trip (median) | \`rc_pingpong -e\` (coroutines): µs | ratio to \`ibv_rc_pingpong -e\` (min / median / max) | CQ events per round trip | \`rc_pingpong_callbacks -e\`: µs | ratio (min / median / max) | CQ events per round trip | \`rc_pingpong_ops -e\` (queue_pair operations): µs | ratio (min / median / max) | CQ events per round trip |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for s in $sizes; do
        echo "| $s B | $(med "ev_ref.$s") | $(med "ev_co.$s") | $(spread "ev_co.$s" "ev_ref.$s") | $(events "ev_co.$s") | $(med "ev_cb.$s") | $(spread "ev_cb.$s" "ev_ref.$s") | $(events "ev_cb.$s") | $(med "ev_ops.$s") | $(spread "ev_ops.$s" "ev_ref.$s") | $(events "ev_ops.$s") |"
    done
    echo
    echo "### Round trip, busy polling"
    echo
    commands "ibv_rc_pingpong $co $cb $ops" "$sizes"
    echo
    echo "| size | \`ibv_rc_pingpong\`: µs per round trip (median) | \`rc_pingpong\` (coroutines): µs | ratio to \`ibv_rc_pingpong\` (min / median / max) | \`rc_pingpong_callbacks\`: µs | ratio (min / median / max) | \`rc_pingpong_ops\`: µs | ratio (min / median / max) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    for s in $sizes; do
        echo "| $s B | $(med "bp_ref.$s") | $(med "bp_co.$s") | $(spread "bp_co.$s" "bp_ref.$s") | $(med "bp_cb.$s") | $(spread "bp_cb.$s" "bp_ref.$s") | $(med "bp_ops.$s") | $(spread "bp_ops.$s" "bp_ref.$s") |"
    done
    echo
    echo "### Spin budgets, $spin_size B"
    echo
    spin_cmds=
    for b in $spin_budgets; do spin_cmds="$spin_cmds $co|-e|--spin=$b"; done
    for b in $adaptive_limits; do spin_cmds="$spin_cmds $co|-e|--adaptive-spin=$b"; done
    commands "$spin_cmds" "$spin_size"
    echo
    echo "Busy polling and \`rc_pingpong -e\` without a budget: the $spin_size B runs of the tables above, same rounds. The best fixed budget is taken per round."
    echo
    echo "| program | µs per round trip (median) | ratio to \`ibv_rc_pingpong\` busy polling (min / median / max) | ratio to \`rc_pingpong\` busy polling | ratio to the round's best fixed budget | CQ events per round trip |"
    echo "| --- | --- | --- | --- | --- | --- |"
    spin_row() { # NAME LABEL
        echo "| $2 | $(med "$1") | $(spread "$1" "bp_ref.$spin_size") | $(spread "$1" "bp_co.$spin_size") | $(spread "$1" best_fixed) | $(events "$1") |"
    }
    spin_row "bp_ref.$spin_size" "\`ibv_rc_pingpong\` (busy polling)"
    spin_row "bp_co.$spin_size" "\`rc_pingpong\` (busy polling)"
    spin_row "ev_co.$spin_size" "\`rc_pingpong -e\` (no budget)"
    for b in $spin_budgets; do spin_row "spin.$b" "\`rc_pingpong -e --spin=$b\`"; done
    for b in $adaptive_limits; do spin_row "adaptive.$b" "\`rc_pingpong -e --adaptive-spin=$b\`"; done
    echo
    echo "### CPU time of an idle process with waits pending"
    echo
    echo '```'
    for m in $idle_modes; do echo "$build/bench/idle_cpu $m $idle_traffic $idle_seconds"; done
    echo '```'
    echo
    echo "| CQ spin budget | CPU seconds over the idle window (user + system) | idle window, s | messages before (one in flight) | spin hits before | CQ events before |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for m in $idle_modes; do
        if [ -s "$tmp/idle.$m" ]; then
            read -r window cpu user sys msgs _secs hits evs <"$tmp/idle.$m"
            echo "| \`$m\` | $cpu ($user + $sys) | $window | $msgs | $hits | $evs |"
        else
            echo "| \`$m\` | failed (see the log) | | | | |"
        fi
    done
    n=$(failed)
    if [ "$n" -gt 0 ]; then
        echo
        echo "$n latency runs failed and are left out (their output is in the log)."
    fi
} >"$out"
cat "$out"
