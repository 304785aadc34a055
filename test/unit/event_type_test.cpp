#include "rdma_asio/event_type.hpp"

#include <catch2/catch.hpp>

#include <iterator>
#include <set>
#include <string>

namespace event_type_test {

using rdma_asio::event_type;

TEST_CASE("every event type of the seeds has its seed name", "[event_type]") {
    struct expected {
        event_type type;
        const char* name;
    };
    const expected all[] = {
        {event_type::qp_fatal, "IBV_EVENT_QP_FATAL"},
        {event_type::qp_req_err, "IBV_EVENT_QP_REQ_ERR"},
        {event_type::qp_access_err, "IBV_EVENT_QP_ACCESS_ERR"},
        {event_type::comm_est, "IBV_EVENT_COMM_EST"},
        {event_type::sq_drained, "IBV_EVENT_SQ_DRAINED"},
        {event_type::path_mig, "IBV_EVENT_PATH_MIG"},
        {event_type::path_mig_err, "IBV_EVENT_PATH_MIG_ERR"},
        {event_type::qp_last_wqe_reached, "IBV_EVENT_QP_LAST_WQE_REACHED"},
        {event_type::cq_err, "IBV_EVENT_CQ_ERR"},
        {event_type::srq_err, "IBV_EVENT_SRQ_ERR"},
        {event_type::srq_limit_reached, "IBV_EVENT_SRQ_LIMIT_REACHED"},
        {event_type::wq_fatal, "IBV_EVENT_WQ_FATAL"},
        {event_type::port_active, "IBV_EVENT_PORT_ACTIVE"},
        {event_type::port_err, "IBV_EVENT_PORT_ERR"},
        {event_type::lid_change, "IBV_EVENT_LID_CHANGE"},
        {event_type::pkey_change, "IBV_EVENT_PKEY_CHANGE"},
        {event_type::sm_change, "IBV_EVENT_SM_CHANGE"},
        {event_type::client_reregister, "IBV_EVENT_CLIENT_REREGISTER"},
        {event_type::gid_change, "IBV_EVENT_GID_CHANGE"},
        {event_type::device_fatal, "IBV_EVENT_DEVICE_FATAL"},
        {event_type::mcg_created, "IBV_SM_EVENT_MCG_CREATED"},
        {event_type::mcg_deleted, "IBV_SM_EVENT_MCG_DELETED"},
        {event_type::gid_avail, "IBV_SM_EVENT_GID_AVAIL"},
        {event_type::gid_unavail, "IBV_SM_EVENT_GID_UNAVAIL"},
        {event_type::device_removed, "RDMA_ASIO_EVENT_DEVICE_REMOVED"},
    };
    std::set<std::string> names;
    for (const auto& e : all) {
        CAPTURE(e.name);
        CHECK(rdma_asio::to_string(e.type) == e.name);
        names.insert(e.name);
    }
    CHECK(names.size() == std::size(all));
    CHECK(rdma_asio::to_string(static_cast<event_type>(4711)) == "unknown");
}

TEST_CASE("only device_fatal and device_removed end a device", "[event_type]") {
    CHECK(rdma_asio::is_removal(event_type::device_fatal));
    CHECK(rdma_asio::is_removal(event_type::device_removed));
    CHECK_FALSE(rdma_asio::is_removal(event_type::port_err));
    CHECK_FALSE(rdma_asio::is_removal(event_type::qp_fatal));
}

TEST_CASE("verbs event values carry over unchanged", "[event_type]") {
    CHECK(static_cast<int>(event_type::cq_err) == IBV_EVENT_CQ_ERR);
    CHECK(static_cast<int>(event_type::gid_change) == IBV_EVENT_GID_CHANGE);
    CHECK(static_cast<int>(event_type::wq_fatal) == IBV_EVENT_WQ_FATAL);
    CHECK(static_cast<int>(event_type::device_fatal) == IBV_EVENT_DEVICE_FATAL);
}

} // namespace event_type_test
