// coro_echo_server_tcp: an echo server with C++20 coroutines over Asio's TCP
// sockets, in the shape of Asio's own coroutine echo server (examples/cpp20/
// coroutines): a listener coroutine that accepts for ever and an echo coroutine
// per connection. coro_echo_server.cpp is the same program over RDMA;
// docs/from-tcp.md shows the lines that differ.
#include "common/asio_alias.hpp" // <asio.hpp> or <boost/asio.hpp>, as rdma_asio was built
#include "common/command_line.hpp"

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

awaitable<void> echo(tcp::socket socket) {
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
    tcp::acceptor acceptor(executor, at);
    std::printf("listening on %s port %u\n", at.address().to_string().c_str(), at.port());
    for (;;) {
        tcp::socket socket = co_await acceptor.async_accept(use_awaitable);
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
