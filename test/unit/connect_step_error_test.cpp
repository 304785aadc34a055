// What async_connect reports for a failure at each step: the step's own errc for
// the network's answers, anything else kept.
#include <rdma_asio/detail/cm/connect_step_error.hpp>
#include <rdma_asio/detail/core/throw_error.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <cerrno>

using rdma_asio::connect_step;
using rdma_asio::errc;
using rdma_asio::detail::connect_step_error;
using rdma_asio::detail::errno_code;

TEST_CASE("resolving the address: a timeout and a device that cannot reach it differ",
          "[connect_step_error]") {
    const auto step = connect_step::resolve_address;
    CHECK(connect_step_error(step, errno_code(ETIMEDOUT)) == errc::address_timeout);
    for (int e : {ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ENODEV}) {
        CAPTURE(e);
        CHECK(connect_step_error(step, errno_code(e)) == errc::address_error);
    }
    CHECK(connect_step_error(step, make_error_code(errc::address_error)) == errc::address_error);
}

TEST_CASE("resolving the route: every network failure is route_error", "[connect_step_error]") {
    const auto step = connect_step::resolve_route;
    for (int e : {ETIMEDOUT, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ENODEV}) {
        CAPTURE(e);
        CHECK(connect_step_error(step, errno_code(e)) == errc::route_error);
    }
    CHECK(connect_step_error(step, make_error_code(errc::route_error)) == errc::route_error);
}

TEST_CASE("connecting: no answer is connect_timeout, a rejection stays a rejection",
          "[connect_step_error]") {
    const auto step = connect_step::connect;
    CHECK(connect_step_error(step, errno_code(ETIMEDOUT)) == errc::connect_timeout);
    CHECK(connect_step_error(step, make_error_code(errc::peer_unreachable)) ==
          errc::connect_timeout);
    CHECK(connect_step_error(step, make_error_code(errc::connection_rejected)) ==
          errc::connection_rejected);
    CHECK(connect_step_error(step, make_error_code(errc::connect_error)) == errc::connect_error);
}

TEST_CASE("what is not the network's answer is kept at every step", "[connect_step_error]") {
    for (auto step :
         {connect_step::resolve_host, connect_step::resolve_address, connect_step::resolve_route,
          connect_step::make_connection, connect_step::connect}) {
        for (rdma_asio::error_code ec :
             {rdma_asio::error_code(asio::error::operation_aborted), errno_code(ENOMEM),
              errno_code(EMFILE), errno_code(EINVAL), rdma_asio::error_code()}) {
            CAPTURE(static_cast<int>(step), ec.message());
            CHECK(connect_step_error(step, ec) == ec);
        }
    }
    // The connection's own queues failing (ENODEV from a device going) is not the
    // route's fault.
    CHECK(connect_step_error(connect_step::make_connection, errno_code(ENODEV)) ==
          errno_code(ENODEV));
    // The host's lookup is the resolver's: its errors are kept.
    CHECK(connect_step_error(connect_step::resolve_host, asio::error::host_not_found) ==
          asio::error::host_not_found);
}

TEST_CASE("both timeouts compare equal to a TCP timeout", "[connect_step_error]") {
    CHECK(make_error_code(errc::address_timeout) == std::errc::timed_out);
    CHECK(make_error_code(errc::connect_timeout) == std::errc::timed_out);
    CHECK(make_error_code(errc::route_error) == std::errc::host_unreachable);
    CHECK(make_error_code(errc::address_error) == std::errc::address_not_available);
}
