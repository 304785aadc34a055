// Streams under faults while traffic runs: clients killed with SIGKILL in the
// middle of their requests (stream_client_child.cpp is their process). What a
// server must see: each of those streams' reads ends, every object and page the
// server held for them goes back to the kernel (counted by the kernel's own
// accounting: `rdma resource show` and VmPin), and its other streams carry every
// byte intact through it all. Every wait, the child's included, is bounded.
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "kernel_resources.hpp"
#include "run_until.hpp"
#include "rxe_counters.hpp"
#include "rxe_loopback.hpp"
#include "stream_echo.hpp"

#include <rdma_asio/testing/run.hpp>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace stream_fault_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::test::with_error;

namespace {

// Rings of one size (they do not grow), so that what the server holds per
// stream stays the same while traffic runs: the counts before and after compare.
rdma_asio::stream_options fixed_rings() {
    rdma_asio::stream_options options;
    options.receive_ring = options.initial_receive_ring = 16 * 1024;
    return options;
}

} // namespace

TEST_CASE("clients killed with SIGKILL in the middle of requests: their streams' reads end on "
          "the server, which gives back every queue pair, CQ, region, protection domain and "
          "pinned page it held for them, and its other streams' bytes arrive intact",
          "[stream][fault]") {
    constexpr std::size_t survivors = 8, victims = 32;
    const std::uint16_t port = 18934;
    asio::io_context ioc(1);
    rdma_asio::acceptor acceptor(ioc, rdma_asio::test::rxe0_endpoint(port));
    std::vector<std::unique_ptr<rdma_asio::test::served>> slots;
    asio::co_spawn(ioc, rdma_asio::test::serve_echo(acceptor, fixed_rings(), slots),
                   asio::detached);

    // The streams that live through it, both ends in this process.
    std::vector<rdma_asio::stream> clients;
    clients.reserve(survivors);
    std::vector<rdma_asio::test::asker> asked(survivors);
    bool stop = false;
    for (std::size_t i = 0; i < survivors; ++i) {
        rdma_asio::stream& s = clients.emplace_back(ioc, fixed_rings());
        rdma_asio::error_code connected = asio::error::would_block;
        rdma_asio::async_connect(s, rdma_asio::test::rxe0_endpoint(port),
                                 [&](rdma_asio::error_code ec) { connected = ec; });
        REQUIRE(rdma_asio::testing::run_until(
            ioc, [&] { return connected != asio::error::would_block; }, 30s));
        REQUIRE_FALSE(connected);
        asio::co_spawn(ioc, rdma_asio::test::ask_echoes(s, i, stop, asked[i]), asio::detached);
    }
    auto each_survivor_asked = [&](std::size_t at_least) {
        for (const auto& a : asked)
            if (a.requests < at_least && !a.done)
                return false;
        return true;
    };
    REQUIRE(rdma_asio::testing::run_until(
        ioc, [&] { return each_survivor_asked(1); }, 30s));
    const rdma_asio::test::kernel_objects before =
        rdma_asio::test::kernel_objects_of_this_process();
    const std::size_t pinned_before = rdma_asio::test::pinned_kib();

    // The clients to kill, in a process of their own, their requests running.
    char ready_path[] = "/tmp/rdma_asio_stream_clients_XXXXXX";
    const int fd = ::mkstemp(ready_path);
    REQUIRE(fd >= 0);
    ::close(fd);
    const std::string victims_text = std::to_string(victims), port_text = std::to_string(port);
    const char* argv[] = {RDMA_ASIO_STREAM_CLIENT_CHILD, port_text.c_str(), victims_text.c_str(),
                          ready_path, nullptr};
    const pid_t pid = rdma_asio::test::spawn(argv);
    REQUIRE(pid > 0);
    auto victims_busy = [&] {
        if (slots.size() < survivors + victims)
            return false;
        for (std::size_t i = survivors; i < slots.size(); ++i)
            if (slots[i]->echoed < 1024 && !slots[i]->done)
                return false;
        return true;
    };
    const bool busy = rdma_asio::testing::run_until(ioc, victims_busy, 120s);
    const auto killed_at = std::chrono::steady_clock::now();
    ::kill(pid, SIGKILL);
    const rdma_asio::test::exit_result child = rdma_asio::test::wait_exit(pid, 10s);
    std::string ready;
    std::getline(std::ifstream(ready_path), ready);
    std::remove(ready_path);
    INFO("the clients' process: " << child.describe() << "; it wrote: " << ready);
    REQUIRE(busy);
    CHECK(child.code == 128 + SIGKILL);
    for (std::size_t i = survivors; i < slots.size(); ++i)
        CHECK_FALSE(slots[i]->done); // killed in the middle: none had ended before

    // Each of their reads ends, and the server destroys their streams.
    auto victims_done = [&] {
        for (std::size_t i = survivors; i < slots.size(); ++i)
            if (!slots[i]->done)
                return false;
        return true;
    };
    const bool ended = rdma_asio::testing::run_until(ioc, victims_done, 30s);
    const auto ended_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - killed_at)
                              .count();
    std::printf("stream fault: %zu clients killed; their %zu server streams' reads ended %s "
                "%lld ms after SIGKILL\n",
                victims, slots.size() - survivors, ended ? "within" : "NOT all within",
                static_cast<long long>(ended_ms));
    REQUIRE(ended);
    for (std::size_t i = survivors; i < slots.size(); ++i) {
        INFO("victim " << i - survivors << ": " << slots[i]->ended.message());
        CHECK(slots[i]->ended);
    }

    // What the server holds goes back to where it was (the kernel frees a killed
    // process's objects itself; these are the server's).
    rdma_asio::test::kernel_objects after;
    std::size_t pinned_after = 0;
    const bool back = rdma_asio::test::run_until_every(
        ioc, 200ms,
        [&] {
            after = rdma_asio::test::kernel_objects_of_this_process();
            pinned_after = rdma_asio::test::pinned_kib();
            return after == before && pinned_after == pinned_before;
        },
        30s);
    INFO("before the clients came: " << before << ", pinned " << pinned_before << " KiB; after: "
                                     << after << ", pinned " << pinned_after << " KiB");
    CHECK(back);
    CHECK(before.qp >=
          2 * static_cast<int>(survivors)); // the count sees them (each survivor has two ends here)
    CHECK(before.cq > 0);
    CHECK(before.mr > 0);

    // The other streams went on throughout, every byte intact.
    std::vector<std::size_t> at_kill;
    for (const auto& a : asked)
        at_kill.push_back(a.requests);
    REQUIRE(rdma_asio::testing::run_until(
        ioc,
        [&] {
            for (std::size_t i = 0; i < survivors; ++i)
                if (asked[i].requests < at_kill[i] + 20 && !asked[i].done)
                    return false;
            return true;
        },
        60s));
    stop = true;
    REQUIRE(rdma_asio::testing::run_until(
        ioc, [&] { return each_survivor_asked(SIZE_MAX); }, 30s));
    for (std::size_t i = 0; i < survivors; ++i) {
        INFO("survivor " << i << ": " << asked[i].failed.message());
        CHECK_FALSE(asked[i].failed);
        CHECK(asked[i].wrong == 0);
        CHECK(asked[i].requests >= at_kill[i] + 20);
    }
    acceptor.close();
    clients.clear();
    CHECK(rdma_asio::testing::run_until(
        ioc,
        [&] {
            for (const auto& slot : slots)
                if (!slot->done)
                    return false;
            return true;
        },
        30s));
}

} // namespace stream_fault_rxe_test
