// rdma_asio's side of the throughput benchmark: the loopback traffic of
// epoll_throughput, with one coroutine per CQ on one io_context thread.
//
//   cq_throughput [MESSAGES]      device: $RDMA_ASIO_TEST_DEVICE or rxe0
#include "loopback.h"

#include <rdma_asio/completion_queue.hpp>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {
constexpr int window = 64;
}

int main(int argc, char* argv[]) {
    const long total = argc > 1 ? std::atol(argv[1]) : 100000;
    const char* name = std::getenv("RDMA_ASIO_TEST_DEVICE");
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(name ? name : "rxe0");
        rdma_asio::completion_channel channel(ioc, ctx);
        rdma_asio::completion_queue send_cq(channel, 4 * window), recv_cq(channel, 4 * window);
        bench_loopback lb;
        if (bench_loopback_init(&lb, ctx.native_handle(), send_cq.native_handle(),
                                recv_cq.native_handle(), window) != 0)
            return 1;
        for (int i = 0; i < 2 * window; ++i)
            bench_post_recv(&lb, static_cast<unsigned long long>(i));
        long posted = 0, sent = 0, received = 0;
        for (; posted < window && posted < total; ++posted)
            bench_post_send(&lb, static_cast<unsigned long long>(posted));

        const auto start = std::chrono::steady_clock::now();
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                std::array<ibv_wc, 16> wcs;
                while (sent < total) {
                    std::size_t n = co_await send_cq.async_poll(wcs, asio::use_awaitable);
                    sent += static_cast<long>(n);
                    for (std::size_t i = 0; i < n && posted < total; ++i)
                        bench_post_send(&lb, static_cast<unsigned long long>(posted++));
                }
            },
            asio::detached);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                std::array<ibv_wc, 16> wcs;
                while (received < total) {
                    std::size_t n = co_await recv_cq.async_poll(wcs, asio::use_awaitable);
                    received += static_cast<long>(n);
                    for (std::size_t i = 0; i < n; ++i)
                        bench_post_recv(&lb, wcs[i].wr_id);
                }
            },
            asio::detached);
        ioc.run();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        auto s = send_cq.counters(), r = recv_cq.counters();
        std::printf("rdma_asio coroutines: %ld completions in %.3f s = %.0f completions/s, "
                    "%llu events, %llu ack calls\n",
                    sent + received, elapsed, (sent + received) / elapsed,
                    static_cast<unsigned long long>(s.events + r.events),
                    static_cast<unsigned long long>(s.ack_calls + r.ack_calls));
        bench_loopback_destroy(&lb);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cq_throughput: %s\n", e.what());
        return 1;
    }
}
