# Shell functions the host benchmarks share (bench/measure-host.sh,
# bench/measure-backends.sh), sourced with these set: prog (the program that
# callgrind_of and strace_of run), tmp (a scratch directory), rounds, and small and
# large (the two run lengths whose difference gives a cost per event). Every result
# goes into $tmp under a KEY the caller chooses.
bench_dir=$(dirname "$0")

. "$bench_dir/statistics.sh" # median, ratios
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# The bare loop a variant is compared with: the same style and executor type.
bare_of() { case $1 in rdma-*) echo "bare-${1#rdma-}" ;; *) echo "$1" ;; esac; }
# What a variant of bench/dispatcher_throughput measures, for the tables.
label() {
    case $1 in
    bare-cb-*) echo "bare \`stream_descriptor::async_wait\` + read, callbacks" ;;
    bare-co-*) echo "bare \`stream_descriptor::async_wait\` + read, coroutines" ;;
    rdma-cb-*) echo "rdma_asio \`devx_eventfd::async_wait\`, callbacks" ;;
    rdma-co-*) echo "rdma_asio \`devx_eventfd::async_wait\`, coroutines" ;;
    bare-idle) echo "bare \`stream_descriptor\`: a wait started and cancelled" ;;
    rdma-idle) echo "rdma_asio \`devx_eventfd\`: a wait started and cancelled" ;;
    esac
}
context() { # host, kernel, load: before each table
    echo "Host: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), kernel $(uname -r), load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
}
rate() { "$@" | sed -n 's/.* = \([0-9]*\) events\/s.*/\1/p'; }

# Events per second of each entry ("KEY|PROGRAM ARGS...") in interleaved rounds (one run of
# each per round, so that drift in the host's load hits all alike), into $tmp/rate.KEY.
rounds_of() {
    round=1
    while [ "$round" -le "$rounds" ]; do
        for entry in "$@"; do
            # shellcheck disable=SC2086 # the arguments split on purpose
            rate ${entry#*|} >>"$tmp/rate.${entry%%|*}"
        done
        round=$((round + 1))
    done
}
# min / median / max of the per-round ratio of $1's rate to $2's.
spread() { ratios "$tmp/rate.$1" "$tmp/rate.$2"; }

# callgrind of a run of $small and $large events: $tmp/cg.KEY.{small,large}.
callgrind_of() {
    key=$1 variant=$2; shift 2
    for n in $small $large; do
        valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
            --callgrind-out-file="$tmp/cg.$key.$n" "$prog" "$variant" "$n" "$@" >/dev/null 2>"$tmp/vg.$key.$n"
    done
}
per_event() { awk -v a="$1" -v b="$2" -v n=$((large - small)) 'BEGIN { printf "%.0f", (b - a) / n }'; }
instructions() { per_event "$(sed -n 's/^summary: //p' "$tmp/cg.$1.$small")" "$(sed -n 's/^summary: //p' "$tmp/cg.$1.$large")"; }
# Calls of pthread_mutex_lock in a callgrind file (std::mutex and Asio's mutexes).
locks_in() { awk '/^cfn=/ { f = ($0 ~ /^cfn=.*pthread_mutex_(lock|trylock)/) } /^calls=/ && f { split($0, a, /[= ]/); s += a[2] } END { print s + 0 }' "$1"; }
locks() { awk -v a="$(locks_in "$tmp/cg.$1.$small")" -v b="$(locks_in "$tmp/cg.$1.$large")" -v n=$((large - small)) 'BEGIN { printf "%.1f", (b - a) / n }'; }

# strace -c of both run lengths: syscalls per event, total and by name.
strace_of() {
    key=$1 variant=$2; shift 2
    for n in $small $large; do
        strace -f -c -o "$tmp/st.$key.$n" "$prog" "$variant" "$n" "$@" >/dev/null
    done
}
syscalls() {
    awk -v n=$((large - small)) -f "$bench_dir/strace-difference.awk" "$tmp/st.$1.$small" "$tmp/st.$1.$large"
}
have_strace=yes
command -v strace >/dev/null || { have_strace=; echo "bench: strace missing: no syscall counts (apt-get install strace)" >&2; }
have_valgrind=yes
command -v valgrind >/dev/null || { have_valgrind=; echo "bench: valgrind missing: no instruction counts (apt-get install valgrind)" >&2; }

# Per event, or n/a where the tool is missing: instructions, mutex locks, syscalls.
ipe() { if [ -n "$have_valgrind" ]; then instructions "$1"; else echo n/a; fi; }
lpe() { if [ -n "$have_valgrind" ]; then locks "$1"; else echo n/a; fi; }
spe() { if [ -n "$have_strace" ]; then syscalls "$1"; else echo n/a; fi; }
