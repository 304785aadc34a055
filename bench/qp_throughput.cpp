// The throughput benchmark's traffic (64-byte sends from QP a to QP b of one
// loopback, at most IN_FLIGHT at a time, each send posted only after a receive for
// it) through queue_pair operations: IN_FLIGHT coroutines on one io_context
// thread, each awaiting one message at a time as a parallel group of b's
// async_receive and a's async_send (the receive starts first). No wr_ids, no
// polling, no routing in the program: the library does them per operation, which
// is what this measures against cq_throughput (async_poll) and epoll_throughput
// (the plain C loop).
//
// With -h the lanes are chains of plain completion handlers instead (a lane
// starts the receive and the send, and its next message when both handlers have
// run): the same operations without the coroutines and the parallel group, to
// tell what the library costs from what that idiom costs.
//
// With -o the coroutines await one operation at a time, as a service's receive
// loop and its senders do: IN_FLIGHT senders, each `co_await a.async_send(...)`
// in a loop, and twice as many receivers, each `co_await b.async_receive(...)` in
// a loop, so that receives stay posted ahead of the sends (a receiver posts its
// next receive once its handler has run). Together they post exactly MESSAGES of
// each.
//
//   qp_throughput [-h | -o] [-i IN_FLIGHT] [MESSAGES]
//
// Defaults: 64 in flight, 100000 messages. Device: $RDMA_ASIO_TEST_DEVICE or rxe0.
#include "loopback.h"

#include <rdma_asio/completion_queue.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/protection_domain.hpp>
#include <rdma_asio/queue_pair.hpp>

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <system_error>
#include <vector>

namespace {

struct totals {
    long total = 0;
    long started = 0;
    long done = 0;
    long receives_started = 0; // -o
};

// One message at a time until the run has started them all.
asio::awaitable<void> lane(rdma_asio::queue_pair& a, rdma_asio::queue_pair& b,
                           rdma_asio::registered_buffer send_buf,
                           rdma_asio::registered_buffer recv_buf, totals& t) {
    while (t.started < t.total) {
        ++t.started;
        auto [order, received_ec, received, sent_ec, sent] =
            co_await asio::experimental::make_parallel_group(
                b.async_receive(recv_buf, asio::experimental::deferred),
                a.async_send(send_buf, asio::experimental::deferred))
                .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
        if (received_ec)
            throw rdma_asio::system_error(received_ec, "async_receive");
        if (sent_ec)
            throw rdma_asio::system_error(sent_ec, "async_send");
        ++t.done;
    }
}

// -o: a sender awaiting one send at a time.
asio::awaitable<void> sender(rdma_asio::queue_pair& a, rdma_asio::registered_buffer buf,
                             totals& t) {
    while (t.started < t.total) {
        ++t.started;
        co_await a.async_send(buf, asio::use_awaitable);
    }
}

// -o: a receiver awaiting one receive at a time; a message is done when received.
asio::awaitable<void> receiver(rdma_asio::queue_pair& b, rdma_asio::registered_buffer buf,
                               totals& t) {
    while (t.receives_started < t.total) {
        ++t.receives_started;
        co_await b.async_receive(buf, asio::use_awaitable);
        ++t.done;
    }
}

// The same lane as completion handlers: one message at a time, each a receive
// and a send started together; the second handler to run starts the next.
class handler_lane {
public:
    handler_lane(rdma_asio::queue_pair& a, rdma_asio::queue_pair& b,
                 rdma_asio::registered_buffer send_buf, rdma_asio::registered_buffer recv_buf,
                 totals& t)
        : a_(a), b_(b), send_buf_(send_buf), recv_buf_(recv_buf), t_(t) {}

    void next() {
        if (t_.started >= t_.total)
            return;
        ++t_.started;
        pending_ = 2;
        b_.async_receive(recv_buf_, [this](rdma_asio::error_code ec, std::size_t) {
            done(ec, "async_receive");
        });
        a_.async_send(send_buf_,
                      [this](rdma_asio::error_code ec, std::size_t) { done(ec, "async_send"); });
    }

private:
    void done(rdma_asio::error_code ec, const char* what) {
        if (ec)
            throw rdma_asio::system_error(ec, what);
        if (--pending_ == 0) {
            ++t_.done;
            next();
        }
    }

    rdma_asio::queue_pair& a_;
    rdma_asio::queue_pair& b_;
    rdma_asio::registered_buffer send_buf_, recv_buf_;
    totals& t_;
    int pending_ = 0;
};

} // namespace

int main(int argc, char* argv[]) {
    bench_options o{100000, 64, 0, 0, 0, 0, 0, 0};
    if (bench_parse_options(argc, argv, "hoi:", "qp_throughput [-h | -o] [-i IN_FLIGHT] [MESSAGES]",
                            &o) != 0)
        return 2;
    if (o.handlers && o.one_at_a_time) {
        std::fprintf(stderr, "qp_throughput: -h and -o are two kinds of lanes: give one\n");
        return 2;
    }
    // -o keeps twice as many receives posted as sends in flight.
    const int receives = o.one_at_a_time ? 2 * o.in_flight : o.in_flight;
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(bench_device_name());
        rdma_asio::protection_domain pd(ctx);
        rdma_asio::completion_channel channel(ioc, ctx);
        // As the other programs: a's sends on one CQ, b's receives on another; the
        // directions the traffic does not use share a third.
        rdma_asio::completion_queue send_cq(channel, 2 * o.in_flight);
        rdma_asio::completion_queue recv_cq(channel, 2 * receives);
        rdma_asio::completion_queue unused_cq(channel, 2 * o.in_flight);
        rdma_asio::qp_options qp_opts;
        qp_opts.send_depth = static_cast<std::uint32_t>(o.in_flight);
        qp_opts.receive_depth = static_cast<std::uint32_t>(receives);
        rdma_asio::queue_pair a(pd, send_cq, unused_cq, qp_opts);
        rdma_asio::queue_pair b(pd, unused_cq, recv_cq, qp_opts);
        if (bench_connect_qp(ctx.native_handle(), a.native_handle(), b.native_handle()->qp_num) !=
                0 ||
            bench_connect_qp(ctx.native_handle(), b.native_handle(), a.native_handle()->qp_num) !=
                0)
            return 1;
        std::array<std::byte, 2 * bench_message_size> memory{};
        rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
        totals t;
        t.total = o.messages;
        const auto start = std::chrono::steady_clock::now();
        auto rethrow = [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        };
        std::vector<handler_lane> handler_lanes;
        handler_lanes.reserve(static_cast<std::size_t>(o.in_flight));
        const auto send_buf = mr.at(0, bench_message_size);
        const auto recv_buf = mr.at(bench_message_size, bench_message_size);
        if (o.one_at_a_time) {
            // The receivers first: their receives are posted before any send.
            for (int i = 0; i < receives; ++i)
                asio::co_spawn(ioc, receiver(b, recv_buf, t), rethrow);
            for (int i = 0; i < o.in_flight; ++i)
                asio::co_spawn(ioc, sender(a, send_buf, t), rethrow);
        }
        for (int i = 0; i < o.in_flight && !o.one_at_a_time; ++i) {
            if (o.handlers)
                handler_lanes.emplace_back(a, b, send_buf, recv_buf, t).next();
            else
                asio::co_spawn(ioc, lane(a, b, send_buf, recv_buf, t), rethrow);
        }
        ioc.run();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const auto s = send_cq.counters(), r = recv_cq.counters();
        const long completions = 2 * t.done;
        std::printf("rdma_asio queue_pair operations (%s), %d in flight: %ld messages, %ld "
                    "completions in %.3f s = %.0f completions/s, %llu events, %llu ack calls\n",
                    o.handlers        ? "handlers"
                    : o.one_at_a_time ? "coroutines, one operation at a time"
                                      : "coroutines",
                    o.in_flight, t.done, completions, elapsed, completions / elapsed,
                    static_cast<unsigned long long>(s.events + r.events),
                    static_cast<unsigned long long>(s.ack_calls + r.ack_calls));
        return t.done == o.messages ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "qp_throughput: %s\n", e.what());
        return 1;
    }
}
