// Boost.Beast's websocket over rdma_asio::stream (<rdma_asio/beast.hpp>), with the
// Boost.Asio flavour only: a server that echoes every message and a client over
// rxe0 loopback (10.0.0.1 in the test VM), one connection plain and one over TLS,
// 1 000 messages in all (200 under a sanitizer) of 0 B to 1 MiB, each checked
// byte for byte as it comes back. The closing handshake goes both ways: the client
// closes the plain connection, the server the TLS one; the other side's read ends
// with websocket::error::closed and the close code sent. Before rdma_asio/beast.hpp,
// websocket::stream<rdma_asio::stream> did not compile (no teardown).
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#if RDMA_ASIO_USE_BOOST_ASIO

#include <rdma_asio/beast.hpp>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <catch2/catch.hpp>

#include "message_sizes.hpp"
#include "rxe_loopback.hpp"
#include "sanitized_build.hpp"
#include "tls_test_contexts.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace {

namespace websocket = boost::beast::websocket;
using rdma_asio::test::message_bodies;
using plain_ws = websocket::stream<rdma_asio::stream>;
using tls_ws = websocket::stream<asio::ssl::stream<rdma_asio::stream>>;

// What one side saw.
struct ws_tally {
    std::uint32_t echoed = 0;   // the server: messages read and written back
    std::uint32_t verified = 0; // the client: echoes equal to what it sent
    std::vector<std::uint32_t> wrong;
    std::size_t bytes = 0;
    rdma_asio::error_code end;                     // the read after the last message
    std::optional<websocket::close_code> received; // the close code that read found
    bool layer_open_after = true;                  // the stream under the websocket
};

// The websocket that a stream `s` carries: plain, or over TLS after the handshake.
asio::awaitable<plain_ws>
websocket_over(rdma_asio::stream s, asio::ssl::stream_base::handshake_type, asio::ssl::context*) {
    co_return plain_ws(std::move(s));
}
asio::awaitable<tls_ws> websocket_over(rdma_asio::stream s,
                                       asio::ssl::stream_base::handshake_type as,
                                       asio::ssl::context& ctx) {
    tls_ws ws(std::move(s), ctx);
    co_await ws.next_layer().async_handshake(as, asio::use_awaitable);
    co_return ws;
}

// The end of a connection for the side that does not close: its read ends with
// `closed`, and the peer's close code is kept.
template <class WebSocket>
asio::awaitable<void> read_the_close(WebSocket& ws, boost::beast::flat_buffer& buffer,
                                     ws_tally& tally) {
    auto [ec, n] = co_await ws.async_read(buffer, rdma_asio::test::with_error);
    tally.end = ec;
    tally.received = static_cast<websocket::close_code>(ws.reason().code);
}

// Echoes `count` messages, then closes (`closes`) or reads the client's close.
template <class WebSocket, class Tls>
asio::awaitable<void> echo_server(rdma_asio::acceptor& acceptor, Tls&& tls, std::uint32_t count,
                                  bool closes, ws_tally& tally) {
    rdma_asio::stream s(acceptor.get_executor());
    co_await rdma_asio::async_accept(acceptor, s, asio::use_awaitable);
    WebSocket ws = co_await websocket_over(std::move(s), asio::ssl::stream_base::server,
                                           std::forward<Tls>(tls));
    co_await ws.async_accept(asio::use_awaitable);
    boost::beast::flat_buffer buffer;
    for (std::uint32_t i = 0; i < count; ++i) {
        co_await ws.async_read(buffer, asio::use_awaitable);
        ws.binary(ws.got_binary());
        tally.bytes += buffer.size();
        co_await ws.async_write(buffer.data(), asio::use_awaitable);
        buffer.consume(buffer.size());
        ++tally.echoed;
    }
    if (closes)
        co_await ws.async_close(websocket::close_code::going_away, asio::use_awaitable);
    else
        co_await read_the_close(ws, buffer, tally);
    tally.layer_open_after = boost::beast::get_lowest_layer(ws).is_open();
}

// Sends messages first .. first + count - 1, one after another, each checked as
// it comes back; then closes (`closes`) or reads the server's close.
template <class WebSocket, class Tls>
asio::awaitable<void> echo_client(std::uint16_t port, Tls&& tls, std::uint32_t first,
                                  std::uint32_t count, const std::vector<std::size_t>& sizes,
                                  const message_bodies& bodies, bool closes, ws_tally& tally) {
    rdma_asio::stream s(co_await asio::this_coro::executor);
    co_await rdma_asio::async_connect(s, rdma_asio::test::rxe0_endpoint(port), asio::use_awaitable);
    WebSocket ws = co_await websocket_over(std::move(s), asio::ssl::stream_base::client,
                                           std::forward<Tls>(tls));
    co_await ws.async_handshake("10.0.0.1", "/echo", asio::use_awaitable);
    ws.binary(true);
    boost::beast::flat_buffer buffer;
    for (std::uint32_t number = first; number < first + count; ++number) {
        const std::vector<std::uint8_t> message = bodies.request(number, sizes[number]);
        co_await ws.async_write(asio::buffer(message), asio::use_awaitable);
        co_await ws.async_read(buffer, asio::use_awaitable);
        tally.bytes += buffer.size();
        if (ws.got_binary() && buffer.size() == message.size() &&
            (message.empty() ||
             std::memcmp(buffer.data().data(), message.data(), message.size()) == 0))
            ++tally.verified;
        else
            tally.wrong.push_back(number);
        buffer.consume(buffer.size());
    }
    if (closes)
        co_await ws.async_close(websocket::close_code::normal, asio::use_awaitable);
    else
        co_await read_the_close(ws, buffer, tally);
    tally.layer_open_after = boost::beast::get_lowest_layer(ws).is_open();
}

} // namespace

// Under a sanitizer (the test command's Boost.Asio 1.81 tree, unoptimised), 200
// messages: every edge size and 189 spread ones, as Beast's HTTP test.
TEST_CASE("Boost.Beast's websocket over streams, plain and over TLS: 1000 messages (200 under a "
          "sanitizer) of 0 B to 1 MiB echoed, every byte checked, closing handshakes both ways",
          "[stream][beast]") {
    using namespace std::chrono_literals;
    using namespace asio::experimental::awaitable_operators;
    constexpr std::uint32_t messages = rdma_asio::test::sanitized_build ? 200 : 1000;
    constexpr std::uint32_t plain_count = messages / 2, tls_count = messages - plain_count;
    constexpr std::uint16_t plain_port = 18911, tls_port = 18912;
    const auto sizes = rdma_asio::test::message_sizes(messages);
    const message_bodies bodies;
    asio::io_context ioc;
    rdma_asio::acceptor plain_acceptor(ioc, rdma_asio::test::rxe0_endpoint(plain_port));
    rdma_asio::acceptor tls_acceptor(ioc, rdma_asio::test::rxe0_endpoint(tls_port));
    asio::ssl::context server_ctx = rdma_asio::test::tls_server_context();
    asio::ssl::context client_ctx = rdma_asio::test::tls_client_context();
    ws_tally plain_server, plain_client, tls_server, tls_client;
    asio::ssl::context* no_tls = nullptr;
    rdma_asio::test::run_pair(
        ioc,
        echo_server<plain_ws>(plain_acceptor, no_tls, plain_count, false, plain_server) &&
            echo_server<tls_ws>(tls_acceptor, server_ctx, tls_count, true, tls_server),
        echo_client<plain_ws>(plain_port, no_tls, 0, plain_count, sizes, bodies, true,
                              plain_client) &&
            echo_client<tls_ws>(tls_port, client_ctx, plain_count, tls_count, sizes, bodies, false,
                                tls_client),
        600s);
    std::size_t total = 0;
    for (auto size : sizes)
        total += size;
    INFO("bytes each way " << total);
    CHECK(plain_client.wrong.empty());
    CHECK(tls_client.wrong.empty());
    CHECK(plain_server.echoed == plain_count);
    CHECK(tls_server.echoed == tls_count);
    CHECK(plain_client.verified == plain_count);
    CHECK(tls_client.verified == tls_count);
    CHECK(plain_server.bytes + tls_server.bytes == total);
    CHECK(plain_client.bytes + tls_client.bytes == total);
    // The client closed the plain connection: the server's read ended with closed and
    // the client's code; the streams under both websockets are closed (the teardown).
    CHECK(plain_server.end == websocket::error::closed);
    CHECK(plain_server.received == websocket::close_code::normal);
    CHECK_FALSE(plain_server.layer_open_after);
    CHECK_FALSE(plain_client.layer_open_after);
    // The server closed the TLS one: the client's read ended so, with the server's code.
    CHECK(tls_client.end == websocket::error::closed);
    CHECK(tls_client.received == websocket::close_code::going_away);
}

#endif
