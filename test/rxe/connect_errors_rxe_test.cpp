// async_connect's errors name the step that failed, on rxe0 in the test VM
// (veth0 10.0.0.1 with rxe0, veth1 10.0.0.2 with no RDMA device): an address
// nobody has on rxe0's network (10.0.0.99: nothing answers ARP), an address no
// RDMA device's network reaches (192.0.2.1: no route; 10.0.0.2: veth1's), for a
// connection and for a stream, by endpoint, by a list and by host and service;
// and what connect_diagnostics then holds: each address, its step, its error.
// Before: "Connection timed out" (ETIMEDOUT) and "Network is unreachable"
// (ENETUNREACH), neither naming the step.
#include <rdma_asio/connect.hpp>
#include <rdma_asio/error.hpp>
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include "rxe_loopback.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

using namespace std::chrono_literals;
using rdma_asio::errc;
using tcp = asio::ip::tcp;

namespace {

using rdma_asio::test::with_error;

tcp::endpoint at(const char* address, std::uint16_t port) {
    return {asio::ip::make_address(address), port};
}

struct attempt {
    rdma_asio::error_code ec;
    bool open = true;
    std::chrono::steady_clock::duration took{};
    rdma_asio::connect_diagnostics diagnostics;
};

// async_connect(ex, endpoint) with a resolve_timeout of 1 s, run for at most 30 s.
attempt connection_to(const tcp::endpoint& endpoint) {
    asio::io_context ioc;
    rdma_asio::connect_diagnostics diagnostics;
    rdma_asio::connect_options options;
    options.resolve_timeout = 1s;
    options.diagnostics = &diagnostics;
    const auto start = std::chrono::steady_clock::now();
    auto [ec, conn] = rdma_asio::test::run_coroutine(
        ioc,
        [&]() -> asio::awaitable<std::tuple<rdma_asio::error_code, rdma_asio::connection>> {
            co_return co_await rdma_asio::async_connect(ioc.get_executor(), endpoint, options,
                                                        with_error);
        }(),
        30s);
    return {ec, conn.is_open(), std::chrono::steady_clock::now() - start, diagnostics};
}

} // namespace

TEST_CASE("async_connect to an address nobody has on the device's network ends with "
          "address_timeout within resolve_timeout, naming rdma_resolve_addr",
          "[connect_errors]") {
    const attempt r = connection_to(at("10.0.0.99", 18894));
    CAPTURE(r.ec.message());
    CHECK(r.ec == errc::address_timeout);
    CHECK(r.ec == std::errc::timed_out); // as a TCP connect's timeout compares
    CHECK(r.ec.message().find("rdma_resolve_addr") != std::string::npos);
    CHECK(r.ec.message().find("no host answered") != std::string::npos);
    CHECK_FALSE(r.open);
    CHECK(r.took < 10s);
    // The diagnostics name the address and the step the error code cannot.
    REQUIRE(r.diagnostics.failures().size() == 1);
    CHECK(r.diagnostics.failures()[0].endpoint == at("10.0.0.99", 18894));
    CHECK(r.diagnostics.failures()[0].step == rdma_asio::connect_step::resolve_address);
    CHECK(r.diagnostics.failures()[0].error == r.ec);
    CHECK(r.diagnostics.message() ==
          "10.0.0.99 port 18894: " + r.ec.message()); // "... resolving the address timed out"
}

TEST_CASE("async_connect to an address no RDMA device's network reaches ends with "
          "address_error at once, naming rdma_resolve_addr and how to look",
          "[connect_errors]") {
    for (const char* address : {"192.0.2.1", "10.0.0.2"}) {
        const attempt r = connection_to(at(address, 18894));
        CAPTURE(address, r.ec.message());
        CHECK(r.ec == errc::address_error);
        CHECK(r.ec.message().find("rdma_resolve_addr") != std::string::npos);
        CHECK(r.ec.message().find("ip route get") != std::string::npos);
        CHECK_FALSE(r.open);
        CHECK(r.took < 1s); // not the resolve timeout: the kernel knows at once
        CHECK(r.diagnostics.message() == std::string(address) + " port 18894: " + r.ec.message());
    }
}

TEST_CASE("a stream's connects report the step too: the last address's over a list, and a "
          "host and service",
          "[connect_errors]") {
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    rdma_asio::connect_diagnostics diagnostics;
    rdma_asio::connect_options options;
    options.resolve_timeout = 1s;
    options.diagnostics = &diagnostics;
    const std::array endpoints{at("10.0.0.99", 18895), at("192.0.2.1", 18895)};
    auto [list_ec, connected_to] = rdma_asio::test::run_coroutine(
        ioc, rdma_asio::async_connect(s, endpoints, options, with_error), 30s);
    CAPTURE(list_ec.message());
    CHECK(list_ec == errc::address_error); // 192.0.2.1's, the last tried
    CHECK(connected_to == tcp::endpoint());
    CHECK_FALSE(s.is_open());
    // Every address tried, in order, each with its own step and error.
    REQUIRE(diagnostics.failures().size() == 2);
    CHECK(diagnostics.failures()[0].endpoint == endpoints[0]);
    CHECK(diagnostics.failures()[0].error == errc::address_timeout);
    CHECK(diagnostics.failures()[1].endpoint == endpoints[1]);
    CHECK(diagnostics.failures()[1].error == errc::address_error);
    CHECK(diagnostics.host().empty());

    auto [named_ec] = rdma_asio::test::run_coroutine(
        ioc, rdma_asio::async_connect(s, "10.0.0.99", "18895", options, with_error), 30s);
    CAPTURE(named_ec.message());
    CHECK(named_ec == errc::address_timeout);
    CHECK_FALSE(s.is_open());
    // Emptied as the second connect started: its own failure only, and its host.
    REQUIRE(diagnostics.failures().size() == 1);
    CHECK(diagnostics.failures()[0].endpoint == at("10.0.0.99", 18895));
    CHECK(diagnostics.host() == "10.0.0.99");
    CHECK(diagnostics.service() == "18895");
}

namespace {

struct reported {
    rdma_asio::error_code ec;
    rdma_asio::connect_diagnostics diagnostics;
};

// A connect whose host and service do not resolve, reported as a program would.
asio::awaitable<reported> connect_and_report(rdma_asio::stream& s) {
    // snippet-begin: connect-diagnostics
    rdma_asio::connect_diagnostics diagnostics;
    rdma_asio::connect_options options;
    options.diagnostics = &diagnostics; // read after the connect completes
    rdma_asio::error_code ec;
    co_await rdma_asio::async_connect(s, "10.0.0.1", "no-such-service", options,
                                      asio::redirect_error(asio::use_awaitable, ec));
    if (ec) // one line per address tried: the address, its step, the error
        std::fprintf(stderr, "connect failed:\n%s\n", diagnostics.message().c_str());
    // snippet-end
    co_return reported{ec, diagnostics};
}

} // namespace

TEST_CASE("a host and service that do not resolve are the lookup's failure in the "
          "diagnostics, with the resolver's error",
          "[connect_errors]") {
    // A service name /etc/services does not have: the lookup fails on this host,
    // asking no name server.
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    const reported r = rdma_asio::test::run_coroutine(ioc, connect_and_report(s), 30s);
    CAPTURE(r.ec.message());
    CHECK(r.ec == asio::error::service_not_found);
    CHECK_FALSE(s.is_open());
    REQUIRE(r.diagnostics.failures().size() == 1);
    CHECK(r.diagnostics.failures()[0].step == rdma_asio::connect_step::resolve_host);
    CHECK(r.diagnostics.failures()[0].error == r.ec);
    CHECK(r.diagnostics.message() ==
          "looking up the host 10.0.0.1, service no-such-service: " + r.ec.message());
}
