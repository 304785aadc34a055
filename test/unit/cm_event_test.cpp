#include "rdma_asio/cm_event.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <cerrno>
#include <string>

namespace cm_event_test {

using rdma_asio::cm_event;
using rdma_asio::errc;

namespace {

// An event that was never read from librdmacm: release() it before it goes, so
// nothing acks it.
struct fake_event {
    rdma_cm_event raw{};
    cm_event ev;
    fake_event(rdma_cm_event_type type, int status) {
        raw.event = type;
        raw.status = status;
        ev = cm_event(&raw);
    }
    ~fake_event() { ev.release(); }
};

} // namespace

TEST_CASE("each failing rdma_cm event maps to its own error", "[cm_event]") {
    struct expected {
        rdma_cm_event_type type;
        errc error;
    };
    const expected all[] = {
        {RDMA_CM_EVENT_REJECTED, errc::connection_rejected},
        {RDMA_CM_EVENT_UNREACHABLE, errc::peer_unreachable},
        {RDMA_CM_EVENT_ADDR_ERROR, errc::address_error},
        {RDMA_CM_EVENT_ROUTE_ERROR, errc::route_error},
        {RDMA_CM_EVENT_CONNECT_ERROR, errc::connect_error},
        {RDMA_CM_EVENT_DISCONNECTED, errc::disconnected},
        {RDMA_CM_EVENT_DEVICE_REMOVAL, errc::device_removed},
        {RDMA_CM_EVENT_ADDR_CHANGE, errc::unexpected_cm_event},
    };
    for (const auto& e : all) {
        fake_event f(e.type, 0);
        CAPTURE(f.ev.name());
        CHECK(rdma_asio::error_of(f.ev, RDMA_CM_EVENT_ESTABLISHED) == e.error);
    }
}

TEST_CASE("the expected event is no error, a timed-out one is ETIMEDOUT", "[cm_event]") {
    fake_event established(RDMA_CM_EVENT_ESTABLISHED, 0);
    CHECK_FALSE(rdma_asio::error_of(established.ev, RDMA_CM_EVENT_ESTABLISHED));
    CHECK(established.ev.name() == "RDMA_CM_EVENT_ESTABLISHED");
    fake_event timed_out(RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
    CHECK(rdma_asio::error_of(timed_out.ev, RDMA_CM_EVENT_ADDR_RESOLVED) == asio::error::timed_out);
}

TEST_CASE("a cm_event is a move-only owner of one acknowledgement", "[cm_event]") {
    static_assert(!std::is_copy_constructible_v<cm_event>);
    static_assert(std::is_nothrow_move_constructible_v<cm_event>);
    rdma_cm_event raw{};
    cm_event a(&raw);
    cm_event b = std::move(a);
    CHECK_FALSE(a);
    CHECK(b);
    CHECK(b.release() == &raw); // ownership of the ack left with it
    CHECK_FALSE(b);
    cm_event empty;
    empty.ack(); // nothing to ack: no effect
    CHECK(empty.id() == nullptr);
}

TEST_CASE("misuse: an empty cm_event reports EINVAL naming the call instead of reading nothing",
          "[cm_event][misuse]") {
    cm_event empty;
    cm_event moved_to(std::move(empty));
    for (const cm_event* ev : {&empty, &moved_to}) {
        try {
            (void)ev->type();
            FAIL("type() of an empty event returned");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK(std::string(e.what()).find("rdma_asio::cm_event::type") != std::string::npos);
        }
        try {
            (void)ev->conn_param();
            FAIL("conn_param() of an empty event returned");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK(std::string(e.what()).find("rdma_asio::cm_event::conn_param") !=
                  std::string::npos);
        }
        CHECK(rdma_asio::error_of(*ev, RDMA_CM_EVENT_ESTABLISHED) == asio::error::invalid_argument);
        CHECK(ev->name() == "none");
        CHECK(ev->status() == 0);
        CHECK(ev->listen_id() == nullptr);
        CHECK(ev->native_handle() == nullptr);
    }
}

TEST_CASE("a cm_event speaks async_event's vocabulary", "[cm_event]") {
    CHECK(rdma_asio::to_string(RDMA_CM_EVENT_ESTABLISHED) == "RDMA_CM_EVENT_ESTABLISHED");
    CHECK(rdma_asio::to_string(RDMA_CM_EVENT_CONNECT_REQUEST) == "RDMA_CM_EVENT_CONNECT_REQUEST");
    fake_event f(RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    CHECK(f.ev.needs_ack());
    CHECK(f.ev.native_handle() == &f.raw);
    CHECK(f.ev.name() == rdma_asio::to_string(f.ev.type()));
    cm_event moved(std::move(f.ev));
    CHECK_FALSE(f.ev.needs_ack());
    CHECK(f.ev.native_handle() == nullptr);
    CHECK(moved.release() == &f.raw); // never read from librdmacm: nothing to ack
    CHECK_FALSE(moved.needs_ack());
}

} // namespace cm_event_test
