#!/bin/sh
# Runs inside the test VM (or on a host with the device): the throughput and
# CQ-scaling benchmarks, each rdma_asio program side by side with its plain C loop,
# in interleaved rounds (one run of each per round, so that drift in the
# emulator's speed hits both alike). Writes Markdown tables to OUT, each preceded
# by the commands that made it.
#
#   measure-throughput.sh BUILD_DIR OUT
#
# Environment (defaults): BENCH_ROUNDS (7), BENCH_MESSAGES (100000 per throughput
# run), BENCH_IN_FLIGHT ("1 4 64"), BENCH_SCALING_MESSAGES (5000),
# BENCH_CQS ("1 8 64 256"), BENCH_SPIN (30: the spin budget in µs of the extra
# cq_throughput runs), BENCH_CALLGRIND ("5000 15000": the two run lengths of
# the instruction counts), BENCH_SCALING_CALLGRIND ("1024 3072"), and
# RDMA_ASIO_TEST_DEVICE (rxe0).
set -eu
build=$1 out=$2
device=${RDMA_ASIO_TEST_DEVICE:-rxe0}
rounds=${BENCH_ROUNDS:-7}
messages=${BENCH_MESSAGES:-100000}
in_flight=${BENCH_IN_FLIGHT:-1 4 64}
spin=${BENCH_SPIN:-30}
scaling_messages=${BENCH_SCALING_MESSAGES:-5000}
cqs=${BENCH_CQS:-1 8 64 256}
callgrind=${BENCH_CALLGRIND:-5000 15000}
scaling_callgrind=${BENCH_SCALING_CALLGRIND:-1024 3072}
bin=$build/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/device-measures.sh"

# median events per message of run $1 ($2 messages per run)
per_message() { column "$1" 2 | awk -v m="$2" '{ print $1 / m }' | median | awk '{ printf "%.2f", $1 }'; }
# largest delta of the RNR counters (received and sent) and of the retries over the rounds
worst() { awk -v c="$2" '$c == "n/a" { na = 1 } $c > m { m = $c } END { print na ? "n/a" : m + 0 }' "$tmp/$1"; }
rnr() { echo "$(worst "$1" 3) / $(worst "$1" 4)"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9]+$/ && b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "measuring throughput ($rounds rounds of $messages messages, in flight: $in_flight)..." >&2
round=1
while [ "$round" -le "$rounds" ]; do
    for w in $in_flight; do
        run_rate "tp_c_$w" "$bin/epoll_throughput" -i "$w" "$messages"
        run_rate "tp_a_$w" "$bin/cq_throughput" -i "$w" "$messages"
        run_rate "tp_x_$w" "$bin/cq_throughput" -x -i "$w" "$messages"
        run_rate "tp_s_$w" "$bin/cq_throughput" -i "$w" -s "$spin" "$messages"
        run_rate "tp_q_$w" "$bin/qp_throughput" -i "$w" "$messages"
        run_rate "tp_h_$w" "$bin/qp_throughput" -h -i "$w" "$messages"
        run_rate "tp_o_$w" "$bin/qp_throughput" -o -i "$w" "$messages"
    done
    round=$((round + 1))
done
echo "measuring CQ scaling ($rounds rounds of $scaling_messages messages, CQs: $cqs)..." >&2
round=1
while [ "$round" -le "$rounds" ]; do
    for n in $cqs; do
        for t in one all; do
            a=; [ $t = all ] && a=-a
            run_rate "sc_c_${n}_$t" "$bin/epoll_cq_scaling" -c "$n" $a "$scaling_messages"
            run_rate "sc_a_${n}_$t" "$bin/cq_scaling" -c "$n" $a "$scaling_messages"
        done
    done
    round=$((round + 1))
done

echo "counting instructions (callgrind)..." >&2
{
    echo "Throughput: loopback 64-byte sends between two QPs of one process, receive credits"
    echo "and a bounded send queue (\`bench_flow\` in \`bench/loopback.h\`), event mode; $rounds"
    echo "interleaved rounds of"
    echo
    echo '```'
    for w in $in_flight; do
        echo "$bin/epoll_throughput -i $w $messages"
        echo "$bin/cq_throughput -i $w $messages"
        echo "$bin/cq_throughput -x -i $w $messages"
        echo "$bin/qp_throughput -i $w $messages"
        echo "$bin/qp_throughput -h -i $w $messages"
        echo "$bin/qp_throughput -o -i $w $messages"
    done
    echo '```'
    echo
    echo "Instructions per message: callgrind, (Ir of a ${callgrind#* }-message run - Ir of a ${callgrind% *}-message run) / ${callgrind#* } - ${callgrind% *}"
    echo "(the same commands with those counts). A message is one send and one receive completion."
    echo "RNR NAKs: deltas of rxe's \`rcvd_rnr_err\` / \`send_rnr_err\` over one run (largest of the rounds);"
    echo "retries: of \`completer_retry_err\` (RNR and timeout retransmissions)."
    echo
    echo "| in flight | plain C completions/s (median) | rdma_asio completions/s (median) | rdma_asio / C per round (min / median / max) | CQ events per message, C / rdma_asio | RNR NAKs received / sent, C | RNR NAKs received / sent, rdma_asio | retries, C / rdma_asio | instructions per message, C / rdma_asio | instructions, rdma_asio / C |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for w in $in_flight; do
        ic=$(instructions "$callgrind" "$bin/epoll_throughput" -i "$w")
        ia=$(instructions "$callgrind" "$bin/cq_throughput" -i "$w")
        echo "$ic $ia" >"$tmp/instructions_$w" # again in the queue_pair table
        echo "| $w | $(column "tp_c_$w" 1 | median) | $(column "tp_a_$w" 1 | median) | $(rate_spread "tp_a_$w" "tp_c_$w") | $(per_message "tp_c_$w" "$messages") / $(per_message "tp_a_$w" "$messages") | $(rnr "tp_c_$w") | $(rnr "tp_a_$w") | $(worst "tp_c_$w" 5) / $(worst "tp_a_$w" 5) | $ic / $ia | $(ratio "$ia" "$ic") |"
    done
    echo
    echo "The executor type of the channel and CQs: \`completion_queue\` (\`any_io_executor\`, the"
    echo "aliases' default) against \`basic_completion_queue<io_context::executor_type>\`"
    echo "(\`cq_throughput -x\`), whose completions skip the type-erased executor. Same rounds."
    echo
    echo "| in flight | \`any_io_executor\` completions/s (median) | \`io_context::executor_type\` completions/s (median) | typed / any per round (min / median / max) | instructions per message, any / typed | instructions, typed / any |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for w in $in_flight; do
        read -r _ ia <"$tmp/instructions_$w"
        ix=$(instructions "$callgrind" "$bin/cq_throughput" -x -i "$w")
        echo "| $w | $(column "tp_a_$w" 1 | median) | $(column "tp_x_$w" 1 | median) | $(rate_spread "tp_x_$w" "tp_a_$w") | $ia / $ix | $(ratio "$ix" "$ia") |"
    done
    echo
    echo "The same with a spin budget of $spin µs on both CQs (\`cq_throughput -i N -s $spin\`): a"
    echo "spinning wait first lets the ready handlers run, so the other CQ's coroutine posts"
    echo "the next send before this one polls again."
    echo
    echo "| in flight | rdma_asio with spin budget, completions/s (median) | ratio to plain C per round (min / median / max) | CQ events per message | RNR NAKs received / sent |"
    echo "| --- | --- | --- | --- | --- |"
    for w in $in_flight; do
        echo "| $w | $(column "tp_s_$w" 1 | median) | $(rate_spread "tp_s_$w" "tp_c_$w") | $(per_message "tp_s_$w" "$messages") | $(rnr "tp_s_$w") |"
    done
    echo
    echo "The same traffic through queue_pair operations: the library owns the wr_ids, polls"
    echo "and routes each completion to its operation. Coroutines (\`qp_throughput -i N\`): one"
    echo "per message in flight, each awaiting a parallel group of the receive and the send."
    echo "Handlers (\`qp_throughput -h -i N\`): the same lanes as chains of plain completion"
    echo "handlers, so the difference is what the coroutines and the parallel group cost."
    echo "One at a time (\`qp_throughput -o -i N\`): N coroutines each awaiting one"
    echo "\`async_send\` at a time and 2N each awaiting one \`async_receive\` at a time, as a"
    echo "service's senders and receive loops do."
    echo
    echo "| in flight | lanes | queue_pair operations, completions/s (median) | ratio to plain C per round (min / median / max) | ratio to async_poll per round (min / median / max) | CQ events per message | RNR NAKs received / sent | instructions per message | instructions, queue_pair / C | instructions, queue_pair / async_poll |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for w in $in_flight; do
        read -r ic ia <"$tmp/instructions_$w"
        for lanes in "coroutines, parallel group" "coroutines, one at a time" handlers; do
            case $lanes in
            *parallel*) r=tp_q_$w h= ;;
            *one*) r=tp_o_$w h=-o ;;
            *) r=tp_h_$w h=-h ;;
            esac
            iq=$(instructions "$callgrind" "$bin/qp_throughput" $h -i "$w")
            echo "| $w | $lanes | $(column "$r" 1 | median) | $(rate_spread "$r" "tp_c_$w") | $(rate_spread "$r" "tp_a_$w") | $(per_message "$r" "$messages") | $(rnr "$r") | $iq | $(ratio "$iq" "$ic") | $(ratio "$iq" "$ia") |"
        done
    done
    echo
    echo "CQ scaling: N CQs on one completion channel, each with a wait pending; traffic on one"
    echo "CQ or on all, one message in flight per active CQ, answered to \`bench_peer\` (a second"
    echo "process that sends the next message only when the answer is in: \`bench/remote.h\`);"
    echo "$rounds interleaved rounds of"
    echo
    echo '```'
    for n in $cqs; do
        echo "$bin/epoll_cq_scaling -c $n $scaling_messages"
        echo "$bin/cq_scaling -c $n $scaling_messages"
        echo "$bin/epoll_cq_scaling -c $n -a $scaling_messages"
        echo "$bin/cq_scaling -c $n -a $scaling_messages"
    done
    echo '```'
    echo
    echo "Instructions per message as above, from ${scaling_callgrind% *}- and ${scaling_callgrind#* }-message runs (the measured process only)."
    echo
    echo "| CQs | traffic on | plain C messages/s (median) | rdma_asio messages/s (median) | rdma_asio / C per round (min / median / max) | CQ events per message, C / rdma_asio | RNR NAKs received / sent, C | RNR NAKs received / sent, rdma_asio | retries, C / rdma_asio | instructions per message, C / rdma_asio | instructions, rdma_asio / C |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for n in $cqs; do
        for t in one all; do
            a=; [ $t = all ] && a=-a
            ic=$(instructions "$scaling_callgrind" "$bin/epoll_cq_scaling" -c "$n" $a)
            ia=$(instructions "$scaling_callgrind" "$bin/cq_scaling" -c "$n" $a)
            c=sc_c_${n}_$t r=sc_a_${n}_$t
            echo "| $n | $t | $(column $c 1 | median) | $(column $r 1 | median) | $(rate_spread $r $c) | $(per_message $c "$scaling_messages") / $(per_message $r "$scaling_messages") | $(rnr $c) | $(rnr $r) | $(worst $c 5) / $(worst $r 5) | $ic / $ia | $(ratio "$ia" "$ic") |"
        done
    done
} >"$out"
cat "$out"
