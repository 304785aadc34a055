// rc_pingpong_callbacks: rc_pingpong for Asio programs without coroutines. The
// address exchange is synchronous, as in the original; completions arrive as
// callbacks from rdma_asio::completion_queue::async_poll, busy-polled without -e
// and on CQ events with -e, as in rc_pingpong (the CQ's options decide: see
// cq_options_for() in pingpong.cpp).
//
//   rc_pingpong_callbacks [-d DEV] [-g GIDX] [-s SIZE] [-n ITERS] [-e [--spin=USEC]] [SERVER]
#include "pingpong.hpp"

#include "asio_alias.hpp"

#include <array>
#include <cstdio>

using asio::ip::tcp;
using pingpong::destination;
using pingpong::print_address;

namespace {

destination exchange(asio::io_context& ioc, const pingpong::options& o, pingpong::endpoint& ep) {
    const std::string local = pingpong::to_wire(ep.local());
    std::array<char, pingpong::wire_size> msg{};
    tcp::socket socket(ioc);
    if (o.server.empty()) {
        tcp::acceptor acceptor = pingpong::listen_on(ioc.get_executor(), o.port);
        acceptor.accept(socket);
        asio::read(socket, asio::buffer(msg));
        destination remote = pingpong::remote_from_wire(msg.data());
        ep.connect(remote);
        asio::write(socket, asio::buffer(local));
        rdma_asio::error_code ignored;
        socket.read_some(asio::buffer(msg), ignored); // "done"
        return remote;
    }
    tcp::resolver resolver(ioc);
    asio::connect(socket, resolver.resolve(o.server, std::to_string(o.port)));
    asio::write(socket, asio::buffer(local));
    asio::read(socket, asio::buffer(msg));
    asio::write(socket, asio::buffer("done", sizeof "done"));
    destination remote = pingpong::remote_from_wire(msg.data());
    ep.connect(remote);
    return remote;
}

// Waits for completions until the exchange is done; one wait at a time.
// snippet-begin: callback-loop
class pinger {
public:
    explicit pinger(pingpong::endpoint& ep) : ep_(ep) {}

    void wait() {
        ep_.cq().async_poll(wcs_, [this](rdma_asio::error_code ec, std::size_t n) {
            if (ec) {
                std::fprintf(stderr, "rc_pingpong: %s\n", ec.message().c_str());
                return;
            }
            if (!ep_.handle(wcs_.data(), n))
                return;
            if (ep_.done())
                status_ = 0;
            else
                wait();
        });
    }
    int status() const { return status_; }

private:
    pingpong::endpoint& ep_;
    std::array<ibv_wc, 2> wcs_;
    int status_ = 1;
};
// snippet-end

} // namespace

int main(int argc, char* argv[]) {
    const pingpong::options opts = pingpong::parse_options(
        argc, argv, "rc_pingpong_callbacks",
        "Ping-pong messages over an RC QP, with callbacks; talks to ibv_rc_pingpong. Without HOST "
        "be the server, with HOST connect to it.");
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(opts.device);
        rdma_asio::completion_channel channel(ioc, ctx);
        pingpong::endpoint ep(channel, ctx, opts);
        print_address("local address: ", ep.local());
        print_address("remote address:", exchange(ioc, opts, ep));

        const auto start = std::chrono::steady_clock::now();
        ep.start(!opts.server.empty());
        pinger p(ep);
        p.wait();
        ioc.run();
        if (p.status() == 0)
            ep.print_statistics(std::chrono::steady_clock::now() - start);
        return p.status();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rc_pingpong_callbacks: %s\n", e.what());
        return 1;
    }
}
