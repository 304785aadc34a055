# Sourced by the demo scripts (rxe_demo.sh, sm_watch_demo.sh): follow a sample's
# output live while waiting, bounded, for the lines that prove an event arrived, and
# keep a list of what did not arrive.
#
#   demo_name=NAME; . demo_lib.sh
#   demo_follow FILE            show FILE's lines from now on (indented)
#   demo_wait_for WHAT SECS PATTERN [COUNT]
#                               waits until FILE has COUNT (default 1) lines matching
#                               PATTERN (grep -E), showing new lines as they come;
#                               records WHAT as missing when SECS pass first
#   demo_missing WHAT           records WHAT as missing (a promise not kept)
#   demo_end                    says what was missing; exit status 1 if anything was
#
# Output is polled every 0.1 s rather than piped through a follower, so that each
# line appears once, in order with the script's own lines, and nothing lingers when
# the script ends.

# shellcheck disable=SC2034 # demo_status is read by the demos
demo_file=
demo_shown=0
demo_status=0
demo_name=${demo_name:-demo}
demo_failed=

demo_follow() {
    demo_file=$1
    demo_shown=0
    : >"$demo_file"
}

# Shows the complete lines of the followed file not shown yet.
demo_show() {
    [ -n "$demo_file" ] || return 0
    n=$(wc -l <"$demo_file" 2>/dev/null) || return 0
    if [ "$n" -gt "$demo_shown" ]; then
        sed -n "$((demo_shown + 1)),${n}p" "$demo_file" | sed 's/^/    /'
        demo_shown=$n
    fi
}

demo_missing() {
    echo "$demo_name: FAILED: $1" >&2
    demo_failed="$demo_failed
  - $1"
}

demo_wait_for() { # WHAT SECS PATTERN [COUNT]
    ticks=0
    while :; do
        # Count first, then show: every line counted has been shown on return.
        have=$(grep -c -E "$3" "$demo_file" 2>/dev/null) || have=0
        demo_show
        [ "$have" -ge "${4:-1}" ] && return 0
        if [ "$ticks" -ge $(($2 * 10)) ]; then
            demo_missing "$1: did not arrive within $2 s"
            return 1
        fi
        sleep 0.1
        ticks=$((ticks + 1))
    done
}

# Waits (bounded) for process PID to end; its status in demo_status, or returns 1
# when it is still running after SECS.
demo_wait_exit() { # PID SECS
    ticks=0
    while kill -0 "$1" 2>/dev/null; do
        if [ "$ticks" -ge $(($2 * 10)) ]; then
            return 1
        fi
        demo_show
        sleep 0.1
        ticks=$((ticks + 1))
    done
    demo_status=0
    wait "$1" || demo_status=$?
    demo_show
    return 0
}

demo_end() {
    if [ -n "$demo_failed" ]; then
        echo "$demo_name: FAILED: these promised events did not arrive:$demo_failed" >&2
        exit 1
    fi
    echo "$demo_name: every promised event arrived"
    exit 0
}
