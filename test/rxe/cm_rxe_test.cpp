// rdma_cm steps on rxe0 loopback (10.0.0.1 in the test VM).
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "ipv4_address.hpp"
#include "nothing_pending.hpp"
#include "recorder.hpp"
#include "run_coroutine.hpp"
#include "run_until.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace cm_rxe_test {

using namespace std::chrono_literals;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using rdma_asio::cm_id;
using rdma_asio::errc;
using rdma_asio::test::recorder;

namespace {

using rdma_asio::test::as_sockaddr;
using rdma_asio::test::ipv4;

// A PD and a completion channel on the device rdma_cm picked for an id.
struct device_resources {
    explicit device_resources(asio::io_context& ioc, ibv_context* verbs)
        : pd(ibv_alloc_pd(verbs)), channel(ioc.get_executor(), verbs) {
        REQUIRE(pd != nullptr);
    }
    ~device_resources() { ibv_dealloc_pd(pd); }
    ibv_pd* pd;
    rdma_asio::completion_channel channel;
};

rdma_conn_param param() {
    rdma_conn_param p{};
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 7;
    return p;
}

void run_test(asio::io_context& ioc, asio::awaitable<void> body) {
    rdma_asio::test::run_coroutine(ioc, std::move(body));
}

} // namespace

TEST_CASE("connecting to a port nobody listens on is rejected", "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    run_test(ioc, [&]() -> asio::awaitable<void> {
        cm_id id(channel);
        const auto server = ipv4("10.0.0.1", 18790);
        co_await id.async_resolve_addr(nullptr, as_sockaddr(server), 2s, use_awaitable);
        co_await id.async_resolve_route(2s, use_awaitable);
        dev = std::make_unique<device_resources>(ioc, id.native_handle()->verbs);
        rdma_asio::connection conn(std::move(id), dev->channel, dev->pd);
        auto result = co_await conn.id().async_connect(param(), as_tuple(use_awaitable));
        CHECK(std::get<0>(result) == errc::connection_rejected);
        CHECK(std::get<0>(result) == std::errc::connection_refused);
        // docs/errors.md's table: the message says what is likely wrong.
        CHECK(std::get<0>(result).message().find("nobody listens on that address and port") !=
              std::string::npos);
    }());
}

// The channel's wake-up runs a step's handler in place. A handler that throws
// there called std::terminate; it comes out of run() now, and the id goes on.
TEST_CASE("a cm_id step's handler that throws inside the channel's wake-up comes out of run(), "
          "and the id's next step completes",
          "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    cm_id id(channel);
    struct thrown {};
    int thrower_calls = 0;
    const auto server = ipv4("10.0.0.1", 18792);
    id.async_resolve_addr(nullptr, as_sockaddr(server), 2s, [&](rdma_asio::error_code ec) {
        ++thrower_calls;
        if (!ec)
            throw thrown{};
    });
    const int caught = rdma_asio::test::run_catching<thrown>(
        ioc, [&] { return thrower_calls > 0; }, 30s);
    REQUIRE(thrower_calls == 1);
    CHECK(caught == 1);
    recorder<> route;
    id.async_resolve_route(2s, route.handler());
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return route.calls() == 1; }, 30s));
    CHECK_FALSE(route.ec());
}

TEST_CASE("resolving an address nobody answers for fails within its timeout", "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    run_test(ioc, [&]() -> asio::awaitable<void> {
        cm_id id(channel);
        const auto nobody = ipv4("10.0.0.99", 18790); // on veth0's subnet, never answers ARP
        const auto start = std::chrono::steady_clock::now();
        auto result = co_await id.async_resolve_addr(nullptr, as_sockaddr(nobody), 1s,
                                                     as_tuple(use_awaitable));
        if (!std::get<0>(result)) // resolution may succeed locally: then the route fails
            result = co_await id.async_resolve_route(1s, as_tuple(use_awaitable));
        const auto elapsed = std::chrono::steady_clock::now() - start;
        CAPTURE(std::get<0>(result).message());
        CHECK(std::get<0>(result));
        CHECK(elapsed < 10s);
    }());
}

TEST_CASE("connect, accept, and a peer that vanishes without disconnecting", "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    run_test(ioc, [&]() -> asio::awaitable<void> {
        cm_id listener(channel);
        const auto addr = ipv4("10.0.0.1", 18791);
        listener.bind(as_sockaddr(addr));
        listener.listen();
        CHECK(listener.local_port() == 18791);

        cm_id client(channel);
        co_await client.async_resolve_addr(nullptr, as_sockaddr(addr), 2s, use_awaitable);
        co_await client.async_resolve_route(2s, use_awaitable);
        dev = std::make_unique<device_resources>(ioc, client.native_handle()->verbs);
        auto active =
            std::make_unique<rdma_asio::connection>(std::move(client), dev->channel, dev->pd);
        // The request is queued for the listener until somebody asks for it.
        auto connecting = active->id().async_connect(param(), asio::experimental::deferred);
        bool connected = false;
        std::move(connecting)([&](rdma_asio::error_code ec) {
            CHECK_FALSE(ec);
            connected = true;
        });
        cm_id request = co_await listener.async_get_request(use_awaitable);
        REQUIRE(request.is_open());
        rdma_asio::connection passive(std::move(request), dev->channel, dev->pd);
        co_await passive.id().async_accept(param(), use_awaitable);
        asio::steady_timer settle(ioc, 2s);
        while (!connected && settle.expiry() > std::chrono::steady_clock::now()) {
            asio::steady_timer tick(ioc, 10ms);
            co_await tick.async_wait(use_awaitable);
        }
        CHECK(connected);

        // The active side goes away without rdma_disconnect (as a process that
        // dies): its id is destroyed, which makes the CM tell the peer.
        active.reset();
        auto [ec, ev] = co_await passive.id().async_next(as_tuple(use_awaitable));
        REQUIRE_FALSE(ec);
        CHECK(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
    }());
}

// ---- Teardown with completions queued, cancellation after an event was taken.

namespace {

bool readable(int fd, std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

// Waits until the channel has an unread event, then runs `ioc` until it was read
// (by the dispatcher, on a wake-up), so that a pending wait has taken it. Call it
// when nothing else reads the channel meanwhile (the wait was started before the
// event could arrive, and the channel's io_context is not running).
void run_until_read(asio::io_context& ioc, rdma_asio::cm_event_channel& channel) {
    const int fd = channel.native_handle()->fd;
    REQUIRE(readable(fd, std::chrono::milliseconds(10000)));
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    ioc.restart();
    while (readable(fd, std::chrono::milliseconds(0)) &&
           std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE_FALSE(readable(fd, std::chrono::milliseconds(0)));
}

// Runs `ioc` until `done()` or 5 s.
template <class Done>
void run_until(asio::io_context& ioc, Done done) {
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
}

// Takes the next request of `listener` (whose channel runs on `ioc`).
cm_id take_request(asio::io_context& ioc, cm_id& listener) {
    recorder<cm_id> request;
    listener.async_get_request(request.on(ioc));
    run_until(ioc, [&] { return request.ran(); });
    REQUIRE(request.ran());
    REQUIRE_FALSE(request.ec());
    return std::move(request.value());
}

// Runs `destroy` on a thread of its own; true if it returned within `limit`. If
// not (the defect), runs `unblock` so that it does return, and the test fails
// rather than hangs.
bool returns_within(const std::function<void()>& destroy, std::chrono::seconds limit,
                    asio::io_context& unblock) {
    std::promise<void> done;
    auto finished = done.get_future();
    std::thread t([&] {
        destroy();
        done.set_value();
    });
    const bool in_time = finished.wait_for(limit) == std::future_status::ready;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    unblock.restart();
    while (finished.wait_for(0s) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline)
        unblock.run_one_for(20ms);
    if (finished.wait_for(0s) == std::future_status::ready)
        t.join();
    else
        t.detach(); // still stuck: the test fails below
    return in_time;
}

// A connection on a resolved id towards `server` (nobody needs to listen).
std::unique_ptr<rdma_asio::connection> resolved_connection(asio::io_context& ioc,
                                                           rdma_asio::cm_event_channel& channel,
                                                           const sockaddr_in& server,
                                                           std::unique_ptr<device_resources>& dev) {
    std::unique_ptr<rdma_asio::connection> conn;
    run_test(ioc, [&]() -> asio::awaitable<void> {
        cm_id id(channel);
        co_await id.async_resolve_addr(nullptr, as_sockaddr(server), 2s, use_awaitable);
        co_await id.async_resolve_route(2s, use_awaitable);
        if (!dev)
            dev = std::make_unique<device_resources>(ioc, id.native_handle()->verbs);
        conn = std::make_unique<rdma_asio::connection>(std::move(id), dev->channel, dev->pd);
    }());
    return conn;
}

} // namespace

TEST_CASE("a connection request's private data: a copy on the request's id, moved with it",
          "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    const auto addr = ipv4("10.0.0.1", 18802);
    rdma_asio::cm_event_channel server_channel(ioc);
    cm_id listener(server_channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    CHECK(listener.private_data().empty());
    auto conn = resolved_connection(ioc, channel, addr, dev);
    CHECK(conn->id().private_data().empty());

    const std::uint8_t hello[] = {'h', 'e', 'l', 'l', 'o', 0, 0xff, 7};
    rdma_conn_param p = param();
    p.private_data = hello;
    p.private_data_len = sizeof hello;
    recorder<> connect;
    conn->id().async_connect(p, connect.on(ioc));
    cm_id request = take_request(ioc, listener);
    // The event is acked by now: this is the id's own copy. The transport pads it.
    const auto data = request.private_data();
    REQUIRE(data.size() >= sizeof hello);
    CHECK(std::equal(std::begin(hello), std::end(hello), data.begin()));
    CHECK(std::all_of(data.begin() + sizeof hello, data.end(), [](auto b) { return b == 0; }));

    const std::vector<std::uint8_t> copy(data.begin(), data.end());
    cm_id moved(std::move(request));
    CHECK(request.private_data().empty());
    CHECK(std::equal(copy.begin(), copy.end(), moved.private_data().begin(),
                     moved.private_data().end()));
    moved.reject();
    run_until(ioc, [&] { return connect.ran(); });
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
    moved.close();
    CHECK(moved.private_data().empty());
}

TEST_CASE("destroying a connection whose step's completion is queued returns", "[cm_id]") {
    asio::io_context ioc;
    asio::io_context user; // the handler's executor; not running
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    // The peer rejects when the test says so (on a channel of its own), so that
    // REJECTED arrives while nothing reads the client's channel.
    const auto addr = ipv4("10.0.0.1", 18793);
    rdma_asio::cm_event_channel server_channel(ioc);
    cm_id listener(server_channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    auto conn = resolved_connection(ioc, channel, addr, dev);
    recorder<> connect;
    conn->id().async_connect(param(), connect.on(user));
    take_request(ioc, listener).reject();
    run_until_read(ioc, channel); // REJECTED, taken by the connect
    CHECK_FALSE(connect.ran());
    CHECK(returns_within([&] { conn.reset(); }, 10s, user));
    user.restart();
    user.run_for(2s);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == asio::error::operation_aborted); // its id was destroyed first
}

TEST_CASE("destroying a listener whose request's completion is queued returns and rejects the "
          "request",
          "[cm_id]") {
    asio::io_context ioc;
    asio::io_context user;
    rdma_asio::cm_event_channel channel(ioc);
    const auto addr = ipv4("10.0.0.1", 18794);
    auto listener = std::make_unique<cm_id>(channel);
    listener->bind(as_sockaddr(addr));
    listener->listen();
    std::unique_ptr<device_resources> dev;
    // The request wait first, the client on a channel of its own: nothing reads
    // the listener's channel before run_until_read.
    rdma_asio::cm_event_channel client_channel(ioc);
    auto client = resolved_connection(ioc, client_channel, addr, dev);
    recorder<cm_id> request;
    listener->async_get_request(request.on(user));
    recorder<> connect;
    client->id().async_connect(param(), connect.on(ioc));
    run_until_read(ioc, channel); // CONNECT_REQUEST, taken by the request wait
    CHECK_FALSE(request.ran());
    CHECK(returns_within([&] { listener.reset(); }, 10s, user));
    // The request nobody took was rejected.
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!connect.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
    user.restart();
    user.run_for(2s);
    REQUIRE(request.ran());
    CHECK(request.ec() == asio::error::operation_aborted);
    CHECK_FALSE(request.value().is_open());
}

TEST_CASE("destroying the listener and its channel and then the handler's io_context with a "
          "request queued "
          "neither blocks nor keeps the request",
          "[cm_id]") {
    asio::io_context ioc;
    auto user = std::make_unique<asio::io_context>();
    auto channel = std::make_unique<rdma_asio::cm_event_channel>(ioc);
    const auto addr = ipv4("10.0.0.1", 18795);
    auto listener = std::make_unique<cm_id>(*channel);
    listener->bind(as_sockaddr(addr));
    listener->listen();
    std::unique_ptr<device_resources> dev;
    // The client on a channel of its own, which outlives the listener's.
    rdma_asio::cm_event_channel client_channel(ioc);
    auto client = resolved_connection(ioc, client_channel, addr, dev);
    recorder<> connect;
    recorder<cm_id> request;
    listener->async_get_request(request.on(*user)); // first: see run_until_read
    client->id().async_connect(param(), connect.on(ioc));
    run_until_read(ioc, *channel);
    CHECK(returns_within(
        [&] {
            listener.reset();
            channel.reset();
        },
        10s, *user));
    CHECK(returns_within([&] { user.reset(); }, 10s, ioc)); // destroys the queued completion
    CHECK_FALSE(request.ran());
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!connect.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
}

TEST_CASE("a request wait cancelled after it took a request hands it to the next wait", "[cm_id]") {
    asio::io_context ioc;
    asio::io_context user;
    rdma_asio::cm_event_channel channel(ioc);
    const auto addr = ipv4("10.0.0.1", 18796);
    cm_id listener(channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    std::unique_ptr<device_resources> dev;
    // The request wait first, the client on a channel of its own: nothing reads
    // the listener's channel before run_until_read.
    rdma_asio::cm_event_channel client_channel(ioc);
    auto client = resolved_connection(ioc, client_channel, addr, dev);
    asio::cancellation_signal cancel;
    recorder<cm_id> first;
    listener.async_get_request(first.on(user, cancel.slot()));
    recorder<> connect;
    client->id().async_connect(param(), connect.on(ioc));
    run_until_read(ioc, channel); // the request, taken by the first wait
    CHECK_FALSE(first.ran());
    cancel.emit(asio::cancellation_type::terminal); // as `||` does when the other side wins
    user.restart();
    user.run_for(2s);
    REQUIRE(first.ran());
    CHECK(first.ec() == asio::error::operation_aborted);
    CHECK_FALSE(first.value().is_open());
    // The next wait gets the same request; rejecting it ends the client's connect.
    recorder<cm_id> second;
    listener.async_get_request(second.on(ioc));
    ioc.restart();
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!second.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(second.ran());
    REQUIRE_FALSE(second.ec());
    REQUIRE(second.value().is_open());
    second.value().reject();
    deadline = std::chrono::steady_clock::now() + 10s;
    while (!connect.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
}

TEST_CASE("a step cancelled after it took its event gives the event to the id's next wait",
          "[cm_id]") {
    asio::io_context ioc;
    asio::io_context user;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    // The peer rejects when the test says so (on a channel of its own), so that
    // REJECTED arrives while nothing reads the client's channel.
    const auto addr = ipv4("10.0.0.1", 18797);
    rdma_asio::cm_event_channel server_channel(ioc);
    cm_id listener(server_channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    auto conn = resolved_connection(ioc, channel, addr, dev);
    asio::cancellation_signal cancel;
    recorder<> connect;
    conn->id().async_connect(param(), connect.on(user, cancel.slot()));
    take_request(ioc, listener).reject();
    run_until_read(ioc, channel); // REJECTED, taken by the connect
    cancel.emit(asio::cancellation_type::terminal);
    user.restart();
    user.run_for(2s);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == asio::error::operation_aborted);
    recorder<rdma_asio::cm_event> next;
    conn->id().async_next(next.on(ioc));
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!next.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(next.ran());
    REQUIRE_FALSE(next.ec());
    CHECK(next.value().name() == "RDMA_CM_EVENT_REJECTED");
}

TEST_CASE("a connection step ignores total cancellation: its call stays made", "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    const auto addr = ipv4("10.0.0.1", 18810);
    rdma_asio::cm_event_channel server_channel(ioc);
    cm_id listener(server_channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    auto conn = resolved_connection(ioc, channel, addr, dev);
    // rdma_connect was made as the operation started and cannot be undone, so a
    // total-only signal is ignored and the step ends with its answer.
    asio::cancellation_signal total;
    recorder<> connect;
    conn->id().async_connect(param(), connect.on(ioc, total.slot()));
    total.emit(asio::cancellation_type::total);
    ioc.restart();
    ioc.poll();
    CHECK_FALSE(connect.ran());
    take_request(ioc, listener).reject();
    run_until(ioc, [&] { return connect.ran(); });
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
}

TEST_CASE("a connection step cancelled (partial) before its answer leaves it to the id's next wait",
          "[cm_id]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    const auto addr = ipv4("10.0.0.1", 18811);
    rdma_asio::cm_event_channel server_channel(ioc);
    cm_id listener(server_channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    auto conn = resolved_connection(ioc, channel, addr, dev);
    // The wait ends with operation_aborted; the request was sent all the same,
    // and its answer goes to the id's next wait.
    asio::cancellation_signal partial;
    recorder<> aborted;
    conn->id().async_connect(param(), aborted.on(ioc, partial.slot()));
    partial.emit(asio::cancellation_type::partial);
    run_until(ioc, [&] { return aborted.ran(); });
    REQUIRE(aborted.ran());
    CHECK(aborted.ec() == asio::error::operation_aborted);
    take_request(ioc, listener).reject();
    recorder<rdma_asio::cm_event> next;
    conn->id().async_next(next.on(ioc));
    run_until(ioc, [&] { return next.ran(); });
    REQUIRE(next.ran());
    REQUIRE_FALSE(next.ec());
    CHECK(next.value().name() == "RDMA_CM_EVENT_REJECTED");
}

// ---- The misuse table on a device: closed, moved-from and unresolved objects,
// bad addresses. Each gives its documented error; none crashes.

namespace {

// Starts every asynchronous operation of `id` in turn and returns what each
// completed with (after checking that none completed inside its initiating call).
std::vector<std::pair<std::string, rdma_asio::error_code>>
every_operation(asio::io_context& ioc, cm_id& id, bool& any_inline, bool resolve_addr = true) {
    std::vector<std::pair<std::string, rdma_asio::error_code>> results;
    const auto dst = ipv4("10.0.0.1", 18798);
    auto record = [&](const char* name, auto start) {
        bool ran = false;
        rdma_asio::error_code got;
        start([&](rdma_asio::error_code ec, auto&&...) {
            got = ec;
            ran = true;
        });
        any_inline = any_inline || ran;
        run_until(ioc, [&] { return ran; });
        results.emplace_back(
            name, ran ? got : rdma_asio::error_code(std::make_error_code(std::errc::timed_out)));
    };
    auto on = [&](auto h) { return asio::bind_executor(ioc, h); };
    if (resolve_addr) // (which would give the id its device)
        record("async_resolve_addr",
               [&](auto h) { id.async_resolve_addr(nullptr, as_sockaddr(dst), 1s, on(h)); });
    record("async_resolve_route", [&](auto h) { id.async_resolve_route(1s, on(h)); });
    record("async_connect", [&](auto h) { id.async_connect(param(), on(h)); });
    record("async_accept", [&](auto h) { id.async_accept(param(), on(h)); });
    record("async_disconnect", [&](auto h) { id.async_disconnect(on(h)); });
    record("async_get_request", [&](auto h) { id.async_get_request(on(h)); });
    record("async_next", [&](auto h) { id.async_next(on(h)); });
    return results;
}

rdma_asio::error_code thrown_by(const std::function<void()>& f, std::string& what) {
    try {
        f();
    } catch (const rdma_asio::system_error& e) {
        what = e.what();
        return e.code();
    }
    what.clear();
    return {};
}

} // namespace

TEST_CASE("misuse on a device: closed and moved-from ids and channels", "[cm_id][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    cm_id closed(channel);
    closed.close();
    cm_id source(channel);
    cm_id target = std::move(source);
    for (cm_id* id : {&closed, &source}) {
        CAPTURE(id == &closed ? "closed" : "moved-from");
        CHECK_FALSE(id->is_open());
        bool any_inline = false;
        for (auto& [name, ec] : every_operation(ioc, *id, any_inline)) {
            CAPTURE(name);
            CHECK(ec == asio::error::bad_descriptor);
        }
        CHECK_FALSE(any_inline);
        std::string what;
        const auto addr = ipv4("10.0.0.1", 0);
        CHECK(thrown_by([&] { id->bind(as_sockaddr(addr)); }, what) == asio::error::bad_descriptor);
        CHECK(what.find("rdma_bind_addr") != std::string::npos);
        CHECK(thrown_by([&] { id->listen(); }, what) == asio::error::bad_descriptor);
        CHECK(what.find("rdma_listen") != std::string::npos);
        CHECK(thrown_by([&] { id->reject(); }, what) == asio::error::bad_descriptor);
        CHECK(what.find("rdma_reject") != std::string::npos);
    }
    CHECK(target.is_open());

    rdma_asio::cm_event_channel moved_from(ioc);
    rdma_asio::cm_event_channel moved_to = std::move(moved_from);
    CHECK_FALSE(moved_from.is_open());
    CHECK(moved_from.native_handle() == nullptr);
    moved_from.cancel(); // documented: nothing to do
    std::string what;
    CHECK(thrown_by([&] { cm_id on_moved(moved_from); }, what) == asio::error::bad_descriptor);
    CHECK(what.find("rdma_create_id") != std::string::npos);
    bool ran = false;
    rdma_asio::error_code got;
    moved_from.async_next(
        asio::bind_executor(ioc, [&](rdma_asio::error_code ec, rdma_asio::cm_event) {
            got = ec;
            ran = true;
        }));
    CHECK_FALSE(ran);
    run_until(ioc, [&] { return ran; });
    REQUIRE(ran);
    CHECK(got == asio::error::bad_descriptor);
}

TEST_CASE("misuse on a device: an id without a device and bad addresses", "[cm_id][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    cm_id unresolved(channel);
    REQUIRE(unresolved.native_handle()->verbs == nullptr);
    bool any_inline = false;
    for (auto& [name, ec] : every_operation(ioc, unresolved, any_inline, false)) {
        CAPTURE(name, ec.message());
        if (name == "async_get_request" || name == "async_next")
            CHECK(ec == std::errc::timed_out); // no event comes: still waiting after 5 s
        else
            CHECK(ec == asio::error::no_such_device);
    }
    CHECK(unresolved.native_handle()->verbs == nullptr);
    CHECK_FALSE(any_inline);

    cm_id id(channel);
    std::string what;
    CHECK(thrown_by([&] { id.bind(nullptr); }, what) == asio::error::invalid_argument);
    CHECK(what.find("rdma_bind_addr") != std::string::npos);
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    CHECK(thrown_by([&] { id.bind(&unspec); }, what) == asio::error::address_family_not_supported);
    CHECK(what.find("rdma_bind_addr") != std::string::npos);
    CHECK(thrown_by([&] { id.reject(nullptr, 4); }, what) == asio::error::invalid_argument);
    CHECK(what.find("rdma_reject") != std::string::npos);

    auto resolve = [&](const sockaddr* src, const sockaddr* dst) {
        bool ran = false;
        rdma_asio::error_code got;
        id.async_resolve_addr(src, dst, 1s, asio::bind_executor(ioc, [&](rdma_asio::error_code ec) {
                                  got = ec;
                                  ran = true;
                              }));
        CHECK_FALSE(ran);
        run_until(ioc, [&] { return ran; });
        REQUIRE(ran);
        return got;
    };
    const auto server = ipv4("10.0.0.1", 18799);
    CHECK(resolve(nullptr, nullptr) == asio::error::invalid_argument);
    CHECK(resolve(nullptr, &unspec) == asio::error::address_family_not_supported);
    CHECK(resolve(&unspec, as_sockaddr(server)) == asio::error::address_family_not_supported);
    rdma_conn_param no_data = param();
    no_data.private_data = nullptr;
    no_data.private_data_len = 8;
    bool ran = false;
    rdma_asio::error_code got;
    id.async_connect(no_data, asio::bind_executor(ioc, [&](rdma_asio::error_code ec) {
                         got = ec;
                         ran = true;
                     }));
    run_until(ioc, [&] { return ran; });
    REQUIRE(ran);
    CHECK(got == asio::error::invalid_argument);
}

TEST_CASE("misuse on a device: a connection refuses a closed id and an id without a device or "
          "PD",
          "[cm_id][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    std::unique_ptr<device_resources> dev;
    auto conn = resolved_connection(ioc, channel, ipv4("10.0.0.1", 18800), dev);
    std::string what;
    CHECK(thrown_by([&] { rdma_asio::connection c(cm_id{}, dev->channel, dev->pd); }, what) ==
          asio::error::bad_descriptor);
    CHECK(what.find("rdma_asio::connection") != std::string::npos);
    CHECK(thrown_by([&] { rdma_asio::connection c(cm_id(channel), dev->channel, dev->pd); },
                    what) == asio::error::no_such_device);
    CHECK(what.find("rdma_asio::connection") != std::string::npos);
    cm_id resolved(channel);
    ioc.restart(); // the last run_test ran it out of work
    run_test(ioc, [&]() -> asio::awaitable<void> {
        const auto server = ipv4("10.0.0.1", 18800);
        co_await resolved.async_resolve_addr(nullptr, as_sockaddr(server), 2s, use_awaitable);
    }());
    CHECK(thrown_by([&] { rdma_asio::connection c(std::move(resolved), dev->channel, nullptr); },
                    what) == asio::error::invalid_argument);
    CHECK(what.find("PD") != std::string::npos);
    // A moved-from connection: its id is not open, it has no QP.
    rdma_asio::connection moved_to = std::move(*conn);
    CHECK(moved_to.qp() != nullptr);
    CHECK(conn->qp() == nullptr);
    CHECK_FALSE(conn->id().is_open());
    bool ran = false;
    rdma_asio::error_code got;
    conn->id().async_disconnect(asio::bind_executor(ioc, [&](rdma_asio::error_code ec) {
        got = ec;
        ran = true;
    }));
    run_until(ioc, [&] { return ran; });
    REQUIRE(ran);
    CHECK(got == asio::error::bad_descriptor);
    *conn = std::move(moved_to);
    CHECK(conn->qp() != nullptr);
    // An id that already has a QP (the connection's).
    CHECK(thrown_by([&] { rdma_asio::connection c(std::move(conn->id()), dev->channel, dev->pd); },
                    what) == rdma_asio::error_code(EEXIST, asio::error::get_system_category()));
}

// A step makes its librdmacm call as it is launched: made with deferred and
// dropped, rdma_resolve_addr is never called (the id stays without a device),
// and the same step launched later resolves as the first.
TEST_CASE("an rdma_cm step made with deferred and never launched makes no call",
          "[cm_id][deferred]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    const auto addr = ipv4("10.0.0.1", 18796);
    cm_id client(channel);
    {
        auto never =
            client.async_resolve_addr(nullptr, as_sockaddr(addr), 2s, asio::experimental::deferred);
    }
    CHECK(client.native_handle()->verbs == nullptr);
    recorder<> resolved;
    client.async_resolve_addr(nullptr, as_sockaddr(addr), 2s, resolved.on(ioc));
    run_until(ioc, [&] { return resolved.ran(); });
    REQUIRE(resolved.calls() == 1);
    CHECK_FALSE(resolved.ec());
    CHECK(client.native_handle()->verbs != nullptr);
}

TEST_CASE("operations made with deferred and launched after their id was closed end with "
          "bad_descriptor and touch nothing",
          "[cm_id][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    cm_id keeps_channel_busy(channel); // the channel stays open with other ids on it
    const auto addr = ipv4("10.0.0.1", 18795);

    cm_id listener(channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    auto request = listener.async_get_request(asio::experimental::deferred);
    cm_id waiting(channel);
    auto next = waiting.async_next(asio::experimental::deferred);
    cm_id client(channel);
    auto resolve =
        client.async_resolve_addr(nullptr, as_sockaddr(addr), 2s, asio::experimental::deferred);
    listener.close();
    waiting.close();
    client.close();

    // Before: the waits were keyed by the destroyed ids and never ended, and the
    // step called rdma_resolve_addr on a destroyed id.
    recorder<cm_id> got_request;
    recorder<rdma_asio::cm_event> got_next;
    recorder<> resolved;
    std::move(request)(got_request.on(ioc));
    std::move(next)(got_next.on(ioc));
    std::move(resolve)(resolved.on(ioc));
    run_until(ioc, [&] { return got_request.ran() && got_next.ran() && resolved.ran(); });
    REQUIRE(got_request.calls() == 1);
    REQUIRE(got_next.calls() == 1);
    REQUIRE(resolved.calls() == 1);
    CHECK(got_request.ec() == asio::error::bad_descriptor);
    CHECK_FALSE(got_request.value().is_open());
    CHECK(got_next.ec() == asio::error::bad_descriptor);
    CHECK(resolved.ec() == asio::error::bad_descriptor);
    CHECK(rdma_asio::test::nothing_pending(ioc));
}

TEST_CASE("a channel's wait ends with operation_aborted when the channel object goes", "[cm_id]") {
    asio::io_context ioc;
    auto channel = std::make_unique<rdma_asio::cm_event_channel>(ioc);
    recorder<rdma_asio::cm_event> next;
    channel->async_next(next.on(ioc));
    channel.reset(); // no id keeps it: the channel is destroyed, its wait aborted
    run_until(ioc, [&] { return next.ran(); });
    REQUIRE(next.ran());
    CHECK(next.ec() == asio::error::operation_aborted);
    CHECK_FALSE(next.value());
}

TEST_CASE("the timeout idiom (request wait || another operation) loses no connection request",
          "[cm_id]") {
    using namespace asio::experimental::awaitable_operators;
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    const auto addr = ipv4("10.0.0.1", 18801);
    cm_id listener(channel);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    std::unique_ptr<device_resources> dev;
    rdma_asio::cm_event_channel client_channel(ioc);
    auto client = resolved_connection(ioc, client_channel, addr, dev);
    recorder<> connect;
    client->id().async_connect(param(), connect.on(ioc));
    // The request is there before the wait starts, so the wait takes it at once;
    // the other operation (a post) completes first and wins.
    REQUIRE(readable(channel.native_handle()->fd, std::chrono::milliseconds(10000)));
    bool got_request = false;
    bool won = false;
    ioc.restart();
    run_test(ioc, [&]() -> asio::awaitable<void> {
        auto first =
            co_await (asio::post(ioc, use_awaitable) || listener.async_get_request(use_awaitable));
        cm_id request;
        if (first.index() == 1) { // the request won after all: it is here
            won = true;
            request = std::move(std::get<1>(first));
        } else { // the post won: the request went back to the listener
            asio::steady_timer limit(ioc, 5s);
            auto next = co_await (listener.async_get_request(as_tuple(use_awaitable)) ||
                                  limit.async_wait(use_awaitable));
            if (next.index() == 0 && !std::get<0>(std::get<0>(next)))
                request = std::move(std::get<1>(std::get<0>(next)));
        }
        got_request = request.is_open();
        if (got_request)
            request.reject();
    }());
    CAPTURE(won);
    CHECK(got_request);
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!connect.ran() && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    REQUIRE(connect.ran());
    CHECK(connect.ec() == errc::connection_rejected);
}

// ---- The objects typed on io_context's executor.

namespace {

// Two CQs made without a completion channel, for QPs made on the ids directly.
struct raw_cqs {
    ibv_cq* send = nullptr;
    ibv_cq* recv = nullptr;
    void make(ibv_context* verbs) {
        send = ibv_create_cq(verbs, 8, nullptr, nullptr, 0);
        recv = ibv_create_cq(verbs, 8, nullptr, nullptr, 0);
        REQUIRE(send != nullptr);
        REQUIRE(recv != nullptr);
    }
    ~raw_cqs() {
        if (send != nullptr)
            ibv_destroy_cq(send);
        if (recv != nullptr)
            ibv_destroy_cq(recv);
    }
    // An RC QP on `id` (destroyed when the id is closed).
    bool create_qp(rdma_cm_id* id, ibv_pd* pd) const {
        ibv_qp_init_attr attr{};
        attr.send_cq = send;
        attr.recv_cq = recv;
        attr.qp_type = IBV_QPT_RC;
        attr.cap.max_send_wr = 4;
        attr.cap.max_recv_wr = 4;
        attr.cap.max_send_sge = 1;
        attr.cap.max_recv_sge = 1;
        return rdma_create_qp(id, pd, &attr) == 0;
    }
};

} // namespace

TEST_CASE("connect and accept through a channel and ids typed on io_context's executor",
          "[cm_id]") {
    // snippet-begin: typed-cm-objects
    using executor = asio::io_context::executor_type;
    using typed_channel = rdma_asio::basic_cm_event_channel<executor>;
    using typed_id = rdma_asio::basic_cm_id<executor>;
    // snippet-end
    static_assert(std::is_same_v<typed_channel::executor_type, executor>);
    static_assert(std::is_same_v<typed_id::executor_type, executor>);
    static_assert(std::is_same_v<rdma_asio::cm_event_channel::rebind_executor<executor>::other,
                                 typed_channel>);
    static_assert(std::is_same_v<rdma_asio::cm_id::rebind_executor<executor>::other, typed_id>);
    static_assert(std::is_same_v<typed_channel::native_handle_type, rdma_event_channel*>);
    static_assert(std::is_same_v<typed_id::native_handle_type, rdma_cm_id*>);

    asio::io_context ioc;
    raw_cqs cqs; // outlives the ids, whose QPs use them
    std::unique_ptr<device_resources> dev;
    typed_channel channel(ioc);
    REQUIRE(channel.is_open());
    CHECK(channel.get_executor() == ioc.get_executor());
    const auto addr = ipv4("10.0.0.1", 18812);
    // snippet-begin: typed-cm-open
    typed_id listener(ioc); // not open yet
    rdma_asio::error_code ec;
    listener.open(channel, ec); // rdma_create_id on the channel
    // snippet-end
    REQUIRE_FALSE(ec);
    listener.open(channel, ec);
    CHECK(ec == asio::error::already_open);
    listener.bind(as_sockaddr(addr));
    listener.listen();
    typed_id client(channel); // the channel's executor
    CHECK(client.get_executor() == ioc.get_executor());

    bool established = false;
    rdma_asio::error_code after_close;
    rdma_asio::error_code disconnected;
    std::string passive_event;
    rdma_asio::error_code closed_step;
    bool disconnect_ran = false;
    std::string stage = "resolve";
    bool finished = false;
    std::exception_ptr failure;
    // Named: the coroutine reads its captures through the closure, which must
    // outlive the run below (a temporary one would be gone by then).
    auto body = [&]() -> asio::awaitable<void> {
        // snippet-begin: typed-cm-default-token
        // Steps without a token are awaitables.
        auto active = asio::use_awaitable.as_default_on(std::move(client));
        co_await active.async_resolve_addr(nullptr, as_sockaddr(addr), 2s);
        co_await active.async_resolve_route(2s);
        // snippet-end
        dev = std::make_unique<device_resources>(ioc, active.native_handle()->verbs);
        cqs.make(active.native_handle()->verbs);
        REQUIRE(cqs.create_qp(active.native_handle(), dev->pd));
        // A handler without an executor of its own runs on the id's.
        recorder<> connect;
        stage = "connect";
        active.async_connect(param(), connect.handler());
        typed_id request = co_await listener.async_get_request(use_awaitable);
        stage = "accept";
        REQUIRE(request.is_open());
        CHECK(request.get_executor() == ioc.get_executor());
        REQUIRE(cqs.create_qp(request.native_handle(), dev->pd));
        co_await request.async_accept(param(), use_awaitable);
        asio::steady_timer settle(ioc, 5s);
        while (!connect.ran() && settle.expiry() > std::chrono::steady_clock::now()) {
            asio::steady_timer tick(ioc, 10ms);
            co_await tick.async_wait(use_awaitable);
        }
        established = connect.ran() && !connect.ec();
        stage = "channel close";

        // Closing the channel object ends its own wait; the ids keep the channel.
        recorder<rdma_asio::cm_event> channel_wait;
        channel.async_next(channel_wait.handler());
        channel.close();
        CHECK_FALSE(channel.is_open());
        asio::steady_timer tick(ioc, 50ms);
        co_await tick.async_wait(use_awaitable);
        REQUIRE(channel_wait.ran());
        after_close = channel_wait.ec();

        // Back to any_io_executor by a converting move; the connection goes on.
        rdma_asio::cm_id erased(std::move(request));
        CHECK_FALSE(request.is_open());
        auto [step] = co_await request.async_disconnect(as_tuple(use_awaitable));
        closed_step = step;
        // rdma_disconnect on the active side; the passive side sees DISCONNECTED
        // and answers with its own rdma_disconnect (as echo's disconnect_watch
        // does), which ends the active side's wait.
        stage = "disconnect";
        recorder<> active_disconnect;
        active.async_disconnect(active_disconnect.handler());
        auto [ec2, ev] = co_await erased.async_next(as_tuple(use_awaitable));
        if (!ec2)
            passive_event = ev.name();
        CHECK(rdma_disconnect(erased.native_handle()) == 0);
        stage = "active disconnected";
        asio::steady_timer limit(ioc, 20s);
        while (!active_disconnect.ran() && limit.expiry() > std::chrono::steady_clock::now()) {
            asio::steady_timer tick(ioc, 10ms);
            co_await tick.async_wait(use_awaitable);
        }
        disconnect_ran = active_disconnect.ran();
        disconnected = active_disconnect.ec();
        stage = "done";
    };
    asio::co_spawn(ioc, body(), [&](std::exception_ptr e) {
        finished = true;
        failure = e;
    });
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (!finished && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    CAPTURE(stage);
    REQUIRE(finished);
    if (failure)
        std::rethrow_exception(failure);
    CHECK(stage == "done");
    CHECK(established);
    CHECK(after_close == asio::error::operation_aborted);
    CHECK(closed_step == asio::error::bad_descriptor);
    CHECK(disconnect_ran);
    CHECK_FALSE(disconnected);
    CHECK(passive_event == "RDMA_CM_EVENT_DISCONNECTED");
}

} // namespace cm_rxe_test
