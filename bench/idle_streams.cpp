// What open streams cost while nothing is sent: opens STREAMS pairs of
// rdma_asio::stream in one process (both ends on one io_context thread), makes
// one 64-byte round trip on each so that every CQ has seen traffic (an adaptive
// spin budget has then learnt a gap), leaves a read pending on every end, and
// measures the CPU time (getrusage: user and system) the process uses over an
// idle window. A stream that sleeps on its completion channel costs nothing
// then; one that polls does. Also the memory the streams keep registered (pinned
// by ibv_reg_mr(3): /proc/self/status' VmPin) once they are open and idle, per
// stream end, and what is left pinned once they are closed; how long the pairs
// took to open, one after another; and the queue pairs, CQs, memory regions and
// protection domains the kernel holds for the process while they are open
// (`rdma resource show`).
//
//   idle_streams [-c STREAMS] [-i SECONDS] [--spin US [--adaptive]] [-a ADDRESS] [-p PORT]
//
// Prints one line of key=value figures; exit status 1 when a stream failed or a
// read ended during the window (then the figure would not be what it claims).
#include "asio_alias.hpp"
#include "command_line.hpp"
#include "descriptor_limit.hpp"
#include "rxe_counters.hpp"

#include <rdma_asio/stream.hpp>

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using asio::use_awaitable;
using tcp = asio::ip::tcp;

struct options {
    int streams = 64;
    int idle_seconds = 10;
    long spin_us = 0;
    bool adaptive = false;
    std::string address = "10.0.0.1";
    std::uint16_t port = 19700;
};

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto s = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return s(u.ru_utime) + s(u.ru_stime);
}

// One end: a round trip (the client writes first), then a read that should stay
// pending until the program cancels it; `ended_early` counts one that did not.
asio::awaitable<void> one_end(rdma_asio::stream& s, bool writes_first, const bool& idle_over,
                              int& ended_early) {
    std::array<char, 64> buffer{};
    if (writes_first) {
        co_await asio::async_write(s, asio::buffer(buffer), use_awaitable);
        co_await asio::async_read(s, asio::buffer(buffer), use_awaitable);
    } else {
        co_await asio::async_read(s, asio::buffer(buffer), use_awaitable);
        co_await asio::async_write(s, asio::buffer(buffer), use_awaitable);
    }
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer),
                                              asio::experimental::as_tuple(use_awaitable));
    if (!idle_over || ec != asio::error::operation_aborted)
        ++ended_early;
    (void)n;
}

int run(const options& o) {
    asio::io_context ioc(1);
    rdma_asio::connect_options co;
    if (o.spin_us != 0) {
        const std::chrono::microseconds limit(o.spin_us);
        co.connection.cq.spin = o.adaptive ? rdma_asio::spin_budget::adaptive(limit)
                                           : rdma_asio::spin_budget::fixed(limit);
    }
    rdma_asio::acceptor_options ao;
    ao.connection = co.connection;
    const tcp::endpoint at(asio::ip::make_address(o.address), o.port);
    rdma_asio::acceptor acceptor(ioc, at, ao);
    const std::size_t pinned_before = rdma_asio::test::pinned_kib();

    std::vector<std::unique_ptr<rdma_asio::stream>> servers, clients;
    bool idle_over = false;
    int ended_early = 0;
    int warm = 0; // ends whose round trip is done
    std::exception_ptr failure;
    const auto keep = [&](std::exception_ptr e) {
        if (e && !failure)
            failure = e;
    };
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < o.streams; ++i) {
                auto& s =
                    servers.emplace_back(std::make_unique<rdma_asio::stream>(ioc.get_executor()));
                co_await rdma_asio::async_accept(acceptor, *s, use_awaitable);
                asio::co_spawn(ioc, one_end(*s, false, idle_over, ended_early), keep);
                ++warm;
            }
        },
        keep);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < o.streams; ++i) {
                auto& s =
                    clients.emplace_back(std::make_unique<rdma_asio::stream>(ioc.get_executor()));
                co_await rdma_asio::async_connect(*s, at, co, use_awaitable);
                asio::co_spawn(ioc, one_end(*s, true, idle_over, ended_early), keep);
                ++warm;
            }
        },
        keep);

    // Every stream opened and its round trip made, bounded (120 s, and 100 ms more
    // per pair: the emulated guest opens about 20 a second): then the window.
    const auto open_start = std::chrono::steady_clock::now();
    const auto open_bound = std::chrono::seconds(120) + std::chrono::milliseconds(100) * o.streams;
    const auto deadline = open_start + open_bound;
    while (warm < 2 * o.streams && !failure && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(std::chrono::milliseconds(100));
    ioc.run_for(std::chrono::milliseconds(500)); // the last round trips' handlers
    if (failure)
        std::rethrow_exception(failure);
    if (warm < 2 * o.streams) {
        std::fprintf(stderr, "idle_streams: %d of %d ends opened in %lld s\n", warm, 2 * o.streams,
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::seconds>(open_bound).count()));
        return 1;
    }
    const double open_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - open_start).count();
    const std::size_t pinned_open = rdma_asio::test::pinned_kib();
    // What the open streams hold on the device, as the kernel counts it (-1: the
    // rdma tool failed).
    std::string ignored;
    const int qps = rdma_asio::test::count_kernel_objects("qp", "lqpn", ignored);
    const int cqs = rdma_asio::test::count_kernel_objects("cq", "cqn", ignored);
    const int mrs = rdma_asio::test::count_kernel_objects("mr", "mrn", ignored);
    const int pds = rdma_asio::test::count_kernel_objects("pd", "pdn", ignored);
    const double before = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    ioc.run_for(std::chrono::seconds(o.idle_seconds));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds() - before;
    idle_over = true;
    for (auto& s : servers)
        s->close();
    for (auto& s : clients)
        s->close();
    ioc.run_for(std::chrono::seconds(5));
    if (failure)
        std::rethrow_exception(failure);
    servers.clear();
    clients.clear();
    // A closed stream sends its end and lets go of its memory with that write's
    // completion: wait (bounded: 10 s, and 10 ms more per pair) until all have.
    const auto closing = std::chrono::steady_clock::now();
    const auto close_deadline =
        closing + std::chrono::seconds(10) + std::chrono::milliseconds(10) * o.streams;
    do
        ioc.run_for(std::chrono::milliseconds(100));
    while (rdma_asio::test::pinned_kib() != pinned_before &&
           std::chrono::steady_clock::now() < close_deadline);
    const double closed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - closing).count();
    const std::size_t pinned_closed = rdma_asio::test::pinned_kib();
    // Both ends of every pair are in this process: 2 * streams ends.
    const double per_end = static_cast<double>(pinned_open - pinned_before) / (2.0 * o.streams);
    std::printf(
        "idle_streams streams=%d spin_us=%ld adaptive=%d idle_seconds=%.3f cpu_seconds=%.4f "
        "cpu_per_second=%.5f ended_early=%d pinned_kib_before=%zu pinned_kib_open=%zu "
        "pinned_kib_per_stream_end=%.1f pinned_kib_closed=%zu closed_seconds=%.1f "
        "open_seconds=%.1f "
        "qps=%d cqs=%d mrs=%d pds=%d\n",
        o.streams, o.spin_us, o.adaptive ? 1 : 0, wall, cpu, cpu / wall, ended_early, pinned_before,
        pinned_open, per_end, pinned_closed, closed_seconds, open_seconds, qps, cqs, mrs, pds);
    return ended_early == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    bench::raise_descriptor_limit();
    options o;
    sample::command_line cli(
        "idle_streams", "CPU time of open rdma_asio::streams with no traffic and reads pending");
    cli.number('c', "streams", "N", "stream pairs in the process (default 64)", o.streams, 1, 10000)
        .number('i', "idle", "SECONDS", "the idle window (default 10)", o.idle_seconds, 1, 3600)
        .number(0, "spin", "US",
                "the connections' CQs poll US microseconds before they sleep (cq_options::spin, "
                "spin_budget::fixed; default 0, off)",
                o.spin_us, 0L)
        .flag(0, "adaptive", "--spin US is the limit of an adaptive budget (spin_budget::adaptive)",
              o.adaptive)
        .option('a', "address", "ADDRESS", "the acceptor's address (default 10.0.0.1)", o.address)
        .number('p', "port", "PORT", "the acceptor's port (default 19700)", o.port,
                std::uint16_t{1});
    cli.parse(argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "idle_streams: %s\n", e.what());
        return 1;
    }
}
