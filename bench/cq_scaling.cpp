// rdma_asio's side of the CQ-scaling benchmark: the traffic of epoll_cq_scaling
// (CQS CQs on one completion channel, traffic on the first CQ only or, with -a, on
// all; each active CQ answers the messages bench_peer sends it, one in flight, see
// remote.h), written as a user would: one coroutine per CQ, each with its
// async_poll pending. Idle CQs' waits are cancelled when the traffic is done.
//
//   cq_scaling [-c CQS] [-a] [MESSAGES]
//
// Defaults: 1 CQ, 20000 messages (spread over the active CQs). Device:
// $RDMA_ASIO_TEST_DEVICE or rxe0.
#include "loopback.h"
#include "remote.h"

#include <rdma_asio/completion_queue.hpp>

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace {
constexpr int poll_batch = 16;

struct lane {
    rdma_asio::completion_queue cq;
    ibv_qp* qp = nullptr; // active lanes only
    bench_echo echo{};
};

// Serves an active CQ until its lane is done.
asio::awaitable<void> serve(lane& l) {
    std::array<ibv_wc, poll_batch> wcs;
    while (!bench_echo_done(&l.echo)) {
        std::size_t n = co_await l.cq.async_poll(wcs, asio::use_awaitable);
        if (bench_echo_completed(&l.echo, wcs.data(), static_cast<int>(n)) != 0)
            throw std::runtime_error("the lane failed");
    }
}

// Waits on an idle CQ until the wait is cancelled.
asio::awaitable<void> idle(lane& l) {
    std::array<ibv_wc, poll_batch> wcs;
    rdma_asio::error_code ec;
    co_await l.cq.async_poll(wcs, asio::redirect_error(asio::use_awaitable, ec));
    if (ec != asio::error::operation_aborted)
        throw std::runtime_error("an idle CQ's wait completed");
}
} // namespace

int main(int argc, char* argv[]) {
    bench_options o{20000, 0, 1, 0, 0, 0, 0, 0};
    if (bench_parse_options(argc, argv, "c:a", "cq_scaling [-c CQS] [-a] [MESSAGES]", &o) != 0)
        return 2;
    const int active = o.all_cqs ? o.cqs : 1;
    if (o.messages < active) {
        std::fprintf(stderr, "cq_scaling: fewer messages than active CQs\n");
        return 2;
    }
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(bench_device_name());
        rdma_asio::completion_channel channel(ioc, ctx);
        ibv_pd* pd = ibv_alloc_pd(ctx.native_handle());
        ibv_mr* mr = pd ? bench_alloc_buffer(pd) : nullptr;
        if (!mr)
            return 1;
        std::vector<lane> lanes;
        lanes.reserve(static_cast<std::size_t>(o.cqs));
        std::vector<std::uint32_t> qpns(2 * static_cast<std::size_t>(active));
        std::vector<long> totals(static_cast<std::size_t>(active));
        for (int i = 0; i < o.cqs; ++i) {
            lane& l = lanes.emplace_back(
                lane{rdma_asio::completion_queue(channel, 2 * bench_lane_window)});
            if (i >= active)
                continue;
            l.qp =
                bench_create_qp(pd, l.cq.native_handle(), l.cq.native_handle(), bench_lane_window);
            if (!l.qp)
                return 1;
            qpns[i] = l.qp->qp_num;
            totals[i] = o.messages / active + (i < o.messages % active);
        }
        bench_peer peer;
        if (bench_peer_start(&peer, active, qpns.data(), totals.data(), qpns.data() + active) != 0)
            return 1;
        for (int i = 0; i < active; ++i)
            if (bench_connect_qp(ctx.native_handle(), lanes[i].qp, qpns[active + i]) != 0 ||
                bench_echo_start(&lanes[i].echo, lanes[i].qp, mr, totals[i]) != 0)
                return 1;
        int running = active;
        auto rethrow = [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        };
        for (lane& l : lanes) {
            if (!l.qp) {
                asio::co_spawn(ioc, idle(l), rethrow);
                continue;
            }
            asio::co_spawn(ioc, serve(l), [&](std::exception_ptr e) {
                rethrow(e);
                if (--running == 0) // the traffic is done: let the idle waits go
                    for (auto& other : lanes)
                        other.cq.cancel();
            });
        }
        const auto start = std::chrono::steady_clock::now();
        if (bench_peer_go(&peer) != 0)
            return 1;
        ioc.run();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        unsigned long long events = 0, ack_calls = 0;
        for (auto& l : lanes) {
            events += l.cq.counters().events;
            ack_calls += l.cq.counters().ack_calls;
        }
        std::printf("rdma_asio coroutines, %d CQs, traffic on %s: %ld messages in %.3f s = %.0f "
                    "messages/s, %llu events, %llu ack calls\n",
                    o.cqs, o.all_cqs ? "all" : "one", o.messages, elapsed, o.messages / elapsed,
                    events, ack_calls);
        if (bench_peer_wait(&peer) != 0)
            return 1;
        for (auto& l : lanes)
            if (l.qp)
                ibv_destroy_qp(l.qp);
        lanes.clear();
        bench_free_buffer(mr);
        ibv_dealloc_pd(pd);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cq_scaling: %s\n", e.what());
        return 1;
    }
}
