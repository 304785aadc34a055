#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/testing/netdev.hpp"

#include <catch2/catch.hpp>

#include "event_collector.hpp"
#include "nothing_pending.hpp"
#include "test_device.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <algorithm>
#include <cstring>

namespace async_event_stream_rxe_test {

using namespace std::chrono_literals;
using namespace rdma_asio::test;
using rdma_asio::async_event;
using rdma_asio::event_match;
using rdma_asio::event_type;

namespace {

struct device_fixture {
    rdma_asio::context ctx{test_device_name()};
    asio::io_context ioc;
    rdma_asio::async_event_stream stream{ioc, ctx};
    // Every test ends with nothing pending, or says here why it leaves work behind.
    ~device_fixture() {
        if (pending_on_purpose == nullptr)
            CHECK(rdma_asio::test::nothing_pending(ioc));
    }
    const char* pending_on_purpose = nullptr;
};

// Brings the port's network device (veth0 in the test VM) back up however the
// test ends, and waits for the port.
struct link_restorer {
    ibv_context* ctx;
    std::string netdev = rdma_asio::testing::netdev_of(ctx);
    ~link_restorer() {
        try {
            rdma_asio::testing::set_link(netdev, true);
        } catch (const rdma_asio::system_error&) {
            // The wait below says whether the port came back.
        }
        wait_port_state(ctx, IBV_PORT_ACTIVE, 10s);
    }
};

bool all_on_port_1(const event_list& events) {
    return std::all_of(events.begin(), events.end(),
                       [](const async_event& ev) { return ev.port_num() == 1; });
}

bool has_gid(const rdma_asio::port_state& ps, const unsigned char (&raw)[16]) {
    return std::any_of(ps.gids.begin(), ps.gids.end(), [&](const ibv_gid_entry& e) {
        return std::memcmp(e.gid.raw, raw, 16) == 0;
    });
}

} // namespace

TEST_CASE_METHOD(device_fixture, "PORT_ERR and PORT_ACTIVE follow veth0 down and up",
                 "[async_event_stream]") {
    link_restorer restore{ctx.native_handle()};
    REQUIRE(stream.port(1)->state == IBV_PORT_ACTIVE);

    rdma_asio::testing::set_link(restore.netdev, false);
    event_list down = collect_events(ioc, stream, 1500ms);
    CAPTURE(down.size());
    CHECK(count_of(down, event_type::port_err) == 1);
    CHECK(down.size() == 1);
    CHECK(all_on_port_1(down));
    CHECK(stream.port(1)->state != IBV_PORT_ACTIVE);

    rdma_asio::testing::set_link(restore.netdev, true);
    event_list up = collect_events(ioc, stream, 2000ms);
    const std::size_t active = count_of(up, event_type::port_active);
    UNSCOPED_INFO("PORT_ACTIVE events after link up: " << active);
    // rxe reports PORT_ACTIVE twice for one link-up (measured on Debian's 6.1).
    CHECK(active == 2);
    CHECK(up.size() == active);
    CHECK(all_on_port_1(up));
    CHECK(stream.port(1)->state == IBV_PORT_ACTIVE);
    CHECK(stream.port(1)->events == 3);
}

TEST_CASE_METHOD(device_fixture, "GID_CHANGE follows an address added to and removed from veth0",
                 "[async_event_stream]") {
    const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 9};
    REQUIRE_FALSE(has_gid(*stream.port(1), mapped));

    rdma_asio::testing::scoped_address address(rdma_asio::testing::netdev_of(ctx.native_handle()),
                                               "10.0.0.9/24");
    event_list added = collect_events(ioc, stream, 1500ms);
    address.remove();
    CHECK(count_of(added, event_type::gid_change) == 1);
    CHECK(added.size() == 1);
    CHECK(all_on_port_1(added));
    // The cache was refreshed while the event was read.
    event_list removed = collect_events(ioc, stream, 1500ms);
    CHECK(count_of(removed, event_type::gid_change) == 1);
    CHECK(removed.size() == 1);
    CHECK_FALSE(has_gid(*stream.port(1), mapped));
}

TEST_CASE_METHOD(device_fixture, "the port cache sees a new GID", "[async_event_stream]") {
    const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 10};
    rdma_asio::testing::scoped_address address(rdma_asio::testing::netdev_of(ctx.native_handle()),
                                               "10.0.0.10/24");
    event_list added = collect_events(ioc, stream, 3000ms, [](const event_list& v) {
        return count_of(v, event_type::gid_change) >= 1;
    });
    const bool seen = has_gid(*stream.port(1), mapped);
    address.remove();
    // The removal's GID_CHANGE is read here: left in flight, it reached the next
    // test's stream when the cases ran in one process (rxe.all_in_one_process).
    event_list removed = collect_events(ioc, stream, 3000ms, [](const event_list& v) {
        return count_of(v, event_type::gid_change) >= 1;
    });
    CHECK(count_of(added, event_type::gid_change) == 1);
    CHECK(seen);
    CHECK(count_of(removed, event_type::gid_change) == 1);
}

TEST_CASE_METHOD(device_fixture, "CQ_ERR follows an overrun of a one-entry CQ",
                 "[async_event_stream]") {
    pd_ptr pd = make_pd(ctx.native_handle());
    cq_ptr small = make_cq(ctx.native_handle(), 1);
    cq_ptr other = make_cq(ctx.native_handle(), 16);
    qp_ptr a = make_rc_qp(pd.get(), small.get(), other.get());
    qp_ptr b = make_rc_qp(pd.get(), other.get(), other.get());
    connect_rc(ctx.native_handle(), a.get(), b->qp_num);
    connect_rc(ctx.native_handle(), b.get(), a->qp_num);
    registered_buffer src(pd.get(), 64), dst(pd.get(), 64);

    const int posted = 4;
    for (int i = 0; i < posted; ++i)
        post_rdma_write(a.get(), src, dst, static_cast<std::uint64_t>(i));
    event_list events = collect_events(ioc, stream, 2000ms);
    const int capacity = small->cqe;
    UNSCOPED_INFO("CQ capacity " << capacity << ", CQ_ERR events " << events.size());
    // rxe raises one CQ_ERR per completion that found the CQ full.
    CHECK(count_of(events, event_type::cq_err) == static_cast<std::size_t>(posted - capacity));
    CHECK(events.size() == count_of(events, event_type::cq_err));
    for (const async_event& ev : events)
        CHECK(ev.cq() == small.get());
    events.clear(); // ack before the CQ is destroyed
}

TEST_CASE_METHOD(device_fixture, "SRQ_LIMIT_REACHED fires once when receives drop below the limit",
                 "[async_event_stream]") {
    pd_ptr pd = make_pd(ctx.native_handle());
    cq_ptr cq = make_cq(ctx.native_handle(), 64);
    srq_ptr srq = make_srq(pd.get(), 16);
    registered_buffer buf(pd.get(), 64);
    for (int i = 0; i < 10; ++i)
        post_srq_recv(srq.get(), buf, static_cast<std::uint64_t>(i));
    ibv_srq_attr limit{};
    limit.srq_limit = 5;
    REQUIRE(ibv_modify_srq(srq.get(), &limit, IBV_SRQ_LIMIT) == 0);

    qp_ptr sender = make_rc_qp(pd.get(), cq.get(), cq.get());
    qp_ptr receiver = make_rc_qp(pd.get(), cq.get(), cq.get(), srq.get());
    connect_rc(ctx.native_handle(), sender.get(), receiver->qp_num);
    connect_rc(ctx.native_handle(), receiver.get(), sender->qp_num);
    for (int i = 0; i < 6; ++i)
        post_send(sender.get(), buf, static_cast<std::uint64_t>(100 + i));

    event_list events = collect_events(ioc, stream, 2000ms);
    CHECK(count_of(events, event_type::srq_limit_reached) == 1);
    CHECK(events.size() == 1);
    for (const async_event& ev : events)
        CHECK(ev.srq() == srq.get());
    events.clear();
}

TEST_CASE_METHOD(device_fixture, "a coroutine waits for SQ_DRAINED on its QP",
                 "[async_event_stream]") {
    pd_ptr pd = make_pd(ctx.native_handle());
    cq_ptr cq = make_cq(ctx.native_handle(), 16);
    qp_ptr a = make_rc_qp(pd.get(), cq.get(), cq.get());
    qp_ptr b = make_rc_qp(pd.get(), cq.get(), cq.get());
    connect_rc(ctx.native_handle(), a.get(), b->qp_num);
    connect_rc(ctx.native_handle(), b.get(), a->qp_num);

    ibv_qp_attr sqd{};
    sqd.qp_state = IBV_QPS_SQD;
    sqd.en_sqd_async_notify = 1;
    REQUIRE(ibv_modify_qp(a.get(), &sqd, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY) == 0);

    async_event drained;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            drained = co_await stream.async_next(event_match(event_type::sq_drained, a.get()),
                                                 asio::use_awaitable);
        },
        asio::detached);
    ioc.run_for(5s);
    CHECK(drained.type() == event_type::sq_drained);
    CHECK(drained.qp() == a.get());
    drained.ack();

    event_list more = collect_events(ioc, stream, 500ms);
    CHECK(more.empty()); // exactly one SQ_DRAINED
    more.clear();
    // snippet-begin: teardown
    auto guard = stream.teardown(a.get());
    a.reset(); // ibv_destroy_qp: nothing of the QP is left unacked
    // snippet-end
}

TEST_CASE_METHOD(device_fixture, "two callback waiters share PORT_ERR and PORT_ACTIVE",
                 "[async_event_stream]") {
    link_restorer restore{ctx.native_handle()};
    std::vector<std::pair<int, event_type>> got;
    auto waiter = [&](int id) {
        return [&got, id](rdma_asio::error_code ec, async_event ev) {
            if (!ec)
                got.emplace_back(id, ev.type());
        };
    };
    stream.async_next(waiter(1));
    stream.async_next(waiter(2));
    rdma_asio::testing::set_link(restore.netdev, false);
    ioc.run_for(1500ms);
    ioc.restart();
    rdma_asio::testing::set_link(restore.netdev, true);
    ioc.run_for(3s);
    REQUIRE(got.size() == 2);
    CHECK(got[0] == std::pair{1, event_type::port_err});
    CHECK(got[1] == std::pair{2, event_type::port_active});
    // rxe's second PORT_ACTIVE is neither lost nor given twice: the next reader gets it.
    event_list rest = collect_events(ioc, stream, 1000ms);
    CHECK(count_of(rest, event_type::port_active) == 1);
    CHECK(rest.size() == 1);
}

TEST_CASE_METHOD(device_fixture, "a cancelled wait leaves PORT_ERR to the next wait",
                 "[async_event_stream]") {
    link_restorer restore{ctx.native_handle()};
    asio::cancellation_signal signal;
    rdma_asio::error_code first_ec;
    stream.async_next(asio::bind_cancellation_slot(
        signal.slot(), [&](rdma_asio::error_code ec, async_event) { first_ec = ec; }));
    ioc.poll();
    signal.emit(asio::cancellation_type::terminal);
    ioc.poll();
    CHECK(first_ec == asio::error::operation_aborted);

    rdma_asio::testing::set_link(restore.netdev, false);
    event_list events = collect_events(ioc, stream, 3000ms, [](const event_list& v) {
        return count_of(v, event_type::port_err) == 1;
    });
    CHECK(count_of(events, event_type::port_err) == 1);
}

} // namespace async_event_stream_rxe_test
