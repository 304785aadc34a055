#include "rdma_asio/devx_event_channel.hpp"

#include <catch2/catch.hpp>

#include "counting_allocator.hpp"
#include "each_token.hpp"
#include "nothing_pending.hpp"
#include "recorder.hpp"

#include "fake_devx_channel.hpp"
#include "rdma_asio/devx_eventfd.hpp"
#include "rdma_asio/error.hpp"
#include "run_coroutine.hpp"

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <fcntl.h>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace devx_event_channel_test {

using namespace std::chrono_literals;
using rdma_asio::devx_event_channel;
using rdma_asio::devx_event_data;
using rdma_asio::devx_event_info;
using rdma_asio::errc;
using rdma_asio::test::fake_devx_channel;
using rdma_asio::test::recorder;

namespace {

struct fixture {
    asio::io_context ioc;
    fake_devx_channel kernel{false};
    devx_event_channel channel = kernel.open_channel(ioc.get_executor());
    fake_devx_channel::eqe buffer{};
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
    }
    const char* pending_on_purpose = nullptr;
};

struct omit_fixture {
    asio::io_context ioc;
    fake_devx_channel kernel{true};
    devx_event_channel channel = kernel.open_channel(ioc.get_executor());
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~omit_fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
    }
    const char* pending_on_purpose = nullptr;
};

} // namespace

TEST_CASE_METHOD(fixture, "a read gets the cookie and the EQE, never inline", "[devx]") {
    recorder<devx_event_info> r;
    channel.async_next(asio::buffer(buffer), r.handler());
    kernel.raise(7);
    CHECK(r.calls() == 0); // not inside the initiating call
    ioc.run_for(5s);
    CHECK(ioc.stopped()); // nothing left behind: no reactor wait outstanding
    REQUIRE(r.calls() == 1);
    CHECK_FALSE(r.ec());
    CHECK(r.value().cookie == 7);
    CHECK(r.value().size == fake_devx_channel::eqe_size);
    CHECK(buffer == fake_devx_channel::eqe_for(7));
}

TEST_CASE_METHOD(fixture, "async_next completes with every completion token", "[devx][tokens]") {
    auto got = rdma_asio::test::each_token<devx_event_info>::complete(
        ioc,
        [&](auto&& token) {
            return channel.async_next(asio::buffer(buffer), std::forward<decltype(token)>(token));
        },
        [&] { kernel.raise(9); });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value().cookie == 9);
    CHECK(got.value().size == fake_devx_channel::eqe_size);
    CHECK(buffer == fake_devx_channel::eqe_for(9));
}

TEST_CASE_METHOD(fixture, "events come in order, and what no read waits for is kept with its bytes",
                 "[devx]") {
    for (std::uint64_t c = 1; c <= 5; ++c)
        kernel.raise(c);
    recorder<devx_event_info> first;
    channel.async_next(asio::buffer(buffer), first.handler());
    ioc.run_for(5s);
    REQUIRE(first.calls() == 1);
    CHECK(first.value().cookie == 1);
    // The read drained the channel to EAGAIN: the other four were read and kept.
    CHECK(kernel.reads() == 5);
    CHECK(channel.queued() == 4);

    std::vector<std::uint64_t> cookies;
    std::vector<bool> bytes_intact;
    ioc.restart();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 4; ++i) {
                fake_devx_channel::eqe b{};
                devx_event_info info =
                    co_await channel.async_next(asio::buffer(b), asio::use_awaitable);
                cookies.push_back(info.cookie);
                bytes_intact.push_back(b == fake_devx_channel::eqe_for(info.cookie));
            }
        },
        asio::detached);
    ioc.run_for(5s);
    CHECK(cookies == std::vector<std::uint64_t>{2, 3, 4, 5});
    CHECK(bytes_intact == std::vector<bool>(4, true));
    CHECK(channel.queued() == 0);
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "a DEVX read works with every completion token", "[devx]") {
    SECTION("callback") {
        recorder<devx_event_info> r;
        kernel.raise(11);
        channel.async_next(asio::buffer(buffer), r.handler());
        ioc.run_for(5s);
        REQUIRE(r.calls() == 1);
        CHECK(r.value().cookie == 11);
    }
    SECTION("use_awaitable") {
        std::uint64_t cookie = 0;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto info = co_await channel.async_next(asio::buffer(buffer), asio::use_awaitable);
                cookie = info.cookie;
            },
            asio::detached);
        kernel.raise(12);
        ioc.run_for(5s);
        CHECK(cookie == 12);
    }
    SECTION("deferred") {
        auto op = channel.async_next(asio::buffer(buffer), asio::experimental::deferred);
        kernel.raise(13);
        CHECK(kernel.reads() == 0); // a deferred operation has not started
        recorder<devx_event_info> r;
        std::move(op)(r.handler());
        ioc.run_for(5s);
        REQUIRE(r.calls() == 1);
        CHECK(r.value().cookie == 13);
    }
    SECTION("as_tuple") {
        rdma_asio::error_code ec = asio::error::fault;
        devx_event_info info;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [e, i] = co_await channel.async_next(
                    asio::buffer(buffer), asio::experimental::as_tuple(asio::use_awaitable));
                ec = e;
                info = i;
            },
            asio::detached);
        kernel.raise(14);
        ioc.run_for(5s);
        CHECK_FALSE(ec);
        CHECK(info.cookie == 14);
    }
    SECTION("use_future") {
        std::future<devx_event_info> f = channel.async_next(asio::buffer(buffer), asio::use_future);
        kernel.raise(15);
        std::thread runner([&] { ioc.run_for(5s); });
        REQUIRE(f.wait_for(5s) == std::future_status::ready);
        CHECK(f.get().cookie == 15);
        runner.join();
    }
}

TEST_CASE_METHOD(fixture, "a cancelled read takes no event", "[devx]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    asio::cancellation_signal signal;
    recorder<devx_event_info> cancelled, next;
    fake_devx_channel::eqe other{};
    channel.async_next(asio::buffer(other),
                       asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    ioc.poll();
    signal.emit(type);
    signal.emit(type); // a second signal has no effect
    kernel.raise(21);
    channel.async_next(asio::buffer(buffer), next.handler());
    ioc.run_for(5s);
    REQUIRE(cancelled.calls() == 1);
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    CHECK(other == fake_devx_channel::eqe{}); // nothing written into the cancelled buffer
    REQUIRE(next.calls() == 1);
    CHECK(next.value().cookie == 21);
    signal.emit(type); // after completion: nothing happens
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "cancel() aborts every read and keeps what was read", "[devx]") {
    recorder<devx_event_info> a, b;
    kernel.raise(31);
    kernel.raise(32);
    channel.async_next(asio::buffer(buffer), a.handler()); // takes 31, keeps 32
    ioc.run_for(5s);
    REQUIRE(a.value().cookie == 31);
    ioc.restart();
    channel.async_next(asio::buffer(buffer), b.handler());
    channel.cancel();
    ioc.run_for(5s);
    // b found 32 at once, before cancel() could reach it.
    REQUIRE(b.calls() == 1);
    CHECK_FALSE(b.ec());
    CHECK(b.value().cookie == 32);

    recorder<devx_event_info> c, d;
    ioc.restart();
    channel.async_next(asio::buffer(buffer), c.handler());
    ioc.poll();
    channel.cancel();
    kernel.raise(33);
    channel.async_next(asio::buffer(buffer), d.handler());
    ioc.run_for(5s);
    CHECK(c.ec() == asio::error::operation_aborted);
    REQUIRE(d.calls() == 1);
    CHECK(d.value().cookie == 33);
}

TEST_CASE_METHOD(fixture, "EOVERFLOW is reported once, in its place, and the channel goes on",
                 "[devx]") {
    kernel.raise(41);
    kernel.lose_events();
    kernel.raise(42);

    std::vector<rdma_asio::error_code> errors;
    std::vector<std::uint64_t> cookies;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 3; ++i) {
                auto [ec, info] = co_await channel.async_next(
                    asio::buffer(buffer), asio::experimental::as_tuple(asio::use_awaitable));
                errors.push_back(ec);
                cookies.push_back(info.cookie);
            }
        },
        asio::detached);
    ioc.run_for(5s);
    // The kernel reports the loss before what it still holds (the imitation too).
    REQUIRE(errors.size() == 3);
    CHECK(errors[0] == errc::events_lost);
    CHECK(errors[0].message().find("re-read") != std::string::npos);
    CHECK(errors[0] == std::errc::value_too_large);
    CHECK_FALSE(errors[1]);
    CHECK_FALSE(errors[2]);
    CHECK(cookies[1] == 41);
    CHECK(cookies[2] == 42);

    // Once only: the next read waits for a new event.
    ioc.restart();
    recorder<devx_event_info> later;
    channel.async_next(asio::buffer(buffer), later.handler());
    ioc.run_for(100ms);
    CHECK(later.calls() == 0);
    kernel.raise(43);
    ioc.run_for(5s);
    REQUIRE(later.calls() == 1);
    CHECK_FALSE(later.ec());
    CHECK(later.value().cookie == 43);
}

TEST_CASE_METHOD(fixture, "a loss read while nobody waits is kept, in order, once", "[devx]") {
    kernel.raise(51);
    kernel.lose_events();
    recorder<devx_event_info> first;
    channel.async_next(asio::buffer(buffer), first.handler());
    ioc.run_for(5s);
    REQUIRE(first.calls() == 1);
    CHECK(first.ec() == errc::events_lost);
    CHECK(channel.queued() == 1);

    ioc.restart();
    recorder<devx_event_info> second, third;
    channel.async_next(asio::buffer(buffer), second.handler());
    channel.async_next(asio::buffer(buffer), third.handler());
    ioc.run_for(100ms);
    REQUIRE(second.calls() == 1);
    CHECK_FALSE(second.ec());
    CHECK(second.value().cookie == 51);
    CHECK(third.calls() == 0); // no second report of the loss
    channel.cancel();
    ioc.run_for(5s);
    CHECK(third.ec() == asio::error::operation_aborted);
}

TEST_CASE_METHOD(fixture, "a buffer too small is refused and the event waits for a larger one",
                 "[devx]") {
    std::array<std::byte, 16> small{};
    recorder<devx_event_info> refused, taken;
    SECTION("event already read") {
        kernel.raise(61);
        channel.async_next(asio::buffer(small), refused.handler());
        ioc.run_for(5s);
    }
    SECTION("event arriving while the read waits") {
        channel.async_next(asio::buffer(small), refused.handler());
        ioc.poll();
        kernel.raise(61);
        ioc.run_for(5s);
    }
    REQUIRE(refused.calls() == 1);
    CHECK(refused.ec() == asio::error::message_size);
    CHECK(refused.value().cookie == 61);
    CHECK(refused.value().size == fake_devx_channel::eqe_size); // what it needs
    CHECK(small == std::array<std::byte, 16>{});                // nothing written
    CHECK(channel.queued() == 1);

    ioc.restart();
    channel.async_next(asio::buffer(buffer), taken.handler());
    ioc.run_for(5s);
    REQUIRE(taken.calls() == 1);
    CHECK_FALSE(taken.ec());
    CHECK(taken.value().cookie == 61);
    CHECK(buffer == fake_devx_channel::eqe_for(61));
}

TEST_CASE("omit-data mode: the cookie alone, an empty buffer will do", "[devx]") {
    omit_fixture f;
    f.kernel.raise(71);
    f.kernel.raise(71); // merged by the kernel while unread
    f.kernel.raise(72);
    std::vector<std::uint64_t> cookies;
    std::vector<std::size_t> sizes;
    std::function<void()> read_next = [&] {
        f.channel.async_next(asio::mutable_buffer(),
                             [&](rdma_asio::error_code ec, devx_event_info info) {
                                 if (ec)
                                     return;
                                 cookies.push_back(info.cookie);
                                 sizes.push_back(info.size);
                                 read_next();
                             });
    };
    read_next();
    f.ioc.run_for(200ms);
    CHECK(cookies == std::vector<std::uint64_t>{71, 72});
    CHECK(sizes == std::vector<std::size_t>{0, 0});
    CHECK(f.channel.mode() == devx_event_data::omit_data);
    f.channel.cancel();
    f.ioc.run_for(5s);
    CHECK(f.ioc.stopped());
}

TEST_CASE_METHOD(fixture, "a failing channel fails every read with the errno", "[devx]") {
    recorder<devx_event_info> a, b;
    channel.async_next(asio::buffer(buffer), a.handler());
    ioc.poll();
    kernel.destroy();
    ioc.run_for(5s);
    REQUIRE(a.calls() == 1);
    CHECK(a.ec() == rdma_asio::detail::errno_code(EIO));
    ioc.restart();
    channel.async_next(asio::buffer(buffer), b.handler());
    ioc.run_for(5s);
    CHECK(b.ec() == rdma_asio::detail::errno_code(EIO));
}

TEST_CASE_METHOD(fixture, "close and move: ownership rules of the other channels", "[devx]") {
    recorder<devx_event_info> pending;
    channel.async_next(asio::buffer(buffer), pending.handler());
    ioc.poll();

    devx_event_channel moved(std::move(channel));
    CHECK_FALSE(channel.is_open());
    CHECK(channel.native_handle() == nullptr);
    CHECK(moved.native_handle() == kernel.channel());
    CHECK(channel.get_executor() == ioc.get_executor()); // a moved-from channel keeps it

    moved.close();
    moved.close(); // idempotent
    ioc.run_for(5s);
    REQUIRE(pending.calls() == 1);
    CHECK(pending.ec() == asio::error::operation_aborted);
    CHECK_FALSE(moved.is_open());
    CHECK(moved.native_handle() == nullptr);
    // The borrowed fd was unregistered, not closed.
    CHECK(::fcntl(kernel.channel()->fd, F_GETFD) != -1);
}

TEST_CASE_METHOD(fixture, "a read on a closed or moved-from channel completes with bad_descriptor",
                 "[devx]") {
    kernel.raise(81);
    devx_event_channel moved(std::move(channel));
    recorder<devx_event_info> on_moved_from, on_closed;
    channel.async_next(asio::buffer(buffer), on_moved_from.handler()); // does not throw
    moved.close();
    moved.async_next(asio::buffer(buffer), on_closed.handler());
    CHECK(on_moved_from.calls() == 0); // posted, never inside the initiating call
    CHECK(on_closed.calls() == 0);
    ioc.run_for(5s);
    REQUIRE(on_moved_from.calls() == 1);
    CHECK(on_moved_from.ec() == asio::error::bad_descriptor);
    REQUIRE(on_closed.calls() == 1);
    CHECK(on_closed.ec() == asio::error::bad_descriptor);
    CHECK(buffer == fake_devx_channel::eqe{}); // nothing read, nothing written
    CHECK(kernel.reads() == 0);

    // Queries throw; subscriptions report (or throw) bad_descriptor.
    CHECK_THROWS_AS(moved.queued(), rdma_asio::system_error);
    CHECK_THROWS_AS(moved.mode(), rdma_asio::system_error);
    const std::uint16_t events[] = {9};
    rdma_asio::error_code ec;
    moved.subscribe(nullptr, events, 1, ec);
    CHECK(ec == asio::error::bad_descriptor);
    rdma_asio::devx_eventfd efd(ioc);
    moved.subscribe_fd(efd, nullptr, 9, ec);
    CHECK(ec == asio::error::bad_descriptor);
    try {
        moved.subscribe(nullptr, events, 1);
        FAIL("no exception");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("mlx5dv_devx_subscribe_devx_event") != std::string::npos);
    }
}

TEST_CASE_METHOD(fixture, "subscribe_fd refuses an eventfd that is not open", "[devx]") {
    rdma_asio::devx_eventfd efd(ioc);
    efd.close();
    rdma_asio::error_code ec;
    channel.subscribe_fd(efd, nullptr, 9, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(channel.subscribe_fd(efd, nullptr, 9), rdma_asio::system_error);
}

namespace {

// An ibv_device of no provider. libibverbs' struct verbs_device begins with the
// ibv_device and goes on with the provider's ops, which mlx5dv_is_supported()
// compares with mlx5's: zeros after the ibv_device read as "not mlx5".
struct not_mlx5_device {
    alignas(std::max_align_t) std::array<std::byte, 4096> storage{};
    ibv_device* device = ::new (storage.data()) ibv_device{};
};

} // namespace

TEST_CASE("open reports errors as error codes, names the call when it throws, and refuses a "
          "second open",
          "[devx]") {
    asio::io_context ioc;
    fake_devx_channel kernel(false); // outlives the channel opened on it below
    devx_event_channel ch(ioc);
    CHECK_FALSE(ch.is_open());
    CHECK(ch.native_handle() == nullptr);
    rdma_asio::error_code ec;

    // A context that is not open.
    rdma_asio::context closed;
    ch.open(closed.native_handle(), devx_event_data::with_data, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(ch.is_open());
    ch.open(closed, devx_event_data::omit_data, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(ch.is_open());
    try {
        devx_event_channel thrown(ioc, closed.native_handle());
        FAIL("no exception");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("devx_event_channel") != std::string::npos);
    }
    CHECK_THROWS_AS(devx_event_channel(ioc.get_executor(), closed), rdma_asio::system_error);

    // A device that is not mlx5: refused before any DEVX call.
    not_mlx5_device other;
    ibv_context ctx{};
    ctx.device = other.device;
    ch.open(&ctx, devx_event_data::with_data, ec);
    CHECK(ec == rdma_asio::detail::errno_code(EOPNOTSUPP));
    CHECK_FALSE(ch.is_open());
    try {
        ch.open(&ctx);
        FAIL("no exception");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == rdma_asio::detail::errno_code(EOPNOTSUPP));
        CHECK(std::string(e.what()).find("mlx5dv_is_supported") != std::string::npos);
    }
    CHECK_FALSE(ch.is_open());

    // An open channel is not opened again, and stays as it was.
    ch = kernel.open_channel(ioc.get_executor());
    REQUIRE(ch.is_open());
    ch.open(&ctx, devx_event_data::omit_data, ec);
    CHECK(ec == asio::error::already_open);
    CHECK(ch.native_handle() == kernel.channel());
    CHECK(ch.mode() == devx_event_data::with_data);
    try {
        ch.open(closed);
        FAIL("no exception");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::already_open);
        CHECK(std::string(e.what()).find("devx_event_channel::open") != std::string::npos);
    }
    CHECK(ch.is_open());
}

TEST_CASE("a channel typed on io_context's executor, rebound to a default token and erased again",
          "[devx]") {
    // snippet-begin: typed-channel
    using typed_channel = rdma_asio::basic_devx_event_channel<asio::io_context::executor_type>;
    // snippet-end
    static_assert(std::is_same_v<typed_channel::executor_type, asio::io_context::executor_type>);
    static_assert(
        std::is_same_v<devx_event_channel::rebind_executor<asio::io_context::executor_type>::other,
                       typed_channel>);
    static_assert(std::is_same_v<typed_channel::native_handle_type, mlx5dv_devx_event_channel*>);
    static_assert(!std::is_copy_constructible_v<typed_channel>);
    asio::io_context ioc;
    fake_devx_channel kernel(false), other_kernel(false);
    typed_channel channel = kernel.open_channel<typed_channel>(ioc.get_executor());
    CHECK(channel.get_executor() == ioc.get_executor());

    fake_devx_channel::eqe buffer{};
    kernel.raise(91);
    recorder<devx_event_info> r;
    channel.async_next(asio::buffer(buffer), r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().cookie == 91);
    CHECK(buffer == fake_devx_channel::eqe_for(91));

    // as_default_on: reads without a token are awaitables.
    // snippet-begin: channel-as-default-on
    auto awaiting = asio::use_awaitable.as_default_on(std::move(channel));
    // snippet-end
    CHECK_FALSE(channel.is_open());
    kernel.raise(92);
    std::uint64_t seen = 0;
    ioc.restart();
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        devx_event_info info = co_await awaiting.async_next(asio::buffer(buffer));
        seen = info.cookie;
    }());
    CHECK(seen == 92);

    // And back to any_io_executor by a converting move.
    devx_event_channel erased(std::move(awaiting));
    CHECK(erased.is_open());
    CHECK_FALSE(awaiting.is_open());
    CHECK(erased.native_handle() == kernel.channel());
    kernel.raise(93);
    recorder<devx_event_info> last;
    erased.async_next(asio::buffer(buffer), last.handler());
    ioc.restart();
    ioc.run_for(5s);
    REQUIRE(last.calls() == 1);
    CHECK(last.value().cookie == 93);
    // ... and by a converting move assignment, which closes what it held.
    typed_channel again = other_kernel.open_channel<typed_channel>(ioc.get_executor());
    erased = std::move(again);
    CHECK(erased.native_handle() == other_kernel.channel());
    CHECK_FALSE(again.is_open());
    erased.close();
    ioc.restart();
    ioc.run_for(5s);
    CHECK(ioc.stopped());
}

TEST_CASE_METHOD(fixture, "a DEVX read allocates through the handler's allocator and frees it",
                 "[devx][allocator]") {
    // The read wraps the handler in one of its own: the allocator must reach the
    // wait through it.
    rdma_asio::test::allocation_count count;
    recorder<devx_event_info> r;
    channel.async_next(
        asio::buffer(buffer),
        asio::bind_allocator(rdma_asio::test::counting_allocator<void>(count), r.handler()));
    CHECK(count.allocations == 1);
    CHECK(count.bytes_held > 0);
    kernel.raise(5);
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().cookie == 5);
    CHECK(count.deallocations == count.allocations);
    CHECK(count.bytes_held == 0);
}

} // namespace devx_event_channel_test
