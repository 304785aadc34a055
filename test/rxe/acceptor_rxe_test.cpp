// rdma_asio::acceptor and rdma_asio::async_connect over rxe0 loopback (10.0.0.1
// in the test VM): connections made in one call each, carrying messages and an
// RDMA read in memory registered with connection::pd(); what happens to a
// request the acceptor cannot serve, to a cancelled or closed acceptor's
// accepts, and to a connect nobody answers.
#include <rdma_asio/acceptor.hpp>
#include <rdma_asio/connect.hpp>
#include <rdma_asio/error.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/protection_domain.hpp>
#include <rdma_asio/wc_error.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include "run_until.hpp"
#include "rxe_counters.hpp"
#include "rxe_loopback.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
using asio::use_awaitable;
using rdma_asio::errc;
using tcp = asio::ip::tcp;

namespace {

using rdma_asio::test::until;
using rdma_asio::test::with_error;

tcp::endpoint rxe0(std::uint16_t port) {
    return rdma_asio::test::rxe0_endpoint(port);
}

// async_connect to rxe0's `port`, run on `ioc` (at most 30 s): its error and
// connection.
std::tuple<rdma_asio::error_code, rdma_asio::connection> connect_to(asio::io_context& ioc,
                                                                    std::uint16_t port) {
    return rdma_asio::test::run_coroutine(
        ioc,
        [&]() -> asio::awaitable<std::tuple<rdma_asio::error_code, rdma_asio::connection>> {
            co_return co_await rdma_asio::async_connect(ioc.get_executor(), rxe0(port), with_error);
        }(),
        30s);
}

constexpr int remote_read = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

struct exchange_outcome {
    std::string server_got;
    std::string client_got;
    std::string client_read;
    bool server_open = false;
    bool client_open = false;
    bool server_pd_open = false;
    bool client_pd_open = false;
    std::uint16_t listening_port = 0;
};

// One connection, each side's memory registered with its connection's pd():
// a message each way, then the client reads the server's region.
asio::awaitable<void> serve(rdma_asio::acceptor& acceptor, std::array<char, 64>& memory,
                            std::optional<rdma_asio::remote_buffer>& exposed,
                            exchange_outcome& out) {
    rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
    out.server_open = conn.is_open();
    const rdma_asio::protection_domain pd = conn.pd();
    out.server_pd_open = pd.is_open();
    rdma_asio::memory_region mr(pd, asio::buffer(memory), remote_read);
    rdma_asio::queue_pair& qp = conn.queue_pair();
    std::strcpy(memory.data() + 32, "server's region");
    exposed = mr.remote_at(32, 16);
    const std::size_t n = co_await qp.async_receive(mr.at(0, 16), use_awaitable);
    out.server_got.assign(memory.data(), n);
    std::memcpy(memory.data() + 16, "pong", 4);
    co_await qp.async_send(mr.at(16, 4), use_awaitable);
    // The client's read and its disconnect: this side's next receive ends.
    auto [ec, ignored] = co_await qp.async_receive(mr.at(0, 16), with_error);
    CHECK(ec == errc::disconnected);
}

asio::awaitable<void> use(const tcp::endpoint& server,
                          std::optional<rdma_asio::remote_buffer>& exposed, exchange_outcome& out) {
    auto ex = co_await asio::this_coro::executor;
    rdma_asio::connection conn = co_await rdma_asio::async_connect(ex, server, use_awaitable);
    out.client_open = conn.is_open();
    std::array<char, 64> memory{};
    const rdma_asio::protection_domain pd = conn.pd();
    out.client_pd_open = pd.is_open();
    rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
    rdma_asio::queue_pair& qp = conn.queue_pair();
    qp.async_receive(mr.at(16, 16), [&](rdma_asio::error_code ec, std::size_t n) {
        out.client_got = ec ? ec.message() : std::string(memory.data() + 16, n);
    });
    std::memcpy(memory.data(), "ping", 4);
    co_await qp.async_send(mr.at(0, 4), use_awaitable);
    co_await until([&] { return !out.client_got.empty() && exposed.has_value(); });
    const std::size_t n = co_await qp.async_read(mr.at(32, 16), *exposed, use_awaitable);
    out.client_read.assign(memory.data() + 32, ::strnlen(memory.data() + 32, n));
    co_await conn.async_disconnect(use_awaitable);
}

// Holds `conn` until the peer disconnects: the error its queue pair ends with.
template <class Connection>
asio::awaitable<rdma_asio::error_code> peer_gone(Connection& conn) {
    auto [ec] = co_await conn.queue_pair().async_wait_error(with_error);
    co_return ec;
}

void run(asio::io_context& ioc, asio::awaitable<void> server, asio::awaitable<void> client) {
    rdma_asio::test::run_pair(ioc, std::move(server), std::move(client), 30s);
}

// Records each work request a device context's queue pairs post (ibv_post_send(3)
// calls the provider through ibv_context::ops.post_send), then hands it on to the
// provider unchanged: the device still checks and carries every request.
class post_send_spy {
public:
    struct posted {
        std::uint32_t qp_num;
        std::uint32_t length;
        unsigned int send_flags;
    };

    explicit post_send_spy(ibv_context* ctx) : ctx_(ctx), real_(ctx->ops.post_send) {
        current = this;
        ctx_->ops.post_send = &post;
    }
    ~post_send_spy() {
        ctx_->ops.post_send = real_;
        current = nullptr;
    }
    post_send_spy(const post_send_spy&) = delete;
    post_send_spy& operator=(const post_send_spy&) = delete;

    std::vector<posted> of(std::uint32_t qp_num) const {
        std::vector<posted> out;
        std::copy_if(log_.begin(), log_.end(), std::back_inserter(out),
                     [&](const posted& p) { return p.qp_num == qp_num; });
        return out;
    }

private:
    static int post(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
        for (const ibv_send_wr* w = wr; w != nullptr; w = w->next) {
            std::uint32_t length = 0;
            for (int i = 0; i < w->num_sge; ++i)
                length += w->sg_list[i].length;
            current->log_.push_back({qp->qp_num, length, w->send_flags});
        }
        return current->real_(qp, wr, bad);
    }

    static inline post_send_spy* current = nullptr;
    ibv_context* ctx_;
    int (*real_)(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
    std::vector<posted> log_;
};

} // namespace

TEST_CASE("an acceptor and async_connect make a connection in one call each, which carries "
          "messages both ways and an RDMA read in memory registered with its pd()",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(18850));
    std::array<char, 64> server_memory{};
    std::optional<rdma_asio::remote_buffer> exposed;
    exchange_outcome out;
    out.listening_port = acceptor.local_endpoint().port();
    run(ioc, serve(acceptor, server_memory, exposed, out), use(rxe0(18850), exposed, out));
    CHECK(out.listening_port == 18850);
    CHECK(out.server_open);
    CHECK(out.client_open);
    CHECK(out.server_pd_open);
    CHECK(out.client_pd_open);
    CHECK(out.server_got == "ping");
    CHECK(out.client_got == "pong");
    CHECK(out.client_read == "server's region");
}

TEST_CASE("async_connect by host and service, and into a connection object", "[acceptor]") {
    asio::io_context ioc;
    // Port 0: the system chooses one, which local_endpoint() tells.
    rdma_asio::acceptor acceptor(ioc, rxe0(0));
    const std::uint16_t port = acceptor.local_endpoint().port();
    REQUIRE(port != 0);
    std::vector<bool> accepted;
    bool by_name = false;
    bool into = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 2; ++i) {
                rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
                accepted.push_back(conn.is_open());
                // Held until the client's disconnect, which closes it.
                CHECK(co_await peer_gone(conn) == errc::disconnected);
            }
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection first = co_await rdma_asio::async_connect(
                ex, "10.0.0.1", std::to_string(port), use_awaitable);
            by_name = first.is_open();
            co_await first.async_disconnect(use_awaitable);
            rdma_asio::connection second(ex);
            co_await rdma_asio::async_connect(second, rxe0(port), use_awaitable);
            into = second.is_open() && second.qp() != nullptr;
            co_await second.async_disconnect(use_awaitable);
        }());
    CHECK(accepted == std::vector<bool>{true, true});
    CHECK(by_name);
    CHECK(into);
}

TEST_CASE("async_connect to a port nobody listens on ends with connection_rejected, and the "
          "connection is not open",
          "[acceptor]") {
    asio::io_context ioc;
    auto [ec, conn] = connect_to(ioc, 18851);
    CHECK(ec == errc::connection_rejected);
    CHECK_FALSE(conn.is_open());
}

TEST_CASE("a request whose connection the device refuses is rejected: that accept ends with the "
          "error and the acceptor goes on listening",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor_options options;
    options.connection.send_depth = 1u << 30; // more work requests than any device has
    rdma_asio::acceptor acceptor(ioc, rxe0(18852), options);
    std::vector<rdma_asio::error_code> accepts, connects;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 2; ++i) {
                auto [ec, conn] = co_await acceptor.async_accept(with_error);
                accepts.push_back(ec);
                CHECK_FALSE(conn.is_open());
            }
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            for (int i = 0; i < 2; ++i) {
                auto [ec, conn] = co_await rdma_asio::async_connect(ex, rxe0(18852), with_error);
                connects.push_back(ec);
            }
        }());
    REQUIRE(accepts.size() == 2);
    for (const auto& ec : accepts) {
        // ibv_create_cq or rdma_create_qp refused the depth.
        CHECK(ec);
        CHECK(ec != asio::error::operation_aborted);
    }
    CHECK(connects ==
          std::vector<rdma_asio::error_code>{errc::connection_rejected, errc::connection_rejected});
}

TEST_CASE("a cancelled accept takes no request: cancel(), and the operation's own cancellation "
          "(`||` with a timer)",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(18853));
    rdma_asio::error_code by_cancel;
    std::size_t winner = 99;
    bool accepted = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            acceptor.async_accept(
                [&](rdma_asio::error_code ec, rdma_asio::connection) { by_cancel = ec; });
            acceptor.cancel();
            asio::steady_timer timer(ioc, 50ms);
            using namespace asio::experimental::awaitable_operators;
            auto first =
                co_await (acceptor.async_accept(use_awaitable) || timer.async_wait(use_awaitable));
            winner = first.index();
            // The client connects only now: its request goes to this accept.
            rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
            accepted = conn.is_open();
            CHECK(co_await peer_gone(conn) == errc::disconnected);
        }(),
        [&]() -> asio::awaitable<void> {
            co_await until([&] { return winner != 99; });
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18853), use_awaitable);
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(by_cancel == asio::error::operation_aborted);
    CHECK(winner == 1);
    CHECK(accepted);
}

TEST_CASE("closing an acceptor ends its accepts, refuses later ones and later clients, and "
          "leaves the connections it made working",
          "[acceptor]") {
    asio::io_context ioc;
    std::optional<rdma_asio::acceptor> acceptor(std::in_place, ioc, rxe0(18854));
    rdma_asio::error_code pending, later, refused;
    std::string got;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await acceptor->async_accept(use_awaitable);
            acceptor->async_accept(
                [&](rdma_asio::error_code ec, rdma_asio::connection) { pending = ec; });
            acceptor->close();
            auto [ec, closed] = co_await acceptor->async_accept(with_error);
            later = ec;
            CHECK_FALSE(acceptor->is_open());
            acceptor.reset(); // its protection domain and channel go with the connection
            std::array<char, 16> memory{};
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
            const std::size_t n =
                co_await conn.queue_pair().async_receive(mr.at(0, 16), use_awaitable);
            got.assign(memory.data(), n);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18854), use_awaitable);
            co_await until([&] { return !acceptor; });
            std::array<char, 16> memory{'h', 'i'};
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
            co_await conn.queue_pair().async_send(mr.at(0, 2), use_awaitable);
            auto [ec, again] = co_await rdma_asio::async_connect(ex, rxe0(18854), with_error);
            refused = ec;
        }());
    CHECK(pending == asio::error::operation_aborted);
    CHECK(later == asio::error::bad_descriptor);
    CHECK(got == "hi");
    CHECK(refused == errc::connection_rejected);
}

TEST_CASE("listen says which endpoint and why: a port taken, an address no RDMA device has",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor first(ioc, rxe0(18855));
    try {
        rdma_asio::acceptor second(ioc, rxe0(18855));
        FAIL("a second acceptor listened on a port taken");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::address_in_use);
        CHECK_THAT(e.what(), Catch::Contains("10.0.0.1 port 18855") &&
                                 Catch::Contains("rdma_bind_addr") &&
                                 Catch::Contains("the port is taken"));
    }
    rdma_asio::acceptor elsewhere(ioc);
    rdma_asio::error_code ec;
    elsewhere.listen({asio::ip::make_address("192.0.2.1"), 18856}, ec);
    CHECK(ec == rdma_asio::error_code(EADDRNOTAVAIL, asio::error::get_system_category()));
    CHECK_FALSE(elsewhere.is_open());
    CHECK_THROWS_WITH(elsewhere.listen({asio::ip::make_address("192.0.2.1"), 18856}),
                      Catch::Contains("no RDMA device has this address"));
    first.listen(rxe0(18857), ec);
    CHECK(ec == asio::error::already_open);
}

// A TCP program that binds to loopback means "this host only". rdma_cm has no
// loopback device: a listener bound there was served requests sent to the RDMA
// device's address, from the network. The acceptor refuses such a bind instead.
TEST_CASE("a listen on a loopback address is refused, saying why and what to bind instead, "
          "and a client on the device's address finds nobody listening",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc);
    const rdma_asio::error_code not_available(EADDRNOTAVAIL, asio::error::get_system_category());
    for (const char* loopback : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
        INFO(loopback);
        const tcp::endpoint at(asio::ip::make_address(loopback), 18865);
        rdma_asio::error_code ec;
        acceptor.listen(at, ec);
        CHECK(ec == not_available);
        CHECK_FALSE(acceptor.is_open());
        CHECK_THROWS_WITH(acceptor.listen(at),
                          Catch::Contains(at.address().to_string() + " port 18865") &&
                              Catch::Contains("a loopback address") &&
                              Catch::Contains("the device's address"));
        CHECK_FALSE(acceptor.is_open());
        // The constructor that listens says the same.
        CHECK_THROWS_WITH((rdma_asio::acceptor{ioc, at}), Catch::Contains("a loopback address"));
    }
    auto [ec, conn] = connect_to(ioc, 18865);
    CHECK(ec == errc::connection_rejected);
    CHECK_FALSE(conn.is_open());
}

// connection_options::max_inline did nothing: the connection's queue pair was
// assigned without its protection domain, so no region could vouch for a buffer
// and every send made the device read its region (a DMA read per message).
TEST_CASE("a connection's sends of at most its max_inline_data bytes go inline, only from "
          "regions of its protection domain",
          "[acceptor][inline]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(18866));
    std::vector<std::size_t> server_got;
    std::optional<post_send_spy> spy;
    std::uint32_t client_qp = 0, max_inline = 0;
    rdma_asio::error_code foreign_send;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
            std::vector<char> memory(1024);
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
            for (int i = 0; i < 2; ++i) {
                auto [ec, n] = co_await conn.queue_pair().async_receive(mr.at(0, 1024), with_error);
                if (!ec)
                    server_got.push_back(n);
            }
            co_await peer_gone(conn);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18866), use_awaitable);
            rdma_asio::queue_pair& qp = conn.queue_pair();
            ibv_qp_attr attr{};
            ibv_qp_init_attr init{};
            REQUIRE(ibv_query_qp(conn.qp(), &attr, IBV_QP_CAP, &init) == 0);
            max_inline = init.cap.max_inline_data;
            REQUIRE(max_inline >= 64); // connection_options' default asks for 64
            client_qp = conn.qp()->qp_num;
            std::vector<char> memory(2 * max_inline + 2, 'x');
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(memory), 0);
            rdma_asio::protection_domain other_pd(conn.qp()->context);
            std::vector<char> other(max_inline, 'y');
            rdma_asio::memory_region other_mr(other_pd, asio::buffer(other), 0);
            spy.emplace(conn.qp()->context);
            co_await qp.async_send(mr.at(0, max_inline), use_awaitable);
            co_await qp.async_send(mr.at(0, max_inline + 1), use_awaitable);
            // Another domain's region, inline-sized: the device must check it, and
            // refuse it (the QP then goes to the error state: last).
            auto [ec, n] = co_await qp.async_send(other_mr.at(0, max_inline), with_error);
            foreign_send = ec;
            co_await conn.async_disconnect(with_error);
        }());
    REQUIRE(spy);
    const auto posted = spy->of(client_qp);
    REQUIRE(posted.size() == 3);
    CHECK(posted[0].length == max_inline);
    CHECK((posted[0].send_flags & IBV_SEND_INLINE) != 0);
    CHECK(posted[1].length == max_inline + 1);
    CHECK((posted[1].send_flags & IBV_SEND_INLINE) == 0);
    CHECK(posted[2].length == max_inline);
    CHECK((posted[2].send_flags & IBV_SEND_INLINE) == 0);
    CHECK((foreign_send == rdma_asio::wc_errc::local_qp_operation_error ||
           foreign_send == rdma_asio::wc_errc::local_protection_error));
    CHECK(server_got == std::vector<std::size_t>{max_inline, max_inline + 1});
}

TEST_CASE("an acceptor on a strand, rebound to another default token, hands over connections "
          "on its executor",
          "[acceptor]") {
    asio::io_context ioc;
    using strand = asio::strand<asio::io_context::executor_type>;
    const strand on(ioc.get_executor());
    rdma_asio::basic_acceptor<strand> plain(on, rxe0(18858));
    // A converting move, as asio::as_default_on makes.
    auto acceptor = asio::experimental::as_tuple(use_awaitable).as_default_on(std::move(plain));
    CHECK_FALSE(plain.is_open());
    bool on_strand = false;
    bool ok = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto [ec, conn] = co_await acceptor.async_accept();
            ok = !ec && conn.is_open();
            on_strand = conn.get_executor() == on;
            CHECK(co_await peer_gone(conn) == errc::disconnected);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18858), use_awaitable);
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(ok);
    CHECK(on_strand);
}

// (No semicolon in a test's name: CMake's test discovery splits the name there.)
TEST_CASE("an acceptor's screen reads each request's private data and rejects with a reply, "
          "and the accept goes on to the next request",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor_options options;
    std::vector<std::string> screened;
    options.screen = [&](std::span<const std::uint8_t> request, std::vector<std::uint8_t>& reply) {
        const std::string text(
            reinterpret_cast<const char*>(request.data()),
            ::strnlen(reinterpret_cast<const char*>(request.data()), request.size()));
        screened.push_back(text);
        if (text == "let me in")
            return true;
        reply = {'n', 'o'};
        return false;
    };
    rdma_asio::acceptor acceptor(ioc, rxe0(18859), options);
    std::string accepted_with;
    rdma_asio::error_code refused;
    bool admitted = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            // One accept: the refused request does not end it.
            rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
            const auto data = conn.id().private_data();
            accepted_with.assign(
                reinterpret_cast<const char*>(data.data()),
                ::strnlen(reinterpret_cast<const char*>(data.data()), data.size()));
            CHECK(co_await peer_gone(conn) == errc::disconnected);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connect_options wrong;
            wrong.private_data = {'k', 'n', 'o', 'c', 'k'};
            auto [ec, none] = co_await rdma_asio::async_connect(ex, rxe0(18859), wrong, with_error);
            refused = ec;
            rdma_asio::connect_options right;
            const std::string key = "let me in";
            right.private_data.assign(key.begin(), key.end());
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18859), right, use_awaitable);
            admitted = conn.is_open();
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(screened == std::vector<std::string>{"knock", "let me in"});
    CHECK(refused == errc::connection_rejected);
    CHECK(admitted);
    CHECK(accepted_with == "let me in");
}

// A preparation posts the first receive before the accept (or the connect), so
// that the peer's first message, sent as soon as its side is established, finds
// it: rxe0 answers no RNR NAK (send_rnr_err), which would stall that message for
// the RNR timer.
TEST_CASE("async_accept's and async_connect's preparations post the first receive before the "
          "peer may send, so its first message meets no RNR",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(18860));
    const std::uint64_t rnr_before = rdma_asio::test::rxe0_counter("send_rnr_err");
    std::string server_got, client_got;
    bool prepared_before_connected = false;
    struct buffers {
        std::array<char, 16> memory{};
        std::optional<rdma_asio::memory_region> mr;
        void prepare(rdma_asio::connection& conn, std::string& got) {
            mr.emplace(conn.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
            conn.queue_pair().async_receive(
                mr->at(0, 8), [this, &got](rdma_asio::error_code ec, std::size_t n) {
                    got = ec ? ec.message() : std::string(memory.data(), n);
                });
        }
    };
    buffers server, client;
    bool prepared = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await acceptor.async_accept(
                [&](rdma_asio::connection& made) {
                    server.prepare(made, server_got);
                    prepared = true;
                },
                use_awaitable);
            // This side sends first too, at once.
            std::memcpy(server.memory.data() + 8, "to you", 6);
            co_await conn.queue_pair().async_send(server.mr->at(8, 6), use_awaitable);
            co_await until([&] { return !server_got.empty(); });
            CHECK(co_await peer_gone(conn) == errc::disconnected);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            rdma_asio::connection conn = co_await rdma_asio::async_connect(
                ex, rxe0(18860), rdma_asio::connect_options{},
                [&](rdma_asio::connection& made) { client.prepare(made, client_got); },
                use_awaitable);
            prepared_before_connected = prepared;
            std::memcpy(client.memory.data() + 8, "to me", 5);
            co_await conn.queue_pair().async_send(client.mr->at(8, 5), use_awaitable);
            co_await until([&] { return !client_got.empty(); });
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(prepared_before_connected);
    CHECK(server_got == "to me");
    CHECK(client_got == "to you");
    CHECK(rdma_asio::test::rxe0_counter("send_rnr_err") == rnr_before);
}

// An accept cancelled after it took a request: its connection is closed, the
// peer's connect fails, and the acceptor takes the next request. The
// preparation runs between the two (the request taken, rdma_accept not yet
// made), so the cancellation comes exactly there: from the operation's own
// cancellation slot, and from acceptor::cancel().
TEST_CASE("an accept cancelled after it took a request closes that connection: the peer's "
          "connect fails and the next accept succeeds",
          "[acceptor]") {
    const bool by_cancel = GENERATE(false, true);
    const std::uint16_t port = by_cancel ? 18862 : 18863;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(port));
    rdma_asio::error_code cancelled_accept, failed_connect;
    bool next_accepted = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            asio::cancellation_signal signal;
            const auto cancel_now = [&](rdma_asio::connection&) {
                if (by_cancel)
                    acceptor.cancel();
                else
                    signal.emit(asio::cancellation_type::terminal);
            };
            auto [ec, conn] = co_await acceptor.async_accept(
                cancel_now, asio::bind_cancellation_slot(signal.slot(), with_error));
            cancelled_accept = ec;
            CHECK_FALSE(conn.is_open());
            rdma_asio::connection next = co_await acceptor.async_accept(use_awaitable);
            next_accepted = next.is_open();
            CHECK(co_await peer_gone(next) == errc::disconnected);
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            auto [ec, none] = co_await rdma_asio::async_connect(ex, rxe0(port), with_error);
            failed_connect = ec;
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(port), use_awaitable);
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(cancelled_accept == asio::error::operation_aborted);
    CHECK(failed_connect == errc::connection_rejected);
    CHECK(next_accepted);
}

// A connect cancelled while it waits for the listener's answer (the acceptor is
// not accepting yet): it ends with operation_aborted, its connection closed; the
// acceptor's next accept then serves a connect that is still waiting.
TEST_CASE("async_connect cancelled while it waits for the answer ends with operation_aborted, "
          "and the acceptor serves the next connect",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rxe0(18864));
    rdma_asio::error_code cancelled;
    bool timer_won = false, second_connected = false, accepted = false;
    run(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await until([&] { return timer_won; });
            // The cancelled connect's request may be the first one here: its
            // accept fails, or succeeds and then sees the peer gone. Accept until
            // the second client's connection comes.
            for (int i = 0; i < 3 && !accepted; ++i) {
                auto [ec, conn] = co_await acceptor.async_accept(with_error);
                if (!ec && conn.is_open()) {
                    auto [wait_ec] = co_await conn.queue_pair().async_wait_error(with_error);
                    accepted = accepted || wait_ec == errc::disconnected;
                }
            }
        }(),
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            asio::cancellation_signal signal;
            asio::steady_timer timer(ex, 200ms);
            timer.async_wait([&](rdma_asio::error_code ec) {
                if (!ec) {
                    timer_won = true;
                    signal.emit(asio::cancellation_type::terminal);
                }
            });
            auto [ec, none] = co_await rdma_asio::async_connect(
                ex, rxe0(18864), asio::bind_cancellation_slot(signal.slot(), with_error));
            cancelled = ec;
            CHECK_FALSE(none.is_open());
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ex, rxe0(18864), use_awaitable);
            second_connected = conn.is_open();
            co_await conn.async_disconnect(use_awaitable);
        }());
    CHECK(timer_won);
    CHECK(cancelled == asio::error::operation_aborted);
    CHECK(second_connected);
    CHECK(accepted);
}

// The kernel counts against rdma_listen's backlog only the requests not read from
// the channel yet, and the acceptor's channel is read as soon as an accept waits
// (or a connection of the acceptor waits for an event): the requests no accept
// took are counted by the acceptor, and those beyond the backlog rejected at once.
// Before, every request of the burst was kept, however many (and a request the
// kernel dropped was retried by the peer's CM for a minute or more).
TEST_CASE("a burst of connects beyond an acceptor's backlog: those beyond it are rejected at "
          "once, the rest accepted, none hangs",
          "[acceptor]") {
    asio::io_context ioc;
    rdma_asio::acceptor_options options;
    options.backlog = 4;
    rdma_asio::acceptor acceptor(ioc, rxe0(18868), options);
    constexpr int burst = 40;
    struct outcome {
        bool done = false;
        rdma_asio::error_code ec;
        rdma_asio::connection conn;
    };
    std::vector<outcome> connects(burst);
    std::vector<rdma_asio::connection> accepted;
    rdma_asio::error_code accept_error;
    auto accept_one = [&]() -> asio::awaitable<void> {
        auto [ec, conn] = co_await acceptor.async_accept(with_error);
        if (ec)
            accept_error = ec;
        else
            accepted.push_back(std::move(conn));
    };
    auto connect_one = [&](outcome& c) -> asio::awaitable<void> {
        std::tie(c.ec, c.conn) =
            co_await rdma_asio::async_connect(ioc.get_executor(), rxe0(18868), with_error);
        c.done = true;
    };
    auto count = [&](auto pred) { return std::count_if(connects.begin(), connects.end(), pred); };
    auto rejected = [&] {
        return count([](const outcome& c) { return c.done && c.ec == errc::connection_rejected; });
    };
    // A connection of the acceptor watches its id's events, as a server's do:
    // the acceptor's channel is read while the burst comes.
    asio::co_spawn(ioc, accept_one(), asio::detached);
    asio::co_spawn(ioc, connect_one(connects[0]), asio::detached);
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return accepted.size() == 1 && connects[0].done; }, 30s));
    REQUIRE_FALSE(connects[0].ec);
    accepted[0].queue_pair(); // starts the watch
    for (int i = 1; i < burst; ++i)
        asio::co_spawn(ioc, connect_one(connects[i]), asio::detached);
    // No accept waits: at most 4 requests are kept, the rest rejected at once.
    const bool settled = rdma_asio::test::run_until(
        ioc, [&] { return rejected() >= burst - 1 - 4; }, 30s);
    std::string other;
    for (const auto& c : connects)
        if (c.done && c.ec && c.ec != errc::connection_rejected)
            other = c.ec.message();
    INFO("after the burst: " << count([](const outcome& c) { return c.done; }) << " connects done, "
                             << rejected() << " rejected; another error: " << other);
    REQUIRE(settled);
    const auto kept = burst - 1 - rejected();
    INFO(rejected() << " of " << burst << " rejected, " << kept << " kept");
    CHECK(kept <= 4);
    for (long i = 0; i < kept; ++i)
        asio::co_spawn(ioc, accept_one(), asio::detached);
    REQUIRE(rdma_asio::test::run_until(
        ioc,
        [&] {
            return count([](const outcome& c) { return c.done; }) == burst &&
                   static_cast<long>(accepted.size()) + (accept_error ? 1 : 0) == 1 + kept;
        },
        60s));
    CHECK_FALSE(accept_error);
    CHECK(static_cast<long>(accepted.size()) == 1 + kept);
    CHECK(count([](const outcome& c) { return !c.ec && c.conn.is_open(); }) == 1 + kept);
    CHECK(rejected() == burst - 1 - kept);
    const auto it = std::find_if(connects.begin(), connects.end(), [](const outcome& c) {
        return c.ec == errc::connection_rejected;
    });
    REQUIRE(it != connects.end());
    CHECK(it->ec.message().find("backlog") != std::string::npos);
}
