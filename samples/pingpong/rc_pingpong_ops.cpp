// rc_pingpong_ops: rdma-core's `ibv_rc_pingpong` once more, written with queue_pair
// operations: every message is one co_await of an async_send or async_receive. There
// are no wr_ids, no polling loop and no routing of completions in the program; the
// library does them. Same options, same TCP exchange of addresses, same statistics
// as the other rc_pingpong samples, so it interoperates with the real
// ibv_rc_pingpong in either role and in both waiting modes (without -e the CQ is
// busy-polled, with -e its waits sleep on the completion channel).
//
// The device's asynchronous events are logged to stderr while it runs, and with
// queue_pair::watch_errors a QP error or CQ overrun that the device reports ends the
// operations at once, with the reason, instead of through flushed completions.
//
// Two differences from the original, neither visible on the wire:
// - it keeps one receive posted ahead of each send, not rx_depth of them: the
//   protocol needs no more (each side sends its next message only after the
//   other's has arrived), and the receive goes first in each parallel group;
// - it never sends inline: an operation always sends from registered memory.
//
//   rc_pingpong_ops [-d DEV] [-g GIDX] [-s SIZE] [-n ITERS] [-e [--spin=USEC]] [SERVER]
#include "pingpong.hpp"

#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/protection_domain.hpp>
#include <rdma_asio/queue_pair.hpp>

#include "asio_alias.hpp"

#include <cstdio>
#include <system_error>
#include <vector>

using pingpong::destination;

namespace {

void check(rdma_asio::error_code ec, const char* what) {
    if (ec)
        throw rdma_asio::system_error(ec, what);
}

// snippet-begin: pingpong-operations
// One round of the exchange: this side's receive for the peer's next message is
// posted first, then this side's message is sent; both are awaited.
asio::awaitable<void> send_and_receive(rdma_asio::queue_pair& qp,
                                       rdma_asio::registered_buffer outgoing,
                                       rdma_asio::registered_buffer incoming) {
    auto [order, received_ec, received, sent_ec, sent] =
        co_await asio::experimental::make_parallel_group(
            qp.async_receive(incoming, asio::experimental::deferred),
            qp.async_send(outgoing, asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    check(received_ec, "async_receive");
    check(sent_ec, "async_send");
}
// snippet-end

// The device's events, logged until the stream is closed. A wait stays pending all
// along: the stream reads the device's events only then, for this loop and for
// watch_errors alike.
asio::awaitable<void> log_device_events(rdma_asio::async_event_stream& events) {
    for (;;) {
        auto [ec, ev] =
            co_await events.async_next(asio::experimental::as_tuple(asio::use_awaitable));
        if (ec)
            co_return; // closed: the ping-pong is over
        std::fprintf(stderr, "device event: %s\n", ev.name().data());
    }
}

asio::awaitable<int> run(const pingpong::options& o, const rdma_asio::context& ctx,
                         rdma_asio::completion_queue& cq, rdma_asio::queue_pair& qp,
                         const rdma_asio::memory_region& mr) {
    auto ex = co_await asio::this_coro::executor;
    ibv_qp* native = qp.native_handle();
    pingpong::move_to_init(native, o);
    const destination local = pingpong::local_destination(ctx, native, o);
    pingpong::print_address("local address: ", local);
    auto connect = [&](const destination& remote) {
        pingpong::connect_qp(native, o, local, remote);
    };
    const rdma_asio::registered_buffer outgoing = mr.at(0, o.size);
    const rdma_asio::registered_buffer incoming = mr.at(o.size, o.size);

    destination remote;
    std::chrono::steady_clock::time_point start;
    if (o.server.empty()) {
        // The server's first receive is posted alongside the address exchange, so
        // the client's first message, sent once the exchange is done, finds it.
        auto [order, exchange_error, peer, received_ec, received] =
            co_await asio::experimental::make_parallel_group(
                asio::co_spawn(ex, pingpong::exchange(o, local, connect),
                               asio::experimental::deferred),
                qp.async_receive(incoming, asio::experimental::deferred))
                .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
        if (exchange_error)
            std::rethrow_exception(exchange_error);
        check(received_ec, "async_receive");
        remote = peer;
        start = std::chrono::steady_clock::now();
        // Answer each message; every answer but the last has the next receive.
        for (unsigned i = 1; i < o.iters; ++i)
            co_await send_and_receive(qp, outgoing, incoming);
        co_await qp.async_send(outgoing, asio::use_awaitable);
    } else {
        remote = co_await pingpong::exchange(o, local, connect);
        start = std::chrono::steady_clock::now();
        for (unsigned i = 0; i < o.iters; ++i)
            co_await send_and_receive(qp, outgoing, incoming);
    }
    pingpong::print_address("remote address:", remote);
    pingpong::print_statistics(o, std::chrono::steady_clock::now() - start, cq);
    co_return 0;
}

} // namespace

int main(int argc, char* argv[]) {
    const pingpong::options opts = pingpong::parse_options(
        argc, argv, "rc_pingpong_ops",
        "Ping-pong messages over an RC QP, each one an awaited queue_pair operation; talks to "
        "ibv_rc_pingpong. Without HOST be the server, with HOST connect to it.");
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(opts.device);
        rdma_asio::protection_domain pd(ctx);
        rdma_asio::completion_channel channel(ioc, ctx);
        rdma_asio::completion_queue cq(channel, static_cast<int>(opts.rx_depth) + 1,
                                       pingpong::cq_options_for(opts));
        rdma_asio::qp_options qp_opts;
        qp_opts.send_depth = 1;
        qp_opts.receive_depth = opts.rx_depth;
        rdma_asio::queue_pair qp(pd, cq, cq, qp_opts);
        std::vector<std::byte> memory(2 * std::size_t{opts.size});
        rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
        // snippet-begin: pingpong-watch-errors
        rdma_asio::async_event_stream events(ioc, ctx);
        qp.watch_errors(events);
        asio::co_spawn(ioc, log_device_events(events), asio::detached);
        // snippet-end
        int status = 1;
        asio::co_spawn(ioc, run(opts, ctx, cq, qp, mr), [&](std::exception_ptr e, int rc) {
            events.close(); // ends the log, and with it io_context::run()
            if (e)
                std::rethrow_exception(e);
            status = rc;
        });
        ioc.run();
        return status;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rc_pingpong_ops: %s\n", e.what());
        return 1;
    }
}
