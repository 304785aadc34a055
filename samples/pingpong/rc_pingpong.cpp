// rc_pingpong: a coroutine port of rdma-core's `ibv_rc_pingpong`. Same options,
// same TCP exchange of addresses, same statistics, so it interoperates with the real
// ibv_rc_pingpong in either role. Completions arrive through
// rdma_asio::completion_queue::async_poll in both of the original's modes: without
// -e the CQ is busy-polled (a spin budget that never runs out: the wait polls and
// never arms), with -e a wait polls, arms, polls again and sleeps on the channel
// (after spinning for --spin or --adaptive-spin, if given). See cq_options_for()
// in pingpong.cpp.
//
//   rc_pingpong [-d DEV] [-g GIDX] [-s SIZE] [-n ITERS] [-e [--spin=USEC]] [SERVER]
#include "pingpong.hpp"

#include "asio_alias.hpp"

#include <array>
#include <cstdio>

using pingpong::destination;
using pingpong::print_address;

namespace {

// snippet-begin: pingpong-loop
asio::awaitable<int> run(const pingpong::options& o, pingpong::endpoint& ep) {
    print_address("local address: ", ep.local());
    destination remote =
        co_await pingpong::exchange(o, ep.local(), [&](const destination& r) { ep.connect(r); });
    print_address("remote address:", remote);

    const auto start = std::chrono::steady_clock::now();
    ep.start(!o.server.empty());
    std::array<ibv_wc, 2> wcs;
    while (!ep.done()) {
        std::size_t n = co_await ep.cq().async_poll(wcs, asio::use_awaitable);
        if (!ep.handle(wcs.data(), n))
            co_return 1;
    }
    ep.print_statistics(std::chrono::steady_clock::now() - start);
    co_return 0;
}
// snippet-end

} // namespace

int main(int argc, char* argv[]) {
    const pingpong::options opts = pingpong::parse_options(
        argc, argv, "rc_pingpong",
        "Ping-pong messages over an RC QP, with coroutines; talks to ibv_rc_pingpong. Without HOST "
        "be the server, with HOST connect to it.");
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(opts.device);
        rdma_asio::completion_channel channel(ioc, ctx);
        pingpong::endpoint ep(channel, ctx, opts);
        int status = 1;
        asio::co_spawn(ioc, run(opts, ep), [&](std::exception_ptr e, int rc) {
            if (e)
                std::rethrow_exception(e);
            status = rc;
        });
        ioc.run();
        return status;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rc_pingpong: %s\n", e.what());
        return 1;
    }
}
