// A connection built from the public API alone, as docs/connections.md shows it:
// the PD and the completion channel made on the device rdma_cm chose, one message
// sent and received over rxe0 loopback (10.0.0.1 in the test VM). The region below
// is the docs' snippet and compiles with nothing but the includes it names.

// snippet-begin: connection-from-public-api
#include <rdma_asio/cm_event_channel.hpp>
#include <rdma_asio/cm_id.hpp>
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/connection.hpp>

#include "asio_alias.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <system_error>

// What every connection on one device shares: a protection domain and a
// completion channel, made on the ibv_context that rdma_cm chose for an id
// (id.native_handle()->verbs). Both must outlive the connections made with them.
// With several devices, keep one of these per ibv_context.
struct device_resources {
    struct pd_deleter {
        void operator()(ibv_pd* pd) const noexcept { ibv_dealloc_pd(pd); }
    };

    device_resources(const asio::any_io_executor& ex, ibv_context* verbs)
        : pd(alloc_pd(verbs)), channel(ex, verbs) {}

    static ibv_pd* alloc_pd(ibv_context* verbs) {
        ibv_pd* pd = ibv_alloc_pd(verbs);
        if (pd == nullptr)
            throw rdma_asio::system_error(errno, asio::error::get_system_category(), "ibv_alloc_pd");
        return pd;
    }

    std::unique_ptr<ibv_pd, pd_deleter> pd;
    rdma_asio::completion_channel channel; // ibv_create_comp_channel
};

// Active side: an id knows its device once its address is resolved.
asio::awaitable<rdma_asio::connection> new_connection(rdma_asio::cm_event_channel& cm,
                                                      const sockaddr* server,
                                                      std::optional<device_resources>& dev) {
    rdma_asio::cm_id id(cm);
    co_await id.async_resolve_addr(nullptr, server, std::chrono::seconds(2), asio::use_awaitable);
    co_await id.async_resolve_route(std::chrono::seconds(2), asio::use_awaitable);
    if (!dev)
        dev.emplace(id.get_executor(), id.native_handle()->verbs);
    // The QP (rdma_create_qp) and its two CQs; post receives, then async_connect.
    co_return rdma_asio::connection(std::move(id), dev->channel, dev->pd.get());
}

// Passive side: a connection request comes with its device.
asio::awaitable<rdma_asio::connection> next_connection(rdma_asio::cm_id& listener,
                                                       std::optional<device_resources>& dev) {
    rdma_asio::cm_id request = co_await listener.async_get_request(asio::use_awaitable);
    if (!dev)
        dev.emplace(request.get_executor(), request.native_handle()->verbs);
    // Post receives, then async_accept.
    co_return rdma_asio::connection(std::move(request), dev->channel, dev->pd.get());
}
// snippet-end

#include <catch2/catch.hpp>

#include "run_coroutine.hpp"

#include <rdma_asio/error.hpp>
#include <rdma_asio/queue_pair.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

using namespace std::chrono_literals;
using asio::use_awaitable;

namespace {

struct mr_deleter {
    void operator()(ibv_mr* mr) const noexcept { ibv_dereg_mr(mr); }
};
using memory_region = std::unique_ptr<ibv_mr, mr_deleter>;

memory_region register_buffer(ibv_pd* pd, std::array<char, 64>& buffer) {
    // An int: verbs.h's ibv_reg_mr macro ANDs it with a flag of another enum type.
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    memory_region mr(ibv_reg_mr(pd, buffer.data(), buffer.size(), access));
    REQUIRE(mr);
    return mr;
}

ibv_sge whole(std::array<char, 64>& buffer, const memory_region& mr) {
    return ibv_sge{reinterpret_cast<std::uintptr_t>(buffer.data()),
                   static_cast<std::uint32_t>(buffer.size()), mr->lkey};
}

rdma_conn_param conn_param() {
    rdma_conn_param p{};
    p.retry_count = 7;
    return p;
}

struct outcome {
    ibv_wc_status sent = IBV_WC_GENERAL_ERR;
    ibv_wc_status received = IBV_WC_GENERAL_ERR;
    std::uint32_t received_bytes = 0;
    std::string text;
    rdma_cm_event_type server_last = RDMA_CM_EVENT_ESTABLISHED;
};

asio::awaitable<void> serve_one(rdma_asio::cm_id& listener, std::optional<device_resources>& dev,
                                outcome& out) {
    std::array<char, 64> buffer{};
    rdma_asio::connection conn = co_await next_connection(listener, dev);
    memory_region mr = register_buffer(dev->pd.get(), buffer);
    ibv_sge sge = whole(buffer, mr);
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(conn.qp(), &wr, &bad) == 0);
    co_await conn.id().async_accept(conn_param(), use_awaitable);

    std::array<ibv_wc, 1> wc;
    const std::size_t n = co_await conn.recv_cq().async_poll(wc, use_awaitable);
    REQUIRE(n == 1);
    out.received = wc[0].status;
    out.received_bytes = wc[0].byte_len;
    out.text.assign(buffer.data(), std::min<std::size_t>(wc[0].byte_len, buffer.size()));
    // The client disconnects once its send completed.
    rdma_asio::cm_event ev = co_await conn.id().async_next(use_awaitable);
    out.server_last = ev.type();
}

asio::awaitable<void> send_one(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                               std::optional<device_resources>& dev, outcome& out) {
    std::array<char, 64> buffer{};
    std::strcpy(buffer.data(), "hello over rdma_cm");
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    memory_region mr = register_buffer(dev->pd.get(), buffer);
    co_await conn.id().async_connect(conn_param(), use_awaitable);

    ibv_sge sge = whole(buffer, mr);
    sge.length = static_cast<std::uint32_t>(std::strlen(buffer.data()));
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(conn.qp(), &wr, &bad) == 0);
    std::array<ibv_wc, 1> wc;
    const std::size_t n = co_await conn.send_cq().async_poll(wc, use_awaitable);
    REQUIRE(n == 1);
    out.sent = wc[0].status;
    co_await conn.id().async_disconnect(use_awaitable);
}

} // namespace

TEST_CASE("a connection from the public API alone sends one message", "[cm_id][connection]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    // Declared before the ids and connections, so destroyed after them.
    std::optional<device_resources> server_dev, client_dev;
    rdma_asio::cm_id listener(cm);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(18820);
    REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
    listener.bind(reinterpret_cast<const sockaddr*>(&addr));
    listener.listen();

    outcome out;
    using namespace asio::experimental::awaitable_operators;
    rdma_asio::test::run_coroutine(
        ioc,
        serve_one(listener, server_dev, out) &&
            send_one(cm, reinterpret_cast<const sockaddr*>(&addr), client_dev, out),
        30s);

    CHECK(out.sent == IBV_WC_SUCCESS);
    CHECK(out.received == IBV_WC_SUCCESS);
    CHECK(out.received_bytes == std::strlen("hello over rdma_cm"));
    CHECK(out.text == "hello over rdma_cm");
    CHECK(out.server_last == RDMA_CM_EVENT_DISCONNECTED);
}

// The same connection with its work requests as operations: a message each way,
// then the client disconnects, and the server's pending receive ends with
// errc::disconnected, as a closed TCP peer ends an Asio read.
namespace {

struct work_request_outcome {
    std::string server_got, client_got;
    rdma_asio::error_code server_pending, server_later, client_pending;
};

asio::awaitable<void> serve_with_operations(rdma_asio::cm_id& listener,
                                            std::optional<device_resources>& dev,
                                            work_request_outcome& out) {
    rdma_asio::connection conn = co_await next_connection(listener, dev);
    rdma_asio::queue_pair& qp = conn.work_requests();
    std::array<char, 128> buffer{};
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    memory_region mr(ibv_reg_mr(dev->pd.get(), buffer.data(), buffer.size(), access));
    REQUIRE(mr);
    const rdma_asio::registered_buffer first{buffer.data(), 64, mr->lkey};
    const rdma_asio::registered_buffer second{buffer.data() + 64, 64, mr->lkey};
    // Posted before accepting, as a receive must be.
    std::size_t got_n = 0;
    rdma_asio::error_code got_ec;
    bool got = false;
    qp.async_receive(first, [&](rdma_asio::error_code ec, std::size_t n) {
        got_ec = ec, got_n = n, got = true;
    });
    co_await conn.id().async_accept(conn_param(), use_awaitable);
    while (!got)
        co_await asio::post(conn.id().get_executor(), use_awaitable);
    REQUIRE_FALSE(got_ec);
    out.server_got.assign(buffer.data(), got_n);
    co_await qp.async_send(rdma_asio::registered_buffer{buffer.data(), got_n, mr->lkey},
                           use_awaitable);
    // This receive waits until the client disconnects.
    auto [ec, n] = co_await qp.async_receive(second, asio::experimental::as_tuple(use_awaitable));
    out.server_pending = ec;
    auto [later, m] =
        co_await qp.async_receive(second, asio::experimental::as_tuple(use_awaitable));
    out.server_later = later;
}

asio::awaitable<void> call_with_operations(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                           std::optional<device_resources>& dev,
                                           work_request_outcome& out) {
    std::array<char, 128> buffer{};
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    rdma_asio::queue_pair& qp = conn.work_requests();
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    memory_region mr(ibv_reg_mr(dev->pd.get(), buffer.data(), buffer.size(), access));
    REQUIRE(mr);
    rdma_asio::error_code reply_ec;
    std::size_t reply_n = 0;
    bool replied = false;
    qp.async_receive(rdma_asio::registered_buffer{buffer.data() + 64, 64, mr->lkey},
                     [&](rdma_asio::error_code ec, std::size_t n) {
                         reply_ec = ec, reply_n = n, replied = true;
                     });
    co_await conn.id().async_connect(conn_param(), use_awaitable);
    std::strcpy(buffer.data(), "ping");
    co_await qp.async_send(rdma_asio::registered_buffer{buffer.data(), 4, mr->lkey}, use_awaitable);
    while (!replied)
        co_await asio::post(conn.id().get_executor(), use_awaitable);
    REQUIRE_FALSE(reply_ec);
    out.client_got.assign(buffer.data() + 64, reply_n);

    // A receive pending on this side too: the local disconnect ends it.
    bool ended = false;
    qp.async_receive(
        rdma_asio::registered_buffer{buffer.data() + 64, 64, mr->lkey},
        [&](rdma_asio::error_code ec, std::size_t) { out.client_pending = ec, ended = true; });
    co_await conn.async_disconnect(use_awaitable);
    while (!ended)
        co_await asio::post(conn.id().get_executor(), use_awaitable);
}

} // namespace

TEST_CASE("a connection's work requests as operations, and the peer's disconnect ends the pending "
          "receive",
          "[cm_id][connection][queue_pair]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    std::optional<device_resources> server_dev, client_dev;
    rdma_asio::cm_id listener(cm);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(18821);
    REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
    listener.bind(reinterpret_cast<const sockaddr*>(&addr));
    listener.listen();

    work_request_outcome out;
    using namespace asio::experimental::awaitable_operators;
    rdma_asio::test::run_coroutine(
        ioc,
        serve_with_operations(listener, server_dev, out) &&
            call_with_operations(cm, reinterpret_cast<const sockaddr*>(&addr), client_dev, out),
        30s);
    CHECK(out.server_got == "ping");
    CHECK(out.client_got == "ping");
    CHECK(out.server_pending == rdma_asio::errc::disconnected);
    CHECK(out.server_later == rdma_asio::errc::disconnected);
    CHECK(out.client_pending == rdma_asio::errc::disconnected);
}
