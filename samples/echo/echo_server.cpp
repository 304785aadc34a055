// echo_server: an RDMA echo service with rdma_cm and coroutines. One coroutine
// per connection on one io_context thread echoes every message it receives, and
// ends when the client disconnects or vanishes; the service keeps serving.
//
//   echo_server [-a|--address ADDR] [-p|--port PORT] [-s|--size BYTES]
//
// A connection request carries the client's message size (private data): one
// that differs from the server's is rejected, and both sides say so.
// The first SIGINT (Ctrl-C) or SIGTERM stops accepting and drains: the server
// exits (status 0) when the open connections have ended. A second one stops it
// at once, connections still open (exit status 130).
#include "echo.hpp"

#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/acceptor.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;

struct service {
    explicit service(std::uint32_t s) : size(s) {}
    std::uint32_t size;
    std::size_t sessions = 0; // running session coroutines, accepted or not
    std::size_t active = 0;   // connections established and not ended yet
    std::size_t served = 0;
    std::uint64_t messages = 0;
    bool draining = false;
    std::function<void()> drained; // called when draining and the last session ends
};

// Counts a session coroutine from its start to its end, whatever ends it.
struct running_session {
    service& svc;
    explicit running_session(service& s) : svc(s) { ++svc.sessions; }
    running_session(const running_session&) = delete;
    running_session& operator=(const running_session&) = delete;
    ~running_session() {
        if (--svc.sessions == 0 && svc.draining && svc.drained)
            svc.drained();
    }
};

// Counts an established connection until its session ends.
struct counted {
    service& svc;
    explicit counted(service& s) : svc(s) { ++svc.active; }
    counted(const counted&) = delete;
    counted& operator=(const counted&) = delete;
    ~counted() {
        --svc.active;
        ++svc.served;
    }
};

// The acceptor's screen: admits a request whose message size is the server's;
// rejects any other, with the server's size in the rejection's private data.
bool agree_on_size(std::span<const std::uint8_t> request, std::vector<std::uint8_t>& reply,
                   std::uint32_t size) {
    const auto asked = echo::decode_size(request);
    if (asked == size)
        return true;
    const echo::size_data mine = echo::encode_size(size);
    reply.assign(mine.begin(), mine.end());
    std::printf("connection request rejected: %s\n",
                asked ? echo::size_mismatch(size, *asked).c_str()
                      : "no message size in its private data (not an echo_client?)");
    return false;
}

// snippet-begin: echo-session
// Echoes every message until the client disconnects, as an Asio TCP echo server
// reads until eof: the receive ends with errc::disconnected then.
asio::awaitable<void> echo_all(echo::endpoint& ep, service& svc, std::size_t n) {
    for (;;) {
        std::memcpy(ep.send_buffer().data, ep.recv_buffer().data, n);
        // The next receive is posted before the echo goes out, so the client's
        // next message finds it.
        const echo::endpoint::exchange_result done = co_await ep.exchange(n);
        // An echo counts once sent, also the last one, whose receive ends with
        // the client's disconnect.
        if (!done.sent_ec)
            ++svc.messages;
        n = done.get(); // throws when either failed
    }
}

asio::awaitable<void> session(std::shared_ptr<echo::endpoint> ep, service& svc) {
    running_session running(svc);
    try {
        std::printf("connection accepted (%zu open)\n", svc.active + 1);
        counted in_service(svc);
        // The first receive was posted before the accept (prepare).
        std::size_t n = co_await ep->first_message();
        co_await echo_all(*ep, svc, n);
    } catch (const rdma_asio::system_error& e) {
        if (e.code() != rdma_asio::errc::disconnected) // the client's normal end
            std::printf("session: %s\n", e.what());
    } catch (const std::exception& e) {
        std::printf("session: %s\n", e.what());
    }
    if (svc.active == 0)
        std::printf("idle: %zu connections served, %llu messages\n", svc.served,
                    static_cast<unsigned long long>(svc.messages));
}

asio::awaitable<void> accept_all(rdma_asio::acceptor& acceptor, service& svc) {
    for (;;) {
        auto ep = std::make_shared<echo::endpoint>(acceptor.get_executor(), svc.size);
        // Named, not a temporary of the co_await expression: g++ 12 destroys
        // such a temporary twice (its copy of `ep` released once too often).
        const auto prepare = [ep](rdma_asio::connection& made) { ep->prepare(made); };
        auto [ec, conn] = co_await acceptor.async_accept(prepare, as_tuple(use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return; // draining: the acceptor is closed
        if (ec) {      // about this request only: the acceptor goes on
            std::printf("connection request: %s\n", ec.message().c_str());
            continue;
        }
        ep->adopt(std::move(conn));
        asio::co_spawn(acceptor.get_executor(), session(std::move(ep), svc), asio::detached);
    }
}
// snippet-end: echo-session

} // namespace

int main(int argc, char** argv) {
    // A log: each line as it happens, also when stdout is a file or a pipe.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::string address = "0.0.0.0";
    unsigned short port = 18700;
    std::uint32_t size = 64;
    sample::command_line cli("echo_server",
                             "Echo every message of every rdma_cm connection; Ctrl-C drains, a "
                             "second Ctrl-C stops at once.");
    cli.option('a', "address", "ADDR", "listen on IPv4 address ADDR (default 0.0.0.0)",
               [&](const char* v) {
                   echo::check_ipv4(v);
                   address = v;
               });
    cli.number('p', "port", "PORT", "listen on port PORT (default 18700; 0: any)", port);
    cli.number('s', "size", "BYTES", "message size; clients must use the same (default 64)", size,
               std::uint32_t{1}, std::uint32_t{1} << 30);
    cli.parse(argc, argv);
    if (!sample::require_rdma("echo_server"))
        return 1;
    try {
        // snippet-begin: echo-server-listen
        asio::io_context ioc;
        service svc(size);
        rdma_asio::acceptor_options options;
        options.connection = echo::queues();
        options.screen = [size](std::span<const std::uint8_t> request,
                                std::vector<std::uint8_t>& reply) {
            return agree_on_size(request, reply, size);
        };
        rdma_asio::acceptor acceptor(ioc, {asio::ip::make_address_v4(address), port}, options);
        std::printf("listening on %s port %u\n", address.c_str(), acceptor.local_endpoint().port());
        std::fflush(stdout);
        // snippet-end

        // First signal: stop accepting (closing the acceptor rejects the requests
        // nobody took and ends accept_all), then wait for the open connections to
        // end. Second signal: stop at once.
        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        bool forced = false;
        std::function<void(rdma_asio::error_code, int)> on_signal = [&](rdma_asio::error_code ec,
                                                                        int) {
            if (ec)
                return; // drained: the wait was cancelled
            if (svc.draining) {
                std::printf("second signal: stopping at once, %zu connections still open\n",
                            svc.active);
                forced = true;
                ioc.stop();
                return;
            }
            svc.draining = true;
            acceptor.close();
            std::printf("draining %zu connection%s (no new ones); a second Ctrl-C stops at once\n",
                        svc.sessions, svc.sessions == 1 ? "" : "s");
            std::fflush(stdout);
            if (svc.sessions > 0)
                signals.async_wait(on_signal);
        };
        svc.drained = [&] { signals.cancel(); };
        signals.async_wait(on_signal);
        asio::co_spawn(ioc, accept_all(acceptor, svc), asio::detached);
        ioc.run();
        if (forced) {
            std::printf("stopped at once: %zu connections served, %llu messages\n", svc.served,
                        static_cast<unsigned long long>(svc.messages));
            std::fflush(stdout);
            // The open connections' coroutines are suspended inside their waits;
            // leave without unwinding them, as a killed process would: the kernel
            // releases their verbs and rdma_cm objects (the peers see a disconnect).
            std::_Exit(130);
        }
        std::printf("stopped: %zu connections served, %llu messages\n", svc.served,
                    static_cast<unsigned long long>(svc.messages));
        return 0;
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
