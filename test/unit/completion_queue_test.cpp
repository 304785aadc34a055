#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/op_block_cache.hpp"
#include "rdma_asio/detail/cq/cq_direct_poll.hpp"

#include <catch2/catch.hpp>

#include "closed_cq.hpp"
#include "counting_allocator.hpp"
#include "each_token.hpp"
#include "recorder.hpp"

#include "run_coroutine.hpp"

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace completion_queue_test {

namespace {

using typed_channel = rdma_asio::basic_completion_channel<asio::io_context::executor_type>;
using typed_cq = rdma_asio::basic_completion_queue<asio::io_context::executor_type>;

static_assert(std::is_same_v<rdma_asio::completion_queue::executor_type, asio::any_io_executor>);
static_assert(std::is_same_v<typed_cq::executor_type, asio::io_context::executor_type>);
static_assert(std::is_same_v<
              rdma_asio::completion_queue::rebind_executor<asio::io_context::executor_type>::other,
              typed_cq>);
static_assert(std::is_same_v<typed_cq::native_handle_type, ibv_cq*>);
static_assert(std::is_nothrow_move_constructible_v<typed_cq>);
static_assert(!std::is_copy_constructible_v<typed_cq>);
// A CQ takes its executor from the channel: a typed channel makes typed or
// erased CQs, an erased channel only erased ones; without a type, the channel's.
static_assert(std::is_constructible_v<typed_cq, typed_channel&, int>);
static_assert(std::is_constructible_v<rdma_asio::completion_queue, typed_channel&, int>);
static_assert(std::is_constructible_v<rdma_asio::completion_queue, rdma_asio::completion_channel&,
                                      int, rdma_asio::cq_options>);
static_assert(!std::is_constructible_v<typed_cq, rdma_asio::completion_channel&, int>);
static_assert(
    std::is_same_v<decltype(rdma_asio::basic_completion_queue(std::declval<typed_channel&>(), 4)),
                   typed_cq>);
static_assert(std::is_nothrow_constructible_v<rdma_asio::completion_queue, typed_cq&&>);
static_assert(!std::is_constructible_v<typed_cq, rdma_asio::completion_queue&&>);

// async_poll's wait in the channel takes its executor, allocator and cancellation
// slot from the caller's handler, and the defaults of whoever asks where the
// handler names none: the operation cache for its memory (handler_operation.hpp).
// Before, the allocator's default was fixed to std::allocator, and every poll's
// wait came from operator new.
struct plain_handler {
    void operator()(rdma_asio::error_code, std::size_t) const {}
};
using poll_wait = rdma_asio::detail::cq_poll_completion<plain_handler, asio::any_io_executor>;
using cache_allocator = rdma_asio::detail::op_allocator<void>;
static_assert(
    std::is_same_v<asio::associated_allocator_t<poll_wait, cache_allocator>, cache_allocator>);
using counted = rdma_asio::test::counting_allocator<void>;
using counted_poll_wait =
    rdma_asio::detail::cq_poll_completion<asio::allocator_binder<plain_handler, counted>,
                                          asio::any_io_executor>;
static_assert(
    std::is_same_v<asio::associated_allocator_t<counted_poll_wait, cache_allocator>, counted>);
static_assert(std::is_same_v<asio::associated_executor_t<poll_wait, asio::any_io_executor>,
                             asio::any_io_executor>);

} // namespace

TEST_CASE("async_poll's wait keeps the allocator its handler names", "[completion_queue]") {
    rdma_asio::test::allocation_count count;
    asio::io_context ioc;
    const counted_poll_wait wait{
        asio::bind_allocator(counted(count), plain_handler{}), nullptr, {}, ioc.get_executor()};
    const counted alloc = asio::get_associated_allocator(wait, cache_allocator());
    rdma_asio::test::counting_allocator<int> ints(alloc); // the handler's own count
    ints.deallocate(ints.allocate(1), 1);
    CHECK(count.allocations == 1);
    CHECK(count.deallocations == 1);
}

TEST_CASE("cq_options default to batched acks and no spinning", "[completion_queue]") {
    rdma_asio::cq_options options;
    CHECK(options.ack_batch == 64);
    CHECK_FALSE(options.solicited_only);
    CHECK(options.spin.mode == rdma_asio::spin_budget::kind::off);
}

TEST_CASE("a channel needs an open context", "[completion_queue]") {
    asio::io_context ioc;
    rdma_asio::context closed;
    try {
        rdma_asio::completion_channel channel(ioc, closed);
        FAIL("a channel opened on a closed context");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_channel") != std::string::npos);
    }
}

TEST_CASE("the counters of a closed CQ are zero", "[completion_queue]") {
    asio::io_context ioc;
    rdma_asio::completion_queue cq(ioc);
    const rdma_asio::cq_counters c = cq.counters();
    CHECK(c.events == 0);
    CHECK(c.ack_calls == 0);
    CHECK(c.completions == 0);
    CHECK(c.arms == 0);
    CHECK(c.given_back == 0);
}

namespace {

// completion_queue::async_poll and async_wait run these composed operations on
// an open CQ's state. They refuse state they cannot use (none, or a CQ closed
// meanwhile) themselves, posted like every other refusal; the members never hand
// them a null state (a closed CQ's waits end before that, see below), so the
// operations are started here directly, on a null state.
template <class CompletionToken>
auto poll_closed_cq(asio::io_context& ioc, std::span<ibv_wc> wcs, CompletionToken&& token) {
    return asio::async_compose<CompletionToken, void(rdma_asio::error_code, std::size_t)>(
        rdma_asio::detail::cq_poll_op{nullptr, wcs}, token, ioc.get_executor());
}
template <class CompletionToken>
auto wait_event_of_closed_cq(asio::io_context& ioc, CompletionToken&& token) {
    return asio::async_compose<CompletionToken, void(rdma_asio::error_code)>(
        rdma_asio::detail::cq_event_op{nullptr}, token, ioc.get_executor());
}

} // namespace

TEST_CASE("the CQ's operations on a closed CQ complete with bad_descriptor through every "
          "completion token",
          "[completion_queue][tokens]") {
    asio::io_context ioc;
    std::array<ibv_wc, 4> wcs{};
    SECTION("async_poll") {
        rdma_asio::test::each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return poll_closed_cq(ioc, wcs, std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_wait") {
        rdma_asio::test::each_token<>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return wait_event_of_closed_cq(ioc, std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
}

TEST_CASE("the CQ's operations allocate through the handler's allocator and free it all",
          "[completion_queue][allocator]") {
    asio::io_context ioc;
    std::array<ibv_wc, 4> wcs{};
    rdma_asio::test::allocation_count count;
    rdma_asio::test::recorder<std::size_t> polled;
    rdma_asio::test::recorder<> waited;
    const rdma_asio::test::counting_allocator<void> alloc(count);
    poll_closed_cq(ioc, wcs, asio::bind_allocator(alloc, polled.handler()));
    wait_event_of_closed_cq(ioc, asio::bind_allocator(alloc, waited.handler()));
    // Each refusal is posted, never inline: the posted operation is the handler's.
    CHECK(count.allocations == 2);
    CHECK(count.bytes_held > 0);
    ioc.run_for(std::chrono::seconds(5));
    CHECK(ioc.stopped());
    REQUIRE(polled.calls() == 1);
    CHECK(polled.ec() == asio::error::bad_descriptor);
    REQUIRE(waited.calls() == 1);
    CHECK(waited.ec() == asio::error::bad_descriptor);
    CHECK(count.deallocations == count.allocations);
    CHECK(count.bytes_held == 0);
}

TEST_CASE("completions a cancelled poll gave back come first, in order, and are counted once",
          "[completion_queue]") {
    // No CQ is needed: a poll with completions given back does not reach ibv_poll_cq.
    rdma_asio::detail::completion_queue_impl cq(64, false, rdma_asio::spin_budget::off());
    std::array<ibv_wc, 3> taken{};
    for (std::size_t i = 0; i < taken.size(); ++i)
        taken[i].wr_id = 10 + i;
    cq.give_back(std::span<const ibv_wc>(taken).last(1));
    cq.give_back(std::span<const ibv_wc>(taken).first(2)); // a later give-back goes first
    CHECK(cq.counters().given_back == 3);
    CHECK(cq.returned_pending() == 3);

    std::array<ibv_wc, 2> wcs{};
    rdma_asio::error_code ec = asio::error::eof;
    REQUIRE(cq.poll(wcs, ec) == 2);
    CHECK_FALSE(ec);
    CHECK(wcs[0].wr_id == 10);
    CHECK(wcs[1].wr_id == 11);
    REQUIRE(cq.poll(wcs, ec) == 1);
    CHECK(wcs[0].wr_id == 12);
    CHECK(cq.returned_pending() == 0);
    CHECK(cq.counters().completions == 0); // counted when the cancelled poll first took them
}

TEST_CASE("a closed CQ typed on io_context's executor: waits complete with bad_descriptor",
          "[completion_queue]") {
    asio::io_context ioc;
    typed_cq cq(ioc);
    CHECK_FALSE(cq.is_open());
    CHECK(cq.native_handle() == nullptr);
    CHECK(cq.get_executor() == ioc.get_executor());
    std::array<ibv_wc, 4> wcs{};
    rdma_asio::test::recorder<std::size_t> polled;
    rdma_asio::test::recorder<> waited;
    cq.async_poll(wcs, polled.handler());
    cq.async_wait(waited.handler());
    CHECK(polled.calls() == 0); // posted, never inside the initiating call
    CHECK(waited.calls() == 0);
    ioc.run_for(std::chrono::seconds(5));
    CHECK(ioc.stopped());
    REQUIRE(polled.calls() == 1);
    CHECK(polled.ec() == asio::error::bad_descriptor);
    CHECK(polled.value() == 0);
    REQUIRE(waited.calls() == 1);
    CHECK(waited.ec() == asio::error::bad_descriptor);

    rdma_asio::error_code ec;
    cq.request_notify(ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(cq.request_notify(), rdma_asio::system_error);
    cq.close(ec);
    CHECK_FALSE(ec);
    CHECK_NOTHROW(cq.close());
    cq.cancel();

    // as_default_on: waits without a token are awaitables, and the closed CQ's
    // error is thrown into the coroutine.
    auto awaiting = asio::use_awaitable.as_default_on(std::move(cq));
    rdma_asio::error_code thrown;
    ioc.restart();
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        try {
            co_await awaiting.async_poll(wcs);
        } catch (const rdma_asio::system_error& e) {
            thrown = e.code();
        }
    }());
    CHECK(thrown == asio::error::bad_descriptor);

    // Back to any_io_executor by a converting move; the moved-from CQ is closed
    // too and keeps its executor.
    rdma_asio::completion_queue erased(std::move(awaiting));
    CHECK(&asio::query(erased.get_executor(), asio::execution::context) == &ioc);
    rdma_asio::test::recorder<std::size_t> from_erased, from_moved;
    erased.async_poll(wcs, from_erased.handler());
    awaiting.async_poll(wcs, from_moved.handler());
    ioc.restart();
    ioc.run_for(std::chrono::seconds(5));
    REQUIRE(from_erased.calls() == 1);
    CHECK(from_erased.ec() == asio::error::bad_descriptor);
    REQUIRE(from_moved.calls() == 1);
    CHECK(from_moved.ec() == asio::error::bad_descriptor);
}

TEST_CASE("a closed CQ's waits complete with bad_descriptor through every completion token",
          "[completion_queue][tokens]") {
    asio::io_context ioc;
    rdma_asio::completion_queue cq(ioc);
    rdma_asio::test::check_closed_cq_operations(ioc, cq);
}

TEST_CASE("a CQ on a closed channel: open reports bad_descriptor", "[completion_queue]") {
    asio::io_context ioc;
    typed_channel channel(ioc);
    typed_cq cq(ioc);
    rdma_asio::error_code ec;
    cq.open(channel, 16, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(cq.is_open());
    try {
        typed_cq made(channel, 16);
        FAIL("a CQ made on a closed channel");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_queue::open") != std::string::npos);
    }
}

TEST_CASE("a closed CQ's wait allocates through the handler's allocator and frees it",
          "[completion_queue][allocator]") {
    asio::io_context ioc;
    // Typed: any_io_executor drops the allocator property, io_context's executor
    // allocates the posted completion with it.
    typed_cq cq(ioc);
    std::array<ibv_wc, 4> wcs{};
    rdma_asio::test::allocation_count count;
    rdma_asio::test::recorder<std::size_t> polled;
    cq.async_poll(wcs, asio::bind_allocator(rdma_asio::test::counting_allocator<void>(count),
                                            polled.handler()));
    CHECK(count.allocations == 2); // the operation, and its posted delivery
    ioc.run_for(std::chrono::seconds(5));
    REQUIRE(polled.calls() == 1);
    CHECK(polled.ec() == asio::error::bad_descriptor);
    CHECK(count.deallocations == count.allocations);
    CHECK(count.bytes_held == 0);
}

} // namespace completion_queue_test
