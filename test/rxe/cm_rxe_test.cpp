// rdma_cm steps on rxe0 loopback (10.0.0.1 in the test VM).
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "run_coroutine.hpp"

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <arpa/inet.h>

#include <chrono>
#include <memory>

using namespace std::chrono_literals;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using rdma_asio::cm_id;
using rdma_asio::errc;

namespace {

sockaddr_in ipv4(const char* address, unsigned short port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    REQUIRE(::inet_pton(AF_INET, address, &addr.sin_addr) == 1);
    return addr;
}
const sockaddr* as_sockaddr(const sockaddr_in& a) {
    return reinterpret_cast<const sockaddr*>(&a);
}

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
    }());
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
        std::move(connecting)([&](std::error_code ec) {
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
