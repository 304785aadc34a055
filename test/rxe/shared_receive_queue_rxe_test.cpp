// Shared receive queues on rxe: one pool of receives for several queue pairs,
// the limit event, cancellation, close with queue pairs still on it, and every
// completion token.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"
#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include "each_token.hpp"
#include "kernel_resources.hpp"
#include "recorder.hpp"
#include "run_until.hpp"
#include "test_device.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/utsname.h>
#include <unistd.h>

namespace shared_receive_queue_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::test::test_device_name;

namespace {

using result = rdma_asio::test::recorder<std::size_t>;

constexpr std::size_t slot_size = 64;
constexpr std::size_t slots = 256;

// A server side of `n` queue pairs on one shared receive queue and one shared CQ,
// each connected to a client queue pair of its own (one CQ for the clients);
// registered memory: the first `slots` slots are the server's, the rest the
// clients'.
struct srq_fixture {
    srq_fixture(asio::io_context& io, std::size_t n, rdma_asio::srq_options options = {})
        : ioc(io), ctx(test_device_name()), pd(ctx), channel(ioc.get_executor(), ctx),
          server_cq(channel, 1024), client_cq(channel, 1024), srq(ioc.get_executor(), pd, options),
          memory(2 * slots * slot_size), mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE) {
        for (std::size_t i = 0; i < n; ++i) {
            servers.emplace_back(pd, server_cq, server_cq, srq);
            clients.emplace_back(pd, client_cq, client_cq);
            rdma_asio::test::connect_rc_pair(ctx.native_handle(), servers[i].native_handle(),
                                             clients[i].native_handle());
        }
    }

    rdma_asio::registered_buffer server_slot(std::size_t i) {
        return mr.at(i * slot_size, slot_size);
    }
    rdma_asio::registered_buffer client_slot(std::size_t i) {
        return mr.at((slots + i) * slot_size, slot_size);
    }
    asio::io_context& ioc;
    rdma_asio::context ctx;
    rdma_asio::protection_domain pd;
    rdma_asio::completion_channel channel;
    rdma_asio::completion_queue server_cq, client_cq;
    rdma_asio::shared_receive_queue srq;
    std::deque<rdma_asio::queue_pair> servers, clients;
    std::vector<std::byte> memory;
    rdma_asio::memory_region mr;
};

// One server queue pair on a shared receive queue and its client, each side on an
// io_context of its own: the client's send completes while the server's CQ, read
// only by the server's io_context, is left unread.
struct split_fixture {
    split_fixture()
        : ctx(test_device_name()), pd(ctx), server_channel(server_io.get_executor(), ctx),
          client_channel(client_io.get_executor(), ctx), server_cq(server_channel, 64),
          client_cq(client_channel, 64), srq(server_io.get_executor(), pd),
          server(pd, server_cq, server_cq, srq), client(pd, client_cq, client_cq),
          memory(2 * slot_size), mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE),
          server_qp_num(server.native_handle()->qp_num) {
        rdma_asio::test::connect_rc_pair(ctx.native_handle(), server.native_handle(),
                                         client.native_handle());
    }

    // A message of `fill` bytes taken from the shared queue by the server queue
    // pair, its completion in the server's CQ, unread: `received` has not run.
    void leave_message_unread(result& received, rdma_asio::receive_info& info, std::byte fill) {
        srq.async_receive(mr.at(0, slot_size), info, received.handler());
        server_io.poll(); // posted; the server's CQ is armed, nothing read yet
        REQUIRE(srq.posted() == 1);
        std::memset(memory.data() + slot_size, std::to_integer<int>(fill), slot_size);
        result sent;
        client.async_send(mr.at(slot_size, slot_size), sent.handler());
        // rxe's responder writes the receive's completion before it acknowledges
        // the message: once the send has completed, the completion is in the CQ.
        REQUIRE(rdma_asio::test::run_until(
            client_io, [&] { return sent.calls() == 1; }, 30s));
        REQUIRE_FALSE(sent.ec());
        REQUIRE(received.calls() == 0);
    }

    // `received` ended with the message leave_message_unread() sent, on the server
    // queue pair, and gave its room back.
    void check_message(result& received, const rdma_asio::receive_info& info, std::byte fill) {
        CHECK_FALSE(received.ec());
        CHECK(received.value() == slot_size);
        CHECK(info.qp_num == server_qp_num);
        CHECK(memory[0] == fill);
        CHECK(memory[slot_size - 1] == fill);
        CHECK(srq.posted() == 0);
    }

    asio::io_context server_io, client_io;
    rdma_asio::context ctx;
    rdma_asio::protection_domain pd;
    rdma_asio::completion_channel server_channel, client_channel;
    rdma_asio::completion_queue server_cq, client_cq;
    rdma_asio::shared_receive_queue srq;
    rdma_asio::queue_pair server, client;
    std::vector<std::byte> memory;
    rdma_asio::memory_region mr;
    std::uint32_t server_qp_num;
};

// Runs `ioc` until `done()`, for at most 30 s.
bool run_until(asio::io_context& ioc, const std::function<bool()>& done) {
    return rdma_asio::test::run_until(ioc, done, 30s);
}

bool all_called(const std::vector<result>& results) {
    for (const result& r : results)
        if (r.calls() == 0)
            return false;
    return true;
}

} // namespace

// snippet-begin: srq-receive
// Receives the next message any queue pair on `srq` gets, and says which one it
// came on: the connection to answer on.
asio::awaitable<std::uint32_t> next_message(rdma_asio::shared_receive_queue& srq,
                                            rdma_asio::registered_buffer buffer) {
    rdma_asio::receive_info info;
    co_await srq.async_receive(buffer, info, asio::use_awaitable);
    co_return info.qp_num;
}
// snippet-end

TEST_CASE("the documented shared receive queue: two queue pairs, one pool of receives",
          "[shared_receive_queue][docs]") {
    asio::io_context ioc;
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    rdma_asio::completion_channel channel(ioc.get_executor(), ctx);
    // snippet-begin: srq-setup
    // One CQ and one pool of 256 receives for every queue pair of the server.
    rdma_asio::completion_queue cq(channel, 1024);
    rdma_asio::shared_receive_queue srq(ioc.get_executor(), pd, {.depth = 256});
    rdma_asio::queue_pair first(pd, cq, cq, srq);
    rdma_asio::queue_pair second(pd, cq, cq, srq);
    // snippet-end
    rdma_asio::completion_queue peer_cq(channel, 16);
    rdma_asio::queue_pair peer(pd, peer_cq, peer_cq);
    rdma_asio::testing::connect_loopback(ctx.native_handle(), second.native_handle(),
                                         peer.native_handle());
    std::vector<std::byte> memory(128);
    rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);

    std::uint32_t arrived_on = 0;
    bool done = false;
    asio::co_spawn(ioc, next_message(srq, mr.at(0, 64)),
                   [&](std::exception_ptr e, std::uint32_t qp) {
                       done = !e;
                       arrived_on = qp;
                   });
    result sent;
    peer.async_send(mr.at(64, 8), sent.handler());
    REQUIRE(run_until(ioc, [&] { return done && sent.calls() == 1; }));
    CHECK(arrived_on == second.native_handle()->qp_num);
    CHECK(arrived_on != first.native_handle()->qp_num);
}

TEST_CASE("one shared receive queue's receives serve several queue pairs, each naming the one "
          "its message arrived on",
          "[shared_receive_queue]") {
    asio::io_context ioc;
    constexpr std::size_t n = 4, per_client = 3;
    srq_fixture f(ioc, n);
    std::vector<result> received(n * per_client);
    std::vector<rdma_asio::receive_info> info(received.size());
    for (std::size_t i = 0; i < received.size(); ++i)
        f.srq.async_receive(f.server_slot(i), info[i], received[i].handler());
    ioc.poll();
    CHECK(f.srq.posted() == received.size());

    // Client c's messages carry c in their first byte and their number in the
    // second.
    std::vector<result> sent(received.size());
    for (std::size_t c = 0; c < n; ++c) {
        for (std::size_t k = 0; k < per_client; ++k) {
            auto slot = f.client_slot(c * per_client + k);
            static_cast<unsigned char*>(slot.data)[0] = static_cast<unsigned char>(c);
            static_cast<unsigned char*>(slot.data)[1] = static_cast<unsigned char>(k);
            f.clients[c].async_send(slot, sent[c * per_client + k].handler());
        }
    }
    REQUIRE(run_until(ioc, [&] { return all_called(received) && all_called(sent); }));

    std::map<std::uint32_t, std::vector<int>> by_qp; // qp_num -> message numbers, in order
    for (std::size_t i = 0; i < received.size(); ++i) {
        CHECK(received[i].calls() == 1);
        CHECK_FALSE(received[i].ec());
        CHECK(received[i].value() == slot_size);
        const auto* bytes = static_cast<const unsigned char*>(f.server_slot(i).data);
        const std::size_t c = bytes[0];
        REQUIRE(c < n);
        // The message of client c arrived on the server queue pair connected to it.
        CHECK(info[i].qp_num == f.servers[c].native_handle()->qp_num);
        by_qp[info[i].qp_num].push_back(bytes[1]);
    }
    REQUIRE(by_qp.size() == n);
    for (const auto& [qp_num, numbers] : by_qp)
        CHECK(numbers == std::vector<int>{0, 1, 2}); // each connection's in order
    CHECK(f.srq.posted() == 0);
}

TEST_CASE("a queue pair on a shared receive queue has no receive queue of its own",
          "[shared_receive_queue][misuse]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    using rdma_asio::test::each_token;
    each_token<std::size_t>::fails_at_once(
        ioc,
        [&](auto&& token) {
            return f.servers[0].async_receive(f.server_slot(0),
                                              std::forward<decltype(token)>(token));
        },
        rdma_asio::errc::receive_on_shared_queue);
}

// A deferred wait for the limit, launched after its event stream object was
// moved: it waits on the stream's state, which the moved-to object holds (before,
// it kept a pointer to the moved-from object and ended with bad_descriptor).
TEST_CASE("a deferred wait for the limit arms nothing until launched, and waits on its "
          "stream's state, wherever the stream object moved",
          "[shared_receive_queue]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1, {.depth = 16});
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    std::vector<result> received(2);
    for (std::size_t i = 0; i < received.size(); ++i)
        f.srq.async_receive(f.server_slot(i), received[i].handler());

    {
        // Dropped unlaunched: the limit is armed only as the operation is launched.
        auto never = f.srq.async_wait_limit(events, 2, asio::experimental::deferred);
    }
    ibv_srq_attr attr{};
    REQUIRE(ibv_query_srq(f.srq.native_handle(), &attr) == 0);
    CHECK(attr.srq_limit == 0);

    auto op = f.srq.async_wait_limit(events, 2, asio::experimental::deferred);
    rdma_asio::async_event_stream moved(std::move(events));
    rdma_asio::test::recorder<> limit;
    std::move(op)(limit.handler());
    ioc.poll();
    CHECK(limit.calls() == 0); // armed, waiting
    // One message leaves one receive posted: fewer than the limit.
    result sent;
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    REQUIRE(run_until(ioc, [&] { return limit.calls() == 1 && received[0].calls() == 1; }));
    CHECK_FALSE(limit.ec());
}

TEST_CASE("the limit event of a shared receive queue: armed, reached, refilled",
          "[shared_receive_queue]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1, {.depth = 16});
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    std::vector<result> received(8);
    for (std::size_t i = 0; i < received.size(); ++i)
        f.srq.async_receive(f.server_slot(i), received[i].handler());

    rdma_asio::test::recorder<> limit;
    f.srq.async_wait_limit(events, 4, limit.handler());
    ioc.poll();
    CHECK(limit.calls() == 0);

    // Four messages leave four posted: not fewer than the limit yet.
    std::vector<result> sent(5);
    for (std::size_t i = 0; i < 4; ++i)
        f.clients[0].async_send(f.client_slot(i), sent[i].handler());
    REQUIRE(run_until(ioc, [&] { return received[3].calls() == 1; }));
    ioc.restart();
    ioc.run_for(200ms);
    CHECK(limit.calls() == 0);
    // The fifth leaves three.
    f.clients[0].async_send(f.client_slot(4), sent[4].handler());
    // The event and the receive's completion come by different descriptors, in
    // either order.
    REQUIRE(run_until(ioc, [&] { return limit.calls() == 1 && received[4].calls() == 1; }));
    CHECK_FALSE(limit.ec());
    CHECK(f.srq.posted() == 3);

    // Refilled and armed again; the next fall below the limit is told again.
    std::vector<result> refill(5);
    for (std::size_t i = 0; i < refill.size(); ++i)
        f.srq.async_receive(f.server_slot(8 + i), refill[i].handler());
    rdma_asio::test::recorder<> again;
    f.srq.async_wait_limit(events, 8, again.handler());
    // The oldest posted receive takes the next message: received[5].
    std::vector<result> more(1);
    f.clients[0].async_send(f.client_slot(5), more[0].handler());
    REQUIRE(run_until(ioc, [&] { return again.calls() == 1 && received[5].calls() == 1; }));
    CHECK_FALSE(again.ec());
    CHECK(f.srq.posted() == 7);

    // A limit beyond the SRQ's depth: ibv_modify_srq's EINVAL, never inside the
    // call.
    rdma_asio::test::recorder<> refused;
    f.srq.async_wait_limit(events, 1u << 20, refused.handler());
    CHECK(refused.calls() == 0);
    REQUIRE(run_until(ioc, [&] { return refused.calls() == 1; }));
    CHECK(refused.ec() == asio::error::invalid_argument);
}

TEST_CASE("a cancelled wait for the limit leaves the limit armed for the next wait",
          "[shared_receive_queue][cancel]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1, {.depth = 16});
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    std::vector<result> received(4);
    for (std::size_t i = 0; i < received.size(); ++i)
        f.srq.async_receive(f.server_slot(i), received[i].handler());
    asio::cancellation_signal signal;
    rdma_asio::test::recorder<> cancelled;
    f.srq.async_wait_limit(events, 2,
                           asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    ioc.poll();
    signal.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return cancelled.calls() == 1; }));
    CHECK(cancelled.ec() == asio::error::operation_aborted);

    // Still armed: the stream's next wait for it takes the event.
    rdma_asio::test::recorder<rdma_asio::async_event> next;
    events.async_next(
        rdma_asio::event_match(rdma_asio::event_type::srq_limit_reached, f.srq.native_handle()),
        next.handler());
    std::vector<result> sent(3);
    for (std::size_t i = 0; i < sent.size(); ++i)
        f.clients[0].async_send(f.client_slot(i), sent[i].handler());
    REQUIRE(run_until(ioc, [&] { return next.calls() == 1; }));
    CHECK_FALSE(next.ec());
    CHECK(cancelled.calls() == 1);
}

TEST_CASE("a waiting receive of a shared receive queue can be cancelled, a posted one ends by "
          "its message",
          "[shared_receive_queue][cancel]") {
    asio::io_context ioc;
    // Before the fixture: the posted receives' handlers stay connected to them
    // until the queue's shutdown.
    std::vector<asio::cancellation_signal> signals(8);
    srq_fixture f(ioc, 1, {.depth = 2});
    // The device may round the depth up (ibv_create_srq(3)): the queue's room is
    // what it reports.
    ibv_srq_attr attr{};
    REQUIRE(ibv_query_srq(f.srq.native_handle(), &attr) == 0);
    const std::size_t depth = attr.max_wr;
    REQUIRE(depth + 1 <= signals.size());
    std::vector<result> received(depth + 1);
    for (std::size_t i = 0; i < received.size(); ++i)
        f.srq.async_receive(f.server_slot(i),
                            asio::bind_cancellation_slot(signals[i].slot(), received[i].handler()));
    ioc.poll();
    CHECK(f.srq.posted() == depth);
    CHECK(f.srq.waiting() == 1);
    for (auto& s : signals)
        s.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return received[depth].calls() == 1; }));
    CHECK(received[depth].ec() == asio::error::operation_aborted);
    ioc.restart();
    ioc.run_for(100ms);
    for (std::size_t i = 0; i < depth; ++i)
        CHECK(received[i].calls() == 0); // posted: nothing can flush them
    CHECK(f.srq.posted() == depth);

    std::vector<result> sent(depth);
    for (std::size_t i = 0; i < sent.size(); ++i)
        f.clients[0].async_send(f.client_slot(i), sent[i].handler());
    REQUIRE(run_until(ioc, [&] { return all_called(received); }));
    for (std::size_t i = 0; i < depth; ++i)
        CHECK_FALSE(received[i].ec());
    CHECK(received[depth].calls() == 1);
}

TEST_CASE("a shared receive queue closed under its queue pairs is destroyed with the last of them",
          "[shared_receive_queue][close]") {
    asio::io_context ioc;
    const int pds_before = rdma_asio::test::kernel_pds_of_this_process();
    std::vector<result> received(4);
    result after;
    {
        srq_fixture f(ioc, 2);
        for (std::size_t i = 0; i < received.size(); ++i)
            f.srq.async_receive(f.server_slot(i), received[i].handler());
        ioc.poll();
        CHECK(f.srq.posted() == 4);

        // Still usable by its queue pairs after the object closed: a message takes
        // one of the posted receives.
        f.srq.close();
        f.srq.async_receive(f.server_slot(9), after.handler());
        result sent;
        f.clients[0].async_send(f.client_slot(0), sent.handler());
        REQUIRE(run_until(ioc, [&] { return received[0].calls() == 1 && after.calls() == 1; }));
        CHECK_FALSE(received[0].ec());
        CHECK(after.ec() == asio::error::bad_descriptor);

        f.servers[0].close();
        ioc.restart();
        ioc.run_for(100ms);
        for (std::size_t i = 1; i < received.size(); ++i)
            CHECK(received[i].calls() == 0); // a queue pair is still on it

        f.servers[1].close(); // the last: the SRQ is destroyed, its receives end
        REQUIRE(run_until(ioc, [&] { return all_called(received); }));
        for (std::size_t i = 1; i < received.size(); ++i) {
            CHECK(received[i].calls() == 1);
            CHECK(received[i].ec() == asio::error::operation_aborted);
        }
        // Opening a queue pair on the closed SRQ is refused.
        rdma_asio::queue_pair late(ioc.get_executor());
        rdma_asio::error_code ec;
        late.open(f.pd, f.server_cq, f.server_cq, f.srq, {}, ec);
        CHECK(ec == asio::error::bad_descriptor);
        CHECK_FALSE(late.is_open());
    }
    // Every object is gone, and so is the PD: ibv_dealloc_pd found no SRQ left
    // on it.
    CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before);
    ioc.restart();
    ioc.run_for(100ms);
    for (const result& r : received)
        CHECK(r.calls() == 1);
}

// A queue pair closed while the completion of a message it took from the shared
// receive queue is still unread in its CQ. rxe leaves a destroyed queue pair's
// completions in its CQ; the receive must still end with its message, naming the
// closed queue pair, and give its room in the SRQ back.
TEST_CASE("a receive a queue pair took from a shared receive queue ends with its message when "
          "the queue pair closes before its completion is read",
          "[shared_receive_queue][close]") {
    split_fixture f;
    result received;
    rdma_asio::receive_info info;
    f.leave_message_unread(received, info, std::byte{0x5a});
    f.server.close(); // ibv_destroy_qp, its completion still unread
    REQUIRE(run_until(f.server_io, [&] { return received.calls() == 1; }));
    f.check_message(received, info, std::byte{0x5a});
}

// async_close closes the object at once and destroys the queue pair when the
// device reports IBV_EVENT_QP_LAST_WQE_REACHED for it, or at once when cancelled.
// Cancelled here before the io_context runs, so that no kernel's event comes first.
TEST_CASE("async_close of a queue pair on a shared receive queue closes it at once, and "
          "cancelled, destroys it",
          "[shared_receive_queue][close][async_close]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    // In use first: a message taken from the shared queue, and one more receive
    // posted.
    result first, second, sent;
    f.srq.async_receive(f.server_slot(0), first.handler());
    f.srq.async_receive(f.server_slot(1), second.handler());
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    REQUIRE(run_until(ioc, [&] { return first.calls() == 1 && sent.calls() == 1; }));
    const int qps = rdma_asio::test::kernel_qps_of_this_process();

    asio::cancellation_signal cancel;
    rdma_asio::test::recorder<> closed;
    f.servers[0].async_close(events, asio::bind_cancellation_slot(cancel.slot(), closed.handler()));
    CHECK_FALSE(f.servers[0].is_open());
    CHECK(closed.calls() == 0); // never inside the call
    // Stopped, not destroyed: it waits for the event.
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps);
    result late;
    f.servers[0].async_send(f.client_slot(1), late.handler());

    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return closed.calls() == 1 && late.calls() == 1; }));
    CHECK(closed.ec() == asio::error::operation_aborted);
    CHECK(late.ec() == asio::error::bad_descriptor);
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
    // The SRQ's other receive stays posted, for its other queue pairs.
    CHECK(second.calls() == 0);
    CHECK(f.srq.posted() == 1);
}

// snippet-begin: srq-async-close
// Closes a queue pair on a shared receive queue once the device says it will
// take no more of the queue's receives, or after `limit` at the latest (the
// timer's win cancels async_close, which then destroys the queue pair at once).
asio::awaitable<void> close_on_last_receive(rdma_asio::queue_pair& qp,
                                            rdma_asio::async_event_stream& events,
                                            std::chrono::milliseconds limit) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(co_await asio::this_coro::executor, limit);
    co_await (qp.async_close(events, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
}
// snippet-end

// Either way the queue pair is destroyed when the coroutine ends: by the event on
// a kernel that raises it, by the timer on Debian 12's 6.1.
TEST_CASE("the documented bounded async_close destroys the queue pair",
          "[shared_receive_queue][close][async_close][docs]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    const int qps = rdma_asio::test::kernel_qps_of_this_process();
    bool done = false;
    asio::co_spawn(ioc, close_on_last_receive(f.servers[0], events, 200ms),
                   [&](std::exception_ptr e) { done = !e; });
    REQUIRE(run_until(ioc, [&] { return done; }));
    CHECK_FALSE(f.servers[0].is_open());
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
}

// An async_close still pending holds its stopped queue pair until it ends, which
// on Debian 12's 6.1 (no IBV_EVENT_QP_LAST_WQE_REACHED) is when the io_context
// goes. The objects may go before, in any order: once the io_context is gone, the
// kernel holds nothing of them. Before, going in declaration order left the CQ in
// the kernel: its destroy met EBUSY (the QP still existed), was handed to the
// channel, and the channel gave up when it went, before the QP.
TEST_CASE("a pending async_close leaves no kernel object behind, whatever the order its objects "
          "go in",
          "[shared_receive_queue][close][async_close]") {
    const bool declaration_order = GENERATE(true, false);
    CAPTURE(declaration_order);
    using rdma_asio::test::kernel_resources_of_this_process;
    const auto count = [] {
        return std::array{kernel_resources_of_this_process("cq", "cqn"),
                          kernel_resources_of_this_process("qp", "lqpn"),
                          kernel_resources_of_this_process("srq", "srqn"),
                          kernel_resources_of_this_process("pd", "pdn")};
    };
    const auto before = count();
    {
        asio::io_context ioc;
        std::optional<rdma_asio::context> ctx(std::in_place, test_device_name());
        std::optional<rdma_asio::protection_domain> pd(std::in_place, *ctx);
        std::optional<rdma_asio::completion_channel> channel(std::in_place, ioc.get_executor(),
                                                             *ctx);
        std::optional<rdma_asio::completion_queue> cq(std::in_place, *channel, 16);
        std::optional<rdma_asio::shared_receive_queue> srq(std::in_place, ioc.get_executor(), *pd);
        std::optional<rdma_asio::queue_pair> qp(std::in_place, *pd, *cq, *cq, *srq);
        std::optional<rdma_asio::async_event_stream> events(std::in_place, ioc.get_executor(),
                                                            *ctx);
        bool closed = false;
        qp->async_close(*events, [&](rdma_asio::error_code) { closed = true; });
        ioc.poll();
        REQUIRE_FALSE(closed); // waits for the event, which 6.1 never raises
        if (declaration_order) {
            ctx.reset(), pd.reset(), channel.reset(), cq.reset(), srq.reset(), qp.reset();
            events.reset();
        } else {
            events.reset(), qp.reset(), srq.reset(), cq.reset(), channel.reset(), pd.reset();
            ctx.reset();
        }
        ioc.poll();
    } // the io_context goes, and with it the operation and its queue pair
    CHECK(count() == before);
}

// A deferred async_close acts when launched: made and dropped, it changes
// nothing; launched later, it closes then (issue 54: before, the object closed
// and the QP was stopped as the deferred operation was made).
TEST_CASE("an async_close made with deferred changes nothing until it is launched",
          "[shared_receive_queue][close][async_close]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    const int qps = rdma_asio::test::kernel_qps_of_this_process();
    {
        auto never = f.servers[0].async_close(events, asio::experimental::deferred);
    } // destroyed unlaunched
    ioc.poll();
    CHECK(f.servers[0].is_open());
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps);
    // Still a working queue pair: a message each way.
    result received, sent, echoed, back;
    f.srq.async_receive(f.server_slot(0), received.handler());
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    f.clients[0].async_receive(f.client_slot(1), back.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(received.ec());
    f.servers[0].async_send(f.server_slot(1), echoed.handler());
    REQUIRE(run_until(ioc, [&] { return echoed.calls() == 1 && back.calls() == 1; }));
    CHECK_FALSE(echoed.ec());
    CHECK_FALSE(back.ec());

    // Made now, launched later: it closes at the launch.
    auto later = f.servers[0].async_close(events, asio::experimental::deferred);
    CHECK(f.servers[0].is_open());
    asio::cancellation_signal cancel;
    rdma_asio::test::recorder<> closed;
    std::move(later)(asio::bind_cancellation_slot(cancel.slot(), closed.handler()));
    CHECK_FALSE(f.servers[0].is_open());
    CHECK(closed.calls() == 0); // never inside the launch
    result refused;
    f.servers[0].async_send(f.server_slot(1), refused.handler());
    cancel.emit(asio::cancellation_type::terminal); // 6.1 raises no LAST_WQE_REACHED
    REQUIRE(run_until(ioc, [&] { return closed.calls() == 1 && refused.calls() == 1; }));
    CHECK(refused.ec() == asio::error::bad_descriptor);
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
}

TEST_CASE("async_close of a queue pair without a shared receive queue closes it as close() "
          "does, and completes",
          "[shared_receive_queue][close][async_close]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    result receive;
    f.clients[0].async_receive(f.client_slot(0), receive.handler());
    ioc.poll();
    const int qps = rdma_asio::test::kernel_qps_of_this_process();

    rdma_asio::test::recorder<> closed;
    f.clients[0].async_close(events, closed.handler());
    CHECK_FALSE(f.clients[0].is_open());
    CHECK(closed.calls() == 0);                                      // never inside the call
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1); // destroyed as by close()
    REQUIRE(run_until(ioc, [&] { return closed.calls() == 1 && receive.calls() == 1; }));
    CHECK_FALSE(closed.ec());
    CHECK(receive.ec() == asio::error::operation_aborted);
}

TEST_CASE("async_close and async_wait_error of a closed or moved-from queue pair fail through "
          "every token",
          "[shared_receive_queue][close][async_close][async_wait_error][tokens]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    rdma_asio::queue_pair moved_to(std::move(f.servers[0]));
    f.clients[0].close();
    // One object and one operation per run of the case: each_token's sections
    // rerun it.
    rdma_asio::queue_pair& qp = GENERATE(as<bool>{}, true, false) ? f.servers[0] : f.clients[0];
    if (GENERATE(as<bool>{}, true, false)) {
        rdma_asio::test::each_token<>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_close(events, std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    } else {
        rdma_asio::test::each_token<>::fails_at_once(
            ioc,
            [&](auto&& token) { return qp.async_wait_error(std::forward<decltype(token)>(token)); },
            asio::error::bad_descriptor);
    }
    CHECK(moved_to.is_open());
}

// async_wait_error: the queue pair's wait for leaving service. Here it is closed
// under the wait, or the wait cancelled; the peer's disconnect is in
// connection_rxe_test.cpp.
TEST_CASE("async_wait_error ends with operation_aborted on close() and on cancellation, and "
          "leaves the queue pair in service when cancelled",
          "[queue_pair][async_wait_error]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::test::recorder<> partial, terminal, closed;
    asio::cancellation_signal partial_signal, terminal_signal;
    f.servers[0].async_wait_error(
        asio::bind_cancellation_slot(partial_signal.slot(), partial.handler()));
    f.servers[0].async_wait_error(
        asio::bind_cancellation_slot(terminal_signal.slot(), terminal.handler()));
    f.servers[0].async_wait_error(closed.handler());
    ioc.poll();
    CHECK(partial.calls() + terminal.calls() + closed.calls() == 0); // in service: waiting
    partial_signal.emit(asio::cancellation_type::partial);
    terminal_signal.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return partial.calls() == 1 && terminal.calls() == 1; }));
    CHECK(partial.ec() == asio::error::operation_aborted);
    CHECK(terminal.ec() == asio::error::operation_aborted);
    // Still in service: a message goes through, and the last wait still waits.
    result received, sent;
    rdma_asio::receive_info info;
    f.srq.async_receive(f.server_slot(0), info, received.handler());
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(received.ec());
    CHECK(info.qp_num == f.servers[0].native_handle()->qp_num);
    CHECK(closed.calls() == 0);

    f.servers[0].close();
    CHECK(closed.calls() == 0); // never inside the call
    REQUIRE(run_until(ioc, [&] { return closed.calls() == 1; }));
    CHECK(closed.ec() == asio::error::operation_aborted);
}

// A message longer than the shared receive queue's receive that takes it fails that
// receive and moves the queue pair that took it to the error state. The SRQ's
// receive ends with the error; the queue pair, which has no receive of its own to
// learn it from, must still end its async_wait_error (the rpc server's watch of a
// session): before, that completion went to the SRQ unread and the wait never
// ended.
TEST_CASE("a queue pair on a shared receive queue whose taken receive fails ends its "
          "async_wait_error",
          "[shared_receive_queue][async_wait_error]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 2);
    rdma_asio::test::recorder<> watch, other_watch;
    f.servers[0].async_wait_error(watch.handler());
    f.servers[1].async_wait_error(other_watch.handler());
    result received, sent;
    rdma_asio::receive_info info;
    f.srq.async_receive(f.mr.at(0, 8), info, received.handler()); // 8 bytes for 64
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && watch.calls() == 1; }));
    CHECK(received.ec()); // the device's status (rxe: IBV_WC_LOC_LEN_ERR)
    CHECK(watch.ec() == rdma_asio::wc_errc::flushed);
    // The other queue pair on the SRQ is still in service.
    ioc.poll();
    CHECK(other_watch.calls() == 0);
    result received2, sent2;
    f.srq.async_receive(f.server_slot(1), received2.handler());
    f.clients[1].async_send(f.client_slot(1), sent2.handler());
    REQUIRE(run_until(ioc, [&] { return received2.calls() == 1 && sent2.calls() == 1; }));
    CHECK_FALSE(received2.ec());
    CHECK(other_watch.calls() == 0);
    f.servers[1].close();
    REQUIRE(run_until(ioc, [&] { return other_watch.calls() == 1 && sent.calls() == 1; }));
    CHECK(other_watch.ec() == asio::error::operation_aborted);
}

// IBV_EVENT_QP_LAST_WQE_REACHED (ibv_get_async_event(3)): a queue pair on a shared
// receive queue, moved to the error state, will take no more of its receives. rxe
// raises it from Linux 6.5 on (commit c3e1bf626eb3, "RDMA/rxe: Send last wqe reached
// event on qp cleanup"); Debian 12's 6.1 never does. So the rxe label, which runs on
// 6.1, leaves it out (a hidden tag) rather than let it pass there without the event:
// ctest's newer_kernel.rxe_last_wqe_reached runs it in the test VM booted with
// bookworm-backports' 6.12 (docs/testing.md).
TEST_CASE("a queue pair on a shared receive queue moved to the error state raises "
          "IBV_EVENT_QP_LAST_WQE_REACHED",
          "[.last_wqe]") {
    utsname kernel{};
    uname(&kernel);
    INFO("kernel " << kernel.release << " (rxe raises the event from Linux 6.5 on)");
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::async_event_stream events(ioc.get_executor(), f.ctx);
    ibv_qp* const qp = f.servers[0].native_handle();

    // In use first, as a connection is: a message taken from the shared queue.
    result received, sent;
    f.srq.async_receive(f.server_slot(0), received.handler());
    f.clients[0].async_send(f.client_slot(0), sent.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(received.ec());

    rdma_asio::test::recorder<rdma_asio::async_event> last_wqe;
    events.async_next(rdma_asio::event_match(rdma_asio::event_type::qp_last_wqe_reached, qp),
                      last_wqe.handler());
    // Not while the queue pair works: the error state is what raises it.
    ioc.restart();
    ioc.run_for(200ms);
    REQUIRE(last_wqe.calls() == 0);

    ibv_qp_attr error_state{};
    error_state.qp_state = IBV_QPS_ERR;
    REQUIRE(ibv_modify_qp(qp, &error_state, IBV_QP_STATE) == 0);
    // 2 ms after the move on 6.12 in the emulated guest; 10 s leaves room for a busy host.
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return last_wqe.calls() == 1; }, 10s));
    CHECK_FALSE(last_wqe.ec());
    rdma_asio::async_event& event = last_wqe.value();
    CHECK(event.type() == rdma_asio::event_type::qp_last_wqe_reached);
    CHECK(event.qp() == qp);
    event.ack(); // before the fixture destroys the queue pair (ibv_destroy_qp waits for it)
}

// On a kernel that raises IBV_EVENT_QP_LAST_WQE_REACHED (above), async_close
// completes with success once it came, and the receive whose completion was still
// unread ends with its message. Hidden from the rxe label for the same reason.
TEST_CASE("async_close of a queue pair on a shared receive queue destroys it once the device "
          "reports its last receive",
          "[.last_wqe]") {
    utsname kernel{};
    uname(&kernel);
    INFO("kernel " << kernel.release << " (rxe raises the event from Linux 6.5 on)");
    split_fixture f;
    rdma_asio::async_event_stream events(f.server_io.get_executor(), f.ctx);
    result received;
    rdma_asio::receive_info info;
    f.leave_message_unread(received, info, std::byte{0x3c});
    const int qps = rdma_asio::test::kernel_qps_of_this_process();

    int closed = 0;
    rdma_asio::error_code closed_ec;
    int received_before_close = -1;
    f.server.async_close(events, [&](rdma_asio::error_code ec) {
        ++closed;
        closed_ec = ec;
        received_before_close = received.calls();
    });
    // 10 s leaves room for a busy host; the event comes within milliseconds.
    REQUIRE(rdma_asio::test::run_until(
        f.server_io, [&] { return closed == 1 && received.calls() == 1; }, 10s));
    CHECK_FALSE(closed_ec);
    // The CQ was read before the queue pair was destroyed: the receive had ended
    // when the close completed.
    CHECK(received_before_close == 1);
    CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
    f.check_message(received, info, std::byte{0x3c});
}

TEST_CASE("shared_receive_queue receives complete through every completion token",
          "[shared_receive_queue][tokens]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 1);
    rdma_asio::receive_info info;
    auto got = rdma_asio::test::each_token<std::size_t>::complete(
        ioc,
        [&](auto&& token) {
            return f.srq.async_receive(f.server_slot(0), info,
                                       std::forward<decltype(token)>(token));
        },
        [&] {
            f.clients[0].async_send(f.client_slot(0), [](rdma_asio::error_code, std::size_t) {});
        });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value() == slot_size);
    CHECK(info.qp_num == f.servers[0].native_handle()->qp_num);
}

TEST_CASE("a closed or moved-from shared receive queue refuses receives through every token",
          "[shared_receive_queue][misuse]") {
    asio::io_context ioc;
    srq_fixture f(ioc, 0);
    rdma_asio::shared_receive_queue moved(std::move(f.srq));
    CHECK_FALSE(f.srq.is_open());
    CHECK(moved.is_open());
    using rdma_asio::test::each_token;
    SECTION("moved-from") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return f.srq.async_receive(f.server_slot(0), std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("closed") {
        moved.close();
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return moved.async_receive(f.server_slot(0), std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
}

} // namespace shared_receive_queue_rxe_test
