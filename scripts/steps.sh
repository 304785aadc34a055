# Steps and the guest lane of scripts/run-tests (sourced by it; POSIX sh, set -eu).
#
# step NAME: a step of the command, in the foreground. Each step's wall time, CPU time
# and result are printed as a table when the command ends; a step that fails ends the
# command (set -e), and the table says which. The CPU time is that of the processes the
# step waited for (the shell's `times`: user + system of its ended children); the guest
# lane's appears in its own rows, each step's qemu included.
#
# The guest lane: steps that run in the test VM run one after another in ONE background
# job, beside the foreground steps (the builds and the host's tests). The emulated guest
# keeps about one core busy (the rxe label: 101 % of one core for 7 min 26 s), so on a
# two-core machine a build beside it loses little, while run one after the other the
# guest steps added more than 20 minutes. Only one guest runs at a time: two would take
# both cores and stretch the guests' bounded waits. The builds beside them run under
# `nice` (build_tree), so that the guest keeps its core. A step of the host that waits
# for nothing of the foreground's may go into the lane too, where the lane would
# otherwise wait for a tree; once the trees come from the compiler cache the lane
# no longer waits, and such a step only lengthens it.
#
#   lane_start FUNCTION   run FUNCTION in the background; it calls lane_run and lane_after
#   lane_run NAME CMD...  (in FUNCTION) one lane step; its output goes to a log
#   lane_after TREE       (in FUNCTION) wait until the foreground has called tree_ready TREE
#   lane_after_file PATH  (in FUNCTION) wait until PATH exists (a file a build writes)
#   tree_ready TREE       (foreground) TREE is built
#   lane_join             (foreground) wait for the lane's last step
#
# A lane step's output is shown whole once it has ended, at the start of the next
# foreground step; a failed lane step fails the command there, not at its end. When the
# command ends early (a failure, Ctrl-C), the lane is stopped: its processes, qemu
# included, ignore SIGINT as every background job of a script does, so they are sent
# SIGTERM.

step_table=$(mktemp)
lane=$(mktemp -d)
step_name=
step_started=
step_cpu=
step_lane_reaped=0
command_started=$(date +%s)
lane_pid=
lane_shown=0

# cpu_mark FILE: the CPU time (user + system) of this shell's ended children so far,
# written to FILE; cpu_read FILE prints it in milliseconds. `times` must run in this
# shell, not in a pipeline or $(...), where it would report a new process's children
# (none). The guest lane (a subshell) has its own file. Differences are taken in
# milliseconds and rounded to seconds only for the table: rounded reading by reading,
# a step that used nothing could show -1 s.
cpu_mark() {
    times >"$1"
}

cpu_read() {
    awk 'NR == 2 {
        split($0, f, /[ms ]+/)
        printf "%d\n", (f[1] * 60 + f[2] + f[3] * 60 + f[4]) * 1000 + 0.5
    }' "$1"
}

# ms_to_s MILLISECONDS: rounded to the nearest second.
ms_to_s() {
    echo $((($1 + 500) / 1000))
}

# The shell counts the lane's CPU among its children once it has reaped the lane,
# which sh may do at any moment after the lane ended, even between two builtins. That
# CPU is in the lane's rows: the step whose marks straddle the reaping leaves it out.
# lane_reaped: 1 once the shell has reaped the lane (an ended lane not yet reaped still
# answers kill -0); it never goes back to 0.
lane_reaped=0
lane_check_reaped() {
    if [ -n "$lane_pid" ] && [ "$lane_reaped" = 0 ] && ! kill -0 "$lane_pid" 2>/dev/null; then
        lane_reaped=1
    fi
}

# step_mark: cpu_mark of the step table, with lane_reaped as it was at that mark: the
# state is checked before and after it, and the mark taken again if it changed between.
step_mark() {
    while :; do
        lane_check_reaped
        reaped_before=$lane_reaped
        cpu_mark "$step_table.times"
        lane_check_reaped
        [ "$lane_reaped" != "$reaped_before" ] || return 0
    done
}

# The lane's CPU (its steps' processes, in milliseconds), once it has ended.
lane_cpu_total() {
    if [ -e "$lane/times" ]; then cpu_read "$lane/times"; else echo 0; fi
}

end_step() {
    [ -n "$step_name" ] || return 0
    step_mark
    step_cpu_end=$(cpu_read "$step_table.times")
    if [ "$lane_reaped" != "$step_lane_reaped" ]; then
        step_cpu_end=$((step_cpu_end - $(lane_cpu_total)))
    fi
    printf '%s\t%s\t%s\t%s\n' "$step_name" "$(($(date +%s) - step_started))" \
        "$(ms_to_s $((step_cpu_end - step_cpu)))" "$1" >>"$step_table"
    step_name=
}

step() {
    end_step passed
    lane_show
    step_name=$*
    step_started=$(date +%s)
    step_mark
    step_cpu=$(cpu_read "$step_table.times")
    step_lane_reaped=$lane_reaped
    printf '\n==== %s\n' "$*"
}

print_rows() {
    awk -F '\t' '{
        printf "| %s | %d min %02d s | %s | %s |\n", $1, $2 / 60, $2 % 60,
            ($3 ~ /^[0-9]+$/ ? $3 " s" : $3), $4
    }' "$1"
}

# The EXIT trap: ends the step that ran, stops the lane and prints the table.
print_step_table() {
    rc=$1
    if [ "$rc" = 0 ]; then end_step passed; else end_step "FAILED (exit status $rc)"; fi
    if [ -n "$lane_pid" ]; then
        lane_stop
        lane_show || true
        lane_show_stopped
    fi
    printf '\n==== steps\n\n| step | wall time | CPU time | result |\n| --- | --- | --- | --- |\n'
    print_rows "$step_table"
    if [ -s "$lane/rows" ]; then
        printf '| **in the guest lane, beside the steps above:** | | | |\n'
        print_rows "$lane/rows"
    fi
    total=$(($(date +%s) - command_started))
    cpu_mark "$step_table.times"
    printf '| all | %d min %02d s | %d s | %s |\n' $((total / 60)) $((total % 60)) \
        "$(ms_to_s "$(cpu_read "$step_table.times")")" "$([ "$rc" = 0 ] && echo passed || echo FAILED)"
    rm -rf "$step_table" "$step_table.times" "$lane"
}
trap 'print_step_table $?' EXIT
# Without these, an interrupted command would neither print its table nor stop the lane.
trap 'exit 130' INT
trap 'exit 143' TERM

lane_start() {
    (
        lane_n=0
        "$1"
    ) &
    lane_pid=$!
}

lane_run() {
    lane_n=$((lane_n + 1))
    printf '%s\n' "$1" >"$lane/$lane_n.name"
    shift
    lane_started=$(date +%s)
    cpu_mark "$lane/times"
    lane_cpu=$(cpu_read "$lane/times")
    echo "$lane_started" >"$lane/$lane_n.started"
    lane_rc=0
    "$@" >"$lane/$lane_n.log" 2>&1 </dev/null || lane_rc=$?
    cpu_mark "$lane/times"
    if [ "$lane_rc" = 0 ]; then lane_result=passed; else lane_result="FAILED (exit status $lane_rc)"; fi
    printf '%s\t%s\t%s\t%s\n' "$(cat "$lane/$lane_n.name")" "$(($(date +%s) - lane_started))" \
        "$(ms_to_s $(($(cpu_read "$lane/times") - lane_cpu)))" "$lane_result" >>"$lane/rows"
    echo "$lane_rc" >"$lane/$lane_n.rc"
    [ "$lane_rc" = 0 ] || exit "$lane_rc"
}

lane_after() {
    lane_after_file "$lane/ready.$1"
}

lane_after_file() {
    while [ ! -e "$1" ]; do sleep 1; done
}

tree_ready() {
    : >"$lane/ready.$1"
}

# Shows the lane steps that ended since the last call; fails when one of them failed.
lane_show() {
    while [ -e "$lane/$((lane_shown + 1)).rc" ]; do
        lane_shown=$((lane_shown + 1))
        printf '\n==== (guest lane) %s\n' "$(cat "$lane/$lane_shown.name")"
        cat "$lane/$lane_shown.log"
        if [ "$(cat "$lane/$lane_shown.rc")" != 0 ]; then
            echo "run-tests: the guest lane's step \"$(cat "$lane/$lane_shown.name")\" failed" >&2
            return 1
        fi
    done
}

# After lane_stop: the output of the step it interrupted, if any.
lane_show_stopped() {
    n=$((lane_shown + 1))
    [ -e "$lane/$n.name" ] || return 0
    printf '\n==== (guest lane) %s: stopped, as the command ended; its output so far:\n' \
        "$(cat "$lane/$n.name")"
    cat "$lane/$n.log" 2>/dev/null || true
    printf '%s\t%s\t%s\t%s\n' "$(cat "$lane/$n.name")" "$(($(date +%s) - $(cat "$lane/$n.started")))" \
        "not counted" "stopped: the command ended" >>"$lane/rows"
}

lane_join() {
    lane_wait=0
    wait "$lane_pid" || lane_wait=$?
    lane_reaped=1
    lane_pid=
    lane_show
    if [ "$lane_wait" != 0 ]; then
        echo "run-tests: the guest lane ended with exit status $lane_wait" >&2
        return 1
    fi
}

lane_stop() {
    # Every process of the lane, listed before any is stopped (a stopped parent would
    # hand its children to init).
    lane_pids=$(descendants "$lane_pid")
    # shellcheck disable=SC2086 # a list of numbers
    kill $lane_pids 2>/dev/null || true
    wait "$lane_pid" 2>/dev/null || true
    lane_pid=
}

descendants() {
    echo "$1"
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do descendants "$child"; done
}

# build_tree DIR [ARGUMENT...]: builds a tree (or what cmake --build's ARGUMENTs name)
# under nice: beside it, the guest lane keeps its core.
build_tree() {
    build_dir=$1
    shift
    nice -n 10 cmake --build "$build_dir" -j "$jobs" "$@"
}

# Runs a ctest command (output shown as it comes) and fails when it failed, ran no
# test, or skipped one: where a label must run (the VM, the fabric), a skip would
# hide that nothing was tested.
all_must_run() {
    log=$(mktemp)
    { rc=0; "$@" --no-tests=error || rc=$?; echo "$rc" >"$log.rc"; } 2>&1 | tee "$log"
    rc=$(cat "$log.rc")
    if [ "$rc" = 0 ] && grep -qE '\*\*\*Skipped|tests did not run' "$log"; then
        echo "run-tests: tests were skipped where they must run" >&2
        rc=1
    fi
    rm -f "$log" "$log.rc"
    return "$rc"
}
