// The shared mechanism itself, on a minimal source: a pipe whose bytes are events.
#include "rdma_asio/detail/event_dispatcher.hpp"

#include <catch2/catch.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;

namespace {

// The objects that events belong to: byte / 10 (object 0: events 0-9, ...).
int objects[26];
const void* object(int n) {
    return &objects[n];
}
// The events that retirement dropped, in order.
std::vector<int> discarded;

// One byte per event; the value is the byte.
class pipe_source {
public:
    using value_type = int;

    static bool concerns(const int& ev, const void* obj) noexcept { return object(ev / 10) == obj; }
    static void discard(int&& ev, const void*) noexcept { discarded.push_back(ev); }

    explicit pipe_source(int read_fd) : fd_(read_fd) {}
    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept { return fd_; }
    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        unsigned char byte;
        while (sink.more() && ::read(fd_, &byte, 1) == 1)
            sink.push(int{byte});
    }
    void close() noexcept {}

private:
    int fd_;
};

struct fixture {
    fixture() {
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        dispatcher = std::make_shared<dispatcher_type>(ioc.get_executor(), fds[0]);
        std::error_code ec;
        dispatcher->open(ec);
        REQUIRE_FALSE(ec);
    }
    ~fixture() {
        dispatcher->close();
        ::close(fds[0]);
        ::close(fds[1]);
    }
    void write_event(unsigned char value) { REQUIRE(::write(fds[1], &value, 1) == 1); }

    int fds[2] = {-1, -1};
    asio::io_context ioc;
    using dispatcher_type = rdma_asio::detail::event_dispatcher<pipe_source>;
    std::shared_ptr<dispatcher_type> dispatcher;
};

struct result {
    std::error_code ec;
    int value = -1;
    bool done = false;
};

auto store(result& r) {
    return [&r](std::error_code ec, int value) { r = {ec, value, true}; };
}

// The waits of one object: its events only, cancelled and retired with it.
struct match_object {
    int n;
    bool operator()(int ev) const noexcept { return ev / 10 == n; }
    const void* key() const noexcept { return object(n); }
};

} // namespace

TEST_CASE_METHOD(fixture, "inject hands an event to the waiter, in order with drained ones",
                 "[event_dispatcher]") {
    result first, second;
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(first));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(second));
    REQUIRE(dispatcher->inject(200));
    write_event(7);
    ioc.run_for(2s);
    REQUIRE(first.done);
    REQUIRE_FALSE(first.ec);
    CHECK(first.value == 200);
    REQUIRE(second.done);
    CHECK(second.value == 7);
}

TEST_CASE_METHOD(fixture, "an injected event that satisfies the last waiter leaves no reactor wait",
                 "[event_dispatcher]") {
    result only;
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(only));
    ioc.poll(); // the wait is registered with the reactor
    REQUIRE(dispatcher->inject(5));
    ioc.run_for(2s);
    REQUIRE(only.done);
    CHECK(only.value == 5);
    // run_for returned because nothing was left, not because time ran out.
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "an injected event nobody waits for is kept for the next matching wait",
                 "[event_dispatcher]") {
    REQUIRE(dispatcher->inject(42));
    REQUIRE(dispatcher->inject(43));
    CHECK(dispatcher->queued() == 2);
    result odd;
    dispatcher->async_next([](int v) { return v % 2 == 1; }, store(odd));
    ioc.run_for(2s);
    REQUIRE(odd.done);
    CHECK(odd.value == 43);
    CHECK(dispatcher->queued() == 1);
}

TEST_CASE_METHOD(fixture, "inject with then_fail delivers once, then fails every other wait",
                 "[event_dispatcher]") {
    const auto removed = std::make_error_code(std::errc::no_such_device);
    result a, b, later;
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(a));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(b));
    REQUIRE(dispatcher->inject(1, removed));
    ioc.run_for(2s);
    REQUIRE(a.done);
    CHECK_FALSE(a.ec);
    CHECK(a.value == 1);
    REQUIRE(b.done);
    CHECK(b.ec == removed);
    // Drained events after the failure are not read; injected ones are refused.
    write_event(9);
    CHECK_FALSE(dispatcher->inject(2));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(later));
    ioc.restart();
    ioc.run_for(2s);
    REQUIRE(later.done);
    CHECK(later.ec == removed);
}

TEST_CASE_METHOD(fixture, "inject after close is refused", "[event_dispatcher]") {
    dispatcher->close();
    CHECK_FALSE(dispatcher->inject(5));
    CHECK(dispatcher->queued() == 0);
}

namespace {
// Completes on a wake-up without an event, with a marker value, while `ready` is set.
struct wake_matcher {
    bool* ready;
    bool operator()(int) const noexcept { return true; }
    bool on_wake(int& out) const noexcept {
        if (!*ready)
            return false;
        out = -2;
        return true;
    }
};
} // namespace

TEST_CASE_METHOD(fixture, "a matcher may complete on a wake-up before anything is read",
                 "[event_dispatcher]") {
    bool ready = true;
    result woken;
    dispatcher->async_next(wake_matcher{&ready}, store(woken));
    write_event(5);
    ioc.run_for(2s);
    REQUIRE(woken.done);
    CHECK(woken.value == -2);
    // The event was not read: the next wait gets it.
    result next;
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(next));
    ioc.restart();
    ioc.run_for(2s);
    REQUIRE(next.done);
    CHECK(next.value == 5);
}

TEST_CASE_METHOD(fixture, "a matcher that declines the wake-up gets the event as usual",
                 "[event_dispatcher]") {
    bool ready = false;
    result woken;
    dispatcher->async_next(wake_matcher{&ready}, store(woken));
    write_event(6);
    ioc.run_for(2s);
    REQUIRE(woken.done);
    CHECK(woken.value == 6);
    CHECK(dispatcher->queued() == 0);
}

namespace {
// Takes events up to `limit`; refuses larger ones with message_size, reporting them.
struct at_most {
    int limit;
    bool operator()(int) const noexcept { return true; }
    std::error_code refuse(int ev, int& out) const {
        if (ev <= limit)
            return {};
        out = ev;
        return asio::error::message_size;
    }
};
} // namespace

TEST_CASE_METHOD(fixture, "a refusing matcher fails its waiter and leaves the event in its place",
                 "[event_dispatcher]") {
    result refused_live, refused_queued, taken, next;
    dispatcher->async_next(at_most{10}, store(refused_live));
    dispatcher->async_next(at_most{100}, store(taken));
    write_event(50);
    ioc.run_for(2s);
    // Delivered live: the first waiter refuses, the second (in line) takes it.
    REQUIRE(refused_live.done);
    CHECK(refused_live.ec == asio::error::message_size);
    CHECK(refused_live.value == 50);
    REQUIRE(taken.done);
    CHECK_FALSE(taken.ec);
    CHECK(taken.value == 50);

    // Queued: refused without leaving the queue; order kept for the next waiter.
    REQUIRE(dispatcher->inject(60));
    REQUIRE(dispatcher->inject(5));
    ioc.restart();
    dispatcher->async_next(at_most{10}, store(refused_queued));
    ioc.run_for(2s);
    CHECK(refused_queued.ec == asio::error::message_size);
    CHECK(dispatcher->queued() == 2);
    ioc.restart();
    dispatcher->async_next(at_most{100}, store(next));
    ioc.run_for(2s);
    CHECK(next.value == 60);
}

TEST_CASE_METHOD(fixture, "a wait cancelled after it took an event gives it back",
                 "[event_dispatcher][cancellation]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    REQUIRE(dispatcher->inject(11));
    REQUIRE(dispatcher->inject(12));
    result cancelled, next, after;
    asio::cancellation_signal signal;
    // Takes 11 at once; its handler is queued, not run yet, when the signal comes.
    dispatcher->async_next(rdma_asio::detail::match_any{},
                           asio::bind_cancellation_slot(signal.slot(), store(cancelled)));
    CHECK(dispatcher->queued() == 1);
    signal.emit(type);
    ioc.run_for(2s);
    REQUIRE(cancelled.done);
    CHECK(cancelled.ec == asio::error::operation_aborted);
    CHECK(dispatcher->queued() == 2);
    // The given-back event is first again, ahead of the one behind it.
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(next));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(after));
    ioc.restart();
    ioc.run_for(2s);
    REQUIRE(next.done);
    CHECK(next.value == 11);
    REQUIRE(after.done);
    CHECK(after.value == 12);
}

TEST_CASE_METHOD(fixture, "a given-back event goes to a wait already pending",
                 "[event_dispatcher][cancellation]") {
    REQUIRE(dispatcher->inject(21));
    result cancelled, pending;
    asio::cancellation_signal signal;
    dispatcher->async_next(rdma_asio::detail::match_any{},
                           asio::bind_cancellation_slot(signal.slot(), store(cancelled)));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(pending)); // nothing left: waits
    signal.emit(asio::cancellation_type::terminal);
    ioc.run_for(2s);
    REQUIRE(cancelled.done);
    CHECK(cancelled.ec == asio::error::operation_aborted);
    REQUIRE(pending.done);
    CHECK_FALSE(pending.ec);
    CHECK(pending.value == 21);
    CHECK(dispatcher->queued() == 0);
}

TEST_CASE_METHOD(fixture, "a late signal after the handler ran changes nothing",
                 "[event_dispatcher][cancellation]") {
    REQUIRE(dispatcher->inject(31));
    result done;
    asio::cancellation_signal signal;
    dispatcher->async_next(rdma_asio::detail::match_any{},
                           asio::bind_cancellation_slot(signal.slot(), store(done)));
    ioc.run_for(2s);
    REQUIRE(done.done);
    CHECK(done.value == 31);
    signal.emit(asio::cancellation_type::terminal);
    CHECK(dispatcher->queued() == 0);
}

namespace {
// An I/O object in miniature: owns a dispatcher, as every rdma_asio object does.
struct pipe_object {
    explicit pipe_object(asio::io_context& ioc) {
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        dispatcher = std::make_shared<rdma_asio::detail::event_dispatcher<pipe_source>>(
            ioc.get_executor(), fds[0]);
        std::error_code ec;
        dispatcher->open(ec);
    }
    ~pipe_object() {
        dispatcher->close();
        ::close(fds[0]);
        ::close(fds[1]);
    }
    int fds[2] = {-1, -1};
    std::shared_ptr<rdma_asio::detail::event_dispatcher<pipe_source>> dispatcher;
};

asio::awaitable<void> wait_forever(std::shared_ptr<pipe_object> object, bool& resumed) {
    co_await object->dispatcher->async_next(rdma_asio::detail::match_any{}, asio::use_awaitable);
    resumed = true;
}
} // namespace

TEST_CASE("destroying the io_context frees what a pending wait's handler owns",
          "[event_dispatcher][shutdown]") {
    std::weak_ptr<pipe_object> by_callback, by_coroutine;
    bool invoked = false, resumed = false;
    {
        asio::io_context ioc;
        auto a = std::make_shared<pipe_object>(ioc);
        auto b = std::make_shared<pipe_object>(ioc);
        by_callback = a;
        by_coroutine = b;
        // The handler owns the object that owns the dispatcher holding the handler.
        a->dispatcher->async_next(rdma_asio::detail::match_any{},
                                  [a, &invoked](std::error_code, int) { invoked = true; });
        asio::co_spawn(ioc, wait_forever(std::move(b), resumed), asio::detached);
        a.reset();
        ioc.run_for(100ms);
        REQUIRE_FALSE(by_callback.expired());
        REQUIRE_FALSE(by_coroutine.expired());
    }
    // As with Asio's own operations: destroyed, not invoked.
    CHECK(by_callback.expired());
    CHECK(by_coroutine.expired());
    CHECK_FALSE(invoked);
    CHECK_FALSE(resumed);
}

TEST_CASE_METHOD(fixture, "cancel(object) ends that object's waits only", "[event_dispatcher]") {
    result one, two, any;
    dispatcher->async_next(match_object{1}, store(one));
    dispatcher->async_next(match_object{2}, store(two));
    dispatcher->async_next(rdma_asio::detail::match_any{}, store(any));
    dispatcher->cancel(object(1));
    ioc.run_for(200ms);
    REQUIRE(one.done);
    CHECK(one.ec == asio::error::operation_aborted);
    CHECK_FALSE(two.done);
    CHECK_FALSE(any.done);

    write_event(25);
    write_event(13);
    ioc.restart();
    ioc.run_for(2s);
    REQUIRE(two.done);
    CHECK(two.value == 25);
    REQUIRE(any.done);
    CHECK(any.value == 13);
}

TEST_CASE_METHOD(fixture,
                 "retire(object) reads the fd, drops the object's events and ends its waits",
                 "[event_dispatcher]") {
    discarded.clear();
    result wait_of_1;
    dispatcher->async_next(match_object{1}, store(wait_of_1));
    REQUIRE(dispatcher->inject(21)); // read before: queued
    write_event(12);                 // in the fd, not read yet
    write_event(22);

    const auto r = dispatcher->retire(object(1));
    CHECK(r.retired);
    CHECK(r.discarded == 1);
    CHECK(discarded == std::vector<int>{12});
    CHECK(dispatcher->queued() == 2); // 21 and 22
    ioc.run_for(200ms);
    REQUIRE(wait_of_1.done);
    CHECK(wait_of_1.ec == asio::error::operation_aborted);

    write_event(13); // read while retired: dropped as it is read
    write_event(23);
    std::vector<int> got;
    for (int i = 0; i < 3; ++i) {
        result any;
        dispatcher->async_next(rdma_asio::detail::match_any{}, store(any));
        ioc.restart();
        ioc.run_for(2s);
        REQUIRE(any.done);
        got.push_back(any.value);
    }
    CHECK(got == std::vector<int>{21, 22, 23});
    CHECK(discarded == std::vector<int>{12, 13});

    // A new object at the same address: its events are events again.
    dispatcher->end_retirement(object(1));
    write_event(14);
    result again;
    dispatcher->async_next(match_object{1}, store(again));
    ioc.restart();
    ioc.run_for(2s);
    REQUIRE(again.done);
    CHECK(again.value == 14);
}

TEST_CASE_METHOD(fixture, "a retirement whose last step fails keeps the object's events",
                 "[event_dispatcher]") {
    discarded.clear();
    result wait_of_1;
    dispatcher->async_next(match_object{1}, store(wait_of_1));
    write_event(12);
    bool last_step_ran = false;
    const auto r = dispatcher->retire(object(1), [&] {
        last_step_ran = true;
        return false; // e.g. the destroy call failed with EBUSY
    });
    CHECK(last_step_ran);
    CHECK_FALSE(r.retired);
    CHECK(discarded.empty());
    ioc.run_for(200ms);
    REQUIRE(wait_of_1.done);
    CHECK(wait_of_1.ec == asio::error::operation_aborted); // only the waits ended

    write_event(13);
    std::vector<int> got;
    for (int i = 0; i < 2; ++i) {
        result next;
        dispatcher->async_next(match_object{1}, store(next));
        ioc.restart();
        ioc.run_for(2s);
        REQUIRE(next.done);
        got.push_back(next.value);
    }
    CHECK(got == std::vector<int>{12, 13});
}
