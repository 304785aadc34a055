// What each device event means for a queue pair's operations (qp_error_event.hpp).
// What the queue pair then does on rxe is in queue_pair_rxe_test.cpp and
// shared_receive_queue_rxe_test.cpp.
#include "rdma_asio/detail/qp/qp_error_event.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/event_type.hpp"

#include <catch2/catch.hpp>

namespace qp_error_event_test {

using rdma_asio::errc;
using rdma_asio::event_type;
using rdma_asio::detail::qp_error_of;

TEST_CASE("a QP's error events end its operations with their own reason, after the flush",
          "[qp_error_event]") {
    CHECK(qp_error_of(event_type::qp_fatal).reason == errc::queue_pair_fatal);
    CHECK(qp_error_of(event_type::qp_req_err).reason == errc::queue_pair_request_error);
    CHECK(qp_error_of(event_type::qp_access_err).reason == errc::queue_pair_access_error);
    for (event_type type :
         {event_type::qp_fatal, event_type::qp_req_err, event_type::qp_access_err})
        CHECK_FALSE(qp_error_of(type).completions_lost);
}

TEST_CASE("a CQ overrun ends every operation now: its completions were lost", "[qp_error_event]") {
    const auto effect = qp_error_of(event_type::cq_err);
    CHECK(effect.reason == errc::completion_queue_overrun);
    CHECK(effect.completions_lost);
}

TEST_CASE("events that are not errors of the operations change nothing", "[qp_error_event]") {
    for (event_type type :
         {event_type::comm_est, event_type::sq_drained, event_type::path_mig,
          event_type::path_mig_err, event_type::qp_last_wqe_reached, event_type::srq_limit_reached,
          event_type::port_active, event_type::port_err, event_type::device_fatal}) {
        INFO(rdma_asio::to_string(type));
        CHECK_FALSE(qp_error_of(type).reason);
        CHECK_FALSE(qp_error_of(type).completions_lost);
    }
}

} // namespace qp_error_event_test
