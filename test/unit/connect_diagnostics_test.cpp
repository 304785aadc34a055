// connect_diagnostics: what a program reads after a failed connect. The connect's
// own writing is tested in the VM (test/rxe/connect_errors_rxe_test.cpp); here,
// the messages the object makes of what it holds, and when a connect empties it
// (a host name's failed lookup needs no device).
#include <rdma_asio/connect_diagnostics.hpp>

#include <rdma_asio/connect.hpp>
#include <rdma_asio/detail/cm/connect_diagnostics_access.hpp>
#include <rdma_asio/detail/core/throw_error.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>

using rdma_asio::connect_step;
using notes = rdma_asio::detail::connect_diagnostics_access;
using tcp = asio::ip::tcp;

TEST_CASE("connect_diagnostics names each address, its port and its step, one line each, the "
          "step once",
          "[connect_diagnostics]") {
    rdma_asio::connect_diagnostics d;
    CHECK(d.failures().empty());
    CHECK(d.message().empty());

    notes::add(&d, connect_step::resolve_address, {asio::ip::make_address("10.0.0.99"), 7000},
               make_error_code(rdma_asio::errc::address_timeout));
    notes::add(&d, connect_step::connect, {asio::ip::make_address("fe80::1"), 7001},
               make_error_code(rdma_asio::errc::connection_rejected));
    notes::add(&d, connect_step::make_connection, {asio::ip::make_address("10.0.0.1"), 7002},
               rdma_asio::detail::errno_code(ENOMEM));
    REQUIRE(d.failures().size() == 3);
    CHECK(d.failures()[0].step == connect_step::resolve_address);
    CHECK(d.failures()[1].endpoint.port() == 7001);
    // The step's own errors name it in their message; an errno's does not.
    const std::string expected =
        "10.0.0.99 port 7000: " + make_error_code(rdma_asio::errc::address_timeout).message() +
        "\nfe80::1 port 7001: " + make_error_code(rdma_asio::errc::connection_rejected).message() +
        "\n10.0.0.1 port 7002: making the connection: " +
        rdma_asio::detail::errno_code(ENOMEM).message();
    CHECK(d.message() == expected);

    d.clear();
    CHECK(d.failures().empty());
    CHECK(d.message().empty());
}

TEST_CASE("connect_diagnostics names the host and service of a lookup that failed",
          "[connect_diagnostics]") {
    rdma_asio::connect_diagnostics d;
    notes::looking_up(&d, "kvhost", "7000");
    notes::add(&d, connect_step::resolve_host, {}, asio::error::host_not_found);
    CHECK(d.host() == "kvhost");
    CHECK(d.service() == "7000");
    CHECK(d.message() == "looking up the host kvhost, service 7000: " +
                             rdma_asio::error_code(asio::error::host_not_found).message());
    d.clear();
    CHECK(d.host().empty());
}

TEST_CASE("every step has a name a message can use", "[connect_diagnostics]") {
    CHECK(rdma_asio::to_string(connect_step::resolve_host) == "looking up the host");
    CHECK(rdma_asio::to_string(connect_step::resolve_address) == "resolving the address");
    CHECK(rdma_asio::to_string(connect_step::resolve_route) == "resolving the route");
    CHECK(rdma_asio::to_string(connect_step::make_connection) == "making the connection");
    CHECK(rdma_asio::to_string(connect_step::connect) == "connecting");
}

TEST_CASE("a connect given no diagnostics notes nothing and does not fail",
          "[connect_diagnostics]") {
    notes::clear(nullptr);
    notes::looking_up(nullptr, "h", "s");
    notes::add(nullptr, connect_step::connect, {}, asio::error::host_not_found);
    SUCCEED("nothing to write into, nothing written");
}

TEST_CASE("a connect empties its diagnostics as it is launched, not as it is made, and notes a "
          "host name's failed lookup",
          "[connect_diagnostics]") {
    asio::io_context ioc;
    rdma_asio::connect_diagnostics d;
    notes::add(&d, connect_step::connect, {asio::ip::make_address("10.0.0.7"), 1},
               asio::error::host_not_found); // an earlier connect's
    rdma_asio::connect_options options;
    options.diagnostics = &d;
    // A numeric host, so that no name server is asked: the service fails to resolve.
    auto op = rdma_asio::async_connect(ioc.get_executor(), "127.0.0.1", "no-such-service-rdma-asio",
                                       options, asio::experimental::deferred);
    CHECK(d.failures().size() == 1); // made, not launched: untouched
    std::optional<rdma_asio::error_code> got;
    std::move(op)([&](rdma_asio::error_code ec, rdma_asio::connection) { got = ec; });
    ioc.run_for(std::chrono::seconds(10));
    REQUIRE(got);
    CHECK(*got == asio::error::service_not_found);
    REQUIRE(d.failures().size() == 1);
    CHECK(d.failures()[0].step == connect_step::resolve_host);
    CHECK(d.failures()[0].error == *got);
    CHECK(d.host() == "127.0.0.1");
    CHECK(d.service() == "no-such-service-rdma-asio");
}
