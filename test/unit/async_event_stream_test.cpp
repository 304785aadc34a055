#include "rdma_asio/async_event_stream.hpp"

#include <catch2/catch.hpp>

#include "counting_allocator.hpp"
#include "each_token.hpp"
#include "nothing_pending.hpp"
#include "recorder.hpp"

#include "fake_kernel.hpp"
#include "run_coroutine.hpp"
#include "run_until.hpp"

#include "asio_alias.hpp"

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

namespace async_event_stream_test {

using namespace std::chrono_literals;
using rdma_asio::async_event;
using rdma_asio::errc;
using rdma_asio::event_type;
using rdma_asio::test::fake_async_fd;
using rdma_asio::test::recorder;

namespace {

struct fixture {
    asio::io_context ioc;
    fake_async_fd kernel;
    rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
    }
    const char* pending_on_purpose = nullptr;
};

} // namespace

TEST_CASE_METHOD(fixture, "a callback receives the next event, never inline",
                 "[async_event_stream]") {
    recorder<async_event> r;
    stream.async_next(r.handler());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    CHECK(r.calls() == 0); // not inside the initiating call
    ioc.run_for(5s);
    CHECK(ioc.stopped()); // nothing left behind: no reactor wait outstanding
    REQUIRE(r.calls() == 1);
    CHECK_FALSE(r.ec());
    CHECK(r.value().type() == event_type::port_err);
    CHECK(r.value().port_num() == 1);
}

TEST_CASE_METHOD(fixture, "an event that arrived before the wait is delivered",
                 "[async_event_stream]") {
    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    recorder<async_event> r;
    stream.async_next(r.handler());
    CHECK(r.calls() == 0);
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::port_active);
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "an event stream wait completes with every completion token",
                 "[async_event_stream][tokens]") {
    auto got = rdma_asio::test::each_token<async_event>::complete(
        ioc, [&](auto&& token) { return stream.async_next(std::forward<decltype(token)>(token)); },
        [&] { kernel.raise(IBV_EVENT_PORT_ERR, 1); });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value().type() == event_type::port_err);
    CHECK(got.value().port_num() == 1);
}

TEST_CASE_METHOD(fixture,
                 "an event stream wait with a predicate completes with every completion token",
                 "[async_event_stream][tokens]") {
    auto got = rdma_asio::test::each_token<async_event>::complete(
        ioc,
        [&](auto&& token) {
            return stream.async_next(rdma_asio::event_match::port(event_type::port_active, 2),
                                     std::forward<decltype(token)>(token));
        },
        [&] {
            kernel.raise(IBV_EVENT_PORT_ACTIVE, 1); // not this one: stays queued
            kernel.raise(IBV_EVENT_PORT_ACTIVE, 2);
        });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value().type() == event_type::port_active);
    CHECK(got.value().port_num() == 2);
}

TEST_CASE_METHOD(fixture, "every completion token works", "[async_event_stream]") {
    SECTION("use_awaitable") {
        std::vector<event_type> got;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < 3; ++i) {
                    async_event ev = co_await stream.async_next(asio::use_awaitable);
                    got.push_back(ev.type());
                }
            },
            asio::detached);
        kernel.raise(IBV_EVENT_PORT_ERR, 1);
        kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
        kernel.raise(IBV_EVENT_GID_CHANGE, 1);
        ioc.run_for(5s);
        CHECK(got ==
              std::vector{event_type::port_err, event_type::port_active, event_type::gid_change});
    }
    SECTION("deferred") {
        auto op = stream.async_next(asio::experimental::deferred);
        kernel.raise(IBV_EVENT_LID_CHANGE, 1);
        recorder<async_event> r;
        std::move(op)(r.handler());
        ioc.run_for(5s);
        REQUIRE(r.calls() == 1);
        CHECK(r.value().type() == event_type::lid_change);
    }
    SECTION("as_tuple") {
        rdma_asio::error_code ec = asio::error::fault;
        event_type type{};
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [e, ev] =
                    co_await stream.async_next(asio::experimental::as_tuple(asio::use_awaitable));
                ec = e;
                type = ev.type();
            },
            asio::detached);
        kernel.raise(IBV_EVENT_PKEY_CHANGE, 1);
        ioc.run_for(5s);
        CHECK_FALSE(ec);
        CHECK(type == event_type::pkey_change);
    }
    SECTION("use_future") {
        std::future<async_event> f = stream.async_next(asio::use_future);
        kernel.raise(IBV_EVENT_SM_CHANGE, 1);
        std::thread runner([&] { ioc.run_for(5s); });
        REQUIRE(f.wait_for(5s) == std::future_status::ready);
        CHECK(f.get().type() == event_type::sm_change);
        runner.join();
    }
}

TEST_CASE_METHOD(fixture, "two waiters get one event each, in arrival order",
                 "[async_event_stream]") {
    recorder<async_event> first, second;
    stream.async_next(first.handler());
    stream.async_next(second.handler());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    ioc.run_for(5s);
    REQUIRE(first.calls() == 1);
    REQUIRE(second.calls() == 1);
    CHECK(first.value().type() == event_type::port_err);
    CHECK(second.value().type() == event_type::port_active);
    CHECK(stream.queued() == 0);
}

// The wake-up that reads the events runs the waits' handlers in place. A handler
// that throws there comes out of run(), as from any handler (it called
// std::terminate before), and the event of the wait after it is not lost.
TEST_CASE_METHOD(fixture,
                 "a handler that throws as the wake-up completes it comes out of run(), and the "
                 "next wait still gets its event",
                 "[async_event_stream]") {
    struct thrown {};
    int thrower_calls = 0;
    stream.async_next([&](rdma_asio::error_code, async_event) {
        ++thrower_calls;
        throw thrown{};
    });
    recorder<async_event> second;
    stream.async_next(second.handler());
    ioc.poll();
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    const int caught = rdma_asio::test::run_catching<thrown>(
        ioc, [&] { return thrower_calls > 0 && second.calls() > 0; }, 5s);
    CHECK(thrower_calls == 1);
    CHECK(caught == 1);
    REQUIRE(second.calls() == 1);
    CHECK(second.value().type() == event_type::port_active);
    // The stream goes on.
    recorder<async_event> third;
    stream.async_next(third.handler());
    kernel.raise(IBV_EVENT_GID_CHANGE, 1);
    ioc.restart();
    ioc.run_for(5s);
    REQUIRE(third.calls() == 1);
    CHECK(third.value().type() == event_type::gid_change);
    CHECK(stream.queued() == 0);
}

TEST_CASE_METHOD(fixture, "a cancelled wait takes no event", "[async_event_stream]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    asio::cancellation_signal signal;
    recorder<async_event> cancelled, next;
    stream.async_next(asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    ioc.poll();
    signal.emit(type);
    signal.emit(type); // a second signal has no effect
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    stream.async_next(next.handler());
    ioc.run_for(5s);
    REQUIRE(cancelled.calls() == 1);
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    CHECK_FALSE(static_cast<bool>(cancelled.value()));
    REQUIRE(next.calls() == 1);
    CHECK(next.value().type() == event_type::port_err);
    signal.emit(type); // after completion: nothing happens
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "cancel() aborts every pending wait and keeps queued events",
                 "[async_event_stream]") {
    recorder<async_event> a, b;
    stream.async_next(a.handler());
    stream.async_next(b.handler());
    ioc.poll();
    stream.cancel();
    ioc.run_for(5s);
    CHECK(a.ec() == asio::error::operation_aborted);
    CHECK(b.ec() == asio::error::operation_aborted);

    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    ioc.restart();
    recorder<async_event> c;
    stream.async_next(c.handler());
    ioc.run_for(5s);
    REQUIRE(c.calls() == 1);
    CHECK(c.value().type() == event_type::port_err);
}

TEST_CASE("a wait for one object's event skips others and finds earlier ones",
          "[async_event_stream]") {
    rdma_asio::test::fake_qp qa, qb; // outlive the stream, which acks what it still holds
    fixture f;
    auto& ioc = f.ioc;
    auto& kernel = f.kernel;
    auto& stream = f.stream;
    kernel.raise(IBV_EVENT_SQ_DRAINED, &qb.qp);
    kernel.raise(IBV_EVENT_SQ_DRAINED, &qa.qp);
    ioc.poll(); // nothing waits yet: nothing is read
    ioc.restart();

    recorder<async_event> for_a, any;
    stream.async_next(rdma_asio::event_match(event_type::sq_drained, &qa.qp), for_a.handler());
    ioc.run_for(5s);
    REQUIRE(for_a.calls() == 1);
    CHECK(for_a.value().qp() == &qa.qp);
    CHECK(stream.queued() == 1); // qb's event was read and kept

    ioc.restart();
    stream.async_next(any.handler());
    ioc.run_for(5s);
    REQUIRE(any.calls() == 1);
    CHECK(any.value().qp() == &qb.qp);

    // A filtered wait that comes first lets a later, unrelated event pass by.
    ioc.restart();
    recorder<async_event> port1, other;
    stream.async_next(rdma_asio::event_match::port(event_type::port_active, 1), port1.handler());
    stream.async_next(other.handler());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    ioc.run_for(5s);
    CHECK(port1.value().type() == event_type::port_active);
    CHECK(other.value().type() == event_type::port_err);
}

TEST_CASE("many waiters on a multi-threaded io_context with strands lose nothing",
          "[async_event_stream]") {
    asio::io_context ioc;
    fake_async_fd kernel;
    rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
    constexpr int events = 2000;
    constexpr int waiters = 4;
    std::mutex m;
    std::multiset<int> seen;
    std::atomic<int> received{0};

    for (int w = 0; w < waiters; ++w) {
        asio::co_spawn(
            asio::make_strand(ioc),
            [&]() -> asio::awaitable<void> {
                while (received.load() < events) {
                    auto [ec, ev] = co_await stream.async_next(
                        asio::experimental::as_tuple(asio::use_awaitable));
                    if (ec)
                        co_return;
                    {
                        std::lock_guard lock(m);
                        seen.insert(ev.port_num());
                    }
                    if (++received == events)
                        stream.cancel(); // release the other waiters
                }
            },
            asio::detached);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&] { ioc.run_for(20s); });
    for (int i = 1; i <= events; ++i)
        kernel.raise(IBV_EVENT_PORT_ACTIVE, static_cast<std::uint64_t>(i));
    for (auto& t : threads)
        t.join();
    CHECK(received.load() == events);
    CHECK(seen.size() == static_cast<std::size_t>(events));
    CHECK(std::set<int>(seen.begin(), seen.end()).size() == static_cast<std::size_t>(events));
    CHECK(*seen.begin() == 1);
    CHECK(*seen.rbegin() == events);
}

TEST_CASE_METHOD(fixture, "DEVICE_FATAL is delivered once, then every wait fails",
                 "[async_event_stream]") {
    recorder<async_event> first, second, later;
    stream.async_next(first.handler());
    stream.async_next(second.handler());
    kernel.raise(IBV_EVENT_DEVICE_FATAL, std::uint64_t{0});
    ioc.run_for(5s);
    REQUIRE(first.calls() == 1);
    CHECK_FALSE(first.ec());
    CHECK(first.value().type() == event_type::device_fatal);
    CHECK(rdma_asio::is_removal(first.value().type()));
    REQUIRE(second.calls() == 1);
    CHECK(second.ec() == errc::device_removed);
    CHECK(stream.removed());

    ioc.restart();
    stream.async_next(later.handler());
    ioc.run_for(5s);
    CHECK(later.ec() == errc::device_removed);
}

TEST_CASE_METHOD(fixture, "EIO on the async fd is a removal", "[async_event_stream]") {
    recorder<async_event> first, later;
    stream.async_next(first.handler());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    kernel.disassociate();
    ioc.run_for(5s);
    REQUIRE(first.calls() == 1);
    CHECK(first.value().type() == event_type::port_err); // what came before is not lost
    ioc.restart();
    stream.async_next(first.handler());
    stream.async_next(later.handler());
    ioc.run_for(5s);
    CHECK(first.calls() == 2);
    CHECK(first.value().type() == event_type::device_removed);
    CHECK(later.ec() == errc::device_removed);
}

TEST_CASE_METHOD(fixture, "deleting the uverbs node is a removal", "[async_event_stream]") {
    REQUIRE(stream.watching_removal());
    recorder<async_event> r, later;
    stream.async_next(r.handler());
    stream.async_next(later.handler());
    ioc.poll();
    kernel.remove_node();
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::device_removed);
    CHECK(later.ec() == errc::device_removed);
}

TEST_CASE("closing aborts waits and acks the events nobody claimed", "[async_event_stream]") {
    asio::io_context ioc;
    fake_async_fd kernel;
    rdma_asio::test::fake_cq cq;
    recorder<async_event> pending;
    {
        rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
        kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
        kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
        stream.async_next(rdma_asio::event_match(event_type::port_err), pending.handler());
        ioc.poll(); // reads both CQ events; neither matches
        CHECK(stream.queued() == 2);
        CHECK(cq.acks() == 0);
    }
    CHECK(cq.acks() == 2);
    ioc.run_for(5s);
    REQUIRE(pending.calls() == 1);
    CHECK(pending.ec() == asio::error::operation_aborted);
    // The fd is the kernel's: still open, its flags restored (not O_NONBLOCK).
    int flags = ::fcntl(kernel.context()->async_fd, F_GETFL);
    REQUIRE(flags >= 0);
    CHECK((flags & O_NONBLOCK) == 0);
}

TEST_CASE_METHOD(fixture, "a closed stream refuses waits with an error", "[async_event_stream]") {
    const int fd = stream.native_handle();
    rdma_asio::async_event_stream moved(std::move(stream));
    CHECK_FALSE(stream.is_open());
    CHECK(stream.native_handle() == -1);
    CHECK(moved.native_handle() == fd);
    recorder<async_event> on_moved_from;
    stream.async_next(on_moved_from.handler()); // completes, posted, as Asio's do
    CHECK(on_moved_from.calls() == 0);
    moved.close();
    CHECK_FALSE(moved.is_open());
    recorder<async_event> on_closed;
    moved.async_next(on_closed.handler());
    ioc.run_for(5s);
    REQUIRE(on_moved_from.calls() == 1);
    CHECK(on_moved_from.ec() == asio::error::bad_descriptor);
    REQUIRE(on_closed.calls() == 1);
    CHECK(on_closed.ec() == asio::error::bad_descriptor);
    CHECK(moved.get_executor() == stream.get_executor()); // a closed stream keeps its executor
    CHECK_THROWS_AS(moved.queued(), rdma_asio::system_error);
}

TEST_CASE_METHOD(fixture, "two streams cannot share one async fd", "[async_event_stream]") {
    try {
        rdma_asio::async_event_stream second = kernel.stream(ioc.get_executor());
        FAIL("a second stream on the same fd was accepted");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == rdma_asio::error_code(EEXIST, asio::error::get_system_category()));
        CHECK(std::string(e.what()).find("async_fd") != std::string::npos);
    }
    // On another io_context the fd is free; on this one, once the first stream closed.
    asio::io_context other;
    CHECK(kernel.stream(other.get_executor()).is_open());
    stream.close();
    rdma_asio::async_event_stream second = kernel.stream(ioc.get_executor());
    recorder<async_event> r;
    second.async_next(r.handler());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::port_err);
}

TEST_CASE_METHOD(fixture, "teardown acks an object's unclaimed events and drops new ones",
                 "[async_event_stream]") {
    rdma_asio::test::fake_cq cq;
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
    recorder<async_event> r;
    {
        auto guard = stream.teardown(&cq.cq);
        CHECK(guard.acked() == 2);
        CHECK(cq.acks() == 2);
        stream.async_next(r.handler());
        kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
        kernel.raise(IBV_EVENT_PORT_ERR, 1);
        ioc.run_for(5s);
        CHECK(cq.acks() == 3);
        REQUIRE(r.calls() == 1);
        CHECK(r.value().type() == event_type::port_err);
    }
    // Once the guard is gone, the object's events are delivered again.
    ioc.restart();
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
    stream.async_next(r.handler());
    ioc.run_for(5s);
    CHECK(r.calls() == 2);
    CHECK(r.value().cq() == &cq.cq);
}

TEST_CASE_METHOD(fixture,
                 "teardown and close take back an event whose handler has not run, and ack it",
                 "[async_event_stream]") {
    // ibv_destroy_cq waits for the ack of every event of the CQ that was read. An
    // event handed to a handler queued on an executor that does not run must not
    // make that wait endless.
    asio::io_context elsewhere; // not running
    rdma_asio::test::fake_cq cq;
    recorder<async_event> taken, other;
    kernel.raise(IBV_EVENT_CQ_ERR, &cq.cq);
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    stream.async_next(asio::bind_executor(elsewhere, taken.handler()));
    stream.async_next(asio::bind_executor(elsewhere, other.handler()));
    ioc.run_for(5s); // both events read and handed over; the handlers wait on `elsewhere`
    CHECK(cq.acks() == 0);
    {
        auto guard = stream.teardown(&cq.cq);
        CHECK(guard.acked() == 1);
        CHECK(cq.acks() == 1); // the destroy would not wait
    }
    elsewhere.run_for(5s);
    REQUIRE(taken.calls() == 1);
    CHECK(taken.ec() == asio::error::operation_aborted);
    CHECK_FALSE(taken.value());
    REQUIRE(other.calls() == 1); // not the CQ's: delivered
    CHECK_FALSE(other.ec());
    CHECK(other.value().type() == event_type::port_err);

    // close() does the same for every event still in a handler's hands.
    rdma_asio::test::fake_cq cq2;
    kernel.raise(IBV_EVENT_CQ_ERR, &cq2.cq);
    recorder<async_event> at_close;
    stream.async_next(asio::bind_executor(elsewhere, at_close.handler()));
    ioc.restart();
    ioc.run_for(5s);
    CHECK(cq2.acks() == 0);
    stream.close();
    CHECK(cq2.acks() == 1);
    elsewhere.restart();
    elsewhere.run_for(5s);
    REQUIRE(at_close.calls() == 1);
    CHECK(at_close.ec() == asio::error::operation_aborted);
}

TEST_CASE_METHOD(fixture,
                 "an event stream wait allocates through the handler's allocator and frees it",
                 "[async_event_stream][allocator]") {
    rdma_asio::test::allocation_count count;
    recorder<async_event> r;
    stream.async_next(
        asio::bind_allocator(rdma_asio::test::counting_allocator<void>(count), r.handler()));
    CHECK(count.allocations == 1); // the wait, which holds the handler
    CHECK(count.bytes_held > 0);
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::port_err);
    CHECK(count.deallocations == count.allocations);
    CHECK(count.bytes_held == 0);
}

TEST_CASE("a stream typed on io_context's executor, rebound to a default token and erased again",
          "[async_event_stream]") {
    asio::io_context ioc;
    fake_async_fd kernel;
    // snippet-begin: typed-executor
    // A stream whose handlers default to io_context's own executor type.
    using typed_stream = rdma_asio::basic_async_event_stream<asio::io_context::executor_type>;
    // snippet-end
    static_assert(std::is_same_v<typed_stream::executor_type, asio::io_context::executor_type>);
    static_assert(
        std::is_same_v<
            rdma_asio::async_event_stream::rebind_executor<asio::io_context::executor_type>::other,
            typed_stream>);
    static_assert(std::is_same_v<typed_stream::native_handle_type, int>);
    static_assert(!std::is_copy_constructible_v<typed_stream>);
    typed_stream stream = kernel.stream<typed_stream>(ioc.get_executor());
    CHECK(stream.get_executor() == ioc.get_executor());

    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    recorder<async_event> r;
    stream.async_next(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == event_type::port_active);

    // snippet-begin: as-default-on
    // The same stream whose waits default to use_awaitable.
    auto awaiting = asio::use_awaitable.as_default_on(std::move(stream));
    // snippet-end
    CHECK_FALSE(stream.is_open());
    kernel.raise(IBV_EVENT_PORT_ERR, 1);
    event_type seen{};
    ioc.restart();
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        async_event ev = co_await awaiting.async_next();
        seen = ev.type();
    }());
    CHECK(seen == event_type::port_err);

    // And back to any_io_executor by a converting move.
    rdma_asio::async_event_stream erased(std::move(awaiting));
    CHECK(erased.is_open());
    CHECK_FALSE(awaiting.is_open());
    kernel.raise(IBV_EVENT_LID_CHANGE, 1);
    recorder<async_event> last;
    erased.async_next(last.handler());
    ioc.restart();
    ioc.run_for(5s);
    REQUIRE(last.calls() == 1);
    CHECK(last.value().type() == event_type::lid_change);
}

TEST_CASE("open reports errors as error codes and refuses a second open", "[async_event_stream]") {
    asio::io_context ioc;
    rdma_asio::async_event_stream stream(ioc);
    CHECK_FALSE(stream.is_open());
    rdma_asio::error_code ec;
    rdma_asio::context closed;
    stream.open(closed, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(stream.is_open());
    stream.open(static_cast<ibv_context*>(nullptr), ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(stream.open(closed), rdma_asio::system_error);

    fake_async_fd kernel;
    stream = kernel.stream(ioc.get_executor());
    REQUIRE(stream.is_open());
    stream.open(closed, ec);
    CHECK(ec == asio::error::already_open);
    CHECK(stream.is_open());
}

} // namespace async_event_stream_test
