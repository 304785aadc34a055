// websocket_server_async: websocket_server_async_tcp.cpp, Beast's asynchronous
// websocket server over TCP, changed to RDMA: the socket and acceptor types,
// <rdma_asio/beast.hpp> (the stream, and the teardown Beast asks of it) and the
// accept, four lines in all (docs/from-tcp.md shows them). Boost.Asio flavour only.
#include "common/asio_alias.hpp" // <boost/asio.hpp>: rdma_asio built for Boost.Asio
#include "common/command_line.hpp"
#include <rdma_asio/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using socket_type = rdma_asio::stream;
using acceptor_type = rdma_asio::acceptor;

void fail(beast::error_code ec, const char* what) {
    std::fprintf(stderr, "%s: %s\n", what, ec.message().c_str());
}

// One connection: the websocket handshake, then every message echoed.
class session : public std::enable_shared_from_this<session> {
public:
    explicit session(socket_type&& socket) : ws_(std::move(socket)) {}

    void run() {
        // On the connection's strand, where its handlers run.
        asio::dispatch(ws_.get_executor(),
                       beast::bind_front_handler(&session::on_run, shared_from_this()));
    }

private:
    void on_run() {
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.async_accept(beast::bind_front_handler(&session::on_accept, shared_from_this()));
    }

    void on_accept(beast::error_code ec) {
        if (ec)
            return fail(ec, "accept");
        do_read();
    }

    void do_read() {
        ws_.async_read(buffer_, beast::bind_front_handler(&session::on_read, shared_from_this()));
    }

    void on_read(beast::error_code ec, std::size_t) {
        if (ec == websocket::error::closed)
            return; // the peer closed the websocket
        if (ec)
            return fail(ec, "read");
        ws_.text(ws_.got_text());
        ws_.async_write(buffer_.data(),
                        beast::bind_front_handler(&session::on_write, shared_from_this()));
    }

    void on_write(beast::error_code ec, std::size_t) {
        if (ec)
            return fail(ec, "write");
        buffer_.consume(buffer_.size());
        do_read();
    }

    websocket::stream<socket_type> ws_;
    beast::flat_buffer buffer_;
};

// Accepts connections for ever, each on a strand of its own.
class listener : public std::enable_shared_from_this<listener> {
public:
    listener(asio::io_context& ioc, tcp::endpoint at)
        : ioc_(ioc), acceptor_(asio::make_strand(ioc), at) {
        std::printf("listening on %s port %u\n", at.address().to_string().c_str(), at.port());
    }

    void run() { do_accept(); }

private:
    void do_accept() {
        auto accepted = beast::bind_front_handler(&listener::on_accept, shared_from_this());
        rdma_asio::async_accept(acceptor_, asio::make_strand(ioc_), std::move(accepted));
    }

    void on_accept(beast::error_code ec, socket_type socket) {
        if (ec)
            fail(ec, "accept");
        else
            std::make_shared<session>(std::move(socket))->run();
        do_accept();
    }

    asio::io_context& ioc_;
    acceptor_type acceptor_;
};

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::string program = std::filesystem::path(argv[0]).filename().string();
    std::string address = "0.0.0.0";
    unsigned short port = 8080;
    sample::command_line cli(program, "A websocket echo server with Boost.Beast.");
    cli.option('a', "address", "ADDR", "listen on ADDR (default 0.0.0.0: every address)", address);
    cli.number('p', "port", "PORT", "listen on PORT (default 8080)", port);
    cli.parse(argc, argv);
    try {
        asio::io_context ioc(1);
        std::make_shared<listener>(ioc, tcp::endpoint(asio::ip::make_address(address), port))
            ->run();
        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](auto, auto) { ioc.stop(); });
        ioc.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
        return 1;
    }
}
