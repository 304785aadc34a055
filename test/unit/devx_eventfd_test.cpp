#include "rdma_asio/devx_eventfd.hpp"

#include <catch2/catch.hpp>

#include "each_token.hpp"
#include "recorder.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>

#include <sys/eventfd.h>

#include <chrono>
#include <cstdint>

using namespace std::chrono_literals;
using rdma_asio::test::recorder;

namespace {

// What the kernel does per event of an eventfd subscription (eventfd_signal).
void signal(const rdma_asio::devx_eventfd& efd, std::uint64_t times) {
    for (std::uint64_t i = 0; i < times; ++i)
        REQUIRE(::eventfd_write(efd.native_handle(), 1) == 0);
}

} // namespace

TEST_CASE("an eventfd wait reports how many events were signalled", "[devx_eventfd]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    REQUIRE(efd.native_handle() >= 0);
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    signal(efd, 3);
    CHECK(r.calls() == 0); // never inside the initiating call
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK_FALSE(r.ec());
    CHECK(r.value() == 3);
    CHECK(ioc.stopped());

    // The counter was reset by the read: the next wait needs a new signal.
    ioc.restart();
    recorder<std::uint64_t> next;
    efd.async_wait(next.handler());
    ioc.run_for(100ms);
    CHECK(next.calls() == 0);
    signal(efd, 1);
    ioc.run_for(5s);
    REQUIRE(next.calls() == 1);
    CHECK(next.value() == 1);
}

TEST_CASE("an eventfd wait completes with every completion token", "[devx_eventfd][tokens]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    auto got = rdma_asio::test::each_token<std::uint64_t>::complete(
        ioc, [&](auto&& token) { return efd.async_wait(std::forward<decltype(token)>(token)); },
        [&] { signal(efd, 2); });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value() == 2);
}

TEST_CASE("a cancelled eventfd wait reads nothing", "[devx_eventfd]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    asio::cancellation_signal sig;
    recorder<std::uint64_t> cancelled, next;
    efd.async_wait(asio::bind_cancellation_slot(sig.slot(), cancelled.handler()));
    ioc.poll();
    sig.emit(type);
    signal(efd, 2);
    efd.async_wait(next.handler());
    ioc.run_for(5s);
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    REQUIRE(next.calls() == 1);
    CHECK(next.value() == 2);
}

TEST_CASE("closing an eventfd aborts its wait and closes the fd", "[devx_eventfd]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    ioc.poll();
    rdma_asio::devx_eventfd moved(std::move(efd));
    CHECK_FALSE(efd.is_open());
    CHECK(efd.native_handle() == -1);
    moved.close();
    ioc.run_for(5s);
    CHECK(r.ec() == asio::error::operation_aborted);
    CHECK(moved.native_handle() == -1);
    CHECK_THROWS_AS(moved.async_wait(recorder<std::uint64_t>{}.handler()), std::system_error);
}
