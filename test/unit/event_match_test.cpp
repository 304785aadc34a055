#include "rdma_asio/event_match.hpp"

#include <catch2/catch.hpp>

#include "fake_kernel.hpp"

namespace event_match_test {

using rdma_asio::async_event;
using rdma_asio::event_type;

using rdma_asio::test::raw_event;

TEST_CASE("event_match selects by type, object and port", "[event_match]") {
    rdma_asio::test::fake_qp a, b;
    ibv_async_event raw = raw_event(IBV_EVENT_SQ_DRAINED);
    raw.element.qp = &a.qp;
    async_event ev(raw);
    CHECK(rdma_asio::event_match(event_type::sq_drained)(ev));
    CHECK(rdma_asio::event_match(event_type::sq_drained, &a.qp)(ev));
    CHECK_FALSE(rdma_asio::event_match(event_type::sq_drained, &b.qp)(ev));
    CHECK_FALSE(rdma_asio::event_match(event_type::qp_fatal, &a.qp)(ev));

    ibv_async_event port = raw_event(IBV_EVENT_PORT_ACTIVE);
    port.element.port_num = 2;
    async_event pe(port);
    CHECK(rdma_asio::event_match::port(event_type::port_active, 2)(pe));
    CHECK_FALSE(rdma_asio::event_match::port(event_type::port_active, 1)(pe));
}

TEST_CASE("event_match matches no empty event", "[event_match]") {
    async_event empty;
    // An empty event's raw fields are zero, i.e. IBV_EVENT_CQ_ERR.
    CHECK_FALSE(rdma_asio::event_match(event_type::cq_err)(empty));
    CHECK_FALSE(rdma_asio::event_match::port(event_type::cq_err, 0)(empty));
}

} // namespace event_match_test
