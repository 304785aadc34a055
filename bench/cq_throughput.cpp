// rdma_asio's side of the throughput benchmark: the loopback traffic of
// epoll_throughput (bench_flow: receive credits, a bounded send queue), with one
// coroutine per CQ on one io_context thread, each awaiting async_poll on its CQ.
// A completed async_poll resumes its coroutine through the io_context's queue, so
// the two CQs take turns one batch at a time.
//
//   cq_throughput [-i IN_FLIGHT] [-s SPIN_USEC] [-x] [MESSAGES]
//
// Defaults: 64 in flight, no spin budget, 100000 messages. With -s both CQs spin
// that long before arming: a spinning wait polls as posted work, so the other
// CQ's coroutine runs between its rounds. With -x the channel and the CQs are typed
// on io_context::executor_type instead of any_io_executor (the aliases'
// default), so that their completions skip the type-erased executor. Device:
// $RDMA_ASIO_TEST_DEVICE or rxe0.
#include "loopback.h"

#include <rdma_asio/completion_queue.hpp>

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace {
constexpr int poll_batch = 16;

// Polls `cq` until the flow has taken `until` (its count of sends or of receives)
// to the total.
template <class CompletionQueue>
asio::awaitable<void> serve(CompletionQueue& cq, bench_flow& flow, const long& until) {
    std::array<ibv_wc, poll_batch> wcs;
    while (until < flow.total) {
        std::size_t n = co_await cq.async_poll(wcs, asio::use_awaitable);
        if (bench_flow_completed(&flow, wcs.data(), static_cast<int>(n)) != 0)
            throw std::runtime_error("the flow failed");
    }
}

// One run with the channel and CQs typed on Executor.
template <class Executor>
int run(const bench_options& o) {
    asio::io_context ioc;
    rdma_asio::context ctx(bench_device_name());
    rdma_asio::basic_completion_channel<Executor> channel(ioc, ctx);
    rdma_asio::cq_options cq_opts;
    if (o.spin_usec > 0)
        cq_opts.spin = rdma_asio::spin_budget::fixed(std::chrono::microseconds(o.spin_usec));
    rdma_asio::basic_completion_queue<Executor> send_cq(channel, 2 * o.in_flight, cq_opts);
    rdma_asio::basic_completion_queue<Executor> recv_cq(channel, 2 * o.in_flight, cq_opts);
    bench_loopback lb;
    if (bench_loopback_init(&lb, ctx.native_handle(), send_cq.native_handle(),
                            recv_cq.native_handle(), o.in_flight) != 0)
        return 1;
    bench_flow flow;
    const auto start = std::chrono::steady_clock::now();
    if (bench_flow_start(&flow, &lb, o.messages, o.in_flight) != 0)
        return 1;
    auto rethrow = [](std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    };
    asio::co_spawn(ioc, serve(send_cq, flow, flow.sent), rethrow);
    asio::co_spawn(ioc, serve(recv_cq, flow, flow.received), rethrow);
    ioc.run();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto s = send_cq.counters(), r = recv_cq.counters();
    const long completions = flow.sent + flow.received;
    std::printf("rdma_asio coroutines, %d in flight%s: %ld messages, %ld completions in %.3f s = "
                "%.0f completions/s, %llu events, %llu ack calls\n",
                o.in_flight, o.typed ? ", io_context::executor_type" : "", o.messages, completions,
                elapsed, completions / elapsed,
                static_cast<unsigned long long>(s.events + r.events),
                static_cast<unsigned long long>(s.ack_calls + r.ack_calls));
    bench_loopback_destroy(&lb);
    return 0;
}
} // namespace

int main(int argc, char* argv[]) {
    bench_options o{100000, 64, 0, 0, 0, 0, 0, 0};
    if (bench_parse_options(argc, argv, "i:s:x",
                            "cq_throughput [-i IN_FLIGHT] [-s SPIN_USEC] [-x] [MESSAGES]", &o) != 0)
        return 2;
    try {
        return o.typed ? run<asio::io_context::executor_type>(o) : run<asio::any_io_executor>(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cq_throughput: %s\n", e.what());
        return 1;
    }
}
