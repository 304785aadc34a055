#include "rdma_asio/completion_queue.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <array>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using namespace rdma_asio::test;
using rdma_asio::completion_channel;
using rdma_asio::completion_queue;

namespace {

constexpr int slots = 32;
constexpr std::size_t message_size = 64;

// Two connected RC QPs: `sender` posts sends, `receiver` posts receives, each with
// its own CQs, all on one completion channel.
struct loopback {
    explicit loopback(completion_channel& channel, rdma_asio::cq_options options = {})
        : send_cq(channel, 2 * slots, options), recv_cq(channel, 2 * slots, options),
          peer_cq(channel, 2 * slots, options) {
        ibv_context* ctx = send_cq.native_handle()->context;
        pd = make_pd(ctx);
        send_buf = std::make_unique<registered_buffer>(pd.get(), slots * message_size);
        recv_buf = std::make_unique<registered_buffer>(pd.get(), slots * message_size);
        sender = make_rc_qp(pd.get(), send_cq.native_handle(), peer_cq.native_handle(), nullptr,
                            2 * slots);
        receiver = make_rc_qp(pd.get(), peer_cq.native_handle(), recv_cq.native_handle(), nullptr,
                              2 * slots);
        connect_rc(ctx, sender.get(), receiver->qp_num);
        connect_rc(ctx, receiver.get(), sender->qp_num);
    }
    ~loopback() {
        receiver.reset();
        sender.reset();
    }

    // Catch2 is not thread-safe: the try_ forms, for handlers that may run on an
    // io_context thread, report failure to the caller, who counts it in its tally.
    void post_receive(int slot) { REQUIRE(try_post_receive(slot)); }
    void post_message(std::uint64_t seq) { REQUIRE(try_post_message(seq)); }

    bool try_post_receive(int slot) {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(recv_buf->bytes.data() + slot * message_size),
                    message_size, recv_buf->mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(slot);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        return ibv_post_recv(receiver.get(), &wr, &bad) == 0;
    }
    // Sends message number `seq` from slot seq % slots.
    bool try_post_message(std::uint64_t seq) {
        char* p = send_buf->bytes.data() + (seq % slots) * message_size;
        std::memcpy(p, &seq, sizeof seq);
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(p), message_size, send_buf->mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(sender.get(), &wr, &bad) == 0;
    }
    std::uint64_t received_seq(std::uint64_t slot) const {
        std::uint64_t seq;
        std::memcpy(&seq, recv_buf->bytes.data() + slot * message_size, sizeof seq);
        return seq;
    }

    completion_queue send_cq, recv_cq, peer_cq;
    pd_ptr pd;
    std::unique_ptr<registered_buffer> send_buf, recv_buf;
    qp_ptr sender, receiver;
};

// What a traffic run found.
struct tally {
    std::uint64_t sent = 0, received = 0, out_of_order = 0, errors = 0;
};

asio::awaitable<void> send_messages(loopback& lb, std::uint64_t total, tally& t) {
    std::array<ibv_wc, 16> wcs;
    std::uint64_t posted = 0;
    for (; posted < std::min<std::uint64_t>(slots, total); ++posted)
        t.errors += !lb.try_post_message(posted);
    while (t.sent < total) {
        std::size_t n = co_await lb.send_cq.async_poll(wcs, asio::use_awaitable);
        for (std::size_t i = 0; i < n; ++i) {
            if (wcs[i].status != IBV_WC_SUCCESS || wcs[i].wr_id != t.sent)
                ++t.errors;
            ++t.sent;
            if (posted < total)
                t.errors += !lb.try_post_message(posted++);
        }
    }
}

// snippet-begin: receive-loop
asio::awaitable<void> receive_messages(loopback& lb, std::uint64_t total, tally& t) {
    std::array<ibv_wc, 16> wcs;
    while (t.received < total) {
        std::size_t n = co_await lb.recv_cq.async_poll(wcs, asio::use_awaitable);
        for (std::size_t i = 0; i < n; ++i) {
            if (wcs[i].status != IBV_WC_SUCCESS)
                ++t.errors;
            if (lb.received_seq(wcs[i].wr_id) != t.received)
                ++t.out_of_order;
            ++t.received;
            t.errors += !lb.try_post_receive(static_cast<int>(wcs[i].wr_id));
        }
    }
}
// snippet-end

// One message per millisecond: the receiver is waiting on an empty, armed CQ when
// each arrives, so each costs a channel event.
asio::awaitable<void> paced_sends(loopback& lb, std::uint64_t total, tally& t) {
    std::array<ibv_wc, 4> wcs;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (std::uint64_t seq = 0; seq < total; ++seq) {
        timer.expires_after(1ms);
        co_await timer.async_wait(asio::use_awaitable);
        t.errors += !lb.try_post_message(seq);
        std::size_t n = co_await lb.send_cq.async_poll(wcs, asio::use_awaitable);
        t.errors += n != 1 || wcs[0].wr_id != seq;
        ++t.sent;
    }
}

struct device_fixture {
    rdma_asio::context ctx{test_device_name()};
    asio::io_context ioc;
    completion_channel channel{ioc, ctx};
};

} // namespace

TEST_CASE_METHOD(device_fixture, "100 000 sends reach a coroutine in order, none lost",
                 "[completion_queue]") {
    loopback lb(channel);
    for (int s = 0; s < slots; ++s)
        lb.post_receive(s);
    const std::uint64_t total = 100000;
    tally t;
    asio::co_spawn(ioc, receive_messages(lb, total, t), asio::detached);
    asio::co_spawn(ioc, send_messages(lb, total, t), asio::detached);
    ioc.run_for(300s);
    CHECK(t.received == total);
    CHECK(t.sent == total);
    CHECK(t.out_of_order == 0);
    CHECK(t.errors == 0);
    auto c = lb.recv_cq.counters();
    UNSCOPED_INFO("recv CQ: events " << c.events << ", ack calls " << c.ack_calls << ", empty "
                                     << c.empty_wakeups << ", repoll hits " << c.repoll_hits);
    CHECK(c.completions == total);
    CHECK(c.ack_calls == c.events / 64);
    CHECK(channel.counters().events >= c.events);
}

TEST_CASE_METHOD(device_fixture, "100 000 sends reach callbacks in order, none lost",
                 "[completion_queue]") {
    loopback lb(channel);
    for (int s = 0; s < slots; ++s)
        lb.post_receive(s);
    const std::uint64_t total = 100000;
    tally t;
    std::array<ibv_wc, 16> recv_wcs, send_wcs;
    std::uint64_t posted = 0;

    std::function<void()> receive = [&] {
        lb.recv_cq.async_poll(recv_wcs, [&](std::error_code ec, std::size_t n) {
            if (ec)
                return;
            for (std::size_t i = 0; i < n; ++i) {
                t.errors += recv_wcs[i].status != IBV_WC_SUCCESS;
                t.out_of_order += lb.received_seq(recv_wcs[i].wr_id) != t.received;
                ++t.received;
                lb.post_receive(static_cast<int>(recv_wcs[i].wr_id));
            }
            if (t.received < total)
                receive();
        });
    };
    std::function<void()> send = [&] {
        lb.send_cq.async_poll(send_wcs, [&](std::error_code ec, std::size_t n) {
            if (ec)
                return;
            for (std::size_t i = 0; i < n; ++i) {
                t.errors += send_wcs[i].status != IBV_WC_SUCCESS || send_wcs[i].wr_id != t.sent;
                ++t.sent;
                if (posted < total)
                    lb.post_message(posted++);
            }
            if (t.sent < total)
                send();
        });
    };
    for (; posted < slots; ++posted)
        lb.post_message(posted);
    receive();
    send();
    ioc.run_for(300s);
    CHECK(t.received == total);
    CHECK(t.sent == total);
    CHECK(t.out_of_order == 0);
    CHECK(t.errors == 0);
}

TEST_CASE_METHOD(device_fixture, "four CQs on one channel: each completion reaches its CQ",
                 "[completion_queue]") {
    // Two pairs of QPs: pair 1 uses send_cq/recv_cq/peer_cq of lb1, pair 2 of lb2:
    // six CQs on one channel, four of them with waiters.
    loopback lb1(channel), lb2(channel);
    for (int s = 0; s < slots; ++s) {
        lb1.post_receive(s);
        lb2.post_receive(s);
    }
    const std::uint64_t total = 2000;
    tally t1, t2;
    asio::co_spawn(ioc, receive_messages(lb1, total, t1), asio::detached);
    asio::co_spawn(ioc, send_messages(lb1, total, t1), asio::detached);
    asio::co_spawn(ioc, receive_messages(lb2, total, t2), asio::detached);
    asio::co_spawn(ioc, send_messages(lb2, total, t2), asio::detached);
    ioc.run_for(120s);
    for (tally* t : {&t1, &t2}) {
        CHECK(t->received == total);
        CHECK(t->sent == total);
        CHECK(t->out_of_order == 0);
        CHECK(t->errors == 0); // a completion of another QP would show here
    }
    CHECK(lb1.recv_cq.counters().completions == total);
    CHECK(lb2.send_cq.counters().completions == total);
}

TEST_CASE_METHOD(device_fixture, "an event that finds the CQ empty is handled quietly",
                 "[completion_queue]") {
    loopback lb(channel);
    lb.post_receive(0);
    lb.post_receive(1);
    lb.recv_cq.request_notify(); // armed: the next completion raises an event
    lb.post_message(0);
    // Take the completion behind the library's back, as a poll after a re-arm would.
    ibv_wc wc{};
    int got = 0;
    for (int i = 0; i < 500 && got == 0; ++i) {
        got = ibv_poll_cq(lb.recv_cq.native_handle(), 1, &wc);
        std::this_thread::sleep_for(2ms);
    }
    REQUIRE(got == 1);

    std::array<ibv_wc, 4> wcs;
    std::size_t delivered = 0;
    lb.recv_cq.async_poll(wcs, [&](std::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        delivered = n;
    });
    ioc.run_for(500ms); // the event arrives, the CQ is empty, the wait goes on
    CHECK(delivered == 0);
    CHECK(lb.recv_cq.counters().empty_wakeups == 1);

    ioc.restart();
    lb.post_message(1);
    ioc.run_for(5s);
    CHECK(delivered == 1);
    CHECK(wcs[0].opcode == IBV_WC_RECV);
}

TEST_CASE_METHOD(device_fixture,
                 "a wake-up delivers completions first and the next wait reads the owed event",
                 "[completion_queue]") {
    loopback lb(channel);
    lb.post_receive(0);
    lb.post_receive(1);
    std::array<ibv_wc, 4> wcs;
    std::size_t delivered = 0;
    auto store = [&](std::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        delivered = n;
    };
    lb.recv_cq.async_poll(wcs, store); // empty: arms and waits
    ioc.run_for(200ms);
    REQUIRE(delivered == 0);
    lb.post_message(0);
    ioc.restart();
    ioc.run_for(5s);
    REQUIRE(delivered == 1);
    CHECK(wcs[0].opcode == IBV_WC_RECV);
    auto c = lb.recv_cq.counters();
    CHECK(c.wake_hits == 1);
    CHECK(c.arms == 1);
    CHECK(c.events == 0); // not read on the way to the handler

    // The next wait reads the owed event, finds the CQ empty without counting an
    // empty wake-up, re-arms, and gets the next completion.
    delivered = 0;
    lb.recv_cq.async_poll(wcs, store);
    ioc.restart();
    ioc.run_for(300ms);
    CHECK(delivered == 0);
    c = lb.recv_cq.counters();
    CHECK(c.events == 1);
    CHECK(c.empty_wakeups == 0);
    CHECK(c.arms == 2);
    lb.post_message(1);
    ioc.restart();
    ioc.run_for(5s);
    CHECK(delivered == 1);
    CHECK(lb.recv_cq.counters().completions == 2);
}

TEST_CASE_METHOD(device_fixture,
                 "arming does not report a CQE already there but async_poll finds it",
                 "[completion_queue]") {
    loopback lb(channel);
    lb.post_receive(0);
    lb.post_message(0);
    std::this_thread::sleep_for(300ms); // the CQE lands while nothing is armed
    lb.recv_cq.request_notify();

    bool event = false;
    asio::cancellation_signal signal;
    lb.recv_cq.async_wait_event(
        asio::bind_cancellation_slot(signal.slot(), [&](std::error_code ec) { event = !ec; }));
    ioc.run_for(500ms);
    CHECK_FALSE(event); // no event for the CQE that was there before the arm
    signal.emit(asio::cancellation_type::terminal);
    ioc.restart();
    ioc.run_for(1s);

    std::array<ibv_wc, 4> wcs;
    std::size_t delivered = 0;
    lb.recv_cq.async_poll(wcs, [&](std::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        delivered = n;
    });
    ioc.restart();
    ioc.run_for(5s);
    CHECK(delivered == 1);
}

TEST_CASE_METHOD(device_fixture, "a cancelled wait loses no completion", "[completion_queue]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    loopback lb(channel);
    lb.post_receive(0);
    std::array<ibv_wc, 4> wcs;
    asio::cancellation_signal signal;
    std::error_code first;
    lb.recv_cq.async_poll(
        wcs, asio::bind_cancellation_slot(signal.slot(),
                                          [&](std::error_code ec, std::size_t) { first = ec; }));
    ioc.run_for(100ms);
    signal.emit(type);
    ioc.restart();
    ioc.run_for(1s);
    CHECK(first == asio::error::operation_aborted);

    lb.post_message(0); // arrives after the cancellation
    std::size_t delivered = 0;
    lb.recv_cq.async_poll(wcs, [&](std::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        delivered = n;
    });
    ioc.restart();
    ioc.run_for(5s);
    CHECK(delivered == 1);
}

TEST_CASE_METHOD(device_fixture,
                 "acks are batched and destroying a CQ right after traffic is prompt",
                 "[completion_queue]") {
    rdma_asio::cq_options options;
    options.ack_batch = 16;
    auto lb = std::make_unique<loopback>(channel, options);
    for (int s = 0; s < slots; ++s)
        lb->post_receive(s);
    tally t;
    const std::uint64_t total = 500;
    asio::co_spawn(ioc, receive_messages(*lb, total, t), asio::detached);
    asio::co_spawn(ioc, paced_sends(*lb, total, t), asio::detached);
    ioc.run_for(120s);
    REQUIRE(t.received == total);
    auto c = lb->recv_cq.counters();
    UNSCOPED_INFO("events " << c.events << ", ack calls " << c.ack_calls << ", repoll hits "
                            << c.repoll_hits << ", empty " << c.empty_wakeups);
    CHECK(t.errors == 0);
    CHECK(c.events > total / 2);         // most completions needed an event
    CHECK(c.ack_calls == c.events / 16); // one call per full batch, never more
    // Destroying with unacked events (the remainder of a batch) must not hang.
    auto done = std::async(std::launch::async, [&] { lb.reset(); });
    CHECK(done.wait_for(10s) == std::future_status::ready);
}

TEST_CASE_METHOD(device_fixture, "destroying CQs with pending waits, then the channel",
                 "[completion_queue]") {
    auto lb = std::make_unique<loopback>(channel);
    std::array<ibv_wc, 4> wcs1, wcs2;
    std::error_code ec1, ec2;
    lb->recv_cq.async_poll(wcs1, [&](std::error_code ec, std::size_t) { ec1 = ec; });
    lb->send_cq.async_poll(wcs2, [&](std::error_code ec, std::size_t) { ec2 = ec; });
    ioc.run_for(100ms);
    auto done = std::async(std::launch::async, [&] {
        lb.reset();
        channel = completion_channel(ioc, ctx); // the old channel goes with its last CQ
    });
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    ioc.restart();
    ioc.run_for(1s);
    CHECK(ec1 == asio::error::operation_aborted);
    CHECK(ec2 == asio::error::operation_aborted);
}

TEST_CASE("a multi-threaded io_context with strands loses no completion",
          "[completion_queue][mt]") {
    rdma_asio::context ctx(test_device_name());
    asio::io_context ioc;
    completion_channel channel(ioc, ctx);
    loopback lb1(channel), lb2(channel);
    for (int s = 0; s < slots; ++s) {
        lb1.post_receive(s);
        lb2.post_receive(s);
    }
    const std::uint64_t total = 20000;
    tally t1, t2;
    auto strand1 = asio::make_strand(ioc);
    auto strand2 = asio::make_strand(ioc);
    asio::co_spawn(strand1, receive_messages(lb1, total, t1), asio::detached);
    asio::co_spawn(strand1, send_messages(lb1, total, t1), asio::detached);
    asio::co_spawn(strand2, receive_messages(lb2, total, t2), asio::detached);
    asio::co_spawn(strand2, send_messages(lb2, total, t2), asio::detached);
    std::thread other([&] { ioc.run_for(180s); });
    ioc.run_for(180s);
    other.join();
    for (tally* t : {&t1, &t2}) {
        CHECK(t->received == total);
        CHECK(t->sent == total);
        CHECK(t->out_of_order == 0);
        CHECK(t->errors == 0);
    }
}

TEST_CASE_METHOD(device_fixture, "a spin budget finds completions while spinning",
                 "[completion_queue]") {
    rdma_asio::cq_options options;
    options.spin = rdma_asio::spin_budget::fixed(std::chrono::microseconds(5000));
    loopback lb(channel, options);
    for (int s = 0; s < slots; ++s)
        lb.post_receive(s);
    tally t;
    const std::uint64_t total = 300;
    // The sender posts once a millisecond; the receiver spins for up to 5 ms,
    // so it finds each message while spinning, without arming.
    asio::co_spawn(ioc, receive_messages(lb, total, t), asio::detached);
    asio::co_spawn(ioc, paced_sends(lb, total, t), asio::detached);
    ioc.run_for(60s);
    CHECK(t.received == total);
    CHECK(t.errors == 0);
    CHECK(t.out_of_order == 0);
    auto c = lb.recv_cq.counters();
    UNSCOPED_INFO("spin hits " << c.spin_hits << ", events " << c.events << ", arms " << c.arms);
    CHECK(c.spin_hits > total / 2); // most completions came within the budget
    CHECK(c.completions == total);
}
