#include "rdma_asio/async_event.hpp"

#include <catch2/catch.hpp>

#include "fake_kernel.hpp"

#include "asio_alias.hpp"

#include <string>
#include <system_error>

namespace async_event_test {

using rdma_asio::async_event;
using rdma_asio::event_type;

using rdma_asio::test::raw_event;

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

TEST_CASE("native_handle() is the event as libibverbs returned it", "[async_event]") {
    rdma_asio::test::fake_qp qp;
    ibv_async_event raw = raw_event(IBV_EVENT_COMM_EST);
    raw.element.qp = &qp.qp;
    async_event ev(raw);
    CHECK(ev.native_handle().event_type == IBV_EVENT_COMM_EST);
    CHECK(ev.native_handle().element.qp == &qp.qp);

    // A released event keeps its contents; only the ack left with the result.
    ibv_async_event out = ev.release();
    CHECK(out.element.qp == &qp.qp);
    CHECK(ev.type() == event_type::comm_est);
    CHECK(ev.qp() == &qp.qp);
    CHECK_FALSE(ev.needs_ack());
    ibv_ack_async_event(&out);
    CHECK(qp.acks() == 1);

    // Subnet and removal events carry their type in type(), their port in the struct.
    async_event removal(event_type::device_removed, 0, ibv_gid{});
    CHECK(removal.type() == event_type::device_removed);
    CHECK_FALSE(removal.needs_ack());
}

TEST_CASE("misuse: an empty async_event has no type and reports EINVAL naming the call",
          "[async_event][misuse]") {
    rdma_asio::test::fake_cq cq;
    ibv_async_event raw = raw_event(IBV_EVENT_CQ_ERR);
    raw.element.cq = &cq.cq;
    async_event taken(raw);
    async_event moved_to(std::move(taken));
    async_event empty;
    for (const async_event* ev : {&empty, &taken}) {
        CHECK_FALSE(static_cast<bool>(*ev));
        // Its raw fields are zero, which is IBV_EVENT_CQ_ERR: it must not say so.
        CHECK(ev->name() == "none");
        try {
            (void)ev->type();
            FAIL("type() of an empty event returned");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK(std::string(e.what()).find("rdma_asio::async_event::type") != std::string::npos);
        }
        try {
            (void)ev->element();
            FAIL("element() of an empty event returned");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK(std::string(e.what()).find("rdma_asio::async_event::element") !=
                  std::string::npos);
        }
        CHECK(ev->cq() == nullptr);
        CHECK(ev->object() == nullptr);
        CHECK(ev->port_num() == 0);
        CHECK_FALSE(ev->needs_ack());
    }
    CHECK(moved_to.name() == "IBV_EVENT_CQ_ERR");
    CHECK(moved_to.cq() == &cq.cq);
}

} // namespace async_event_test
