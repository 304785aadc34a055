// Boost.Beast's HTTP/1.1 over rdma_asio::stream, with the Boost.Asio flavour
// only (Beast is written against Boost.Asio): a server and a client over rxe0
// loopback (10.0.0.1 in the test VM), http::async_read and http::async_write on
// both sides, 1 000 requests (200 under a sanitizer) on 4 kept-alive connections, with request and
// response bodies from 0 to 1 MiB. Each body is a slice of random bytes that its
// reader finds again from the request's number, so every byte is checked where
// it arrives (with memcmp: the Boost trees are built without optimisation).
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#if RDMA_ASIO_USE_BOOST_ASIO

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <catch2/catch.hpp>

#include "message_sizes.hpp"
#include "rxe_counters.hpp"
#include "rxe_loopback.hpp"
#include "sanitized_build.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

namespace http = boost::beast::http;
using body_bytes = http::vector_body<std::uint8_t>;
using rdma_asio::test::message_bodies;

struct http_tally {
    std::size_t verified = 0;
    std::vector<std::uint32_t> wrong; // request numbers whose body was not as sent
    std::size_t bytes = 0;
};

// Answers requests until the client's shutdown: each request's body checked
// against the pattern of its number (x-request), answered with a body of the
// size it asks for (x-response-size).
asio::awaitable<void> http_server(rdma_asio::acceptor& acceptor, const message_bodies& bodies,
                                  http_tally& tally) {
    rdma_asio::stream s(acceptor.get_executor());
    co_await rdma_asio::async_accept(acceptor, s, asio::use_awaitable);
    boost::beast::flat_buffer buffer;
    for (;;) {
        http::request<body_bytes> req;
        auto [ec, n] = co_await http::async_read(s, buffer, req, rdma_asio::test::with_error);
        if (ec == http::error::end_of_stream)
            break;
        if (ec)
            throw rdma_asio::system_error(ec, "http::async_read of a request");
        const auto number = std::uint32_t(std::stoul(std::string(req["x-request"])));
        tally.bytes += req.body().size();
        if (req.body() == bodies.request(number, req.body().size()))
            ++tally.verified;
        else
            tally.wrong.push_back(number);
        http::response<body_bytes> res(http::status::ok, req.version());
        res.set("x-request", std::to_string(number));
        res.body() = bodies.response(number, std::stoul(std::string(req["x-response-size"])));
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        co_await http::async_write(s, res, asio::use_awaitable);
    }
    s.shutdown();
}

// Sends requests first .. first + count - 1 on one connection, one after
// another, and checks each response; then shuts down and reads the server's eof.
asio::awaitable<void> http_client(std::uint16_t port, std::uint32_t first, std::uint32_t count,
                                  const std::vector<std::size_t>& sizes,
                                  const message_bodies& bodies, http_tally& tally,
                                  rdma_asio::error_code& end) {
    rdma_asio::stream s(co_await asio::this_coro::executor);
    co_await rdma_asio::async_connect(s, rdma_asio::test::rxe0_endpoint(port), asio::use_awaitable);
    boost::beast::flat_buffer buffer;
    for (std::uint32_t number = first; number < first + count; ++number) {
        const std::size_t response_size = sizes[sizes.size() - 1 - number];
        http::request<body_bytes> req(http::verb::post, "/echo", 11);
        req.set(http::field::host, "10.0.0.1");
        req.set("x-request", std::to_string(number));
        req.set("x-response-size", std::to_string(response_size));
        req.body() = bodies.request(number, sizes[number]);
        req.prepare_payload();
        co_await http::async_write(s, req, asio::use_awaitable);
        http::response<body_bytes> res;
        co_await http::async_read(s, buffer, res, asio::use_awaitable);
        tally.bytes += res.body().size();
        if (res.result() == http::status::ok && res["x-request"] == std::to_string(number) &&
            res.body() == bodies.response(number, response_size))
            ++tally.verified;
        else
            tally.wrong.push_back(number);
    }
    s.shutdown();
    char byte;
    auto [ec, n] = co_await s.async_read_some(asio::buffer(&byte, 1), rdma_asio::test::with_error);
    end = ec;
}

} // namespace

// Under a sanitizer (the test command's Boost.Asio 1.81 tree, unoptimised), 200
// requests: every edge size and 189 spread ones, a fifth of the bytes; 1 000 took
// that tree about 6 minutes in the emulated guest, near the run's bound.
TEST_CASE("Boost.Beast's HTTP/1.1 over streams: 1000 requests (200 under a sanitizer) on 4 "
          "connections, bodies from 0 to 1 MiB each way, every byte checked",
          "[stream][beast]") {
    using namespace std::chrono_literals;
    using namespace asio::experimental::awaitable_operators;
    constexpr std::uint32_t requests = rdma_asio::test::sanitized_build ? 200 : 1000;
    constexpr std::uint32_t connections = 4;
    constexpr std::uint16_t port = 18910;
    const auto sizes = rdma_asio::test::message_sizes(requests);
    const message_bodies bodies;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rdma_asio::test::rxe0_endpoint(port));
    http_tally server, client;
    std::vector<rdma_asio::error_code> ends(connections);
    const auto rnr_before = rdma_asio::test::rxe0_counter("send_rnr_err");
    const std::uint32_t share = requests / connections;
    rdma_asio::test::run_pair(
        ioc,
        http_server(acceptor, bodies, server) && http_server(acceptor, bodies, server) &&
            http_server(acceptor, bodies, server) && http_server(acceptor, bodies, server),
        http_client(port, 0 * share, share, sizes, bodies, client, ends[0]) &&
            http_client(port, 1 * share, share, sizes, bodies, client, ends[1]) &&
            http_client(port, 2 * share, share, sizes, bodies, client, ends[2]) &&
            http_client(port, 3 * share, share, sizes, bodies, client, ends[3]),
        600s);
    INFO("request bytes " << server.bytes << ", response bytes " << client.bytes);
    CHECK(server.wrong.empty());
    CHECK(client.wrong.empty());
    CHECK(server.verified == requests);
    CHECK(client.verified == requests);
    for (const auto& end : ends)
        CHECK(end == asio::error::eof);
    // Each side moved the sum of the sizes: the same list, read both ways.
    std::size_t total = 0;
    for (auto size : sizes)
        total += size;
    CHECK(server.bytes == total);
    CHECK(client.bytes == total);
    CHECK(rdma_asio::test::rxe0_counter("send_rnr_err") == rnr_before);
}

#endif
