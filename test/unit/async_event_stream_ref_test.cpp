// async_event_stream_ref on the imitated kernel: events from elsewhere join the
// stream's waiters, port events can be observed, and both follow the stream's
// state, not the stream object.
#include "rdma_asio/async_event_stream_ref.hpp"

#include <catch2/catch.hpp>

#include "nothing_pending.hpp"
#include "recorder.hpp"

#include "fake_kernel.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace async_event_stream_ref_test {

using namespace std::chrono_literals;
using rdma_asio::async_event;
using rdma_asio::errc;
using rdma_asio::event_type;
using rdma_asio::test::fake_async_fd;
using rdma_asio::test::recorder;

namespace {

ibv_gid gid_with_last_byte(std::uint8_t b) {
    ibv_gid g{};
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = b;
    return g;
}

struct fixture {
    asio::io_context ioc;
    fake_async_fd kernel;
    rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
    ~fixture() { CHECK(rdma_asio::test::nothing_pending(ioc)); }
};

} // namespace

TEST_CASE_METHOD(fixture, "a delivered event reaches a waiter, or waits for the next one, in order",
                 "[async_event_stream_ref]") {
    const rdma_asio::async_event_stream_ref ref = stream.ref();
    recorder<async_event> r;
    stream.async_next(r.handler());
    REQUIRE(ref.deliver(async_event(event_type::gid_avail, 1, gid_with_last_byte(3))));
    CHECK(r.calls() == 0); // never inside deliver()
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::gid_avail);
    CHECK(r.value().gid().raw[15] == 3);

    // Nobody waits: kept, in arrival order with the device's own events.
    REQUIRE(ref.deliver(async_event(event_type::mcg_created, 1, gid_with_last_byte(4))));
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    REQUIRE(ref.deliver(async_event(event_type::mcg_deleted, 1, gid_with_last_byte(4))));
    CHECK(stream.queued() == 2); // the device's event is read only by a wait
    std::vector<event_type> seen;
    for (int i = 0; i < 3; ++i) {
        ioc.restart();
        stream.async_next(r.handler());
        ioc.run_for(5s);
        REQUIRE(r.calls() == 2 + i);
        seen.push_back(r.value().type());
    }
    CHECK(seen == std::vector<event_type>{event_type::mcg_created, event_type::mcg_deleted,
                                          event_type::port_err});
}

TEST_CASE_METHOD(fixture,
                 "a stream ref follows the stream when it is moved and refuses once it is closed",
                 "[async_event_stream_ref]") {
    const rdma_asio::async_event_stream_ref ref = stream.ref();
    rdma_asio::async_event_stream moved(std::move(stream));
    CHECK_THROWS_AS(stream.ref(), rdma_asio::system_error); // the moved-from stream is closed
    recorder<async_event> r;
    moved.async_next(r.handler());
    CHECK(ref.deliver(async_event(event_type::gid_unavail, 1, gid_with_last_byte(5))));
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::gid_unavail);

    moved.close();
    CHECK_FALSE(ref.deliver(async_event(event_type::gid_avail, 1, gid_with_last_byte(5))));
    try {
        (void)moved.ref();
        FAIL("a closed stream gave a stream ref");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
    }
}

TEST_CASE_METHOD(fixture, "a stream ref refuses events once the device was removed",
                 "[async_event_stream_ref]") {
    const rdma_asio::async_event_stream_ref ref = stream.ref();
    recorder<async_event> r, later;
    stream.async_next(r.handler());
    kernel.raise(IBV_EVENT_DEVICE_FATAL, std::uint64_t{0});
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::device_fatal);
    CHECK_FALSE(ref.deliver(async_event(event_type::gid_avail, 1, gid_with_last_byte(6))));
    ioc.restart();
    stream.async_next(later.handler());
    ioc.run_for(5s);
    REQUIRE(later.calls() == 1);
    CHECK(later.ec() == errc::device_removed); // the refused event did not slip in
}

TEST_CASE_METHOD(fixture, "a port-event subscription sees what the stream reads until it ends",
                 "[async_event_stream_ref]") {
    // The observer runs on the thread reading the stream: this one (ioc.run_for).
    std::vector<std::pair<event_type, int>> observed;
    rdma_asio::event_subscription subscription = stream.ref().observe_ports(
        [&](event_type type, int port) { observed.emplace_back(type, port); });
    CHECK(subscription.active());

    kernel.raise(IBV_EVENT_SM_CHANGE, 1);
    rdma_asio::test::fake_cq cq;
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq); // not a port event
    kernel.raise(IBV_EVENT_CLIENT_REREGISTER, 2);
    recorder<async_event> r;
    for (int i = 0; i < 3; ++i) {
        ioc.restart();
        stream.async_next(r.handler());
        ioc.run_for(5s);
    }
    REQUIRE(r.calls() == 3);
    CHECK(observed == std::vector<std::pair<event_type, int>>{{event_type::sm_change, 1},
                                                              {event_type::client_reregister, 2}});

    // Moved: still one subscription; ended: the observer is not called again.
    rdma_asio::event_subscription moved = std::move(subscription);
    CHECK_FALSE(subscription.active());
    CHECK(moved.active());
    kernel.raise(IBV_EVENT_LID_CHANGE, 1);
    ioc.restart();
    stream.async_next(r.handler());
    ioc.run_for(5s);
    REQUIRE(observed.size() == 3);
    CHECK(observed.back() == std::pair{event_type::lid_change, 1});

    moved.reset();
    CHECK_FALSE(moved.active());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    ioc.restart();
    stream.async_next(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 5);
    CHECK(r.value().type() == event_type::port_err);
    CHECK(observed.size() == 3);
}

TEST_CASE("a subscription and a stream ref may outlive their stream", "[async_event_stream_ref]") {
    asio::io_context ioc;
    fake_async_fd kernel;
    std::optional<rdma_asio::async_event_stream_ref> ref;
    rdma_asio::event_subscription subscription;
    {
        rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
        ref = stream.ref();
        subscription = ref->observe_ports([](event_type, int) {});
    }
    CHECK_FALSE(ref->deliver(async_event(event_type::gid_avail, 1, gid_with_last_byte(7))));
    subscription.reset(); // harmless
    CHECK_FALSE(subscription.active());
    CHECK(rdma_asio::test::nothing_pending(ioc));
}

TEST_CASE_METHOD(fixture, "an object subscription sees the events of its QP or CQ only",
                 "[async_event_stream_ref]") {
    rdma_asio::test::fake_qp qp, other_qp;
    rdma_asio::test::fake_cq cq;
    std::vector<event_type> on_qp, on_cq;
    rdma_asio::event_subscription qp_watch =
        stream.ref().observe(&qp.qp, [&](event_type type) { on_qp.push_back(type); });
    rdma_asio::event_subscription cq_watch =
        stream.ref().observe(&cq.cq, [&](event_type type) { on_cq.push_back(type); });
    kernel.raise(IBV_EVENT_QP_FATAL, &qp.qp);
    kernel.raise(IBV_EVENT_QP_ACCESS_ERR, &other_qp.qp);
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
    kernel.raise(IBV_EVENT_QP_REQ_ERR, &qp.qp);
    std::vector<event_type> delivered;
    for (int i = 0; i < 5; ++i) {
        recorder<async_event> r;
        ioc.restart();
        stream.async_next(r.handler());
        ioc.run_for(5s);
        REQUIRE(r.calls() == 1);
        delivered.push_back(r.value().type()); // the waiters still get every event
    }
    CHECK(delivered.size() == 5);
    CHECK(on_qp == std::vector{event_type::qp_fatal, event_type::qp_req_err});
    CHECK(on_cq == std::vector{event_type::cq_err});

    qp_watch.reset();
    kernel.raise(IBV_EVENT_QP_FATAL, &qp.qp);
    recorder<async_event> r;
    ioc.restart();
    stream.async_next(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(on_qp.size() == 2); // ended: not called again
}

} // namespace async_event_stream_ref_test
