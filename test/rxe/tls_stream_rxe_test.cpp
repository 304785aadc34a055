// TLS over rdma_asio::stream: asio::ssl::stream<rdma_asio::stream> with
// OpenSSL, a handshake and 1 MiB each way, every byte checked, over rxe0
// loopback (10.0.0.1 in the test VM), with the test certificate of
// tls_test_contexts.hpp.
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include "rxe_loopback.hpp"
#include "tls_test_contexts.hpp"

#include <cstdint>
#include <string>
#include <vector>

TEST_CASE("TLS over a stream: asio::ssl::stream<rdma_asio::stream> does its handshake and "
          "carries 1 MiB each way",
          "[stream][tls]") {
    using namespace std::chrono_literals;
    using asio::use_awaitable;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rdma_asio::test::rxe0_endpoint(18882));
    asio::ssl::context server_ctx = rdma_asio::test::tls_server_context();
    asio::ssl::context client_ctx = rdma_asio::test::tls_client_context();
    const std::size_t size = 1 << 20;
    const auto to_client = rdma_asio::test::byte_pattern(size, 3),
               to_server = rdma_asio::test::byte_pattern(size, 4);
    std::vector<std::uint8_t> at_client(size), at_server(size);
    rdma_asio::test::run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_accept(acceptor, s, use_awaitable);
            asio::ssl::stream<rdma_asio::stream> tls(std::move(s), server_ctx);
            co_await tls.async_handshake(asio::ssl::stream_base::server, use_awaitable);
            co_await asio::async_read(tls, asio::buffer(at_server), use_awaitable);
            co_await asio::async_write(tls, asio::buffer(to_client), use_awaitable);
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, rdma_asio::test::rxe0_endpoint(18882),
                                              use_awaitable);
            asio::ssl::stream<rdma_asio::stream> tls(std::move(s), client_ctx);
            co_await tls.async_handshake(asio::ssl::stream_base::client, use_awaitable);
            co_await asio::async_write(tls, asio::buffer(to_server), use_awaitable);
            co_await asio::async_read(tls, asio::buffer(at_client), use_awaitable);
        }(),
        120s);
    CHECK(rdma_asio::test::byte_difference(at_server, to_server) == "");
    CHECK(rdma_asio::test::byte_difference(at_client, to_client) == "");
}
