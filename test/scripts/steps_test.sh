#!/bin/sh
# scripts/steps.sh, the steps and the guest lane of scripts/run-tests, driven by small
# commands in place of builds and guests:
#  - a lane step waits for the tree (or the file) it needs and its output and row are shown;
#  - a failed lane step fails the command at the next foreground step, which does not run;
#  - a foreground failure stops a lane step that still runs (no process of it is left)
#    and the table says it was stopped;
#  - the CPU time column counts what a step's processes used, foreground and lane, and
#    not a step that only waited, wherever the shell reaps the ended lane, and its
#    fractions of a second add up before they are rounded.
# Every command here is bounded (timeout), whatever runs it.
#
#   steps_test.sh SOURCE_DIR
set -u
src=$(cd "${1:?usage: steps_test.sh SOURCE_DIR}" && pwd -P) || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/rdma_asio_steps.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
    echo "FAILED: $*"
    failed=1
}
# run_case NAME: runs $work/NAME.sh (sourcing steps.sh) with a 60 s bound; sets rc, out.
run_case() {
    rc=0
    out=$(cd "$src" && timeout 60 sh "$work/$1.sh" 2>&1) || rc=$?
    printf '%s\n' "---- $1 (exit status $rc)" "$out"
}
has() {
    printf '%s\n' "$out" | grep -qF -- "$1" || fail "$case: no line with '$1'"
}
has_re() {
    printf '%s\n' "$out" | grep -qE -- "$1" || fail "$case: no line matching '$1'"
}
has_not() {
    if printf '%s\n' "$out" | grep -qF -- "$1"; then fail "$case: a line with '$1'"; fi
}

case=passing
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
lane() {
    lane_after_file "$PROGRAMS"
    lane_run "first lane step" sh -c 'test -e "$0" && echo "output of the first lane step"' "$PROGRAMS"
    lane_after tree
    lane_run "second lane step" sh -c 'test -e "$0" && echo "the tree was there"' "$MARK"
}
MARK=$(mktemp -u); PROGRAMS=$(mktemp -u); export MARK PROGRAMS
lane_start lane
step "build the tree"
sleep 1
: >"$PROGRAMS"
sleep 1
: >"$MARK"
tree_ready tree
step "the last steps"
lane_join
rm -f "$MARK" "$PROGRAMS"
EOF
run_case "$case"
[ "$rc" = 0 ] || fail "$case: exit status $rc"
has "output of the first lane step"
has "the tree was there"
has "| build the tree |"
has "| first lane step | 0 min"
has "| second lane step | 0 min"
has "| all |"
has_not "FAILED"

case=lane_step_fails
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
lane() {
    lane_run "a failing lane step" sh -c 'echo "output before the failure"; exit 3'
    lane_run "never started" echo "this lane step must not run"
}
lane_start lane
step "a foreground step"
while [ ! -e "$lane/1.rc" ]; do sleep 0.1; done
step "the step after the failure"
echo "this foreground command must not run"
lane_join
EOF
run_case "$case"
[ "$rc" != 0 ] || fail "$case: exit status 0"
has "output before the failure"
has "the guest lane's step \"a failing lane step\" failed"
# Its wall time is whole seconds of the clock: a step of a few milliseconds that
# straddles a second shows 1 s (seen in a run of the test command under load).
has_re "^[|] a failing lane step [|] 0 min 0[01] s [|] 0 s [|] FAILED [(]exit status 3[)] [|]$"
has_not "this foreground command must not run"
has_not "this lane step must not run"
has "| all |"

case=foreground_fails
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
lane() {
    lane_run "a long lane step" sh -c 'echo $$ >"$0"; echo "the long step started"; exec sleep 300' "$PIDFILE"
}
lane_start lane
step "a failing foreground step"
while [ ! -s "$PIDFILE" ]; do sleep 0.1; done
false
EOF
pidfile=$work/long.pid
export PIDFILE="$pidfile"
started=$(date +%s)
run_case "$case"
took=$(($(date +%s) - started))
[ "$rc" != 0 ] || fail "$case: exit status 0"
[ "$took" -lt 30 ] || fail "$case: the command took $took s (the lane was waited for)"
has "| a failing foreground step | 0 min"
has "FAILED (exit status 1)"
has "the long step started"
has "| a long lane step | 0 min"
has "| not counted | stopped: the command ended |"
if [ -s "$pidfile" ]; then
    sleep 1
    # A process that ended but was not reaped yet (a zombie, state Z) has ended.
    state=$(ps -o stat= -p "$(cat "$pidfile")" 2>/dev/null || true)
    if [ -n "$state" ] && [ "${state#Z}" = "$state" ]; then
        fail "$case: the lane step's process $(cat "$pidfile") still runs"
        kill "$(cat "$pidfile")" 2>/dev/null
    fi
else
    fail "$case: the lane step never started"
fi

# The burner uses 2 s of CPU (its own clock, whatever the machine's load).
printf '%s\n' 'import time' 'while time.process_time() < 2: pass' >"$work/burn.py"
export BURN="$work/burn.py"
case=cpu_time
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
lane() {
    lane_run "a lane step that computes" python3 "$BURN"
    lane_run "a lane step that waits" sleep 1
}
lane_start lane
step "a step that computes"
python3 "$BURN"
step "a step that waits"
sleep 1
step "a step during which the lane ends"
while [ ! -e "$lane/2.rc" ]; do sleep 0.2; done
sleep 1
step "the last steps"
lane_join
EOF
run_case "$case"
[ "$rc" = 0 ] || fail "$case: exit status $rc"
# The CPU seconds in the row of step NAME ("| NAME | wall | CPU | result |").
cpu_of() {
    printf '%s\n' "$out" | awk -F ' [|] ' -v name="| $1" '$1 == name { sub(/ s$/, "", $3); print $3 }'
}
check_cpu() { # NAME LEAST MOST
    v=$(cpu_of "$1")
    case "$v" in
    '' | *[!0-9]*) fail "$case: no CPU time for \"$1\" ('$v')" ;;
    *) [ "$v" -ge "$2" ] && [ "$v" -le "$3" ] || fail "$case: \"$1\" used $v CPU-s, not $2 to $3" ;;
    esac
}
check_cpu "a step that computes" 2 3
check_cpu "a step that waits" 0 0
# The shell reaps the ended lane while it waits for a foreground command: the lane's CPU
# must not move into that step (nor into the one that joins the lane).
check_cpu "a step during which the lane ends" 0 0
check_cpu "the last steps" 0 0
check_cpu "a lane step that computes" 2 3
check_cpu "a lane step that waits" 0 0
check_cpu "all" 4 6

# The lane ends as one step ends and the next starts: sh reaps it at any moment after
# it ended, even between two builtins, so here most often between the two steps' marks.
# Its CPU must be in neither step (the step after it showed -2 s in one run out of
# two or three before).
case=cpu_time_lane_reaped_between_steps
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
lane() {
    lane_run "a lane step that computes" python3 "$BURN"
}
lane_start lane
step "a step that waits for the lane's last step"
while [ ! -e "$lane/1.rc" ]; do :; done
step "the step after it"
sleep 1
step "the last steps"
lane_join
EOF
run_case "$case"
[ "$rc" = 0 ] || fail "$case: exit status $rc"
check_cpu "a step that waits for the lane's last step" 0 0
check_cpu "the step after it" 0 0
check_cpu "the last steps" 0 0
check_cpu "a lane step that computes" 2 3

# Rounding: fractions of a second add up before anything is rounded. The shell's own
# `times` is replaced by fixed readings: the foreground's children 10.6 s, 11.2 s once
# the lane (0.6 s) is reaped, so the step during which the lane ends used 0 s, and
# 11 s in all. Rounded reading by reading, that step showed -1 s (11 - 1 - 11) in a
# run of the test command.
case=cpu_time_rounding
cat >"$work/$case.sh" <<'EOF'
set -eu
. scripts/steps.sh
cpu_mark() {
    if [ "$1" = "$lane/times" ]; then
        children=0.6
    elif [ "$lane_reaped" = 1 ]; then
        children=11.2
    else
        children=10.6
    fi
    printf '0m0.0s 0m0.0s\n0m%ss 0m0.0s\n' "$children" >"$1"
}
lane() {
    lane_after go
    lane_run "a lane step" true
}
lane_start lane
step "a step during which the lane ends"
tree_ready go
while [ ! -e "$lane/1.rc" ]; do sleep 0.1; done
while kill -0 "$lane_pid" 2>/dev/null; do sleep 0.1; done
step "the last steps"
lane_join
EOF
run_case "$case"
[ "$rc" = 0 ] || fail "$case: exit status $rc"
check_cpu "a step during which the lane ends" 0 0
check_cpu "the last steps" 0 0
check_cpu "a lane step" 0 0
check_cpu "all" 11 11

exit $failed
