// The stage between stop() and close() of a queue pair on a shared receive queue
// (srq_close_handoff.hpp). What the queue pair does in it on rxe is in
// shared_receive_queue_rxe_test.cpp (async_close of a QP on an SRQ).
#include "rdma_asio/detail/core/operation.hpp"
#include "rdma_asio/detail/qp/srq_close_handoff.hpp"

#include <catch2/catch.hpp>

#include <memory>

namespace srq_close_handoff_test {

using rdma_asio::detail::async_event_stream_impl;
using rdma_asio::detail::delivery;
using rdma_asio::detail::srq_close_handoff;

// Counts how it ended; the handoff itself never ends it.
struct counted_op final : rdma_asio::detail::operation {
    int completed = 0;
    int destroyed = 0;
    void complete(delivery) override { ++completed; }
    void destroy() noexcept override { ++destroyed; }
};

// A weak reference to "a stream" that stays alive: shares `anchor`'s ownership.
std::weak_ptr<async_event_stream_impl> stream_of(const std::shared_ptr<int>& anchor) {
    return std::shared_ptr<async_event_stream_impl>(anchor, nullptr);
}

bool same_owner(const std::weak_ptr<async_event_stream_impl>& w, const std::shared_ptr<int>& a) {
    return !w.owner_before(a) && !a.owner_before(w);
}

TEST_CASE("before stop(), nothing is kept: async_close's wait and drain end by themselves",
          "[srq_close_handoff]") {
    srq_close_handoff h;
    auto anchor = std::make_shared<int>();
    counted_op waiter;
    CHECK_FALSE(h.stopped());
    CHECK_FALSE(h.remember_event_wait(stream_of(anchor)));
    CHECK_FALSE(h.start_drain(waiter, true));
    CHECK(h.take_drain_waiter() == nullptr);
    CHECK(h.end().expired());
    CHECK(waiter.completed + waiter.destroyed == 0);
}

TEST_CASE("after stop(), close() gets back the stream whose wait it must end",
          "[srq_close_handoff]") {
    srq_close_handoff h;
    auto anchor = std::make_shared<int>();
    h.stop();
    CHECK(h.stopped());
    REQUIRE(h.remember_event_wait(stream_of(anchor)));
    const auto events = h.end();
    CHECK(same_owner(events, anchor));
    CHECK_FALSE(h.stopped());
    // Ended once: a second close() has no wait to end, and later waits are refused.
    CHECK(h.end().expired());
    CHECK_FALSE(h.remember_event_wait(stream_of(anchor)));
}

TEST_CASE("a drain is requested once, while stopped and still routed to", "[srq_close_handoff]") {
    counted_op first;
    counted_op second;
    SECTION("not routed to (no receive CQ reader): completes at once") {
        srq_close_handoff h;
        h.stop();
        CHECK_FALSE(h.start_drain(first, false));
        CHECK(h.take_drain_waiter() == nullptr);
    }
    SECTION("routed to: kept until the drain ends, and a second asker is not kept") {
        srq_close_handoff h;
        h.stop();
        CHECK(h.start_drain(first, true));
        CHECK_FALSE(h.start_drain(second, true));
        CHECK(h.take_drain_waiter() == &first);
        CHECK(h.take_drain_waiter() == nullptr); // told once
    }
    CHECK(first.completed + first.destroyed + second.completed + second.destroyed == 0);
}

} // namespace srq_close_handoff_test
