// The dispatcher's lock (detail/core/atomic_mutex.hpp): mutual exclusion under
// contention, a blocked locker that sleeps until the unlock, try_lock. The
// ThreadSanitizer tree runs these too, so the acquire/release pairs are checked
// there as well.
#include "rdma_asio/detail/core/atomic_mutex.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace atomic_mutex_test {

using namespace std::chrono_literals;
using rdma_asio::detail::atomic_mutex;

TEST_CASE("atomic_mutex: increments from several threads under the lock are never lost",
          "[atomic_mutex]") {
    atomic_mutex m;
    long counter = 0; // plain: only the lock orders the increments
    constexpr int threads = 4;
    constexpr int rounds = 20000;
    std::vector<std::future<void>> done;
    for (int t = 0; t < threads; ++t)
        done.push_back(std::async(std::launch::async, [&] {
            for (int i = 0; i < rounds; ++i) {
                std::lock_guard lock(m);
                ++counter;
            }
        }));
    for (auto& f : done)
        REQUIRE(f.wait_for(60s) == std::future_status::ready);
    std::lock_guard lock(m);
    CHECK(counter == long{threads} * rounds);
}

TEST_CASE("atomic_mutex: a locker waits for the unlock, then gets the lock", "[atomic_mutex]") {
    atomic_mutex m;
    std::atomic<bool> entered{false};
    m.lock();
    auto locker = std::async(std::launch::async, [&] {
        std::lock_guard lock(m);
        entered.store(true);
    });
    // Held here: the other thread cannot be inside, however long it has tried.
    CHECK(locker.wait_for(50ms) == std::future_status::timeout);
    CHECK_FALSE(entered.load());
    m.unlock();
    REQUIRE(locker.wait_for(30s) == std::future_status::ready);
    CHECK(entered.load());
    // And the lock is free again.
    CHECK(m.try_lock());
    m.unlock();
}

TEST_CASE("atomic_mutex: try_lock fails while another thread holds the lock", "[atomic_mutex]") {
    atomic_mutex m;
    REQUIRE(m.try_lock());
    auto other = std::async(std::launch::async, [&] { return m.try_lock(); });
    REQUIRE(other.wait_for(30s) == std::future_status::ready);
    CHECK_FALSE(other.get());
    m.unlock();
    auto again = std::async(std::launch::async, [&] {
        const bool got = m.try_lock();
        if (got)
            m.unlock();
        return got;
    });
    REQUIRE(again.wait_for(30s) == std::future_status::ready);
    CHECK(again.get());
}

} // namespace atomic_mutex_test
