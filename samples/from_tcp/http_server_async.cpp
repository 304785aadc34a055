// http_server_async: http_server_async_tcp.cpp, Beast's asynchronous HTTP
// server over TCP, changed to RDMA: the socket and acceptor types, the stream's
// header and the accept, four lines in all (docs/from-tcp.md shows them).
// Boost.Asio flavour only. A client: any Beast HTTP client over rdma_asio::stream.
#include "common/asio_alias.hpp" // <boost/asio.hpp>: rdma_asio built for Boost.Asio
#include "common/command_line.hpp"
#include <rdma_asio/stream.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using socket_type = rdma_asio::stream;
using acceptor_type = rdma_asio::acceptor;

void fail(beast::error_code ec, const char* what) {
    std::fprintf(stderr, "%s: %s\n", what, ec.message().c_str());
}

// The answer to `req`: its target for GET and HEAD, 400 for any other method.
http::response<http::string_body> respond(const http::request<http::string_body>& req) {
    const bool known = req.method() == http::verb::get || req.method() == http::verb::head;
    http::response<http::string_body> res(known ? http::status::ok : http::status::bad_request,
                                          req.version());
    res.set(http::field::content_type, "text/plain");
    res.keep_alive(req.keep_alive());
    res.body() = known ? std::string(req.target()) + "\n" : "unknown method\n";
    res.prepare_payload();
    if (req.method() == http::verb::head)
        res.body().clear(); // the length stays the GET's
    return res;
}

// One connection: read a request, write its answer, until the peer is done.
class session : public std::enable_shared_from_this<session> {
public:
    explicit session(socket_type&& socket) : stream_(std::move(socket)) {}

    void run() {
        // On the connection's strand, where its handlers run.
        asio::dispatch(stream_.get_executor(),
                       beast::bind_front_handler(&session::do_read, shared_from_this()));
    }

private:
    void do_read() {
        req_ = {};
        http::async_read(stream_, buffer_, req_,
                         beast::bind_front_handler(&session::on_read, shared_from_this()));
    }

    void on_read(beast::error_code ec, std::size_t) {
        if (ec == http::error::end_of_stream)
            return do_close();
        if (ec)
            return fail(ec, "read");
        res_ = respond(req_);
        http::async_write(stream_, res_,
                          beast::bind_front_handler(&session::on_write, shared_from_this()));
    }

    void on_write(beast::error_code ec, std::size_t) {
        if (ec)
            return fail(ec, "write");
        if (!res_.keep_alive())
            return do_close();
        do_read();
    }

    void do_close() {
        beast::error_code ec;
        stream_.shutdown(asio::socket_base::shutdown_send, ec);
    }

    socket_type stream_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> req_;
    http::response<http::string_body> res_;
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
    sample::command_line cli(program, "An HTTP/1.1 server with Boost.Beast: GET and HEAD "
                                      "answered with the request's target.");
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
