// The installed test helpers (rdma_asio/testing.hpp) that need no RDMA device:
// running a coroutine or a handler chain to its end or its deadline, and the
// clear errors of the network device helpers.
#include "rdma_asio/testing.hpp"

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace testing_test {

using namespace std::chrono_literals;
namespace testing = rdma_asio::testing;

namespace {

asio::awaitable<int> answer_after(std::chrono::milliseconds delay) {
    asio::steady_timer timer(co_await asio::this_coro::executor, delay);
    co_await timer.async_wait(asio::use_awaitable);
    co_return 42;
}

asio::awaitable<void> throw_after_a_wait() {
    asio::steady_timer timer(co_await asio::this_coro::executor, 1ms);
    co_await timer.async_wait(asio::use_awaitable);
    throw std::runtime_error("from the coroutine");
}

} // namespace

TEST_CASE("run_coroutine returns the coroutine's value", "[testing]") {
    asio::io_context ioc;
    CHECK(testing::run_coroutine(ioc, answer_after(10ms)) == 42);
}

TEST_CASE("run_coroutine rethrows what the coroutine threw", "[testing]") {
    asio::io_context ioc;
    CHECK_THROWS_WITH(testing::run_coroutine(ioc, throw_after_a_wait()), "from the coroutine");
}

TEST_CASE("run_coroutine throws timed_out at its deadline and leaves the coroutine suspended",
          "[testing]") {
    asio::io_context ioc;
    const auto start = std::chrono::steady_clock::now();
    rdma_asio::error_code ec;
    try {
        testing::run_coroutine(ioc, answer_after(10s), 100ms);
    } catch (const rdma_asio::system_error& e) {
        ec = e.code();
    }
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(ec == asio::error::timed_out);
    CHECK(took >= 100ms);
    CHECK(took < 5s);
    // The io_context still owns the suspended coroutine; destroying it frees it.
}

TEST_CASE("run_until runs a chain of handlers until it says it is done", "[testing]") {
    asio::io_context ioc;
    int steps = 0;
    asio::steady_timer timer(ioc);
    std::function<void()> step = [&] {
        timer.expires_after(1ms);
        timer.async_wait([&](rdma_asio::error_code ec) {
            if (!ec && ++steps < 3)
                step();
        });
    };
    step();
    CHECK(testing::run_until(
        ioc, [&] { return steps == 3; }, 5s));
    CHECK(steps == 3);
}

TEST_CASE("run_until is false when the deadline passes first", "[testing]") {
    asio::io_context ioc;
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(testing::run_until(
        ioc, [] { return false; }, 50ms));
    CHECK(std::chrono::steady_clock::now() - start >= 50ms);
}

TEST_CASE("run_until sees progress made on another thread while its io_context has no work",
          "[testing]") {
    asio::io_context ioc; // nothing to run: the loop must neither spin nor give up
    std::atomic<bool> flag{false};
    std::thread other([&] {
        std::this_thread::sleep_for(50ms);
        flag = true;
    });
    const bool done = testing::run_until(
        ioc, [&] { return flag.load(); }, 5s);
    other.join();
    CHECK(done);
}

namespace {

// A stream whose read had already completed with an event when the collector's
// window closed: cancel() then finds no read pending, and the completion, queued
// already, brings the event, not operation_aborted.
struct stream_with_a_late_event {
    asio::io_context& ioc;
    std::function<void(rdma_asio::error_code, rdma_asio::async_event)> handler;
    int reads = 0;
    template <class Handler>
    void async_next(Handler&& h) {
        ++reads;
        handler = std::forward<Handler>(h);
    }
    void cancel() {
        if (handler)
            asio::post(ioc, [h = std::move(handler)]() mutable {
                h(rdma_asio::error_code(), rdma_asio::async_event());
            });
        handler = nullptr;
    }
};

} // namespace

TEST_CASE("collect_events keeps an event that completes while its read is cancelled", "[testing]") {
    asio::io_context ioc;
    stream_with_a_late_event stream{ioc, nullptr};
    const auto events = testing::collect_events(ioc, stream, 10ms);
    CHECK(stream.reads == 1); // not read again after the window
    CHECK(events.size() == 1);
}

TEST_CASE("the network device helpers name what failed", "[testing]") {
    auto code_of = [](auto&& f) {
        try {
            f();
        } catch (const rdma_asio::system_error& e) {
            return e.code();
        }
        return rdma_asio::error_code();
    };
    CHECK(code_of([] { testing::scoped_address("lo", "not-an-address"); }) ==
          asio::error::invalid_argument);
    CHECK(code_of([] { testing::scoped_address("lo", "10.0.0.9/33"); }) ==
          asio::error::invalid_argument);
    CHECK(code_of([] { testing::set_link("no-such-netdev0", true); }) ==
          asio::error::no_such_device);
    CHECK(code_of([] { testing::set_link("", true); }) == asio::error::invalid_argument);
    CHECK(code_of([] { testing::scoped_address("no-such-netdev0", "10.0.0.9/24"); }) ==
          asio::error::no_such_device);
    CHECK(testing::link_is_up("lo"));
}

} // namespace testing_test
