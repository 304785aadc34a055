// A connection built from the public API alone, as docs/connections.md shows it:
// the protection domain and the completion channel made on the device rdma_cm
// chose, one message sent and received over rxe0 loopback (10.0.0.1 in the test
// VM). The region below is the docs' snippet and compiles with nothing but the
// includes it names.

// snippet-begin: connection-from-public-api
#include <rdma_asio/cm_event_channel.hpp>
#include <rdma_asio/cm_id.hpp>
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/connection.hpp>
#include <rdma_asio/protection_domain.hpp>

#include "asio_alias.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <optional>

// What every connection on one device shares: a protection domain and a
// completion channel, made on the ibv_context that rdma_cm chose for an id
// (id.native_handle()->verbs). Each connection keeps its share of both, so they
// may go before the connections. With several devices, keep one of these per
// ibv_context.
struct device_resources {
    device_resources(const asio::any_io_executor& ex, ibv_context* verbs)
        : pd(verbs), channel(ex, verbs) {}

    rdma_asio::protection_domain pd;       // ibv_alloc_pd
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
    co_return rdma_asio::connection(std::move(id), dev->channel, dev->pd);
}

// Passive side: a connection request comes with its device.
asio::awaitable<rdma_asio::connection> next_connection(rdma_asio::cm_id& listener,
                                                       std::optional<device_resources>& dev) {
    rdma_asio::cm_id request = co_await listener.async_get_request(asio::use_awaitable);
    if (!dev)
        dev.emplace(request.get_executor(), request.native_handle()->verbs);
    // Post receives, then async_accept.
    co_return rdma_asio::connection(std::move(request), dev->channel, dev->pd);
}
// snippet-end

#include <catch2/catch.hpp>

#include "kernel_resources.hpp"
#include "recorder.hpp"
#include "run_coroutine.hpp"
#include "run_until.hpp"
#include "rxe_loopback.hpp"

#include "test_device.hpp"

#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/completion_queue.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/error.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/queue_pair.hpp>
#include <rdma_asio/shared_receive_queue.hpp>

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
    memory_region mr = register_buffer(dev->pd.native_handle(), buffer);
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
    memory_region mr = register_buffer(dev->pd.native_handle(), buffer);
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
    rdma_asio::queue_pair& qp = conn.queue_pair();
    std::array<char, 128> buffer{};
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    memory_region mr(ibv_reg_mr(dev->pd.native_handle(), buffer.data(), buffer.size(), access));
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
    rdma_asio::queue_pair& qp = conn.queue_pair();
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    memory_region mr(ibv_reg_mr(dev->pd.native_handle(), buffer.data(), buffer.size(), access));
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

// A connection made from a protection_domain shares its ownership, as a memory
// region does: the object may be closed first, the connection still works, and the
// ibv_pd is deallocated when the connection goes. The kernel's own count of this
// process's PDs (rdma-resource(8)) shows it: a PD whose ibv_dealloc_pd failed
// (EBUSY, the QP still on it) or that nobody deallocated would still be listed.
namespace {

std::size_t pds_of_this_process() {
    FILE* pipe = ::popen("rdma -j resource show pd 2>&1", "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    std::array<char, 4096> chunk;
    for (std::size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0;)
        out.append(chunk.data(), n);
    const int status = ::pclose(pipe);
    INFO("rdma -j resource show pd: " << out);
    REQUIRE(status == 0);
    const std::string key = "\"pid\":" + std::to_string(::getpid()) + ",";
    std::size_t count = 0;
    for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + key.size()))
        ++count;
    return count;
}

struct shared_pd_outcome {
    std::string server_got, client_got;
    bool client_pd_open_after_close = true;
    long client_pd_owners_with_connection = 0; // the protection_domain and the connection
    long client_pd_owners_after_close = 0;     // the connection alone
    std::size_t pds_while_connected = 0;
    bool client_pd_released = false; // the connection's share went with it
    std::size_t pds_after_connection = 0;
};

// Echoes one message on a connection made from `pd`, which stays open.
asio::awaitable<void> echo_one(rdma_asio::cm_id& listener, rdma_asio::completion_channel& channel,
                               const rdma_asio::protection_domain& pd, shared_pd_outcome& out) {
    rdma_asio::cm_id request = co_await listener.async_get_request(use_awaitable);
    rdma_asio::connection conn(std::move(request), channel, pd);
    rdma_asio::queue_pair& qp = conn.queue_pair();
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr(pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    bool got = false;
    std::size_t got_n = 0;
    rdma_asio::error_code got_ec;
    qp.async_receive(mr.at(0, 32), [&](rdma_asio::error_code ec, std::size_t n) {
        got_ec = ec, got_n = n, got = true;
    });
    co_await conn.id().async_accept(conn_param(), use_awaitable);
    while (!got)
        co_await asio::post(conn.id().get_executor(), use_awaitable);
    REQUIRE_FALSE(got_ec);
    out.server_got.assign(reinterpret_cast<const char*>(bytes.data()), got_n);
    co_await qp.async_send(mr.at(0, got_n), use_awaitable);
    // Until the client disconnects.
    auto [ec, n] =
        co_await qp.async_receive(mr.at(32, 32), asio::experimental::as_tuple(use_awaitable));
    REQUIRE(ec == rdma_asio::errc::disconnected);
}

// Makes its own protection_domain, connects with it, closes it, and then sends a
// message and receives its echo on that connection.
asio::awaitable<void> call_after_closing_the_pd(rdma_asio::cm_event_channel& cm,
                                                const sockaddr* server, shared_pd_outcome& out) {
    rdma_asio::cm_id id(cm);
    co_await id.async_resolve_addr(nullptr, server, 2s, use_awaitable);
    co_await id.async_resolve_route(2s, use_awaitable);
    ibv_context* verbs = id.native_handle()->verbs;
    rdma_asio::completion_channel channel(id.get_executor(), verbs);
    std::weak_ptr<ibv_pd> owners;
    {
        std::optional<rdma_asio::connection> conn;
        {
            rdma_asio::protection_domain pd(verbs);
            owners = pd.share();
            conn.emplace(std::move(id), channel, pd);
            out.client_pd_owners_with_connection = owners.use_count();
            pd.close();
            out.client_pd_open_after_close = pd.is_open();
        } // and the protection_domain object is gone
        out.client_pd_owners_after_close = owners.use_count();
        out.pds_while_connected = pds_of_this_process();

        // The PD is only reachable through the connection now: register by hand.
        ibv_pd* raw = owners.lock().get();
        REQUIRE(raw != nullptr);
        std::array<char, 64> buffer{};
        constexpr int access = IBV_ACCESS_LOCAL_WRITE;
        memory_region mr(ibv_reg_mr(raw, buffer.data(), buffer.size(), access));
        REQUIRE(mr);
        rdma_asio::queue_pair& qp = conn->queue_pair();
        bool replied = false;
        std::size_t reply_n = 0;
        rdma_asio::error_code reply_ec;
        qp.async_receive(rdma_asio::registered_buffer{buffer.data() + 32, 32, mr->lkey},
                         [&](rdma_asio::error_code ec, std::size_t n) {
                             reply_ec = ec, reply_n = n, replied = true;
                         });
        co_await conn->id().async_connect(conn_param(), use_awaitable);
        std::strcpy(buffer.data(), "after the PD closed");
        co_await qp.async_send(
            rdma_asio::registered_buffer{buffer.data(), std::strlen(buffer.data()), mr->lkey},
            use_awaitable);
        while (!replied)
            co_await asio::post(conn->id().get_executor(), use_awaitable);
        REQUIRE_FALSE(reply_ec);
        out.client_got.assign(buffer.data() + 32, reply_n);
        co_await conn->async_disconnect(use_awaitable);
    } // the memory region (deregistered), then the connection
    out.client_pd_released = owners.expired();
    out.pds_after_connection = pds_of_this_process();
}

} // namespace

TEST_CASE("a connection keeps its protection domain allocated until it goes",
          "[connection][protection_domain]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    rdma_asio::cm_id listener(cm);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(18822);
    REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
    listener.bind(reinterpret_cast<const sockaddr*>(&addr));
    listener.listen();
    // The server's resources first, so that the client's PD is the only one that
    // comes and goes while the count is taken.
    ibv_context* verbs = listener.native_handle()->verbs;
    REQUIRE(verbs != nullptr);
    rdma_asio::protection_domain server_pd(verbs);
    rdma_asio::completion_channel server_channel(ioc.get_executor(), verbs);
    const std::size_t pds_before = pds_of_this_process();

    shared_pd_outcome out;
    using namespace asio::experimental::awaitable_operators;
    rdma_asio::test::run_coroutine(
        ioc,
        echo_one(listener, server_channel, server_pd, out) &&
            call_after_closing_the_pd(cm, reinterpret_cast<const sockaddr*>(&addr), out),
        30s);

    CHECK(out.server_got == "after the PD closed");
    CHECK(out.client_got == "after the PD closed");
    CHECK(out.client_pd_owners_with_connection == 2);
    CHECK_FALSE(out.client_pd_open_after_close);
    CHECK(out.client_pd_owners_after_close == 1);
    CHECK(out.pds_while_connected == pds_before + 1);
    CHECK(out.client_pd_released);
    CHECK(out.pds_after_connection == pds_before);
    // The server's connection is gone and released its share: this deallocates the
    // PD now, which ibv_dealloc_pd refuses (EBUSY) while a QP is on it.
    rdma_asio::error_code ec;
    server_pd.close(ec);
    CHECK_FALSE(ec);
    CHECK(pds_of_this_process() == pds_before - 1);
}

TEST_CASE("a connection refuses a closed protection domain and one of another device context",
          "[connection][protection_domain][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(18823);
    REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
    // An id that knows its device (nobody needs to listen).
    auto resolved = [&] {
        rdma_asio::cm_id id(cm);
        ioc.restart();
        rdma_asio::test::run_coroutine(
            ioc,
            [&]() -> asio::awaitable<void> {
                co_await id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&addr),
                                               2s, use_awaitable);
            }(),
            30s);
        REQUIRE(id.native_handle()->verbs != nullptr);
        return id;
    };
    // The constructor's message and code, or none when it did not throw.
    auto refusal = [](auto make, std::string& what) {
        what.clear();
        try {
            make();
        } catch (const rdma_asio::system_error& e) {
            what = e.what();
            return e.code();
        }
        return rdma_asio::error_code();
    };

    rdma_asio::cm_id id = resolved();
    ibv_context* verbs = id.native_handle()->verbs;
    rdma_asio::completion_channel channel(ioc.get_executor(), verbs);
    rdma_asio::protection_domain closed(verbs);
    closed.close();
    std::string what;
    CHECK(refusal([&] { rdma_asio::connection conn(std::move(id), channel, closed); }, what) ==
          asio::error::bad_descriptor);
    CHECK(what.find("rdma_asio::connection: the protection domain is not open") !=
          std::string::npos);

    // The same device opened a second time is another ibv_context, whose PD the
    // id's QP cannot use.
    rdma_asio::context other(rdma_asio::test::test_device_name());
    rdma_asio::protection_domain foreign(other);
    rdma_asio::cm_id second = resolved();
    CHECK(refusal([&] { rdma_asio::connection conn(std::move(second), channel, foreign); }, what) ==
          asio::error::invalid_argument);
    CHECK(what.find("rdma_asio::connection: the PD is null or on another device") !=
          std::string::npos);
}

// The connection as an I/O object: its watch for the peer's disconnect is a wait of
// its own. async_disconnect stops that wait alone, and the id's other waits stay
// pending (first come, first served, as with cm_id::async_disconnect); cancel()
// cancels the user's waits and keeps the watch; close() ends everything.
namespace {

// An io_context with an rdma_cm channel and an id listening on 10.0.0.1:`port`.
struct listening {
    explicit listening(std::uint16_t port) {
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
        listener.bind(address());
        listener.listen();
    }
    const sockaddr* address() const { return reinterpret_cast<const sockaddr*>(&addr); }
    // Runs both sides to their ends, within 30 s.
    void run(asio::awaitable<void> server, asio::awaitable<void> client) {
        using namespace asio::experimental::awaitable_operators;
        rdma_asio::test::run_coroutine(ioc, std::move(server) && std::move(client), 30s);
    }

    asio::io_context ioc;
    rdma_asio::cm_event_channel cm{ioc};
    rdma_asio::cm_id listener{cm};
    sockaddr_in addr{};
    std::optional<device_resources> server_dev, client_dev;
};

// Accepts one connection with a receive posted, and returns once that receive
// has ended: with `ended`, and, when it carried a message, `got` (then the server
// disconnects itself).
asio::awaitable<void> accept_and_receive(rdma_asio::cm_id& listener,
                                         std::optional<device_resources>& dev,
                                         rdma_asio::error_code& ended, std::string& got) {
    rdma_asio::connection conn = co_await next_connection(listener, dev);
    rdma_asio::queue_pair& qp = conn.queue_pair();
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr(dev->pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    bool done = false;
    std::size_t n = 0;
    qp.async_receive(mr.at(0, 64), [&](rdma_asio::error_code ec, std::size_t bytes_received) {
        ended = ec, n = bytes_received, done = true;
    });
    co_await conn.id().async_accept(conn_param(), use_awaitable);
    while (!done)
        co_await asio::post(conn.get_executor(), use_awaitable);
    if (ended)
        co_return;
    got.assign(reinterpret_cast<const char*>(bytes.data()), n);
    co_await conn.async_disconnect(use_awaitable);
}

struct user_wait_outcome {
    rdma_asio::error_code user_ec = asio::error::would_block; // not completed
    rdma_cm_event_type user_event = RDMA_CM_EVENT_ESTABLISHED;
    bool disconnect_completed = false;
    rdma_asio::error_code server_ended;
    std::string server_got;
};

asio::awaitable<void> disconnect_with_a_wait_pending(rdma_asio::cm_event_channel& cm,
                                                     const sockaddr* server,
                                                     std::optional<device_resources>& dev,
                                                     user_wait_outcome& out) {
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    conn.queue_pair(); // starts the watch
    co_await conn.id().async_connect(conn_param(), use_awaitable);
    // The user's own wait for the id's next event, pending across the disconnect.
    bool user_done = false;
    conn.id().async_next([&](rdma_asio::error_code ec, rdma_asio::cm_event ev) {
        out.user_ec = ec;
        if (!ec)
            out.user_event = ev.type();
        user_done = true;
    });
    // Its DISCONNECTED goes to the user's earlier wait; the disconnect's own wait
    // then has nothing to take, so a timer bounds it.
    asio::steady_timer timer(conn.get_executor(), 2s);
    using namespace asio::experimental::awaitable_operators;
    auto first = co_await (conn.async_disconnect(use_awaitable) || timer.async_wait(use_awaitable));
    out.disconnect_completed = first.index() == 0;
    while (!user_done)
        co_await asio::post(conn.get_executor(), use_awaitable);
}

} // namespace

TEST_CASE("a connection's async_disconnect leaves the id's other waits pending",
          "[cm_id][connection]") {
    listening net(18824);
    user_wait_outcome out;
    net.run(accept_and_receive(net.listener, net.server_dev, out.server_ended, out.server_got),
            disconnect_with_a_wait_pending(net.cm, net.address(), net.client_dev, out));
    // Stopping the watch did not cancel the user's wait: it took the DISCONNECTED.
    CHECK(out.user_ec == rdma_asio::error_code());
    CHECK(out.user_event == RDMA_CM_EVENT_DISCONNECTED);
    CHECK_FALSE(out.disconnect_completed);
    CHECK(out.server_ended == rdma_asio::errc::disconnected);
}

namespace {

struct cancel_close_outcome {
    rdma_asio::error_code user_ec = asio::error::would_block; // not completed
    rdma_asio::error_code receive_after_cancel = asio::error::would_block;
    bool open_before_close = false;
    bool open_after_close = true;
    rdma_asio::error_code queue_pair_after_close;
    rdma_asio::error_code next_after_close = asio::error::would_block;
    rdma_asio::error_code server_ended;
    std::string server_got;
};

// `id_only`: conn.id().cancel() instead of conn.cancel(): the id's waits end, and
// the watch, the connection's own, goes on as well.
asio::awaitable<void> cancel_then_close(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                        std::optional<device_resources>& dev, bool id_only,
                                        cancel_close_outcome& out) {
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    rdma_asio::queue_pair& qp = conn.queue_pair(); // starts the watch
    co_await conn.id().async_connect(conn_param(), use_awaitable);

    // cancel(): the user's wait on the id ends; nothing was posted, so the QP
    // stays usable, and the watch goes on.
    bool user_done = false;
    conn.id().async_next(
        [&](rdma_asio::error_code ec, rdma_asio::cm_event) { out.user_ec = ec, user_done = true; });
    if (id_only)
        conn.id().cancel();
    else
        conn.cancel();
    while (!user_done)
        co_await asio::post(conn.get_executor(), use_awaitable);
    // An async_disconnect made with deferred and never launched changes nothing:
    // before, it stopped the watch as it was made, and the send below then failed
    // with errc::disconnected.
    { auto never_launched = conn.async_disconnect(asio::experimental::deferred); }

    // A receive posted after cancel(), ended by the server's disconnect, which only
    // a watch still running can see: the peer's disconnect flushes its own QP, not
    // this one.
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr(dev->pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    bool received = false;
    qp.async_receive(mr.at(32, 32), [&](rdma_asio::error_code ec, std::size_t) {
        out.receive_after_cancel = ec, received = true;
    });
    std::memcpy(bytes.data(), "go", 2);
    co_await qp.async_send(mr.at(0, 2), use_awaitable);
    while (!received)
        co_await asio::post(conn.get_executor(), use_awaitable);

    out.open_before_close = conn.is_open();
    conn.close();
    conn.close(); // idempotent
    out.open_after_close = conn.is_open();
    try {
        conn.queue_pair();
    } catch (const rdma_asio::system_error& e) {
        out.queue_pair_after_close = e.code();
    }
    auto [ec, ev] = co_await conn.id().async_next(asio::experimental::as_tuple(use_awaitable));
    out.next_after_close = ec;
}

} // namespace

// conn.id().cancel() ended the watch before (it was one of the id's waits) and
// nothing restarted it: the receive below then never ended.
TEST_CASE("a connection's cancel(), its id's cancel() and an async_disconnect never launched "
          "keep the watch for the peer's disconnect and close() ends it",
          "[cm_id][connection]") {
    const bool id_only = GENERATE(false, true);
    CAPTURE(id_only);
    listening net(id_only ? 18831 : 18825);
    cancel_close_outcome out;
    net.run(accept_and_receive(net.listener, net.server_dev, out.server_ended, out.server_got),
            cancel_then_close(net.cm, net.address(), net.client_dev, id_only, out));
    CHECK(out.user_ec == asio::error::operation_aborted);
    CHECK(out.server_got == "go");
    CHECK_FALSE(out.server_ended);
    CHECK(out.receive_after_cancel == rdma_asio::errc::disconnected);
    CHECK(out.open_before_close);
    CHECK_FALSE(out.open_after_close);
    CHECK(out.queue_pair_after_close == asio::error::bad_descriptor);
    CHECK(out.next_after_close == asio::error::bad_descriptor);
}

namespace {

struct srq_service_outcome {
    std::vector<std::uint32_t> server_qps;      // in the order accepted
    std::map<std::uint32_t, std::string> by_qp; // what arrived on each
    std::size_t received = 0;
    rdma_asio::error_code receive_error;
    rdma_asio::error_code own_receive = asio::error::would_block;
    std::vector<rdma_asio::error_code> client_ends;
};

// Accepts `clients` connections onto one shared receive queue and one CQ, takes
// two messages from each, then disconnects them all.
asio::awaitable<void> serve_on_srq(rdma_asio::cm_id& listener, std::optional<device_resources>& dev,
                                   std::size_t clients, srq_service_outcome& out) {
    std::optional<rdma_asio::cm_id> request(co_await listener.async_get_request(use_awaitable));
    dev.emplace(request->get_executor(), request->native_handle()->verbs);
    // snippet-begin: connections-srq
    // Shared by every connection: one CQ, one pool of receives.
    rdma_asio::completion_queue cq(dev->channel, 1024);
    rdma_asio::shared_receive_queue srq(listener.get_executor(), dev->pd, {.depth = 256});
    // snippet-end
    const std::size_t messages = 2 * clients;
    std::vector<std::byte> memory(64 * messages);
    rdma_asio::memory_region mr(dev->pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
    std::vector<rdma_asio::receive_info> info(messages);
    for (std::size_t i = 0; i < messages; ++i)
        srq.async_receive(mr.at(64 * i, 64), info[i],
                          [&, i](rdma_asio::error_code ec, std::size_t n) {
                              ++out.received;
                              if (ec) {
                                  out.receive_error = ec;
                                  return;
                              }
                              out.by_qp[info[i].qp_num].append(
                                  reinterpret_cast<const char*>(memory.data() + 64 * i), n);
                          });
    std::vector<rdma_asio::connection> conns;
    conns.reserve(clients);
    for (std::size_t c = 0; c < clients; ++c) {
        if (!request)
            request.emplace(co_await listener.async_get_request(use_awaitable));
        // snippet-begin: connections-srq-accept
        rdma_asio::connection conn(std::move(*request), dev->pd, cq, cq, srq);
        co_await conn.id().async_accept(use_awaitable);
        // snippet-end
        request.reset();
        out.server_qps.push_back(conn.qp()->qp_num);
        conns.push_back(std::move(conn));
    }
    while (out.received < messages)
        co_await asio::post(listener.get_executor(), use_awaitable);
    // The connection's queue pair sends; its own receives are the SRQ's.
    auto [ec, n] = co_await conns[0].queue_pair().async_receive(
        mr.at(0, 64), asio::experimental::as_tuple(use_awaitable));
    out.own_receive = ec;
    for (auto& conn : conns)
        co_await conn.async_disconnect(use_awaitable);
}

// Connects `clients` times in turn, each connection sending "<c>a" and "<c>b";
// then waits, on a receive, for each to be disconnected.
asio::awaitable<void> send_twice_each(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                      std::optional<device_resources>& dev, std::size_t clients,
                                      srq_service_outcome& out) {
    std::vector<rdma_asio::connection> conns;
    conns.reserve(clients);
    std::vector<std::byte> memory(64 * clients);
    std::optional<rdma_asio::memory_region> mr;
    for (std::size_t c = 0; c < clients; ++c) {
        conns.push_back(co_await new_connection(cm, server, dev));
        if (!mr)
            mr.emplace(dev->pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
        rdma_asio::queue_pair& qp = conns.back().queue_pair();
        co_await conns.back().id().async_connect(conn_param(), use_awaitable);
        auto* text = reinterpret_cast<char*>(memory.data() + 64 * c);
        for (char k : {'a', 'b'}) {
            text[0] = static_cast<char>('0' + c);
            text[1] = k;
            co_await qp.async_send(mr->at(64 * c, 2), use_awaitable);
        }
    }
    for (std::size_t c = 0; c < clients; ++c) {
        auto [ec, n] = co_await conns[c].queue_pair().async_receive(
            mr->at(64 * c + 32, 32), asio::experimental::as_tuple(use_awaitable));
        out.client_ends.push_back(ec);
    }
}

} // namespace

TEST_CASE("connections accepted onto one shared receive queue and one CQ: each message names "
          "its connection",
          "[cm_id][connection][shared_receive_queue]") {
    listening net(18826);
    srq_service_outcome out;
    constexpr std::size_t clients = 3;
    net.run(serve_on_srq(net.listener, net.server_dev, clients, out),
            send_twice_each(net.cm, net.address(), net.client_dev, clients, out));
    CHECK_FALSE(out.receive_error);
    CHECK(out.received == 2 * clients);
    REQUIRE(out.server_qps.size() == clients);
    REQUIRE(out.by_qp.size() == clients);
    for (std::size_t c = 0; c < clients; ++c) {
        // Client c's two messages, in order, on the server's c-th connection.
        const std::string expected = std::string{char('0' + c), 'a', char('0' + c), 'b'};
        CHECK(out.by_qp[out.server_qps[c]] == expected);
    }
    CHECK(out.own_receive == rdma_asio::errc::receive_on_shared_queue);
    REQUIRE(out.client_ends.size() == clients);
    for (const auto& ec : out.client_ends)
        CHECK(ec == rdma_asio::errc::disconnected);
}

namespace {

struct leave_service_outcome {
    rdma_asio::error_code receive_ec = asio::error::would_block; // not completed
    std::size_t received = 0;
    bool named_the_connection = false;
    rdma_asio::error_code left_ec = asio::error::would_block;
};

// Accepts one connection onto a shared receive queue and waits, with
// async_wait_error, for it to leave service, after one message.
asio::awaitable<void> watch_on_srq(rdma_asio::cm_id& listener, std::optional<device_resources>& dev,
                                   leave_service_outcome& out) {
    rdma_asio::cm_id request = co_await listener.async_get_request(use_awaitable);
    dev.emplace(request.get_executor(), request.native_handle()->verbs);
    rdma_asio::completion_queue cq(dev->channel, 16);
    rdma_asio::shared_receive_queue srq(request.get_executor(), dev->pd);
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr(dev->pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    rdma_asio::receive_info info;
    srq.async_receive(mr.at(0, 64), info, [&](rdma_asio::error_code ec, std::size_t n) {
        out.receive_ec = ec, out.received = n;
    });
    rdma_asio::connection conn(std::move(request), dev->pd, cq, cq, srq);
    const std::uint32_t qp_num = conn.qp()->qp_num;
    conn.queue_pair().async_wait_error([&](rdma_asio::error_code ec) { out.left_ec = ec; });
    co_await conn.id().async_accept(conn_param(), use_awaitable);
    while (out.left_ec == asio::error::would_block)
        co_await asio::post(conn.get_executor(), use_awaitable);
    out.named_the_connection = info.qp_num == qp_num;
}

// Sends one message, then disconnects.
asio::awaitable<void> send_and_disconnect(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                          std::optional<device_resources>& dev) {
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    co_await conn.id().async_connect(conn_param(), use_awaitable);
    std::array<std::byte, 8> bytes{};
    rdma_asio::memory_region mr(dev->pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    co_await conn.queue_pair().async_send(mr.at(0, 8), use_awaitable);
    co_await conn.async_disconnect(use_awaitable);
}

} // namespace

// A connection on a shared receive queue has no receive of its own that the
// peer's disconnect would end: async_wait_error is how the server learns of it.
TEST_CASE("async_wait_error on a connection on a shared receive queue ends with disconnected "
          "when the peer disconnects",
          "[cm_id][connection][shared_receive_queue][async_wait_error]") {
    listening net(18829);
    leave_service_outcome out;
    net.run(watch_on_srq(net.listener, net.server_dev, out),
            send_and_disconnect(net.cm, net.address(), net.client_dev));
    CHECK_FALSE(out.receive_ec); // in service until then: the message came through
    CHECK(out.received == 8);
    CHECK(out.named_the_connection);
    CHECK(out.left_ec == rdma_asio::errc::disconnected);
}

namespace {

// An id bound to the test VM's rxe0 address: it knows its device, and has no peer.
rdma_asio::cm_id bound_id(rdma_asio::cm_event_channel& cm) {
    rdma_asio::cm_id id(cm);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr) == 1);
    id.bind(reinterpret_cast<const sockaddr*>(&addr));
    REQUIRE(id.native_handle()->verbs != nullptr);
    return id;
}

} // namespace

TEST_CASE("a connection refuses a shared receive queue of another protection domain, and closed "
          "shared parts",
          "[cm_id][connection][shared_receive_queue][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    rdma_asio::cm_id id = bound_id(cm);
    device_resources dev(ioc.get_executor(), id.native_handle()->verbs);
    rdma_asio::protection_domain other_pd(id.native_handle()->verbs);
    rdma_asio::completion_queue cq(dev.channel, 16);
    rdma_asio::shared_receive_queue foreign(ioc.get_executor(), other_pd);
    auto code_of = [&](rdma_asio::shared_receive_queue& srq, rdma_asio::completion_queue& q) {
        try {
            rdma_asio::connection conn(std::move(id), dev.pd, q, q, srq);
        } catch (const rdma_asio::system_error& e) {
            INFO(e.what());
            return e.code();
        }
        return rdma_asio::error_code();
    };
    // The id is moved into the attempt; a refusal before rdma_create_qp leaves it
    // to be destroyed with the attempt, so each case takes a new one.
    CHECK(code_of(foreign, cq) == asio::error::invalid_argument);
    CHECK_FALSE(id.is_open());
    id = bound_id(cm);
    rdma_asio::shared_receive_queue closed(ioc.get_executor(), dev.pd);
    closed.close();
    CHECK(code_of(closed, cq) == asio::error::bad_descriptor);
    id = bound_id(cm);
    rdma_asio::shared_receive_queue good(ioc.get_executor(), dev.pd);
    rdma_asio::completion_queue closed_cq(dev.channel, 16);
    closed_cq.close();
    CHECK(code_of(good, closed_cq) == asio::error::bad_descriptor);
    // Nothing was created on the shared parts.
    CHECK(good.is_open());
    CHECK(cq.is_open());
}

// async_close of a connection's queue pair waits for the QP's
// IBV_EVENT_QP_LAST_WQE_REACHED; closing the connection destroys the QP through
// its id, and the kernel drops the event with it. Before, async_close then waited
// until cancelled (no handler within the bound here); now the close ends it.
// Either way round: the wait already started (operation_aborted), or a deferred
// async_close launched only after the close, which finds the queue pair closed
// (bad_descriptor: a deferred async_close acts when launched, not when made).
TEST_CASE("async_close of a connection's queue pair on a shared receive queue ends "
          "when the connection is closed under it",
          "[cm_id][connection][shared_receive_queue][async_close][close]") {
    const bool deferred = GENERATE(false, true);
    INFO((deferred ? "a deferred async_close, started after the close" : "async_close started"));
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    rdma_asio::cm_id id = bound_id(cm);
    ibv_context* verbs = id.native_handle()->verbs;
    device_resources dev(ioc.get_executor(), verbs);
    rdma_asio::completion_queue cq(dev.channel, 16);
    rdma_asio::shared_receive_queue srq(ioc.get_executor(), dev.pd);
    rdma_asio::async_event_stream events(ioc);
    events.open(verbs);
    rdma_asio::connection conn(std::move(id), dev.pd, cq, cq, srq);
    const int qps = rdma_asio::test::kernel_qps_of_this_process();

    rdma_asio::test::recorder<> closed;
    if (deferred) {
        auto op = conn.queue_pair().async_close(events, asio::experimental::deferred);
        conn.close(); // destroys the QP (rdma_destroy_qp) through the id
        CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
        std::move(op)(closed.handler());
    } else {
        conn.queue_pair().async_close(events, closed.handler());
        // Stopped, not destroyed: it waits for the event.
        CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps);
        conn.close();
        CHECK(rdma_asio::test::kernel_qps_of_this_process() == qps - 1);
    }
    CHECK(closed.calls() == 0); // never inside a call
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return closed.calls() == 1; }, std::chrono::seconds(5)));
    CHECK(closed.ec() == (deferred ? asio::error::bad_descriptor : asio::error::operation_aborted));
}

namespace {

// Connects, starts a receive, and closes the connection's id by itself.
asio::awaitable<void> close_the_id_alone(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                         std::optional<device_resources>& dev,
                                         rdma_asio::error_code& receive_ended,
                                         rdma_asio::error_code& send_after) {
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    rdma_asio::queue_pair& qp = conn.queue_pair();
    co_await conn.id().async_connect(conn_param(), use_awaitable);
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr(dev->pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    bool ended = false;
    qp.async_receive(mr.at(0, 64), [&](rdma_asio::error_code ec, std::size_t) {
        receive_ended = ec, ended = true;
    });
    conn.id().close(); // destroys the QP and the id: the queue pair lets go first
    while (!ended)
        co_await asio::post(conn.get_executor(), use_awaitable);
    auto [ec, n] = co_await qp.async_send(mr.at(0, 8), asio::experimental::as_tuple(use_awaitable));
    send_after = ec;
} // the connection's own close() finds the queue pair and the id closed

} // namespace

// Before, the queue pair kept the destroyed QP and id: its receive never ended,
// and its close read the freed id (ASan: heap-use-after-free).
TEST_CASE("closing a connection's id by itself closes its queue pair first",
          "[cm_id][connection][close]") {
    listening net(18827);
    rdma_asio::error_code server_ended, receive_ended = asio::error::would_block,
                                        send_after = asio::error::would_block;
    std::string server_got;
    net.run(accept_and_receive(net.listener, net.server_dev, server_ended, server_got),
            close_the_id_alone(net.cm, net.address(), net.client_dev, receive_ended, send_after));
    CHECK(receive_ended == asio::error::operation_aborted);
    CHECK(send_after == asio::error::bad_descriptor);
    CHECK(server_ended); // the peer saw the connection end
}

// Connection parameters chosen by the library (rdma_asio::default_conn_param,
// async_connect and async_accept without parameters): responder resources and
// initiator depth from the device's limits, so RDMA reads and atomics work both
// ways without the program choosing values (an all-zero rdma_conn_param asks for
// none in flight).
namespace {

struct default_param_outcome {
    rdma_conn_param client{};
    rdma_conn_param server{};
    std::string read;
    std::uint64_t before_add = 0;
    std::string server_got;
    std::string server_failed; // what() of an exception, for the test's thread to check
    std::string client_failed;
};

// Runs `body`, keeping what it throws in `failed`.
asio::awaitable<void> recorded(asio::awaitable<void> body, std::string& failed) {
    try {
        co_await std::move(body);
    } catch (const std::exception& e) {
        failed = e.what();
    }
}

constexpr int remote_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

using rdma_asio::test::until;

// 64 bytes at an 8-byte aligned address, as atomics need: on the heap, so aligned
// wherever the object itself lives (a coroutine frame included).
struct aligned_memory {
    std::vector<std::uint64_t> words = std::vector<std::uint64_t>(8);
    char* data() { return reinterpret_cast<char*>(words.data()); }
    asio::mutable_buffer buffer() { return asio::buffer(words); }
};

asio::awaitable<void> serve_with_defaults(rdma_asio::cm_id& listener,
                                          std::optional<device_resources>& dev,
                                          aligned_memory& memory,
                                          std::optional<rdma_asio::remote_buffer>& exposed,
                                          default_param_outcome& out) {
    rdma_asio::connection conn = co_await next_connection(listener, dev);
    rdma_asio::memory_region mr(dev->pd, memory.buffer(), remote_access);
    std::strcpy(memory.data(), "read me");
    std::uint64_t counter = 41;
    std::memcpy(memory.data() + 32, &counter, sizeof counter);
    out.server = rdma_asio::default_conn_param(conn.id());
    rdma_asio::queue_pair& qp = conn.queue_pair();
    // Posted before the accept, so that the client's message finds it.
    std::optional<std::size_t> got;
    qp.async_receive(mr.at(48, 16),
                     [&](rdma_asio::error_code ec, std::size_t n) { got = ec ? 0 : n; });
    co_await conn.id().async_accept(use_awaitable);
    exposed = mr.remote_at(0, 48);
    co_await until([&] { return got.has_value(); });
    out.server_got.assign(memory.data() + 48, *got);
}

asio::awaitable<void> use_with_defaults(rdma_asio::cm_event_channel& cm, const sockaddr* server,
                                        std::optional<device_resources>& dev,
                                        std::optional<rdma_asio::remote_buffer>& exposed,
                                        default_param_outcome& out) {
    aligned_memory memory;
    rdma_asio::connection conn = co_await new_connection(cm, server, dev);
    rdma_asio::memory_region mr(dev->pd, memory.buffer(), IBV_ACCESS_LOCAL_WRITE);
    out.client = rdma_asio::default_conn_param(conn.id());
    rdma_asio::queue_pair& qp = conn.queue_pair();
    co_await conn.id().async_connect(use_awaitable);
    // The server's region, in this same process, once it accepted.
    co_await until([&] { return exposed.has_value(); });
    rdma_asio::remote_buffer text = *exposed;
    text.size = 8;
    const std::size_t n = co_await qp.async_read(mr.at(0, 8), text, use_awaitable);
    out.read.assign(memory.data(), ::strnlen(memory.data(), n));
    rdma_asio::remote_buffer word = *exposed;
    word.address += 32;
    word.size = 8;
    out.before_add = co_await qp.async_fetch_add(mr.at(16, 8), word, 1, use_awaitable);
    std::strcpy(memory.data() + 32, "done");
    co_await qp.async_send(mr.at(32, 4), use_awaitable);
}

} // namespace

TEST_CASE("a connection made with the library's parameters serves RDMA reads and atomics",
          "[cm_id][connection]") {
    listening net(18840);
    aligned_memory server_memory;
    std::optional<rdma_asio::remote_buffer> exposed;
    default_param_outcome out;
    net.run(recorded(serve_with_defaults(net.listener, net.server_dev, server_memory, exposed, out),
                     out.server_failed),
            recorded(use_with_defaults(net.cm, net.address(), net.client_dev, exposed, out),
                     out.client_failed));
    CHECK(out.server_failed == "");
    CHECK(out.client_failed == "");

    // The device's limits, clamped to the 8-bit fields (both sides: one device).
    ibv_device_attr device{};
    REQUIRE(ibv_query_device(net.server_dev->pd.native_handle()->context, &device) == 0);
    const auto limit = [](int v) { return std::min(v, 255); };
    CHECK(out.client.responder_resources == limit(device.max_qp_rd_atom));
    CHECK(out.client.initiator_depth == limit(device.max_qp_init_rd_atom));
    CHECK(out.client.responder_resources > 0);
    CHECK(out.client.retry_count == 7);
    CHECK(out.client.rnr_retry_count == 7);
    CHECK(out.client.private_data == nullptr);
    // The server's: within the request's, which asked for the client's.
    CHECK(out.server.responder_resources ==
          std::min(out.client.initiator_depth, out.client.responder_resources));
    CHECK(out.server.initiator_depth > 0);
    CHECK(out.read == "read me");
    CHECK(out.before_add == 41);
    std::uint64_t after = 0;
    std::memcpy(&after, server_memory.data() + 32, sizeof after);
    CHECK(after == 42);
    CHECK(out.server_got == "done");
}

TEST_CASE("default_conn_param of an id without a device or not open says so",
          "[cm_id][connection]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    rdma_asio::cm_id fresh(cm); // no address resolved: no device yet
    rdma_asio::error_code ec;
    (void)rdma_asio::default_conn_param(fresh, ec);
    CHECK(ec == asio::error::no_such_device);
    rdma_asio::cm_id closed(ioc);
    (void)rdma_asio::default_conn_param(closed, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(rdma_asio::default_conn_param(closed), rdma_asio::system_error);
}
