#include "rdma_asio/devx_eventfd.hpp"

#include <catch2/catch.hpp>

#include "each_token.hpp"
#include "recorder.hpp"
#include "run_coroutine.hpp"

#include "rdma_asio/detail/core/throw_error.hpp"

#include "asio_alias.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <system_error>
#include <type_traits>

namespace devx_eventfd_test {

using namespace std::chrono_literals;
using rdma_asio::test::recorder;

namespace {

// What the kernel does per event of an eventfd subscription (eventfd_signal).
template <class Executor>
void signal(const rdma_asio::basic_devx_eventfd<Executor>& efd, std::uint64_t times) {
    for (std::uint64_t i = 0; i < times; ++i)
        REQUIRE(::eventfd_write(efd.native_handle(), 1) == 0);
}

} // namespace

TEST_CASE("an eventfd wait reports how many events were signalled", "[devx_eventfd]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    REQUIRE(efd.native_handle() >= 0);
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    signal(efd, 3);
    CHECK(r.calls() == 0); // never inside the initiating call
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK_FALSE(r.ec());
    CHECK(r.value() == 3);
    CHECK(ioc.stopped());

    // The counter was reset by the read: the next wait needs a new signal.
    ioc.restart();
    recorder<std::uint64_t> next;
    efd.async_wait(next.handler());
    ioc.run_for(100ms);
    CHECK(next.calls() == 0);
    signal(efd, 1);
    ioc.run_for(5s);
    REQUIRE(next.calls() == 1);
    CHECK(next.value() == 1);
}

TEST_CASE("an eventfd wait completes with every completion token", "[devx_eventfd][tokens]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    auto got = rdma_asio::test::each_token<std::uint64_t>::complete(
        ioc, [&](auto&& token) { return efd.async_wait(std::forward<decltype(token)>(token)); },
        [&] { signal(efd, 2); });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value() == 2);
}

TEST_CASE("a cancelled eventfd wait reads nothing", "[devx_eventfd]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    asio::cancellation_signal sig;
    recorder<std::uint64_t> cancelled, next;
    efd.async_wait(asio::bind_cancellation_slot(sig.slot(), cancelled.handler()));
    ioc.poll();
    sig.emit(type);
    signal(efd, 2);
    efd.async_wait(next.handler());
    ioc.run_for(5s);
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    REQUIRE(next.calls() == 1);
    CHECK(next.value() == 2);
}

TEST_CASE("closing an eventfd aborts its wait and closes the fd", "[devx_eventfd]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    const int fd = efd.native_handle();
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    ioc.poll();
    rdma_asio::devx_eventfd moved(std::move(efd));
    CHECK_FALSE(efd.is_open());
    CHECK(efd.native_handle() == -1);
    CHECK(moved.native_handle() == fd);
    moved.close();
    moved.close(); // idempotent
    ioc.run_for(5s);
    CHECK(r.ec() == asio::error::operation_aborted);
    CHECK(moved.native_handle() == -1);
    // Owned: closed with the object (the number may be reused by then, but not
    // as an eventfd of ours: nothing else opens fds in this test).
    CHECK(::fcntl(fd, F_GETFD) == -1);
}

TEST_CASE("a wait on a closed or moved-from eventfd completes with bad_descriptor",
          "[devx_eventfd]") {
    asio::io_context ioc;
    rdma_asio::devx_eventfd efd(ioc);
    rdma_asio::devx_eventfd moved(std::move(efd));
    signal(moved, 1);
    recorder<std::uint64_t> on_moved_from, on_closed;
    efd.async_wait(on_moved_from.handler()); // does not throw
    moved.close();
    moved.async_wait(on_closed.handler());
    CHECK(on_moved_from.calls() == 0); // posted, never inside the initiating call
    CHECK(on_closed.calls() == 0);
    ioc.run_for(5s);
    REQUIRE(on_moved_from.calls() == 1);
    CHECK(on_moved_from.ec() == asio::error::bad_descriptor);
    CHECK(on_moved_from.value() == 0);
    REQUIRE(on_closed.calls() == 1);
    CHECK(on_closed.ec() == asio::error::bad_descriptor);
    CHECK(efd.get_executor() == ioc.get_executor()); // a moved-from object keeps it
    CHECK(ioc.stopped());
}

namespace {

// Lowers the soft limit on open files so that the next fd cannot be opened
// (RLIMIT_NOFILE is one more than the highest fd allowed); restores it on exit.
struct no_more_fds {
    rlimit saved{};
    no_more_fds() {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
        const int lowest_free = ::dup(0);
        REQUIRE(lowest_free >= 0);
        ::close(lowest_free);
        rlimit lowered = saved;
        lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    }
    ~no_more_fds() { ::setrlimit(RLIMIT_NOFILE, &saved); }
};

} // namespace

TEST_CASE("an eventfd opens when constructed, reports open errors and refuses a second open",
          "[devx_eventfd]") {
    asio::io_context ioc; // its own fds first
    rdma_asio::error_code ec;
    // UBSan checks a virtual call's object through a pipe the first time it sees
    // that object's type (IsAccessibleMemoryRange), which the fd limit below
    // forbids: the error category's calls (made by rdma_asio::system_error) are made
    // here first, and the test reads what happened under the limit (the thrown
    // exception too: clang checks each call on it) only after it.
    {
        const rdma_asio::system_error warm(rdma_asio::detail::errno_code(EMFILE), "eventfd");
        const rdma_asio::system_error& caught = warm; // as the handler below sees it
        CHECK(std::string(caught.what()).find("eventfd") != std::string::npos);
    }
    rdma_asio::error_code ctor_ec, thrown_ec, open_ec;
    bool ctor_open = true, open_open = true, threw = false;
    int ctor_handle = 0;
    std::string what;
    std::exception_ptr exception;
    {
        no_more_fds limit;
        // The error-code constructor reports and leaves the object closed ...
        rdma_asio::devx_eventfd failed(ioc, ctor_ec);
        ctor_open = failed.is_open();
        ctor_handle = failed.native_handle();
        // ... the other one throws, naming the call (read below the limit's scope) ...
        try {
            rdma_asio::devx_eventfd thrown(ioc.get_executor());
        } catch (...) {
            exception = std::current_exception();
        }
        // ... and open(ec) on a closed one reports as well.
        failed.open(open_ec);
        open_open = failed.is_open();
    }
    try {
        if (exception)
            std::rethrow_exception(exception);
    } catch (const rdma_asio::system_error& e) {
        threw = true;
        thrown_ec = e.code();
        what = e.what();
    }
    CHECK(ctor_ec == rdma_asio::detail::errno_code(EMFILE));
    CHECK_FALSE(ctor_open);
    CHECK(ctor_handle == -1);
    REQUIRE(threw);
    CHECK(thrown_ec == rdma_asio::detail::errno_code(EMFILE));
    CHECK(what.find("eventfd") != std::string::npos);
    CHECK(open_ec == rdma_asio::detail::errno_code(EMFILE));
    CHECK_FALSE(open_open);

    rdma_asio::devx_eventfd efd(ioc, ec);
    CHECK_FALSE(ec);
    REQUIRE(efd.is_open());
    const int fd = efd.native_handle();
    efd.open(ec);
    CHECK(ec == asio::error::already_open);
    CHECK(efd.native_handle() == fd); // the same eventfd, still open
    CHECK_THROWS_AS(efd.open(), rdma_asio::system_error);

    // After close(), open() makes a new one that works.
    efd.close();
    efd.open(ec);
    CHECK_FALSE(ec);
    REQUIRE(efd.is_open());
    signal(efd, 4);
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value() == 4);
}

TEST_CASE("an eventfd typed on io_context's executor, rebound to a default token and erased again",
          "[devx_eventfd]") {
    using typed_eventfd = rdma_asio::basic_devx_eventfd<asio::io_context::executor_type>;
    static_assert(std::is_same_v<typed_eventfd::executor_type, asio::io_context::executor_type>);
    static_assert(std::is_same_v<
                  rdma_asio::devx_eventfd::rebind_executor<asio::io_context::executor_type>::other,
                  typed_eventfd>);
    static_assert(std::is_same_v<typed_eventfd::native_handle_type, int>);
    static_assert(!std::is_copy_constructible_v<typed_eventfd>);
    asio::io_context ioc;
    typed_eventfd efd(ioc.get_executor());
    CHECK(efd.get_executor() == ioc.get_executor());
    signal(efd, 1);
    recorder<std::uint64_t> r;
    efd.async_wait(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value() == 1);

    // as_default_on: waits without a token are awaitables.
    auto awaiting = asio::use_awaitable.as_default_on(std::move(efd));
    CHECK_FALSE(efd.is_open());
    signal(awaiting, 2);
    std::uint64_t seen = 0;
    ioc.restart();
    rdma_asio::test::run_coroutine(
        ioc, [&]() -> asio::awaitable<void> { seen = co_await awaiting.async_wait(); }());
    CHECK(seen == 2);

    // And back to any_io_executor by a converting move.
    rdma_asio::devx_eventfd erased(std::move(awaiting));
    CHECK(erased.is_open());
    CHECK_FALSE(awaiting.is_open());
    signal(erased, 3);
    recorder<std::uint64_t> last;
    erased.async_wait(last.handler());
    ioc.restart();
    ioc.run_for(5s);
    REQUIRE(last.calls() == 1);
    CHECK(last.value() == 3);
    CHECK(ioc.stopped());
}

} // namespace devx_eventfd_test
