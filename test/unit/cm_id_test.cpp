#include "rdma_asio/cm_id.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include "each_token.hpp"

#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"

#include "asio_alias.hpp"

#include <infiniband/ib.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace cm_id_test {

using namespace std::chrono_literals;

// The cancellation types each kind of rdma_cm operation honours (see
// docs/cancellation.md): a step's librdmacm call stays made, so a step is never
// totally cancelled; the waits that make no call give back what they took.
static_assert(
    std::is_same_v<rdma_asio::detail::cm_step<>::cancellation, asio::enable_partial_cancellation>);
namespace {
struct any_adopt {}; // the request kind's cancellation does not depend on it
} // namespace
static_assert(std::is_same_v<rdma_asio::detail::cm_request<any_adopt>::cancellation,
                             asio::enable_total_cancellation>);
static_assert(
    std::is_same_v<rdma_asio::detail::cm_next<rdma_asio::detail::cm_id_match>::cancellation,
                   asio::enable_total_cancellation>);
using rdma_asio::cm_id;

namespace {

// What a call threw: its error and its message, or nothing.
struct thrown {
    bool any = false;
    rdma_asio::error_code ec;
    std::string what;
};
template <class F>
thrown call(F&& f) {
    thrown t;
    try {
        f();
    } catch (const rdma_asio::system_error& e) {
        t = {true, e.code(), e.what()};
    }
    return t;
}

// Every asynchronous operation of a cm_id, started with a handler bound to `ex`
// that records its error.
std::vector<std::pair<const char*, std::function<void(cm_id&, rdma_asio::error_code&, bool&)>>>
every_async_operation(asio::io_context& ioc) {
    auto ex = ioc.get_executor();
    auto done = [ex](rdma_asio::error_code& out, bool& ran) {
        return asio::bind_executor(ex, [&out, &ran](rdma_asio::error_code ec, auto&&...) {
            out = ec;
            ran = true;
        });
    };
    static const sockaddr_in dst = [] {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        return a;
    }();
    return {
        {"async_resolve_addr",
         [=](cm_id& id, rdma_asio::error_code& ec, bool& ran) {
             id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&dst), 1s,
                                   done(ec, ran));
         }},
        {"async_resolve_route", [=](cm_id& id, rdma_asio::error_code& ec,
                                    bool& ran) { id.async_resolve_route(1s, done(ec, ran)); }},
        {"async_connect", [=](cm_id& id, rdma_asio::error_code& ec,
                              bool& ran) { id.async_connect(rdma_conn_param{}, done(ec, ran)); }},
        {"async_accept", [=](cm_id& id, rdma_asio::error_code& ec,
                             bool& ran) { id.async_accept(rdma_conn_param{}, done(ec, ran)); }},
        {"async_disconnect", [=](cm_id& id, rdma_asio::error_code& ec,
                                 bool& ran) { id.async_disconnect(done(ec, ran)); }},
        {"async_get_request", [=](cm_id& id, rdma_asio::error_code& ec,
                                  bool& ran) { id.async_get_request(done(ec, ran)); }},
        {"async_next",
         [=](cm_id& id, rdma_asio::error_code& ec, bool& ran) { id.async_next(done(ec, ran)); }},
    };
}

// `size` bytes that end where an inaccessible page begins: reading one byte
// more crashes.
class guarded_bytes {
public:
    explicit guarded_bytes(std::size_t size)
        : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
        void* p =
            ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(p != MAP_FAILED);
        base_ = static_cast<unsigned char*>(p);
        REQUIRE(::mprotect(base_ + page_, page_, PROT_NONE) == 0);
        data_ = base_ + page_ - size;
    }
    ~guarded_bytes() { ::munmap(base_, 2 * page_); }
    guarded_bytes(const guarded_bytes&) = delete;
    guarded_bytes& operator=(const guarded_bytes&) = delete;
    sockaddr* addr() const { return reinterpret_cast<sockaddr*>(data_); }

private:
    std::size_t page_;
    unsigned char* base_ = nullptr;
    unsigned char* data_ = nullptr;
};

} // namespace

TEST_CASE("cm_id, cm_event_channel and connection are move-only I/O objects", "[cm_id]") {
    static_assert(!std::is_copy_constructible_v<rdma_asio::cm_id>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::cm_id>);
    static_assert(std::is_nothrow_move_assignable_v<rdma_asio::cm_id>);
    static_assert(!std::is_copy_constructible_v<rdma_asio::cm_event_channel>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::cm_event_channel>);
    static_assert(!std::is_copy_constructible_v<rdma_asio::connection>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::connection>);
    rdma_asio::cm_id id;
    CHECK_FALSE(id.is_open());
    CHECK(id.native_handle() == nullptr);
    id.close(); // not open: nothing to do
}

TEST_CASE("the channel opens where rdma_cm exists, else fails naming rdma_create_event_channel",
          "[cm_id]") {
    asio::io_context ioc;
    if (std::ifstream("/dev/infiniband/rdma_cm").good()) {
        rdma_asio::cm_event_channel channel(ioc);
        CHECK(channel.native_handle() != nullptr);
        return;
    }
    try {
        rdma_asio::cm_event_channel channel(ioc);
        FAIL("an event channel opened without /dev/infiniband/rdma_cm");
    } catch (const rdma_asio::system_error& e) {
        CHECK(std::string(e.what()).find("rdma_create_event_channel") != std::string::npos);
    }
}

TEST_CASE("misuse: the synchronous calls of a default or moved-from cm_id throw EBADF naming "
          "the call",
          "[cm_id][misuse]") {
    cm_id original;
    cm_id moved = std::move(original);
    for (cm_id* id : {&original, &moved}) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        const thrown bind = call([&] { id->bind(reinterpret_cast<const sockaddr*>(&addr)); });
        CHECK(bind.ec == asio::error::bad_descriptor);
        CHECK(bind.what.find("rdma_bind_addr") != std::string::npos);
        const thrown listen = call([&] { id->listen(); });
        CHECK(listen.ec == asio::error::bad_descriptor);
        CHECK(listen.what.find("rdma_listen") != std::string::npos);
        const thrown reject = call([&] { id->reject(); });
        CHECK(reject.ec == asio::error::bad_descriptor);
        CHECK(reject.what.find("rdma_reject") != std::string::npos);
        CHECK(id->local_port() == 0);
        CHECK(id->private_data().empty()); // not an id from a connection request
        id->cancel();                      // documented: nothing to cancel
        id->close();
        CHECK_FALSE(id->is_open());
    }
}

TEST_CASE("misuse: every operation of a default cm_id completes with bad_descriptor, posted",
          "[cm_id][misuse]") {
    asio::io_context ioc;
    for (auto& [name, start] : every_async_operation(ioc)) {
        CAPTURE(name);
        cm_id id;
        rdma_asio::error_code ec;
        bool ran = false;
        start(id, ec, ran);
        CHECK_FALSE(ran); // never inside the initiating call
        ioc.restart();
        CHECK(ioc.run_for(5s) >= 1);
        REQUIRE(ran);
        CHECK(ec == asio::error::bad_descriptor);
    }
}

namespace {

// Every operation of `id`, a closed cm_id, completes with bad_descriptor through
// every completion token, each callback made by `adapt`.
template <class Adapt>
void every_operation_fails(asio::io_context& ioc, cm_id& id, Adapt adapt) {
    using rdma_asio::test::each_token;
    auto nothing = [] {};
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    auto fails = [](const auto& got) {
        REQUIRE(got.calls() == 1);
        CHECK(got.ec() == asio::error::bad_descriptor);
    };
    SECTION("async_resolve_addr") {
        fails(each_token<>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&dst), 1s,
                                             std::forward<decltype(token)>(token));
            },
            nothing, adapt));
    }
    SECTION("async_resolve_route") {
        fails(each_token<>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_resolve_route(1s, std::forward<decltype(token)>(token));
            },
            nothing, adapt));
    }
    SECTION("async_connect") {
        fails(each_token<>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_connect(rdma_conn_param{}, std::forward<decltype(token)>(token));
            },
            nothing, adapt));
    }
    SECTION("async_accept") {
        fails(each_token<>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_accept(rdma_conn_param{}, std::forward<decltype(token)>(token));
            },
            nothing, adapt));
    }
    SECTION("async_disconnect") {
        fails(each_token<>::complete(
            ioc,
            [&](auto&& token) { return id.async_disconnect(std::forward<decltype(token)>(token)); },
            nothing, adapt));
    }
    SECTION("async_join_multicast") {
        fails(each_token<rdma_asio::datagram_endpoint>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_join_multicast(reinterpret_cast<const sockaddr*>(&dst),
                                               std::forward<decltype(token)>(token));
            },
            nothing, adapt));
    }
    SECTION("async_get_request") {
        auto got = each_token<cm_id>::complete(
            ioc,
            [&](auto&& token) {
                return id.async_get_request(std::forward<decltype(token)>(token));
            },
            nothing, adapt);
        fails(got);
        CHECK_FALSE(got.value().is_open());
    }
    SECTION("async_next") {
        auto got = each_token<rdma_asio::cm_event>::complete(
            ioc, [&](auto&& token) { return id.async_next(std::forward<decltype(token)>(token)); },
            nothing, adapt);
        fails(got);
        CHECK_FALSE(static_cast<bool>(got.value()));
    }
}

} // namespace

TEST_CASE("misuse: every operation of a default cm_id completes with bad_descriptor through "
          "every completion token",
          "[cm_id][misuse][tokens]") {
    asio::io_context ioc;
    cm_id id;
    // A default cm_id has no executor: a callback brings its own (without one, the
    // initiating call throws, see below).
    every_operation_fails(ioc, id, rdma_asio::test::on_executor{ioc});
}

// With an executor of its own, a plain callback will do: also one passed as a const
// lvalue, as Asio's own operations take it (each_token), which the rdma_cm steps
// refused to compile before.
TEST_CASE("misuse: every operation of a closed cm_id with an executor completes with "
          "bad_descriptor through every completion token",
          "[cm_id][misuse][tokens]") {
    asio::io_context ioc;
    cm_id id(ioc.get_executor());
    every_operation_fails(ioc, id, rdma_asio::test::as_is{});
}

TEST_CASE("misuse: without any executor for the handler, a default cm_id's operation throws "
          "naming it",
          "[cm_id][misuse]") {
    cm_id id;
    const thrown next =
        call([&] { id.async_next([](rdma_asio::error_code, rdma_asio::cm_event) {}); });
    CHECK(next.ec == asio::error::bad_descriptor);
    CHECK(next.what.find("rdma_asio::cm_id::async_next") != std::string::npos);
    const thrown connect =
        call([&] { id.async_connect(rdma_conn_param{}, [](rdma_asio::error_code) {}); });
    CHECK(connect.ec == asio::error::bad_descriptor);
    CHECK(connect.what.find("rdma_asio::cm_id::async_connect") != std::string::npos);
    const thrown request =
        call([&] { id.async_get_request([](rdma_asio::error_code, rdma_asio::cm_id) {}); });
    CHECK(request.what.find("rdma_asio::cm_id::async_get_request") != std::string::npos);
}

TEST_CASE("misuse: a coroutine's operation on a default cm_id ends with bad_descriptor",
          "[cm_id][misuse]") {
    asio::io_context ioc;
    rdma_asio::error_code got_step, got_request;
    bool request_open = true;
    bool deferred_ran = false;
    rdma_asio::error_code got_deferred;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            cm_id id;
            auto [ec] =
                co_await id.async_disconnect(asio::experimental::as_tuple(asio::use_awaitable));
            got_step = ec;
            auto [ec2, request] =
                co_await id.async_get_request(asio::experimental::as_tuple(asio::use_awaitable));
            got_request = ec2;
            request_open = request.is_open();
        },
        asio::detached);
    cm_id id;
    auto op = id.async_resolve_route(1s, asio::experimental::deferred);
    std::move(op)(asio::bind_executor(ioc, [&](rdma_asio::error_code ec) {
        got_deferred = ec;
        deferred_ran = true;
    }));
    ioc.run_for(5s);
    CHECK(got_step == asio::error::bad_descriptor);
    CHECK(got_request == asio::error::bad_descriptor);
    CHECK_FALSE(request_open);
    REQUIRE(deferred_ran);
    CHECK(got_deferred == asio::error::bad_descriptor);
}

TEST_CASE("misuse: cm addresses: AF_INET, AF_INET6, AF_IB have their own length, anything else "
          "is refused",
          "[cm_id][misuse]") {
    static_assert(sizeof(sockaddr_ib) == 48);
    socklen_t length = 1;
    CHECK(rdma_asio::detail::cm_address_length(nullptr, length) == asio::error::invalid_argument);
    CHECK(length == 0);
    struct family_case {
        sa_family_t family;
        std::size_t size; // of the object the caller passes
        rdma_asio::error_code expected;
        socklen_t length;
    };
    const rdma_asio::error_code ok;
    const rdma_asio::error_code refused = asio::error::address_family_not_supported;
    const family_case all[] = {
        {AF_INET, sizeof(sockaddr_in), ok, sizeof(sockaddr_in)},
        {AF_INET6, sizeof(sockaddr_in6), ok, sizeof(sockaddr_in6)},
        {AF_IB, sizeof(sockaddr_ib), ok, 48},
        {AF_UNSPEC, sizeof(sockaddr), refused, 0},
        {AF_UNIX, sizeof(sa_family_t), refused, 0},
        {AF_PACKET, sizeof(sa_family_t), refused, 0},
    };
    for (const auto& c : all) {
        CAPTURE(c.family);
        // The address ends at an inaccessible page: an over-read crashes.
        guarded_bytes bytes(c.size);
        std::memset(bytes.addr(), 0, c.size);
        bytes.addr()->sa_family = c.family;
        CHECK(rdma_asio::detail::cm_address_length(bytes.addr(), length) == c.expected);
        CHECK(length == c.length);
        // resolve_addr copies the address when the step is initiated.
        rdma_cm_id unresolved{};
        auto step = rdma_asio::detail::cm_call::resolve_addr(nullptr, bytes.addr(), 1s);
        if (c.expected)
            CHECK(step(&unresolved) == c.expected); // refused before librdmacm is called
        auto with_src = rdma_asio::detail::cm_call::resolve_addr(bytes.addr(), bytes.addr(), 1s);
        if (c.expected)
            CHECK(with_src(&unresolved) == c.expected);
    }
    rdma_cm_id unresolved{};
    CHECK(rdma_asio::detail::cm_call::resolve_addr(nullptr, nullptr, 1s)(&unresolved) ==
          asio::error::invalid_argument);
}

TEST_CASE("misuse: steps that need a device refuse an id without one (ENODEV), private data "
          "without a pointer (EINVAL)",
          "[cm_id][misuse]") {
    // Nothing here reaches librdmacm: each call is refused first.
    rdma_cm_id no_device{};
    using rdma_asio::detail::cm_call;
    const rdma_asio::error_code no_dev = asio::error::no_such_device;
    CHECK(cm_call::resolve_route(1s)(&no_device) == no_dev);
    CHECK(cm_call::connect(rdma_conn_param{})(&no_device) == no_dev);
    CHECK(cm_call::accept(rdma_conn_param{})(&no_device) == no_dev);
    CHECK(cm_call::disconnect()(&no_device) == no_dev);
    rdma_conn_param bad{};
    bad.private_data = nullptr;
    bad.private_data_len = 8;
    CHECK(cm_call::connect(bad)(&no_device) == asio::error::invalid_argument);
    CHECK(cm_call::accept(bad)(&no_device) == asio::error::invalid_argument);
}

// rdma_join_multicast(3) "joined" a unicast IPv4 address on RoCE, and
// attach_multicast then refused the endpoint it gave: refused at the join now.
TEST_CASE("misuse: joining an IPv4 or IPv6 address that is not a multicast group is refused "
          "(EINVAL) before librdmacm is called",
          "[cm_id][misuse][multicast]") {
    using rdma_asio::detail::cm_call;
    rdma_cm_id no_device{};
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    const auto join = [&](const auto& address) {
        return cm_call::join_multicast(reinterpret_cast<const sockaddr*>(&address))(&no_device);
    };
    for (const char* unicast : {"10.0.0.1", "127.0.0.1", "0.0.0.0", "255.255.255.255"}) {
        CAPTURE(unicast);
        REQUIRE(inet_pton(AF_INET, unicast, &v4.sin_addr) == 1);
        CHECK(join(v4) == asio::error::invalid_argument);
    }
    for (const char* unicast : {"fe80::1", "::1", "2001:db8::1"}) {
        CAPTURE(unicast);
        REQUIRE(inet_pton(AF_INET6, unicast, &v6.sin6_addr) == 1);
        CHECK(join(v6) == asio::error::invalid_argument);
    }
    // A group goes on to the next check (this id has no device).
    for (const char* group : {"224.0.0.1", "239.1.2.3", "239.255.255.255"}) {
        CAPTURE(group);
        REQUIRE(inet_pton(AF_INET, group, &v4.sin_addr) == 1);
        CHECK(join(v4) == asio::error::no_such_device);
    }
    REQUIRE(inet_pton(AF_INET6, "ff0e::1", &v6.sin6_addr) == 1);
    CHECK(join(v6) == asio::error::no_such_device);
}

TEST_CASE("an id typed on io_context's executor: operations of a closed one complete on its "
          "executor, as_default_on, a converting move, open on a closed channel",
          "[cm_id]") {
    using executor = asio::io_context::executor_type;
    using typed_id = rdma_asio::basic_cm_id<executor>;
    static_assert(std::is_same_v<typed_id::executor_type, executor>);
    static_assert(std::is_same_v<cm_id::rebind_executor<executor>::other, typed_id>);
    static_assert(std::is_same_v<typed_id::native_handle_type, rdma_cm_id*>);
    static_assert(std::is_same_v<cm_id::native_handle_type, rdma_cm_id*>);
    static_assert(!std::is_copy_constructible_v<typed_id>);
    static_assert(std::is_nothrow_move_constructible_v<typed_id>);
    static_assert(std::is_nothrow_constructible_v<cm_id, typed_id&&>);
    // Only an id on an executor type with a default has a default constructor.
    static_assert(std::is_default_constructible_v<cm_id>);
    static_assert(!std::is_default_constructible_v<typed_id>);

    asio::io_context ioc;
    typed_id id(ioc);
    CHECK_FALSE(id.is_open());
    CHECK(id.native_handle() == nullptr);
    CHECK(id.get_executor() == ioc.get_executor());

    // Handlers without an executor of their own run on the id's.
    std::vector<rdma_asio::error_code> steps;
    auto record = [&](rdma_asio::error_code ec, auto&&...) { steps.push_back(ec); };
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&dst), 1s, record);
    id.async_resolve_route(1s, record);
    id.async_connect(rdma_conn_param{}, record);
    id.async_accept(rdma_conn_param{}, record);
    id.async_disconnect(record);
    id.async_next(record);
    bool request_ran = false;
    rdma_asio::error_code request_ec;
    bool request_open = true;
    bool request_on_ioc = false;
    id.async_get_request([&](rdma_asio::error_code ec, typed_id request) {
        request_ran = true;
        request_ec = ec;
        request_open = request.is_open();
        request_on_ioc = request.get_executor() == ioc.get_executor();
    });
    CHECK(steps.empty()); // never inside the initiating call
    CHECK_FALSE(request_ran);
    ioc.run_for(5s);
    REQUIRE(steps.size() == 6);
    for (const auto& ec : steps)
        CHECK(ec == asio::error::bad_descriptor);
    REQUIRE(request_ran);
    CHECK(request_ec == asio::error::bad_descriptor);
    CHECK_FALSE(request_open);
    CHECK(request_on_ioc); // a closed id of the listener's executor

    // as_default_on: steps without a token are awaitables.
    auto awaiting = asio::use_awaitable.as_default_on(std::move(id));
    rdma_asio::error_code awaited;
    ioc.restart();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            try {
                co_await awaiting.async_disconnect();
            } catch (const rdma_asio::system_error& e) {
                awaited = e.code();
            }
        },
        asio::detached);
    ioc.run_for(5s);
    CHECK(awaited == asio::error::bad_descriptor);

    // Back to any_io_executor by a converting move: closed, with the executor.
    // (Its executor is the awaitable-defaulting wrapper of the io_context's.)
    cm_id erased(std::move(awaiting));
    CHECK_FALSE(erased.is_open());
    CHECK(&asio::query(erased.get_executor(), asio::execution::context) == &ioc);

    // open() on a channel that is not open: bad_descriptor, as an error code or
    // thrown naming rdma_create_id.
    rdma_asio::error_code channel_ec;
    rdma_asio::cm_event_channel channel(ioc, channel_ec);
    rdma_asio::cm_event_channel other(std::move(channel));
    REQUIRE_FALSE(channel.is_open());
    rdma_asio::error_code ec = asio::error::timed_out;
    erased.open(channel, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(erased.is_open());
    const thrown open = call([&] { erased.open(channel); });
    CHECK(open.ec == asio::error::bad_descriptor);
    CHECK(open.what.find("rdma_create_id") != std::string::npos);
    const thrown construct = call([&] { typed_id on_closed(ioc.get_executor(), channel); });
    CHECK(construct.ec == asio::error::bad_descriptor);
}

} // namespace cm_id_test
