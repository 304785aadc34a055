// coro_echo_server: coro_echo_server_tcp.cpp, Asio's coroutine echo server over
// TCP, changed to RDMA: rdma_asio::stream for the socket and rdma_asio::acceptor
// for the acceptor, four lines in all (docs/from-tcp.md shows them). A client:
// line_echo -c ADDR -p 55555 LINE...
#include "common/asio_alias.hpp" // <asio.hpp> or <boost/asio.hpp>, as rdma_asio was built
#include "common/command_line.hpp"
#include <rdma_asio/stream.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

using asio::awaitable;
using asio::co_spawn;
using asio::detached;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

awaitable<void> echo(rdma_asio::stream socket) {
    try {
        char data[1024];
        for (;;) {
            std::size_t n = co_await socket.async_read_some(asio::buffer(data), use_awaitable);
            co_await asio::async_write(socket, asio::buffer(data, n), use_awaitable);
        }
    } catch (const std::exception& e) {
        std::printf("echo ended: %s\n", e.what()); // "End of file" when the peer is done
    }
}

awaitable<void> listener(tcp::endpoint at) {
    auto executor = co_await asio::this_coro::executor;
    rdma_asio::acceptor acceptor(executor, at);
    std::printf("listening on %s port %u\n", at.address().to_string().c_str(), at.port());
    for (;;) {
        rdma_asio::stream socket = co_await rdma_asio::async_accept(acceptor, use_awaitable);
        co_spawn(executor, echo(std::move(socket)), detached);
    }
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::string program = std::filesystem::path(argv[0]).filename().string();
    std::string address = "0.0.0.0";
    unsigned short port = 55555;
    sample::command_line cli(program, "An echo server with C++20 coroutines: every byte it "
                                      "reads from a connection, it writes back.");
    cli.option('a', "address", "ADDR", "listen on ADDR (default 0.0.0.0: every address)", address);
    cli.number('p', "port", "PORT", "listen on PORT (default 55555)", port);
    cli.parse(argc, argv);
    try {
        asio::io_context io_context(1);
        asio::signal_set signals(io_context, SIGINT, SIGTERM);
        signals.async_wait([&](auto, auto) { io_context.stop(); });
        co_spawn(io_context, listener({asio::ip::make_address(address), port}),
                 [](std::exception_ptr e) {
                     if (e)
                         std::rethrow_exception(e); // out of run(): a listen that failed
                 });
        io_context.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
        return 1;
    }
}
