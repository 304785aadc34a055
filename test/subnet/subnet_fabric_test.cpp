// subnet_event_client against a real opensm on a simulated fabric (ibsim): each
// test runs inside test/subnet/fabric.sh, which starts a fresh fabric (switch +
// Hca1 running opensm, Hca2 for this process, Hca3 to act on) and afterwards
// checks that the SA holds no subscription of ours and that opensm logged no
// unacknowledged Report.
#include "rdma_asio/detail/subnet/subnet_client_impl.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/subnet_event_client.hpp"

#include <catch2/catch.hpp>

#include "run_coroutine.hpp"

#include "fake_kernel.hpp"

#include "asio_alias.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using asio::use_awaitable;
using rdma_asio::async_event;
using rdma_asio::event_type;
using rdma_asio::sm_event_mask;
using rdma_asio::subnet_event_client;

namespace {

// Port `port` of the CA named `ca` (empty: the first CA).
subnet_event_client::options port_of(const std::string& ca, int port) {
    subnet_event_client::options o;
    o.ca_name = ca;
    o.port = port;
    return o;
}
// Port 1 of the first CA: the simulated fabric's host.
const subnet_event_client::options first_port = port_of("", 1);

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value ? value : "";
}

const std::string test_mgid = "ff12:401b:ffff:0000:0000:0000:0000:0042";

struct command_result {
    int status = -1;
    std::string output;
};

// Runs a shell command on a thread of its own, so the io_context keeps answering
// the SA's Reports meanwhile, and completes with its exit status and output on
// the handler's executor. (A plain initiating function, not a coroutine: g++ 12
// destroys lambda temporaries inside a co_await expression twice.)
struct run_initiation {
    template <class Handler>
    void operator()(Handler handler, std::string command) const {
        auto ex = asio::get_associated_executor(handler);
        std::thread([ex, command = std::move(command), h = std::move(handler)]() mutable {
            command_result r;
            if (FILE* pipe = ::popen(command.c_str(), "r")) {
                std::array<char, 256> buffer{};
                while (std::fgets(buffer.data(), buffer.size(), pipe))
                    r.output += buffer.data();
                r.status = ::pclose(pipe);
            }
            asio::post(ex, [h = std::move(h), r = std::move(r)]() mutable { std::move(h)(r); });
        }).detach();
    }
};

template <class CompletionToken>
auto async_run(std::string command, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(command_result)>(run_initiation{}, token,
                                                                       std::move(command));
}

// Hca3 joins or leaves a multicast group: mcast_member join|leave MGID.
asio::awaitable<std::string> as_hca3(const std::string& args) {
    const std::string command =
        env("RDMA_ASIO_FABRIC_RUN_AS_HCA3") + " " + env("RDMA_ASIO_MCAST_MEMBER") + " " + args;
    command_result result = co_await async_run(command, use_awaitable);
    INFO(command << " printed: " << result.output);
    REQUIRE(result.status == 0);
    co_return result.output;
}

// A line for ibsim's console (Unlink "Hca3", ReLink "Hca3").
void console(const std::string& line) {
    const int fd = ::open(env("RDMA_ASIO_FABRIC_CTL").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const std::string text = line + "\n";
    CHECK(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
}

// The next event from `source` (the client or a stream), or nothing within `limit`.
template <class Source>
asio::awaitable<std::optional<async_event>> next_within(Source& source,
                                                        std::chrono::milliseconds limit) {
    asio::steady_timer timer(co_await asio::this_coro::executor, limit);
    auto result = co_await (source.async_next(use_awaitable) || timer.async_wait(use_awaitable));
    if (result.index() == 0)
        co_return std::move(std::get<0>(result));
    co_return std::nullopt;
}

ibv_gid gid(const std::string& text) {
    rdma_asio::error_code ec;
    ibv_gid g = rdma_asio::gid_from_string(text, ec);
    REQUIRE_FALSE(ec);
    return g;
}

bool same(const ibv_gid& a, const ibv_gid& b) {
    return rdma_asio::to_string(a) == rdma_asio::to_string(b);
}

// Runs the test's coroutine to its end (bounded), then checks nothing is left.
void run_test(asio::io_context& ioc, asio::awaitable<void> body) {
    rdma_asio::test::run_coroutine(ioc, std::move(body));
    // Nothing may be left behind: no wait, no timer, no read.
    ioc.poll();
    CHECK(ioc.stopped());
}

asio::awaitable<void> close_cleanly(subnet_event_client& client) {
    auto closed = co_await client.async_close(asio::experimental::as_tuple(use_awaitable));
    const auto counters = client.counters();
    INFO("requests " << counters.requests << ", retries " << counters.retries << ", refusals "
                     << counters.refusals << ", timeouts " << counters.timeouts);
    CHECK_FALSE(std::get<0>(closed));
    CHECK_FALSE(client.subscribed(64));
}

} // namespace

TEST_CASE("a multicast join and leave from another HCA give mcg_created and mcg_deleted",
          "[subnet]") {
    asio::io_context ioc;
    subnet_event_client client(ioc, first_port);
    // umad2sim's descriptors cannot go into epoll: the fallback is chosen by itself.
    CHECK(client.delivery() == rdma_asio::umad_delivery::reader_thread);
    run_test(ioc, [&]() -> asio::awaitable<void> {
        co_await client.async_register(sm_event_mask::mgid_all, use_awaitable);
        CHECK(client.subscribed(66));
        CHECK(client.subscribed(67));
        CHECK_FALSE(client.subscribed(64));

        co_await as_hca3("join " + test_mgid);
        auto created = co_await next_within(client, 5s);
        REQUIRE(created);
        CHECK(created->type() == event_type::mcg_created);
        CHECK(rdma_asio::to_string(created->gid()) == test_mgid);
        CHECK(created->port_num() == 1);
        CHECK_FALSE(created->needs_ack());

        co_await as_hca3("leave " + test_mgid);
        auto deleted = co_await next_within(client, 5s);
        REQUIRE(deleted);
        CHECK(deleted->type() == event_type::mcg_deleted);
        CHECK(rdma_asio::to_string(deleted->gid()) == test_mgid);

        CHECK(client.counters().events == 2);
        co_await close_cleanly(client);
    }());
}

TEST_CASE("unlinking and relinking another HCA give gid_unavail and gid_avail", "[subnet]") {
    asio::io_context ioc;
    subnet_event_client client(ioc, first_port);
    run_test(ioc, [&]() -> asio::awaitable<void> {
        const ibv_gid hca3 = gid(env("RDMA_ASIO_FABRIC_HCA3_GID"));
        co_await client.async_register(sm_event_mask::ugid_all, use_awaitable);

        console("Unlink \"Hca3\"");
        auto gone = co_await next_within(client, 5s);
        REQUIRE(gone);
        CHECK(gone->type() == event_type::gid_unavail);
        CHECK(same(gone->gid(), hca3));

        console("ReLink \"Hca3\"");
        auto back = co_await next_within(client, 5s);
        REQUIRE(back);
        CHECK(back->type() == event_type::gid_avail);
        CHECK(same(back->gid(), hca3));

        co_await close_cleanly(client);
    }());
}

TEST_CASE("a per-GID registration for other GIDs sees none of those events", "[subnet]") {
    asio::io_context ioc;
    subnet_event_client client(ioc, first_port);
    run_test(ioc, [&]() -> asio::awaitable<void> {
        const ibv_gid others[] = {gid("fe80::1234"), gid("ff12:401b:ffff::99")};
        co_await client.async_register(sm_event_mask::ugid | sm_event_mask::mgid, others,
                                       use_awaitable);

        co_await as_hca3("join " + test_mgid);
        co_await as_hca3("leave " + test_mgid);
        console("Unlink \"Hca3\"");
        // Give opensm a sweep to notice (an Unlink undone at once goes unseen).
        auto ev = co_await next_within(client, 2s);
        CHECK_FALSE(ev);
        console("ReLink \"Hca3\"");
        ev = co_await next_within(client, 2s);
        CHECK_FALSE(ev);
        // The Reports did arrive, were answered, and were filtered out.
        const auto counters = client.counters();
        CHECK(counters.reports >= 4);
        CHECK(counters.filtered == counters.reports);
        CHECK(counters.events == 0);
        co_await close_cleanly(client);
    }());
}

TEST_CASE("unregistering cancels the subscriptions at the SA", "[subnet]") {
    asio::io_context ioc;
    subnet_event_client client(ioc, first_port);
    run_test(ioc, [&]() -> asio::awaitable<void> {
        co_await client.async_register(sm_event_mask::all, use_awaitable);
        for (std::uint16_t trap = 64; trap <= 67; ++trap)
            CHECK(client.subscribed(trap));

        co_await client.async_unregister(sm_event_mask::all, use_awaitable);
        for (std::uint16_t trap = 64; trap <= 67; ++trap)
            CHECK_FALSE(client.subscribed(trap));
        command_result listing =
            co_await async_run(env("RDMA_ASIO_FABRIC_RUN_AS_HCA3") + " saquery IIR", use_awaitable);
        INFO("saquery IIR printed: " << listing.output);
        CHECK(listing.status == 0);
        CHECK(listing.output.find("InformInfoRecord") == std::string::npos);

        // Nothing is delivered any more, though the fabric still changes.
        co_await as_hca3("join " + test_mgid);
        auto late = co_await next_within(client, 2s);
        CHECK_FALSE(late);
        CHECK(client.counters().events == 0);
    }());
    // fabric.sh checks again, with saquery, after the process is gone.
}

TEST_CASE("subnet events share the device's async event stream", "[subnet]") {
    // No verbs device exists here: the async fd is the kernel's imitation, the
    // SA and its Reports are real.
    asio::io_context ioc;
    rdma_asio::test::fake_async_fd device;
    rdma_asio::async_event_stream attached = device.stream(ioc.get_executor());
    subnet_event_client client(attached, first_port);
    // The client holds a reference to the stream's state (async_event_stream_ref), not the stream
    // object: moving is fine.
    rdma_asio::async_event_stream stream(std::move(attached));
    run_test(ioc, [&]() -> asio::awaitable<void> {
        co_await client.async_register(sm_event_mask::ugid_all, use_awaitable);
        const auto requests = client.counters().requests;

        device.raise(IBV_EVENT_PORT_ACTIVE, 1);
        console("Unlink \"Hca3\"");
        auto first = co_await next_within(stream, 5s);
        auto second = co_await next_within(stream, 5s);
        REQUIRE(first);
        REQUIRE(second);
        CHECK(first->type() == event_type::port_active);
        CHECK(second->type() == event_type::gid_unavail);

        // The client's own async_next is not where its events go.
        auto misdirected = co_await client.async_next(asio::experimental::as_tuple(use_awaitable));
        CHECK(std::get<0>(misdirected) == asio::error::operation_not_supported);

        // An SM change makes the client subscribe again.
        device.raise(IBV_EVENT_SM_CHANGE, 1);
        auto sm_change = co_await next_within(stream, 5s);
        REQUIRE(sm_change);
        CHECK(sm_change->type() == event_type::sm_change);
        asio::steady_timer settle(co_await asio::this_coro::executor, 1s);
        co_await settle.async_wait(use_awaitable);
        CHECK(client.counters().resubscriptions == 1);
        CHECK(client.counters().requests == requests + 2);
        CHECK(client.subscribed(64));

        console("ReLink \"Hca3\"");
        auto back = co_await next_within(stream, 5s);
        REQUIRE(back);
        CHECK(back->type() == event_type::gid_avail);
        co_await close_cleanly(client);
    }());
}

namespace {

// Runs `ioc` until `done` holds or `limit` passes.
template <class Predicate>
bool run_until(asio::io_context& ioc, Predicate done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    // Short slices: a use_future completion runs on another executor, and must
    // not leave this loop blocked on the io_context until the deadline.
    while (!done() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    return done();
}

} // namespace

TEST_CASE("registrations take every completion token and a cancelled wait loses nothing",
          "[subnet]") {
    asio::io_context ioc;
    subnet_event_client client(ioc, first_port);

    // A plain callback, never called inside the initiating function.
    int calls = 0;
    rdma_asio::error_code result = asio::error::would_block;
    client.async_register(sm_event_mask::ugid_all, [&](rdma_asio::error_code ec) {
        ++calls;
        result = ec;
    });
    CHECK(calls == 0);
    REQUIRE(run_until(ioc, [&] { return calls > 0; }));
    CHECK(calls == 1);
    CHECK_FALSE(result);
    CHECK(client.subscribed(64));

    // use_future.
    std::future<void> registered = client.async_register(sm_event_mask::mgid_all, asio::use_future);
    REQUIRE(run_until(ioc, [&] { return registered.wait_for(0s) == std::future_status::ready; }));
    CHECK_NOTHROW(registered.get());
    CHECK(client.subscribed(66));

    // deferred: nothing happens until the operation is launched.
    auto unregister =
        client.async_unregister(sm_event_mask::mgid_all, asio::experimental::deferred);
    ioc.poll();
    CHECK(client.subscribed(66));
    bool unregistered = false;
    std::move(unregister)([&](rdma_asio::error_code ec) {
        CHECK_FALSE(ec);
        unregistered = true;
    });
    REQUIRE(run_until(ioc, [&] { return unregistered; }));
    CHECK_FALSE(client.subscribed(66));

    // A cancelled wait ends with operation_aborted; the request itself goes on
    // (partial cancellation: see the registration test below for total).
    asio::cancellation_signal signal;
    rdma_asio::error_code cancelled;
    bool aborted = false;
    client.async_register(
        sm_event_mask::mgid_all,
        asio::bind_cancellation_slot(signal.slot(), [&](rdma_asio::error_code ec) {
            cancelled = ec;
            aborted = true;
        }));
    signal.emit(asio::cancellation_type::partial);
    signal.emit(asio::cancellation_type::partial); // twice: no effect
    REQUIRE(run_until(ioc, [&] { return aborted; }));
    CHECK(cancelled == asio::error::operation_aborted);
    REQUIRE(run_until(
        ioc, [&] { return client.subscribed(66); }, 5s));

    // Moved from: closed, and says so.
    subnet_event_client moved = std::move(client);
    CHECK_FALSE(client.is_open());
    CHECK(moved.is_open());
    // An operation on it completes with bad_descriptor, never throws.
    std::optional<rdma_asio::error_code> on_moved_from;
    client.async_register(sm_event_mask::all,
                          [&](rdma_asio::error_code ec) { on_moved_from = ec; });
    CHECK_FALSE(on_moved_from);
    REQUIRE(run_until(ioc, [&] { return on_moved_from.has_value(); }));
    CHECK(*on_moved_from == asio::error::bad_descriptor);

    bool closed = false;
    moved.async_close([&](rdma_asio::error_code ec) {
        CHECK_FALSE(ec);
        closed = true;
    });
    REQUIRE(run_until(ioc, [&] { return closed; }));
    ioc.poll();
    CHECK(ioc.stopped());
}

// The client typed on io_context's executor: opened with error codes, refusing a
// second open, as_default_on for its operations, and back to any_io_executor.
TEST_CASE("a client typed on io_context's executor registers and converts back", "[subnet]") {
    using typed_client = rdma_asio::basic_subnet_event_client<asio::io_context::executor_type>;
    asio::io_context ioc;
    typed_client client(ioc.get_executor());
    rdma_asio::error_code ec;
    client.open(first_port, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(client.is_open());
    CHECK(client.native_handle() >= 0);
    CHECK(client.get_executor() == ioc.get_executor());
    client.open(first_port, ec);
    CHECK(ec == asio::error::already_open);
    CHECK(client.is_open());

    auto awaiting = use_awaitable.as_default_on(std::move(client));
    CHECK_FALSE(client.is_open());
    run_test(ioc, [&]() -> asio::awaitable<void> {
        co_await awaiting.async_register(sm_event_mask::mgid_all);
        CHECK(awaiting.subscribed(66));
        co_await as_hca3("join " + test_mgid);
        auto created = co_await next_within(awaiting, 5s);
        REQUIRE(created);
        CHECK(created->type() == event_type::mcg_created);

        // Back to the alias over any_io_executor, subscriptions and all.
        subnet_event_client erased(std::move(awaiting));
        CHECK_FALSE(awaiting.is_open());
        CHECK(erased.subscribed(66));
        co_await as_hca3("leave " + test_mgid);
        auto deleted = co_await next_within(erased, 5s);
        REQUIRE(deleted);
        CHECK(deleted->type() == event_type::mcg_deleted);
        co_await close_cleanly(erased);
    }());
}

// The registration's request state, one level below subnet_event_client: its
// results queue is what a cancelled wait used to leave a result in.
TEST_CASE("a cancelled registration stays in effect and leaves no result behind", "[subnet]") {
    namespace detail = rdma_asio::detail;
    asio::io_context ioc;
    auto impl = std::make_shared<detail::subnet_client_impl>(ioc.get_executor(),
                                                             detail::sa_subscriber::config{});
    rdma_asio::error_code open_error;
    std::string open_what;
    impl->open("", 1, open_error, open_what);
    INFO(open_what);
    REQUIRE_FALSE(open_error);
    auto request = [&](detail::sa_request kind, sm_event_mask mask, asio::cancellation_slot slot,
                       std::optional<rdma_asio::error_code>& out, bool close_after = false) {
        auto handler =
            asio::bind_cancellation_slot(slot, [&out](rdma_asio::error_code ec) { out = ec; });
        asio::async_compose<decltype(handler), void(rdma_asio::error_code)>(
            detail::sa_request_op{impl, kind, mask, {}, close_after}, handler, ioc.get_executor());
    };

    // Total cancellation is not honoured (the request is sent at once and stays
    // sent): the registration completes as if no signal had come.
    asio::cancellation_signal total;
    std::optional<rdma_asio::error_code> first;
    request(detail::sa_request::add, sm_event_mask::ugid_all, total.slot(), first);
    total.emit(asio::cancellation_type::total);
    REQUIRE(run_until(ioc, [&] { return first.has_value(); }));
    CHECK_FALSE(*first);
    CHECK(impl->subscribed(64));
    CHECK(impl->results().queued() == 0);

    // Partial cancellation before the SA answered: the wait ends with
    // operation_aborted, the registration still takes effect, and its result,
    // which nobody takes any more, is dropped instead of queued.
    asio::cancellation_signal partial;
    std::optional<rdma_asio::error_code> second;
    request(detail::sa_request::add, sm_event_mask::mgid_all, partial.slot(), second);
    partial.emit(asio::cancellation_type::partial);
    REQUIRE(run_until(ioc, [&] { return second.has_value(); }));
    CHECK(*second == asio::error::operation_aborted);
    REQUIRE(run_until(
        ioc, [&] { return impl->subscribed(66); }, 5s));
    ioc.poll();
    CHECK(impl->results().queued() == 0);

    // Terminal cancellation of an unregistration: the same.
    asio::cancellation_signal terminal;
    std::optional<rdma_asio::error_code> third;
    request(detail::sa_request::remove, sm_event_mask::mgid_all, terminal.slot(), third);
    terminal.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return third.has_value(); }));
    CHECK(*third == asio::error::operation_aborted);
    REQUIRE(run_until(
        ioc, [&] { return !impl->subscribed(66); }, 5s));
    ioc.poll();
    CHECK(impl->results().queued() == 0);

    // Cancelled after its wait took the result, before its handler ran (the SA's
    // answer is handled by one handler, which posts the completion): the result
    // is handed back by the cancelled wait, and dropped too.
    asio::cancellation_signal late;
    std::optional<rdma_asio::error_code> fourth;
    request(detail::sa_request::add, sm_event_mask::mgid_all, late.slot(), fourth);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    // mgid_all is traps 66 and 67: the request completes with the second answer.
    auto both = [&] { return impl->subscribed(66) && impl->subscribed(67); };
    while (!both() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(both());
    REQUIRE_FALSE(fourth.has_value());
    late.emit(asio::cancellation_type::partial);
    REQUIRE(run_until(ioc, [&] { return fourth.has_value(); }));
    CHECK(*fourth == asio::error::operation_aborted);
    ioc.poll();
    CHECK(impl->results().queued() == 0);

    // Unregisters everything with the SA (the fabric checks none is left), closes.
    std::optional<rdma_asio::error_code> closed;
    request(detail::sa_request::remove_all, sm_event_mask{}, {}, closed, true);
    REQUIRE(run_until(ioc, [&] { return closed.has_value(); }));
    CHECK_FALSE(*closed);
    ioc.poll();
    CHECK(ioc.stopped());
}

// libibumad answers EIO for both; the client says which of the two is wrong.
TEST_CASE("a CA or a port that does not exist is named as such", "[subnet]") {
    asio::io_context ioc;
    auto error_of = [&](const std::string& ca, int port) -> std::optional<rdma_asio::system_error> {
        try {
            subnet_event_client client(ioc, port_of(ca, port));
        } catch (const rdma_asio::system_error& e) {
            return e;
        }
        return std::nullopt;
    };
    const auto no_ca = error_of("NoSuchCa", 1);
    REQUIRE(no_ca);
    CHECK(no_ca->code() == rdma_asio::errc::device_not_found);
    CHECK(std::string(no_ca->what()).find("NoSuchCa") != std::string::npos);

    // The CA of this process (umad2sim's ibsim0, Hca2) has port 1 only.
    for (const std::string ca : {"", "ibsim0"}) {
        INFO("CA '" << ca << "'");
        const auto no_port = error_of(ca, 9);
        REQUIRE(no_port);
        CHECK(no_port->code() == rdma_asio::errc::invalid_port);
        CHECK(std::string(no_port->what()).find("port 9") != std::string::npos);
    }
    CHECK_FALSE(error_of("ibsim0", 1)); // the right pair still works
    ioc.poll();
}
