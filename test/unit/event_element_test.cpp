#include "rdma_asio/event_element.hpp"

#include <catch2/catch.hpp>

namespace event_element_test {

using rdma_asio::event_element;
using rdma_asio::event_type;

TEST_CASE("every event type names the element it is about", "[event_element]") {
    struct expected {
        event_type type;
        event_element element;
    };
    const expected all[] = {
        {event_type::qp_fatal, event_element::qp},
        {event_type::qp_req_err, event_element::qp},
        {event_type::qp_access_err, event_element::qp},
        {event_type::comm_est, event_element::qp},
        {event_type::sq_drained, event_element::qp},
        {event_type::path_mig, event_element::qp},
        {event_type::path_mig_err, event_element::qp},
        {event_type::qp_last_wqe_reached, event_element::qp},
        {event_type::cq_err, event_element::cq},
        {event_type::srq_err, event_element::srq},
        {event_type::srq_limit_reached, event_element::srq},
        {event_type::wq_fatal, event_element::wq},
        {event_type::port_active, event_element::port},
        {event_type::port_err, event_element::port},
        {event_type::lid_change, event_element::port},
        {event_type::pkey_change, event_element::port},
        {event_type::sm_change, event_element::port},
        {event_type::client_reregister, event_element::port},
        {event_type::gid_change, event_element::port},
        {event_type::device_fatal, event_element::device},
        {event_type::mcg_created, event_element::gid},
        {event_type::mcg_deleted, event_element::gid},
        {event_type::gid_avail, event_element::gid},
        {event_type::gid_unavail, event_element::gid},
        {event_type::device_removed, event_element::device},
    };
    for (const auto& e : all) {
        CAPTURE(static_cast<int>(e.type));
        CHECK(rdma_asio::element_of(e.type) == e.element);
    }
}

TEST_CASE("a type libibverbs adds later is read as a port event", "[event_element]") {
    // The union member such a value fills is unknown; port_num is the harmless one.
    CHECK(rdma_asio::element_of(static_cast<event_type>(4711)) == event_element::port);
}

} // namespace event_element_test
