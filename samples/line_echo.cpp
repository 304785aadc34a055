// line_echo: a line echo service over rdma_asio::stream, written as an Asio TCP
// one would be (asio::async_read_until, asio::async_write), and its client.
//
//   line_echo [-a ADDR] [-p PORT]             serve: echo every line of every
//                                             connection
//   line_echo -c ADDR [-p PORT] LINE...       send each LINE, print each echo
//
// docs/stream.md starts with the server part below.

// snippet-begin: line-echo
#include <rdma_asio/asio.hpp> // the Asio rdma_asio was built for, standalone or Boost
#include <rdma_asio/stream.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif

#include <cstdio>
#include <string>

// Echoes every line until the peer ends the stream (the read throws eof).
asio::awaitable<void> echo_lines(rdma_asio::stream s) {
    std::string data;
    for (;;) {
        const std::size_t n = co_await asio::async_read_until(s, asio::dynamic_buffer(data), '\n',
                                                              asio::use_awaitable);
        co_await asio::async_write(s, asio::buffer(data, n), asio::use_awaitable);
        data.erase(0, n);
    }
}

// Accepts streams for ever, a coroutine each.
asio::awaitable<void> serve(rdma_asio::acceptor& acceptor) {
    for (;;) {
        rdma_asio::stream s(acceptor.get_executor());
        co_await rdma_asio::async_accept(acceptor, s, asio::use_awaitable);
        asio::co_spawn(acceptor.get_executor(), echo_lines(std::move(s)), asio::detached);
    }
}

// Serves on `address` (one of an RDMA device's IP addresses) and `port`.
void run_server(const std::string& address, unsigned short port) {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, {asio::ip::make_address(address), port});
    std::printf("listening on %s port %u\n", address.c_str(), acceptor.local_endpoint().port());
    asio::co_spawn(ioc, serve(acceptor), asio::detached);
    ioc.run();
}
// snippet-end

#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <vector>

namespace {

// snippet-begin: line-echo-client
// Sends each line and prints what comes back.
asio::awaitable<void> send_lines(asio::ip::tcp::endpoint server, std::vector<std::string> lines) {
    rdma_asio::stream s(co_await asio::this_coro::executor);
    co_await rdma_asio::async_connect(s, server, asio::use_awaitable);
    std::string data;
    for (const std::string& line : lines) {
        co_await asio::async_write(s, asio::buffer(line + "\n"), asio::use_awaitable);
        const std::size_t n = co_await asio::async_read_until(s, asio::dynamic_buffer(data), '\n',
                                                              asio::use_awaitable);
        std::printf("%s", data.substr(0, n).c_str());
        data.erase(0, n);
    }
    s.shutdown();
}
// snippet-end

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::string address = "0.0.0.0", server;
    unsigned short port = 18900;
    sample::command_line cli("line_echo",
                             "Echo lines over an rdma_asio::stream, or (-c) send lines to one.",
                             "[LINE...]");
    cli.option('a', "address", "ADDR", "listen on ADDR (default 0.0.0.0)", address);
    cli.option('c', "connect", "ADDR", "send the LINEs to the server at ADDR", server);
    cli.number('p', "port", "PORT", "the port (default 18900)", port);
    const std::vector<std::string> lines = cli.parse(argc, argv, 0, 1000);
    if (server.empty() && !lines.empty())
        cli.usage_error("LINEs are for the client (-c ADDR)");
    if (!sample::require_rdma("line_echo"))
        return 1;
    try {
        if (!server.empty()) {
            asio::io_context ioc;
            const asio::ip::tcp::endpoint at(asio::ip::make_address(server), port);
            asio::co_spawn(ioc, send_lines(at, lines), [](std::exception_ptr e) {
                if (e)
                    std::rethrow_exception(e);
            });
            ioc.run();
            return 0;
        }
        run_server(address, port);
    } catch (const std::exception& e) { // rdma_asio::system_error names the call
        std::fprintf(stderr, "line_echo: %s\n", e.what());
        return 1;
    }
}
