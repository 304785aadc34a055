// async_connect's errors name the step that failed, on rxe0 in the test VM
// (veth0 10.0.0.1 with rxe0, veth1 10.0.0.2 with no RDMA device): an address
// nobody has on rxe0's network (10.0.0.99: nothing answers ARP), an address no
// RDMA device's network reaches (192.0.2.1: no route; 10.0.0.2: veth1's), for a
// connection and for a stream, by endpoint, by a list and by host and service.
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
};

// async_connect(ex, endpoint) with a resolve_timeout of 1 s, run for at most 30 s.
attempt connection_to(const tcp::endpoint& endpoint) {
    asio::io_context ioc;
    rdma_asio::connect_options options;
    options.resolve_timeout = 1s;
    const auto start = std::chrono::steady_clock::now();
    auto [ec, conn] = rdma_asio::test::run_coroutine(
        ioc,
        [&]() -> asio::awaitable<std::tuple<rdma_asio::error_code, rdma_asio::connection>> {
            co_return co_await rdma_asio::async_connect(ioc.get_executor(), endpoint, options,
                                                        with_error);
        }(),
        30s);
    return {ec, conn.is_open(), std::chrono::steady_clock::now() - start};
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
    }
}

TEST_CASE("a stream's connects report the step too: the last address's over a list, and a "
          "host and service",
          "[connect_errors]") {
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    rdma_asio::connect_options options;
    options.resolve_timeout = 1s;
    const std::array endpoints{at("10.0.0.99", 18895), at("192.0.2.1", 18895)};
    auto [list_ec, connected_to] = rdma_asio::test::run_coroutine(
        ioc, rdma_asio::async_connect(s, endpoints, options, with_error), 30s);
    CAPTURE(list_ec.message());
    CHECK(list_ec == errc::address_error); // 192.0.2.1's, the last tried
    CHECK(connected_to == tcp::endpoint());
    CHECK_FALSE(s.is_open());

    auto [named_ec] = rdma_asio::test::run_coroutine(
        ioc, rdma_asio::async_connect(s, "10.0.0.99", "18895", options, with_error), 30s);
    CAPTURE(named_ec.message());
    CHECK(named_ec == errc::address_timeout);
    CHECK_FALSE(s.is_open());
}
