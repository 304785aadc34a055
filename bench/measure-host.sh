#!/bin/sh
# Measures rdma_asio's event dispatcher alone on this host (no RDMA device, no
# VM) with bench/dispatcher_throughput, against a bare stream_descriptor loop:
# events per second in interleaved rounds, and per event the user-space
# instructions (callgrind), syscalls (strace) and mutex locks (callgrind's call
# counts). Writes Markdown tables to OUT, and where the instructions go
# (callgrind_annotate, per event) to OUT's name with -callgrind.md.
#
#   measure-host.sh BUILD_DIR OUT
#
# BENCH_HOST_ROUNDS (7), BENCH_HOST_EVENTS (100000), BENCH_HOST_THREAD_EVENTS
# (20000). Prints figures; never fails on a timing.
set -eu
build=$1 out=$2
annotated=${out%.md}-callgrind.md
prog=$build/bench/dispatcher_throughput
rounds=${BENCH_HOST_ROUNDS:-7}
events=${BENCH_HOST_EVENTS:-100000}
thread_events=${BENCH_HOST_THREAD_EVENTS:-20000}
small=5000 large=15000 # the two run lengths whose difference gives a cost per event
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -x "$prog" ] || { echo "measure-host: $prog missing (cmake --build $build -t dispatcher_throughput)" >&2; exit 1; }

variants="bare-cb-any rdma-cb-any bare-cb-typed rdma-cb-typed bare-co-any rdma-co-any bare-co-typed rdma-co-typed"
if ! "$prog" rdma-cb-any 1 >/dev/null 2>&1; then
    echo "measure-host: built without mlx5dv: no devx_eventfd variants" >&2
    variants="bare-cb-any bare-cb-typed bare-co-any bare-co-typed"
fi
many_counts="1 16 256"

. "$(dirname "$0")/host-measures.sh"

# --- events per second, self-driven and with a second thread ---------------------
echo "measure-host: events per second ($rounds rounds of $events events per variant)..." >&2
set --
for v in $variants; do set -- "$@" "$v|$prog $v $events"; done
ctx_rate=$(context)
rounds_of "$@"

echo "measure-host: events per second with a producer thread ($rounds rounds of $thread_events)..." >&2
set --
for v in $variants; do set -- "$@" "thread-$v|$prog $v $thread_events --thread"; done
ctx_thread=$(context)
rounds_of "$@"

echo "measure-host: many waiters ($rounds rounds of $events events per count)..." >&2
set --
for k in $many_counts; do set -- "$@" "bare-many-$k|$prog bare-many $events --waiters=$k" "rdma-many-$k|$prog rdma-many $events --waiters=$k"; done
ctx_many=$(context)
rounds_of "$@"

# --- per event: instructions, syscalls, locks -----------------------------------
echo "measure-host: instructions, syscalls and locks per event (callgrind, strace)..." >&2
ctx_cost=$(context)
for v in $variants; do
    [ -n "$have_valgrind" ] && callgrind_of "$v" "$v"
    [ -n "$have_strace" ] && strace_of "$v" "$v"
done
for k in $many_counts; do
    for side in bare rdma; do
        [ -n "$have_valgrind" ] && callgrind_of "$side-many-$k" "$side-many" "--waiters=$k"
        [ -n "$have_strace" ] && strace_of "$side-many-$k" "$side-many" "--waiters=$k"
    done
done

executor() { case $1 in *-typed) echo "\`io_context::executor_type\`" ;; *) echo "\`any_io_executor\`" ;; esac; }

{
    echo "\`bench/dispatcher_throughput\` drives rdma_asio's event dispatcher alone, on the host (no"
    echo "RDMA device), through \`devx_eventfd\` (an eventfd behind the dispatcher), against a bare"
    echo "\`asio::posix::stream_descriptor::async_wait\` + read loop on an eventfd doing the same work."
    echo "One event per wait cycle: each event is written only after the next wait has started, so"
    echo "each one needs a wake-up (\`epoll_wait\` reports the fd, the wait completes, a read takes"
    echo "the event). Ratios compare like with like: the same style (callbacks or coroutines) and"
    echo "executor type (\`any_io_executor\` or \`io_context::executor_type\`)."
    echo
    echo "\`$0 $build $out\`: $rounds interleaved rounds of \`$prog VARIANT $events\` (self-driven: the consumer writes each event right after starting its next wait)."
    echo "$ctx_rate"
    echo
    echo "| eventfd, one event per wait cycle | executor | events/s (median) | per-round ratio to the bare loop (min / median / max) |"
    echo "| --- | --- | --- | --- |"
    for v in $variants; do
        echo "| $(label "$v") (\`$v\`) | $(executor "$v") | $(median <"$tmp/rate.$v") | $(spread "$v" "$(bare_of "$v")") |"
    done
    echo
    echo "\`$0 $build $out\`: $rounds interleaved rounds of \`$prog VARIANT $thread_events --thread\` (a second thread writes each event: the consumer sleeps in \`epoll_wait\` and is woken)."
    echo "$ctx_thread"
    echo
    echo "| eventfd, woken by another thread | executor | events/s (median) | per-round ratio to the bare loop (min / median / max) |"
    echo "| --- | --- | --- | --- |"
    for v in $variants; do
        echo "| $(label "$v") (\`$v\`) | $(executor "$v") | $(median <"$tmp/rate.thread-$v") | $(spread "thread-$v" "thread-$(bare_of "$v")") |"
    done
    echo
    echo "\`$0 $build $out\`: per event, the difference between a $small- and a $large-event run of \`$prog VARIANT N\`: user-space instructions from \`valgrind --tool=callgrind\`, syscalls from \`strace -f -c\`, mutex locks from callgrind's call counts of \`pthread_mutex_lock\` (Asio's mutexes and the standard library's; rdma_asio's dispatcher locks with an atomic instruction instead, twice per event, which this column does not count)."
    echo "$ctx_cost"
    echo
    echo "| eventfd, one event per wait cycle | instructions per event | ratio to the bare loop | syscalls per event | mutex locks per event |"
    echo "| --- | --- | --- | --- | --- |"
    for v in $variants; do
        i=$(ipe "$v")
        echo "| \`$v\` | $i | $(ratio "$i" "$(ipe "$(bare_of "$v")")") | $(spe "$v") | $(lpe "$v") |"
    done
    echo
    echo "\`$0 $build $out\`: K waits on one pipe, each for its own key; each event names a pseudo-random key. $rounds interleaved rounds of \`$prog bare-many|rdma-many $events --waiters=K\`; per-event costs as above."
    echo "$ctx_many"
    echo
    echo "| waiters K | bare loop (table of handlers) events/s | rdma_asio dispatcher (keyed waits) events/s | per-round ratio (min / median / max) | instructions per event, bare | instructions per event, rdma_asio | ratio | syscalls per event, bare | syscalls per event, rdma_asio | mutex locks per event, bare | mutex locks per event, rdma_asio |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for k in $many_counts; do
        ib=$(ipe "bare-many-$k") ir=$(ipe "rdma-many-$k")
        echo "| $k | $(median <"$tmp/rate.bare-many-$k") | $(median <"$tmp/rate.rdma-many-$k") | $(spread "rdma-many-$k" "bare-many-$k") | $ib | $ir | $(ratio "$ir" "$ib") | $(spe "bare-many-$k") | $(spe "rdma-many-$k") | $(lpe "bare-many-$k") | $(lpe "rdma-many-$k") |"
    done
} >"$out"

# --- where the instructions go ----------------------------------------------------
# Per event (the difference of the two runs), by function: inclusive and self.
# Names are trimmed; the file is where the code comes from (inlined code counts
# in its header).
annotate() { # key inclusive(yes|no) -> "cost<TAB>file<TAB>function" per line, marginal per event
    for n in $small $large; do
        callgrind_annotate --inclusive="$2" --threshold=100 --auto=no "$tmp/cg.$1.$n" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) ([ 0-9.]*%)  \(.*\)$/\1\t\2/p' | grep -v 'PROGRAM TOTALS' |
            awk -F'\t' -v OFS='\t' '{ gsub(",", "", $1); print $1, $2 }' >"$tmp/an.$n"
    done
    awk -F'\t' -v OFS='\t' -v n=$((large - small)) '
        FNR == NR { a[$2] = $1; next }
        { d = ($1 - a[$2]) / n; if (d >= 1) print d, $2 }' "$tmp/an.$small" "$tmp/an.$large" |
        sort -t"$(printf '\t')" -k1,1 -g -r
}
trim() { # "cost<TAB>file:function [object]" -> Markdown row
    awk -F'\t' -v total="$1" -v rows="$2" '
        $1 >= 0.995 * total { next } # main, io_context::run(): callers of everything
        ++shown <= rows {
            s = $2; sub(/ \[[^]]*\]$/, "", s)
            file = s; sub(/:.*/, "", file); n = split(file, p, "/"); file = p[n]
            fn = s; sub(/^[^:]*:/, "", fn)
            gsub(/\(anonymous namespace\)::/, "", fn); gsub(/std::__cxx11::/, "std::", fn)
            # Template arguments collapse to <…>, innermost first: what is left is
            # which member of which template.
            while (match(fn, /<[^<>]*>/)) fn = substr(fn, 1, RSTART - 1) "\001" substr(fn, RSTART + RLENGTH)
            gsub(/\001/, "<…>", fn)
            if (length(fn) > 140) fn = substr(fn, 1, 137) "..."
            gsub(/\|/, "\\|", fn)
            printf "| %.0f | %.1f %% | `%s` | %s |\n", $1, 100 * $1 / total, fn, file
        }'
}
# Self cost per event summed by kind of code, by the file the code comes from
# (inlined code counts in its header); first matching rule wins.
groups() {
    awk -F'\t' '
        function kind(s, file) {
            file = s; sub(/:.*/, "", file)
            if (file ~ /any_executor|any_io_executor|execution\//) return "type-erased executor (any_io_executor: any_executor.hpp, execution/)"
            if (file ~ /io_context\.hpp/ && s ~ /basic_executor_type/) return "io_context executor copies and work counting"
            if (file ~ /pthread_mutex|posix_mutex|std_mutex|gthr|mutex\.h/) return "mutexes (lock, unlock)"
            if (file ~ /malloc|thread_info_base|recycling_allocator|new_op|del_op|handler_alloc/) return "allocation (malloc, Asio recycling)"
            if (file ~ /rdma_asio\//) return "rdma_asio (dispatcher, I/O object)"
            if (file ~ /awaitable|co_spawn|\/coroutine$/) return "coroutine glue (awaitable, co_spawn)"
            if (file ~ /\/asio\//) return "Asio scheduler, reactor, handler queues"
            if (file ~ /sysdeps|\/io\/|\/misc\//) return "libc syscall wrappers"
            if (file ~ /shared_ptr|atomic/) return "shared_ptr, atomics"
            if (file ~ /dispatcher_throughput\.cpp/) return "the benchmark itself (loop, counting, producer)"
            return "other (std::function, utility, ...)"
        }
        { c[kind($2)] += $1; t += $1 }
        END { for (k in c) printf "%.0f\t%.1f\t%s\n", c[k], 100 * c[k] / t, k }' | sort -g -r |
        awk -F'\t' '{ printf "| %s | %s | %s %% |\n", $3, $1, $2 }'
}
if [ -n "$have_valgrind" ]; then
    {
        echo "Where the user-space instructions of one event go, measured by \`$0 $build $out\`:"
        echo "\`valgrind --tool=callgrind $prog VARIANT N\` for N = $small and $large, then"
        echo "\`callgrind_annotate --inclusive=yes|no --threshold=100 --auto=no\` of both; every figure"
        echo "is the difference divided by the $((large - small)) extra events, so setup does not count."
        echo "Function names are trimmed (template arguments shown as <…>); the file is where the code"
        echo "comes from (code inlined from a header counts in that header, so a function may have"
        echo "several rows). The inclusive lists leave out the callers of everything (main, run())."
        echo "$ctx_cost"
        for v in rdma-co-any bare-co-any rdma-co-typed rdma-many-256; do
            [ -f "$tmp/cg.$v.$large" ] || continue
            total=$(instructions "$v")
            echo
            echo "## \`$v\`: $total instructions per event"
            echo
            echo "Self cost by kind of code (by the file the code comes from):"
            echo
            echo "| kind | instructions per event | share |"
            echo "| --- | --- | --- |"
            annotate "$v" no | groups
            echo
            echo "Top functions, inclusive (what they and their callees cost):"
            echo
            echo "| instructions per event | share | function | file |"
            echo "| --- | --- | --- | --- |"
            annotate "$v" yes | trim "$total" 25
            echo
            echo "Top functions, self:"
            echo
            echo "| instructions per event | share | function | file |"
            echo "| --- | --- | --- | --- |"
            annotate "$v" no | trim "$total" 25
        done
    } >"$annotated"
fi
# --- Asio's own floor under a queue pair operation (bench/asio_floor.cpp) --------
floor_prog=$build/bench/asio_floor
if [ -n "$have_valgrind" ] && [ -x "$floor_prog" ]; then
    echo "measure-host: Asio's floor per message (callgrind)..." >&2
    {
        echo
        echo "\`bench/asio_floor\`: Asio's own cost per message in \`qp_throughput\`'s shapes, two"
        echo "chains each awaiting (or handling) one \`stream_descriptor\` read at a time that finds"
        echo "its data there; instructions per message, callgrind, $small and $large messages."
        echo
        echo "| variant | instructions per message |"
        echo "| --- | --- |"
        for v in co cb; do
            prog=$floor_prog callgrind_of "floor-$v" "$v"
            echo "| \`$v\` | $(instructions "floor-$v") |"
        done
    } >>"$out"
fi
cat "$out"
echo "measure-host: wrote $out${have_valgrind:+ and $annotated}" >&2
