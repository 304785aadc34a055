#include "rdma_asio/async_event.hpp"

#include <catch2/catch.hpp>

#include "fake_kernel.hpp"

#include <set>
#include <string>

using rdma_asio::async_event;
using rdma_asio::event_element;
using rdma_asio::event_type;

namespace {
ibv_async_event raw_event(ibv_event_type type) {
    ibv_async_event raw{};
    raw.event_type = type;
    return raw;
}
} // namespace

TEST_CASE("every event type of the seeds has its seed name and element", "[async_event]") {
    struct expected {
        event_type type;
        const char* name;
        event_element element;
    };
    const expected all[] = {
        {event_type::qp_fatal, "IBV_EVENT_QP_FATAL", event_element::qp},
        {event_type::qp_req_err, "IBV_EVENT_QP_REQ_ERR", event_element::qp},
        {event_type::qp_access_err, "IBV_EVENT_QP_ACCESS_ERR", event_element::qp},
        {event_type::comm_est, "IBV_EVENT_COMM_EST", event_element::qp},
        {event_type::sq_drained, "IBV_EVENT_SQ_DRAINED", event_element::qp},
        {event_type::path_mig, "IBV_EVENT_PATH_MIG", event_element::qp},
        {event_type::path_mig_err, "IBV_EVENT_PATH_MIG_ERR", event_element::qp},
        {event_type::qp_last_wqe_reached, "IBV_EVENT_QP_LAST_WQE_REACHED", event_element::qp},
        {event_type::cq_err, "IBV_EVENT_CQ_ERR", event_element::cq},
        {event_type::srq_err, "IBV_EVENT_SRQ_ERR", event_element::srq},
        {event_type::srq_limit_reached, "IBV_EVENT_SRQ_LIMIT_REACHED", event_element::srq},
        {event_type::wq_fatal, "IBV_EVENT_WQ_FATAL", event_element::wq},
        {event_type::port_active, "IBV_EVENT_PORT_ACTIVE", event_element::port},
        {event_type::port_err, "IBV_EVENT_PORT_ERR", event_element::port},
        {event_type::lid_change, "IBV_EVENT_LID_CHANGE", event_element::port},
        {event_type::pkey_change, "IBV_EVENT_PKEY_CHANGE", event_element::port},
        {event_type::sm_change, "IBV_EVENT_SM_CHANGE", event_element::port},
        {event_type::client_reregister, "IBV_EVENT_CLIENT_REREGISTER", event_element::port},
        {event_type::gid_change, "IBV_EVENT_GID_CHANGE", event_element::port},
        {event_type::device_fatal, "IBV_EVENT_DEVICE_FATAL", event_element::device},
        {event_type::mcg_created, "IBV_SM_EVENT_MCG_CREATED", event_element::gid},
        {event_type::mcg_deleted, "IBV_SM_EVENT_MCG_DELETED", event_element::gid},
        {event_type::gid_avail, "IBV_SM_EVENT_GID_AVAIL", event_element::gid},
        {event_type::gid_unavail, "IBV_SM_EVENT_GID_UNAVAIL", event_element::gid},
        {event_type::device_removed, "RDMA_ASIO_EVENT_DEVICE_REMOVED", event_element::device},
    };
    std::set<std::string> names;
    for (const auto& e : all) {
        CAPTURE(e.name);
        CHECK(rdma_asio::to_string(e.type) == e.name);
        CHECK(rdma_asio::element_of(e.type) == e.element);
        names.insert(e.name);
    }
    CHECK(names.size() == std::size(all));
    CHECK(rdma_asio::to_string(static_cast<event_type>(4711)) == "unknown");
    CHECK(rdma_asio::is_removal(event_type::device_fatal));
    CHECK(rdma_asio::is_removal(event_type::device_removed));
    CHECK_FALSE(rdma_asio::is_removal(event_type::port_err));
}

TEST_CASE("verbs event values carry over unchanged", "[async_event]") {
    CHECK(static_cast<int>(event_type::cq_err) == IBV_EVENT_CQ_ERR);
    CHECK(static_cast<int>(event_type::gid_change) == IBV_EVENT_GID_CHANGE);
    CHECK(static_cast<int>(event_type::wq_fatal) == IBV_EVENT_WQ_FATAL);
    CHECK(static_cast<int>(event_type::device_fatal) == IBV_EVENT_DEVICE_FATAL);
}

TEST_CASE("an event acks exactly once, whichever way it ends", "[async_event]") {
    rdma_asio::test::fake_cq cq;
    ibv_async_event raw = raw_event(IBV_EVENT_CQ_ERR);
    raw.element.cq = &cq.cq;

    SECTION("destroyed") {
        {
            async_event ev(raw);
            CHECK(ev.needs_ack());
        }
        CHECK(cq.acks() == 1);
    }
    SECTION("acked early, then destroyed") {
        {
            async_event ev(raw);
            ev.ack();
            CHECK(cq.acks() == 1);
            CHECK_FALSE(ev.needs_ack());
            ev.ack();
        }
        CHECK(cq.acks() == 1);
    }
    SECTION("moved, twice") {
        {
            async_event a(raw);
            async_event b(std::move(a));
            CHECK_FALSE(a.needs_ack());
            CHECK_FALSE(static_cast<bool>(a));
            async_event c;
            c = std::move(b);
            CHECK(c.cq() == &cq.cq);
        }
        CHECK(cq.acks() == 1);
    }
    SECTION("assigned over") {
        async_event ev(raw);
        ev = async_event(raw);
        CHECK(cq.acks() == 1);
        ev = async_event();
        CHECK(cq.acks() == 2);
    }
    SECTION("released: the caller acks") {
        ibv_async_event out;
        {
            async_event ev(raw);
            out = ev.release();
        }
        CHECK(cq.acks() == 0);
        ibv_ack_async_event(&out);
        CHECK(cq.acks() == 1);
    }
}

TEST_CASE("an event exposes only the element its type names", "[async_event]") {
    rdma_asio::test::fake_qp qp;
    ibv_async_event raw = raw_event(IBV_EVENT_SQ_DRAINED);
    raw.element.qp = &qp.qp;
    async_event ev(raw);
    CHECK(ev.type() == event_type::sq_drained);
    CHECK(ev.name() == "IBV_EVENT_SQ_DRAINED");
    CHECK(ev.qp() == &qp.qp);
    CHECK(ev.object() == &qp.qp);
    CHECK(ev.cq() == nullptr);
    CHECK(ev.srq() == nullptr);
    CHECK(ev.port_num() == 0);

    ibv_async_event port = raw_event(IBV_EVENT_PORT_ERR);
    port.element.port_num = 1;
    async_event pe(port);
    CHECK(pe.port_num() == 1);
    CHECK(pe.object() == nullptr);
    CHECK(pe.qp() == nullptr);

    async_event empty;
    CHECK_FALSE(static_cast<bool>(empty));
    CHECK(empty.object() == nullptr);
    CHECK_FALSE(empty.needs_ack());
}

TEST_CASE("event_match selects by type, object and port", "[async_event]") {
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
