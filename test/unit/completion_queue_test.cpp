#include "rdma_asio/completion_queue.hpp"

#include <catch2/catch.hpp>

#include "counting_allocator.hpp"
#include "each_token.hpp"
#include "recorder.hpp"

#include <asio/bind_allocator.hpp>
#include <asio/compose.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>

#include <array>
#include <chrono>
#include <span>

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
    } catch (const std::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_channel") != std::string::npos);
    }
}

TEST_CASE("counters of a closed CQ and channel are zero", "[completion_queue]") {
    rdma_asio::cq_counters c;
    CHECK(c.events == 0);
    CHECK(c.ack_calls == 0);
    rdma_asio::channel_counters cc;
    CHECK(cc.events == 0);
}

namespace {

// completion_queue::async_poll and async_wait_event are these composed operations
// on the CQ's state, which a closed CQ no longer has. Without a device there is no
// CQ to close, so the operations are started here as those members start them,
// on a null state.
template <class CompletionToken>
auto poll_closed_cq(asio::io_context& ioc, std::span<ibv_wc> wcs, CompletionToken&& token) {
    return asio::async_compose<CompletionToken, void(std::error_code, std::size_t)>(
        rdma_asio::detail::cq_poll_op{nullptr, wcs}, token, ioc.get_executor());
}
template <class CompletionToken>
auto wait_event_of_closed_cq(asio::io_context& ioc, CompletionToken&& token) {
    return asio::async_compose<CompletionToken, void(std::error_code)>(
        rdma_asio::detail::cq_event_op{nullptr}, token, ioc.get_executor());
}

} // namespace

TEST_CASE("the CQ's operations on a closed CQ complete with bad_descriptor through every "
          "completion token",
          "[completion_queue][tokens]") {
    asio::io_context ioc;
    std::array<ibv_wc, 4> wcs{};
    auto nothing = [] {};
    SECTION("async_poll") {
        auto got = rdma_asio::test::each_token<std::size_t>::complete(
            ioc,
            [&](auto&& token) {
                return poll_closed_cq(ioc, wcs, std::forward<decltype(token)>(token));
            },
            nothing);
        REQUIRE(got.calls() == 1);
        CHECK(got.ec() == asio::error::bad_descriptor);
        CHECK(got.value() == 0);
    }
    SECTION("async_wait_event") {
        auto got = rdma_asio::test::each_token<>::complete(
            ioc,
            [&](auto&& token) {
                return wait_event_of_closed_cq(ioc, std::forward<decltype(token)>(token));
            },
            nothing);
        REQUIRE(got.calls() == 1);
        CHECK(got.ec() == asio::error::bad_descriptor);
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
    rdma_asio::detail::cq_impl cq(64, false, rdma_asio::spin_budget::off());
    std::array<ibv_wc, 3> taken{};
    for (std::size_t i = 0; i < taken.size(); ++i)
        taken[i].wr_id = 10 + i;
    cq.give_back(std::span<const ibv_wc>(taken).last(1));
    cq.give_back(std::span<const ibv_wc>(taken).first(2)); // a later give-back goes first
    CHECK(cq.given_back == 3);

    std::array<ibv_wc, 2> wcs{};
    std::error_code ec = asio::error::eof;
    REQUIRE(cq.poll(wcs, ec) == 2);
    CHECK_FALSE(ec);
    CHECK(wcs[0].wr_id == 10);
    CHECK(wcs[1].wr_id == 11);
    REQUIRE(cq.poll(wcs, ec) == 1);
    CHECK(wcs[0].wr_id == 12);
    CHECK(cq.returned.empty());
    CHECK(cq.completions == 0); // counted when the cancelled poll first took them
}
