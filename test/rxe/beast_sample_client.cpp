// The client the tests of the Beast samples run against them (Boost.Asio flavour
// only), over rdma_asio::stream, or with --tcp over Asio's TCP socket (for the
// samples' TCP forms):
//
//   beast_sample_client [--tcp] http ADDR PORT TARGET...   GET each TARGET on one
//                                                         kept-alive connection,
//                                                         print each body
//   beast_sample_client [--tcp] ws ADDR PORT MESSAGE...    send each MESSAGE as a text
//                                                         message, print each echo on
//                                                         a line; then close
//
// Exit status 0 when every answer came (and, for HTTP, was 200), 1 otherwise, with
// the error; 2 for bad usage.
#include <rdma_asio/beast.hpp>

#include "asio_alias.hpp"

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;

namespace {

using tcp = asio::ip::tcp;

// A connected Socket: an rdma_asio::stream or a TCP socket.
template <class Socket>
asio::awaitable<Socket> connected(const tcp::endpoint& server) {
    Socket s(co_await asio::this_coro::executor);
    if constexpr (std::is_same_v<Socket, tcp::socket>)
        co_await s.async_connect(server, asio::use_awaitable);
    else
        co_await rdma_asio::async_connect(s, server, asio::use_awaitable);
    co_return s;
}

template <class Socket>
asio::awaitable<void> get_each(tcp::endpoint server, std::vector<std::string> targets) {
    Socket s = co_await connected<Socket>(server);
    boost::beast::flat_buffer buffer;
    for (const std::string& target : targets) {
        http::request<http::empty_body> req(http::verb::get, target, 11);
        req.set(http::field::host, server.address().to_string());
        co_await http::async_write(s, req, asio::use_awaitable);
        http::response<http::string_body> res;
        co_await http::async_read(s, buffer, res, asio::use_awaitable);
        if (res.result() != http::status::ok)
            throw std::runtime_error("GET " + target + ": status " +
                                     std::to_string(res.result_int()));
        std::printf("%s", res.body().c_str());
    }
    s.shutdown(asio::socket_base::shutdown_send);
}

template <class Socket>
asio::awaitable<void> echo_each(tcp::endpoint server, std::vector<std::string> messages) {
    websocket::stream<Socket> ws(co_await connected<Socket>(server));
    co_await ws.async_handshake(server.address().to_string(), "/", asio::use_awaitable);
    boost::beast::flat_buffer buffer;
    for (const std::string& message : messages) {
        co_await ws.async_write(asio::buffer(message), asio::use_awaitable);
        co_await ws.async_read(buffer, asio::use_awaitable);
        std::printf("%s\n", boost::beast::buffers_to_string(buffer.data()).c_str());
        buffer.consume(buffer.size());
    }
    co_await ws.async_close(websocket::close_code::normal, asio::use_awaitable);
}

template <class Socket>
asio::awaitable<void> run(const std::string& mode, tcp::endpoint server,
                          std::vector<std::string> words) {
    if (mode == "http")
        co_await get_each<Socket>(server, std::move(words));
    else
        co_await echo_each<Socket>(server, std::move(words));
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool over_tcp = argc > 1 && std::string(argv[1]) == "--tcp";
    argv += over_tcp;
    argc -= over_tcp;
    const std::string mode = argc > 1 ? argv[1] : "";
    if (argc < 5 || (mode != "http" && mode != "ws")) {
        std::fprintf(stderr, "usage: beast_sample_client [--tcp] http|ws ADDR PORT WORD...\n");
        return 2;
    }
    try {
        asio::io_context ioc;
        const tcp::endpoint server(asio::ip::make_address(argv[2]),
                                   static_cast<unsigned short>(std::stoul(argv[3])));
        std::vector<std::string> words(argv + 4, argv + argc);
        auto rethrow = [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        };
        if (over_tcp)
            asio::co_spawn(ioc, run<tcp::socket>(mode, server, std::move(words)), rethrow);
        else
            asio::co_spawn(ioc, run<rdma_asio::stream>(mode, server, std::move(words)), rethrow);
        ioc.run();
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "beast_sample_client: %s\n", e.what());
        return 1;
    }
}
