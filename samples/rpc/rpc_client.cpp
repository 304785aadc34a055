// rpc_client: opens N rdma_cm connections to rpc_server at once and makes M calls
// on each, one at a time per connection, then says goodbye on each. It checks
// every response, prints exact counts and the rates, and exits with status 1
// when any count is not what was asked for.
//
//   rpc_client -a|--server ADDR [-p|--port PORT] [-c|--connections N]
//              [-n|--requests M] [-w|--window W] [--deadline SECONDS]
//
// Its connections share one shared receive queue and one pair of CQs per device,
// as the server's do. At most W requests are in flight over all connections: the
// server's receive depth (from its accept) must be at least W. Everything is over
// within --deadline seconds: a run still going then stops, prints its counts and
// exits with status 1.
#include "rpc.hpp"

#include "common/cm_steps.hpp"
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/cm_event_channel.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

using asio::use_awaitable;
using asio::experimental::as_tuple;
using clock_type = std::chrono::steady_clock;

struct options {
    std::string server;
    unsigned short port = 18730;
    std::uint32_t connections = 1;
    std::uint32_t requests = 10;
    std::uint32_t window = 64;
    unsigned deadline_s = 300;
};

struct counts {
    std::size_t established = 0;
    std::uint64_t sent = 0;     // calls sent
    std::uint64_t verified = 0; // responses received and right
    std::uint64_t wrong = 0;    // responses received and wrong
    std::size_t goodbyes = 0;   // goodbyes answered with the right count of calls
    std::size_t failed = 0;     // connections that ended with an error
    std::size_t finished = 0;   // connections done, one way or the other
    std::size_t ready = 0;      // connections established or failed on the way
    clock_type::time_point all_ready;
};

// The response a connection waits for, handed over by the receive loops.
struct awaited_response {
    explicit awaited_response(asio::any_io_executor ex) : arrived(std::move(ex)) {}
    std::optional<rpc::response> value;
    rpc::wait_queue arrived;
};

// At most `window` requests in flight over all connections, handed over in the
// order asked for.
class window {
public:
    window(asio::any_io_executor ex, std::uint32_t size) : free_(size), queue_(std::move(ex)) {}
    asio::awaitable<void> take() {
        if (free_ > 0)
            --free_;
        else
            co_await queue_.wait(); // the giver handed its place to this wait
    }
    void give() {
        if (!queue_.wake_one())
            ++free_;
    }

private:
    std::uint32_t free_;
    rpc::wait_queue queue_;
};

class client {
public:
    client(asio::io_context& ioc, const options& opt)
        : opt_(opt), channel_(ioc),
          // Buffers 0 .. window-1 receive responses; window + i is connection
          // i's request.
          pools_(ioc.get_executor(), opt.window, opt.window + opt.connections),
          not_ready_(ioc.get_executor()), window_(ioc.get_executor(), opt.window) {
        pools_.on_new_pool([this](rpc::device_pool& pool) {
            pool_ = &pool;
            for (std::uint32_t i = 0; i < pool.depth(); ++i)
                asio::co_spawn(channel_.get_executor(), receive_responses(pool, i), asio::detached);
        });
    }

    asio::awaitable<void> run_connection(std::uint32_t index);
    const counts& result() const noexcept { return n_; }
    /// Called when the last connection is done.
    std::function<void()> all_done;

private:
    asio::awaitable<void> receive_responses(rpc::device_pool& pool, std::uint32_t buffer);
    asio::awaitable<std::uint32_t> connect(rdma_asio::cm_id& id);
    asio::awaitable<rpc::response> call(rdma_asio::connection& conn, std::uint32_t index,
                                        const rpc::request& r, awaited_response& awaited);

    const options& opt_;
    rdma_asio::cm_event_channel channel_;
    rpc::device_pools pools_;
    rpc::device_pool* pool_ = nullptr;
    // Calls start when every connection is ready, so that the rates of the two
    // phases are measured apart.
    asio::awaitable<void> wait_for_all_ready();
    void ready();
    rpc::wait_queue not_ready_;
    window window_;
    std::map<std::uint32_t, awaited_response*> awaiting_; // by QP number
    counts n_;
};

// Receives responses into one buffer for as long as the shared receive queue is
// open, and hands each to the connection it came on.
asio::awaitable<void> client::receive_responses(rpc::device_pool& pool, std::uint32_t buffer) {
    rdma_asio::receive_info info;
    for (;;) {
        auto [ec, n] =
            co_await pool.srq().async_receive(pool.buffer(buffer), info, as_tuple(use_awaitable));
        if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
            ec == rdma_asio::errc::device_removed)
            co_return;
        if (ec) {
            std::printf("receive: %s\n", ec.message().c_str());
            continue;
        }
        const auto response = rpc::decode_response(pool.bytes(buffer).first(n));
        const auto it = awaiting_.find(info.qp_num);
        if (!response || it == awaiting_.end() || it->second->value) {
            std::printf("a response nobody waits for (%zu bytes on QP %u)\n", n, info.qp_num);
            ++n_.wrong;
            continue;
        }
        it->second->value = *response;
        it->second->arrived.wake_one();
    }
}

// Connects; the server's accept carries its receive depth.
asio::awaitable<std::uint32_t> client::connect(rdma_asio::cm_id& id) {
    const rdma_asio::cm_event ev =
        co_await sample::connect_for_private_data(id, rdma_asio::default_conn_param(id));
    const rdma_conn_param& reply = ev.conn_param();
    const auto depth = rpc::decode_depth(reply.private_data, reply.private_data_len);
    if (!depth)
        throw std::runtime_error("the server sent no receive depth (not an rpc_server?)");
    co_return *depth;
}

void client::ready() {
    if (++n_.ready < opt_.connections)
        return;
    n_.all_ready = clock_type::now();
    while (not_ready_.wake_one()) {
    }
}

asio::awaitable<void> client::wait_for_all_ready() {
    if (n_.ready < opt_.connections)
        co_await not_ready_.wait();
}

// Sends request `r` from connection `index`'s buffer and waits for its response.
asio::awaitable<rpc::response> client::call(rdma_asio::connection& conn, std::uint32_t index,
                                            const rpc::request& r, awaited_response& awaited) {
    co_await window_.take();
    struct give_back {
        window& w;
        ~give_back() { w.give(); }
    } in_flight{window_};
    const std::uint32_t buffer = opt_.window + index;
    const rpc::message m = rpc::encode(r);
    std::copy(m.begin(), m.end(), pool_->bytes(buffer).begin());
    co_await conn.queue_pair().async_send(pool_->buffer(buffer), use_awaitable);
    if (r.what == rpc::kind::call)
        ++n_.sent;
    // The response may have come before the send's completion was read.
    if (!awaited.value)
        co_await awaited.arrived.wait();
    const rpc::response got = *awaited.value;
    awaited.value.reset();
    co_return got;
}

asio::awaitable<void> client::run_connection(std::uint32_t index) {
    bool counted_ready = false;
    try {
        rdma_asio::cm_id id(channel_);
        const sockaddr_in server = rpc::socket_address(opt_.server, opt_.port);
        co_await id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&server),
                                       std::chrono::seconds(2), use_awaitable);
        co_await id.async_resolve_route(std::chrono::seconds(2), use_awaitable);
        rpc::device_pool& pool = pools_.of(id.native_handle()->verbs);
        // One request in flight, and room to spare.
        rdma_asio::connection conn = pool.make_connection(std::move(id), 2);
        awaited_response awaited(channel_.get_executor());
        const std::uint32_t qp_num = conn.qp()->qp_num;
        awaiting_.emplace(qp_num, &awaited);
        struct forget {
            std::map<std::uint32_t, awaited_response*>& awaiting;
            std::uint32_t qp_num;
            ~forget() { awaiting.erase(qp_num); }
        } forget_on_exit{awaiting_, qp_num};

        const std::uint32_t depth = co_await connect(conn.id());
        if (depth < opt_.window)
            throw std::runtime_error("the server posts " + std::to_string(depth) +
                                     " receives, fewer than --window " +
                                     std::to_string(opt_.window));
        ++n_.established;
        counted_ready = true;
        ready();
        co_await wait_for_all_ready();

        // snippet-begin: rpc-client-calls
        for (std::uint32_t m = 0; m < opt_.requests; ++m) {
            const std::uint64_t argument = std::uint64_t{index} << 32 | m;
            const rpc::response got =
                co_await call(conn, index, {rpc::kind::call, index, m, argument}, awaited);
            const bool right = got.what == rpc::kind::call && got.client == index &&
                               got.sequence == m && got.result == rpc::answer(argument);
            ++(right ? n_.verified : n_.wrong);
        }
        const rpc::response bye =
            co_await call(conn, index, {rpc::kind::goodbye, index, opt_.requests, 0}, awaited);
        // The server answers a goodbye with the calls it answered on this connection.
        if (bye.what == rpc::kind::goodbye && bye.result == opt_.requests)
            ++n_.goodbyes;
        else
            std::printf("connection %u: goodbye answered with %llu calls, not %u\n", index,
                        static_cast<unsigned long long>(bye.result), opt_.requests);
        // snippet-end: rpc-client-calls
        // The server sends nothing after the goodbye's response and closes its end:
        // close this one too, without waiting for rdma_disconnect's DISCONNECTED,
        // which the server's close may have brought already.
        conn.close();
    } catch (const std::exception& e) {
        std::printf("connection %u: %s\n", index, e.what());
        ++n_.failed;
        if (!counted_ready)
            ready();
    }
    if (++n_.finished == opt_.connections && all_done)
        all_done();
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    options opt;
    sample::command_line cli("rpc_client",
                             "Make calls to rpc_server over N rdma_cm connections at once, check "
                             "every response and print the counts and rates.");
    cli.option('a', "server", "ADDR", "the server's IPv4 address (required)", [&](const char* v) {
        rpc::require_ipv4(v);
        opt.server = v;
    });
    cli.number('p', "port", "PORT", "the server's port (default 18730)", opt.port,
               static_cast<unsigned short>(1));
    cli.number('c', "connections", "N", "open N connections (default 1)", opt.connections,
               std::uint32_t{1}, std::uint32_t{100000});
    cli.number('n', "requests", "M", "make M calls on each (default 10)", opt.requests,
               std::uint32_t{0}, std::numeric_limits<std::uint32_t>::max() - 1);
    cli.number('w', "window", "W",
               "at most W requests in flight over all connections; the server's --depth must "
               "be at least W (default 64)",
               opt.window, std::uint32_t{1}, std::uint32_t{1} << 16);
    cli.number(0, "deadline", "SECONDS", "stop and fail after SECONDS (default 300)",
               opt.deadline_s, 1u, 86400u);
    cli.parse(argc, argv);
    if (opt.server.empty())
        cli.usage_error("--server ADDR is required");
    if (!sample::require_rdma("rpc_client"))
        return 1;
    try {
        asio::io_context ioc;
        client c(ioc, opt);
        asio::steady_timer deadline(ioc, std::chrono::seconds(opt.deadline_s));
        bool late = false;
        deadline.async_wait([&](rdma_asio::error_code ec) {
            if (ec)
                return; // all done in time
            late = true;
            ioc.stop();
        });
        c.all_done = [&] { ioc.stop(); };
        const auto start = clock_type::now();
        for (std::uint32_t i = 0; i < opt.connections; ++i)
            asio::co_spawn(ioc, c.run_connection(i), asio::detached);
        ioc.run();
        const auto end = clock_type::now();
        const counts& n = c.result();
        const std::uint64_t asked = std::uint64_t{opt.connections} * opt.requests;
        if (late)
            std::printf("deadline: %u s passed with %zu of %u connections not done\n",
                        opt.deadline_s, opt.connections - n.finished, opt.connections);
        std::printf("%zu of %u connections established, %llu of %llu requests sent, %llu "
                    "responses verified, %llu wrong, %zu goodbyes confirmed, %zu connections "
                    "failed\n",
                    n.established, opt.connections, static_cast<unsigned long long>(n.sent),
                    static_cast<unsigned long long>(asked),
                    static_cast<unsigned long long>(n.verified),
                    static_cast<unsigned long long>(n.wrong), n.goodbyes, n.failed);
        const bool exact = !late && n.established == opt.connections && n.sent == asked &&
                           n.verified == asked && n.wrong == 0 && n.goodbyes == opt.connections &&
                           n.failed == 0;
        if (exact) {
            const double connecting = std::chrono::duration<double>(n.all_ready - start).count();
            const double calling = std::chrono::duration<double>(end - n.all_ready).count();
            std::printf("connections: %.3f s, %.0f/s; calls and goodbyes: %.3f s, %.0f calls/s\n",
                        connecting, opt.connections / connecting, calling,
                        static_cast<double>(asked) / calling);
        }
        // Stopped, the receive loops (and on a failed run the connections) are
        // suspended in their waits; leave without unwinding them, as a killed
        // process would: the kernel releases the verbs and rdma_cm objects.
        std::fflush(stdout);
        std::_Exit(exact ? 0 : 1);
    } catch (const std::exception& e) { // rdma_asio::system_error names the call
        std::fprintf(stderr, "rpc_client: %s\n", e.what());
        return 1;
    }
}
