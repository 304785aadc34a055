// The client the rxe tests of the Beast samples run against them (Boost.Asio
// flavour only), over rdma_asio::stream:
//
//   beast_sample_client http ADDR PORT TARGET...   GET each TARGET on one kept-alive
//                                                 connection, print each body
//
// Exit status 0 when every answer came (and was 200), 1 otherwise, with the error.
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace http = boost::beast::http;

namespace {

asio::awaitable<void> get_each(asio::ip::tcp::endpoint server, std::vector<std::string> targets) {
    rdma_asio::stream s(co_await asio::this_coro::executor);
    co_await rdma_asio::async_connect(s, server, asio::use_awaitable);
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
    s.shutdown();
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc < 5 || std::string(argv[1]) != "http") {
        std::fprintf(stderr, "usage: beast_sample_client http ADDR PORT TARGET...\n");
        return 2;
    }
    try {
        asio::io_context ioc;
        const asio::ip::tcp::endpoint server(asio::ip::make_address(argv[2]),
                                             static_cast<unsigned short>(std::stoul(argv[3])));
        asio::co_spawn(ioc, get_each(server, {argv + 4, argv + argc}), [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
        ioc.run();
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "beast_sample_client: %s\n", e.what());
        return 1;
    }
}
