// Faults that soft-RoCE cannot produce, injected into the library's real event path:
// the binary wraps libibverbs' event calls (verbs_faults.hpp). The device, its
// async_fd, the completion channel and the CQs are rxe0's; the real fds drive Asio's
// reactor, and each burst is woken by one real event (SQ_DRAINED, or a completion
// on a CQ of its own). Bursts are larger than one drain takes: a wake-up drains only
// as many events as there are waiters, the next wait reads the rest.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "nothing_pending.hpp"
#include "test_device.hpp"
#include "verbs_faults.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <array>
#include <cerrno>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace rdma_asio::test;
using rdma_asio::async_event;
using rdma_asio::errc;
using rdma_asio::event_match;
using rdma_asio::event_type;
namespace faults = rdma_asio::test::faults;

namespace {

constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

// Runs `ioc` on `threads` threads (the test's own among them) until `done()` holds
// or `timeout` passes. `done` is read on the test's thread: it must lock what the
// handlers write.
void run_until(asio::io_context& ioc, int threads, const std::function<bool()>& done,
               std::chrono::milliseconds timeout) {
    ioc.restart();
    auto guard = asio::make_work_guard(ioc);
    std::vector<std::thread> others;
    for (int i = 1; i < threads; ++i)
        others.emplace_back([&] { ioc.run_for(timeout + 1s); });
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(10ms);
    guard.reset();
    ioc.stop();
    for (auto& t : others)
        t.join();
    ioc.restart();
}

// What a consumer saw of one event: type and element, enough to check order.
struct seen_event {
    event_type type;
    const void* object;
    bool operator==(const seen_event&) const = default;
};

seen_event seen_of(const ibv_async_event& raw) {
    async_event ev(raw);
    seen_event s{ev.type(), ev.object()};
    (void)ev.release(); // not ours to ack: it was never read
    return s;
}

std::vector<seen_event> seen_all(const std::vector<ibv_async_event>& events) {
    std::vector<seen_event> out;
    for (const auto& ev : events)
        out.push_back(seen_of(ev));
    return out;
}

// Shared by the consumers of one stream; written on io_context threads.
struct journal {
    std::mutex mutex;
    std::vector<seen_event> events;             // in delivery order, real SQ_DRAINED left out
    int drained = 0;                            // real SQ_DRAINED (the wake-ups)
    int removals = 0;                           // events for which is_removal() holds
    std::vector<rdma_asio::error_code> endings; // one per consumer that ended

    std::size_t count() {
        std::lock_guard lock(mutex);
        return events.size();
    }
    std::size_t ended() {
        std::lock_guard lock(mutex);
        return endings.size();
    }
};

// Takes every event until a wait fails.
asio::awaitable<void> consume(rdma_asio::async_event_stream& stream, journal& j) {
    for (;;) {
        auto [ec, ev] = co_await stream.async_next(as_tuple);
        std::lock_guard lock(j.mutex);
        if (ec) {
            j.endings.push_back(ec);
            co_return;
        }
        if (rdma_asio::is_removal(ev.type()))
            ++j.removals;
        if (ev.type() == event_type::sq_drained)
            ++j.drained;
        else
            j.events.push_back({ev.type(), ev.object()});
        // ev acks here
    }
}

// Waits once for an event that never comes (LID_CHANGE: RoCE has no LIDs).
asio::awaitable<void> wait_in_vain(rdma_asio::async_event_stream& stream, journal& j) {
    auto [ec, ev] =
        co_await stream.async_next(event_match::port(event_type::lid_change, 1), as_tuple);
    std::lock_guard lock(j.mutex);
    j.endings.push_back(ec);
}

struct stream_fixture {
    stream_fixture() {
        faults::reset();
        qp1 = make_rc_qp(pd.get(), cq.get(), cq.get());
        qp2 = make_rc_qp(pd.get(), cq.get(), cq.get());
    }
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~stream_fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
        stream.reset(); // acks what nobody claimed
        triggers.clear();
    }

    // One consumer of every event (`j`) and two waits for an event that never
    // comes (`vain`), all waiting when this returns.
    void start_consumer_and_two_in_vain(journal& j, journal& vain) {
        asio::co_spawn(ioc, consume(*stream, j), asio::detached);
        asio::co_spawn(ioc, wait_in_vain(*stream, vain), asio::detached);
        asio::co_spawn(ioc, wait_in_vain(*stream, vain), asio::detached);
        ioc.poll();
    }

    // After a removal: the consumer saw `expected`, then the removal event `last`
    // once, then device_removed; both waits in vain ended with device_removed.
    static void check_removal_seen(journal& j, journal& vain,
                                   const std::vector<seen_event>& expected, event_type last) {
        {
            std::lock_guard lock(j.mutex);
            REQUIRE(j.events.size() == expected.size() + 1);
            CHECK(j.events.back() == seen_event{last, nullptr});
            j.events.pop_back();
            CHECK(j.events == expected);
            CHECK(j.removals == 1);
            REQUIRE(j.endings.size() == 1);
            CHECK(j.endings[0] == errc::device_removed);
        }
        std::lock_guard lock(vain.mutex);
        REQUIRE(vain.endings.size() == 2);
        CHECK(vain.endings[0] == errc::device_removed);
        CHECK(vain.endings[1] == errc::device_removed);
    }

    // A real SQ_DRAINED on a fresh connected QP, 5-15 ms from now: wakes the reactor.
    void wake() { faults::raise_sq_drained(ctx.native_handle(), pd.get(), cq.get(), triggers); }

    // `n` events on the fixture's QPs and CQ, in a pattern that shows reordering.
    std::vector<ibv_async_event> burst(int n) const {
        std::vector<ibv_async_event> out;
        for (int i = 0; i < n; ++i) {
            switch (i % 5) {
            case 0:
                out.push_back(faults::qp_event(IBV_EVENT_QP_FATAL, qp1.get()));
                break;
            case 1:
                out.push_back(faults::cq_event(cq.get()));
                break;
            case 2:
                out.push_back(faults::qp_event(IBV_EVENT_QP_FATAL, qp2.get()));
                break;
            case 3:
                out.push_back(faults::qp_event(IBV_EVENT_QP_REQ_ERR, qp1.get()));
                break;
            default:
                out.push_back(faults::qp_event(IBV_EVENT_QP_ACCESS_ERR, qp2.get()));
            }
        }
        return out;
    }

    rdma_asio::context ctx{test_device_name()};
    pd_ptr pd = make_pd(ctx.native_handle());
    cq_ptr cq = make_cq(ctx.native_handle(), 256);
    qp_ptr qp1, qp2;
    std::vector<qp_ptr> triggers;
    asio::io_context ioc;
    std::optional<rdma_asio::async_event_stream> stream{std::in_place, ioc, ctx};
    const char* pending_on_purpose = nullptr;
};

void check_async_books(std::uint64_t injected) {
    const faults::async_books b = faults::async_counts();
    INFO("injected read " << b.injected_read << ", acked " << b.injected_acked << "; real read "
                          << b.real_read << ", acked " << b.real_acked << "; excess acks "
                          << b.excess_acks);
    CHECK(b.injected_read == injected);
    CHECK(b.injected_acked == injected);
    CHECK(b.real_acked == b.real_read);
    CHECK(b.excess_acks == 0);
}

} // namespace

TEST_CASE_METHOD(stream_fixture,
                 "async event bursts over many wake-ups reach three waiters once, in order",
                 "[fault][async_event_stream][mt]") {
    const int threads = GENERATE(1, 2);
    INFO("io_context threads: " << threads);
    journal j;
    // With two threads the three consumers could record out of order; one consumer
    // keeps the order observable there.
    const int consumers = threads == 1 ? 3 : 1;
    for (int c = 0; c < consumers; ++c)
        asio::co_spawn(ioc, consume(*stream, j), asio::detached);
    ioc.poll();

    std::vector<seen_event> expected;
    const int rounds = 4;
    for (int round = 0; round < rounds; ++round) {
        auto events = burst(250);
        for (const auto& ev : events)
            expected.push_back(seen_of(ev));
        faults::inject_async(ctx.native_handle(), events);
        wake();
        run_until(
            ioc, threads, [&] { return j.count() == expected.size(); }, 20s);
        REQUIRE(j.count() == expected.size());
    }
    // A little longer: nothing more arrives (no duplicate), the wake-ups are all in.
    run_until(
        ioc, threads,
        [&] {
            std::lock_guard l(j.mutex);
            return j.drained == rounds;
        },
        5s);
    stream->cancel();
    run_until(
        ioc, threads, [&] { return j.ended() == static_cast<std::size_t>(consumers); }, 5s);

    std::lock_guard lock(j.mutex);
    CHECK(j.events.size() == expected.size());
    CHECK(j.events == expected);
    CHECK(j.drained == rounds);
    CHECK(j.removals == 0);
    REQUIRE(j.endings.size() == static_cast<std::size_t>(consumers));
    for (const auto& ec : j.endings)
        CHECK(ec == asio::error::operation_aborted);
    CHECK(faults::pending_async(ctx.native_handle()) == 0);
    stream.reset();
    check_async_books(expected.size());
}

TEST_CASE_METHOD(stream_fixture,
                 "DEVICE_FATAL after a burst: the burst, the fatal event once, then every wait "
                 "ends with device_removed",
                 "[fault][async_event_stream]") {
    journal j, vain;
    start_consumer_and_two_in_vain(j, vain);

    auto events = burst(600);
    const std::vector<seen_event> expected = seen_all(events);
    events.push_back(faults::device_fatal());
    // After the fatal event nothing more may be read.
    const auto after = burst(5);
    events.insert(events.end(), after.begin(), after.end());
    faults::inject_async(ctx.native_handle(), events);
    wake();
    run_until(
        ioc, 1, [&] { return j.ended() == 1 && vain.ended() == 2; }, 20s);

    check_removal_seen(j, vain, expected, event_type::device_fatal);
    CHECK(stream->removed());
    CHECK(faults::pending_async(ctx.native_handle()) == after.size());

    rdma_asio::error_code later;
    int later_calls = 0;
    stream->async_next([&](rdma_asio::error_code ec, async_event) {
        later = ec;
        ++later_calls;
    });
    run_until(
        ioc, 1, [&] { return later_calls > 0; }, 5s);
    CHECK(later_calls == 1);
    CHECK(later == errc::device_removed);
    stream.reset();
    check_async_books(expected.size() + 1);
}

TEST_CASE_METHOD(stream_fixture,
                 "EIO on the async_fd after a burst: the burst, one removal event, then "
                 "every wait ends with device_removed",
                 "[fault][async_event_stream]") {
    journal j, vain;
    start_consumer_and_two_in_vain(j, vain);

    const auto events = burst(300);
    const std::vector<seen_event> expected = seen_all(events);
    faults::inject_async(ctx.native_handle(), events);
    faults::fail_async(ctx.native_handle(), EIO);
    wake();
    run_until(
        ioc, 1, [&] { return j.ended() == 1 && vain.ended() == 2; }, 20s);

    check_removal_seen(j, vain, expected, event_type::device_removed);
    faults::fail_async(ctx.native_handle(), 0);
    stream.reset();
    check_async_books(expected.size());
}

namespace {

// CQs A and B on one channel take the injected events; W's real completions wake
// the reactor.
struct channel_fixture {
    channel_fixture() {
        faults::reset();
        pd = make_pd(ctx.native_handle());
        buf = std::make_unique<registered_buffer>(pd.get(), 64);
        sender = make_rc_qp(pd.get(), waker.native_handle(), waker.native_handle());
        receiver = make_rc_qp(pd.get(), waker.native_handle(), waker.native_handle());
        connect_rc(ctx.native_handle(), sender.get(), receiver->qp_num);
        connect_rc(ctx.native_handle(), receiver.get(), sender->qp_num);
    }
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~channel_fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
        receiver.reset();
        sender.reset();
    }

    // An injected DEVICE_FATAL, read when a real SQ_DRAINED wakes the stream's fd.
    void inject_device_fatal() {
        faults::inject_async(ctx.native_handle(), {faults::device_fatal()});
        ibv_qp_attr sqd{};
        sqd.qp_state = IBV_QPS_SQD;
        sqd.en_sqd_async_notify = 1;
        REQUIRE(ibv_modify_qp(sender.get(), &sqd, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY) == 0);
    }

    // One real completion on W, armed: its event wakes the channel's fd.
    void wake() {
        waker.request_notify();
        post_recv(receiver.get(), *buf, 1);
        post_send(sender.get(), *buf, 2);
    }

    rdma_asio::context ctx{test_device_name()};
    asio::io_context ioc;
    rdma_asio::completion_channel channel{ioc, ctx};
    std::optional<rdma_asio::completion_queue> a{std::in_place, channel, 16};
    std::optional<rdma_asio::completion_queue> b{std::in_place, channel, 16};
    rdma_asio::completion_queue waker{channel, 64};
    pd_ptr pd;
    std::unique_ptr<registered_buffer> buf;
    qp_ptr sender, receiver;
    const char* pending_on_purpose = nullptr;
};

struct cq_tally {
    std::mutex mutex;
    std::uint64_t events = 0;
    std::vector<rdma_asio::error_code> endings;

    std::uint64_t got() {
        std::lock_guard lock(mutex);
        return events;
    }
    std::size_t ended() {
        std::lock_guard lock(mutex);
        return endings.size();
    }
};

asio::awaitable<void> count_events(rdma_asio::completion_queue& cq, cq_tally& t) {
    for (;;) {
        auto [ec] = co_await cq.async_wait(as_tuple);
        std::lock_guard lock(t.mutex);
        if (ec) {
            t.endings.push_back(ec);
            co_return;
        }
        ++t.events;
    }
}

} // namespace

TEST_CASE_METHOD(channel_fixture,
                 "completion event bursts on one channel: each CQ gets its events once, each "
                 "acked once",
                 "[fault][completion_queue][mt]") {
    const int threads = GENERATE(1, 2);
    INFO("io_context threads: " << threads);
    cq_tally ta, tb;
    asio::co_spawn(ioc, count_events(*a, ta), asio::detached);
    asio::co_spawn(ioc, count_events(*b, tb), asio::detached);
    ioc.poll();

    std::uint64_t want_a = 0, want_b = 0;
    ibv_cq* const cq_a = a->native_handle();
    ibv_cq* const cq_b = b->native_handle();
    for (int round = 0; round < 3; ++round) {
        std::vector<ibv_cq*> burst;
        for (int i = 0; i < 400; ++i) {
            const bool to_a = (i * 7 + round) % 3 != 0;
            burst.push_back(to_a ? cq_a : cq_b);
            ++(to_a ? want_a : want_b);
        }
        faults::inject_cq_events(channel.native_handle(), burst);
        wake();
        run_until(
            ioc, threads, [&] { return ta.got() == want_a && tb.got() == want_b; }, 20s);
        REQUIRE(ta.got() == want_a);
        REQUIRE(tb.got() == want_b);
    }
    // Nothing more comes for A or B.
    run_until(
        ioc, threads, [] { return false; }, 200ms);
    a->cancel();
    b->cancel();
    run_until(
        ioc, threads, [&] { return ta.ended() == 1 && tb.ended() == 1; }, 5s);
    CHECK(ta.got() == want_a);
    CHECK(tb.got() == want_b);
    REQUIRE(ta.ended() == 1);
    REQUIRE(tb.ended() == 1);
    CHECK(ta.endings[0] == asio::error::operation_aborted);
    CHECK(tb.endings[0] == asio::error::operation_aborted);
    CHECK(a->counters().events == want_a);
    CHECK(b->counters().events == want_b);

    a.reset(); // acks the rest of its batch before ibv_destroy_cq
    b.reset();
    for (auto [cq, want] : {std::pair{cq_a, want_a}, std::pair{cq_b, want_b}}) {
        const faults::cq_books books = faults::cq_counts(cq);
        INFO("injected " << books.injected_read << ", real " << books.real_read << ", acked "
                         << books.acked << ", excess " << books.excess_acks);
        CHECK(books.injected_read == want);
        CHECK(books.real_read == 0);
        CHECK(books.acked == want);
        CHECK(books.excess_acks == 0);
    }
}

TEST_CASE_METHOD(channel_fixture,
                 "EIO on the channel fd after a burst: every pending CQ wait ends with it, once",
                 "[fault][completion_queue]") {
    cq_tally ta, tb;
    asio::co_spawn(ioc, count_events(*a, ta), asio::detached);
    asio::co_spawn(ioc, count_events(*b, tb), asio::detached);
    ioc.poll();

    const std::uint64_t burst_size = 150;
    faults::inject_cq_events(channel.native_handle(),
                             std::vector<ibv_cq*>(burst_size, a->native_handle()));
    faults::fail_channel(channel.native_handle(), EIO);
    wake();
    run_until(
        ioc, 1, [&] { return ta.ended() == 1 && tb.ended() == 1; }, 20s);
    // Longer, to see a second ending if there were one.
    run_until(
        ioc, 1, [] { return false; }, 200ms);

    CHECK(ta.got() == burst_size);
    CHECK(tb.got() == 0);
    REQUIRE(ta.ended() == 1);
    REQUIRE(tb.ended() == 1);
    CHECK(ta.endings[0].value() == EIO);
    CHECK(tb.endings[0].value() == EIO);

    // A later wait fails the same way, at once.
    rdma_asio::error_code later;
    int later_calls = 0;
    b->async_wait([&](rdma_asio::error_code ec) {
        later = ec;
        ++later_calls;
    });
    run_until(
        ioc, 1, [&] { return later_calls > 0; }, 5s);
    CHECK(later_calls == 1);
    CHECK(later.value() == EIO);

    faults::fail_channel(channel.native_handle(), 0);
    ibv_cq* const cq_a = a->native_handle();
    a.reset();
    const faults::cq_books books = faults::cq_counts(cq_a);
    CHECK(books.injected_read == burst_size);
    CHECK(books.acked == burst_size);
    CHECK(books.excess_acks == 0);
}

TEST_CASE_METHOD(channel_fixture,
                 "DEVICE_FATAL ends every pending CQ wait with device_removed, once",
                 "[fault][completion_queue][cq_removal]") {
    rdma_asio::async_event_stream stream(ioc, ctx);
    journal j;
    asio::co_spawn(ioc, consume(stream, j), asio::detached);
    std::array<ibv_wc, 4> wcs{};
    std::vector<rdma_asio::error_code> poll_endings, wait_endings;
    a->async_poll(wcs, [&](rdma_asio::error_code ec, std::size_t) { poll_endings.push_back(ec); });
    b->async_wait([&](rdma_asio::error_code ec) { wait_endings.push_back(ec); });
    ioc.poll();

    inject_device_fatal();
    run_until(
        ioc, 1, [&] { return j.ended() == 1 && !poll_endings.empty() && !wait_endings.empty(); },
        10s);
    run_until(
        ioc, 1, [] { return false; }, 200ms); // a second ending would show now

    CHECK(j.ended() == 1);
    CHECK(stream.removed());
    REQUIRE(poll_endings.size() == 1);
    REQUIRE(wait_endings.size() == 1);
    CHECK(poll_endings[0] == errc::device_removed);
    CHECK(wait_endings[0] == errc::device_removed);
}

TEST_CASE_METHOD(channel_fixture,
                 "DEVICE_FATAL read on one io_context leaves the channels of another alone",
                 "[fault][completion_queue][cq_removal]") {
    // The announcement is per execution context: a stream tells the channels that
    // run on its own io_context, as Asio keeps per-context state in its services.
    asio::io_context other_ioc;
    rdma_asio::completion_channel other_channel{other_ioc, ctx};
    rdma_asio::completion_queue other_cq{other_channel, 16};
    rdma_asio::async_event_stream stream(ioc, ctx);
    journal j;
    asio::co_spawn(ioc, consume(stream, j), asio::detached);
    std::vector<rdma_asio::error_code> here, there;
    a->async_wait([&](rdma_asio::error_code ec) { here.push_back(ec); });
    other_cq.async_wait([&](rdma_asio::error_code ec) { there.push_back(ec); });
    ioc.poll();
    other_ioc.poll();

    inject_device_fatal();
    run_until(
        ioc, 1, [&] { return j.ended() == 1 && !here.empty(); }, 10s);
    run_until(
        other_ioc, 1, [&] { return !there.empty(); }, 200ms);

    REQUIRE(here.size() == 1);
    CHECK(here[0] == errc::device_removed);
    CHECK(there.empty()); // before: device_removed, from the other context's stream
    CHECK(other_cq.is_open());

    // The other context's wait is still pending: cancel ends it, once.
    other_cq.cancel();
    run_until(
        other_ioc, 1, [&] { return !there.empty(); }, 10s);
    REQUIRE(there.size() == 1);
    CHECK(there[0] == asio::error::operation_aborted);
}
