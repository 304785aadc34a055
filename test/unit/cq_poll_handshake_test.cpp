// The handshake that decides whether a CQ's demultiplexer must poll
// (detail/qp/cq_poll_handshake.hpp), raced as the demultiplexer and a queue pair race
// it: a poll ends while a queue pair posts. ThreadSanitizer runs it too (the
// build-tsan tree's unit label).
#include "rdma_asio/detail/qp/cq_poll_handshake.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace cq_poll_handshake_test {

using rdma_asio::detail::cq_poll_handshake;

TEST_CASE("a queue pair that posts while a poll is in progress leaves it to the poll",
          "[cq_poll_handshake]") {
    cq_poll_handshake h;
    std::mutex m;
    {
        std::lock_guard lock(m);
        REQUIRE(h.start_locked());
        CHECK_FALSE(h.start_locked()); // one poll at a time
    }
    CHECK_FALSE(h.must_poll()); // its end will see the count
    {
        std::lock_guard lock(m);
        h.end_locked();
    }
    CHECK(h.must_poll());
}

// Each round starts with a poll in progress and nothing outstanding. Then, at once,
// a queue pair posts (stores its count, asks must_poll, and if so starts the poll
// under the lock) and the poll ends (under the lock: end_locked, reads the count,
// polls again if it is set). Whatever the interleaving, a poll must be in progress
// afterwards, started exactly once; a lost handshake would leave the request
// without a poll (a completion nobody reads).
TEST_CASE("a poll ending while a queue pair posts: the request always gets a poll",
          "[cq_poll_handshake]") {
    constexpr std::uint32_t rounds = 20000;
    cq_poll_handshake h;
    std::mutex m;
    std::atomic<std::uint32_t> outstanding{0}; // the queue pair's count
    std::atomic<std::uint32_t> round{0};       // the round both threads may run
    std::atomic<std::uint32_t> done{0};        // threads done with the current round
    std::atomic<std::uint32_t> started{0};     // polls started in the current round
    std::atomic<bool> stop{false};             // the bound was reached: everyone leaves

    // Runs `step` once per round, as soon as the round starts; leaves at the bound.
    auto each_round = [&](auto step) {
        for (std::uint32_t r = 1; r <= rounds; ++r) {
            while (round.load() != r && !stop.load())
                std::this_thread::yield();
            if (stop.load())
                return;
            step();
            done.fetch_add(1);
        }
    };
    auto queue_pair = [&] {
        each_round([&] {
            outstanding.store(1);
            if (h.must_poll()) {
                std::lock_guard lock(m);
                if (h.start_locked())
                    started.fetch_add(1);
            }
        });
    };
    auto poll_end = [&] {
        each_round([&] {
            std::lock_guard lock(m);
            h.end_locked();
            if (outstanding.load() > 0 && h.start_locked())
                started.fetch_add(1);
        });
    };

    std::uint32_t without_poll = 0, started_twice = 0, rounds_run = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::thread a(queue_pair), b(poll_end);
    for (std::uint32_t r = 1; r <= rounds && !stop.load(); ++r) {
        {
            std::lock_guard lock(m);
            if (!h.in_progress())
                h.start_locked(); // a poll in progress as the round starts
        }
        outstanding.store(0);
        started.store(0);
        done.store(0);
        round.store(r);
        while (done.load() != 2 && !stop.load()) {
            if (std::chrono::steady_clock::now() > deadline)
                stop.store(true);
            std::this_thread::yield();
        }
        if (stop.load())
            break;
        ++rounds_run;
        std::lock_guard lock(m);
        if (!h.in_progress())
            ++without_poll;
        if (started.load() != 1)
            ++started_twice;
    }
    stop.store(true);
    a.join();
    b.join();
    REQUIRE(rounds_run == rounds); // within the bound
    CHECK(without_poll == 0);
    CHECK(started_twice == 0);
}

} // namespace cq_poll_handshake_test
