// A queue pair's operations and the device's QP error events. rxe never raises
// QP_FATAL, QP_REQ_ERR or QP_ACCESS_ERR (its QPs go to the error state silently),
// so the event is injected into ibv_get_async_event (verbs_faults.hpp) on a real
// QP of rxe0, and a real SQ_DRAINED wakes the reactor to read it.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <catch2/catch.hpp>

#include "event_collector.hpp"
#include "run_until.hpp"
#include "test_device.hpp"
#include "verbs_faults.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

using namespace std::chrono_literals;
namespace faults = rdma_asio::test::faults;
using rdma_asio::errc;

namespace {

struct outcome {
    int calls = 0;
    rdma_asio::error_code ec;
    auto handler() {
        return [this](rdma_asio::error_code e, std::size_t) {
            ++calls;
            ec = e;
        };
    }
};

struct qp_fixture {
    qp_fixture() {
        faults::reset();
        rdma_asio::test::connect_rc_pair(ctx.native_handle(), a.native_handle(), b.native_handle());
    }

    // A real SQ_DRAINED on a fresh connected QP pair: wakes the reactor, which
    // then reads the injected events first.
    void wake() {
        faults::raise_sq_drained(ctx.native_handle(), pd.native_handle(), wake_cq.get(), triggers);
    }

    bool run_until(const std::function<bool()>& done) {
        return rdma_asio::test::run_until(ioc, done, 30s);
    }

    asio::io_context ioc;
    rdma_asio::context ctx{rdma_asio::test::test_device_name()};
    rdma_asio::async_event_stream events{ioc, ctx};
    rdma_asio::protection_domain pd{ctx};
    rdma_asio::completion_channel channel{ioc.get_executor(), ctx};
    rdma_asio::completion_queue cq_a{channel, 64}, cq_b{channel, 64};
    rdma_asio::queue_pair a{pd, cq_a, cq_a}, b{pd, cq_b, cq_b};
    std::vector<std::byte> memory = std::vector<std::byte>(1024);
    rdma_asio::memory_region mr{pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE};
    rdma_asio::test::cq_ptr wake_cq = rdma_asio::test::make_cq(ctx.native_handle(), 16);
    std::vector<rdma_asio::test::qp_ptr> triggers;
};

} // namespace

TEST_CASE_METHOD(qp_fixture,
                 "a QP_FATAL read by the device's event stream ends the queue pair's posted "
                 "receives with queue_pair_fatal, after their flush",
                 "[fault][queue_pair]") {
    a.watch_errors(events);
    b.watch_errors(events);
    std::vector<outcome> receives(3);
    for (std::size_t i = 0; i < receives.size(); ++i)
        a.async_receive(mr.at(i * 64, 64), receives[i].handler());
    // The user's own loop over the device's events: it still gets them.
    const rdma_asio::test::event_type_log log(events);
    const auto& seen = log.types();
    ioc.poll();
    CHECK(receives[0].calls == 0);

    faults::inject_async(ctx.native_handle(),
                         {faults::qp_event(IBV_EVENT_QP_FATAL, a.native_handle())});
    wake();
    REQUIRE(run_until([&] {
        for (auto& r : receives)
            if (r.calls == 0)
                return false;
        return true;
    }));
    for (auto& r : receives) {
        CHECK(r.calls == 1);
        CHECK(r.ec == errc::queue_pair_fatal);
    }
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.front() == rdma_asio::event_type::qp_fatal);
    // Later operations end at once with the same reason.
    outcome later;
    a.async_send(mr.at(0, 8), later.handler());
    REQUIRE(run_until([&] { return later.calls == 1; }));
    CHECK(later.ec == errc::queue_pair_fatal);
    // The other queue pair, watching the same stream, is untouched: the QP_FATAL
    // of another QP on another CQ does not reach it.
    outcome other;
    b.async_receive(mr.at(512, 64), other.handler());
    ioc.poll();
    CHECK(other.calls == 0);
    b.close();
    REQUIRE(run_until([&] { return other.calls == 1; }));
    CHECK(other.ec == asio::error::operation_aborted);
    events.cancel();
    ioc.restart();
    ioc.run_for(100ms);
}

TEST_CASE_METHOD(qp_fixture,
                 "without watch_errors the injected QP_FATAL leaves the queue pair's "
                 "operations to the flush completions",
                 "[fault][queue_pair]") {
    outcome receive;
    a.async_receive(mr.at(0, 64), receive.handler());
    std::optional<rdma_asio::event_type> seen;
    events.async_next([&](rdma_asio::error_code ec, rdma_asio::async_event ev) {
        if (!ec)
            seen = ev.type();
    });
    faults::inject_async(ctx.native_handle(),
                         {faults::qp_event(IBV_EVENT_QP_FATAL, a.native_handle())});
    wake();
    REQUIRE(run_until([&] { return seen.has_value(); }));
    ioc.restart();
    ioc.run_for(100ms);
    // The injected event did not move the QP to the error state (a real one would
    // come with it), so nothing ends the receive until the QP is closed.
    CHECK(receive.calls == 0);
    a.close();
    REQUIRE(run_until([&] { return receive.calls == 1; }));
    CHECK(receive.ec == asio::error::operation_aborted);
}

TEST_CASE_METHOD(qp_fixture, "watch_errors refuses closed objects", "[fault][queue_pair]") {
    rdma_asio::error_code ec;
    rdma_asio::async_event_stream closed(ioc.get_executor());
    a.watch_errors(closed, ec);
    CHECK(ec == asio::error::bad_descriptor);
    rdma_asio::queue_pair none(ioc.get_executor());
    none.watch_errors(events, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(none.watch_errors(events), rdma_asio::system_error);
}
