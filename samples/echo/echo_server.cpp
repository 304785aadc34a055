// echo_server: an RDMA echo service with rdma_cm and coroutines. One coroutine
// per connection on one io_context thread echoes every message it receives, and
// ends when the client disconnects or vanishes; the service keeps serving.
// SIGINT or SIGTERM ends it.
//
//   echo_server [--address ADDR] [--port PORT] [--size BYTES]
#include "echo.hpp"

#include <rdma_asio/cm_event_channel.hpp>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

using asio::experimental::as_tuple;

struct service {
    echo::devices& devices;
    std::size_t size;
    std::size_t active = 0;
    std::size_t served = 0;
    std::uint64_t messages = 0;
};

asio::awaitable<void> echo_all(echo::endpoint& ep, service& svc) {
    // (co_await only as a whole statement: g++ 12 miscompiles it inside
    // conditions and short-circuit operators.)
    for (;;) {
        const bool received = co_await ep.completed(ep.conn().recv_cq());
        if (!received)
            co_return; // flushed or cancelled: the connection is gone
        std::memcpy(ep.send_buffer(), ep.recv_buffer(), ep.size());
        ep.post_recv(); // before the echo, so the client's next message finds it
        ep.post_send(ep.size());
        const bool sent = co_await ep.completed(ep.conn().send_cq());
        if (!sent)
            co_return;
        ++svc.messages;
    }
}

// snippet-begin: echo-session
asio::awaitable<void> session(rdma_asio::cm_id id, service& svc) {
    try {
        echo::endpoint ep(std::move(id), svc.devices, svc.size);
        ep.post_recv();
        co_await ep.conn().id().async_accept(echo::conn_param(), asio::use_awaitable);
        struct counted {
            service& svc;
            explicit counted(service& s) : svc(s) { ++svc.active; }
            ~counted() {
                --svc.active;
                ++svc.served;
            }
        } in_service(svc);
        // A disconnect from the peer (or its vanishing) ends the echo loop.
        echo::disconnect_watch watch(ep, ep.conn().id().get_executor());
        co_await echo_all(ep, svc);
        co_await watch.stop();
    } catch (const std::exception& e) {
        std::printf("session: %s\n", e.what());
    }
    if (svc.active == 0) {
        std::printf("idle: %zu connections served, %llu messages\n", svc.served,
                    static_cast<unsigned long long>(svc.messages));
        std::fflush(stdout);
    }
}

asio::awaitable<void> accept_all(rdma_asio::cm_id& listener, service& svc) {
    for (;;) {
        auto [ec, request] = co_await listener.async_get_request(as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return;
        if (ec) {
            std::printf("connection request: %s\n", ec.message().c_str());
            continue;
        }
        asio::co_spawn(listener.get_executor(), session(std::move(request), svc), asio::detached);
    }
}
// snippet-end: echo-session

} // namespace

int main(int argc, char** argv) {
    std::string address = "0.0.0.0";
    unsigned short port = 18700;
    std::size_t size = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--address")
            address = argv[i + 1];
        else if (arg == "--port")
            port = static_cast<unsigned short>(std::stoi(argv[i + 1]));
        else if (arg == "--size")
            size = std::stoul(argv[i + 1]);
    }
    try {
        asio::io_context ioc;
        rdma_asio::cm_event_channel channel(ioc);
        echo::devices devices(ioc.get_executor());
        service svc{devices, size};
        rdma_asio::cm_id listener(channel);
        const sockaddr_in addr = echo::ipv4(address, port);
        listener.bind(reinterpret_cast<const sockaddr*>(&addr));
        listener.listen();
        std::printf("listening on %s port %u\n", address.c_str(), listener.local_port());
        std::fflush(stdout);

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](std::error_code, int) { channel.cancel(); });
        asio::co_spawn(ioc, accept_all(listener, svc), asio::detached);
        ioc.run();
        std::printf("stopped: %zu connections served, %llu messages\n", svc.served,
                    static_cast<unsigned long long>(svc.messages));
        return 0;
    } catch (const std::system_error& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
